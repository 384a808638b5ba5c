// cuda_warp — a group of 1..32 lanes of one warp per row, the row held in registers (rows up to 2048
// wide with 16-byte vectors, 1024 without; wider rows go to block.cu: see launch_config.hpp).
//
// Variant block (kernels/cuda/):
//   cuda_naive  naive.cu   one thread per row, textbook two-pass; the baseline, bitwise equal to `naive`
//   cuda_warp   group.cu   THIS FILE: rows up to 2048 wide in registers of a lane group; wider rows go
//                          to block.cu
//   cuda_block  block.cu   one block per row, the row cached in shared memory when it fits
// The statistics are row_stats.hpp's shifted, corrected three-pass scheme (the same code the CPU
// emulation in tests/ verifies); the passes after the first
// read registers, so DRAM sees x once and y once. Groups are a power of two of lanes (launch_config
// chooses the fewest that hold the row at one of the compiled register capacities), reduce with xor
// shuffles inside the group, and loop over rows with a 64-bit row index.
// Add & Norm (residual non-null): each lane adds its accesses of the residual to x's as they arrive, rounds
// the sum to T once (row_math.cuh add_rounded), writes h and keeps it in registers: the norm reads h as stored,
// and DRAM sees x, residual, h and y once each.
// Memory access: lane l of a group of G reads access l, l + G, l + 2G, ... of the row, an access being
// 16 bytes (4 f32 or 8 f16/bf16) when every row starts 16-byte aligned, else one element: either way a
// warp's loads cover consecutive bytes (coalesced). All loads of a row are issued before the first
// reduction, so a lane has up to kElems/kVec independent 16-byte loads in flight.
// Speed on H200: unmeasured (bench/gpu/run_on_device.sh measures it).
#include "launch.cuh"
#include "row_math.cuh"
#include "row_stats.hpp"

namespace lnorm::cuda {
namespace {

// This lane's share of a row held in registers (row_stats.hpp's Row): lane l of a group of G holds
// accesses l, l + G, l + 2G, ... of kVec elements each; reductions are xor shuffles within the group.
template <int kVec, int kElems>
struct GroupRow {
  static constexpr int kSlots = 1;
  static constexpr int kChunks = kElems / kVec;
  const float* v;  // kElems registers (after inlining)
  int lane, group, cols;
  unsigned mask;   // this group's lanes

  template <class F>
  __device__ __forceinline__ void each(F f) const {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if ((c * group + lane) * kVec >= cols) continue;
#pragma unroll
      for (int k = 0; k < kVec; ++k) f(0, v[c * kVec + k]);
    }
  }
  __device__ __forceinline__ double sum(const float* slot) const {
    double x = slot[0];
    for (int o = group / 2; o > 0; o /= 2) x += __shfl_xor_sync(mask, x, o);
    return x;
  }
  __device__ __forceinline__ float max(const float* slot) const {
    float x = slot[0];
    for (int o = group / 2; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(mask, x, o));
    return x;
  }
  __device__ __forceinline__ bool any(const bool* slot) const { return __any_sync(mask, slot[0]); }
};

// G: how gamma/beta are stored on the device (T, or f32 staged by runtime.cu: f32 parameters beside
// 16-bit x, or w = C + gamma). centred: LayerNorm (false: RMSNorm).
template <class T, class G, int kVec, int kElems>
__global__ void __launch_bounds__(kGroupBlockThreads)
    group_rows(const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ h, const G* __restrict__ gamma,
               const G* __restrict__ beta, T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
               std::int64_t rows, int cols, int group, float eps, bool centred) {
  constexpr int kChunks = kElems / kVec;
  static_assert(kChunks * kVec == kElems && kChunks > 0, "a lane holds whole accesses");
  const int lane = static_cast<int>(threadIdx.x) & (group - 1);
  const int warp_lane = static_cast<int>(threadIdx.x) & 31;
  // Shuffles name only this group's lanes: groups of one warp may leave the row loop at different times.
  const unsigned mask = group == 32 ? 0xffffffffu : ((1u << group) - 1u) << (warp_lane & ~(group - 1));
  const std::int64_t groups_per_block = blockDim.x / group;
  const std::int64_t n = cols;

  for (std::int64_t row = blockIdx.x * groups_per_block + threadIdx.x / group; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * groups_per_block) {
    const T* xr = x + row * n;
    float v[kElems];
    // Every load of the row is issued before the first reduction.
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * group + lane) * kVec;
      if (col < cols) dev::load_vec<kVec>(xr + col, &v[c * kVec]);
    }
    float shift = dev::to_f32(xr[0]);
    if (residual) {  // h = x + residual rounded once; the row is h from here on
      const T* rr = residual + row * n;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int col = (c * group + lane) * kVec;
        if (col >= cols) continue;
        float rv[kVec];
        dev::load_vec<kVec>(rr + col, rv);
        dev::add_rounded<T, kVec>(&v[c * kVec], rv);
        dev::store_vec<kVec>(h + row * n + col, &v[c * kVec]);  // exact: v holds values of T
      }
      const float first = dev::to_f32(rr[0]);
      dev::add_rounded<T, 1>(&shift, &first);  // h[0], as every lane of the group computes it
    }
    const GroupRow<kVec, kElems> share{v, lane, group, cols, mask};
    const rowstats::RowResult r = rowstats::row_statistics(share, shift, n, eps, centred);
    if (lane == 0) {
      if (mean) mean[row] = r.mean;
      if (rstd) rstd[row] = r.rstd;
    }
    T* yr = y + row * n;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * group + lane) * kVec;
      if (col >= cols) continue;
      float g[kVec] = {}, b[kVec] = {}, out[kVec];
      if (gamma) dev::load_vec<kVec>(gamma + col, g);
      if (beta) dev::load_vec<kVec>(beta + col, b);
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = rowstats::normalize(v[c * kVec + k], r, gamma, g[k], beta, b[k]);
      dev::store_vec<kVec>(yr + col, out);
    }
  }
}

template <class T, int kVec, int kElems>
void launch_with(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  const auto go = [&](auto g_tag) {
    using G = decltype(g_tag);
    group_rows<T, G, kVec, kElems><<<static_cast<unsigned>(c.grid), c.block_threads, 0, stream>>>(
        static_cast<const T*>(t.x), static_cast<const T*>(t.residual), static_cast<T*>(t.h),
        static_cast<const G*>(p.has_gamma ? t.gamma : nullptr),
        static_cast<const G*>(p.has_beta ? t.beta : nullptr), static_cast<T*>(t.y), static_cast<float*>(t.mean),
        static_cast<float*>(t.rstd), p.rows, static_cast<int>(p.cols), c.threads_per_row, static_cast<float>(p.eps),
        p.op.norm == Norm::layernorm);
  };
  if (p.param_dtype == DType::f32) go(float{});  // f32 parameters (for f32 x: the same as T)
  else go(T{});
}

template <class T, int kVec>
void launch_vec(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  switch (c.elems_per_lane) {
    case 8: return launch_with<T, kVec, 8>(c, p, t, stream);
    case 16: return launch_with<T, kVec, 16>(c, p, t, stream);
    case 32: return launch_with<T, kVec, 32>(c, p, t, stream);
    case 64:
      if constexpr (kVec > 1) return launch_with<T, kVec, 64>(c, p, t, stream);
      break;
  }
  throw_internal("cuda_warp: no instance for " + std::to_string(c.elems_per_lane) + " elements per lane");
}

template <class T>
void launch_typed(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  constexpr int kVecElems = 16 / sizeof(T);
  if (c.vec == kVecElems) return launch_vec<T, kVecElems>(c, p, t, stream);
  if (c.vec == 1) return launch_vec<T, 1>(c, p, t, stream);
  throw_internal("cuda_warp: no instance for vector width " + std::to_string(c.vec));
}

}  // namespace

void launch_group(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::f32: return launch_typed<float>(c, p, t, stream);
    case DType::f16: return launch_typed<__half>(c, p, t, stream);
    case DType::bf16: return launch_typed<__nv_bfloat16>(c, p, t, stream);
    case DType::f64: break;
  }
  throw_internal("cuda_warp: f64 is not offered");
}

}  // namespace lnorm::cuda
