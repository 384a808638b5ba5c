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
#ifndef LNORM_SIMD_BODY_INCLUDED
#define LNORM_SIMD_BODY_INCLUDED

// The per-vector lambdas of the row loops are inlined by force: GCC 12 left avx2_cr's output step (called once
// per 4 elements) an out-of-line call, 3x slower on bf16 than inlined (perf: 95% of the kernel's time in the
// lambda's operator()). The emulation (tests/simd_emulation.cpp) defines it empty first: inlining changes no
// bit, and forced into its lane loops it made that one translation unit 120 s of CI's build.
#ifndef LNORM_ALWAYS_INLINE
#define LNORM_ALWAYS_INLINE __attribute__((always_inline))
#endif

// The lanes of an f64 vector summed in a fixed tree: lane i + L/2 onto lane i, halving until one is left (8
// lanes: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))). The same bits in every layer of one width.
#include "simd_quant.hpp"  // the quantized epilogue (rows_typed's Q)

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

namespace fast {

// Elements per block of the f32 sums: 8 additions per lane per accumulator (4 accumulators of L lanes: 512 on
// AVX-512, 256 on AVX2), folded into f64 across blocks, so a row's error does not grow with its length
// (avx2's first version, one f32 accumulation over the row, read rstd 62 ulps on 65537-wide rows).
template <class V>
constexpr std::int64_t kBlock = 32 * V::kLanes;
constexpr double kQMin = 0x1p-80;
// Bytes of y above which it is written with non-temporal stores: 8 MiB, i.e. x + y > 16 MiB. Copies of the same
// bytes (vector vs streaming, medians of 7, one run, on AVX2) 52 vs 45 GB/s at 6 MiB, 54 vs 48 at 16 MiB, 35 vs
// 44 at 32 MiB. lnorm_gbench (medians of 5, two runs): with 32 MiB f32 4096x1024 (16 MiB of y) ran at
// 20.5, 20.1 GB/s, with 8 MiB at 37.8, 31.7 (streaming copy 64-68); bf16 4096x2048 unchanged.
constexpr std::int64_t kStreamBytes = std::int64_t{8} << 20;
// The fused pass's acceptance bound on K = (Q/n)/var. var's relative error is about K·e_Q + 2·sqrt(K(K−1))·e_S
// (e: the sums' relative rounding errors), so K ≤ 2 costs at most ~3.8x the corrected two-pass's e_Q. With it
// `lnorm verify --kernel avx2` gave worst f32 y 4.77 / 4.31 / 5.21 scaled ulps (seeds 1, 2, 7 with --cases
// 1000), no worse than the two-pass it replaced (5.36).
constexpr double kMaxCancel = 2.0;
// Streaming mode: prefetch the row kAhead on into L2 during the output pass. AVX2, 8192x4096 f32 (best of 25
// against a streaming copy in the same run, two runs): with the next row's statistics first and the prefetch
// 0.71, 0.72 of the copy; prefetch alone 0.64, 0.63; neither 0.58. AVX-512, 16384x4096 f32 0.62 of the streaming copy with it, 0.55 without; bf16 0.61 vs 0.43; row + 1
// and row + 4 were no better (lnorm_gbench, medians of 5, one run).
constexpr bool kPrefetch = true;
constexpr std::int64_t kAhead = 2;

struct Stats {
  float m, mean_lo, rstd;
  bool safe;
};

// Whether rows_typed takes row r + 1's statistics before row r's output pass (ahead) or row r's own just before
// it (in order); the same bits either way. Ahead hides the statistics' scalar tail (f64 divisions, sqrt) behind
// the other row's output loop, which pays on short rows in cache; but it reads the next row between a row's
// statistics and its output pass, and on long rows (two rows of x beside gamma and beta are more than L1) or at
// DRAM sizes the row's x has left L1 by then. Measured in one process per setting pair, the two settings and a
// streaming copy interleaved in 9 rounds, median of the per-round ratios in order / ahead (AMD EPYC Zen 5,
// bench/results/issue37-zen5-order): f32 64x768 0.93-1.01, 256x1024 0.97-1.07; 128x2048 1.02-1.19, 64x4096
// 1.09-1.14, 32x8192 1.00-1.05; bf16 (gamma and beta widened to f32) 768-2048 wide 0.90-1.01, 64x4096 1.00-1.06;
// at DRAM sizes (16384x1024, 8192x2048, 16384x4096) f32 0.96-1.17, bf16 0.98-1.16. So rows of x from
// kInOrderRowBytes up, and every streamed call, go in order.
constexpr std::int64_t kInOrderRowBytes = 8192;
template <class X, bool NT>
bool stats_ahead(std::int64_t n) {
  return !NT && n * static_cast<std::int64_t>(sizeof(typename X::Bits)) < kInOrderRowBytes;
}

template <class V>
void fold(typename V::F a, typename V::F b, typename V::D& lo, typename V::D& hi) {
  const typename V::F s = V::add(a, b);
  lo = V::add_pd(lo, V::lo_pd(s));
  hi = V::add_pd(hi, V::hi_pd(s));
}

// Σ d and Σ d² for d = x − c over the row, blocked as kBlock says (f32 within a block, f64 across). WithS = false
// (RMSNorm, c = 0): Σ d² alone (s_out = 0), the same bits for it; the sketches of RMSNorm this kernel is held
// against do no more.
template <class V, class T, bool WithS = true>
void centred_sums(const typename T::Bits* x, std::int64_t n, float c, double& s_out, double& q_out) {
  using F = typename V::F;
  using D = typename V::D;
  constexpr int L = V::kLanes;
  constexpr std::int64_t kB = kBlock<V>;
  const std::int64_t full = n / L * L, r = n - full;
  const auto tail = static_cast<typename V::M>((1u << r) - 1);
  const F cv = V::set1(c);
  D s_lo = V::zero_pd(), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
  for (std::int64_t block = 0; block < n; block += kB) {
    const std::int64_t block_end = block + kB < full ? block + kB : full;
    F s0 = V::zero(), s1 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    std::int64_t i = block;
    for (; i + 4 * L <= block_end; i += 4 * L) {
      const F d0 = V::sub(V::template load<T>(x + i), cv), d1 = V::sub(V::template load<T>(x + i + L), cv);
      const F d2 = V::sub(V::template load<T>(x + i + 2 * L), cv), d3 = V::sub(V::template load<T>(x + i + 3 * L), cv);
      if constexpr (WithS) {
        s0 = V::add(s0, V::add(d0, d2));
        s1 = V::add(s1, V::add(d1, d3));
      }
      q0 = V::fmadd(d0, d0, q0);
      q1 = V::fmadd(d1, d1, q1);
      q2 = V::fmadd(d2, d2, q2);
      q3 = V::fmadd(d3, d3, q3);
    }
    for (; i < block_end; i += L) {
      const F d = V::sub(V::template load<T>(x + i), cv);
      if constexpr (WithS) s0 = V::add(s0, d);
      q0 = V::fmadd(d, d, q0);
    }
    if (r && block + kB >= n) {
      const F d = V::maskz_sub(tail, V::template maskz_load<T>(tail, x + full), cv);
      if constexpr (WithS) s1 = V::add(s1, d);
      q1 = V::fmadd(d, d, q1);
    }
    if constexpr (WithS) fold<V>(s0, s1, s_lo, s_hi);
    fold<V>(V::add(q0, q1), V::add(q2, q3), q_lo, q_hi);
  }
  s_out = hsum_pd<V>(V::add_pd(s_lo, s_hi));
  q_out = hsum_pd<V>(V::add_pd(q_lo, q_hi));
}

// The fused pass's centre: the mean of the first 32 elements (x[0] for shorter rows, or when their f32
// pair sums overflow). Summed as 16 f32 pair sums (x[i] + x[i + L] for each group of 2L), then in f64 in a
// fixed order: exact on a constant row (2c in f32, 32c in f64, / 32), the same bits in every layer of a width.
template <class V, class T>
float row_shift(const typename T::Bits* x, std::int64_t n) {
  constexpr int L = V::kLanes;
  const float x0 = V::first(V::template maskz_load<T>(1, x));
  if (n < 32) return x0;
  typename V::D acc{};
  for (int j = 0; j < 32; j += 2 * L) {
    const typename V::F pairs = V::add(V::template load<T>(x + j), V::template load<T>(x + j + L));
    const typename V::D both = V::add_pd(V::lo_pd(pairs), V::hi_pd(pairs));
    acc = j == 0 ? both : V::add_pd(acc, both);
  }
  const float shift = static_cast<float>(hsum_pd<V>(acc) * (1.0 / 32));
  return std::isfinite(shift) ? shift : x0;
}

// shift: row_shift<V, T>(x, n), taken by the caller (rows_typed takes it a row ahead).
template <class V, class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, float eps, float shift) {
  const double nd = static_cast<double>(n), epsd = static_cast<double>(eps);
  // Pass 1, fused: S = Σ (x − shift), Q = Σ (x − shift)² in one read; accepted when the
  // cancellation factor K = (Q/n)/var is at most kMaxCancel and the range is safe.
  double s1 = 0, q1 = 0;
  centred_sums<V, T>(x, n, shift, s1, q1);
  const double mean = static_cast<double>(shift) + s1 / nd;
  const double var1 = q1 / nd - (s1 / nd) * (s1 / nd);
  if (std::isfinite(s1) && std::isfinite(q1) && var1 > 0 && q1 / nd <= kMaxCancel * var1 && q1 >= kQMin) {
    const float m1 = static_cast<float>(mean);
    return {m1, static_cast<float>(mean - static_cast<double>(m1)), static_cast<float>(1.0 / std::sqrt(var1 + epsd)), true};
  }
  // Otherwise (x[0..31] far from the mean, constant rows, rows near the range limits; rare) the
  // corrected two-pass about m = f32(mean).
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const std::int64_t full = n / L * L, r = n - full;
  const auto tail = static_cast<typename V::M>((1u << r) - 1);
  const float m = static_cast<float>(mean);
  // Pass 2: c = Σ (x − m), q = Σ (x − m)².
  const F mv = V::set1(m);
  double c = 0, q = 0;
  centred_sums<V, T>(x, n, m, c, q);
  const double mean_lo = c / nd;
  const double var = std::fmax(q / nd - mean_lo * mean_lo, 0.0);
  const bool finite = std::isfinite(m) && std::isfinite(c) && std::isfinite(q);
  bool safe = finite && q >= kQMin;
  if (finite && q == 0) {  // constant (exactly beta below), or a spread too small to square in f32
    typename V::M differs = 0;
    for (std::int64_t i = 0; i < full; i += L) differs |= V::cmp_neq(V::template load<T>(x + i), mv);
    if (r) differs |= V::mask_cmp_neq(tail, V::template maskz_load<T>(tail, x + full), mv);
    safe = differs == 0;
  }
  // rstd from the f64 variance and the f32 eps, rounded once to f32.
  return {m, static_cast<float>(mean_lo), static_cast<float>(1.0 / std::sqrt(var + epsd)), safe};
}

// RMSNorm's statistics: the fused read with the shift 0, mean 0, rstd = 1/sqrt(Q/n + eps); safe when Q is
// finite and Q ≥ kQMin or eps ≥ kRmsEpsMin: each square below f32's normal range is off by at most 2^-150, and
// n ≤ 2^31 of them move Q/n by 2^-150 at most, which is 2^-39 of Q/n when Q ≥ 2^-80 and 2^-50 of Q/n + eps
// when eps ≥ 2^-100. NaN/Inf rows make the sums non-finite; eps = 0 on a zero row makes rstd +Inf: both take
// the welford row.
constexpr double kRmsEpsMin = 0x1p-100;

template <class V, class T>
Stats rms_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const double epsd = static_cast<double>(eps);
  double s = 0, q = 0;
  centred_sums<V, T, false>(x, n, 0.0f, s, q);  // s = 0: Σ x finite wherever Σ x² is
  const float rstd = static_cast<float>(1.0 / std::sqrt(q / static_cast<double>(n) + epsd));
  const bool safe = std::isfinite(q) && (q >= kQMin || epsd >= kRmsEpsMin) && std::isfinite(rstd);
  return {0.0f, 0.0f, rstd, safe};
}

// shift: LayerNorm's row_shift (RMSNorm: unused).
template <class V, class T>
Stats stats_of(const typename T::Bits* x, std::int64_t n, float eps, bool centred, float shift) {
  return centred ? row_stats<V, T>(x, n, eps, shift) : rms_stats<V, T>(x, n, eps);
}

// y = fma(x − m, rstd, −mean_lo·rstd) · γ + β (the two-float centre in one FMA); RMSNorm (Centred = false)
// x·rstd · γ + β, the same bits (m = mean_lo = 0) with two operations fewer. NT: y is streamed, and next (the row
// kAhead rows on) is prefetched into L2 meanwhile, one prefetch per 64-byte line, so DRAM keeps reading while
// this pass runs from L1 (kPrefetch).
// X: how x is stored (T, or F32: Add & Norm's f32 h beside 16-bit y); T: y's storage; Gs: how gamma and beta
// are stored (T, or F32 once widened: rows_wide).
template <class V, class X, class T, class Gs, bool G, bool B, bool NT, bool Centred, bool Finite = false>
void normalize_row(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s, const typename X::Bits* next) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  // Elements of x per 64-byte line.
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(typename X::Bits));
  const F mv = V::set1(s.m), lo_rstd = V::set1(-s.mean_lo * s.rstd), rstd = V::set1(s.rstd);
  const auto one = [&](std::int64_t i, typename V::M k, bool masked) LNORM_ALWAYS_INLINE {
    const auto ld = [&](const typename Gs::Bits* p) LNORM_ALWAYS_INLINE { return masked ? V::template maskz_load<Gs>(k, p) : V::template load<Gs>(p); };
    const F xv = masked ? V::template maskz_load<X>(k, x + i) : V::template load<X>(x + i);
    F t;
    if constexpr (Centred) t = V::fmadd(V::sub(xv, mv), rstd, lo_rstd);
    else t = V::mul(xv, rstd);
    if constexpr (G && B) return V::fmadd(t, ld(gamma + i), ld(beta + i));
    else if constexpr (G) return V::mul(t, ld(gamma + i));
    else if constexpr (B) return V::add(t, ld(beta + i));
    else return t;
  };
  const auto masked_at = [&](std::int64_t i, std::int64_t count) {
    const auto k = static_cast<typename V::M>((1u << count) - 1);
    V::template mask_store<T>(k, y + i, one(i, k, true));
  };
  // Two vectors per step (store2: AVX2 packs 16 bf16 values at once), then one, then the masked tail.
  constexpr std::int64_t kStep = 2 * L;
  std::int64_t i = 0;
  if constexpr (NT) {
    // Heads up to a 64-byte boundary: stream2's 32-byte stores, and every line written whole.
    const std::int64_t head = head_to_align(y, 64);
    const std::int64_t h = head < n ? head : n;
    for (; i < h; i += L) masked_at(i, h - i < L ? h - i : L);
    for (i = h; i + kStep <= n; i += kStep) {
      if constexpr (kPrefetch) {
        if constexpr (kLine <= kStep) {
          for (std::int64_t j = 0; j < kStep; j += kLine) V::prefetch_l2(next + i + j);
        } else if (i % kLine < kStep) {
          V::prefetch_l2(next + i);
        }
      }
      V::template stream2<T, Finite>(y + i, one(i, 0, false), one(i + L, 0, false));
    }
    if (i + L <= n) {
      V::template stream<T>(y + i, one(i, 0, false));
      i += L;
    }
  } else {
    for (; i + kStep <= n; i += kStep) V::template store2<T, Finite>(y + i, one(i, 0, false), one(i + L, 0, false));
    if (i + L <= n) {
      V::template store<T>(y + i, one(i, 0, false));
      i += L;
    }
  }
  if (i < n) masked_at(i, n - i);
}

// Whether a bf16 y's narrowing may skip NaN lanes where they cannot occur (AVX2: 4 of 13 operations a vector).
// `lnorm bench --kernel avx2 --shape 1024x768 --dtype bf16`, two runs before and after, AMD EPYC (Zen 3, AVX2):
// LayerNorm 8.4, 9.0 → 11.2, 11.8 GB/s; RMSNorm 10.9, 12.2 → 14.6, 14.9. Other storage types gain nothing.
template <class T>
constexpr bool kFiniteNarrowing = std::is_same_v<T, BF16>;

// No NaN or Inf among p[0, n) (gamma or beta as the output loop reads them: f32 once widened, or x's storage).
template <class S>
bool all_finite(const typename S::Bits* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<S, F32>) {
      if (!__builtin_isfinite(p[i])) return false;
    } else {
      constexpr unsigned kExp = std::is_same_v<S, BF16> ? 0x7F80u : 0x7C00u;  // bf16's / f16's exponent field
      if ((p[i] & kExp) == kExp) return false;
    }
  }
  return true;
}

// Q: the quantized epilogue. Each row's y is formed in f32 (T = F32) into q_row (cols floats, the generic
// driver's: Staged::y_row), in cache, and quantize_row_simd (simd_quant.hpp: quantize_row's bits on V's lanes)
// writes its q and scales; y itself is not written.
template <class V, class X, class T, class Gs, bool G, bool B, bool NT, bool Q = false>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end,
                const typename Gs::Bits* gamma, const typename Gs::Bits* beta, float* q_row) {
  using XBits = typename X::Bits;
  static_assert(!Q || (std::is_same_v<T, F32> && !NT));
  const XBits* x = static_cast<const XBits*>(t.x);
  typename T::Bits* y = static_cast<typename T::Bits*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const float eps = static_cast<float>(p.eps);
  const bool is_centred = p.op.norm == Norm::layernorm;  // one row driver for both ops: only the statistics differ
  // A safe row's y is never NaN where gamma and beta are finite: x − m, the statistics and t are finite there, and
  // a finite product and sum round to ±Inf at worst. The bf16 narrowing then skips its NaN case (store2's Finite).
  const bool finite = kFiniteNarrowing<T> && (!G || all_finite<Gs>(gamma, n)) && (!B || all_finite<Gs>(beta, n));
  // Where a row's statistics are taken (the same bits either way: stats_ahead). Ahead: row + 1's before row's
  // output pass, so the scalar tail of one row's statistics (f64 divisions and sqrt) overlaps the other row's
  // output loop. In order: the row's own just before its output pass, which then reads x from L1. The shift is
  // taken a row ahead in both (a chain of ~40 cycles, 32 loads, f64 sums, a horizontal sum through memory, that
  // the row's sums wait on), after the row's statistics, when the next row's first lines are in cache (avx2
  // LayerNorm f32 against the best sketch, taken ahead like this, four runs of each binary alternating, AMD EPYC
  // Zen 3: 64x768 0.85-0.94 → 0.93-1.00; docs/performance.md, issue 37 on AVX2).
  const bool ahead = stats_ahead<X, NT>(n);
  const auto shift_of = [&](std::int64_t r) { return is_centred ? row_shift<V, X>(x + r * n, n) : 0.0f; };
  const auto stats = [&](std::int64_t r, float shift) { return stats_of<V, X>(x + r * n, n, eps, is_centred, shift); };
  float shift = begin < end ? shift_of(begin) : 0.0f;  // of the next row whose statistics are taken
  Stats next{};
  if (ahead && begin < end) {
    next = stats(begin, shift);
    if (begin + 1 < end) shift = shift_of(begin + 1);
  }
  for (std::int64_t row = begin; row < end; ++row) {
    const XBits* xr = x + row * n;
    const std::int64_t r_stats = ahead ? row + 1 : row;  // whose statistics this step takes
    Stats s = next;
    if (r_stats < end) {
      const Stats taken = stats(r_stats, shift);
      if (ahead) next = taken;
      else s = taken;
      if (r_stats + 1 < end) shift = shift_of(r_stats + 1);
    }
    if (!s.safe) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = s.m + s.mean_lo;
    if (rstd) rstd[row] = s.rstd;
    const XBits* ahead = row + kAhead < end ? xr + kAhead * n : xr;
    typename T::Bits* yr = Q ? reinterpret_cast<typename T::Bits*>(q_row) : y + row * n;
    const bool nt = NT && head_to_align(yr, 64) >= 0;
    const auto out = [&]<bool Finite>() LNORM_ALWAYS_INLINE {
      if (is_centred) {
        if (nt) normalize_row<V, X, T, Gs, G, B, NT, true, Finite>(xr, gamma, beta, yr, n, s, ahead);
        else normalize_row<V, X, T, Gs, G, B, false, true, Finite>(xr, gamma, beta, yr, n, s, ahead);
      } else {
        if (nt) normalize_row<V, X, T, Gs, G, B, NT, false, Finite>(xr, gamma, beta, yr, n, s, ahead);
        else normalize_row<V, X, T, Gs, G, B, false, false, Finite>(xr, gamma, beta, yr, n, s, ahead);
      }
    };
    if (finite) out.template operator()<kFiniteNarrowing<T>>();
    else out.template operator()<false>();
    if constexpr (Q) {
      quantize_row_simd<V>(p.quant, q_row, n, static_cast<std::uint8_t*>(t.q) + row * n, t.scales, row);
      if (float* handed = t.quant_y ? static_cast<float*>(t.quant_y) + row * n : nullptr)  // what it quantized
        for (std::int64_t i = 0; i < n; ++i) handed[i] = q_row[i];
    }
  }
  if (NT) V::sfence();
}

// Q: y in f32, quantized (rows_typed); T stays x's storage for gamma and beta.
template <class V, class X, class T, class Gs, bool NT, bool Q>
void rows_nt(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const typename Gs::Bits* gamma,
             const typename Gs::Bits* beta, float* q_row) {
  using Y = std::conditional_t<Q, F32, T>;
  if (p.has_gamma && p.has_beta) rows_typed<V, X, Y, Gs, true, true, NT, Q>(p, t, begin, end, gamma, beta, q_row);
  else if (p.has_gamma) rows_typed<V, X, Y, Gs, true, false, NT, Q>(p, t, begin, end, gamma, beta, q_row);
  else if (p.has_beta) rows_typed<V, X, Y, Gs, false, true, NT, Q>(p, t, begin, end, gamma, beta, q_row);
  else rows_typed<V, X, Y, Gs, false, false, NT, Q>(p, t, begin, end, gamma, beta, q_row);
}

// 16-bit rows up to kWideMax long get gamma and beta widened to f32 once per call, on the stack (2 x 16
// KiB): the output loop then converts x alone, not 3 vectors
// per 16 elements. Widening is exact, so y's bits are the same (docs/performance.md has the speed-up).
constexpr std::int64_t kWideMax = 4096;

template <class V, class X, class T, bool NT, bool Q = false>
void rows_wide(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  using Bits = typename T::Bits;
  // Staged by the generic driver (f32 gamma/beta beside 16-bit x, or an offset: w = C + gamma in f32).
  if (staged.gamma || staged.beta) return rows_nt<V, X, T, F32, NT, Q>(p, t, begin, end, staged.gamma, staged.beta, staged.y_row);
  const Bits* gamma = static_cast<const Bits*>(t.gamma);
  const Bits* beta = static_cast<const Bits*>(t.beta);
  const std::int64_t n = p.cols;
  if constexpr (!std::is_same_v<T, F32>) {
    if ((p.has_gamma || p.has_beta) && n <= kWideMax) {
      alignas(64) float g32[kWideMax], b32[kWideMax];
      const auto widen = [n](const Bits* src, float* dst) {
        constexpr int L = V::kLanes;
        std::int64_t i = 0;
        for (; i + L <= n; i += L) V::template store<F32>(dst + i, V::template load<T>(src + i));
        if (i < n) {
          const auto k = static_cast<typename V::M>((1u << (n - i)) - 1);
          V::template mask_store<F32>(k, dst + i, V::template maskz_load<T>(k, src + i));
        }
      };
      if (p.has_gamma) widen(gamma, g32);
      if (p.has_beta) widen(beta, b32);
      // Only what was widened is handed on (GCC 12 warned of an uninitialized array passed where it is unread).
      return rows_nt<V, X, T, F32, NT, Q>(p, t, begin, end, p.has_gamma ? g32 : nullptr, p.has_beta ? b32 : nullptr, staged.y_row);
    }
  }
  rows_nt<V, X, T, T, NT, Q>(p, t, begin, end, gamma, beta, staged.y_row);
}

// Rows [begin, end) of p, y in storage type T; x in T, or f32 where the rows are Add & Norm's f32 h beside
// 16-bit y (input_dtype(p)).
template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  if (p.op.epilogue == Epilogue::quantized) {  // y in f32, in cache, then q (rows_typed's Q)
    if constexpr (!std::is_same_v<T, F32>) {
      if (input_dtype(p) == DType::f32) return rows_wide<V, F32, T, false, true>(p, t, begin, end, staged);
    }
    return rows_wide<V, T, T, false, true>(p, t, begin, end, staged);
  }
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if constexpr (!std::is_same_v<T, F32>) {
    if (input_dtype(p) == DType::f32) {
      if (nt) return rows_wide<V, F32, T, true>(p, t, begin, end, staged);
      return rows_wide<V, F32, T, false>(p, t, begin, end, staged);
    }
  }
  if (nt) rows_wide<V, T, T, true>(p, t, begin, end, staged);
  else rows_wide<V, T, T, false>(p, t, begin, end, staged);
}

}  // namespace fast

namespace cr {

// The scalar slow paths (cr_exact.hpp, included by every TU that includes this file, before
// it): the medium test (decided) and the double-double path (exact_stats, exact_element).
namespace ex = ::lnorm::cpu::cr_exact;  // its tags are ours (storage_tags.hpp)

// Bytes of y above which it is streamed: larger than this machine's L3 (AMD EPYC Zen 5: 32 MiB per
// CCD). Not fast::'s 8 MiB: this compute-bound kernel lost with it (lnorm_gbench, medians of 5, two
// runs, 2026-12-01: f32 4096x2048 13.9, 13.9 -> 10.8, 10.5 GB/s; bf16 5.9, 5.9 -> 5.3, 5.3; f32
// 4096x1024 13.0, 14.3 -> 15.1, 14.8).
constexpr std::int64_t kStreamBytes = std::int64_t{32} << 20;
// Lanes of the statistics' sums: 4 accumulators of the layer's f64 lanes (32 on AVX-512, 16 on AVX2).
template <class V>
constexpr std::int64_t kSumLanes = 4 * V::kDLanes;

// Elements per block of the statistics' sums: each lane adds block/S terms afresh (S = kSumLanes), then the
// block's sum into its accumulator, so a term goes through block/S + n/block roundings instead of n/S;
// smallest for block = S·sqrt(n/S) (n = 4096 on 16 lanes: 41 roundings instead of 264, 6x fewer rows needing
// the exact statistics).
template <class V>
std::int64_t sum_block(std::int64_t n) {
  constexpr std::int64_t S = kSumLanes<V>;
  const auto b = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n) / S)));
  return S * (b > 1 ? b : 1);
}

// The fast statistics and the row's error bound (cr_exact.hpp's header, "Error bound").
struct FastStats {
  double m, m_lo, rstd;
  double b, a;      // E = b·(|t| + |β|) + a·|γ| bounds |y − y*| plus the rounding of y ± E
  double dmax;      // ≥ max |x − m| over the row
  bool finite, degenerate, certified;
};

// On the layer's f64 lanes, x re-read from storage (converted exactly) in each pass
// instead of kept in an f64 scratch row. Pass 1: s = Σ (x − x[0]) in blocks (plain adds),
// m + m_lo = x[0] + s/n (TwoSum). Pass 2: q2 = Σ (x − m)² (one FMA each, blocked) and max |x − m|.
// centred = false (RMSNorm): no pass 1, the mean is exactly 0 (m = m_lo = q = 0): pass 2 sums x² and the
// bound has no mean error. w_rel: the weights' relative error (cr_exact.hpp's row_bound).
template <class V, class T>
FastStats fast_stats(const typename T::Bits* x, std::int64_t n, double eps, bool centred, double w_rel) {
  using D = typename V::D;
  constexpr int DL = V::kDLanes;
  constexpr std::int64_t kLanes = kSumLanes<V>;
  const double nd = static_cast<double>(n);
  const std::int64_t n32 = n / kLanes * kLanes, block = sum_block<V>(n);
  const double c = V::first_pd(V::template maskz_load_d<T>(1, x));
  const D cv = V::set1_pd(c);
  D s0 = V::zero_pd(), s1 = s0, s2 = s0, s3 = s0;
  std::int64_t i = centred ? 0 : n;  // RMSNorm skips pass 1
  while (i < n32) {
    const std::int64_t block_end = i + block < n32 ? i + block : n32;
    D t0 = V::zero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += kLanes) {
      t0 = V::add_pd(t0, V::sub_pd(V::template load_d<T>(x + i), cv));
      t1 = V::add_pd(t1, V::sub_pd(V::template load_d<T>(x + i + DL), cv));
      t2 = V::add_pd(t2, V::sub_pd(V::template load_d<T>(x + i + 2 * DL), cv));
      t3 = V::add_pd(t3, V::sub_pd(V::template load_d<T>(x + i + 3 * DL), cv));
    }
    s0 = V::add_pd(s0, t0), s1 = V::add_pd(s1, t1), s2 = V::add_pd(s2, t2), s3 = V::add_pd(s3, t3);
  }
  for (; i < n; i += DL) {  // ≤ 3 full groups of DL, then a masked tail (lanes outside: +0)
    if (n - i >= DL) {
      s0 = V::add_pd(s0, V::sub_pd(V::template load_d<T>(x + i), cv));
    } else {
      const auto k = static_cast<typename V::MD>((1u << (n - i)) - 1);
      s0 = V::add_pd(s0, V::maskz_sub_pd(k, V::template maskz_load_d<T>(k, x + i), cv));
    }
  }
  const double s = hsum_pd<V>(V::add_pd(V::add_pd(s0, s1), V::add_pd(s2, s3)));
  const double q = centred ? s / nd : 0.0;
  double m = 0, m_lo = 0;
  if (centred) ex::two_sum(c, q, m, m_lo);  // m + m_lo == c + q exactly
  const D mv = V::set1_pd(m);
  D p0 = V::zero_pd(), p1 = p0, p2 = p0, p3 = p0, mx = p0;
  for (i = 0; i < n32;) {  // blocked as pass 1
    const std::int64_t block_end = i + block < n32 ? i + block : n32;
    D t0 = V::zero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += kLanes) {
      const D d0 = V::sub_pd(V::template load_d<T>(x + i), mv), d1 = V::sub_pd(V::template load_d<T>(x + i + DL), mv);
      const D d2 = V::sub_pd(V::template load_d<T>(x + i + 2 * DL), mv), d3 = V::sub_pd(V::template load_d<T>(x + i + 3 * DL), mv);
      t0 = V::fmadd_pd(d0, d0, t0), t1 = V::fmadd_pd(d1, d1, t1), t2 = V::fmadd_pd(d2, d2, t2), t3 = V::fmadd_pd(d3, d3, t3);
      mx = V::max_pd(V::max_pd(V::max_pd(V::abs_pd(d0), V::abs_pd(d1)), V::max_pd(V::abs_pd(d2), V::abs_pd(d3))), mx);
    }
    p0 = V::add_pd(p0, t0), p1 = V::add_pd(p1, t1), p2 = V::add_pd(p2, t2), p3 = V::add_pd(p3, t3);
  }
  for (; i < n; i += DL) {
    D d;
    if (n - i >= DL) {
      d = V::sub_pd(V::template load_d<T>(x + i), mv);
    } else {
      const auto k = static_cast<typename V::MD>((1u << (n - i)) - 1);
      d = V::maskz_sub_pd(k, V::template maskz_load_d<T>(k, x + i), mv);
    }
    p0 = V::fmadd_pd(d, d, p0);
    mx = V::max_pd(V::abs_pd(d), mx);
  }
  const double q2 = hsum_pd<V>(V::add_pd(V::add_pd(p0, p1), V::add_pd(p2, p3)));
  const double v = q2 / nd + eps, rstd = 1.0 / std::sqrt(v);
  double ml[DL];
  V::store_pd(ml, mx);
  double dmax = ml[0];
  for (int l = 1; l < DL; ++l) dmax = ml[l] > dmax ? ml[l] : dmax;

  FastStats st{};
  st.m = m, st.m_lo = m_lo, st.rstd = rstd;
  st.dmax = dmax * (1 + 0x1p-50);  // each |x − m| was rounded to nearest
  st.finite = std::isfinite(s) && std::isfinite(q2);
  st.degenerate = v == 0;
  // cr_exact.hpp's "Error bound" with this file's sums: a term's partial sums round ≤ block/kLanes times in
  // its block, ≤ ceil(n32/block) in s0..s3 (p0..p3), ≤ 4 in the tail loop (3 full groups and the masked
  // one, all into s0), 2 in the accumulator folds and ≤ 3 in hsum_pd's pairwise sum of ≤ 8 lanes, 3 spare.
  const double k = static_cast<double>(block / kLanes + (n32 + block - 1) / block) + 12;
  const ex::RowBound bound = ex::row_bound(k, nd, q, m_lo, q2, v, rstd, centred, w_rel);
  st.b = bound.b, st.a = bound.a, st.certified = bound.certified;
  return st;
}

// max |v| over n storage values (NaN lanes drop out: vmaxpd returns its second operand, the running
// maximum, where the first is NaN; their elements fail the test or give NaN either way).
template <class V, class T>
double max_abs(const typename T::Bits* p, std::int64_t n) {
  using D = typename V::D;
  D mx = V::zero_pd();
  constexpr int DL = V::kDLanes;
  for (std::int64_t i = 0; i < n; i += DL) {
    const auto k = static_cast<typename V::MD>(n - i >= DL ? (1u << DL) - 1 : (1u << (n - i)) - 1);
    mx = V::max_pd(V::abs_pd(n - i >= DL ? V::template load_d<T>(p + i) : V::template maskz_load_d<T>(k, p + i)), mx);
  }
  double l[DL];
  V::store_pd(l, mx);
  double r = l[0];
  for (int j = 1; j < DL; ++j) r = l[j] > r ? l[j] : r;
  return r;
}

// How a row sees its parameters: staged in f64 once per call (isa.hpp Staged64): w = C + gamma as gamma (w_hi)
// + w_lo (null when every w fits one f64), beta.
struct Params {
  const double* w_lo = nullptr;
  bool centred = true;
};

// Element i that the vector test could not settle (the scalar test with the
// element's own E, then the double-double path, its statistics computed once per row on first need).
template <class X, class T, class Gs, bool G, bool B>
typename T::Bits settle(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta, std::int64_t n,
                        double eps, std::int64_t i, const FastStats& s, ex::ExactStats& es, bool& have_exact, const Params& pr,
                        ::lnorm::cpu::CrPaths& paths) {
  using E = T;
  const double xv = ex::to_double<X>(x[i]);
  const double g = G ? ex::to_double<Gs>(gamma[i]) : 1.0, g_lo = G && pr.w_lo ? pr.w_lo[i] : 0.0;  // w = g + g_lo exactly
  const double b = B ? ex::to_double<Gs>(beta[i]) : 0.0;
  double t = (xv - s.m) * s.rstd;
  if (G) t = t * g;
  const double y = B ? t + b : t;
  const double e = s.b * (std::abs(t) + std::abs(b)) + (s.a * std::abs(g) + 0x1p-1000);
  typename T::Bits out;
  if (ex::decided<E>(y, e, out)) {
    ++paths.medium;
    return out;
  }
  ++paths.exact;
  if (!have_exact) {
    es = ex::exact_stats<X>(x, n, eps, pr.centred);
    have_exact = true;
    ++paths.exact_rows;
  }
  return ex::exact_element<E>(xv, g, b, es, g_lo);
}

// One E for the whole row: E at the row's largest |t| and |β| (FastStats' b and a; gmax, bmax: the row's largest
// |γ| and |β|), bounding |y − y*| plus the rounding of y ± E for every element of the row.
inline double row_error(const FastStats& s, double gmax, double bmax) {
  const double t_max = s.dmax * s.rstd * gmax * (1 + 0x1p-40);
  const double e_row = (s.b * (t_max + bmax) + s.a * gmax + 0x1p-1000) * (1 + 0x1p-40);
  return e_row == e_row ? e_row : INFINITY;  // a NaN bound would let lo and hi agree
}

// The output pass: y = ((x − m)·rstd)·γ + β in f64 on two vectors of the layer's f64 lanes at a time (L elements),
// Ziv's test against one E for the row (cr_exact.hpp's header, step 3) on the L f32 lanes they round to: f32 by
// rounding y ± E (differ_bits); f16/bf16 by y's f32 rounding's distance from T's midpoint patterns (near_mid16_f).
// A whole certified vector is stored from those f32 lanes (f16/bf16: y32's rounding, y*'s where the test passed);
// otherwise the certified lanes are stored rounded once from f64 (f16/bf16 through round-to-odd f32) and the
// others settled one by one. Testing and narrowing L lanes at once, not L/2: on AVX2 the f64-lane form took 45
// instructions per 4 bf16 elements, GCC re-materializing the test's constants and the mask branch each time.
template <class V, class X, class T, class Gs, bool G, bool B, bool NT>
void normalize_row(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta,
                   typename T::Bits* y, std::int64_t n, double eps, const FastStats& s, double gmax, double bmax,
                   const Params& pr, ::lnorm::cpu::CrPaths& paths) {
  using D = typename V::D;
  using MD = typename V::MD;
  constexpr int DL = V::kDLanes;
  const double e_row = row_error(s, gmax, bmax);
  const double y_min = std::fmax(e_row * 0x1p25, std::is_same_v<T, F16> ? 0x1p-14 : 0x1p-126) * (1 + 0x1p-20);
  const float y_min_f = static_cast<float>(std::fmin(y_min, 0x1p127));
  const D mv = V::set1_pd(s.m), rv = V::set1_pd(s.rstd), ev = V::set1_pd(e_row);
  ex::ExactStats es{};
  bool have_exact = false;
  constexpr int L = V::kLanes;
  using F = typename V::F;
  using M = typename V::M;
  // y (and, for f32, its lower end y − E) on lanes [at, at + count) of one f64 vector; +0 past count.
  const auto value = [&](std::int64_t at, std::int64_t count) LNORM_ALWAYS_INLINE {
    const bool whole = count == DL;
    const auto k = static_cast<MD>((1u << count) - 1);
    const auto ld = [&](const typename X::Bits* p) LNORM_ALWAYS_INLINE { return whole ? V::template load_d<X>(p) : V::template maskz_load_d<X>(k, p); };
    const auto ldp = [&](const typename Gs::Bits* p) LNORM_ALWAYS_INLINE { return whole ? V::template load_d<Gs>(p) : V::template maskz_load_d<Gs>(k, p); };
    D v = V::mul_pd(V::sub_pd(ld(x + at), mv), rv);
    if constexpr (G) v = V::mul_pd(v, ldp(gamma + at));  // w_hi: C + γ rounded to f64 where it does not fit (w_rel)
    if constexpr (B) v = V::add_pd(v, ldp(beta + at));
    return v;
  };
  const auto group = [&](std::int64_t i, std::int64_t count, bool stream) LNORM_ALWAYS_INLINE {
    const std::int64_t c0 = count < DL ? count : DL, c1 = count - c0;
    D v0 = value(i, c0), v1 = c1 > 0 ? value(i + DL, c1) : V::zero_pd();
    F out;  // the L lanes' f32 roundings: of y − E (f32), of y (f16/bf16)
    M fail;
    if constexpr (std::is_same_v<T, F32>) {
      const D hi0 = V::add_pd(v0, ev), hi1 = V::add_pd(v1, ev);
      v0 = V::sub_pd(v0, ev), v1 = V::sub_pd(v1, ev);  // rounds as y where certified
      out = V::join_ps(v0, v1);
      fail = V::differ_bits(out, V::join_ps(hi0, hi1));
    } else {
      out = V::join_ps(v0, v1);
      fail = V::template near_mid16_f<T>(out, y_min_f);
    }
    fail = static_cast<M>(fail & ((1u << count) - 1));
    if (fail == 0 && count == L) {
      if (stream) V::template stream<T>(y + i, out);
      else V::template store<T>(y + i, out);
      return;
    }
    const auto f0 = static_cast<MD>(fail & ((1u << DL) - 1)), f1 = static_cast<MD>(fail >> DL);
    V::template mask_store_d<T>(static_cast<MD>(((1u << c0) - 1) & ~f0), y + i, v0);
    if (c1 > 0) V::template mask_store_d<T>(static_cast<MD>(((1u << c1) - 1) & ~f1), y + i + DL, v1);
    for (unsigned f = fail; f != 0; f &= f - 1) {
      const std::int64_t j = i + __builtin_ctz(f);
      y[j] = settle<X, T, Gs, G, B>(x, gamma, beta, n, eps, j, s, es, have_exact, pr, paths);
    }
  };
  std::int64_t i = 0;
  if constexpr (NT) {
    const std::int64_t head = head_to_align(y, L * static_cast<std::int64_t>(sizeof(typename T::Bits)));
    const std::int64_t h = head < n ? head : n;
    for (; i < h; i += L) group(i, h - i < L ? h - i : L, false);
    for (i = h; i + L <= n; i += L) group(i, L, true);
  } else {
    for (; i + L <= n; i += L) group(i, L, false);
  }
  if (i < n) group(i, n - i, false);
}

// What every row of a call shares: the parameters' view (Params), the weights' relative error w_rel = u where some
// C + γ did not fit one f64 (w_hi's rounding, in the bound; |w| ≤ |w_hi|·(1 + 2^-53)), the largest |γ| and |β|.
template <class V, class Gs, bool G, bool B>
struct RowParams {
  Params pr;
  double w_rel, gmax, bmax;
  RowParams(const Problem& p, const ::lnorm::cpu::Staged64& staged)
      : pr{G ? staged.gamma_lo : nullptr, p.op.norm == Norm::layernorm},
        w_rel(pr.w_lo ? ex::kU : 0.0),
        gmax(G ? max_abs<V, Gs>(staged.gamma, p.cols) * (1 + 0x1p-52) : 1.0),
        bmax(B ? max_abs<V, Gs>(staged.beta, p.cols) : 0.0) {}
};

// A row whose bound is not small (not seen outside constructed rows): its statistics by double-double, mean and rstd
// written, every element y* rounded once to T and handed to store(i, bits). false (nothing written) where they are
// not finite: the caller hands the row to welford_row.
template <class X, class T, bool G, bool B, class Store>
bool exact_row(const typename X::Bits* xr, const double* gamma, const double* beta, std::int64_t n, double eps, const Params& pr,
               float* mean, float* rstd, std::int64_t row, ::lnorm::cpu::CrPaths& paths, Store store) {
  ex::ExactStats es = ex::exact_stats<X>(xr, n, eps, pr.centred);
  if (!es.finite) return false;
  if (mean) mean[row] = static_cast<float>(es.m_hi + es.m_lo);
  if (rstd) rstd[row] = static_cast<float>(es.r_hi + es.r_lo);
  paths.exact += n;
  ++paths.exact_rows;
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = G ? gamma[i] : 1.0, g_lo = G && pr.w_lo ? pr.w_lo[i] : 0.0;
    store(i, ex::exact_element<T>(ex::to_double<X>(xr[i]), g, B ? beta[i] : 0.0, es, g_lo));
  }
  return true;
}

template <class V, class X, class T, class Gs, bool G, bool B, bool NT>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& staged) {
  using Bits = typename T::Bits;
  using XBits = typename X::Bits;
  const XBits* x = static_cast<const XBits*>(t.x);
  const typename Gs::Bits* gamma = staged.gamma;
  const typename Gs::Bits* beta = staged.beta;
  Bits* y = static_cast<Bits*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const RowParams<V, Gs, G, B> rp(p, staged);
  const Params& pr = rp.pr;
  const double w_rel = rp.w_rel, gmax = rp.gmax, bmax = rp.bmax;
  ::lnorm::cpu::CrPaths paths;
  paths.elements = (end - begin) * n;
  for (std::int64_t row = begin; row < end; ++row) {
    const XBits* xr = x + row * n;
    Bits* yr = y + row * n;
    const FastStats s = fast_stats<V, X>(xr, n, p.eps, pr.centred, w_rel);
    if (!s.finite || s.degenerate) {  // NaN/Inf in the row, or var + eps == 0: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    if (s.certified) {
      if (mean) mean[row] = static_cast<float>(s.m + s.m_lo);
      if (rstd) rstd[row] = static_cast<float>(s.rstd);
      if (NT && head_to_align(yr, 64) >= 0) normalize_row<V, X, T, Gs, G, B, NT>(xr, gamma, beta, yr, n, p.eps, s, gmax, bmax, pr, paths);
      else normalize_row<V, X, T, Gs, G, B, false>(xr, gamma, beta, yr, n, p.eps, s, gmax, bmax, pr, paths);
      continue;
    }
    // The bound is not small (not seen outside constructed rows): every element by double-double.
    if (!exact_row<X, T, G, B>(xr, gamma, beta, n, p.eps, pr, mean, rstd, row, paths, [&](std::int64_t i, Bits b) { yr[i] = b; }))
      welford_row(p, t, row);
  }
  if (NT) V::sfence();
  ::lnorm::cpu::cr_paths_add(paths);
}

// The quantized epilogue (Problem::quant): each row's y in f64 into st.y_row — normalize_row's arithmetic, bounded
// by the same E — or, for a row whose bound is not small, y* rounded to f32 exactly (|y − y*| ≤ 2^-24|y| + 2^-150);
// quantize_row_exact (quant_exact.hpp) decides q and the scales from them, exactly.
template <class V, class X, class Gs, bool G, bool B>
void rows_quantized(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& staged) {
  using D = typename V::D;
  using XBits = typename X::Bits;
  constexpr int DL = V::kDLanes;
  const XBits* x = static_cast<const XBits*>(t.x);
  const typename Gs::Bits* gamma = staged.gamma;
  const typename Gs::Bits* beta = staged.beta;
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  double* y = staged.y_row;
  const std::int64_t n = p.cols;
  const RowParams<V, Gs, G, B> rp(p, staged);
  const Params& pr = rp.pr;
  const double w_rel = rp.w_rel, gmax = rp.gmax, bmax = rp.bmax;
  ::lnorm::cpu::CrPaths paths;
  paths.elements = (end - begin) * n;
  for (std::int64_t row = begin; row < end; ++row) {
    const XBits* xr = x + row * n;
    const FastStats s = fast_stats<V, X>(xr, n, p.eps, pr.centred, w_rel);
    if (!s.finite || s.degenerate) {  // NaN/Inf in the row, or var + eps == 0: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    ::lnorm::cpu::ExactQuantRow er;
    er.y = y, er.n = n, er.x = xr, er.x_dtype = input_dtype(p), er.eps = p.eps, er.centred = pr.centred;
    er.w_hi = G ? gamma : nullptr, er.w_lo = G ? pr.w_lo : nullptr, er.beta = B ? beta : nullptr;
    if (s.certified) {
      if (mean) mean[row] = static_cast<float>(s.m + s.m_lo);
      if (rstd) rstd[row] = static_cast<float>(s.rstd);
      const D mv = V::set1_pd(s.m), rv = V::set1_pd(s.rstd);
      std::int64_t i = 0;
      for (; i + DL <= n; i += DL) {
        D v = V::mul_pd(V::sub_pd(V::template load_d<X>(xr + i), mv), rv);
        if constexpr (G) v = V::mul_pd(v, V::template load_d<Gs>(gamma + i));
        if constexpr (B) v = V::add_pd(v, V::template load_d<Gs>(beta + i));
        V::store_pd(y + i, v);
      }
      for (; i < n; ++i) {  // the same operations, one lane
        double v = (ex::to_double<X>(xr[i]) - s.m) * s.rstd;
        if constexpr (G) v = v * gamma[i];
        if constexpr (B) v = v + beta[i];
        y[i] = v;
      }
      er.e_abs = row_error(s, gmax, bmax);
    } else {
      if (!exact_row<X, F32, G, B>(xr, gamma, beta, n, p.eps, pr, mean, rstd, row, paths, [&](std::int64_t i, float v) { y[i] = v; })) {
        welford_row(p, t, row);
        continue;
      }
      er.e_abs = 0x1p-150, er.e_rel = 0x1p-24;
    }
    ::lnorm::cpu::quantize_row_exact(p.quant, er, static_cast<std::uint8_t*>(t.q) + row * n, t.scales, row);
  }
  ::lnorm::cpu::cr_paths_add(paths);
}

template <class V, class X>
void rows_quantized_affine(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& st) {
  if (p.has_gamma && p.has_beta) rows_quantized<V, X, F64, true, true>(p, t, begin, end, st);
  else if (p.has_gamma) rows_quantized<V, X, F64, true, false>(p, t, begin, end, st);
  else if (p.has_beta) rows_quantized<V, X, F64, false, true>(p, t, begin, end, st);
  else rows_quantized<V, X, F64, false, false>(p, t, begin, end, st);
}

template <class V, class X, class T, bool NT>
void rows_affine(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& st) {
  if (p.has_gamma && p.has_beta) rows_typed<V, X, T, F64, true, true, NT>(p, t, begin, end, st);
  else if (p.has_gamma) rows_typed<V, X, T, F64, true, false, NT>(p, t, begin, end, st);
  else if (p.has_beta) rows_typed<V, X, T, F64, false, true, NT>(p, t, begin, end, st);
  else rows_typed<V, X, T, F64, false, false, NT>(p, t, begin, end, st);
}

// Rows [begin, end) of p, y in storage type T; x in T, or f32 where the rows are Add & Norm's f32 h beside
// 16-bit y (input_dtype(p)); gamma and beta as staged (Staged64).
template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& st) {
  if (p.op.epilogue == Epilogue::quantized) {
    if constexpr (!std::is_same_v<T, F32>) {
      if (input_dtype(p) == DType::f32) return rows_quantized_affine<V, F32>(p, t, begin, end, st);
    }
    return rows_quantized_affine<V, T>(p, t, begin, end, st);
  }
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if constexpr (!std::is_same_v<T, F32>) {
    if (input_dtype(p) == DType::f32) {
      if (nt) return rows_affine<V, F32, T, true>(p, t, begin, end, st);
      return rows_affine<V, F32, T, false>(p, t, begin, end, st);
    }
  }
  if (nt) rows_affine<V, T, T, true>(p, t, begin, end, st);
  else rows_affine<V, T, T, false>(p, t, begin, end, st);
}

}  // namespace cr

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
