// cuda_warp and cuda_block emulated on the CPU: the device kernels' statistics code
// (kernels/cuda/row_stats.hpp, compiled here by the host compiler) run with every lane of a group or
// thread of a block emulated, in the device's element order and reduction order (xor butterflies,
// then per-warp partials folded in warp order), on the launch plan the device would use
// (launch_config.hpp, 16-byte aligned device buffers, an H200's limits). So the algorithm of the
// CUDA kernels is verified on machines without a GPU, and on a GPU the kernels must produce these bits
// (tests/test_cuda_kernels.cpp). What it cannot show: races, launch errors, wrong indexing on the
// device, and the device's own conversions (both round to nearest even; NaN payloads may differ).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../kernels/cuda/launch_config.hpp"
#include "lnorm/params.hpp"
#include "../kernels/cpu/backward_blocks.hpp"  // store_param: dgamma/dbeta rounded once, as reduce_partials
#include "../kernels/cuda/backward_row.hpp"
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
        cuda::rowstats::row_statistics(share, row[0], p.cols, static_cast<float>(p.eps), p.op.norm == Norm::layernorm);
    if (t.mean) static_cast<float*>(t.mean)[r] = s.mean;
    if (t.rstd) static_cast<float*>(t.rstd)[r] = s.rstd;
    for (std::size_t i = 0; i < n; ++i) {
      const float g = params.gamma() ? params.w[i] : 0.0f, b = params.beta() ? params.b[i] : 0.0f;
      y[static_cast<std::size_t>(r) * n + i] = from_float<T>(cuda::rowstats::normalize(row[i], s, p.has_gamma, g, p.has_beta, b));
    }
  }
}

// The backward (kernels/cuda/backward.cu) emulated: a team of `size` threads per chunk of rows (a group's lanes
// or a block's threads, as plan_backward_launch chooses), thread t reading accesses t, t + size, ... of vec
// elements and summing its elements in f64 in that order; the team's sums as GroupTeam/BlockTeam reduce them.
struct HostTeam {
  int size;
  bool block;
  double sum(const double* v) const {
    if (!block) return butterfly(v, size);
    double t = 0;
    for (int w = 0; w < size / 32; ++w) t = w == 0 ? butterfly(v, 32) : t + butterfly(v + 32 * w, 32);
    return t;
  }
  static double butterfly(const double* v, int lanes) {
    double cur[32] = {}, next[32] = {};  // zeroed: g++ cannot see that lanes >= 1
    for (int l = 0; l < lanes; ++l) cur[l] = v[l];
    for (int o = lanes / 2; o > 0; o /= 2) {
      for (int l = 0; l < lanes; ++l) next[l] = cur[l] + cur[l ^ o];
      for (int l = 0; l < lanes; ++l) cur[l] = next[l];
    }
    return cur[0];
  }
};

template <class T>
void run_backward_typed(cuda::Algorithm algorithm, const Problem& p, const Tensors& t) {
  namespace br = cuda::bwdrow;
  const cuda::LaunchConfig c = cuda::plan_backward_launch(algorithm, p.rows, p.cols, p.dtype, true, cuda::DeviceLimits{});
  const bool block = c.strategy == cuda::Strategy::block_per_row;
  const HostTeam team{block ? c.block_threads : c.threads_per_row, block};
  const int size = team.size, vec = c.vec;
  const std::int64_t n = p.cols, accesses = n / vec;
  const bool is_centred = p.op.norm == Norm::layernorm;
  const cpu::StagedParams<double> staged = cpu::stage_params<double>(p, t);  // as cuda_kernels.cpp stages w
  const double* w = staged.gamma();
  const T* x = static_cast<const T*>(t.x);
  const T* dy = static_cast<const T*>(t.dy);
  T* dx = static_cast<T*>(t.dx);
  const std::int64_t chunks = cuda::backward_chunks(p.rows);
  const bool want_g = p.has_gamma && t.dgamma, want_b = p.has_beta && t.dbeta;
  std::vector<double> pg(want_g ? static_cast<std::size_t>(chunks * n) : 0), pb(want_b ? static_cast<std::size_t>(chunks * n) : 0);
  std::vector<double> slot(static_cast<std::size_t>(size)), q(slot.size()), g(slot.size()), gd(slot.size());
  // f(thread, column) for each element of each thread, in the thread's order.
  const auto each = [&](auto f) {
    for (int th = 0; th < size; ++th)
      for (std::int64_t i = th; i < accesses; i += size)
        for (int k = 0; k < vec; ++k) f(th, i * vec + k);
  };
  for (std::int64_t r = 0; r < p.rows; ++r) {
    const std::int64_t at = r * n, chunk = r / cuda::kBackwardChunkRows;
    const auto xf = [&](std::int64_t col) { return to_float(x[at + col]); };
    const auto dyf = [&](std::int64_t col) { return to_float(dy[at + col]); };
    const double x0 = is_centred ? static_cast<double>(xf(0)) : 0.0;
    std::fill(slot.begin(), slot.end(), 0.0);
    each([&](int th, std::int64_t col) { br::add_a(slot[static_cast<std::size_t>(th)], xf(col), x0); });
    const double s = team.sum(slot.data());
    const double m = br::mean_less_x0(s, n, is_centred);
    std::vector<br::SumsB> b(slot.size());
    each([&](int th, std::int64_t col) { br::add_b(b[static_cast<std::size_t>(th)], xf(col), dyf(col), w ? w[col] : 1.0, x0, m); });
    for (std::size_t i = 0; i < slot.size(); ++i) q[i] = b[i].q, g[i] = b[i].g, gd[i] = b[i].gd;
    const br::SumsB total{team.sum(q.data()), team.sum(g.data()), team.sum(gd.data())};
    br::Coefs co = br::coefs(x0, m, s, total, n, static_cast<float>(p.eps), is_centred);
    for (std::size_t i = 0; i < slot.size(); ++i) slot[i] = br::dominates(b[i].d2max, co) ? 1.0 : 0.0;
    if (team.sum(slot.data()) > 0) {  // pass B2
      std::vector<br::SumsRest> rest(slot.size());
      each([&](int th, std::int64_t col) { br::add_rest(rest[static_cast<std::size_t>(th)], xf(col), dyf(col), w ? w[col] : 1.0, co); });
      for (std::size_t i = 0; i < slot.size(); ++i) q[i] = rest[i].q, g[i] = rest[i].t;
      br::with_rest(co, br::SumsRest{team.sum(q.data()), team.sum(g.data())});
    }
    for (std::int64_t col = 0; col < n; ++col) {
      double xhat = 0;
      dx[at + col] = from_double<T>(br::dx_value(xf(col), dyf(col), w ? w[col] : 1.0, co, xhat));
      if (want_g) pg[static_cast<std::size_t>(chunk * n + col)] += static_cast<double>(dyf(col)) * xhat;
      if (want_b) pb[static_cast<std::size_t>(chunk * n + col)] += static_cast<double>(dyf(col));
    }
  }
  // reduce_partials: each column's chunks in chunk order, rounded once to the parameters' dtype.
  for (int which = 0; which < 2; ++which) {
    const std::vector<double>& part = which == 0 ? pg : pb;
    if (part.empty()) continue;
    for (std::int64_t col = 0; col < n; ++col) {
      double sum = part[static_cast<std::size_t>(col)];
      for (std::int64_t ch = 1; ch < chunks; ++ch) sum += part[static_cast<std::size_t>(ch * n + col)];
      cpu::store_param(p.param_dtype, which == 0 ? t.dgamma : t.dbeta, col, sum);
    }
  }
}

template <cuda::Algorithm kAlgorithm>
void backward(const Problem& p, const Tensors& t) {
  if (p.rows == 0 || p.cols == 0) return;
  switch (p.dtype) {
    case DType::f32: return run_backward_typed<float>(kAlgorithm, p, t);
    case DType::f16: return run_backward_typed<f16>(kAlgorithm, p, t);
    case DType::bf16: return run_backward_typed<bf16>(kAlgorithm, p, t);
    case DType::f64: return;  // not offered
  }
}

// The forward, Add & Norm's add fused as on the device.
template <cuda::Algorithm kAlgorithm>
void forward(const Problem& p, const Tensors& t) {
  switch (p.dtype) {
    case DType::f32: return run_typed<float>(kAlgorithm, p, t);
    case DType::f16: return run_typed<f16>(kAlgorithm, p, t);
    case DType::bf16: return run_typed<bf16>(kAlgorithm, p, t);
    case DType::f64: return;  // not offered
  }
}

// As cuda_kernels.cpp declares them (the residual in x's dtype), without the device check.
inline constexpr Takes kTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms,
                              .backward_norms = kBothNorms, .prologues = kWithAdd, .fuses_add = true};
inline const KernelInfo kWarp{"cuda_warp", "cuda_warp emulated on the CPU (tests/cuda_emulation.hpp)", kTakes,
                              &forward<cuda::Algorithm::warp>, &backward<cuda::Algorithm::warp>};
inline const KernelInfo kBlock{"cuda_block", "cuda_block emulated on the CPU (tests/cuda_emulation.hpp)", kTakes,
                               &forward<cuda::Algorithm::block>, &backward<cuda::Algorithm::block>};

}  // namespace lnorm::testing::cuda_emulation
