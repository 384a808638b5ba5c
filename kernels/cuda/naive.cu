// cuda_naive — one thread per row, the textbook two-pass LayerNorm of kernels/cpu/naive.cpp.
//   pass 1: mean = (Σ x) / n            sequential f32 sum
//   pass 2: var  = (Σ (x − mean)²) / n   centred
//   y = (x − mean) · rstd · γ + β,  rstd = 1/sqrt(var + eps)   (f32, as scalar_rows.hpp)
// The plain baseline: every operation is an explicitly rounded intrinsic (__fadd_rn, ...), so nvcc
// cannot contract into FMAs and the result is bitwise that of the CPU `naive` kernel — same
// weaknesses too (budgets.toml lists them as expected failures). Loads are uncoalesced (lanes of a
// warp read rows `cols` apart): this kernel is for checking, not for speed.
// Variant block: see group.cu. Speed on H200: unmeasured.
#include "launch.cuh"
#include "row_math.cuh"

namespace lnorm::cuda {
namespace {

template <class T>
__global__ void naive_rows(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                           T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd, std::int64_t rows,
                           std::int64_t n, float eps) {
  const float nf = static_cast<float>(n);
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const T* xr = x + row * n;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) sum = __fadd_rn(sum, dev::to_f32(xr[i]));
    const float m = __fdiv_rn(sum, nf);
    float sq = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) {
      const float d = __fsub_rn(dev::to_f32(xr[i]), m);
      sq = __fadd_rn(sq, __fmul_rn(d, d));
    }
    const float var = __fdiv_rn(sq, nf);
    // As scalar_rows.hpp: a NaN or Inf reaches the mean or the variance, and the whole row is NaN.
    const bool poisoned = !isfinite(m) || isnan(var);
    const float r = poisoned ? __int_as_float(0x7fc00000) : __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
    if (mean) mean[row] = poisoned ? r : m;
    if (rstd) rstd[row] = r;
    T* yr = y + row * n;
    for (std::int64_t i = 0; i < n; ++i) {
      float v = __fmul_rn(__fsub_rn(dev::to_f32(xr[i]), m), r);
      if (gamma) v = __fmul_rn(v, dev::to_f32(gamma[i]));
      if (beta) v = __fadd_rn(v, dev::to_f32(beta[i]));
      yr[i] = dev::from_f32<T>(v);
    }
  }
}

template <class T>
void launch_typed(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  naive_rows<T><<<static_cast<unsigned>(c.grid), c.block_threads, 0, stream>>>(
      static_cast<const T*>(t.x), static_cast<const T*>(p.has_gamma ? t.gamma : nullptr),
      static_cast<const T*>(p.has_beta ? t.beta : nullptr), static_cast<T*>(t.y), static_cast<float*>(t.mean),
      static_cast<float*>(t.rstd), p.rows, p.cols, static_cast<float>(p.eps));
}

}  // namespace

void launch_naive(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::f32: return launch_typed<float>(c, p, t, stream);
    case DType::f16: return launch_typed<__half>(c, p, t, stream);
    case DType::bf16: return launch_typed<__nv_bfloat16>(c, p, t, stream);
    case DType::f64: break;
  }
  throw_internal("cuda_naive: f64 is not offered");
}

}  // namespace lnorm::cuda
