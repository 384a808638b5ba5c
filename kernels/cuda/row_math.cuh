// Device-side pieces shared by the CUDA kernels: storage conversions and 16-byte vector accesses
// (CUDA-only header). The statistics are in row_stats.hpp, shared with the host emulation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace lnorm::cuda::dev {

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

// kVec consecutive elements at p (16-byte aligned when kVec > 1) to f32: one 16-byte access, or two for
// f32 parameters beside 16-bit x (kVec = 8 floats).
template <int kVec, class T>
__device__ __forceinline__ void load_vec(const T* p, float* out) {
  if constexpr (kVec == 1) {
    out[0] = to_f32(p[0]);
  } else {
    static_assert((kVec * sizeof(T)) % 16 == 0, "vector accesses are whole 16-byte words");
    constexpr int kPerWord = static_cast<int>(16 / sizeof(T));
#pragma unroll
    for (int w = 0; w < kVec / kPerWord; ++w) {
      const uint4 raw = reinterpret_cast<const uint4*>(p)[w];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int k = 0; k < kPerWord; ++k) out[w * kPerWord + k] = to_f32(e[k]);
    }
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

// Add & Norm's sum in place: v[k] = x + residual rounded once to T (the f32 sum, then T's rounding: correctly
// rounded, since f16/bf16 values are exact in f32 and 24 ≥ 2p + 2 — docs/DESIGN.md "Ops"), as f32 again.
template <class T, int kVec>
__device__ __forceinline__ void add_rounded(float* v, const float* r) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = to_f32(from_f32<T>(__fadd_rn(v[k], r[k])));
}

// kVec raw elements from src to dst (both 16-byte aligned when kVec > 1): the shared-memory cache.
template <int kVec, class T>
__device__ __forceinline__ void copy_vec(T* dst, const T* src) {
  if constexpr (kVec == 1) dst[0] = src[0];
  else *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

}  // namespace lnorm::cuda::dev
