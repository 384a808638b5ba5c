// The correctly rounded kernels (avx2_cr, avx512_cr: simd_body.hpp's cr:: on 4 or 8 f64 lanes) — the algorithm,
// its proven bound, and their scalar paths. Included by the ISA translation units and the emulation
// (tests/simd_emulation.cpp) inside nothing: everything here is in an anonymous namespace (internal linkage,
// ctest isa_objects_share_no_code); where F16C is not enabled (the emulation) the f16 conversions are
// lnorm/half.hpp's, which give vcvtph2ps/vcvtps2ph's bits on the finite values these paths see.
//
// Algorithm (Ziv's rounding test): compute y in f64 with a PROVEN error bound E, round y − E and y + E to the
// output format; where both ends round the same, that is y*'s rounding (rounding is monotone); elsewhere (y*
// near a midpoint of the format, an exact tie, or an exact zero) take a slower path.
//   1. c = x[0];  s = Σ (x − c) in S = 4·(f64 lanes) accumulator lanes (16 on AVX2, 32 on AVX-512), blocks of
//      S·ceil(sqrt(n/S)) (plain adds);  q = s/n;  m + m_lo = c + q (TwoSum).
//   2. q2 = Σ (x − m)² blocked the same (one FMA each) and max|x − m|;  v = q2/n + eps;  rstd = 1/sqrt(v).
//   3. y = ((x − m)·rstd)·w + β in f64, tested against one E_row per row, ≥ every element's E (below;
//      |t| ≤ max|x − m|·rstd·max|w|):
//      f32: lo = y − E_row and hi = y + E_row rounded by vcvtpd2ps, compared (differ_bits);
//      f16/bf16: y to f32 once (y32); its f16/bf16 rounding is y*'s when y32's bit pattern is ≥ 2 f32 ulps from
//      a midpoint pattern (low 13 bits 0x1000 / low 16 bits 0x8000) and |y32| ≥ max(2^25·E_row, smallest
//      normal): then |y* − y32| < 2 f32 ulps (near_mid16_f). Both on a full vector of f32 lanes.
//   4. "medium" path, scalar, per element the vector test missed: the same y with its own (tighter) E, both
//      ends rounded exactly (f16/bf16 through round-to-odd f32, which makes two roundings one): decided().
//   5. "exact" path, per element the medium test missed: the row's mean and rstd recomputed once in
//      double-double (exact_stats), y in double-double (~2^-100 of the terms), compared with the two midpoints
//      around it (exact_element); where it lies within 2^-72 of the terms of a midpoint or of 0 — exact ties,
//      and near-ties finer than a double-double sees — the element is decided in exact integer arithmetic
//      (exact_decision.hpp: Σx and Σx² exactly, y* compared with the midpoints by squaring, as the reference
//      does). No step is unproven: the double-double only picks the candidate and clears elements far from
//      every midpoint.
// Rows with NaN/Inf, or var + eps == 0, take the scalar welford row (its NaN rules).
//
// Error bound (u = 2^-53; k ≥ the roundings any term's partial sums went through: ≤ block/S in its block,
// ≤ ceil(n/block) between blocks, ≤ 4 in the tail loop, 2 in the accumulator folds, ≤ 3 in the lanes' sum,
// 3 spare: simd_body.hpp's cr::fast_stats counts them; γ_j ≈ j·u; all inputs are exact in f64):
//   - s: each x − c rounds by u|x − c|, the sums by γ_k·Σ|x − c| → |s − Σ(x − c)| ≤ γ_{k+1}·a1,
//     a1 = Σ|x − c| ≤ sqrt(n·Σ(x − m)²) + n·(|m_lo| + |q|) (Cauchy–Schwarz about m; m + m_lo − c = q),
//     and Σ(x − m)² ≤ q2·(1 + γ_{k+3}), so a1/n ≤ sqrt(q2/n)·(1 + 2^-20) + |m_lo| + |q|.
//   - mean: y uses m, not m + m_lo:  em = |m_lo| + u|q| + γ_{k+1}·a1/n ≥ |m − mean*|.
//   - q2 = Σ(x − m)²·(1 + θ), |θ| ≤ γ_{k+3} (x − m and the FMA sums), and Σ(x − m)²/n = var* + (m − mean*)²,
//     so with two more roundings (/n, +eps): |v/v* − 1| ≤ ρv = γ_{k+5} + em²/v·(1 + small).
//   - rstd: sqrt and division round once each: |rstd/rstd* − 1| ≤ ρr = ρv/2·(1 + ρv) + 2u.
//   - t = (x − mean* − δ)·rstd*·w·(1 + η), |δ| ≤ em, |η| ≤ ρr + 3u (x − m, ·rstd, ·w), so
//     |t − wz*| ≤ (ρr + 3u)(1 + 2^-18)·|t| + em·rstd·|w|·(1 + 2^-18)   (ρr ≤ 2^-22 is checked per row)
//   - y = t + β rounds by u(|t| + |β|), and lo = y − E, hi = y + E by u(|y| + E) each; so
//     E = b·(|t| + |β|) + a·|w| + 2^-1000 with b = (ρv/2·1.02 + 8u)(1 + 2^-16), a = em·rstd·(1 + 2^-16)
//     keeps lo ≤ y* ≤ hi (the 2^-16 also covers computing E itself, 3 roundings; 2^-1000 f64 underflow).
//   A row whose ρv > 2^-30 (the rows of the verify suite never have it: ρv ≈ k·2^-53) goes to the exact path
//   whole. Typical sizes, n = 4096: k ≈ 41, ρv ≈ 2^-47, E ≈ 2^-48·(|t| + |β|) + 2^-46·|w|.
//
// How often each path runs (tests/test_avx2_cr.cpp prints it; 64x4096, x ~ N(0.5, 2), γ ~ N(1, 0.25),
// β ~ N(0, 1); measured on the AVX2 version before the lane-generic body, the same order since):
//   f32:  2 of 262144 elements by the scalar f64 test (7.6e-6), 1 by double-double (3.8e-6, 1 row of 64)
//   f16:  100 by the scalar test (3.8e-4: y32 within 1 f32 ulp of an f16 midpoint pattern), 0 double-double
//   bf16: 12 by the scalar test (4.6e-5), 0 double-double
// Near-zero y (β ≈ −wz) are where E is large against ulp(y): they make nearly all of the slow cases.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "exact_decision.hpp"
#include "lnorm/problem.hpp"  // DType (isa.hpp includes it too)
#include "storage_tags.hpp"

#ifdef __F16C__
#include <immintrin.h>
#else
#include "lnorm/half.hpp"
#endif

namespace lnorm::cpu::cr_exact {
namespace {

using ::lnorm::cpu::storage::BF16;
using ::lnorm::cpu::storage::F16;
using ::lnorm::cpu::storage::F32;
using ::lnorm::cpu::storage::F64;

inline std::uint32_t f32_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float bits_f32(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// f64 → f32 rounded to odd: truncate toward zero, set the last bit if anything was lost. Then one
// rounding to nearest f16/bf16 equals the direct rounding of v (Boldo & Melquiond 2008: f32 has at
// least two bits more than f16's 11 and bf16's 8).
inline float to_f32_odd(double v) {
  const float nearest = static_cast<float>(v);
  const double back = static_cast<double>(nearest);
  if (back == v || std::isnan(v)) return nearest;
  std::uint32_t b = f32_bits(nearest);
  if (std::abs(back) > std::abs(v)) b -= 1;  // rounded away from zero: one step back in magnitude
  return bits_f32(b | 1u);
}

// Storage value → f64 (exact).
template <class T>
double to_double(typename T::Bits b) {
  if constexpr (std::is_same_v<T, F32> || std::is_same_v<T, F64>) {
    return static_cast<double>(b);
  } else if constexpr (std::is_same_v<T, F16>) {
#ifdef __F16C__
    return static_cast<double>(_cvtsh_ss(b));
#else
    return static_cast<double>(to_float(f16{b}));
#endif
  } else {
    return static_cast<double>(bits_f32(static_cast<std::uint32_t>(b) << 16));
  }
}

// v rounded once to nearest even in T's format.
template <class T>
typename T::Bits round_exact(double v) {
  if constexpr (std::is_same_v<T, F32>) {
    return static_cast<float>(v);
  } else if constexpr (std::is_same_v<T, F16>) {
#ifdef __F16C__
    return _cvtss_sh(to_f32_odd(v), _MM_FROUND_TO_NEAREST_INT);
#else
    return f16_from_float(to_f32_odd(v)).bits;
#endif
  } else {
    const float odd = to_f32_odd(v);
    const std::uint32_t b = f32_bits(odd);
    if (std::isnan(odd)) return static_cast<std::uint16_t>((b >> 16) | 0x40);
    return static_cast<std::uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
  }
}

template <class T>
bool same_bits(typename T::Bits a, typename T::Bits b) {
  if constexpr (std::is_same_v<T, F32>) return f32_bits(a) == f32_bits(b);
  else return a == b;
}

// Ziv's test on [y − e, y + e] (e already covers the rounding of y ± e): both ends round the same, so
// does every value between them (rounding is monotone).
template <class T>
bool decided(double y, double e, typename T::Bits& out) {
  const typename T::Bits lo = round_exact<T>(y - e), hi = round_exact<T>(y + e);
  out = hi;
  return same_bits<T>(lo, hi);
}

// Error-free transformations (Knuth's TwoSum, Dekker's FastTwoSum for |a| ≥ |b|, TwoProd by FMA).
inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}
inline void fast_two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  e = b - (s - a);
}

// The fast path's per-row bound (this file's header, "Error bound"), for avx2_cr and avx512_cr alike:
// k is how many roundings any term's partial sums went through in the caller's summation (each kernel
// counts its own). E = b·(|t| + |β|) + a·|γ| then bounds |y − y*| plus the rounding of y ± E; the
// factors 1.01 and 1 + 2^-16 cover the (1 + u)^k products and the rounding of these very lines. Rows
// whose bound is not small (never seen outside constructed cases) are not certified: all exact.
constexpr double kU = 0x1p-53;  // f64 unit roundoff
struct RowBound {
  double b, a;
  bool certified;
};
// centred: LayerNorm; RMSNorm takes the mean as exactly 0 (m = m_lo = q = 0), so the mean's error em is 0
// and v's only error is the sums' (ρv = (k + 5)u). w_rel: the relative error of the weights w = C + γ as the
// kernel holds them (0, or u where C + γ was rounded to f64): one more rounding of t, added to b.
inline RowBound row_bound(double k, double nd, double q, double m_lo, double q2, double v, double rstd,
                          bool centred = true, double w_rel = 0) {
  const double a1n = std::sqrt(q2 / nd) * (1 + 0x1p-20) + std::abs(m_lo) + std::abs(q);  // ≥ Σ|x − c|/n
  const double em = centred ? std::abs(m_lo) + 1.01 * kU * std::abs(q) + 1.01 * (k + 1) * kU * a1n : 0.0;  // ≥ |m − mean*|
  const double rho_v = 1.01 * (k + 5) * kU + 1.01 * em * em / v;                         // ≥ |v/v* − 1|
  RowBound r;
  r.b = (0.51 * rho_v + 8 * kU + 1.01 * w_rel) * (1 + 0x1p-16);
  r.a = em * rstd * (1 + 0x1p-16);
  r.certified = rho_v <= 0x1p-30 && std::isfinite(r.a);
  return r;
}

// The row's statistics in double-double, from scratch (scalar; run only for rows where some element
// needs them, so its cost shows only in the slow-path count).
template <class T>
constexpr DType dtype_of() {
  return std::is_same_v<T, F32> ? DType::f32 : std::is_same_v<T, F16> ? DType::f16 : DType::bf16;
}

struct ExactStats {
  double m_hi, m_lo;  // mean
  double r_hi, r_lo;  // rstd
  double spread;      // Σ|x − x[0]|/n: scales the mean's absolute error
  bool finite;
  // The row as exact_decision.hpp reads it, for the elements the double-double cannot settle: its exact sums
  // are formed on the first such element (exact::row), at most once per row.
  const void* x;
  DType in;
  std::int64_t n;
  double eps;
  bool centred;
  const exact::Row* row = nullptr;
};

// hi + lo += v, hi's rounding error kept exactly in lo's TwoSum: the error terms of a long sum must
// themselves be summed compensated. Summed plainly they grow coherently (n equal terms: n·u·|sum| of
// error, its rounding n²·u² relative): measured 2^-80 of rstd on a 65537-wide zero row with one outlier
// (seed 24, bf16), which turned exact ties into misroundings.
inline void add_compensated(double& hi, double& lo, double v) {
  double s, e;
  two_sum(hi, v, s, e);
  hi = s;
  lo += e;
}

// centred = false (RMSNorm): the mean is exactly 0 (m_hi = m_lo = 0, no spread), Σ x² below.
template <class T>
ExactStats exact_stats(const typename T::Bits* x, std::int64_t n, double eps, bool centred = true) {
  const double c = centred ? to_double<T>(x[0]) : 0.0, nd = static_cast<double>(n);
  // Σ (x − c): each difference split exactly (TwoSum), the running sum by TwoSum, the errors summed
  // compensated (add_compensated).
  double s = 0, err = 0, err2 = 0, spread = 0;
  for (std::int64_t i = 0; centred && i < n; ++i) {
    double a, ae, t, te;
    two_sum(to_double<T>(x[i]), -c, a, ae);
    two_sum(s, a, t, te);
    s = t;
    add_compensated(err, err2, ae);
    add_compensated(err, err2, te);
    spread += std::abs(a);
  }
  double sh, sl, s_e;
  two_sum(s, err, sh, s_e);
  fast_two_sum(sh, s_e + err2, sh, sl);
  const double q_hi = sh / nd, q_lo = (std::fma(-q_hi, nd, sh) + sl) / nd;
  double m_hi, m_e;
  two_sum(c, q_hi, m_hi, m_e);
  const double m_lo = centred ? m_e + q_lo : 0.0;
  if (!centred) m_hi = 0;
  // Σ d², d = x − m as a double-double (a + dl), d² = a² (TwoProd) + 2·a·dl + dl².
  double p = 0, pe = 0, pe2 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double a, b;
    two_sum(to_double<T>(x[i]), -m_hi, a, b);
    const double dl = b - m_lo;
    const double sq = a * a, sq_e = std::fma(a, a, -sq);
    double t, te;
    two_sum(p, sq, t, te);
    p = t;
    add_compensated(pe, pe2, te);
    add_compensated(pe, pe2, sq_e + (2 * a * dl + dl * dl));  // ~u·d² each, rounded by u of that
  }
  double qh, ql, q_e;
  two_sum(p, pe, qh, q_e);
  fast_two_sum(qh, q_e + pe2, qh, ql);
  const double vh0 = qh / nd, vl0 = (std::fma(-vh0, nd, qh) + ql) / nd;
  double vh, ve;
  two_sum(vh0, eps, vh, ve);
  const double vl = ve + vl0;
  // rstd = 1/sqrt(v): one Newton step r += r·(1 − v·r²)/2 from the f64 estimate, v·r² in double-double.
  const double r0 = 1.0 / std::sqrt(vh);
  const double r2 = r0 * r0, r2e = std::fma(r0, r0, -r2);
  const double w = vh * r2, we = std::fma(vh, r2, -w) + vh * r2e + vl * r2;
  const double h = (1.0 - w) - we;  // 1 − w is exact (w within a few ulps of 1, Sterbenz)
  double r_hi, r_lo;
  fast_two_sum(r0, r0 * h * 0.5, r_hi, r_lo);
  return {m_hi, m_lo, r_hi, r_lo, spread / nd, std::isfinite(m_hi) && std::isfinite(qh) && std::isfinite(r_hi),
          x, dtype_of<T>(), n, eps, centred};
}

// Where the double-double value lies within kExactSlack of the terms' size of a midpoint (or of 0), its sign
// relative to that midpoint is not trusted: the element is decided exactly (exact_decision.hpp: y* compared with
// the midpoints in integers, ties to even). Each double-double operation above errs by a few 2^-104 of its
// operands, so 2^-72 leaves 2^30 of margin over what the double-double can get wrong, and costs nothing: a y*
// that close to a midpoint by chance has probability ~2^-48 per element (the format's 2^-24 spacing against
// 2^-72); the rows that reach it are constructed ones — exact ties (a zero row with one outlier at n = 17 has
// z = −1/4 exactly), and the near-ties Add & Norm's cancelling sums draw (y* 2^-111 and 2^-119 of the terms from
// a midpoint, where x − mean needs more than the double-double's 2^-104: misrounded when this path took every
// near-tie for a tie).
constexpr double kExactSlack = 0x1p-72;

// y* rounded to T exactly (exact_decision.hpp), starting the search at guess.
template <class T>
typename T::Bits round_exactly(ExactStats& s, double x, double w_hi, double w_lo, double beta, typename T::Bits guess) {
  if (!s.row) s.row = exact::row(s.x, s.in, s.n, s.eps, s.centred);
  std::uint32_t g;
  if constexpr (std::is_same_v<T, F32>) g = f32_bits(guess);
  else g = guess;
  const std::uint32_t r = exact::round_element(s.row, dtype_of<T>(), x, w_hi, w_lo, beta, g);
  if constexpr (std::is_same_v<T, F32>) return bits_f32(r);
  else return static_cast<std::uint16_t>(r);
}

// T's neighbours of the output value `bits`: one step up or down in value (0 as the step from ±0; the
// step past the largest finite value is 2^(emax+1), where rounding to nearest overflows).
template <class T>
double neighbour(typename T::Bits bits, bool up) {
  const double v = to_double<T>(bits);
  double next;
  if constexpr (std::is_same_v<T, F32>) {
    next = static_cast<double>(std::nextafter(bits, up ? INFINITY : -INFINITY));
  } else {
    std::uint16_t b = bits;
    const bool neg = (b & 0x8000) != 0;
    const bool zero = (b & 0x7FFF) == 0;
    if (zero) b = static_cast<std::uint16_t>(up ? 0x0001 : 0x8001);
    else if (up != neg) b = static_cast<std::uint16_t>(b + 1);  // away from zero
    else b = static_cast<std::uint16_t>(b - 1);
    next = to_double<T>(b);
  }
  if (std::isinf(next)) {  // beyond the largest finite value: the next binade's first value
    const double big = std::is_same_v<T, F16> ? 65536.0 : 0x1p128;
    next = v > 0 ? big : -big;
  }
  return next;
}

// One output element from the exact statistics: y = ((x − m)·rstd)·w + β in double-double, w = gamma + gamma_lo
// (gamma_lo: the low part of C + γ where it does not fit one f64), rounded by the midpoints either side of yh's
// rounding — each compared with y through (yh − M) + yl (exact: M is within an output ulp of yh) — unless y lies
// within the slack of one of them or of 0: then exactly (round_exactly).
template <class T>
typename T::Bits exact_element(double x, double gamma, double beta, ExactStats& s, double gamma_lo = 0) {
  double a, b, dh, dl;
  two_sum(x, -s.m_hi, a, b);
  fast_two_sum(a, b - s.m_lo, dh, dl);
  const double zh = dh * s.r_hi;
  const double zl = std::fma(dh, s.r_hi, -zh) + (dh * s.r_lo + dl * s.r_hi);
  const double th = zh * gamma;
  const double tl = std::fma(zh, gamma, -th) + zl * gamma + zh * gamma_lo;
  double y0, ye, yh, yl;
  two_sum(th, beta, y0, ye);
  // Renormalized: where β cancels t, t's low part can be a large share of y (measured: 7% of y on a
  // 65537-wide sparse row, seed 24), and the midpoint test needs |yl| ≤ half an f64 ulp of yh.
  two_sum(y0, ye + tl, yh, yl);
  // The slack scales with what carries error — t = γ·z and the mean's error through rstd·|γ| — not with β,
  // which enters exactly (TwoSum).
  const double size = std::abs(th) + std::abs(gamma) * s.r_hi * (std::abs(s.m_hi) + s.spread);
  const double slack = kExactSlack * size;
  const typename T::Bits r = round_exact<T>(yh);
  if (!(std::abs(yh + yl) > slack)) return round_exactly<T>(s, x, gamma, gamma_lo, beta, r);  // y* near 0 (or NaN slack)
  const double rv = to_double<T>(r);
  for (const bool up : {true, false}) {
    const double nb = neighbour<T>(r, up);
    const double mid = (rv + nb) / 2;  // exact: two neighbours' mean in f64
    const double diff = (yh - mid) + yl;
    const double tol = slack + 0x1p-52 * (std::abs(yh - mid) + std::abs(yl));
    if (!(std::abs(diff) > tol)) return round_exactly<T>(s, x, gamma, gamma_lo, beta, r);
    if (up && diff > 0) return round_exact<T>(nb);  // above the upper midpoint: the upper neighbour
    if (!up && diff < 0) return round_exact<T>(nb);
  }
  return r;
}

}  // namespace
}  // namespace lnorm::cpu::cr_exact
