// A group's scale as the reference stores it on the way in (the f32 value, or mx's exponent X as a double: NaN for
// E8M0's code 255) → the multiplier s of its group: the f32 value, or 2^X. One definition for quantize.cpp (the
// exact answer, the metric) and quant_contract.cpp (the rule on a candidate's own y).
#pragma once

#include <cmath>

#include "lnorm/quant.hpp"

namespace lnorm::detail {

// (mx's NaN exponent stays NaN: converting it to int would be undefined.)
inline double scale_value(const QuantSpec& spec, double stored) {
  return spec.scaling == Scaling::mx && !std::isnan(stored) ? std::ldexp(1.0, static_cast<int>(stored)) : stored;
}

}  // namespace lnorm::detail
