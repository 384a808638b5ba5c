// An independent evaluation of the backward (tests only): the textbook gradient formulas of lnorm/backward.hpp
// at 1000 bits (Boost cpp_bin_float), sharing nothing with reference/src/backward.cpp's rational rewriting and
// Ziv loop, and a rounding routine of its own. Used by test_backward_reference.cpp (its own draws) and
// test_backward_reference_suite.cpp (verify's cases).
//
// How far 1000 bits are trusted: every input is a binary format value, so sums and products of them are
// exact or off by 2^-1000 relative; rstd = 1/sqrt(var + eps) carries a 2^-1000 relative error into xhat and
// dx. A gradient whose terms cancel to below 2^-900 of their size (|v| ≪ the terms) is then not decided
// here: round_big declines values within 2^-900·|v| of a midpoint, and callers skip values below 2^-800 of
// their scale unless they are exactly 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "lnorm/format.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::testing {

using Big = boost::multiprecision::number<boost::multiprecision::cpp_bin_float<1000, boost::multiprecision::digit_base_2>,
                                          boost::multiprecision::et_off>;

// The exact-to-1000-bits gradients (x, dy: rows*cols values; gamma: cols values or empty for weight 1).
struct BigGrads {
  std::vector<Big> dx, dgamma, dbeta;
};
inline BigGrads textbook_gradients(const Problem& p, const std::vector<double>& x, const std::vector<double>& dy,
                                   const std::vector<double>& gamma) {
  const std::int64_t R = p.rows, n = p.cols;
  BigGrads g{std::vector<Big>(static_cast<std::size_t>(R * n)), std::vector<Big>(static_cast<std::size_t>(n), Big(0)),
             std::vector<Big>(static_cast<std::size_t>(n), Big(0))};
  for (std::int64_t r = 0; r < R; ++r) {
    Big mean = 0, var = 0;
    for (std::int64_t i = 0; i < n; ++i) mean += Big(x[r * n + i]);
    mean /= n;
    if (p.op.norm != Norm::layernorm) mean = 0;
    for (std::int64_t i = 0; i < n; ++i) var += (Big(x[r * n + i]) - mean) * (Big(x[r * n + i]) - mean);
    var /= n;
    const Big rstd = 1 / sqrt(var + Big(p.eps));
    std::vector<Big> xhat(static_cast<std::size_t>(n)), gg(static_cast<std::size_t>(n));
    Big mg = 0, mgx = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      xhat[i] = (Big(x[r * n + i]) - mean) * rstd;
      const Big w = gamma.empty() ? Big(1) : Big(p.gamma_offset) + Big(gamma[i]);
      gg[i] = Big(dy[r * n + i]) * w;
      mg += gg[i];
      mgx += gg[i] * xhat[i];
    }
    mg /= n;
    mgx /= n;
    for (std::int64_t i = 0; i < n; ++i) {
      g.dx[r * n + i] = rstd * (gg[i] - (p.op.norm == Norm::layernorm ? mg : Big(0)) - xhat[i] * mgx);
      g.dgamma[i] += Big(dy[r * n + i]) * xhat[i];
      g.dbeta[i] += Big(dy[r * n + i]);
    }
  }
  return g;
}

// v rounded once to f (round to nearest, ties to even; past the largest finite value's rounding boundary,
// ±Inf), or nullopt within 2^-900 of a midpoint but not on it (where 1000 bits cannot be trusted to
// decide). A v exactly on a midpoint is taken as exact, and rounds to even: sums of format values (dbeta)
// are exact at 1000 bits, and dx/dgamma land on one exactly when var + eps is a perfect square (then
// rstd, and every step after it, is exact too). An irrational value within 2^-1000 of a midpoint reads the
// same: f64 rows of huge values draw it (a constant row of 1.5·2^857 with eps 1: xhat = 1 − 2^-1715, so a dgamma
// of two such rows sits 2^-1715 below the midpoint dy1 + dy3 — the reference rounded it down, 1000 bits saw a
// tie). ties_exact = false makes a tie undecidable here (nullopt) for callers whose inputs can do that.
inline std::optional<double> round_big(const Format& f, const Big& v, bool ties_exact = true) {
  if (isnan(v)) return std::numeric_limits<double>::quiet_NaN();
  if (v == 0) return 0.0;  // the sign of an exact 0 is not this routine's to decide (callers compare values)
  auto value = [&](std::int64_t o) { return Big(bits_to_double(f, bits_of_ordinal(f, o))); };
  const std::int64_t top = f.inf_ordinal() - 1;  // the largest finite value
  // The overflow boundary: max + half its ulp (IEEE rounds a value there or beyond to ±Inf).
  const Big edge = (value(top) * 3 - value(top - 1)) / 2;
  if (abs(v) >= edge) return v > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  std::int64_t k = round_to_ordinal(f, v.convert_to<double>());
  for (int step = 0; step < 4; ++step) {
    const Big lo = (value(k - 1) + value(k)) / 2, hi = (value(k) + value(k + 1)) / 2;
    if (v > hi) ++k;
    else if (v < lo) --k;
  }
  const Big lo = (value(k - 1) + value(k)) / 2, hi = (value(k) + value(k + 1)) / 2;
  const Big tol = abs(v) * ldexp(Big(1), -900);
  if (v == lo || v == hi) {  // an exact tie: the even neighbour (its last significand bit 0)
    if (!ties_exact) return std::nullopt;
    const std::int64_t other = v == lo ? k - 1 : k + 1;
    const std::int64_t even = (bits_of_ordinal(f, k) & 1) == 0 ? k : other;
    return bits_to_double(f, bits_of_ordinal(f, even));
  }
  if (abs(v - lo) <= tol || abs(v - hi) <= tol) return std::nullopt;
  return bits_to_double(f, bits_of_ordinal(f, k));
}

}  // namespace lnorm::testing
