// The SIMD kernels as the registry sees them — avx2, avx2_cr, avx512, avx512_cr: availability from cpuid, rows
// split over threads, parameters staged, bf16 narrowing by AVX512-BF16 where the CPU has it, the correctly
// rounded kernels' path counts. The arithmetic is simd_body.hpp and simd_backward_body.hpp instantiated in
// avx2.cpp, avx2_cr.cpp (AVX2) and avx512.cpp, avx512_cr.cpp, avx512_bf16.cpp (AVX-512); this file is
// generic code.
#include <cpuid.h>

#include <atomic>
#include <vector>

#include "backward.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "lnorm/params.hpp"
#include "row_split.hpp"

namespace lnorm::cpu {
namespace {

// F16C from cpuid leaf 1 (ECX bit 29) directly: clang 14's __builtin_cpu_supports does not know "f16c"
// (the asan preset builds with clang), GCC's does.
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

void avx2_forward(const Problem& p, const Tensors& t) { staged_forward(p, t, &avx2::rows); }
void avx2_backward(const Problem& p, const Tensors& t) { simd_backward(p, t, &avx2::backward_rows); }

void avx2_cr_forward(const Problem& p, const Tensors& t) { staged_cr_forward(p, t, &avx2_cr::rows); }

std::atomic<long long> g_elements{0}, g_medium{0}, g_exact{0}, g_exact_rows{0};

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

void avx512_forward(const Problem& p, const Tensors& t) {
  const bool hw_bf16 = p.dtype == DType::bf16 && features().bf16;
  staged_forward(p, t, hw_bf16 ? &avx512_bf16::rows_fast : &avx512::rows);
}

void avx512_cr_forward(const Problem& p, const Tensors& t) {
  const bool hw_bf16 = p.dtype == DType::bf16 && features().bf16;
  staged_cr_forward(p, t, hw_bf16 ? &avx512_bf16::rows_cr : &avx512_cr::rows);
}

constexpr DTypeSet kSimdDTypes{DType::f32, DType::f16, DType::bf16};
// Add & Norm through the adaptor with the body's add; the residual (and h) in x's dtype or in f32 beside 16-bit x.
constexpr Takes kFastTakes{.dtypes = kSimdDTypes, .forward_norms = kBothNorms, .backward_norms = kBothNorms,
                           .prologues = kWithAdd, .epilogues = kWithQuant, .f32_residual = true};
constexpr Takes kCrTakes{.dtypes = kSimdDTypes, .forward_norms = kBothNorms, .prologues = kWithAdd, .epilogues = kWithQuant,
                         .f32_residual = true, .quant_input = QuantInput::exact_y};

}  // namespace

// isa.hpp: the forward of the rows at t.x (x, or Add & Norm's h from the fused-add adaptor: in input_dtype(p)).
// f32 gamma/beta with 16-bit x, or an offset: w = C + gamma and beta staged in f32 once per call.
void staged_forward(const Problem& p, const Tensors& t, FastRowsFn rows) {
  StagedParams<float> staged;
  if (!params_in_place(p)) staged = stage_params<float>(p, t);
  const Staged s{staged.gamma(), staged.beta()};
  split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    if (p.op.epilogue != Epilogue::quantized) return rows(p, t, begin, end, s);
    std::vector<float> y_row(static_cast<std::size_t>(p.cols));  // each range's own: the quantizer's row (epilogue_sink.hpp)
    Staged with_row = s;
    with_row.y_row = y_row.data();
    rows(p, t, begin, end, with_row);
  });
}

// isa.hpp: the correctly rounded kernels' forward driver.
void staged_cr_forward(const Problem& p, const Tensors& t, CrRowsFn rows) {
  const StagedExact staged = stage_params_exact(p, t);
  const Staged64 s{staged.gamma(), staged.gamma_lo(), staged.beta()};
  split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    if (p.op.epilogue != Epilogue::quantized) return rows(p, t, begin, end, s);
    std::vector<double> y_row(static_cast<std::size_t>(p.cols));  // each range's own: the exact quantizer's row (epilogue_sink.hpp)
    Staged64 with_row = s;
    with_row.y_row = y_row.data();
    rows(p, t, begin, end, with_row);
  });
}

bool cpu_has_avx512_bf16() { return features().bf16 && !avx512_why_not(Problem{}); }

void cr_paths_add(const CrPaths& c) {
  g_elements += c.elements;
  g_medium += c.medium;
  g_exact += c.exact;
  g_exact_rows += c.exact_rows;
}
CrPaths cr_paths() { return {g_elements.load(), g_medium.load(), g_exact.load(), g_exact_rows.load()}; }

// The registry's descriptions name the algorithm; simd_body.hpp's header has it in full.
const KernelInfo kAvx2Cr{"avx2_cr",
                         "AVX2+FMA, 4 f64 lanes, correctly rounded: f64 math with a proven error bound (Ziv's test), exact decision near midpoints",
                         kCrTakes, &avx2_cr_forward, nullptr, &avx2::add_rows, &avx2_why_not};

const KernelInfo kAvx2{"avx2",
                       "AVX2+FMA, 8 f32 lanes: one fused read of shifted sums (corrected two-pass if they cancel), two-float mean (RMSNorm: the sum of squares); streamed y at DRAM sizes; f32 math for f16/bf16; backward (f32 math on f32/f16/bf16) from the saved statistics, the mean made exact, f64 sums",
                       kFastTakes, &avx2_forward, &avx2_backward, &avx2::add_rows, &avx2_why_not};

const KernelInfo kAvx512Cr{"avx512_cr",
                           "AVX-512, 8 f64 lanes, correctly rounded: avx2_cr's algorithm on twice the lanes",
                           kCrTakes, &avx512_cr_forward, nullptr, &avx512::add_rows, &avx512_why_not};

const KernelInfo kAvx512{"avx512",
                         "AVX-512, 16 f32 lanes: avx2's algorithm on twice the lanes (the same source, simd_body.hpp)",
                         kFastTakes, &avx512_forward, &avx512_backward, &avx512::add_rows, &avx512_why_not};

}  // namespace lnorm::cpu
