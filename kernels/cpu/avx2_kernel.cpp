// The avx2 and avx2_cr kernels as the registry sees them: availability from cpuid, rows split over threads. The
// arithmetic is in avx2.cpp and avx2_cr.cpp, compiled for AVX2; this file is generic code.
#include <cpuid.h>

#include <vector>

#include "backward.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "lnorm/params.hpp"
#include "row_split.hpp"

namespace lnorm::cpu {
namespace {

// F16C from cpuid leaf 1 (ECX bit 29) directly: clang 14's __builtin_cpu_supports does not know "f16c"
// (the fuzz preset builds with clang), GCC's does.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

std::optional<std::string> avx2_why_not(const Problem&) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !cpu_has_f16c()) {
    return "needs AVX2, FMA and F16C (this CPU lacks one)";
  }
  return std::nullopt;
}

void avx2_backward(const Problem& p, const Tensors& t) { simd_backward(p, t, &avx2::backward_rows); }

// The forward of the rows at t.x (x, or Add & Norm's h from the fused-add adaptor: in x's dtype, as the
// SIMD drivers read their input; an f32 residual beside 16-bit x is the scalar kernels' for now).
void avx2_forward(const Problem& p, const Tensors& t) {
  // f32 gamma/beta with 16-bit x, or an offset: w = C + gamma and beta staged in f32 once per call.
  StagedParams<float> staged;
  if (!params_in_place(p)) staged = stage_params<float>(p, t);
  const Staged s{staged.gamma(), staged.beta()};
  split_rows(p, [&](std::int64_t begin, std::int64_t end) { avx2::rows(p, t, begin, end, s); });
}

// avx2_cr's f64 copies of a row, gamma and beta; allocated here (generic code, see isa.hpp), kept per
// thread so repeated calls do not allocate.
double* avx2_cr_scratch(std::int64_t cols) {
  thread_local std::vector<double> scratch;
  scratch.resize(static_cast<std::size_t>(avx2_cr::scratch_doubles(cols)));
  return scratch.data();
}

void avx2_cr_forward(const Problem& p, const Tensors& t) {
  split_rows(p, [&](std::int64_t begin, std::int64_t end) { avx2_cr::rows(p, t, begin, end, avx2_cr_scratch(p.cols)); });
}

constexpr DTypeSet kSimdDTypes{DType::f32, DType::f16, DType::bf16};

}  // namespace

// Add & Norm through the adaptor with avx2's add: the same correctly rounded sum for both.
const KernelInfo kAvx2Cr{"avx2_cr",
                         "AVX2+FMA, correctly rounded: f64 math with a proven error bound (Ziv's test), double-double near midpoints",
                         {.dtypes = kSimdDTypes, .forward_norms = kBothNorms, .prologues = kWithAdd},
                         &avx2_cr_forward, nullptr, &avx2::add_rows, &avx2_why_not};

const KernelInfo kAvx2{"avx2",
                       "AVX2+FMA, 8 f32 lanes: one fused read of shifted sums (corrected two-pass if they cancel), two-float mean (RMSNorm: the sum of squares); streamed y at DRAM sizes; f32 math for f16/bf16; backward (f32 math on f32/f16/bf16) from the saved statistics, the mean made exact, f64 sums",
                       {.dtypes = kSimdDTypes, .forward_norms = kBothNorms, .backward_norms = kBothNorms, .prologues = kWithAdd},
                       &avx2_forward, &avx2_backward, &avx2::add_rows, &avx2_why_not};

}  // namespace lnorm::cpu
