// An independent exact quantizer for testing the quantized reference (reference/src/quantize.cpp) and the
// formats' codec (kernels/quant.cpp): the exact y* of the norm as a 1600-bit value (and the exact rational when
// y* is rational, tests/independent_exact.hpp's reasoning), the formats' grids enumerated from their bit layouts
// here, and Q(y*/s) found by a binary search of that grid and one comparison with the midpoint, ties to the even
// mantissa. Shares no code with quant.cpp or quantize.cpp (only the f32 Format table, via round_to).
//
//   fp8_e4m3  OCP E4M3FN: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent field 0 subnormal;
//             S.1111.111 NaN, no Inf; largest 1.75·2^8 = 448 (0x7e)
//   fp8_e5m2  OCP E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits; exponent field 31: Inf (mantissa 0)
//             or NaN; largest 1.75·2^15 = 57344 (0x7b)
//   int8      two's complement, −128..127
//   fp8_e4m3fnuz, fp8_e5m2fnuz  (LLVM's Float8E4M3FNUZ / Float8E5M2FNUZ, arXiv 2206.02915): sign, 4 exponent bits
//             (bias 8) and 3 mantissa bits / 5 (bias 16) and 2; 0x80 (the bit pattern of −0) is the only NaN, no
//             Inf, no −0 (a negative value that rounds to 0 gives 0x00); largest 1.875·2^7 = 240 / 1.75·2^15 = 57344
//             (0x7f)
// Q: nearest value, ties to even (the even mantissa: last mantissa bit 0; int8: the even integer), beyond the
// largest value the largest value (both signs; int8: 127 above, −128 below), a negative value that rounds to 0
// gives −0 (0x80) in fp8.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "independent_exact.hpp"
#include "lnorm/format.hpp"
#include "lnorm/quant.hpp"

namespace lnorm::testing {

// A real number: its 1600-bit value, and the exact rational when it is rational (then every decision about it
// is taken on the rational). nan: no real value.
struct RealValue {
  bool nan = false;
  BigF approx = 0;
  std::optional<Rat> exact;
};

inline RealValue real_of(double v) {
  RealValue r;
  if (std::isnan(v)) {
    r.nan = true;
    return r;
  }
  r.approx = BigF(v);
  r.exact = exact_rational(v);
  return r;
}

// sign(a − d) for a real a and a double d. An irrational a equal to d at 1600 bits would be undecided: throws.
inline int compare_real(const RealValue& a, double d) {
  if (a.exact) {
    const Rat r = exact_rational(d);
    return *a.exact < r ? -1 : *a.exact > r ? 1 : 0;
  }
  const BigF b(d);
  if (a.approx == b) throw std::runtime_error("independent_quant: an irrational value within 2^-1600 of a boundary");
  return a.approx < b ? -1 : 1;
}
inline int sign_of(const RealValue& a) { return compare_real(a, 0.0); }

// independent_norm (independent_exact.hpp) keeping each y* as a real instead of rounding it: the same textbook
// evaluation. x: the row the norm reads (for Add & Norm, h as stored).
inline std::vector<RealValue> independent_norm_real(const std::vector<double>& x, const std::vector<double>* gamma,
                                                    const std::vector<double>* beta, double eps, bool centred,
                                                    double offset) {
  const std::size_t n = x.size();
  std::vector<RealValue> out(n);
  const auto all_nan = [&] {
    for (RealValue& o : out) o.nan = true;
    return out;
  };
  for (double v : x)
    if (!std::isfinite(v)) return all_nan();
  const Rat mean = exact_mean(x, centred);
  const Rat sq = exact_centred_squares(x, mean);
  const Rat v = sq / Rat(static_cast<long long>(n)) + exact_rational(eps);
  if (v == 0) return all_nan();  // rstd = +Inf: y = 0·Inf
  BigI rn, rd;
  const bool rational_sqrt = perfect_square(mp::numerator(v), rn) && perfect_square(mp::denominator(v), rd);
  const Rat rstd_exact = rational_sqrt ? Rat(Rat(rd) / Rat(rn)) : Rat(0);
  const BigF rstd_f = rational_sqrt ? to_bigf(rstd_exact) : BigF(BigF(1) / mp::sqrt(to_bigf(v)));
  for (std::size_t i = 0; i < n; ++i) {
    const double g = gamma ? (*gamma)[i] : 1.0, b = beta ? (*beta)[i] : 0.0;
    if (!std::isfinite(g) || !std::isfinite(b)) {
      out[i].nan = true;
      continue;
    }
    const Rat w = gamma ? Rat(exact_rational(offset) + exact_rational(g)) : Rat(1);
    const Rat c = (exact_rational(x[i]) - mean) * w;
    if (rational_sqrt || c == 0) {
      const Rat y = c * rstd_exact + exact_rational(b);
      out[i].exact = y;
      out[i].approx = to_bigf(y);
    } else {
      out[i].approx = to_bigf(c) * rstd_f + BigF(b);
    }
  }
  return out;
}

// h = x + r, the exact sum rounded once to f (ties to even, overflow to Inf), as Add & Norm stores it.
inline double independent_add(const Format& f, double x, double r) {
  if (!std::isfinite(x) || !std::isfinite(r)) return x + r;
  const Rat s = exact_rational(x) + exact_rational(r);
  return round_to(f, to_bigf(s), s);
}

// The value of an fp8 or int8 code, from the bit layout: NaN for the NaN codes, ±Inf for E5M2's, −0 for fp8's
// 0x80.
inline double independent_code_value(QuantFormat f, std::uint8_t code) {
  if (f == QuantFormat::int8) return code < 128 ? code : static_cast<double>(code) - 256;
  if (f == QuantFormat::fp4_e2m1) {  // OCP MX v1.0 table 6: S.EE.M, bias 1, every code finite; a nibble
    static constexpr double kMagnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (code & 0x8) ? -kMagnitude[code & 7] : kMagnitude[code & 7];
  }
  const bool fnuz = f == QuantFormat::fp8_e4m3fnuz || f == QuantFormat::fp8_e5m2fnuz;
  const bool e4m3 = f == QuantFormat::fp8_e4m3 || f == QuantFormat::fp8_e4m3fnuz;
  const int mbits = e4m3 ? 3 : 2, ebits = e4m3 ? 4 : 5, bias = (e4m3 ? 7 : 15) + (fnuz ? 1 : 0);
  if (fnuz) {
    if (code == 0x80) return std::numeric_limits<double>::quiet_NaN();
    const int ef = (code >> mbits) & ((1 << ebits) - 1), mf = code & ((1 << mbits) - 1);
    const double frac = static_cast<double>(mf) / (1 << mbits);
    const double mag = ef == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, ef - bias);
    return (code & 0x80) ? -mag : mag;
  }
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int ef = (code >> mbits) & ((1 << ebits) - 1), mf = code & ((1 << mbits) - 1);
  if (e4m3 && ef == 15 && mf == 7) return std::numeric_limits<double>::quiet_NaN();  // E4M3FN: only S.1111.111
  if (!e4m3 && ef == 31) return mf == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  const double frac = static_cast<double>(mf) / (1 << mbits);
  const double mag = ef == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, ef - bias);
  return sign * mag;
}

// The largest finite value and OCP MX's emax_elem, written out here (not quant.hpp's).
inline double independent_qmax(QuantFormat f) {
  switch (f) {
    case QuantFormat::fp8_e4m3: return 448;
    case QuantFormat::fp8_e4m3fnuz: return 240;
    case QuantFormat::fp8_e5m2:
    case QuantFormat::fp8_e5m2fnuz: return 57344;
    case QuantFormat::fp4_e2m1: return 6;
    default: return 127;
  }
}
// The FNUZ formats are not MX element types (-1).
inline int independent_emax_elem(QuantFormat f) {
  return f == QuantFormat::fp8_e4m3 ? 8 : f == QuantFormat::fp8_e5m2 ? 15 : f == QuantFormat::fp4_e2m1 ? 2 : -1;
}
inline bool independent_fnuz(QuantFormat f) { return f == QuantFormat::fp8_e4m3fnuz || f == QuantFormat::fp8_e5m2fnuz; }

class IndependentQuantizer {
 public:
  struct Point {
    double magnitude;  // ≥ 0, ascending
    std::uint8_t code;
    bool even;  // last mantissa bit 0 (int8: an even integer)
  };
  struct Counts {
    std::int64_t ties = 0;        // |y*/s| exactly on a midpoint of the grid (or on the one past the largest value)
    std::int64_t near_ties = 0;   // within 1e-7 (relative) of one, not on it
    std::int64_t saturated = 0;   // |y*/s| beyond the largest value
    std::int64_t negative_zero = 0;
    std::int64_t nan = 0;
    std::int64_t zero_groups = 0;  // counted by the caller (groups whose y* are all 0)
  };

  explicit IndependentQuantizer(QuantFormat f) : f_(f) {
    if (f == QuantFormat::int8) {
      for (int v = 0; v <= 128; ++v) {
        if (v <= 127) pos_.push_back({static_cast<double>(v), static_cast<std::uint8_t>(v), v % 2 == 0});
        neg_.push_back({static_cast<double>(v), static_cast<std::uint8_t>((256 - v) & 0xff), v % 2 == 0});
      }
    } else if (f == QuantFormat::fp4_e2m1) {
      for (int c = 0; c < 8; ++c) {
        const double v = independent_code_value(f, static_cast<std::uint8_t>(c));
        pos_.push_back({v, static_cast<std::uint8_t>(c), (c & 1) == 0});
        neg_.push_back({v, static_cast<std::uint8_t>(c | 0x8), (c & 1) == 0});
      }
    } else {
      const int mbits = f == QuantFormat::fp8_e4m3 || f == QuantFormat::fp8_e4m3fnuz ? 3 : 2;
      for (int c = 0; c < 128; ++c) {
        const double v = independent_code_value(f, static_cast<std::uint8_t>(c));
        if (!std::isfinite(v)) continue;
        const bool even = ((c & ((1 << mbits) - 1)) & 1) == 0;
        pos_.push_back({v, static_cast<std::uint8_t>(c), even});
        // magnitude 0: 0x80, −0; FNUZ has no −0 (0x80 is its NaN): +0
        neg_.push_back({v, static_cast<std::uint8_t>(c == 0 && independent_fnuz(f) ? 0 : c | 0x80), even});
      }
      const auto by_value = [](const Point& a, const Point& b) { return a.magnitude < b.magnitude; };
      std::sort(pos_.begin(), pos_.end(), by_value);
      std::sort(neg_.begin(), neg_.end(), by_value);
    }
    for (const auto* t : {&pos_, &neg_})
      for (std::size_t i = 1; i < t->size(); ++i)
        if (!((*t)[i - 1].magnitude < (*t)[i].magnitude)) throw std::logic_error("independent_quant: grid not strictly increasing");
  }

  QuantFormat format() const { return f_; }
  const std::vector<Point>& positive() const { return pos_; }
  const std::vector<Point>& negative() const { return neg_; }  // magnitudes of the negative values
  // int8 and E2M1 have no NaN code: 0
  std::uint8_t nan_code() const {
    return f_ == QuantFormat::int8 || f_ == QuantFormat::fp4_e2m1 ? 0 : independent_fnuz(f_) ? 0x80 : 0x7f;
  }

  // The code of Q(t) for a real t (t = y*/s: `divide` builds it).
  std::uint8_t quantize(const RealValue& t, Counts* counts = nullptr) const {
    if (t.nan) {
      if (counts) counts->nan++;
      return nan_code();
    }
    const int sign = sign_of(t);
    if (sign == 0) return pos_.front().code;  // exactly 0: +0
    RealValue a = t;                             // |t|
    if (sign < 0) {
      a.approx = -a.approx;
      if (a.exact) a.exact = -*a.exact;
    }
    const std::vector<Point>& g = sign > 0 ? pos_ : neg_;
    const int top_cmp = compare_real(a, g.back().magnitude);
    if (top_cmp >= 0) {
      if (top_cmp > 0 && counts) counts->saturated++;
      return g.back().code;
    }
    // The largest i with g[i] ≤ a < g[i+1].
    std::size_t lo = 0, hi = g.size() - 1;  // g[lo] ≤ a < g[hi]
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (compare_real(a, g[mid].magnitude) >= 0) lo = mid;
      else hi = mid;
    }
    const double midpoint = (g[lo].magnitude + g[hi].magnitude) / 2;  // exact: small dyadics
    const int c = compare_real(a, midpoint);
    if (counts) {
      if (c == 0) counts->ties++;
      else if (mp::abs(a.approx - BigF(midpoint)) < BigF(1e-7) * BigF(midpoint)) counts->near_ties++;
    }
    const Point& p = c < 0 ? g[lo] : c > 0 ? g[hi] : (g[lo].even ? g[lo] : g[hi]);
    if (counts && p.magnitude == 0 && sign < 0 && f_ != QuantFormat::int8 && !independent_fnuz(f_)) counts->negative_zero++;
    return p.code;
  }

  // Q(y / s) for a finite s ≥ 0 (s = 0: ±Inf for y ≠ 0, which saturates; 0 for y = 0). inv_s: 1/s to 1600 bits.
  std::uint8_t quantize_scaled(const RealValue& y, double s, const BigF& inv_s, Counts* counts = nullptr) const {
    if (y.nan || std::isnan(s)) return quantize(RealValue{true, 0, std::nullopt}, counts);
    if (std::isinf(s)) return sign_of(y) < 0 ? neg_.front().code : pos_.front().code;  // nvfp4's c = 0: ±0
    if (s == 0) {
      const int sign = sign_of(y);
      if (sign == 0) return pos_.front().code;
      if (counts) counts->saturated++;
      return sign > 0 ? pos_.back().code : neg_.back().code;
    }
    RealValue t;
    t.approx = y.approx * inv_s;
    if (y.exact) t.exact = *y.exact / exact_rational(s);
    return quantize(t, counts);
  }

 private:
  QuantFormat f_;
  std::vector<Point> pos_, neg_;
};

// The exact dynamic scale of one group of y* (Scaling::row / group / mx): f32(amax/qmax) or mx's E8M0 code.
struct IndependentScale {
  bool nan = false;   // a y* of the group is NaN: the scale is NaN (f32 NaN, E8M0 255) and so is every q
  bool zero = false;  // every y* is 0: s = 1 (row/group), E8M0 code 0 (mx)
  double value = 0;   // the multiplier s: f32 value, or 2^X (mx)
  int mx_code = 0;    // X + 127
  int e4m3_code = 0;  // nvfp4's block scale code
};

// The element of largest |y*| in a group (amax) and that magnitude; false where a y* is NaN.
inline bool group_amax(const RealValue* y, std::size_t n, const RealValue*& amax, BigF& amax_abs) {
  for (std::size_t i = 0; i < n; ++i) {
    if (y[i].nan) return false;
    const BigF a = mp::abs(y[i].approx);
    if (!amax || a > amax_abs) amax = &y[i], amax_abs = a;
  }
  return true;
}

// nvfp4's block scale of one group (16 y*), given G: c = amax·G/6 rounded to the E4M3 grid enumerated from its bit
// layout (nearest, ties to the even code, saturating at 448), s = f32(value(c)/G), +Inf for c = 0, NaN (code
// 0x7f) for a group holding a NaN; zero: every y* is 0.
inline IndependentScale independent_nvfp4_scale(const RealValue* y, std::size_t n, float global_scale) {
  IndependentScale out;
  const RealValue* amax = nullptr;
  BigF amax_abs = 0;
  if (!group_amax(y, n, amax, amax_abs)) {
    out.nan = true;
    out.value = std::numeric_limits<double>::quiet_NaN();
    out.e4m3_code = 0x7f;
    return out;
  }
  out.zero = amax_abs == 0;
  RealValue t;
  t.approx = amax_abs * BigF(static_cast<double>(global_scale)) / BigF(6);
  if (amax->exact) t.exact = Rat(mp::abs(*amax->exact) * exact_rational(static_cast<double>(global_scale)) / Rat(6));
  out.e4m3_code = IndependentQuantizer(QuantFormat::fp8_e4m3).quantize(t);
  const double v = independent_code_value(QuantFormat::fp8_e4m3, static_cast<std::uint8_t>(out.e4m3_code));
  if (v == 0) {
    out.value = std::numeric_limits<double>::infinity();
    return out;
  }
  const Rat ratio = exact_rational(v) / exact_rational(static_cast<double>(global_scale));
  out.value = round_to(format_of(DType::f32), BigF(v) / BigF(static_cast<double>(global_scale)), ratio);
  return out;
}

// mx's exponent under a rule (lnorm/quant.hpp --mx-rule), from its definition in words, on the exact amax (rational
// where there is one): floor = floor(log2 a); ceil = ceil(log2 a); even = floor(log2 a′), a′ = a's significand
// rounded half up to the element's mantissa bits (written out: E4M3 3, E5M2 2, E2M1 1); rceil = ceil(log2(a/qmax)).
// Returns the level before mx's offset (emax_elem, 0 for rceil) and clamp.
inline int independent_mx_level(QuantFormat f, MxRule rule, const BigF& a, const std::optional<Rat>& exact) {
  const auto pow2 = [](int k) { return k >= 0 ? Rat(BigI(1) << k) : Rat(Rat(1) / Rat(BigI(1) << -k)); };
  // floor(log2 v), exactly where v is rational
  const auto floor_log2 = [&](const BigF& v, const std::optional<Rat>& ve) {
    int e = 0;
    (void)mp::frexp(v, &e);
    int fl = e - 1;
    if (ve) {
      while (*ve < pow2(fl)) --fl;
      while (*ve >= pow2(fl + 1)) ++fl;
    }
    return fl;
  };
  const auto is_pow2 = [&](const BigF& v, const std::optional<Rat>& ve, int fl) { return ve ? *ve == pow2(fl) : v == mp::ldexp(BigF(1), fl); };
  const int fl = floor_log2(a, exact);
  switch (rule) {
    case MxRule::floor: return fl;
    case MxRule::ceil: return fl + (is_pow2(a, exact, fl) ? 0 : 1);
    case MxRule::even: {
      const int mbits = f == QuantFormat::fp8_e4m3 ? 3 : f == QuantFormat::fp8_e5m2 ? 2 : 1;
      // t = a·2^(mbits − fl) in [2^mbits, 2^(mbits+1)); rounded half up, it reaches 2^(mbits+1) or not
      const Rat half(1, 2);
      // floor(t + 1/2) ≥ 2^(mbits+1), an integer, iff t + 1/2 ≥ 2^(mbits+1)
      const bool carries = exact ? *exact * pow2(mbits - fl) + half >= pow2(mbits + 1)
                                 : a * mp::ldexp(BigF(1), mbits - fl) + BigF(0.5) >= mp::ldexp(BigF(1), mbits + 1);
      return fl + (carries ? 1 : 0);
    }
    case MxRule::rceil: {
      const BigF v = a / BigF(independent_qmax(f));
      const std::optional<Rat> ve = exact ? std::optional<Rat>(*exact / exact_rational(independent_qmax(f))) : std::nullopt;
      const int fv = floor_log2(v, ve);
      return fv + (is_pow2(v, ve, fv) ? 0 : 1);
    }
  }
  return fl;
}

inline IndependentScale independent_scale(QuantFormat f, bool mx, const RealValue* y, std::size_t n, MxRule rule = MxRule::floor) {
  IndependentScale out;
  const RealValue* amax = nullptr;
  BigF amax_abs = 0;
  if (!group_amax(y, n, amax, amax_abs)) {
    out.nan = true;
    out.value = std::numeric_limits<double>::quiet_NaN();
    out.mx_code = 255;
    return out;
  }
  if (amax_abs == 0) {  // 0 at 1600 bits: exactly 0 (an irrational y* is not)
    out.zero = true;
    out.value = mx ? std::ldexp(1.0, -127) : 1.0;
    out.mx_code = 0;
    return out;
  }
  const std::optional<Rat> amax_exact = amax->exact ? std::optional<Rat>(mp::abs(*amax->exact)) : std::nullopt;
  if (mx) {
    const int level = independent_mx_level(f, rule, amax_abs, amax_exact);
    const int x = std::clamp(level - (rule == MxRule::rceil ? 0 : independent_emax_elem(f)), -127, 127);
    out.mx_code = x + 127;
    out.value = std::ldexp(1.0, x);
    return out;
  }
  const double q = independent_qmax(f);
  const std::optional<Rat> ratio = amax_exact ? std::optional<Rat>(*amax_exact / exact_rational(q)) : std::nullopt;
  out.value = round_to(format_of(DType::f32), amax_abs / BigF(q), ratio);
  if (out.value == 0) {  // amax/qmax below f32's range: scaled like a zero group (lnorm/quant.hpp)
    out.zero = true;
    out.value = 1.0;
  }
  return out;
}

}  // namespace lnorm::testing
