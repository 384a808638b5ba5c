// f16 (IEEE binary16) and bf16 (bfloat16) storage types with exact conversions.
//
// These are storage only: kernels convert to f32, compute, and round once on the way out.
// to_float is exact (both formats are subsets of f32). from_float rounds to nearest, ties to
// even, produces subnormals, overflows to Inf, and keeps NaN a (quiet) NaN. Tested over all
// 65536 bit patterns in tests/test_half.cpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace lnorm {

struct f16 {
  std::uint16_t bits = 0;
};
struct bf16 {
  std::uint16_t bits = 0;
};

constexpr float to_float(float x) { return x; }
constexpr double to_float(double x) { return x; }

constexpr float to_float(bf16 h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16);
}

constexpr float to_float(f16 h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1Fu;
  std::uint32_t mant = h.bits & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // Inf/NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);  // +-0
  // Subnormal: value = mant * 2^-24, exact in f32.
  float v = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -v : v;
}

constexpr bf16 bf16_from_float(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep sign and top payload, force quiet bit
    return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  }
  // Round to nearest even on the 16 dropped bits; overflow carries into the exponent -> Inf.
  const std::uint32_t lsb = (u >> 16) & 1u;
  return bf16{static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16)};
}

constexpr f16 f16_from_float(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {  // NaN: keep top payload bits, force quiet bit
    return f16{static_cast<std::uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu))};
  }
  if (abs >= 0x477FF000u) {  // >= 65520 = max f16 + half an ulp: rounds to Inf (ties to even)
    return f16{static_cast<std::uint16_t>(sign | 0x7C00u)};
  }
  if (abs >= 0x38800000u) {  // >= 2^-14: normal f16
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even;
    // a carry out of the mantissa correctly bumps the exponent.
    const std::uint32_t lsb = (abs >> 13) & 1u;
    const std::uint32_t r = abs - (112u << 23) + 0xFFFu + lsb;
    return f16{static_cast<std::uint16_t>(sign | (r >> 13))};
  }
  // Subnormal or zero in f16: value / 2^-24 rounded to an integer, ties to even.
  // abs < 2^-14, so the full significand (with hidden bit) shifted right by >= 14 bits.
  const std::uint32_t exp = abs >> 23;
  if (exp < 102) return f16{sign};  // < 2^-25: rounds to zero (2^-25 itself is a tie -> 0)
  const std::uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - exp;  // value = mant * 2^(exp-150); want units of 2^-24
  const std::uint32_t q = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t rounded = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  return f16{static_cast<std::uint16_t>(sign | rounded)};  // 0x400 carry = smallest normal
}

// Uniform store helpers so templates can write `store<T>(float)`.
template <class T>
constexpr T from_float(float f);
template <>
constexpr float from_float<float>(float f) { return f; }
template <>
constexpr f16 from_float<f16>(float f) { return f16_from_float(f); }
template <>
constexpr bf16 from_float<bf16>(float f) { return bf16_from_float(f); }

// A double rounded to float to odd: d itself when it is a float, else the float next to d toward zero with
// its last bit set (the sticky bit). Rounding that float to f16 or bf16 to nearest is then d rounded once
// (Boldo & Melquiond 2008: to odd at p + 2 or more bits, then to nearest at p; f32's 24 bits are 11 + 13
// and 8 + 16, subnormals included), where (float)d then f16_from_float could round twice.
inline float to_odd_float(double d) {
  const float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  std::uint32_t mag = std::bit_cast<std::uint32_t>(f) & 0x7FFFFFFFu;
  if (mag == 0x7F800000u || std::fabs(static_cast<double>(f)) > std::fabs(d)) --mag;  // toward zero (Inf: to max)
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(f) & 0x80000000u) | mag | 1u);
}

// A double rounded once to the storage type (nearest, ties to even), for kernels that compute in double.
template <class T>
T from_double(double d);
template <>
inline double from_double<double>(double d) { return d; }
template <>
inline float from_double<float>(double d) { return static_cast<float>(d); }
template <>
inline f16 from_double<f16>(double d) { return f16_from_float(to_odd_float(d)); }
template <>
inline bf16 from_double<bf16>(double d) { return bf16_from_float(to_odd_float(d)); }

}  // namespace lnorm
