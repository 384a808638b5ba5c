// cuda_warp and cuda_block emulated on the CPU: the device kernels' statistics code
// (kernels/cuda/row_stats.hpp, compiled here by the host compiler) run with every lane of a group or
// thread of a block emulated, in the device's element order and reduction order (xor butterflies,
// then per-warp partials folded in warp order), on the launch plan the device would use
// (launch_config.hpp, 16-byte aligned device buffers, an H200's limits). So the algorithm of the
// CUDA kernels is verified on machines without a GPU, and on a GPU the kernels must produce these bits
// (tests/test_cuda_kernels.cpp). What it cannot show: races, launch errors, wrong indexing on the
// device, and the device's own conversions (both round to nearest even; NaN payloads may differ).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "../kernels/cuda/launch_config.hpp"
#include "lnorm/params.hpp"
#include "../kernels/cuda/row_stats.hpp"
#include "lnorm/half.hpp"
#include "lnorm/kernel.hpp"

namespace lnorm::testing::cuda_emulation {

// The threads that share one row (a group's lanes or a block's threads), as row_stats.hpp's Row.
struct HostRow {
  static constexpr int kSlots = cuda::kBlockMaxThreads;
  const float* x;  // the row, converted to f32
  std::int64_t cols;
  int threads, vec;
  bool block;

  template <class F>
  void each(F f) const {
    for (int t = 0; t < threads; ++t) {
      if (block) {  // block.cu: accesses t, t + B, ...
        for (std::int64_t i = t; i < cols / vec; i += threads)
          for (int k = 0; k < vec; ++k) f(t, x[i * vec + k]);
      } else {  // group.cu: accesses t, t + G, ... (chunks past the row are skipped, in order)
        for (std::int64_t c = 0;; ++c) {
          const std::int64_t col = (c * threads + t) * vec;
          if (col >= cols) break;
          for (int k = 0; k < vec; ++k) f(t, x[col + k]);
        }
      }
    }
  }
  // lanes lanes of values, reduced as __shfl_xor_sync butterflies do: lane l takes op(v_l, v_{l^o}).
  template <class V, class Op>
  static V butterfly(const float* v, int lanes, Op op) {
    V cur[32] = {}, next[32] = {};
    for (int l = 0; l < lanes; ++l) cur[l] = static_cast<V>(v[l]);
    for (int o = lanes / 2; o > 0; o /= 2) {
      for (int l = 0; l < lanes; ++l) next[l] = op(cur[l], cur[l ^ o]);
      for (int l = 0; l < lanes; ++l) cur[l] = next[l];
    }
    return cur[0];
  }
  template <class V, class Op>
  V reduce(const float* slot, Op op) const {
    if (!block) return butterfly<V>(slot, threads, op);
    V t = 0;
    for (int w = 0; w < threads / 32; ++w) {
      const V warp = butterfly<V>(slot + 32 * w, 32, op);
      t = w == 0 ? warp : op(t, warp);
    }
    return t;
  }
  // Sums in f64, maxima in f32, as group.cu and block.cu.
  double sum(const float* slot) const { return reduce<double>(slot, [](double a, double b) { return a + b; }); }
  float max(const float* slot) const { return reduce<float>(slot, [](float a, float b) { return fmaxf(a, b); }); }
  bool any(const bool* slot) const {
    float f[kSlots];
    for (int t = 0; t < threads; ++t) f[t] = slot[t] ? 1.0f : 0.0f;
    return max(f) != 0.0f;
  }
};

template <class T>
void run_typed(cuda::Algorithm algorithm, const Problem& p, const Tensors& t) {
  const cuda::LaunchConfig c = cuda::plan_launch(algorithm, p.rows, p.cols, p.dtype, true, cuda::DeviceLimits{});
  const T* x = static_cast<const T*>(t.x);
  // Parameters as the device reads them: in x's dtype, or staged in f32 by runtime.cu (f32 gamma/beta, or
  // w = C + gamma): stage_params<float> either way gives the values the device multiplies by.
  const cpu::StagedParams<float> params = cpu::stage_params<float>(p, t);
  T* y = static_cast<T*>(t.y);
  const auto n = static_cast<std::size_t>(p.cols);
  std::vector<float> row(n);
  // Add & Norm: h = x + residual (x's dtype), the f32 sum rounded once to T, as row_math.cuh's add_rounded.
  const T* res = static_cast<const T*>(t.residual);
  T* h = static_cast<T*>(t.h);
  for (std::int64_t r = 0; r < p.rows; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = static_cast<std::size_t>(r) * n + i;
      row[i] = to_float(x[at]);
      if (res) {
        h[at] = from_float<T>(row[i] + to_float(res[at]));
        row[i] = to_float(h[at]);
      }
    }
    const bool block = c.strategy == cuda::Strategy::block_per_row;
    const HostRow share{row.data(), p.cols, block ? c.block_threads : c.threads_per_row, c.vec, block};
    const cuda::rowstats::RowResult s =
        cuda::rowstats::row_statistics(share, row[0], p.cols, static_cast<float>(p.eps), centred(p.op));
    if (t.mean) static_cast<float*>(t.mean)[r] = s.mean;
    if (t.rstd) static_cast<float*>(t.rstd)[r] = s.rstd;
    for (std::size_t i = 0; i < n; ++i) {
      const float g = params.gamma() ? params.w[i] : 0.0f, b = params.beta() ? params.b[i] : 0.0f;
      y[static_cast<std::size_t>(r) * n + i] = from_float<T>(cuda::rowstats::normalize(row[i], s, p.has_gamma, g, p.has_beta, b));
    }
  }
}

// As cuda_kernels.cpp's why_not, without the device check.
inline std::optional<std::string> residual_in_x_dtype(const Problem& p) {
  if (fused_add(p.op) && p.residual_dtype != p.dtype) return "the CUDA kernels take the residual in x's dtype";
  return std::nullopt;
}

template <cuda::Algorithm kAlgorithm>
void run(const Problem& p, const Tensors& t) {
  switch (p.dtype) {
    case DType::f32: return run_typed<float>(kAlgorithm, p, t);
    case DType::f16: return run_typed<f16>(kAlgorithm, p, t);
    case DType::bf16: return run_typed<bf16>(kAlgorithm, p, t);
    case DType::f64: return;  // not offered
  }
}

inline const KernelInfo kWarp{"cuda_warp", "cuda_warp emulated on the CPU (tests/cuda_emulation.hpp)",
                              DTypeSet{DType::f32, DType::f16, DType::bf16}, &residual_in_x_dtype, &run<cuda::Algorithm::warp>,
                              false, OpSet{Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm}};
inline const KernelInfo kBlock{"cuda_block", "cuda_block emulated on the CPU (tests/cuda_emulation.hpp)",
                               DTypeSet{DType::f32, DType::f16, DType::bf16}, &residual_in_x_dtype, &run<cuda::Algorithm::block>,
                               false, OpSet{Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm}};

}  // namespace lnorm::testing::cuda_emulation
