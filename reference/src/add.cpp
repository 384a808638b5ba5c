#include "lnorm/add.hpp"

#include <cmath>
#include <limits>

#include "double_double.hpp"

namespace lnorm {

ExactSum exact_sum(double x, double r) {
  if (std::isnan(x) || std::isnan(r)) return {std::numeric_limits<double>::quiet_NaN(), 0};
  const double s = x + r;
  if (!std::isfinite(s)) return {s, 0};  // NaN for Inf − Inf; an infinite operand or f64 overflow: ±Inf
  const detail::DD d = detail::two_sum(x, r);
  return {d.hi, d.lo};
}

std::uint64_t round_sum_bits(const Format& f, double x, double r) {
  const ExactSum e = exact_sum(x, r);
  if (std::isnan(e.hi)) return double_to_bits(f, e.hi);
  // f64: IEEE's sum is the rounded one. A zero sum keeps IEEE's sign (−0 only for −0 + −0): the sum
  // of two values of f is a multiple of f's smallest subnormal, so no other sum rounds to zero.
  if (f.dtype == DType::f64 || std::isinf(e.hi) || e.hi == 0) return double_to_bits(f, e.hi);
  const std::int64_t k = round_to_ordinal(f, e.hi);
  if (e.lo == 0) return bits_of_ordinal(f, k);
  // hi is the double nearest x + r, and every value and midpoint of f (p ≤ 24, the f32 range) is a
  // double: the exact sum lies on hi's side of every midpoint except hi itself. So one rounding of hi
  // is right unless hi is a midpoint of f, where lo's sign breaks the tie.
  const double top = std::ldexp(1.0, f.emax + 1);  // Inf's place when rounding: 2^(emax+1)
  auto value = [&](std::int64_t ord) {
    if (ord >= f.inf_ordinal()) return top;
    if (ord <= -f.inf_ordinal()) return -top;
    return bits_to_double(f, bits_of_ordinal(f, ord));
  };
  const double rounded = value(k);
  if (rounded == e.hi) return bits_of_ordinal(f, k);
  const std::int64_t other = rounded > e.hi ? k - 1 : k + 1;
  const double mid = (rounded + value(other)) / 2;  // exact: two adjacent values of f (or f's top and 2^(emax+1))
  if (mid != e.hi) return bits_of_ordinal(f, k);
  const bool up = e.lo > 0;  // the exact sum is above the midpoint
  return bits_of_ordinal(f, (value(other) > rounded) == up ? other : k);
}

void add_row(const Problem& p, const void* x, const void* residual, std::int64_t n, void* h_out,
             ElementReference* elems) {
  const Format hf = format_of(p.residual_dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = value_at(p.dtype, x, i), b = value_at(p.residual_dtype, residual, i);
    if (h_out) set_bits_at(p.residual_dtype, h_out, i, round_sum_bits(hf, a, b));
    if (elems) {
      const ExactSum e = exact_sum(a, b);
      elems[i] = {e.hi, e.lo, e.hi, std::fabs(e.hi)};
    }
  }
}

}  // namespace lnorm
