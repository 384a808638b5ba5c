// Rounding an exactly known real number once, given only a way to compare it with dyadic numbers.
//
// Round-to-nearest-even is decided by the two midpoints around a candidate: if y* lies strictly
// between them the candidate is the answer; on a midpoint the even neighbour wins; otherwise the
// candidate moves one ulp and the test repeats. Overflow needs no special case: the midpoint between
// the largest finite value and "2^(emax+1)" (where Inf sits in the ordinal order) is exactly the
// IEEE overflow threshold, and Inf's pattern is even, so ties there go to Inf as IEEE says.
#pragma once

#include <cmath>
#include <cstdint>

#include "dyadic.hpp"
#include "lnorm/format.hpp"

namespace lnorm::detail {

// The value at ordinal k as a dyadic; +-inf_ordinal stands for +-2^(emax+1).
inline Dyadic ordinal_value(const Format& f, std::int64_t k) {
  const std::int64_t inf = f.inf_ordinal();
  if (k >= inf) return Dyadic::pow2(f.emax + 1);
  if (k <= -inf) return -Dyadic::pow2(f.emax + 1);
  return Dyadic::from_double(bits_to_double(f, bits_of_ordinal(f, k)));
}

inline Dyadic midpoint(const Format& f, std::int64_t k) {  // between ordinals k and k+1
  return half(ordinal_value(f, k) + ordinal_value(f, k + 1));
}

// cmp(Dyadic m) returns sign(y* − m). Returns the bit pattern of y* rounded to f, starting the
// search at ordinal k0 (any guess; a good one makes this two comparisons).
template <class Cmp>
std::uint64_t round_exactly(const Format& f, std::int64_t k0, Cmp&& cmp) {
  const std::int64_t inf = f.inf_ordinal();
  std::int64_t k = std::clamp(k0, -inf, inf);
  auto even = [](std::int64_t a, std::int64_t b) { return (a & 1) == 0 ? a : b; };
  for (;;) {
    if (k < inf) {
      const int c = cmp(midpoint(f, k));
      if (c > 0) { ++k; continue; }
      if (c == 0) { k = even(k, k + 1); break; }
    }
    if (k > -inf) {
      const int c = cmp(midpoint(f, k - 1));
      if (c < 0) { --k; continue; }
      if (c == 0) { k = even(k - 1, k); break; }
    }
    break;
  }
  if (k == 0 && cmp(Dyadic{}) < 0) return bits_of_ordinal(f, 0) | (std::uint64_t{1} << (f.bits - 1));
  return bits_of_ordinal(f, k);
}

}  // namespace lnorm::detail
