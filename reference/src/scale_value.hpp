// A group's scale as the reference stores it on the way in (the f32 value, mx's exponent X as a double: NaN for
// E8M0's code 255, or nvfp4's E4M3 code as a double) → the multiplier s of its group: the f32 value, 2^X, or
// f32(E4M3value(c)/G) (+Inf for c = 0: q ±0). One definition for quantize.cpp (the exact answer, the metric) and
// quant_contract.cpp (the rule on a candidate's own y).
#pragma once

#include <cmath>

#include "lnorm/quant.hpp"

namespace lnorm::detail {

// (mx's NaN exponent stays NaN: converting it to int would be undefined.)
inline double scale_value(const QuantSpec& spec, double stored) {
  if (std::isnan(stored)) return stored;
  if (spec.scaling == Scaling::nvfp4) return nvfp4_element_scale(static_cast<std::uint8_t>(stored), spec.global_scale);
  return spec.pow2_scales() ? std::ldexp(1.0, static_cast<int>(stored)) : stored;
}

// The stored scale (as above) of scales[at] in the spec's storage: f32, E8M0 (255: NaN) or E4M3 (its NaN codes: NaN).
inline double read_scale(const QuantSpec& spec, const void* scales, std::int64_t at) {
  const std::uint8_t* codes = static_cast<const std::uint8_t*>(scales);
  switch (spec.storage().storage) {
    case ScaleStorage::e8m0: return codes[at] == 255 ? std::nan("") : static_cast<double>(codes[at]) - 127;
    case ScaleStorage::e4m3: return code_is_nan(QuantFormat::fp8_e4m3, codes[at]) ? std::nan("") : static_cast<double>(codes[at]);
    case ScaleStorage::f32: return static_cast<const float*>(scales)[at];
    case ScaleStorage::none: break;
  }
  return spec.scale;
}

// Writes a stored scale (as above; NaN: the storage's NaN) to scales[at].
inline void write_scale(const QuantSpec& spec, void* scales, std::int64_t at, double s) {
  std::uint8_t* codes = static_cast<std::uint8_t*>(scales);
  switch (spec.storage().storage) {
    case ScaleStorage::e8m0: codes[at] = std::isnan(s) ? 255 : static_cast<std::uint8_t>(s + 127); return;
    case ScaleStorage::e4m3: codes[at] = std::isnan(s) ? 0x7f : static_cast<std::uint8_t>(s); return;
    case ScaleStorage::f32: static_cast<float*>(scales)[at] = static_cast<float>(s); return;
    case ScaleStorage::none: return;
  }
}

}  // namespace lnorm::detail
