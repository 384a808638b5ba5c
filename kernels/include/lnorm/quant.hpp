// Quantized outputs: the formats, the scalings and the one quantizer Q every layer shares (docs/DESIGN.md
// "Quantized outputs"). A storage description like half.hpp: the kernels encode with it, the reference decodes
// with it (its exact rounding is its own: reference/src/quantize.cpp).
//
//   q = Q(y / s): y divided by the scale s, rounded to nearest, ties to even, once; a value beyond the format's
//   largest finite value saturates to it (±448 E4M3, ±57344 E5M2, [−128, 127] int8): never NaN or Inf for a
//   finite y. NaN y gives the fp8 NaN (int8 has none: 0, and no metric gates it).
//   fp8_e4m3  OCP E4M3FN: 1-4-3, bias 7, no Inf, NaN 0x7f/0xff, max 448 (0x7e), min subnormal 2^-9
//   fp8_e5m2  OCP E5M2: 1-5-2, bias 15, IEEE-like (Inf 0x7c, NaN 0x7d-0x7f), max 57344 (0x7b), min 2^-16
//   int8      two's complement integers [−128, 127]
//
// Scalings (the scale s of each element):
//   tensor    one f32 s, given (a static scale: vLLM's rms_norm_static_fp8_quant, FlashInfer's rmsnorm_quant)
//   row       per row s = f32(amax|y*| / qmax), qmax = 448 / 57344 / 127 (vLLM's dynamic per-token quant)
//   group:G   the same per G consecutive elements of a row (G divides the row): rows × cols/G f32 scales
//   mx        OCP MX v1.0: groups of 32, s = 2^X, X = floor(log2 amax) − emax_elem (8 E4M3, 15 E5M2), clamped
//             to [−127, 127], stored as E8M0 (X + 127); fp8 formats only (MXINT8's implied scale is not this)
// A group whose y* are all zero has no amax to scale by: every q is 0 whatever s is. Its scale is 1 (row,
// group: dequantizes to 0 and divides nothing by zero) and 2^-127 (mx: E8M0 code 0, where floor(log2 0) clamps);
// `check` accepts any finite positive scale there. A row or group whose amax/qmax is below f32's range (rounds to
// 0) is scaled the same way, by 1: its y* are tiny enough that q is ±0 (a scale of 0 would saturate them all, and
// an f32 kernel's y there may already be 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lnorm {

enum class QuantFormat : std::uint8_t { fp8_e4m3 = 0, fp8_e5m2 = 1, int8 = 2 };
enum class Scaling : std::uint8_t { tensor = 0, row = 1, group = 2, mx = 3 };

constexpr std::string_view name(QuantFormat f) {
  return f == QuantFormat::fp8_e4m3 ? "fp8_e4m3" : f == QuantFormat::fp8_e5m2 ? "fp8_e5m2" : "int8";
}
constexpr std::string_view name(Scaling s) {
  return s == Scaling::tensor ? "tensor" : s == Scaling::row ? "row" : s == Scaling::group ? "group" : "mx";
}

// The largest finite magnitude (what saturation gives) and, for mx, the exponent of the largest power of two
// the format holds (OCP MX v1.0 emax_elem).
constexpr double qmax(QuantFormat f) { return f == QuantFormat::fp8_e4m3 ? 448.0 : f == QuantFormat::fp8_e5m2 ? 57344.0 : 127.0; }
constexpr int emax_elem(QuantFormat f) { return f == QuantFormat::fp8_e4m3 ? 8 : 15; }
constexpr bool is_fp8(QuantFormat f) { return f != QuantFormat::int8; }
// The mx group: OCP MX v1.0's block size.
constexpr std::int64_t kMxGroup = 32;

struct QuantSpec {
  QuantFormat format = QuantFormat::fp8_e4m3;
  Scaling scaling = Scaling::tensor;
  std::int64_t group = 0;  // group:G's G (row: the row's length, mx: kMxGroup; set by group_size)
  float scale = 0;         // tensor scaling's s (finite, > 0)

  // Elements per scale for a row of `cols` (tensor: the whole row: one s for everything).
  std::int64_t group_size(std::int64_t cols) const {
    return scaling == Scaling::group ? group : scaling == Scaling::mx ? kMxGroup : cols;
  }
  // Scales per row (0 for tensor: none stored).
  std::int64_t scales_per_row(std::int64_t cols) const {
    return scaling == Scaling::tensor ? 0 : cols / group_size(cols);
  }
  bool scales_are_e8m0() const { return scaling == Scaling::mx; }
};

// "fp8_e4m3" | "fp8_e5m2" | "int8"; "tensor" | "row" | "group:G" | "mx" (G > 0). nullopt otherwise.
std::optional<QuantFormat> parse_quant_format(std::string_view s);
std::optional<Scaling> parse_scaling(std::string_view s, std::int64_t& group);
// Empty when the spec fits a row of `cols`; otherwise why not, in words a user can act on.
std::string quant_spec_error(const QuantSpec& spec, std::int64_t cols);
// "fp8_e4m3/row", "int8/group:64", "fp8_e5m2/tensor"
std::string describe(const QuantSpec& spec);

// A code's value (NaN for the NaN codes, ±Inf for E5M2's); int8 codes are the byte as two's complement.
double decode(QuantFormat f, std::uint8_t code);
// Q(v): v rounded to nearest, ties to even, once, saturating; NaN gives the fp8 NaN (0x7f, with v's sign bit)
// and 0 for int8. Exact for any double v (no double rounding: the format's grid is compared with v itself).
std::uint8_t encode(QuantFormat f, double v);
// The format's codes in value order: ordinal k in [min_ordinal, max_ordinal] (0 is +0; fp8: the code's
// magnitude bits, negated for negative values, so one step is one quantum; int8: the value, −128..127).
std::int64_t max_ordinal(QuantFormat f);
std::int64_t min_ordinal(QuantFormat f);
double value_of_ordinal(QuantFormat f, std::int64_t k);
std::uint8_t code_of_ordinal(QuantFormat f, std::int64_t k, bool negative_zero = false);
std::int64_t ordinal_of_code(QuantFormat f, std::uint8_t code);  // precondition: not NaN/Inf
bool code_is_nan(QuantFormat f, std::uint8_t code);
// One quantum at magnitude |v| (clamped to the format's range): the spacing of the format there.
double quantum_at(QuantFormat f, double v);

// E8M0 (mx scales): code c is 2^(c − 127), c = 255 is NaN.
inline double decode_e8m0(std::uint8_t c) { return c == 255 ? std::nan("") : std::ldexp(1.0, static_cast<int>(c) - 127); }

}  // namespace lnorm
