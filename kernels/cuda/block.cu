// cuda_block — one block per row (any width; cuda_warp hands it rows wider than 2048, or 1024 without
// vectors), the row cached in shared memory when it fits.
// Variant block: see group.cu. The statistics are row_stats.hpp's shifted, corrected three-pass
// scheme (the code the CPU emulation in tests/ verifies). When launch_config says the row fits, it
// is first copied to shared memory as stored (16-byte vectors when rows are aligned; f16/bf16 stay
// 2 bytes, so twice the width fits), and every pass and the output read that copy: DRAM sees x
// once. Rows too wide for shared memory (> ~56K f32 elements on sm_90) are re-read from global
// memory each pass; the L2 (60 MB on H200) holds the rows in flight.
// Add & Norm (residual non-null): first h = x + residual rounded once (row_math.cuh add_rounded), written to
// h and, when the row fits, to the cache; a barrier publishes it, then the passes read h as stored.
// Speed on H200: unmeasured (bench/gpu/run_on_device.sh measures it).
#include "launch.cuh"
#include "row_math.cuh"
#include "row_stats.hpp"

namespace lnorm::cuda {
namespace {

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// This thread's share of a row (row_stats.hpp's Row): accesses t, t + B, t + 2B, ... of kVec
// elements, read from the shared-memory copy or from global memory. Reductions: xor shuffles within
// each warp, then every thread folds the per-warp partials in warp order (deterministic, no atomics);
// sums in f64 (row_stats.hpp says why).
template <class T, int kVec>
struct BlockRow {
  static constexpr int kSlots = 1;
  const T* src;
  std::int64_t accesses;
  double* scratch;  // 32 doubles of shared memory

  template <class F>
  __device__ __forceinline__ void each(F f) const {
    for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
      float e[kVec];
      dev::load_vec<kVec>(src + i * kVec, e);
#pragma unroll
      for (int k = 0; k < kVec; ++k) f(0, e[k]);
    }
  }
  template <class V, class Op>
  __device__ __forceinline__ V fold(V v, Op op) const {
    const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
    __syncthreads();  // the previous reduction's readers are done with scratch
    if ((threadIdx.x & 31) == 0) scratch[warp] = v;
    __syncthreads();
    V t = static_cast<V>(scratch[0]);
    for (int w = 1; w < warps; ++w) t = op(t, static_cast<V>(scratch[w]));
    return t;
  }
  __device__ __forceinline__ double sum(const float* slot) const {
    return fold(warp_sum(slot[0]), [](double a, double b) { return a + b; });
  }
  __device__ __forceinline__ float max(const float* slot) const {
    return fold(warp_max(slot[0]), [](float a, float b) { return fmaxf(a, b); });
  }
  __device__ __forceinline__ bool any(const bool* slot) const {
    return fold(warp_max(slot[0] ? 1.0f : 0.0f), [](float a, float b) { return fmaxf(a, b); }) != 0.0f;
  }
};

// G: how gamma/beta are stored on the device (T, or f32 staged by runtime.cu). centred: LayerNorm
// (false: RMSNorm).
template <class T, class G, int kVec>
__global__ void block_rows(const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ h,
                           const G* __restrict__ gamma, const G* __restrict__ beta, T* __restrict__ y,
                           float* __restrict__ mean, float* __restrict__ rstd, std::int64_t rows, std::int64_t n,
                           float eps, bool row_in_smem, bool centred) {
  extern __shared__ uint4 smem_raw[];  // uint4: 16-byte aligned for vector accesses
  T* cache = reinterpret_cast<T*>(smem_raw);
  __shared__ double scratch[32];
  const std::int64_t accesses = n / kVec;  // kVec divides n whenever kVec > 1 (launch_config)
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    const T* in = xr;  // the norm's input: x, or h for Add & Norm
    if (residual) {    // h = x + residual rounded once, to global memory and the cache; the barrier publishes both
      T* hr = h + row * n;
      const T* rr = residual + row * n;
      for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
        float a[kVec], b[kVec];
        dev::load_vec<kVec>(xr + i * kVec, a);
        dev::load_vec<kVec>(rr + i * kVec, b);
        dev::add_rounded<T, kVec>(a, b);
        dev::store_vec<kVec>(hr + i * kVec, a);  // exact: a holds values of T
        if (row_in_smem) dev::store_vec<kVec>(cache + i * kVec, a);
      }
      __syncthreads();
      in = hr;
    } else if (row_in_smem) {  // one read of x from global memory; published by the first reduction's barrier
      for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) dev::copy_vec<kVec>(cache + i * kVec, xr + i * kVec);
      __syncthreads();
    }
    const T* src = row_in_smem ? cache : in;
    const BlockRow<T, kVec> share{src, accesses, scratch};
    const rowstats::RowResult r = rowstats::row_statistics(share, dev::to_f32(in[0]), n, eps, centred);
    if (threadIdx.x == 0) {
      if (mean) mean[row] = r.mean;
      if (rstd) rstd[row] = r.rstd;
    }
    T* yr = y + row * n;
    for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
      float e[kVec], g[kVec] = {}, b[kVec] = {}, out[kVec];
      dev::load_vec<kVec>(src + i * kVec, e);
      if (gamma) dev::load_vec<kVec>(gamma + i * kVec, g);
      if (beta) dev::load_vec<kVec>(beta + i * kVec, b);
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = rowstats::normalize(e[k], r, gamma, g[k], beta, b[k]);
      dev::store_vec<kVec>(yr + i * kVec, out);
    }
    if (row_in_smem) __syncthreads();  // the next row's copy overwrites the cache
  }
}

template <class T, int kVec>
void launch_with(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  const auto go = [&](auto g_tag) {
    using G = decltype(g_tag);
    const auto kernel = &block_rows<T, G, kVec>;
    // Past 48 KB a kernel must opt in to its dynamic shared memory (sm_90 allows up to 227 KB).
    if (c.smem_bytes > 48 * 1024) {
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(c.smem_bytes)),
            "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
    kernel<<<static_cast<unsigned>(c.grid), c.block_threads, c.smem_bytes, stream>>>(
        static_cast<const T*>(t.x), static_cast<const T*>(t.residual), static_cast<T*>(t.h),
        static_cast<const G*>(p.has_gamma ? t.gamma : nullptr),
        static_cast<const G*>(p.has_beta ? t.beta : nullptr), static_cast<T*>(t.y), static_cast<float*>(t.mean),
        static_cast<float*>(t.rstd), p.rows, p.cols, static_cast<float>(p.eps), c.row_in_smem, p.op.norm == Norm::layernorm);
  };
  if (p.param_dtype == DType::f32) go(float{});  // f32 parameters (for f32 x: the same as T)
  else go(T{});
}

template <class T>
void launch_typed(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  constexpr int kVecElems = 16 / sizeof(T);
  if (c.vec == kVecElems) return launch_with<T, kVecElems>(c, p, t, stream);
  if (c.vec == 1) return launch_with<T, 1>(c, p, t, stream);
  throw_internal("cuda_block: no instance for vector width " + std::to_string(c.vec));
}

}  // namespace

void launch_block(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::f32: return launch_typed<float>(c, p, t, stream);
    case DType::f16: return launch_typed<__half>(c, p, t, stream);
    case DType::bf16: return launch_typed<__nv_bfloat16>(c, p, t, stream);
    case DType::f64: break;
  }
  throw_internal("cuda_block: f64 is not offered");
}

}  // namespace lnorm::cuda
