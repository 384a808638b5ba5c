// avx2_cr — correctly rounded LayerNorm for f32, f16 and bf16 storage, with AVX2 + FMA (+ F16C).
// Built with -mavx2 -mfma -mf16c; called only after the CPU check in avx2_kernel.cpp. avx512_cr
// (avx512_body.hpp) runs the same algorithm and bound on 8 f64 lanes, with its own rounding count k.
//
// Algorithm (Ziv's rounding test): compute y in f64 with a PROVEN error bound E, round y − E and y + E
// to the output format; where both ends round the same, that is y*'s rounding (rounding is monotone);
// elsewhere (y* near a midpoint of the format, an exact tie, or an exact zero) take a slower path.
//   1. c = x[0];  s = Σ (x − c) in 16 f64 lanes, blocks of 16·sqrt(n/16) (plain adds);  q = s/n;
//      m + m_lo = c + q (TwoSum). The same pass stores the row in f64 (scratch: L1/L2) and its max/min.
//   2. q2 = Σ (x − m)² in 16 f64 lanes, blocked too (one FMA each);  v = q2/n + eps;  rstd = 1/sqrt(v)
//   3. y = ((x − m)·rstd)·γ + β in f64 (γ, β converted to f64 once per call), tested against one
//      E_row per row, ≥ every element's E (below; |t| ≤ max|x − m|·rstd·max|γ|):
//      f32: lo = y − E_row and hi = y + E_row by vcvtpd2ps, compared;
//      f16/bf16: y to f32 once (y32); its f16/bf16 rounding (vcvtps2ph / integer) is y*'s when y32's bit
//      pattern is ≥ 2 f32 ulps from a midpoint pattern (low 13 bits 0x1000 / low 16 bits 0x8000) and
//      |y32| ≥ max(2^25·E_row, smallest normal): then |y* − y32| < 2 f32 ulps (round8_single).
//   4. "medium" path, scalar, per element the vector test missed: the same y with its own (tighter) E,
//      both ends rounded exactly (f16/bf16 through round-to-odd f32, which makes two roundings one).
//   5. "exact" path, per element the medium test missed: the row's mean and rstd recomputed once in
//      double-double (TwoSum on every term and on the sum of the error terms, Σd² with d = x − m as a
//      double-double and TwoProd, one Newton step for rstd), y in double-double (~2^-100 of the terms,
//      renormalized), compared with the two midpoints around it (avx2_cr_exact.hpp). Within 2^-88 of
//      the terms' size of a midpoint (or of 0) the value is taken to be an exact tie — or, where var
//      and eps differ by more than 2^40, a tie of the dominant term nudged by −t·min/max/2 (rstd sits
//      just below 1/sqrt(max(var, eps))). This is the one unproven step: it held on every element of
//      the verify suite (seeds 1-5 and 24), but a near-tie closer than 2^-88 of another kind would be
//      misrounded; deciding those needs exact (multi-word) arithmetic, as the reference does. One such
//      kind is decided exactly: y within the slack of 0 with β = 0, where y* = (n·x − Σx)·rstd·w/n and Σx is
//      kept exactly in fixed point (FixedSum): rows whose mean is far below their spread (±2^127 pairs and
//      one small value: the mean at 2^-113 of the spread, found by Add & Norm's cancelling sums).
// Rows with NaN/Inf, or var + eps == 0, take the scalar welford path (its NaN rules), as before.
//
// Error bound (u = 2^-53; block = 16·ceil(sqrt(n/16)); k = block/16 + ceil(n/block) + 9 ≥ the
// roundings any term's partial sums went through: ≤ block/16 in its block, ≤ ceil(n/block) between
// blocks, ≤ 2 in the tail, 4 in the folds; γ_j ≈ j·u; all inputs are exact in f64):
//   - s: each x − c rounds by u|x − c|, the sums by γ_k·Σ|x − c| → |s − Σ(x − c)| ≤ γ_{k+1}·a1,
//     a1 = Σ|x − c| ≤ sqrt(n·Σ(x − m)²) + n·(|m_lo| + |q|) (Cauchy–Schwarz about m; m + m_lo − c = q),
//     and Σ(x − m)² ≤ q2·(1 + γ_{k+3}), so a1/n ≤ sqrt(q2/n)·(1 + 2^-20) + |m_lo| + |q|.
//   - mean: y uses m, not m + m_lo:  em = |m_lo| + u|q| + γ_{k+1}·a1/n ≥ |m − mean*|.
//   - q2 = Σ(x − m)²·(1 + θ), |θ| ≤ γ_{k+3} (x − m and the FMA sums), and Σ(x − m)²/n = var* + (m − mean*)²,
//     so with two more roundings (/n, +eps): |v/v* − 1| ≤ ρv = γ_{k+5} + em²/v·(1 + small).
//   - rstd: sqrt and division round once each: |rstd/rstd* − 1| ≤ ρr = ρv/2·(1 + ρv) + 2u.
//   - t = (x − mean* − δ)·rstd*·γ·(1 + η), |δ| ≤ em, |η| ≤ ρr + 3u (x − m, ·rstd, ·γ), so
//     |t − γz*| ≤ (ρr + 3u)(1 + 2^-18)·|t| + em·rstd·|γ|·(1 + 2^-18)   (ρr ≤ 2^-22 is checked per row)
//   - y = t + β rounds by u(|t| + |β|), and lo = y − E, hi = y + E by u(|y| + E) each; so
//     E = b·(|t| + |β|) + a·|γ| + 2^-1000 with b = (ρv/2·1.02 + 8u)(1 + 2^-16), a = em·rstd·(1 + 2^-16)
//     keeps lo ≤ y* ≤ hi (the 2^-16 also covers computing E itself, 3 roundings; 2^-1000 f64 underflow).
//   A row whose ρv > 2^-30 (the rows of the verify suite never have it: ρv ≈ k·2^-53) goes to the exact
//   path whole. Typical sizes, n = 4096: k = 41, ρv ≈ 2^-47, E ≈ 2^-48·(|t| + |β|) + 2^-46·|γ|.
//
// How often each path runs (tests/test_avx2_cr.cpp prints it; 64x4096, x ~ N(0.5, 2), γ ~ N(1, 0.25),
// β ~ N(0, 1)):
//   f32:  2 of 262144 elements by the scalar f64 test (7.6e-6), 1 by double-double (3.8e-6, 1 row of 64)
//   f16:  100 by the scalar test (3.8e-4: y32 within 1 f32 ulp of an f16 midpoint pattern), 0 double-double
//   bf16: 12 by the scalar test (4.6e-5), 0 double-double
// Near-zero y (β ≈ −γz) are where E is large against ulp(y): they make nearly all of the slow cases.
//
// Speed: compute-bound, ~1.5 cycles/element in the output pass (f64 on 4 lanes, two vcvtpd2ps per 4 f32
// outputs for the two ends, vcvtps2ph for f16) and ~0.6 in the statistics; 0.42-0.69x avx2 in one run
// (`lnorm bench --kernel avx2 --kernel avx2_cr --quick`). What decided the shape of the code (the f64
// scratch row, one E per row, blocked sums, midpoint patterns for 16-bit) is in docs/performance.md.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "avx2_cr_exact.hpp"
#include "isa.hpp"

namespace lnorm::cpu::avx2_cr {
namespace {

// Path counts over the process (all threads), added once per rows() call: path_counts() reads them.
long long g_elements = 0, g_medium = 0, g_exact = 0, g_exact_rows = 0;

// 8 elements widened to f64 (exact), lanes 0-3 in a, 4-7 in b.
template <class T>
inline __m256 load8(const typename T::Bits* p, __m256d& a, __m256d& b) {
  __m256 f;
  if constexpr (std::is_same_v<T, F32>) {
    f = _mm256_loadu_ps(p);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<T, F16>) f = _mm256_cvtph_ps(h);
    else f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  a = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
  b = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  return f;  // the same 8 values in f32 (exact)
}

// The last count < 8 elements, padded with `pad`.
template <class T>
inline __m256 load8_tail(const typename T::Bits* p, std::int64_t count, typename T::Bits pad, __m256d& a, __m256d& b) {
  typename T::Bits buf[8];
  for (std::int64_t k = 0; k < 8; ++k) buf[k] = k < count ? p[k] : pad;
  return load8<T>(buf, a, b);
}

inline double hsum(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// Elements per block of the statistics' sums: each lane adds block/16 terms afresh, then the block's
// sum into its running total, so a term goes through block/16 + n/block roundings instead of n/16:
// smallest for block = 16·sqrt(n/16) (n = 4096: 41 instead of 264, 6x fewer rows needing the
// double-double statistics).
inline std::int64_t sum_block(std::int64_t n) {
  return 16 * std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n) / 16))));
}

// The fast statistics and the row's error bound (file header, "Error bound").
struct FastStats {
  double m, m_lo, rstd;  // mean = m + m_lo (m_lo only reported and bounded, not used per element)
  double b, a;           // E = b·(|t| + |β|) + a·|γ| bounds |y − y*| plus the rounding of y ± E
  double dmax;           // ≥ max |x − m| over the row (for the row-wide E of the vector test)
  bool finite;           // no NaN/Inf in the row's sums
  bool degenerate;       // var + eps == 0: rstd = +inf, the welford path's NaN rule
  bool certified;        // the bound is small enough to be worth testing (else every element is exact)
};

// Pass 1 converts the row to f64 into xd (padded with x[0] to a multiple of 8) and sums x − x[0];
// pass 2 reads xd back (from L1/L2) for Σ (x − m)².
// centred = false (RMSNorm): the mean is exactly 0: pass 2 sums x² (m = m_lo = q = 0), and the bound has no
// mean error. w_rel: the weights' relative error (row_bound).
template <class T>
FastStats fast_stats(const typename T::Bits* x, std::int64_t n, double eps, double* xd, bool centred, double w_rel) {
  const typename T::Bits x0 = x[0];
  const double c = to_double<T>(x0), nd = static_cast<double>(n);
  const __m256d cv = _mm256_set1_pd(c);
  // Pass 1: s = Σ (x − c) in 16 f64 lanes (4 accumulators x 4 lanes), plain adds.
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, a, b, e, f;
  __m256 hi = _mm256_set1_ps(static_cast<float>(c)), lo = hi;  // the row's largest and smallest x
  const std::int64_t n16 = n / 16 * 16, block = sum_block(n);
  std::int64_t i = 0;
  while (i < n16) {  // blocks of kBlock elements summed afresh, then added to s0..s3
    const std::int64_t block_end = std::min(i + block, n16);
    __m256d t0 = _mm256_setzero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += 16) {
      const __m256 v = load8<T>(x + i, a, b), w = load8<T>(x + i + 8, e, f);
      hi = _mm256_max_ps(hi, _mm256_max_ps(v, w));
      lo = _mm256_min_ps(lo, _mm256_min_ps(v, w));
      _mm256_storeu_pd(xd + i, a), _mm256_storeu_pd(xd + i + 4, b);
      _mm256_storeu_pd(xd + i + 8, e), _mm256_storeu_pd(xd + i + 12, f);
      t0 = _mm256_add_pd(t0, _mm256_sub_pd(a, cv));
      t1 = _mm256_add_pd(t1, _mm256_sub_pd(b, cv));
      t2 = _mm256_add_pd(t2, _mm256_sub_pd(e, cv));
      t3 = _mm256_add_pd(t3, _mm256_sub_pd(f, cv));
    }
    s0 = _mm256_add_pd(s0, t0), s1 = _mm256_add_pd(s1, t1), s2 = _mm256_add_pd(s2, t2), s3 = _mm256_add_pd(s3, t3);
  }
  for (; i < n; i += 8) {  // at most one full block of 8, then the tail padded with x[0] (x − c = 0)
    const __m256 v = n - i >= 8 ? load8<T>(x + i, a, b) : load8_tail<T>(x + i, n - i, x0, a, b);
    hi = _mm256_max_ps(hi, v);
    lo = _mm256_min_ps(lo, v);
    _mm256_storeu_pd(xd + i, a), _mm256_storeu_pd(xd + i + 4, b);
    s0 = _mm256_add_pd(s0, _mm256_sub_pd(a, cv));
    s1 = _mm256_add_pd(s1, _mm256_sub_pd(b, cv));
  }
  const double s = hsum(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  const double q = centred ? s / nd : 0.0;
  double m = 0, m_lo = 0;
  if (centred) two_sum(c, q, m, m_lo);  // m + m_lo == c + q exactly
  // Pass 2: q2 = Σ (x − m)², one FMA per element, 16 lanes.
  const __m256d mv = _mm256_set1_pd(m);
  __m256d p0 = _mm256_setzero_pd(), p1 = p0, p2 = p0, p3 = p0;
  for (i = 0; i < n16;) {  // blocked as pass 1
    const std::int64_t block_end = std::min(i + block, n16);
    __m256d t0 = _mm256_setzero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += 16) {
      a = _mm256_sub_pd(_mm256_loadu_pd(xd + i), mv), b = _mm256_sub_pd(_mm256_loadu_pd(xd + i + 4), mv);
      e = _mm256_sub_pd(_mm256_loadu_pd(xd + i + 8), mv), f = _mm256_sub_pd(_mm256_loadu_pd(xd + i + 12), mv);
      t0 = _mm256_fmadd_pd(a, a, t0), t1 = _mm256_fmadd_pd(b, b, t1);
      t2 = _mm256_fmadd_pd(e, e, t2), t3 = _mm256_fmadd_pd(f, f, t3);
    }
    p0 = _mm256_add_pd(p0, t0), p1 = _mm256_add_pd(p1, t1), p2 = _mm256_add_pd(p2, t2), p3 = _mm256_add_pd(p3, t3);
  }
  for (; i < n; i += 8) {  // the padding masked off
    const __m256d count = _mm256_set1_pd(static_cast<double>(n - i));
    a = _mm256_and_pd(_mm256_sub_pd(_mm256_loadu_pd(xd + i), mv), _mm256_cmp_pd(_mm256_setr_pd(0, 1, 2, 3), count, _CMP_LT_OQ));
    b = _mm256_and_pd(_mm256_sub_pd(_mm256_loadu_pd(xd + i + 4), mv), _mm256_cmp_pd(_mm256_setr_pd(4, 5, 6, 7), count, _CMP_LT_OQ));
    p0 = _mm256_fmadd_pd(a, a, p0), p1 = _mm256_fmadd_pd(b, b, p1);
  }
  const double q2 = hsum(_mm256_add_pd(_mm256_add_pd(p0, p1), _mm256_add_pd(p2, p3)));
  const double v = q2 / nd + eps, rstd = 1.0 / std::sqrt(v);

  FastStats st{};
  st.m = m, st.m_lo = m_lo, st.rstd = rstd;
  alignas(32) float his[8], los[8];
  _mm256_store_ps(his, hi);
  _mm256_store_ps(los, lo);
  double xmax = his[0], xmin = los[0];
  for (int k = 1; k < 8; ++k) xmax = std::max(xmax, static_cast<double>(his[k])), xmin = std::min(xmin, static_cast<double>(los[k]));
  st.dmax = std::max(xmax - m, m - xmin) * (1 + 0x1p-50);  // x − m rounded up
  st.finite = std::isfinite(s) && std::isfinite(q2);  // s: a NaN/Inf row, for both ops
  st.degenerate = v == 0;
  // The bound (file header, "Error bound"; avx2_cr_exact.hpp's row_bound). Roundings any term's
  // partial sums went through: ≤ block/16 in its block, ≤ ceil(n/block) in s0..s3, ≤ 2 in the tail
  // loop, 4 in the folds, 3 spare (1 more for x − c or the square, counted in row_bound).
  const double k = static_cast<double>(block / 16 + (n16 + block - 1) / block) + 9;
  const RowBound bound = row_bound(k, nd, q, m_lo, q2, v, rstd, centred, w_rel);
  st.b = bound.b, st.a = bound.a, st.certified = bound.certified;
  return st;
}

// One row: its storage, and f64 copies of x, w = C + gamma and beta (gd, bd: null when absent; gl: w's low
// parts, null when every C + gamma fits one f64).
template <class T>
struct Row {
  const typename T::Bits* x;
  typename T::Bits* y;
  const double *xd, *gd, *bd, *gl;
  std::int64_t n;
  double eps;
  bool centred;
};

// Counts of one rows() call.
struct Counts {
  long long medium = 0, exact = 0, exact_rows = 0;
};

// Element i that the vector test could not settle: first the scalar test with the tight bound, then
// the double-double path (its statistics computed once per row, on first need).
template <class T>
void settle(const Row<T>& r, std::int64_t i, const FastStats& s, ExactStats& es, bool& have_exact, Counts& cnt) {
  const double x = r.xd[i], g = r.gd ? r.gd[i] : 1.0, b = r.bd ? r.bd[i] : 0.0;
  double t = (x - s.m) * s.rstd;
  if (r.gd) t = t * g;
  const double y = r.bd ? t + b : t;
  const double e = s.b * (std::abs(t) + std::abs(b)) + (s.a * std::abs(g) + 0x1p-1000);
  typename T::Bits out;
  if (decided<T>(y, e, out)) {
    r.y[i] = out;
    ++cnt.medium;
    return;
  }
  if (!have_exact) {
    es = exact_stats<T>(r.x, r.n, r.eps, r.centred);
    have_exact = true;
    ++cnt.exact_rows;
  }
  r.y[i] = exact_element<T>(x, g, b, es, r.gl ? r.gl[i] : 0.0);
  ++cnt.exact;
}

// f32: 8 lanes' lo and hi rounded to f32; stores lo's and returns the 8-bit mask of lanes where they differ.
inline unsigned round8_f32(__m256d lo_a, __m256d lo_b, __m256d hi_a, __m256d hi_b, float* dst) {
  const __m256 lo = _mm256_set_m128(_mm256_cvtpd_ps(lo_b), _mm256_cvtpd_ps(lo_a));
  const __m256 hi = _mm256_set_m128(_mm256_cvtpd_ps(hi_b), _mm256_cvtpd_ps(hi_a));
  _mm256_storeu_ps(dst, lo);
  const __m256i same = _mm256_cmpeq_epi32(_mm256_castps_si256(lo), _mm256_castps_si256(hi));
  return ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(same))) & 0xFFu;
}

// f16/bf16: y rounded once to f32 (y32), whose f16/bf16 rounding is y*'s when y32's bit pattern is at
// least 2 f32 ulps from a midpoint pattern of the output format (low 13 bits 0x1000 for f16, low 16
// bits 0x8000 for bf16) and E ≤ 2^-25·|y32|: then |y* − y32| ≤ E + half an f32 ulp < 2 f32 ulps
// (an f32 ulp is > 2^-24·|y32|), so no midpoint lies between y* and y32. |y32| must also be in the
// range where the format's ulp is a fixed number of f32 ulps (f16 normals ≥ 2^-14, f32 normals
// ≥ 2^-126 for bf16); values above the format's range round to ±inf either way. Returns the mask
// of lanes that need the scalar test; stores y32's rounding.
template <class T>
inline unsigned round8_single(__m256d y_a, __m256d y_b, __m256 y_min, typename T::Bits* dst) {
  const __m256 y32 = _mm256_set_m128(_mm256_cvtpd_ps(y_b), _mm256_cvtpd_ps(y_a));
  const __m256i bits = _mm256_castps_si256(y32);
  constexpr int kLow = std::is_same_v<T, F16> ? 0x1FFF : 0xFFFF, kMid = std::is_same_v<T, F16> ? 0x1000 : 0x8000;
  const __m256i dist = _mm256_abs_epi32(_mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(kLow)), _mm256_set1_epi32(kMid)));
  const __m256i far = _mm256_cmpgt_epi32(dist, _mm256_set1_epi32(1));
  const __m256 big = _mm256_cmp_ps(_mm256_and_ps(y32, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))), y_min, _CMP_GE_OQ);
  const unsigned ok = static_cast<unsigned>(_mm256_movemask_ps(_mm256_and_ps(_mm256_castsi256_ps(far), big)));
  __m128i h;
  if constexpr (std::is_same_v<T, F16>) {
    h = _mm256_cvtps_ph(y32, _MM_FROUND_TO_NEAREST_INT);
  } else {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), h);
  return ~ok & 0xFFu;
}

template <class T, bool kGamma, bool kBeta>
void normalize_row(const Row<T>& r, const FastStats& s, double gmax, double bmax, Counts& cnt) {
  using B = typename T::Bits;
  constexpr bool kF32 = std::is_same_v<T, F32>;
  // The vector test uses one E for the row, the largest per-element E (|t| ≤ dmax·rstd·gmax):
  // 8 f64 operations per 4 outputs instead of 14; the scalar test keeps the per-element E.
  const double t_max = s.dmax * s.rstd * gmax * (1 + 0x1p-40);
  const double e_row = (s.b * (t_max + bmax) + s.a * gmax + 0x1p-1000) * (1 + 0x1p-40);
  // f16/bf16 (round8_single): |y32| ≥ max(2^25·E, the format's smallest normal), as an f32 rounded up.
  const double y_min = std::max(e_row * 0x1p25, std::is_same_v<T, F16> ? 0x1p-14 : 0x1p-126) * (1 + 0x1p-20);
  const __m256 y_min_v = _mm256_set1_ps(static_cast<float>(std::min(y_min, 0x1p127)));
  const __m256d mv = _mm256_set1_pd(s.m), rv = _mm256_set1_pd(s.rstd), ev = _mm256_set1_pd(e_row);
  ExactStats es{};
  bool have_exact = false;
  const auto value = [&](std::int64_t j) {
    __m256d y = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(r.xd + j), mv), rv);
    if constexpr (kGamma) y = _mm256_mul_pd(y, _mm256_loadu_pd(r.gd + j));
    if constexpr (kBeta) y = _mm256_add_pd(y, _mm256_loadu_pd(r.bd + j));
    return y;
  };
  for (std::int64_t i = 0; i < r.n; i += 8) {
    const std::int64_t count = r.n - i < 8 ? r.n - i : 8;
    B out[8];
    B* dst = count == 8 ? r.y + i : out;
    const __m256d y_a = value(i), y_b = value(i + 4);
    unsigned fail;
    if constexpr (kF32) {
      fail = round8_f32(_mm256_sub_pd(y_a, ev), _mm256_sub_pd(y_b, ev), _mm256_add_pd(y_a, ev), _mm256_add_pd(y_b, ev), dst);
    } else {
      fail = round8_single<T>(y_a, y_b, y_min_v, dst);
    }
    if (count < 8) {
      std::memcpy(r.y + i, out, static_cast<std::size_t>(count) * sizeof(B));
      fail &= (1u << count) - 1;
    }
    while (fail) {
      const int k = __builtin_ctz(fail);
      fail &= fail - 1;
      settle<T>(r, i + k, s, es, have_exact, cnt);
    }
  }
}

// f64 copy of n storage values, padded with zeros to a multiple of 8; returns max |value|.
template <class T>
double widen_copy(const typename T::Bits* src, std::int64_t n, double* dst) {
  __m256d a, b;
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
  __m256d mx = _mm256_setzero_pd();
  for (std::int64_t i = 0; i < n; i += 8) {
    if (n - i >= 8) load8<T>(src + i, a, b);
    else load8_tail<T>(src + i, n - i, typename T::Bits{}, a, b);
    _mm256_storeu_pd(dst + i, a), _mm256_storeu_pd(dst + i + 4, b);
    mx = _mm256_max_pd(mx, _mm256_max_pd(_mm256_and_pd(a, abs_mask), _mm256_and_pd(b, abs_mask)));
  }
  alignas(32) double m[4];
  _mm256_store_pd(m, mx);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));  // NaN lanes drop out: settled per element
}

// w = C + gamma in f64 from storage G (T, or f32 beside 16-bit x): hi in gd, the rounding error of the sum
// in gl (two_sum; all zeros when C = 0, or when every sum fits one f64). Returns max |w| and sets w_rel,
// the relative error of gd as a weight (u when some sum was rounded, else 0).
template <class G>
double weights(const typename G::Bits* gamma, std::int64_t n, double offset, double* gd, double* gl, double& w_rel) {
  double gmax = widen_copy<G>(gamma, n, gd);
  w_rel = 0;
  if (offset == 0) return gmax;  // gl unused (null)
  gmax = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double hi, lo;
    two_sum(offset, gd[i], hi, lo);
    gd[i] = hi, gl[i] = lo;
    if (lo != 0) w_rel = kU;
    gmax = std::max(gmax, std::abs(hi));  // NaN drops out: settled per element
  }
  return gmax;
}

template <class T>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, double* scratch) {
  using B = typename T::Bits;
  const B* x = static_cast<const B*>(t.x);
  B* y = static_cast<B*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const bool is_centred = p.op.norm == Norm::layernorm;
  // scratch (isa.hpp): x's row, w = C + gamma, beta and w's low parts in f64, each n + 8 long.
  double* xd = scratch;
  double* gd = p.has_gamma ? scratch + (n + 8) : nullptr;
  double* bd = p.has_beta ? scratch + 2 * (n + 8) : nullptr;
  double* gl = p.has_gamma && p.gamma_offset != 0 ? scratch + 3 * (n + 8) : nullptr;
  const bool f32_params = p.param_dtype == DType::f32 && !std::is_same_v<T, F32>;
  double w_rel = 0;
  double gmax = 1.0, bmax = 0.0;
  if (gd) {
    const double c = gl ? p.gamma_offset : 0.0;
    gmax = f32_params ? weights<F32>(static_cast<const float*>(t.gamma), n, c, gd, gl, w_rel)
                      : weights<T>(static_cast<const B*>(t.gamma), n, c, gd, gl, w_rel);
  }
  if (bd) {
    bmax = f32_params ? widen_copy<F32>(static_cast<const float*>(t.beta), n, bd) : widen_copy<T>(static_cast<const B*>(t.beta), n, bd);
  }
  Counts cnt;
  for (std::int64_t row = begin; row < end; ++row) {
    const Row<T> r{x + row * n, y + row * n, xd, gd, bd, gl, n, p.eps, is_centred};
    const FastStats s = fast_stats<T>(r.x, n, p.eps, xd, is_centred, w_rel);
    if (!s.finite || s.degenerate) {  // NaN/Inf in the row, or var + eps == 0: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    if (s.certified) {
      if (mean) mean[row] = static_cast<float>(s.m + s.m_lo);
      if (rstd) rstd[row] = static_cast<float>(s.rstd);
      if (gd && bd) normalize_row<T, true, true>(r, s, gmax, bmax, cnt);
      else if (gd) normalize_row<T, true, false>(r, s, gmax, bmax, cnt);
      else if (bd) normalize_row<T, false, true>(r, s, gmax, bmax, cnt);
      else normalize_row<T, false, false>(r, s, gmax, bmax, cnt);
      continue;
    }
    const ExactStats es = exact_stats<T>(r.x, n, p.eps, is_centred);
    ++cnt.exact_rows;
    if (!es.finite) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = static_cast<float>(es.m_hi + es.m_lo);
    if (rstd) rstd[row] = static_cast<float>(es.r_hi + es.r_lo);
    for (std::int64_t i = 0; i < n; ++i)
      r.y[i] = exact_element<T>(xd[i], gd ? gd[i] : 1.0, bd ? bd[i] : 0.0, es, gl ? gl[i] : 0.0);
    cnt.exact += n;
  }
  __atomic_fetch_add(&g_elements, static_cast<long long>((end - begin) * n), __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_medium, cnt.medium, __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_exact, cnt.exact, __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_exact_rows, cnt.exact_rows, __ATOMIC_RELAXED);
}

}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, double* scratch) {
  switch (p.dtype) {
    case DType::f32: return rows_typed<F32>(p, t, begin, end, scratch);
    case DType::f16: return rows_typed<F16>(p, t, begin, end, scratch);
    case DType::bf16: return rows_typed<BF16>(p, t, begin, end, scratch);
    case DType::f64: return;  // not offered (avx2_kernel.cpp)
  }
}

PathCounts path_counts() {
  return {__atomic_load_n(&g_elements, __ATOMIC_RELAXED), __atomic_load_n(&g_medium, __ATOMIC_RELAXED),
          __atomic_load_n(&g_exact, __ATOMIC_RELAXED), __atomic_load_n(&g_exact_rows, __ATOMIC_RELAXED)};
}

}  // namespace lnorm::cpu::avx2_cr
