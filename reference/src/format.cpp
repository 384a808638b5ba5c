#include "lnorm/format.hpp"

#include <cstring>

#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

#include "lnorm/half.hpp"

namespace lnorm {

Format format_of(DType d) {
  switch (d) {
    case DType::f32: return {d, 24, -126, 127, 32};
    case DType::f64: return {d, 53, -1022, 1023, 64};
    case DType::f16: return {d, 11, -14, 15, 16};
    case DType::bf16: return {d, 8, -126, 127, 16};
  }
  return {d, 24, -126, 127, 32};
}

double Format::unit_roundoff() const { return std::ldexp(1.0, -precision); }

std::int64_t Format::inf_ordinal() const {
  // Inf's pattern is (all exponent bits set, mantissa 0) = (2^(bits-1) - 1) >> (p-1) << (p-1).
  const std::uint64_t exp_bits = static_cast<std::uint64_t>(bits - precision);
  return static_cast<std::int64_t>(((std::uint64_t{1} << exp_bits) - 1) << (precision - 1));
}

double bits_to_double(const Format& f, std::uint64_t bits) {
  switch (f.dtype) {
    case DType::f32: return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    case DType::f64: return std::bit_cast<double>(bits);
    case DType::f16: return to_float(f16{static_cast<std::uint16_t>(bits)});
    case DType::bf16: return to_float(bf16{static_cast<std::uint16_t>(bits)});
  }
  return 0;
}

std::uint64_t double_to_bits(const Format& f, double v) {
  switch (f.dtype) {
    case DType::f32: return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case DType::f64: return std::bit_cast<std::uint64_t>(v);
    case DType::f16: return f16_from_float(static_cast<float>(v)).bits;
    case DType::bf16: return bf16_from_float(static_cast<float>(v)).bits;
  }
  return 0;
}

bool bits_is_nan(const Format& f, std::uint64_t bits) {
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  return static_cast<std::int64_t>(bits & ~sign) > f.inf_ordinal();
}

std::int64_t ordinal_of_bits(const Format& f, std::uint64_t bits) {
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  const auto mag = static_cast<std::int64_t>(bits & ~sign);
  return (bits & sign) ? -mag : mag;
}

std::uint64_t bits_of_ordinal(const Format& f, std::int64_t k) {
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  return k < 0 ? (static_cast<std::uint64_t>(-k) | sign) : static_cast<std::uint64_t>(k);
}

namespace {

// 2^k for -1022 <= k <= 1023, built from its bits: std::ldexp was a quarter of verify's time (perf on
// `lnorm verify --op add_layernorm --kernel avx2 --dtype f16 --property eps_edges`).
double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

}  // namespace

double round_to_format(const Format& f, double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  // f64 is v itself; f32 is the hardware's conversion, which IEEE 754 defines as this same rounding
  // (nearest, ties to even, subnormals and overflow to Inf included) under the default rounding mode.
  if (f.dtype == DType::f64) return v;
  if (f.dtype == DType::f32) return static_cast<float>(v);
  const double a = std::fabs(v);
  // The binade's exponent from the bits; a subnormal double reads as -1023, below every emin here.
  const int e = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7ff) - 1023;
  // Quantum of the destination binade (subnormals share the quantum of the smallest binade).
  const int qexp = std::max(e, f.emin) - f.precision + 1;
  // a / 2^qexp < 2^p: scaling by a power of two is exact for these magnitudes in double, and both
  // powers are normal doubles (-133 <= qexp <= 1016 for f16 and bf16).
  const double scaled = a * pow2(-qexp);
  const double r = std::nearbyint(scaled);  // default rounding mode: nearest, ties to even
  const double rounded = r * pow2(qexp);
  const double max_finite = (2.0 - pow2(1 - f.precision)) * pow2(f.emax);
  const double out = rounded > max_finite ? std::numeric_limits<double>::infinity() : rounded;
  return std::signbit(v) ? -out : out;
}

std::int64_t round_to_ordinal(const Format& f, double v) {
  assert(!std::isnan(v));
  return ordinal_of_bits(f, double_to_bits(f, round_to_format(f, v)));
}

double ulp_at(const Format& f, double s) {
  const double a = std::fabs(s);
  const int e = (a == 0 || !std::isfinite(a)) ? f.emin : std::max(std::ilogb(a), f.emin);
  return std::ldexp(1.0, e - f.precision + 1);
}

std::uint64_t bits_at(DType d, const void* p, std::int64_t i) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(p) + static_cast<std::size_t>(i) * size_of(d), size_of(d));
  return bits;
}
double value_at(DType d, const void* p, std::int64_t i) { return bits_to_double(format_of(d), bits_at(d, p, i)); }
void set_bits_at(DType d, void* p, std::int64_t i, std::uint64_t bits) {
  std::memcpy(static_cast<char*>(p) + static_cast<std::size_t>(i) * size_of(d), &bits, size_of(d));
}

}  // namespace lnorm
