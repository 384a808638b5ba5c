// The avx2 and avx2_cr kernels as the registry sees them: availability from cpuid, rows split over threads. The
// arithmetic is in avx2.cpp and avx2_cr.cpp, compiled for AVX2; this file is generic code.
#include "isa.hpp"
#include "kernels.hpp"
#include "lnorm/parallel.hpp"

namespace lnorm::cpu {
namespace {

std::optional<std::string> avx2_why_not(const Problem&) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
    return "needs AVX2, FMA and F16C (this CPU lacks one)";
  }
  return std::nullopt;
}

void avx2_run(const Problem& p, const Tensors& t) {
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) { avx2::rows(p, t, begin, end); });
}

void avx2_cr_run(const Problem& p, const Tensors& t) {
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) { avx2_cr::rows(p, t, begin, end); });
}

}  // namespace

const KernelInfo kAvx2Cr{"avx2_cr",
                         "AVX2+FMA, correctly rounded: f64 statistics and f64 output math, rounded once (f16/bf16 via round-to-odd)",
                         DTypeSet{DType::f32, DType::f16, DType::bf16}, &avx2_why_not, &avx2_cr_run};

const KernelInfo kAvx2{"avx2",
                       "AVX2+FMA, 8 f32 lanes: shifted sum, corrected two-pass (two-float mean); f32 math for f16/bf16",
                       DTypeSet{DType::f32, DType::f16, DType::bf16}, &avx2_why_not, &avx2_run};

}  // namespace lnorm::cpu
