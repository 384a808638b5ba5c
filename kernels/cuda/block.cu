// cuda_block — one block per row (any width; cuda_warp hands it rows wider than 4096), the row cached
// in shared memory when it fits.
// Variant block: see group.cu. The statistics are row_math.cuh's shifted, corrected three-pass
// scheme. Pass A reads the row from global memory (16-byte vectors when rows are aligned) and, when
// launch_config says it fits, keeps a raw copy in shared memory (f16/bf16 stay 2 bytes: twice the
// width fits); passes B, C and the output pass read that copy, so DRAM sees x once. Rows too wide for
// shared memory (> ~56K f32 elements on sm_90) are re-read from global memory each pass; the L2
// (60 MB on H200) holds the rows in flight. Block reductions: xor shuffles within each warp, then
// every thread folds the per-warp partials in warp order (deterministic, no atomics).
// Speed on H200: unmeasured (bench/gpu/run_on_device.sh measures it).
#include "launch.cuh"
#include "row_math.cuh"

namespace lnorm::cuda {
namespace {

using dev::RowResult;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum and max of (a, b); every thread gets the result. scratch: 64 floats.
__device__ void block_sum_max(float& a, float& b, float* scratch) {
  a = warp_sum(a);
  b = warp_max(b);
  const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();  // the previous reduction's readers are done with scratch
  if ((threadIdx.x & 31) == 0) {
    scratch[warp] = a;
    scratch[32 + warp] = b;
  }
  __syncthreads();
  a = 0.0f;
  b = 0.0f;
  for (int w = 0; w < warps; ++w) {
    a += scratch[w];
    b = fmaxf(b, scratch[32 + w]);
  }
}

__device__ float block_sum(float a, float* scratch) {
  float unused = 0.0f;
  block_sum_max(a, unused, scratch);
  return a;
}

template <class T, int kVec>
__global__ void block_rows(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                           T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd, std::int64_t rows,
                           std::int64_t n, float eps, bool row_in_smem) {
  extern __shared__ uint4 smem_raw[];  // uint4: 16-byte aligned for vector accesses
  T* cache = reinterpret_cast<T*>(smem_raw);
  __shared__ float scratch[64];
  const std::int64_t accesses = n / kVec;  // kVec divides n whenever kVec > 1 (launch_config)
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    const T* src = row_in_smem ? cache : xr;  // where passes B, C and the output read the row
    // Pass A: Σ (x − x0), max |x − x0|, NaN/Inf; fills the cache.
    const float x0 = dev::to_f32(xr[0]);
    float s = 0.0f, spread = 0.0f;
    bool bad = false;
    for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
      float e[kVec];
      dev::load_vec<kVec>(xr + i * kVec, e);
      if (row_in_smem) dev::copy_vec<kVec>(cache + i * kVec, xr + i * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        bad |= !isfinite(e[k]);
        s += e[k] - x0;
        spread = fmaxf(spread, fabsf(e[k] - x0));
      }
    }
    // NaN/Inf rides along as a max: 1 when any thread saw one.
    float bad_any = bad ? 1.0f : 0.0f;
    block_sum_max(s, spread, scratch);  // also publishes the cache (its __syncthreads)
    {
      float unused = 0.0f;
      block_sum_max(unused, bad_any, scratch);
    }
    RowResult r;
    if (bad_any != 0.0f) {
      r = dev::poisoned_row();
    } else {
      float scale = 1.0f, shift = x0;
      if (dev::out_of_range(spread)) {  // rare: rows near overflow, subnormal spreads
        if (isinf(spread)) {            // x − x0 overflowed: bound it by 2·max |x|
          float big = 0.0f, unused = 0.0f;
          for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
            float e[kVec];
            dev::load_vec<kVec>(src + i * kVec, e);
#pragma unroll
            for (int k = 0; k < kVec; ++k) big = fmaxf(big, fabsf(e[k]));
          }
          block_sum_max(unused, big, scratch);
          spread = 2.0f * big;
          if (isinf(spread)) spread = 3.4028235e38f;
        }
        scale = dev::range_scale(spread);
        shift = x0 * scale;
        s = 0.0f;
        for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
          float e[kVec];
          dev::load_vec<kVec>(src + i * kVec, e);
#pragma unroll
          for (int k = 0; k < kVec; ++k) s += e[k] * scale - shift;
        }
        s = block_sum(s, scratch);
      }
      const float centre = dev::centre_of(shift, s, n);
      float cs = 0.0f;  // pass B: the centre's rounding error
      for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
        float e[kVec];
        dev::load_vec<kVec>(src + i * kVec, e);
#pragma unroll
        for (int k = 0; k < kVec; ++k) cs += e[k] * scale - centre;
      }
      const float lo = dev::correction_of(block_sum(cs, scratch), n);
      float q = 0.0f;  // pass C: Σ d² about the two-float centre
      for (std::int64_t i = threadIdx.x; i < accesses; i += blockDim.x) {
        float e[kVec];
        dev::load_vec<kVec>(src + i * kVec, e);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float d = (e[k] * scale - centre) - lo;
          q += d * d;
        }
      }
      r = dev::finish(centre, lo, block_sum(q, scratch), scale, eps, n);
    }
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
      for (int k = 0; k < kVec; ++k) out[k] = dev::normalize(e[k], r, gamma, g[k], beta, b[k]);
      dev::store_vec<kVec>(yr + i * kVec, out);
    }
    if (row_in_smem) __syncthreads();  // the next row's pass A overwrites the cache
  }
}

template <class T, int kVec>
void launch_with(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  const auto kernel = &block_rows<T, kVec>;
  // Past 48 KB a kernel must opt in to its dynamic shared memory (sm_90 allows up to 227 KB).
  if (c.smem_bytes > 48 * 1024) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(c.smem_bytes)),
          "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
  kernel<<<static_cast<unsigned>(c.grid), c.block_threads, c.smem_bytes, stream>>>(
      static_cast<const T*>(t.x), static_cast<const T*>(p.has_gamma ? t.gamma : nullptr),
      static_cast<const T*>(p.has_beta ? t.beta : nullptr), static_cast<T*>(t.y), static_cast<float*>(t.mean),
      static_cast<float*>(t.rstd), p.rows, p.cols, static_cast<float>(p.eps), c.row_in_smem);
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
