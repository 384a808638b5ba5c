// Floating-point formats as the reference and the metrics see them: precision, exponent range, and
// a total order on values ("ordinals") in which adjacent finite values differ by one.
//
// The ordinal of a value is its bit pattern without the sign bit, negated for negative values:
// +0 and -0 are both 0, the largest finite value is inf_ordinal - 1, and +-Inf are +-inf_ordinal.
// One step of ordinal is one ulp, across binades and through the subnormals.
#pragma once

#include <cstdint>

#include "lnorm/problem.hpp"

namespace lnorm {

struct Format {
  DType dtype;
  int precision;    // p: significand bits including the hidden bit (24 for f32)
  int emin;         // exponent of the smallest normal value (-126 for f32)
  int emax;         // exponent of the largest finite value (127 for f32)
  int bits;         // storage width (32 for f32)
  double unit_roundoff() const;       // u = 2^-p
  std::int64_t inf_ordinal() const;   // ordinal of +Inf
  int lsb_exponent() const { return emin - precision + 1; }  // smallest subnormal is 2^lsb_exponent
};

Format format_of(DType d);

// Bit patterns (zero-extended to 64 bits) <-> double. Every value of every format is exact in double.
double bits_to_double(const Format& f, std::uint64_t bits);
// Precondition: v is representable in f (or NaN/Inf).
std::uint64_t double_to_bits(const Format& f, double v);
bool bits_is_nan(const Format& f, std::uint64_t bits);

std::int64_t ordinal_of_bits(const Format& f, std::uint64_t bits);  // precondition: not NaN
std::uint64_t bits_of_ordinal(const Format& f, std::int64_t k);    // 0 -> +0

// v rounded once to the format: round to nearest, ties to even, subnormals, overflow to Inf.
// Returns the ordinal (NaN is not allowed). Exact: one rounding of the double's value.
std::int64_t round_to_ordinal(const Format& f, double v);
// The same as a value; -0 stays -0, NaN stays NaN.
double round_to_format(const Format& f, double v);

// Element i of an array stored in d (16-bit formats as uint16_t bits, little-endian): its bit pattern
// (zero-extended), its value, or a new bit pattern written there.
std::uint64_t bits_at(DType d, const void* p, std::int64_t i);
double value_at(DType d, const void* p, std::int64_t i);
void set_bits_at(DType d, void* p, std::int64_t i, std::uint64_t bits);

// The spacing of format values at magnitude s: 2^(max(floor(log2 s), emin) - p + 1); s = 0 gives the
// smallest subnormal. This is the ulp(s) of DESIGN.md "Measuring error".
double ulp_at(const Format& f, double s);

}  // namespace lnorm
