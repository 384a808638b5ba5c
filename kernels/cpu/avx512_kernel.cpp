// The avx512 and avx512_cr kernels as the registry sees them: availability from cpuid, rows split over
// threads, bf16 narrowing by AVX512-BF16 where the CPU has it. The arithmetic is in avx512.cpp,
// avx512_cr.cpp and avx512_bf16.cpp, compiled for AVX-512; this file is generic code.
#include <cpuid.h>

#include "backward.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "lnorm/params.hpp"
#include "row_split.hpp"

namespace lnorm::cpu {
namespace {

struct Avx512Features {
  bool f = false, bw = false, vl = false, dq = false, f16c = false, bf16 = false, os = false;
};

// cpuid leaf 7 (EBX: F bit 16, DQ 17, BW 30, VL 31; subleaf 1 EAX bit 5: AVX512_BF16) and XGETBV: the
// OS must save the opmask and ZMM state (XCR0 bits 1, 2, 5, 6, 7).
Avx512Features avx512_features() {
  Avx512Features r;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return r;
  r.f16c = (ecx & bit_F16C) != 0;  // vcvtph2ps ymm for avx512_cr's 8-lane f16 loads
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  r.os = (xcr0_lo & 0xE6u) == 0xE6u;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return r;
  r.f = (ebx >> 16) & 1u;
  r.dq = (ebx >> 17) & 1u;
  r.bw = (ebx >> 30) & 1u;
  r.vl = (ebx >> 31) & 1u;
  if (eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0) r.bf16 = (eax >> 5) & 1u;
  return r;
}

const Avx512Features& features() {
  static const Avx512Features f = avx512_features();
  return f;
}

std::optional<std::string> avx512_why_not(const Problem&) {
  const Avx512Features& f = features();
  if (!f.f) return "CPU lacks avx512f";
  if (!f.bw) return "CPU lacks avx512bw";
  if (!f.vl) return "CPU lacks avx512vl";
  if (!f.dq) return "CPU lacks avx512dq";
  if (!f.f16c) return "CPU lacks f16c";
  if (!f.os) return "the OS does not enable AVX-512 state (XCR0)";
  return std::nullopt;
}

void avx512_backward(const Problem& p, const Tensors& t) { simd_backward(p, t, &avx512::backward_rows); }

// The forward of the rows at t.x (x, or Add & Norm's h from the fused-add adaptor: in x's dtype, as the row
// drivers read their input).
void avx512_forward(const Problem& p, const Tensors& t) {
  const bool hw_bf16 = p.dtype == DType::bf16 && features().bf16;
  // f32 gamma/beta with 16-bit x, or an offset: w = C + gamma and beta staged in f32 once per call.
  StagedParams<float> staged;
  if (!params_in_place(p)) staged = stage_params<float>(p, t);
  const Staged s{staged.gamma(), staged.beta()};
  split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    if (hw_bf16) avx512_bf16::rows_fast(p, t, begin, end, s);
    else avx512::rows(p, t, begin, end, s);
  });
}

void avx512_cr_forward(const Problem& p, const Tensors& t) {
  const bool hw_bf16 = p.dtype == DType::bf16 && features().bf16;
  split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    if (hw_bf16) avx512_bf16::rows_cr(p, t, begin, end);
    else avx512_cr::rows(p, t, begin, end);
  });
}

constexpr DTypeSet kSimdDTypes{DType::f32, DType::f16, DType::bf16};

}  // namespace

bool cpu_has_avx512_bf16() { return features().bf16 && !avx512_why_not(Problem{}); }

const KernelInfo kAvx512Cr{"avx512_cr",
                           "AVX-512, 8 f64 lanes, correctly rounded: avx2_cr's Ziv test (proven f64 bound, double-double slow path)",
                           {.dtypes = kSimdDTypes, .forward_norms = kBothNorms, .prologues = kWithAdd},
                           &avx512_cr_forward, nullptr, &avx512::add_rows, &avx512_why_not};

const KernelInfo kAvx512{"avx512",
                         "AVX-512, 16 f32 lanes: avx2's fused shifted sums (RMSNorm: the sum of squares), corrected two-pass (two-float mean), masked tails; backward (f32 math, f32/f16/bf16 data) from the saved statistics, f64 sums",
                         {.dtypes = kSimdDTypes, .forward_norms = kBothNorms, .backward_norms = kBothNorms, .prologues = kWithAdd},
                         &avx512_forward, &avx512_backward, &avx512::add_rows, &avx512_why_not};

}  // namespace lnorm::cpu
