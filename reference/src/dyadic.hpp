// Exact dyadic rationals m * 2^e with an arbitrary-precision integer m.
//
// Every value of every storage format is dyadic, and so are sums, differences and products of them;
// the reference keeps every quantity it can in this form and compares the rest by squaring
// (see exact_row.cpp), so no rounding happens before the single final one.
#pragma once

#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstdint>

namespace lnorm::detail {

using BigInt = boost::multiprecision::cpp_int;

struct Dyadic {
  BigInt m = 0;
  std::int64_t e = 0;

  static Dyadic from_double(double v) {  // v finite
    Dyadic d;
    if (v == 0) return d;
    int exp = 0;
    const double frac = std::frexp(v, &exp);                 // v = frac * 2^exp, 0.5 <= |frac| < 1
    const auto mant = static_cast<std::int64_t>(std::ldexp(frac, 53));  // exact: 53-bit integer
    d.m = mant;
    d.e = exp - 53;
    return d;
  }
  static Dyadic pow2(std::int64_t e) { return Dyadic{BigInt(1), e}; }
  int sign() const { return m.sign(); }
};

// a * 2^shift for shift >= 0.
inline BigInt shl(const BigInt& a, std::int64_t shift) { return a << static_cast<unsigned>(shift); }

inline Dyadic operator+(const Dyadic& a, const Dyadic& b) {
  if (a.m == 0) return b;
  if (b.m == 0) return a;
  if (a.e <= b.e) return {a.m + shl(b.m, b.e - a.e), a.e};
  return {shl(a.m, a.e - b.e) + b.m, b.e};
}
inline Dyadic operator-(const Dyadic& a) { return {-a.m, a.e}; }
inline Dyadic operator-(const Dyadic& a, const Dyadic& b) { return a + (-b); }
inline Dyadic operator*(const Dyadic& a, const Dyadic& b) { return {a.m * b.m, a.e + b.e}; }
inline Dyadic operator*(const Dyadic& a, const BigInt& k) { return {a.m * k, a.e}; }
inline Dyadic half(const Dyadic& a) { return {a.m, a.e - 1}; }

// sign(a - b), exactly.
inline int compare(const Dyadic& a, const Dyadic& b) {
  if (a.m.sign() != b.m.sign() || a.m == 0) return a.m.sign() > b.m.sign() ? 1 : a.m.sign() < b.m.sign() ? -1 : 0;
  if (a.e == b.e) return a.m < b.m ? -1 : a.m > b.m ? 1 : 0;
  if (a.e < b.e) {
    const BigInt bm = shl(b.m, b.e - a.e);
    return a.m < bm ? -1 : a.m > bm ? 1 : 0;
  }
  const BigInt am = shl(a.m, a.e - b.e);
  return am < b.m ? -1 : am > b.m ? 1 : 0;
}

// Removes trailing zero bits of m into e, keeping numbers small.
inline void normalize(Dyadic& a) {
  if (a.m == 0) {
    a.e = 0;
    return;
  }
  const auto tz = static_cast<std::int64_t>(boost::multiprecision::lsb(boost::multiprecision::abs(a.m)));
  if (tz > 0) {
    a.m >>= static_cast<unsigned>(tz);
    a.e += tz;
  }
}

}  // namespace lnorm::detail
