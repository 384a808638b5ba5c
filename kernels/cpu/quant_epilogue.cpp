// quant_epilogue.hpp's definition (what it computes is documented there).
#include "quant_epilogue.hpp"

#include <algorithm>
#include <cmath>

namespace lnorm::cpu {

void quantize_row(const QuantSpec& spec, const float* y, std::int64_t n, std::uint8_t* q, void* scales, std::int64_t row) {
  const QuantFormat f = spec.format;
  const std::int64_t G = spec.group_size(n), per_row = spec.scales_per_row(n);
  const std::uint8_t nan_code = encode(f, std::nan(""));
  for (std::int64_t g = 0; g < n / G; ++g) {
    const float* yg = y + g * G;
    std::uint8_t* qg = q + g * G;
    float s = spec.scale;
    if (spec.scaling != Scaling::tensor) {
      float amax = 0;
      bool nan = false;
      for (std::int64_t i = 0; i < G; ++i) {
        nan |= std::isnan(yg[i]);
        amax = std::max(amax, std::fabs(yg[i]));
      }
      const std::int64_t at = row * per_row + g;
      if (nan) {
        if (spec.scaling == Scaling::mx) static_cast<std::uint8_t*>(scales)[at] = 255;
        else static_cast<float*>(scales)[at] = std::nanf("");
        std::fill(qg, qg + G, nan_code);
        continue;
      }
      if (spec.scaling == Scaling::mx) {
        const int x = amax == 0 ? -127 : std::clamp(std::ilogb(amax) - emax_elem(f), -127, 127);
        static_cast<std::uint8_t*>(scales)[at] = static_cast<std::uint8_t>(x + 127);
        s = std::ldexp(1.0f, x);  // 2^-127 is an f32 subnormal: exact
      } else {
        s = amax / static_cast<float>(qmax(f));
        if (s == 0) s = 1.0f;  // a zero group, or amax/qmax below f32's range: scaled by 1 (lnorm/quant.hpp)
        static_cast<float*>(scales)[at] = s;
      }
    }
    // In double (quant_epilogue.hpp: exact as a rounding of y/s).
    const double sd = s;
    for (std::int64_t i = 0; i < G; ++i) qg[i] = encode(f, static_cast<double>(yg[i]) / sd);
  }
}

}  // namespace lnorm::cpu
