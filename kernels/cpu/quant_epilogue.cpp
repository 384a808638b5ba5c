// quant_epilogue.hpp's definition (what it computes is documented there).
#include "quant_epilogue.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace lnorm::cpu {

void quant_groups(const QuantSpec& spec, std::int64_t n, std::int64_t& group, std::int64_t& per_row, std::int64_t& row_bytes) {
  group = spec.group_size(n);
  per_row = spec.scales_per_row(n);
  row_bytes = spec.q_bytes(1, n);
}

void pack_codes(const std::uint8_t* codes, std::int64_t n, std::uint8_t* q) {
  std::int64_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    // Eight codes a 64-bit word (byte j of the word is code i + j): each pair's nibbles joined into its even byte, then
    // the even bytes gathered by two shifts; the byte loop below was 7% of the _cr kernels' nvfp4 epilogue (perf).
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, codes + i, 8);
      w &= 0x0f0f0f0f0f0f0f0full;
      w = (w | (w >> 4)) & 0x00ff00ff00ff00ffull;  // byte 2j: code 2j | code 2j+1 << 4
      w = (w | (w >> 8)) & 0x0000ffff0000ffffull;
      const auto packed = static_cast<std::uint32_t>(w | (w >> 16));
      std::memcpy(q + i / 2, &packed, 4);
    }
  }
  for (; i < n; i += 2) q[i / 2] = static_cast<std::uint8_t>((codes[i] & 0x0f) | (codes[i + 1] << 4));
}

std::uint8_t encode_quotient(QuantFormat f, float y, float s) {
  // In double (quant_epilogue.hpp: exact as a rounding of y/s).
  return encode(f, std::copysign(static_cast<double>(y) / static_cast<double>(s), static_cast<double>(y)));
}

float group_scale(const QuantSpec& spec, float amax, bool nan, void* scales, std::int64_t at) {
  if (spec.scaling == Scaling::tensor) return spec.scale;
  if (nan) {
    if (spec.pow2_scales()) static_cast<std::uint8_t*>(scales)[at] = 255;
    else if (spec.scaling == Scaling::nvfp4) static_cast<std::uint8_t*>(scales)[at] = 0x7f;  // E4M3's NaN
    else static_cast<float*>(scales)[at] = std::nanf("");
    return std::nanf("");
  }
  if (spec.scaling == Scaling::nvfp4) {
    // c = E4M3(amax·G/6): amax·G is exact in double (24 + 24 bits), and its quotient by 6 in double is within 2^-53
    // of the exact one, which is either an E4M3 midpoint m (amax·G = 6m) or at least 2^-48 of itself from every
    // midpoint (amax·G − 6m is a nonzero multiple of the last bit of the smaller of the two, which have ≤ 48 and
    // ≤ 7 significant bits): the double quotient rounds as the exact one does.
    const float g = spec.global_scale;
    const std::uint8_t c = encode(QuantFormat::fp8_e4m3, static_cast<double>(amax) * static_cast<double>(g) / 6.0);
    static_cast<std::uint8_t*>(scales)[at] = c;
    return nvfp4_element_scale(c, g);
  }
  if (spec.pow2_scales()) {  // mx, or UE8M0 row/group scales
    // floor(log2 amax) from the exponent field where amax is normal (ilogb's answer without the call: once per
    // 32 elements, it was a third of the SIMD epilogue's time), ilogb below.
    std::uint32_t bits = 0;
    std::memcpy(&bits, &amax, 4);
    int x = 0;
    if (spec.exponent_rule() == MxRule::floor) {
      const int e = bits >= 0x00800000u ? static_cast<int>(bits >> 23) - 127
                    : amax == 0             ? -127 - emax_elem(spec.format)
                                            : std::ilogb(amax);
      x = std::clamp(e - emax_elem(spec.format), -127, 127);
    } else {  // the other rules' exact levels (lnorm/quant.hpp mx_exponent); Inf is level 128, as floor's field reads
      x = std::isinf(amax) ? std::clamp(128 - mx_offset(spec), -127, 127) : mx_exponent(spec, amax);
    }
    static_cast<std::uint8_t*>(scales)[at] = static_cast<std::uint8_t>(x + 127);
    if (x == -127) return 0x1p-127f;  // an f32 subnormal: exact
    const std::uint32_t s_bits = static_cast<std::uint32_t>(x + 127) << 23;
    float s = 0;
    std::memcpy(&s, &s_bits, 4);
    return s;
  }
  float s = amax / static_cast<float>(qmax(spec.format));
  if (s == 0) s = 1.0f;  // a zero group, or amax/qmax below f32's range: scaled by 1 (lnorm/quant.hpp)
  static_cast<float*>(scales)[at] = s;
  return s;
}

ScaleRule scale_rule(const QuantSpec& spec) {
  if (spec.scaling == Scaling::tensor) return ScaleRule::other;
  if (spec.scaling == Scaling::nvfp4) return ScaleRule::nvfp4;
  if (spec.pow2_scales()) return spec.exponent_rule() == MxRule::floor ? ScaleRule::pow2_floor : ScaleRule::other;
  return ScaleRule::quotient;
}

void quantize_row(const QuantSpec& spec, const float* y, std::int64_t n, std::uint8_t* q_all, void* scales, std::int64_t row) {
  const QuantFormat f = spec.format;
  const std::int64_t G = spec.group_size(n), per_row = spec.scales_per_row(n);
  std::uint8_t* q = q_all + spec.q_bytes(row, n);
  for (std::int64_t g = 0; g < n / G; ++g) {
    const float* yg = y + g * G;
    float amax = 0;
    bool nan = false;
    if (spec.scaling != Scaling::tensor) {
      for (std::int64_t i = 0; i < G; ++i) {
        nan |= std::isnan(yg[i]);
        amax = std::max(amax, std::fabs(yg[i]));
      }
    }
    const float s = group_scale(spec, amax, nan, scales, row * per_row + g);
    for (std::int64_t i = 0; i < G; ++i) store_code(f, q, g * G + i, nan ? encode(f, std::nan("")) : encode_quotient(f, yg[i], s));
  }
}

}  // namespace lnorm::cpu
