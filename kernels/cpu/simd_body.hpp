// The SIMD kernels' forward algorithms, written once over an operations layer V with V::kLanes f32 lanes and
// V::kDLanes = kLanes/2 f64 lanes (Highway's lesson: one algorithm over a vector type, instantiated per target,
// every target tested by the same suites):
//   Avx2Ops (avx2_ops.hpp, 8 lanes: avx2, avx2_cr in avx2.cpp, avx2_cr.cpp),
//   Avx512Ops (avx512_ops.hpp, 16 lanes: avx512, avx512_cr in avx512.cpp, avx512_cr.cpp, avx512_bf16.cpp),
//   EmulatedOps<8>, EmulatedOps<16> (simd_emulated_ops.hpp, lane loops: the test kernels avx2_emu, avx2_cr_emu,
//   avx512_emu, avx512_cr_emu in tests/simd_emulation.cpp).
// The same source, so the emulation the suites verify on every machine is the code that runs natively;
// tests/test_simd_native.cpp checks the bits agree wherever the CPU has the ISA. simd_backward_body.hpp is the
// backward on the same layers.
//
// Included inside an anonymous namespace after the layer's header: every function here has internal linkage
// in each TU, so no ISA instantiation can be picked by the linker for generic code (ctest
// isa_objects_share_no_code). Every TU compiles with -ffp-contract=off, so the scalar code here (per-row
// statistics) gives the same bits in each too.
//
// Storage: y in T (f32, f16, bf16); x in T, or f32 where the rows are Add & Norm's h kept in f32 beside 16-bit
// y (X, input_dtype); gamma/beta in T, or f32 (Gs: widened or staged once per call).
//
// fast (avx2, avx512). Per row, one read of x for the statistics and one output pass with the row in L1 (DRAM
// sees one read of x and one write of y):
//   0. shift = mean of the first 32 elements (f32 pair sums, then f64: exact on constant rows), or x[0] when
//      n < 32 or that sum overflows.
//   1. d = x − shift,  S = Σ d,  Q = Σ d²: 4 accumulators of L lanes in f32 within blocks of 32·L elements (8
//      additions per lane per accumulator), folded into f64 across blocks (kBlock);
//      mean = shift + S/n,  var = Q/n − (S/n)²,  K = (Q/n)/var, the cancellation factor; accepted when
//      K ≤ kMaxCancel, var > 0, the sums are finite and Q ≥ kQMin;  m = f32(mean), mean_lo = f32(mean − m): a
//      two-float mean.
//   1b. Otherwise (x[0..31] far from the mean, constant rows, rows near the range limits; rare) the corrected
//      two-pass of Chan, Golub & LeVeque (1983) about m:  c = Σ (x − m),  q = Σ (x − m)²,  mean_lo = c/n,
//      var = q/n − mean_lo².
//   2. y = fma(x − m, rstd, −mean_lo·rstd) · γ + β, rstd = 1/sqrt(var + eps) in f64 rounded once; the loop a
//      template on γ/β presence; 16-bit γ, β widened to f32 once per call (kWideMax).
// Why no kappa term: x − shift and x − m are exact on offset rows (Sterbenz), and the centre is the two-float
// m + mean_lo, so the mean's error is relative to the spread, never to the offset. Why the fused pass is
// accurate: Q/n − (S/n)² loses K times Q's relative rounding error; K ≤ kMaxCancel bounds that loss (with the
// shift from 32 elements, K − 1 = ((shift − mean)/σ)² ~ χ²₁/32 on normal rows, so nearly every row is accepted
// and pass 1b runs only where K is large). RMSNorm: the fused read with shift 0, no mean (rms_stats).
// The range check needs no max|x − m| per element:
//   - overflow of any x − shift, x − m, square or block sum makes S, Q, m, c or q non-finite;
//   - Q, q ≥ 2^-80 (kQMin) bounds the error of squares that fall below f32's normal range: each is off by at
//     most 2^-150, n ≤ 2^31 of them are 2^-119 absolute, 2^-39 of q;
//   - q = 0 is a constant row (checked: one more pass, only then) or all |x − m| < 2^-75 (not constant:
//     welford).
// Rows failing it (and NaN/Inf rows) take cpu::welford_row, the scalar kernel with exact scaling.
// Memory: on short rows in cache the statistics of row r + 1 are computed before row r's output pass (the
// scalar tail of one row's statistics, f64 divisions and sqrt, overlaps the other's output loop); on long rows
// and at DRAM sizes each row's own just before its output pass, which then reads x from L1 (stats_ahead). At
// DRAM sizes y is written with non-temporal stores (aligned main loop after a masked head: an ordinary store
// reads each line of y first, three DRAM streams against the copy's two) while row r + kAhead is prefetched
// into L2. Masked heads and tails: nothing read or written past a row. Sums are reduced in a fixed order, so a
// row's result is the same on any thread.
//
// cr (avx2_cr, avx512_cr): cr_exact.hpp's header has the algorithm and its proven bound. x is re-read and
// converted from storage in each pass (no f64 scratch row); w = C + γ and β are staged in f64 once per call by
// the generic driver (simd_kernels.cpp, lnorm/params.hpp stage_params_exact).
//
// Speed: `lnorm bench --kernel avx2 --kernel avx2_cr --kernel avx512 --kernel avx512_cr`; the versions'
// measurements are in docs/performance.md.
//
// The body is split by idea, each part included here in this order: simd_stats.hpp (fast::'s per-row statistics),
// simd_fast_rows.hpp (fast::'s output pass and row drivers), simd_cr_rows.hpp (cr::); this file keeps the shared
// helpers, Add & Norm's sum and the dispatch on storage.
#ifndef LNORM_SIMD_BODY_INCLUDED
#define LNORM_SIMD_BODY_INCLUDED

// The per-vector lambdas of the row loops are inlined by force: GCC 12 left avx2_cr's output step (called once
// per 4 elements) an out-of-line call, 3x slower on bf16 than inlined (perf: 95% of the kernel's time in the
// lambda's operator()). The emulation (tests/simd_emulation.cpp) defines it empty first: inlining changes no
// bit, and forced into its lane loops it made that one translation unit 120 s of CI's build.
#ifndef LNORM_ALWAYS_INLINE
#define LNORM_ALWAYS_INLINE __attribute__((always_inline))
#endif

#include "epilogue_sink.hpp"  // the epilogue as a policy: the row drivers write into a sink
#include "simd_quant.hpp"     // the fast kernels' quantizer (quantize_row_simd)
#include "simd_quant_exact.hpp"  // the _cr kernels' settled codes on V's lanes (exact_lanes::settle_codes)

// The lanes of an f64 vector summed in a fixed tree: lane i + L/2 onto lane i, halving until one is left (8
// lanes: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))). The same bits in every layer of one width.

template <class V>
double hsum_pd(typename V::D a) {
  double l[V::kDLanes];
  V::store_pd(l, a);
  for (int half = V::kDLanes / 2; half >= 1; half /= 2)
    for (int i = 0; i < half; ++i) l[i] = l[i] + l[i + half];
  return l[0];
}

// Elements from p to the next multiple of `align` bytes (p a multiple of sizeof(B); -1 if not).
template <class B>
std::int64_t head_to_align(const B* p, std::int64_t align) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % sizeof(B) != 0) return -1;
  return static_cast<std::int64_t>((static_cast<std::uintptr_t>(align) - a % static_cast<std::uintptr_t>(align)) %
                                   static_cast<std::uintptr_t>(align) / sizeof(B));
}

#include "simd_stats.hpp"       // fast::  the per-row statistics
#include "simd_fast_rows.hpp"   // fast::  the output pass and the row drivers
#include "simd_cr_rows.hpp"     // cr::    the correctly rounded rows

// Add & Norm's sum (the fused-add adaptor's add_rows, kernels/dispatch.cpp), for both kernels: h = x + residual
// in f32 lanes, rounded once to h's storage R by the layer's store (round to nearest even) — correctly rounded,
// since f16/bf16 values are exact in f32 and 24 ≥ 2p + 2 (docs/DESIGN.md "Ops"); an f32 h (the residual stream
// kept in f32 beside 16-bit x) is the f32 sum itself. Masked tail.
namespace add {

template <class V, class T, class R>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  constexpr int L = V::kLanes;
  const std::int64_t n = p.cols;
  for (std::int64_t row = begin; row < end; ++row) {
    const typename T::Bits* x = static_cast<const typename T::Bits*>(t.x) + row * n;
    const typename R::Bits* r = static_cast<const typename R::Bits*>(t.residual) + row * n;
    typename R::Bits* h = static_cast<typename R::Bits*>(t.h) + row * n;
    std::int64_t i = 0;
    for (; i + L <= n; i += L) V::template store<R>(h + i, V::add(V::template load<T>(x + i), V::template load<R>(r + i)));
    if (i < n) {
      const auto k = static_cast<typename V::M>((1u << (n - i)) - 1);
      V::template mask_store<R>(k, h + i, V::add(V::template maskz_load<T>(k, x + i), V::template maskz_load<R>(k, r + i)));
    }
  }
}

template <class V, class T>
void rows_of(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  if constexpr (!std::is_same_v<T, F32>) {
    if (p.residual_dtype == DType::f32) return rows<V, T, F32>(p, t, begin, end);
  }
  rows<V, T, T>(p, t, begin, end);
}

}  // namespace add

// Dispatch on p.dtype (f32, f16, bf16; the glue offers nothing else).
template <class V>
void sum_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return add::rows_of<V, F32>(p, t, begin, end);
    case DType::f16: return add::rows_of<V, F16>(p, t, begin, end);
    case DType::bf16: return add::rows_of<V, BF16>(p, t, begin, end);
    case DType::f64: return;
  }
}
template <class V>
void fast_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  switch (p.dtype) {
    case DType::f32: return fast::rows<V, F32>(p, t, begin, end, staged);
    case DType::f16: return fast::rows<V, F16>(p, t, begin, end, staged);
    case DType::bf16: return fast::rows<V, BF16>(p, t, begin, end, staged);
    case DType::f64: return;
  }
}
template <class V>
void cr_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& st) {
  switch (p.dtype) {
    case DType::f32: return cr::rows<V, F32>(p, t, begin, end, st);
    case DType::f16: return cr::rows<V, F16>(p, t, begin, end, st);
    case DType::bf16: return cr::rows<V, BF16>(p, t, begin, end, st);
    case DType::f64: return;
  }
}

#endif
