// lnorm/quant_contract.hpp: the quantizer's rule applied exactly to the y it was handed.
#include "lnorm/quant_contract.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "lnorm/format.hpp"
#include "scale_value.hpp"
#include "special_values.hpp"

namespace lnorm {
namespace {

using detail::kNaN;

// f32(a / qmax) correctly rounded, a ≥ 0 an f32 value: the double quotient is a guess; the neighbours are decided
// by exact comparisons (c·qmax and the midpoint (c + c')/2 · qmax have at most 25 + 7 significant bits, qmax being
// 7·2^6, 7·2^13 or 127: exact in double).
float correctly_rounded_quotient(float a, double qm) {
  if (!std::isfinite(a)) return a;  // Inf / qmax = Inf, NaN stays NaN
  float c = static_cast<float>(static_cast<double>(a) / qm);
  const auto closer = [&](float lo, float hi) {  // is a/qm at or above the midpoint of lo < hi (ties: hi if even)
    const double mid = (static_cast<double>(lo) + static_cast<double>(hi)) / 2 * qm;
    if (a != mid) return static_cast<double>(a) > mid;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &hi, 4);
    return (bits & 1u) == 0;
  };
  for (int guard = 0; guard < 4; ++guard) {  // the guess is within one ulp: at most two steps
    const float up = std::nextafter(c, std::numeric_limits<float>::infinity());
    const float down = std::nextafter(c, 0.0f);
    if (std::isfinite(up) && closer(c, up)) { c = up; continue; }
    if (c > 0 && !closer(down, c)) { c = down; continue; }
    break;
  }
  return c;
}

// The rule's scale of one group (its stored form: f32 value, or the E8M0 exponent X as a double, NaN for 255).
// zero: the group is all zeros (any finite positive scale is the rule's there).
double rule_scale(const QuantSpec& spec, const float* y, std::int64_t G, bool& zero) {
  float amax = 0;
  bool nan = false;
  for (std::int64_t i = 0; i < G; ++i) nan |= std::isnan(y[i]), amax = std::max(amax, std::fabs(y[i]));
  zero = !nan && amax == 0;
  if (nan) return kNaN;
  if (spec.scaling == Scaling::nvfp4)  // E4M3(amax·G/6): exact as a rounding of the quotient (kernels/cpu/quant_epilogue.cpp)
    return encode(QuantFormat::fp8_e4m3, static_cast<double>(amax) * static_cast<double>(spec.global_scale) / 6.0);
  if (spec.pow2_scales()) {
    // an Inf amax reads as level 128 (its f32 exponent field: the kernels' rule)
    return std::isinf(amax) ? std::clamp(128 - mx_offset(spec), -127, 127) : mx_exponent(spec, amax);
  }
  const float s = correctly_rounded_quotient(amax, qmax(spec.format));
  return s == 0 ? 1.0 : static_cast<double>(s);
}

template <class... Args>
std::string fmt(const char* f, Args... args) {
  char buf[320];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

using detail::scale_value;  // scale_value.hpp

// Q(y / s) exactly (s > 0, the contract rule): the double quotient's code is a guess, then y is compared with the
// grid's midpoints times s, exactly (a midpoint has at most 9 significant bits, s 24).
std::uint8_t exact_code(QuantFormat f, float y, double s) {
  const double yd = y;
  const double quotient = yd / s;
  if (std::isnan(quotient)) return encode(f, std::copysign(kNaN, yd));  // NaN y, or ±Inf / Inf
  if (std::isinf(s)) return code_of_ordinal(f, 0, is_float(f) && std::signbit(yd));  // finite / Inf: ±0
  const std::int64_t top = max_ordinal(f), bottom = min_ordinal(f);
  std::int64_t k = std::isinf(quotient) ? (yd > 0 ? top : bottom) : ordinal_of_code(f, encode(f, quotient));
  const auto v = [&](std::int64_t o) { return value_of_ordinal(f, o); };
  const auto even = [](std::int64_t a, std::int64_t b) { return (a & 1) == 0 ? a : b; };  // the last bit of |a|'s code
  for (int guard = 0; guard < 512; ++guard) {
    if (k < top) {  // no boundary above the largest value: saturation
      const double mid = (v(k) + v(k + 1)) / 2 * s;
      if (yd > mid) { ++k; continue; }
      if (yd == mid) { k = even(k, k + 1); break; }
    }
    if (k > bottom) {
      const double mid = (v(k - 1) + v(k)) / 2 * s;
      if (yd < mid) { --k; continue; }
      if (yd == mid) { k = even(k - 1, k); break; }
    }
    break;
  }
  return code_of_ordinal(f, k, k == 0 && is_float(f) && std::signbit(yd));
}

// The vllm recipe's code: Q(f32(y · f32(1/s))), each step an f32 operation (quantize_recipe.cpp does the same).
std::uint8_t recipe_code(QuantFormat f, float y, double s) {
  const float inv = 1.0f / static_cast<float>(s);
  return encode(f, static_cast<double>(y * inv));
}

bool same_code(QuantFormat f, std::uint8_t got, std::uint8_t want) {
  if (code_is_nan(f, want)) return code_is_nan(f, got);  // any NaN code: its sign and payload are not the rule's
  return got == want;
}

template <class Fn>
void each_group(const QuantSpec& spec, const float* y, std::int64_t rows, std::int64_t cols, Fn&& fn) {
  const std::int64_t G = spec.group_size(cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / G; ++g) {
      const float* yg = y + r * cols + g * G;
      bool zero = false;
      const double stored = spec.scaling == Scaling::tensor ? spec.scale : rule_scale(spec, yg, G, zero);
      fn(r, g, G, yg, stored, zero);
    }
}

std::uint8_t rule_code(const QuantSpec& spec, ConsistencyRule rule, float y, double s) {
  if (std::isnan(s)) return encode(spec.format, kNaN);  // a NaN group: every code NaN (int8: 0)
  return rule == ConsistencyRule::vllm ? recipe_code(spec.format, y, s) : exact_code(spec.format, y, s);
}

}  // namespace

void ConsistencySummary::merge(const ConsistencySummary& o) {
  codes += o.codes, codes_differ += o.codes_differ, scales += o.scales, scales_differ += o.scales_differ;
  for (const ConsistencyMismatch& m : o.first)
    if (first.size() < kExamples) first.push_back(m);
}

void quantize_given_y(const QuantSpec& spec, ConsistencyRule rule, const float* y, std::int64_t rows, std::int64_t cols,
                      std::uint8_t* q, void* scales) {
  const std::int64_t per_row = spec.scales_per_row(cols);
  each_group(spec, y, rows, cols, [&](std::int64_t r, std::int64_t g, std::int64_t G, const float* yg, double stored, bool) {
    if (per_row) detail::write_scale(spec, scales, r * per_row + g, stored);
    const double s = scale_value(spec, stored);
    for (std::int64_t i = 0; i < G; ++i) store_code(spec.format, q, r * cols + g * G + i, rule_code(spec, rule, yg[i], s));
  });
}

ConsistencySummary measure_consistency(const QuantSpec& spec, ConsistencyRule rule, const float* y, std::int64_t rows,
                                       std::int64_t cols, const std::uint8_t* q, const void* scales, std::int64_t first_row) {
  ConsistencySummary out;
  const QuantFormat f = spec.format;
  const std::int64_t per_row = spec.scales_per_row(cols);
  const auto note = [&](ConsistencyMismatch m) {
    if (out.first.size() < ConsistencySummary::kExamples) out.first.push_back(m);
  };
  each_group(spec, y, rows, cols, [&](std::int64_t r, std::int64_t g, std::int64_t G, const float* yg, double stored, bool zero) {
    double s = scale_value(spec, stored);
    if (per_row) {
      const std::int64_t at = r * per_row + g;
      const double got = detail::read_scale(spec, scales, at);
      // A zero group takes any scale that is one: finite and positive (f32), any exponent (E8M0), any non-negative
      // E4M3 code (its q is ±0 whatever the code).
      const bool any_scale = spec.scales_are_codes() ? !std::isnan(got) && got < 128 : std::isfinite(got) && got > 0;
      const bool ok = std::isnan(stored) ? std::isnan(got) : got == stored || (zero && any_scale);
      ++out.scales;
      if (!ok) {
        ++out.scales_differ;
        float amax = 0;
        for (std::int64_t i = 0; i < G; ++i) amax = std::max(amax, std::fabs(yg[i]));
        note({true, (first_row + r) * per_row + g, amax, got, stored, 0, 0});
      }
      if (zero && ok) s = scale_value(spec, got);  // a zero group's codes under the scale it chose: ±0 anyway
    }
    for (std::int64_t i = 0; i < G; ++i) {
      const std::int64_t at = r * cols + g * G + i;
      const std::uint8_t want = rule_code(spec, rule, yg[i], s);
      ++out.codes;
      // Not gated: a format with no NaN code (int8, E2M1) has no answer for a NaN quotient.
      const bool no_nan_code = !has_nan(f) && (std::isnan(yg[i]) || std::isnan(s));
      const std::uint8_t got = load_code(f, q, at);
      if (!no_nan_code && !same_code(f, got, want)) {
        ++out.codes_differ;
        note({false, (first_row + r) * cols + g * G + i, yg[i], decode(f, got), decode(f, want), got, want});
      }
    }
  });
  return out;
}

std::string describe(const ConsistencySummary& c, const QuantSpec& spec) {
  std::string s = fmt("codes %lld of %lld and scales %lld of %lld differ from the rule applied to the y handed in",
                      static_cast<long long>(c.codes_differ), static_cast<long long>(c.codes),
                      static_cast<long long>(c.scales_differ), static_cast<long long>(c.scales));
  if (!c.first.empty()) {
    const ConsistencyMismatch& m = c.first.front();
    if (m.scale)
      s += fmt(" (first: scale %lld = %.9g for amax %.9g, the rule's %.9g%s)", static_cast<long long>(m.index), m.got, m.y,
               m.expected, spec.scales_are_e8m0() ? " as E8M0 exponents" : spec.scales_are_codes() ? " as E4M3 codes" : "");
    else
      s += fmt(" (first: q[%lld] = %.9g (0x%02x) for y %.9g, the rule's %.9g (0x%02x))", static_cast<long long>(m.index), m.got,
               m.got_code, m.y, m.expected, m.expected_code);
  }
  return s;
}

}  // namespace lnorm
