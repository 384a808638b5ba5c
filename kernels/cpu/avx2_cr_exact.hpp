// avx2_cr's scalar paths (included by avx2_cr.cpp only, so compiled with its AVX2/FMA flags and with
// internal linkage: ctest isa_objects_share_no_code). Two of them, taken per element when the vector
// Ziv test of avx2_cr.cpp cannot certify the rounding:
//   round_exact / decided: one f64 value rounded correctly to the output format (f32 directly; f16 and
//     bf16 through round-to-odd f32, which makes the two roundings one), and the Ziv test on an
//     interval [y − E, y + E] with the tight bound E (the "medium" path: the vector test of f16/bf16
//     widens E by an f32 half-ulp, see avx2_cr.cpp).
//   ExactStats / exact_element: the statistics and one y in double-double (~2^-100 relative), and
//     the final decision against the output format's midpoints (the "exact" path).
// Also included by the AVX-512 TUs (avx512_cr.cpp, avx512_bf16.cpp, avx512.cpp) and by the generic
// emulation tests/avx512_emulation.cpp for avx512_cr's slow paths: where F16C is not enabled (the
// emulation) the f16 conversions are lnorm/half.hpp's, which give vcvtph2ps/vcvtps2ph's bits on the
// finite values these paths see (tests/test_avx512_emulation.cpp checks every pattern).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "storage_tags.hpp"

#ifdef __F16C__
#include <immintrin.h>
#else
#include "lnorm/half.hpp"
#endif

namespace lnorm::cpu::avx2_cr {
namespace {

using ::lnorm::cpu::storage::BF16;
using ::lnorm::cpu::storage::F16;
using ::lnorm::cpu::storage::F32;

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
  if constexpr (std::is_same_v<T, F32>) {
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

// The fast path's per-row bound (avx2_cr.cpp's header, "Error bound"), for avx2_cr and avx512_cr alike:
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

// An exact sum of f32-family values (f16 and bf16 are f32 values) in fixed point: 384-bit two's complement
// with its lsb at 2^-149, f32's smallest subnormal. |x| < 2^128 takes 277 bits, n·x and Σx with n < 2^31 at
// most 308: no overflow. The exact path uses it where the double-double mean cannot decide: an element
// whose y* is within the slack of 0 with β = 0, where y* = (n·x − Σx)·rstd·w/n is zero exactly when n·x = Σx
// and otherwise needs x − mean to its own relative precision, not the spread's (found by Add & Norm: a
// row of huge cancelling sums whose mean is 2^-113 of its spread, where y* = 3.7e-34 read as 0).
struct FixedSum {
  static constexpr int kLimbs = 6;
  std::uint64_t w[kLimbs] = {};

  // v = −v, two's complement.
  static void negate(std::uint64_t (&v)[kLimbs]) {
    unsigned carry = 1;
    for (auto& x : v) {
      const std::uint64_t nx = ~x + carry;
      carry = carry && nx == 0;
      x = nx;
    }
  }
  // += or −= m·2^shift, shift ≥ 0.
  void add_shifted(std::uint64_t m, int shift, bool negative) {
    std::uint64_t v[kLimbs] = {};
    const int limb = shift / 64, off = shift % 64;
    v[limb] = m << off;
    if (off && limb + 1 < kLimbs) v[limb + 1] = m >> (64 - off);
    if (negative) negate(v);  // two's complement of v, then add
    unsigned carry = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const std::uint64_t a = w[i] + v[i];
      const unsigned c1 = a < w[i];
      const std::uint64_t b = a + carry;
      carry = c1 | (b < a);
      w[i] = b;
    }
  }
  // += x, x a finite f32-family value (a normal double with at least 29 trailing zero bits below the
  // f32 lsb, so the shift right below is exact).
  void add(double x) {
    if (x == 0) return;
    std::uint64_t bits;
    std::memcpy(&bits, &x, 8);
    const int e = static_cast<int>((bits >> 52) & 0x7FF);
    const std::uint64_t m = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
    const int shift = e - 1075 + 149;  // x = m·2^(e − 1075) = m·2^shift·2^-149
    if (shift >= 0) add_shifted(m, shift, (bits >> 63) != 0);
    else add_shifted(m >> -shift, 0, (bits >> 63) != 0);
  }
  // *= k (1 ≤ k < 2^32), two's complement preserved (mod 2^384; no overflow in range, above): 32-bit
  // pieces, whose products with k and the carry fit 64 bits.
  void scale(std::uint64_t k) {
    std::uint64_t carry = 0;
    for (auto& x : w) {
      const std::uint64_t lo = (x & 0xFFFFFFFFu) * k + carry;
      const std::uint64_t hi = (x >> 32) * k + (lo >> 32);
      x = (lo & 0xFFFFFFFFu) | (hi << 32);
      carry = hi >> 32;
    }
  }
  void subtract(const FixedSum& o) {
    unsigned borrow = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const std::uint64_t a = w[i] - o.w[i];
      const unsigned b1 = w[i] < o.w[i];
      const std::uint64_t b = a - borrow;
      borrow = b1 | (a < borrow);
      w[i] = b;
    }
  }
  bool is_zero() const {
    for (std::uint64_t x : w)
      if (x) return false;
    return true;
  }
  // The value as a double-double (relative error below 2^-104): 32-bit pieces from the top, each exact in
  // f64, summed by TwoSum.
  void to_dd(double& hi, double& lo) const;
};

// 2^e as a double, for e a normal exponent (no library call in an ISA translation unit).
inline double pow2(int e) {
  const std::uint64_t bits = static_cast<std::uint64_t>(e + 1023) << 52;
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

inline void FixedSum::to_dd(double& hi, double& lo) const {
  FixedSum a = *this;
  const bool negative = (a.w[kLimbs - 1] >> 63) != 0;
  if (negative) negate(a.w);
  hi = lo = 0;
  int top = kLimbs - 1;
  while (top > 0 && a.w[top] == 0) --top;
  for (int i = top; i >= 0 && i >= top - 2; --i) {  // 192 bits from the top limb: ≥ 129 significant
    for (int half = 1; half >= 0; --half) {
      const double piece = static_cast<double>((a.w[i] >> (32 * half)) & 0xFFFFFFFFu) * pow2(64 * i + 32 * half - 149);
      double s, e;
      two_sum(hi, piece, s, e);
      hi = s;
      lo += e;
    }
  }
  double s, e;
  fast_two_sum(hi, lo, s, e);
  hi = negative ? -s : s;
  lo = negative ? -e : e;
}

// The row's statistics in double-double, from scratch (scalar; run only for rows where some element
// needs them, so its cost shows only in the slow-path count).
struct ExactStats {
  double m_hi, m_lo;  // mean
  double r_hi, r_lo;  // rstd
  double spread;      // Σ|x − x[0]|/n: scales the mean's absolute error
  double ratio;       // min(var, eps)/max(var, eps), 0 when either is 0 (see round_dd)
  bool finite;
  FixedSum sum;       // Σx exactly (LayerNorm rows; zero for RMSNorm)
  std::int64_t n;
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
  FixedSum exact_sum;
  for (std::int64_t i = 0; centred && i < n; ++i) {
    exact_sum.add(to_double<T>(x[i]));
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
  const double ratio = vh0 > 0 && eps > 0 ? std::min(vh0, eps) / std::max(vh0, eps) : 0.0;
  return {m_hi, m_lo, r_hi, r_lo, spread / nd, ratio, std::isfinite(m_hi) && std::isfinite(qh) && std::isfinite(r_hi),
          exact_sum, n};
}

// The exact path's own error, relative to the size of what carries error (|γ·z|, plus the mean's absolute error
// carried through rstd·|γ|). Each double-double operation above errs by a few 2^-104 of its operands;
// the plain f64 sums of error terms by n·2^-106 of their size at worst, well under this for the
// widths the suite runs (≤ 65537). Within kExactSlack of a midpoint (or of 0) the exact y is taken to
// BE that midpoint (or 0): exact ties do occur (a zero row with one outlier at n = 17 has
// z = −1/4 exactly). Near-ties closer than 2^-88 of the terms were not seen on the norms' own rows; Add & Norm's
// add_rounding draws them (rows with one outlier near the format's max, whose mean cancels x − mean past the
// double-double's 2^-104: 2^-111 in f32, 2^-119 in bf16), misrounded here: budgets.toml lists them.
constexpr double kExactSlack = 0x1p-88;

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

// y* as (yh + yl) ± slack, rounded. Settled by the midpoints either side of yh's rounding: each is
// compared with y* through (yh − M) + yl (yh − M exact: M is within an output ulp of yh).
// Within the slack, y0 — y* with rstd replaced by its dominant term, 1/sqrt(max(var, eps)) — is taken
// to BE the midpoint M (or 0). Where var and eps are both > 0 but one is below 2^-40 of the other,
// y* = y0 − t·ratio/2 (to first order; t = γ·z): rstd lies just below its dominant term, a nudge the
// double-double cannot resolve but whose sign is known (measured: the verify suite's n = 2 rows with
// |x| ~ 2^127 and tiny eps, and subnormal rows with eps = 1, were all such near-ties, misrounded
// when taken as exact ties). Otherwise (eps = 0, var = 0, or the two comparable) a tie is exact.
// Two refinements, found by RMSNorm's constant rows (c with eps/c² ~ 2^-82 and beta = -(C + gamma): y0 = 0
// exactly and y* = the nudge, ~2^-83 of the terms, where bf16's spacing is far below the slack):
//   - y0 = 0 is tested on y* − nudge, not on y*: the double-double y already holds the nudge;
//   - a midpoint within the slack is taken for an exact tie only where the format's spacing there is well
//     above the slack; where it is not, the slack says nothing about ties and the double-double's sign
//     decides (its error, ~2^-100 of the terms, is the real one; the slack only guards tie detection).
template <class T>
typename T::Bits round_dd(double yh, double yl, double slack, double t, double ratio) {
  const bool nudged = ratio > 0 && ratio < 0x1p-40;
  const double nudge = -t * ratio * 0.5;  // y* − y0
  const double y0 = nudged ? (yh - nudge) + yl : yh + yl;
  if (std::abs(y0) <= slack) return round_exact<T>(nudged ? nudge : 0.0);  // y0 = 0 (β = −γ·z)
  const typename T::Bits r = round_exact<T>(yh);
  const double rv = to_double<T>(r);
  for (const bool up : {true, false}) {
    const double nb = neighbour<T>(r, up);
    const double mid = (rv + nb) / 2;  // exact: two neighbours' mean in f64
    const double diff = (yh - mid) + yl;
    const double tol = slack + 0x1p-52 * (std::abs(yh - mid) + std::abs(yl));
    const bool ties_resolvable = std::abs(nb - rv) > 16 * tol;
    if (ties_resolvable && std::abs(diff) <= tol) {  // y0 = M
      if (!nudged || nudge == 0) return round_exact<T>(mid);  // an exact tie: to even
      return round_exact<T>(nudge > 0 ? std::max(rv, nb) : std::min(rv, nb));  // the side y* is on
    }
    if (up && diff > 0) return round_exact<T>(nb);  // above M: the upper one
    if (!up && diff < 0) return round_exact<T>(nb);
  }
  return r;
}

// One output element from the exact statistics: y = ((x − m)·rstd)·w + β in double-double, w = gamma + gamma_lo
// (gamma_lo: the low part of C + γ where it does not fit one f64).
template <class T>
typename T::Bits exact_element(double x, double gamma, double beta, const ExactStats& s, double gamma_lo = 0) {
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
  // 65537-wide sparse row, seed 24), and round_dd needs |yl| ≤ half an f64 ulp of yh.
  two_sum(y0, ye + tl, yh, yl);
  // The slack scales with what carries error — t = γ·z and the mean's error through rstd·|γ| — not with β,
  // which enters exactly (TwoSum): a tiny t beside a β that sits on a midpoint (an f32 β beside bf16 x; RMSNorm
  // rows of subnormals, t ~ 2^-124 at seed 5) is a real deviation from the midpoint, not a tie.
  const double size = std::abs(th) + std::abs(gamma) * s.r_hi * (std::abs(s.m_hi) + s.spread);
  const double slack = kExactSlack * size;
  if (beta == 0 && s.n > 0 && s.n < (std::int64_t{1} << 31) && std::abs(yh + yl) <= slack) {
    // y* = (x − mean*)·rstd*·w near 0: decide x − mean* = (n·x − Σx)/n exactly (FixedSum; Σx is 0 for
    // RMSNorm, whose mean is exactly 0), then y to its own relative precision.
    FixedSum d;
    d.add(x);
    d.scale(static_cast<std::uint64_t>(s.n));
    d.subtract(s.sum);
    if (d.is_zero()) return round_exact<T>(0.0);  // x is the mean: y* = 0 exactly
    double nh, nl;
    d.to_dd(nh, nl);
    const double nd = static_cast<double>(s.n);
    const double qh = nh / nd, ql = (std::fma(-qh, nd, nh) + nl) / nd;  // (n·x − Σx)/n, double-double
    const double eh = qh * s.r_hi, el = std::fma(qh, s.r_hi, -eh) + (qh * s.r_lo + ql * s.r_hi);
    const double fh = eh * gamma, fl = std::fma(eh, gamma, -fh) + el * gamma + eh * gamma_lo;
    double gh, gl;
    fast_two_sum(fh, fl, gh, gl);
    return round_dd<T>(gh, gl, kExactSlack * std::abs(gh), gh, s.ratio);
  }
  return round_dd<T>(yh, yl, slack, th, s.ratio);
}

}  // namespace
}  // namespace lnorm::cpu::avx2_cr
