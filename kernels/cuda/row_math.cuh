// Device-side pieces shared by the CUDA kernels: storage conversions, 16-byte vector accesses, and
// the statistics both register- and shared-memory kernels compute (CUDA-only header).
//
// The statistics of cuda_warp and cuda_block: a shifted, corrected three-pass scheme on a row that
// stays on chip (registers or shared memory), so extra passes cost arithmetic, not DRAM traffic.
//   A: s = Σ (x − x0)            centre = x0 + s/n      (f64 add, rounded once to f32)
//   B: c = Σ (x − centre)        lo = c/n               (centre's rounding error: Chan, Golub & LeVeque)
//   C: q = Σ ((x − centre) − lo)²                       var = q/n
//   y = ((x − centre) − lo) · rstd · γ + β,   rstd = 1/sqrt(var + eps) in f64, rounded once
// x − centre is exact on offset rows (Sterbenz), so no kappa term; a constant row gives s = 0,
// centre = x0, every difference 0 and y = β exactly; on exact-statistics rows (every partial sum
// representable) centre is the mean and c = 0, so the mean is exact. This is kernels/cpu/avx2.cpp's
// scheme with a third pass instead of var = q/n − lo² (no cancellation when x0 is an outlier).
// Range, NaN and Inf follow kernels/cpu/welford.cpp and scalar_rows.hpp exactly:
//   - a NaN or Inf anywhere in the row makes y, mean and rstd NaN for that row;
//   - when max |x − x0| leaves [2^-40, 2^40] (squares would overflow or underflow f32) the row is
//     redone on x·2^k (exact), the power chosen from max |x − x0| (or 2·max |x| when that overflows),
//     with rstd = 1/sqrt(var·2^-2k + eps) reported in the row's own units.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace lnorm::cuda::dev {

// As welford.cpp's kSafeMax/kSafeMin for f32: squares of the spread summed over 2^31 elements stay
// finite and normal.
inline constexpr float kSafeMax = 0x1p40f, kSafeMin = 0x1p-40f;

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round to nearest even, like lnorm/half.hpp (NaN payloads may differ; NaN stays NaN).
template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// kVec consecutive elements at p (16-byte aligned when kVec > 1) to/from f32.
template <int kVec, class T>
__device__ __forceinline__ void load_vec(const T* p, float* out) {
  if constexpr (kVec == 1) {
    out[0] = to_f32(p[0]);
  } else {
    static_assert(kVec * sizeof(T) == 16, "vector accesses are 16 bytes");
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = to_f32(e[k]);
  }
}

template <int kVec, class T>
__device__ __forceinline__ void store_vec(T* p, const float* in) {
  if constexpr (kVec == 1) {
    p[0] = from_f32<T>(in[0]);
  } else {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) e[k] = from_f32<T>(in[k]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
}

// kVec raw elements from src to dst (both 16-byte aligned when kVec > 1): the shared-memory cache.
template <int kVec, class T>
__device__ __forceinline__ void copy_vec(T* dst, const T* src) {
  if constexpr (kVec == 1) dst[0] = src[0];
  else *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

// The exact power of two that brings a spread of raw_max into [1, 2), kept a normal f32
// (as welford.cpp: subnormal rows need up to 2^149, clamped to 2^126).
__device__ __forceinline__ float range_scale(float raw_max) {
  const int e = ilogbf(raw_max);
  return ldexpf(1.0f, e > 126 ? -126 : e < -126 ? 126 : -e);
}

__device__ __forceinline__ bool out_of_range(float max_abs) {
  return max_abs != 0.0f && !(max_abs >= kSafeMin && max_abs <= kSafeMax);
}

// centre = shift + s/n, rounded once to f32.
__device__ __forceinline__ float centre_of(float shift, float s, std::int64_t n) {
  return static_cast<float>(static_cast<double>(shift) + static_cast<double>(s) / static_cast<double>(n));
}

struct RowResult {
  float centre, lo;  // the two-float centre, in the scaled domain
  float scale;       // x is used as x·scale
  float rstd_y;      // multiplies (x·scale − centre) − lo
  float mean, rstd;  // what is reported, in the row's own units
};

__device__ __forceinline__ float correction_of(float c, std::int64_t n) {
  return static_cast<float>(static_cast<double>(c) / static_cast<double>(n));
}

// Finishes the statistics from pass C's q (see the header). eps·scale² and rstd are formed in f64:
// no overflow for scales up to 2^126, and rstd is rounded once.
__device__ __forceinline__ RowResult finish(float centre, float lo, float q, float scale, float eps, std::int64_t n) {
  const double var = static_cast<double>(q) / static_cast<double>(n);
  const double s = scale;
  const double rs = 1.0 / sqrt(var + static_cast<double>(eps) * s * s);
  RowResult r;
  r.centre = centre;
  r.lo = lo;
  r.scale = scale;
  r.rstd_y = static_cast<float>(rs);
  r.rstd = static_cast<float>(rs * s);
  r.mean = static_cast<float>((static_cast<double>(centre) + static_cast<double>(lo)) / s);
  return r;
}

__device__ __forceinline__ RowResult poisoned_row() {
  const float nan = __int_as_float(0x7fc00000);
  return RowResult{0.0f, 0.0f, 1.0f, nan, nan, nan};
}

// One output element: ((x·scale − centre) − lo)·rstd·γ + β, γ/β applied when present.
__device__ __forceinline__ float normalize(float x, const RowResult& r, bool has_gamma, float g, bool has_beta, float b) {
  float v = ((x * r.scale - r.centre) - r.lo) * r.rstd_y;
  if (has_gamma) v *= g;
  if (has_beta) v += b;
  return v;
}

}  // namespace lnorm::cuda::dev
