// Floating-point formats as the reference and the metrics see them: precision, exponent range, and
// a total order on values ("ordinals") in which adjacent finite values differ by one.
//
// The ordinal of a value is its bit pattern without the sign bit, negated for negative values:
// +0 and -0 are both 0, the largest finite value is inf_ordinal - 1, and +-Inf are +-inf_ordinal.
// One step of ordinal is one ulp, across binades and through the subnormals.
#pragma once

#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

#include "lnorm/half.hpp"
#include "lnorm/problem.hpp"

namespace lnorm {

struct Format {
  DType dtype;
  int precision;    // p: significand bits including the hidden bit (24 for f32)
  int emin;         // exponent of the smallest normal value (-126 for f32)
  int emax;         // exponent of the largest finite value (127 for f32)
  int bits;         // storage width (32 for f32)
  double unit_roundoff() const;       // u = 2^-p
  // Ordinal of +Inf: its pattern is (all exponent bits set, mantissa 0) = (2^(bits-p) - 1) << (p-1).
  std::int64_t inf_ordinal() const {
    const std::uint64_t exp_bits = static_cast<std::uint64_t>(bits - precision);
    return static_cast<std::int64_t>(((std::uint64_t{1} << exp_bits) - 1) << (precision - 1));
  }
  int lsb_exponent() const { return emin - precision + 1; }  // smallest subnormal is 2^lsb_exponent
};

Format format_of(DType d);

// The functions below are inline: the reference and the metrics call them a few times per element of every
// case, and as out-of-line calls (double_to_bits, round_to_ordinal, round_to_format, bits_to_double,
// ordinal_of_bits, bits_is_nan) they were 27% of `lnorm verify --op add_layernorm --op add_rmsnorm`'s samples
// (perf, 2-core Zen 3).

// Bit patterns (zero-extended to 64 bits) <-> double. Every value of every format is exact in double.
inline double bits_to_double(const Format& f, std::uint64_t bits) {
  switch (f.dtype) {
    case DType::f32: return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    case DType::f64: return std::bit_cast<double>(bits);
    case DType::f16: return to_float(f16{static_cast<std::uint16_t>(bits)});
    case DType::bf16: return to_float(bf16{static_cast<std::uint16_t>(bits)});
  }
  return 0;
}
// Precondition: v is representable in f (or NaN/Inf).
inline std::uint64_t double_to_bits(const Format& f, double v) {
  switch (f.dtype) {
    case DType::f32: return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case DType::f64: return std::bit_cast<std::uint64_t>(v);
    case DType::f16: return f16_from_float(static_cast<float>(v)).bits;
    case DType::bf16: return bf16_from_float(static_cast<float>(v)).bits;
  }
  return 0;
}
inline bool bits_is_nan(const Format& f, std::uint64_t bits) {
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  return static_cast<std::int64_t>(bits & ~sign) > f.inf_ordinal();
}

// precondition: not NaN
inline std::int64_t ordinal_of_bits(const Format& f, std::uint64_t bits) {
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  const auto mag = static_cast<std::int64_t>(bits & ~sign);
  return (bits & sign) ? -mag : mag;
}
// 0 -> +0
inline std::uint64_t bits_of_ordinal(const Format& f, std::int64_t k) {
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  return k < 0 ? (static_cast<std::uint64_t>(-k) | sign) : static_cast<std::uint64_t>(k);
}

namespace detail {
// 2^k for -1022 <= k <= 1023, built from its bits: std::ldexp was a quarter of verify's time (perf on
// `lnorm verify --op add_layernorm --kernel avx2 --dtype f16 --property eps_edges`).
inline double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }
}  // namespace detail

// v rounded once to the format: round to nearest, ties to even, subnormals, overflow to Inf; -0 stays -0,
// NaN stays NaN.
inline double round_to_format(const Format& f, double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  // f64 is v itself; f32 is the hardware's conversion, which IEEE 754 defines as this same rounding
  // (nearest, ties to even, subnormals and overflow to Inf included) under the default rounding mode.
  if (f.dtype == DType::f64) return v;
  if (f.dtype == DType::f32) return static_cast<float>(v);
  const double a = std::fabs(v);
  // The binade's exponent from the bits; a subnormal double reads as -1023, below every emin here.
  const int e = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7ff) - 1023;
  // Quantum of the destination binade (subnormals share the quantum of the smallest binade).
  const int qexp = (e > f.emin ? e : f.emin) - f.precision + 1;
  // a / 2^qexp < 2^p: scaling by a power of two is exact for these magnitudes in double, and both
  // powers are normal doubles (-133 <= qexp <= 1016 for f16 and bf16).
  const double scaled = a * detail::pow2(-qexp);
  const double r = std::nearbyint(scaled);  // default rounding mode: nearest, ties to even
  const double rounded = r * detail::pow2(qexp);
  const double max_finite = (2.0 - detail::pow2(1 - f.precision)) * detail::pow2(f.emax);
  const double out = rounded > max_finite ? std::numeric_limits<double>::infinity() : rounded;
  return std::signbit(v) ? -out : out;
}
// The same as an ordinal (NaN is not allowed). Exact: one rounding of the double's value.
inline std::int64_t round_to_ordinal(const Format& f, double v) {
  assert(!std::isnan(v));
  return ordinal_of_bits(f, double_to_bits(f, round_to_format(f, v)));
}

// Element i of an array stored in d (16-bit formats as uint16_t bits, little-endian): its bit pattern
// (zero-extended), its value, or a new bit pattern written there.
std::uint64_t bits_at(DType d, const void* p, std::int64_t i);
double value_at(DType d, const void* p, std::int64_t i);
void set_bits_at(DType d, void* p, std::int64_t i, std::uint64_t bits);

// The spacing of format values at magnitude s: 2^(max(floor(log2 s), emin) - p + 1); s = 0 gives the
// smallest subnormal. This is the ulp(s) of DESIGN.md "Measuring error".
double ulp_at(const Format& f, double s);

}  // namespace lnorm
