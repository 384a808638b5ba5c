// An independent exact LayerNorm and RMSNorm for testing the reference: the textbook definition in exact
// rational arithmetic (Boost cpp_rational), square roots at 1600 bits, and a separate rounding
// routine. It shares no code with reference/ beyond the Format table, and it is slow (fine: tests).
//
// Why it is exact: mean and var are exact rationals; v = var + eps is rational, and sqrt(v) is
// rational iff v's reduced numerator and denominator are perfect squares — then y is an exact
// rational and ties are detected exactly. Otherwise y* = β + c/sqrt(v) with c ≠ 0 rational is
// irrational, so it is never on a rounding boundary, and 1600 bits decide its rounding unless it
// lies within 2^-1500 (relative) of one — far closer than any case these tests build.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include "lnorm/format.hpp"

namespace lnorm::testing {

namespace mp = boost::multiprecision;
using Rat = mp::cpp_rational;
using BigI = mp::cpp_int;
using BigF = mp::number<mp::cpp_bin_float<1600, mp::digit_base_2>, mp::et_off>;

inline Rat exact_rational(double v) {
  int e = 0;
  const double fr = std::frexp(v, &e);
  const auto m = static_cast<std::int64_t>(std::ldexp(fr, 53));
  e -= 53;
  Rat r = Rat(m);
  if (e >= 0) r *= Rat(BigI(1) << e);
  else r /= Rat(BigI(1) << -e);
  return r;
}

inline BigF to_bigf(const Rat& r) { return BigF(mp::numerator(r)) / BigF(mp::denominator(r)); }

// Rounds a real given by a high-precision value (and, when rational, its exact value, used to break
// exact ties) to the format, ties to even; returns the value as a double (exact), -0 for negative
// values that round to zero.
inline double round_to(const Format& f, const BigF& v, const std::optional<Rat>& exact) {
  if (v == 0) return 0.0;
  const bool neg = v < 0;
  const BigF a = neg ? BigF(-v) : v;
  int e = 0;
  (void)mp::frexp(a, &e);  // a = fr·2^e, fr in [0.5, 1): leading bit has exponent e−1
  const int qexp = std::max(e - 1, f.emin) - f.precision + 1;
  const BigF scaled = mp::ldexp(a, -qexp);
  BigI r = BigI(mp::floor(scaled));
  const BigF frac = scaled - BigF(r);
  bool up = frac > BigF(0.5);
  if (exact) {
    // A rational may sit exactly on (or within 2^-1600 of) the midpoint: decide exactly.
    const Rat quantum = qexp >= 0 ? Rat(BigI(1) << qexp) : Rat(1) / Rat(BigI(1) << -qexp);
    const Rat mid = (Rat(r) + Rat(1, 2)) * quantum;
    const Rat mag = neg ? Rat(-*exact) : *exact;
    up = mag > mid || (mag == mid && r % 2 == 1);
  }
  if (up) ++r;
  double out = std::ldexp(r.convert_to<double>(), qexp);
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  if (out > max_finite) out = INFINITY;
  return neg ? -out : out;
}

inline bool perfect_square(const BigI& v, BigI& root) {
  if (v < 0) return false;
  root = mp::sqrt(v);
  return root * root == v;
}

// The row's exact mean (0 for RMSNorm: centred = false) and Σ(x − mean)², as rationals (finite x).
inline Rat exact_mean(const std::vector<double>& x, bool centred) {
  Rat sum = 0;
  for (double v : x) sum += exact_rational(v);
  return centred ? Rat(sum / Rat(static_cast<long long>(x.size()))) : Rat(0);
}
inline Rat exact_centred_squares(const std::vector<double>& x, const Rat& mean) {
  Rat sq = 0;
  for (double v : x) {
    const Rat d = exact_rational(v) - mean;
    sq += d * d;
  }
  return sq;
}

struct IndependentRow {
  std::vector<double> y;  // rounded to the data format (NaN where NaN)
  double mean = 0, rstd = 0;
};

// x, gamma, beta: the row's values (exactly representable in their formats). eps exact. centred: LayerNorm
// (false: RMSNorm, the mean taken as 0, reported as 0). offset: y uses (offset + gamma), exactly.
inline IndependentRow independent_norm(const Format& data, const Format& stats, const std::vector<double>& x,
                                       const std::vector<double>* gamma, const std::vector<double>* beta, double eps,
                                       bool centred, double offset) {
  IndependentRow out;
  const std::size_t n = x.size();
  out.y.assign(n, NAN);
  for (double v : x)
    if (!std::isfinite(v)) {
      out.mean = out.rstd = NAN;
      return out;
    }
  const Rat mean = exact_mean(x, centred);
  const Rat sq = exact_centred_squares(x, mean);
  const Rat var = sq / Rat(static_cast<long long>(n));
  const Rat v = var + exact_rational(eps);
  out.mean = round_to(stats, to_bigf(mean), mean);
  if (v == 0) {
    out.rstd = INFINITY;
    return out;  // y = 0·Inf = NaN
  }
  BigI rn, rd;
  const bool rational_sqrt = perfect_square(mp::numerator(v), rn) && perfect_square(mp::denominator(v), rd);
  std::optional<Rat> rstd_exact;
  BigF rstd_f;
  if (rational_sqrt) {
    rstd_exact = Rat(rd) / Rat(rn);
    rstd_f = to_bigf(*rstd_exact);
  } else {
    rstd_f = BigF(1) / mp::sqrt(to_bigf(v));
  }
  out.rstd = round_to(stats, rstd_f, rstd_exact);
  for (std::size_t i = 0; i < n; ++i) {
    const double g = gamma ? (*gamma)[i] : 1.0, b = beta ? (*beta)[i] : 0.0;
    if (!std::isfinite(g) || !std::isfinite(b)) continue;  // NaN
    const Rat w = gamma ? exact_rational(offset) + exact_rational(g) : Rat(1);
    const Rat c = (exact_rational(x[i]) - mean) * w;
    if (rational_sqrt || c == 0) {
      const Rat y = c * (rational_sqrt ? *rstd_exact : Rat(0)) + exact_rational(b);
      out.y[i] = round_to(data, to_bigf(y), y);
    } else {
      out.y[i] = round_to(data, to_bigf(c) * rstd_f + BigF(b), std::nullopt);
    }
  }
  return out;
}

inline IndependentRow independent_layernorm(const Format& data, const Format& stats, const std::vector<double>& x,
                                            const std::vector<double>* gamma, const std::vector<double>* beta,
                                            double eps) {
  return independent_norm(data, stats, x, gamma, beta, eps, true, 0);
}

}  // namespace lnorm::testing
