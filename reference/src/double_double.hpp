// Double-double arithmetic (Dekker, Knuth; see Joldes, Muller, Popescu, "Tight and rigorous error
// bounds for basic building blocks of double-word arithmetic", ACM TOMS 2017) for the reference's
// fast path. Each operation below has relative error under 2^-102 for normal-range operands (the
// paper's bounds are 3u^2..5u^2 with u = 2^-53); exact_row.cpp adds a wide margin on top.
#pragma once

#include <cmath>

namespace lnorm::detail {

struct DD {
  double hi = 0, lo = 0;
};

inline DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  return {s, err};
}
inline DD fast_two_sum(double a, double b) {  // |a| >= |b| or a == 0
  const double s = a + b;
  return {s, b - (s - a)};
}
inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}
// (a.hi + a.lo) + b
inline DD add(const DD& a, double b) {
  const DD s = two_sum(a.hi, b);
  return fast_two_sum(s.hi, s.lo + a.lo);
}
// (a.hi + a.lo) - (b.hi + b.lo), accurate version (both parts summed with two_sum).
inline DD sub(const DD& a, const DD& b) {
  const DD s = two_sum(a.hi, -b.hi);
  const DD t = two_sum(a.lo, -b.lo);
  const DD u = fast_two_sum(s.hi, s.lo + t.hi);
  return fast_two_sum(u.hi, u.lo + t.lo);
}
inline DD mul(const DD& a, const DD& b) {
  const DD p = two_prod(a.hi, b.hi);
  return fast_two_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}
inline DD mul(const DD& a, double b) {
  const DD p = two_prod(a.hi, b);
  return fast_two_sum(p.hi, p.lo + a.lo * b);
}

}  // namespace lnorm::detail
