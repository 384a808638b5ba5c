// The exact rounding decision (exact_decision.hpp): Σx and Σx² in fixed point, then every comparison of
// y* with a rounding boundary in integers (boost::multiprecision::cpp_int, header-only). Written apart
// from the reference (reference/src/exact_row.cpp, rounding.hpp), which must stay independent of the
// kernels it judges; the conventions are the same and tests/test_exact_decision.cpp checks the bits.
#include "exact_decision.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include <boost/multiprecision/cpp_int.hpp>

#include "lnorm/half.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu::exact {

using BigInt = boost::multiprecision::cpp_int;

namespace {

// f32's smallest subnormal is 2^-149 (= 2^(emin − p + 1), emin = −126, p = 24); every f32, f16 and bf16
// value is an integer multiple of it, so Σx is an integer in units of 2^kLsb and Σx² in units of 2^(2·kLsb).
constexpr int kLsb = -149;
// An f32 value is sig·2^(shift + kLsb) with sig < 2^24 and shift ≤ 253 (biased exponent 254, minus 1):
// |x| < 2^277 units. With n < 2^31: |Σx| < 2^308 ≤ 5·64 bits, Σx² < 2^(554 + 31) = 2^585 ≤ 10·64 bits.
constexpr int kSumLimbs = 5;
constexpr int kSquareLimbs = 10;

// Adds v·2^shift (v < 2^64) to a little-endian limb array; the size bounds above keep every carry inside.
template <int Limbs>
void add_shifted(std::uint64_t (&acc)[Limbs], std::uint64_t v, int shift) {
  int limb = shift / 64;
  const int bit = shift % 64;
  const std::uint64_t lo = v << bit, hi = bit ? v >> (64 - bit) : 0;
  auto add_word = [&](int i, std::uint64_t w) {
    const std::uint64_t old = acc[i];
    acc[i] = old + w;
    for (bool carry = acc[i] < old; carry && ++i < Limbs;) carry = ++acc[i] == 0;
  };
  add_word(limb, lo);
  if (hi) add_word(limb + 1, hi);
}

template <int Limbs>
BigInt to_big(const std::uint64_t (&acc)[Limbs]) {
  BigInt r = 0;
  for (int i = Limbs - 1; i >= 0; --i) {
    r <<= 64;
    r += acc[i];
  }
  return r;
}

// A finite double as m·2^e exactly (m signed, odd unless 0; e = 0 for 0).
struct Parts {
  std::int64_t m;
  std::int64_t e;
};
Parts parts(double v) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(v);
  const auto biased = static_cast<std::int64_t>((b >> 52) & 0x7FF);
  std::uint64_t m = b & ((std::uint64_t{1} << 52) - 1);
  std::int64_t e = -1074;  // subnormal doubles: m·2^-1074
  if (biased) {
    m |= std::uint64_t{1} << 52;
    e = biased - 1075;  // 1023 (bias) + 52 (fraction bits)
  }
  if (m == 0) return {0, 0};
  const int tz = std::countr_zero(m);
  m >>= tz;
  const auto sm = static_cast<std::int64_t>(m);
  return {(b >> 63) ? -sm : sm, e + tz};
}

// a·2^ea + b·2^eb as an integer in units of 2^min(ea, eb) (a zero term's exponent does not count).
BigInt aligned_sum(const BigInt& a, std::int64_t ea, const BigInt& b, std::int64_t eb, std::int64_t& e) {
  e = a == 0 ? eb : b == 0 ? ea : std::min(ea, eb);
  if (a == 0 || b == 0) return a + b;
  return (a << static_cast<unsigned>(ea - e)) + (b << static_cast<unsigned>(eb - e));
}

// sign(a·2^ea − b·2^eb) for a, b > 0: the leading bits' exponents first (they decide unless equal), then
// the integers at a common exponent.
int compare_positive(const BigInt& a, std::int64_t ea, const BigInt& b, std::int64_t eb) {
  const std::int64_t ta = static_cast<std::int64_t>(boost::multiprecision::msb(a)) + ea;
  const std::int64_t tb = static_cast<std::int64_t>(boost::multiprecision::msb(b)) + eb;
  if (ta != tb) return ta > tb ? 1 : -1;
  const BigInt& l = ea >= eb ? a : b;  // the one with the larger exponent, shifted down to the other's
  const BigInt ls = l << static_cast<unsigned>(std::max(ea, eb) - std::min(ea, eb));
  const int c = ea >= eb ? ls.compare(b) : a.compare(ls);
  return c > 0 ? 1 : c < 0 ? -1 : 0;
}

// An output format: p significand bits (hidden bit included), emax, storage bits; the ordinal of a value
// is its pattern without the sign bit, negated for negative values (+0 and −0 are both 0), so adjacent
// values differ by 1 and ±inf_ordinal is ±Inf, standing for ±2^(emax+1) (reference/include/lnorm/format.hpp).
struct Format {
  int p, emax, bits;
  std::int64_t inf_ordinal() const { return ((std::int64_t{1} << (bits - p)) - 1) << (p - 1); }
};
Format format_of(DType d) {
  switch (d) {
    case DType::f16: return {11, 15, 16};
    case DType::bf16: return {8, 127, 16};
    default: return {24, 127, 32};  // f32 (f64 outputs are not the _cr kernels')
  }
}

}  // namespace

struct Row {
  std::int64_t n = 0;
  BigInt s1;                 // Σx in units of 2^kLsb (0 for RMSNorm)
  BigInt w;                  // W' = w·2^w_exp, trailing zero bits removed (smaller products)
  std::int64_t w_exp = 0;
};

namespace {
thread_local Row tl_row;
}  // namespace

const Row* row(const void* x, DType in, std::int64_t n, double eps, bool centred) {
  std::uint64_t pos[kSumLimbs] = {}, neg[kSumLimbs] = {}, sq[kSquareLimbs] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t b;  // the value's f32 bits (f16 and bf16 values are f32 values)
    if (in == DType::f32) std::memcpy(&b, static_cast<const char*>(x) + 4 * i, 4);
    else {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const char*>(x) + 2 * i, 2);
      b = in == DType::bf16 ? std::uint32_t{h} << 16 : std::bit_cast<std::uint32_t>(to_float(f16{h}));
    }
    const std::uint32_t biased = (b >> 23) & 0xFF, frac = b & 0x7FFFFF;
    // x = sig·2^(shift + kLsb): normals carry the hidden bit and sit shift = biased − 1 binades up.
    const std::uint64_t sig = biased ? frac | 0x800000 : frac;
    const int shift = biased ? static_cast<int>(biased) - 1 : 0;
    if (sig == 0) continue;
    if (centred) add_shifted(b >> 31 ? neg : pos, sig, shift);
    add_shifted(sq, sig * sig, 2 * shift);
  }
  Row& r = tl_row;
  r.n = n;
  r.s1 = to_big(pos) - to_big(neg);
  // n·S2 − S1² in units of 2^(2·kLsb), then + eps·n², eps = me·2^ee exactly.
  const BigInt nb = n;
  const BigInt var_part = nb * to_big(sq) - r.s1 * r.s1;
  const Parts ep = parts(eps);
  r.w = aligned_sum(var_part, 2 * kLsb, BigInt(ep.m) * nb * nb, ep.e, r.w_exp);
  if (r.w > 0) {
    const auto tz = boost::multiprecision::lsb(r.w);
    r.w >>= tz;
    r.w_exp += static_cast<std::int64_t>(tz);
  }
  return &r;
}

namespace {
// One element of a row: A = (n·xi − S1)·(w_hi + w_lo) = a·2^a_exp, its square and sign, and β.
struct Element {
  BigInt a, a2;
  std::int64_t a_exp;
  int sa;
  Parts bp;
  Element(const Row* r, double xi, double w_hi, double w_lo, double beta) : bp(parts(beta)) {
    const Parts xp = parts(xi), wh = parts(w_hi), wl = parts(w_lo);
    std::int64_t d_exp, w_exp;
    const BigInt d = aligned_sum(BigInt(xp.m) * r->n, xp.e, -r->s1, kLsb, d_exp);
    a = d * aligned_sum(BigInt(wh.m), wh.e, BigInt(wl.m), wl.e, w_exp);
    a_exp = d_exp + w_exp;
    a2 = a * a;
    sa = a.sign();
  }
  // sign(k·y* − m) for m = mo·2^me, k = ko·2^ke (1 by default): t = m − k·β; k·A/sqrt(W') against t by signs,
  // and where they agree by (k·A)² against t²·W' (both sides ≥ 0, the comparison of the magnitudes; its sign
  // flips for A < 0).
  int compare(const Row* r, std::int64_t mo, std::int64_t me, std::int64_t ko = 1, std::int64_t ke = 0) const {
    std::int64_t t_exp;
    const BigInt t = aligned_sum(BigInt(mo), me, -(BigInt(bp.m) * ko), bp.e + ke, t_exp);
    const int st = t.sign();
    if (sa == 0) return -st;
    if (sa != st) return sa;
    const int c = ko == 1 && ke == 0 ? compare_positive(a2, 2 * a_exp, t * t * r->w, 2 * t_exp + r->w_exp)
                                     : compare_positive(a2 * ko * ko, 2 * (a_exp + ke), t * t * r->w, 2 * t_exp + r->w_exp);
    return sa > 0 ? c : -c;
  }
};
}  // namespace

int compare_element(const Row* r, double xi, double w_hi, double w_lo, double beta, double m) {
  const Parts mp = parts(m);
  return Element(r, xi, w_hi, w_lo, beta).compare(r, mp.m, mp.e);
}

int compare_element_scaled(const Row* r, double xi, double w_hi, double w_lo, double beta, double k, double m) {
  const Parts mp = parts(m), kp = parts(k);
  return Element(r, xi, w_hi, w_lo, beta).compare(r, mp.m, mp.e, kp.m, kp.e);
}

std::uint32_t round_element(const Row* r, DType out, double xi, double w_hi, double w_lo, double beta,
                            std::uint32_t guess) {
  const Format f = format_of(out);
  const std::uint32_t sign_bit = std::uint32_t{1} << (f.bits - 1);
  const std::int64_t inf = f.inf_ordinal();
  // W' = 0 (a constant row with eps = 0): rstd = +Inf, y = NaN as IEEE; a quiet NaN is Inf's pattern with
  // the top fraction bit set.
  if (r->w <= 0) return static_cast<std::uint32_t>(inf | (std::int64_t{1} << (f.p - 2)));
  const Element el(r, xi, w_hi, w_lo, beta);
  auto cmp = [&](std::int64_t mo, std::int64_t me) { return el.compare(r, mo, me); };
  // c(k) = sign(y* − midpoint between ordinals k and k+1), −inf ≤ k < inf. For k ≥ 0 the value at k is
  // sig·2^q (q the ulp exponent of k's binade; subnormals share the smallest normal binade's) and the step
  // to k+1 is 2^q, also across a binade and from the largest finite value to 2^(emax+1): the midpoint is
  // (2·sig + 1)·2^(q−1). Midpoints of negative ordinals mirror them: mid(k) = −mid(−k − 1).
  const std::int64_t frac_mask = (std::int64_t{1} << (f.p - 1)) - 1;
  auto c = [&](std::int64_t k) {
    const std::int64_t mag = k >= 0 ? k : -k - 1, biased = mag >> (f.p - 1);
    const std::int64_t sig = biased ? (mag & frac_mask) | (frac_mask + 1) : mag;
    const std::int64_t q = std::max<std::int64_t>(biased, 1) - f.emax - (f.p - 1);
    return cmp(k >= 0 ? 2 * sig + 1 : -(2 * sig + 1), q - 1);
  };

  // The answer is the smallest k with c(k) ≤ 0 (c(inf) taken as −1: nothing lies above +Inf's boundary),
  // a tie when c(k) = 0. Galloping from the guess, then bisection, keeps c(lo) > 0 ≥ c(hi), with lo = −inf − 1
  // standing for −∞: ~2·log2|k − guess| comparisons, 2 for a right guess, ~62 across all 2^32 f32 ordinals.
  std::int64_t g = guess & (sign_bit | (sign_bit - 1));
  g = std::min<std::int64_t>(g & (sign_bit - 1), inf - 1) * ((g & sign_bit) ? -1 : 1);
  std::int64_t lo, hi;
  int c_hi;
  if (const int c0 = c(g); c0 > 0) {
    lo = g;
    for (std::int64_t step = 1;; step *= 2) {
      hi = lo + step;
      if (hi >= inf) { hi = inf, c_hi = -1; break; }
      if ((c_hi = c(hi)) <= 0) break;
      lo = hi;
    }
  } else {
    hi = g, c_hi = c0;
    for (std::int64_t step = 1;; step *= 2) {
      lo = hi - step;
      if (lo < -inf) { lo = -inf - 1; break; }
      const int cl = c(lo);
      if (cl > 0) break;
      hi = lo, c_hi = cl;
    }
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    const int cm = c(mid);
    if (cm > 0) lo = mid;
    else hi = mid, c_hi = cm;
  }
  std::int64_t k = hi;
  if (c_hi == 0 && (k & 1)) ++k;  // a tie: the even pattern (Inf's is even, so the overflow tie goes to Inf)
  if (k < 0) return static_cast<std::uint32_t>(-k) | sign_bit;
  // A zero result keeps y*'s sign: −0 for a negative y* that rounds to 0, +0 for y* = 0 exactly.
  if (k == 0 && cmp(0, 0) < 0) return sign_bit;
  return static_cast<std::uint32_t>(k);
}

}  // namespace lnorm::cpu::exact
