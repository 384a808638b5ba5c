// lnorm/quantize.hpp measure_quantized_recipe: the vllm recipe's q (lnorm/recipe.hpp), computed with the f32
// operations it names, and a candidate measured against it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <cstring>

#include <vector>

#include "lnorm/format.hpp"
#include "lnorm/quantize.hpp"
#include "lnorm/recipe.hpp"

namespace lnorm {

void QuantRecipeSummary::merge(const QuantRecipeSummary& o) {
  if (o.max_index >= 0 && (max_index < 0 || o.max_quanta > max_quanta))
    max_quanta = o.max_quanta, max_index = o.max_index, max_got = o.max_got, max_target = o.max_target;
  if (o.scale_max_index >= 0 && (scale_max_index < 0 || o.scale_max_ulp > scale_max_ulp))
    scale_max_ulp = o.scale_max_ulp, scale_max_index = o.scale_max_index;
  elements += o.elements, matching += o.matching, nonfinite_mismatches += o.nonfinite_mismatches;
  scales += o.scales, scales_differ += o.scales_differ;
}

namespace {

// The recipe's scale of one group (y: G values of x's dtype): tensor S; row, group f32(f32(amax) / qmax), 1 for
// a group of zeros or below f32's range (lnorm/quant.hpp's rule); mx 2^X, X = floor(log2 amax) − emax_elem.
float recipe_scale(const QuantSpec& spec, const double* y, std::int64_t G, bool& nan) {
  double amax = 0;
  nan = false;
  for (std::int64_t i = 0; i < G; ++i) nan |= std::isnan(y[i]), amax = std::fmax(amax, std::fabs(y[i]));
  if (spec.scaling == Scaling::tensor) return spec.scale;
  if (nan) return std::nanf("");
  if (spec.pow2_scales()) {
    const int x = mx_exponent(spec, amax);
    return static_cast<float>(std::ldexp(1.0, x));
  }
  const float s = static_cast<float>(amax) / static_cast<float>(qmax(spec.format));
  return s == 0 ? 1.0f : s;
}

// Distance of two f32 in ulps (by their ordered bit patterns).
double f32_ulps(float a, float b) {
  const auto ordered = [](float v) {
    const auto u = std::bit_cast<std::int32_t>(v);
    return u < 0 ? static_cast<std::int64_t>(INT32_MIN) - u : static_cast<std::int64_t>(u);
  };
  return std::fabs(static_cast<double>(ordered(a) - ordered(b)));
}

}  // namespace

QuantRecipeSummary measure_quantized_recipe(const QuantSpec& spec, const double* y, std::int64_t rows, std::int64_t cols,
                                            const std::uint8_t* q, const void* scales, std::int64_t first_row) {
  if (spec.scaling_info().global_scale)  // the vllm recipe's rounding points are row, group, tensor and mx scalings'
    throw std::invalid_argument("the vllm recipe has no " + std::string(name(spec.scaling)) + " scaling");
  QuantRecipeSummary out;
  const QuantFormat f = spec.format;
  const std::int64_t G = spec.group_size(cols), per_row = spec.scales_per_row(cols);
  const double top = qmax(f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / G; ++g) {
      const std::int64_t b = r * cols + g * G, at = r * per_row + g;
      bool nan = false;
      const float s = recipe_scale(spec, y + b, G, nan);
      if (per_row > 0) {  // the candidate's scale against the recipe's
        ++out.scales;
        double d = 0;
        if (spec.scales_are_e8m0()) {
          const int got = static_cast<const std::uint8_t*>(scales)[at];
          const int want = std::isnan(s) ? 255 : std::ilogb(s) + 127;
          d = std::abs(got - want);
        } else {
          float got;
          std::memcpy(&got, static_cast<const std::byte*>(scales) + 4 * at, 4);
          d = std::isnan(got) && std::isnan(s) ? 0 : std::isnan(got) || std::isnan(s) ? INFINITY : f32_ulps(got, s);
        }
        out.scales_differ += d != 0;
        if (out.scale_max_index < 0 || d > out.scale_max_ulp) out.scale_max_ulp = d, out.scale_max_index = (first_row * per_row) + at;
      }
      const float inv = 1.0f / s;  // f32(1/s)
      for (std::int64_t i = b; i < b + G; ++i) {
        ++out.elements;
        const float t = static_cast<float>(y[i]) * inv;  // y is a value of x's dtype: exact in f32; one f32 rounding
        const std::uint8_t want = encode(f, t);
        const std::uint8_t code = load_code(f, q, i);
        const double got = decode(f, code);
        double d;
        if (std::isnan(t)) {  // the recipe's NaN code (int8, E2M1: 0), or a non-finite mismatch
          d = (has_nan(f) ? code_is_nan(f, code) : code == want) ? 0 : INFINITY;
        } else if (std::isnan(got) || std::isinf(got)) {  // NaN, or E5M2's Inf, for a finite t: never the recipe's
          d = INFINITY;
        } else {
          const double target = std::fmax(std::fmin(static_cast<double>(t), top), info(f).qmin);
          d = std::fabs(got - target) / quantum_at(f, target);
        }
        out.matching += code == want || (d == 0 && ordinal_of_code(f, code) == 0);
        if (std::isinf(d)) ++out.nonfinite_mismatches;
        if (out.max_index < 0 || d > out.max_quanta)
          out.max_quanta = d, out.max_index = first_row * cols + i, out.max_got = got, out.max_target = t;
      }
    }
  return out;
}

QuantRecipeSummary measure_quantized_recipe(const Problem& problem, const QuantSpec& spec, const Recipe& recipe,
                                            const void* x, const void* residual, const void* gamma, const void* beta,
                                            const std::uint8_t* q, const void* scales, std::int64_t rows, std::int64_t first_row) {
  const std::int64_t n = problem.cols;
  const std::size_t es = size_of(problem.dtype), rs = residual ? size_of(problem.residual_dtype) : 0;
  RecipeReferencer ref(problem, recipe);
  std::vector<std::byte> y_bits(static_cast<std::size_t>(n) * es);
  std::vector<ElementReference> elems(static_cast<std::size_t>(n));
  std::vector<double> y(static_cast<std::size_t>(rows * n));
  for (std::int64_t r = 0; r < rows; ++r) {
    ref.run(static_cast<const std::byte*>(x) + static_cast<std::size_t>(r * n) * es,
            residual ? static_cast<const std::byte*>(residual) + static_cast<std::size_t>(r * n) * rs : nullptr, gamma, beta, n,
            y_bits.data(), elems.data());
    for (std::int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(r * n + i)] = value_at(problem.dtype, y_bits.data(), i);
  }
  return measure_quantized_recipe(spec, y.data(), rows, n, q, scales, first_row);
}

}  // namespace lnorm
