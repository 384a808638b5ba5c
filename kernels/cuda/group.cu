// cuda_warp — a group of 1..32 lanes of one warp per row, the row held in registers (rows up to 2048
// wide with 16-byte vectors, 1024 without; wider rows go to block.cu: see launch_config.hpp).
//
// Variant block (kernels/cuda/):
//   cuda_naive  naive.cu   one thread per row, textbook two-pass; the baseline, bitwise equal to `naive`
//   cuda_warp   group.cu   THIS FILE: rows up to 2048 wide in registers of a lane group; wider rows go
//                          to block.cu
//   cuda_block  block.cu   one block per row, the row cached in shared memory when it fits
// The statistics are row_math.cuh's shifted, corrected three-pass scheme; the passes after the first
// read registers, so DRAM sees x once and y once. Groups are a power of two of lanes (launch_config
// chooses the fewest that hold the row at one of the compiled register capacities), reduce with xor
// shuffles inside the group, and loop over rows with a 64-bit row index.
// Memory access: lane l of a group of G reads access l, l + G, l + 2G, ... of the row, an access being
// 16 bytes (4 f32 or 8 f16/bf16) when every row starts 16-byte aligned, else one element: either way a
// warp's loads cover consecutive bytes (coalesced). All loads of a row are issued before the first
// reduction, so a lane has up to kElems/kVec independent 16-byte loads in flight.
// Speed on H200: unmeasured (bench/gpu/run_on_device.sh measures it).
#include "launch.cuh"
#include "row_math.cuh"

namespace lnorm::cuda {
namespace {

using dev::RowResult;

__device__ __forceinline__ float group_sum(float v, unsigned mask, int group) {
  for (int o = group / 2; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o);
  return v;
}

__device__ __forceinline__ float group_max(float v, unsigned mask, int group) {
  for (int o = group / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(mask, v, o));
  return v;
}

template <class T, int kVec, int kElems>
__global__ void __launch_bounds__(kGroupBlockThreads)
    group_rows(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta, T* __restrict__ y,
               float* __restrict__ mean, float* __restrict__ rstd, std::int64_t rows, int cols, int group, float eps) {
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
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * group + lane) * kVec;
      if (col < cols) dev::load_vec<kVec>(xr + col, &v[c * kVec]);
    }
    // Pass A: Σ (x − x0), max |x − x0|, and whether any element is NaN or Inf.
    const float x0 = dev::to_f32(xr[0]);
    float s = 0.0f, spread = 0.0f;
    bool bad = false;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if ((c * group + lane) * kVec >= cols) continue;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float e = v[c * kVec + k];
        bad |= !isfinite(e);
        s += e - x0;
        spread = fmaxf(spread, fabsf(e - x0));
      }
    }
    RowResult r;
    if (__any_sync(mask, bad)) {
      r = dev::poisoned_row();
    } else {
      s = group_sum(s, mask, group);
      spread = group_max(spread, mask, group);
      float scale = 1.0f, shift = x0;
      if (dev::out_of_range(spread)) {  // rare: rows near overflow, subnormal spreads
        if (isinf(spread)) {            // x − x0 overflowed: bound it by 2·max |x|
          float big = 0.0f;
#pragma unroll
          for (int c = 0; c < kChunks; ++c) {
            if ((c * group + lane) * kVec >= cols) continue;
#pragma unroll
            for (int k = 0; k < kVec; ++k) big = fmaxf(big, fabsf(v[c * kVec + k]));
          }
          spread = 2.0f * group_max(big, mask, group);
          if (isinf(spread)) spread = 3.4028235e38f;
        }
        scale = dev::range_scale(spread);
        shift = x0 * scale;
        s = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          if ((c * group + lane) * kVec >= cols) continue;
#pragma unroll
          for (int k = 0; k < kVec; ++k) s += v[c * kVec + k] * scale - shift;
        }
        s = group_sum(s, mask, group);
      }
      const float centre = dev::centre_of(shift, s, n);
      // Pass B: the centre's rounding error.
      float cs = 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        if ((c * group + lane) * kVec >= cols) continue;
#pragma unroll
        for (int k = 0; k < kVec; ++k) cs += v[c * kVec + k] * scale - centre;
      }
      const float lo = dev::correction_of(group_sum(cs, mask, group), n);
      // Pass C: Σ d² about the two-float centre.
      float q = 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        if ((c * group + lane) * kVec >= cols) continue;
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float d = (v[c * kVec + k] * scale - centre) - lo;
          q += d * d;
        }
      }
      r = dev::finish(centre, lo, group_sum(q, mask, group), scale, eps, n);
    }
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
      for (int k = 0; k < kVec; ++k) out[k] = dev::normalize(v[c * kVec + k], r, gamma, g[k], beta, b[k]);
      dev::store_vec<kVec>(yr + col, out);
    }
  }
}

template <class T, int kVec, int kElems>
void launch_with(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  group_rows<T, kVec, kElems><<<static_cast<unsigned>(c.grid), c.block_threads, 0, stream>>>(
      static_cast<const T*>(t.x), static_cast<const T*>(p.has_gamma ? t.gamma : nullptr),
      static_cast<const T*>(p.has_beta ? t.beta : nullptr), static_cast<T*>(t.y), static_cast<float*>(t.mean),
      static_cast<float*>(t.rstd), p.rows, static_cast<int>(p.cols), c.threads_per_row, static_cast<float>(p.eps));
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
