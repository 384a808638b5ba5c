// The quantized metric's default verdicts (docs/DESIGN.md "Quantized outputs", lnorm/quantize.hpp): on real
// shapes and f32/bf16/f16 x, the exact q passes at 100% correctly rounded; q computed from y rounded to x's dtype
// first (vLLM's rounding point: y in x's dtype, times f32(1/S), one rounding) passes; truncation toward zero,
// one quantum off, NaN where the exact q saturates, and dynamic scales 2^-8 off (q consistent with them) fail.
// Each candidate is built here from the reference's y (rounded to x's dtype) with plain f32 arithmetic and
// lnorm::encode, the way a kernel would.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernel_cases.hpp"
#include "lnorm/format.hpp"
#include "lnorm/quantize.hpp"

using namespace lnorm;

namespace {

struct Setup {
  Problem p;
  QuantSpec spec;
  std::vector<std::byte> x, gamma;
  std::vector<std::uint8_t> q;        // the exact answer
  std::vector<std::byte> scales, y;   // exact scales; y* rounded to x's dtype
  std::int64_t per_row = 0, G = 0;
};

Setup make(DType d, Op op, QuantFormat f, Scaling sc, std::int64_t group, float scale, std::int64_t rows, std::int64_t cols,
           std::uint64_t seed) {
  Setup s;
  s.p = with_op(make_problem(rows, cols, d, 1e-5, true, false), op);
  s.spec.format = f;
  s.spec.scaling = sc;
  s.spec.group = group;
  s.spec.scale = sc == Scaling::tensor ? scale : 0.0f;
  REQUIRE(quant_spec_error(s.spec, cols).empty());
  s.x = testing::encode(d, testing::normal(d, static_cast<std::size_t>(rows * cols), 0.0, 1.0, seed));
  s.gamma = testing::encode(d, testing::normal(d, static_cast<std::size_t>(cols), 1.0, 0.1, seed + 1));
  s.per_row = s.spec.scales_per_row(cols);
  s.G = s.spec.group_size(cols);
  s.q.resize(static_cast<std::size_t>(rows * cols));
  s.scales.resize(static_cast<std::size_t>(rows * s.per_row) * s.spec.storage().bytes);
  s.y.resize(s.x.size());
  quantize_reference(s.p, s.spec, s.x.data(), nullptr, s.gamma.data(), nullptr, rows, 2, s.q.data(),
                     s.per_row ? s.scales.data() : nullptr, s.y.data());
  return s;
}

QuantSummary measure(const Setup& s, const std::vector<std::uint8_t>& q, const std::vector<std::byte>& scales,
                     QuantBudget budget = {}) {
  return measure_quantized(s.p, s.spec, s.x.data(), nullptr, s.gamma.data(), nullptr, q.data(),
                           s.per_row ? scales.data() : nullptr, s.p.rows, 0, budget, 2);
}

double yx(const Setup& s, std::int64_t i) { return value_at(s.p.dtype, s.y.data(), i); }

// The scale a kernel computes from y in x's dtype: f32 amax / qmax (row, group), or 2^(floor(log2 amax) − emax).
std::vector<std::byte> scales_from_y(const Setup& s, double factor = 1) {
  std::vector<std::byte> out(s.scales.size());
  for (std::int64_t r = 0; r < s.p.rows; ++r)
    for (std::int64_t g = 0; g < s.per_row; ++g) {
      float amax = 0;
      for (std::int64_t i = g * s.G; i < (g + 1) * s.G; ++i) amax = std::fmax(amax, std::fabs(static_cast<float>(yx(s, r * s.p.cols + i))));
      const std::int64_t at = r * s.per_row + g;
      if (s.spec.scales_are_e8m0()) {
        const int X = amax == 0 ? -127 : std::ilogb(amax) - emax_elem(s.spec.format);
        out[static_cast<std::size_t>(at)] = static_cast<std::byte>(X + 127);
      } else {
        float v = amax == 0 ? 1.0f : amax / static_cast<float>(qmax(s.spec.format));
        v = static_cast<float>(v * factor);
        std::memcpy(out.data() + at * 4, &v, 4);
      }
    }
  return out;
}

double scale_at(const Setup& s, const std::vector<std::byte>& scales, std::int64_t r, std::int64_t i) {
  if (s.spec.scaling == Scaling::tensor) return s.spec.scale;
  const std::int64_t at = r * s.per_row + i / s.G;
  if (s.spec.scales_are_e8m0()) return std::ldexp(1.0, static_cast<int>(scales[static_cast<std::size_t>(at)]) - 127);
  float v;
  std::memcpy(&v, scales.data() + at * 4, 4);
  return v;
}

// vLLM's rounding point: y in x's dtype, times f32(1/s), one rounding to the format.
std::vector<std::uint8_t> recipe_q(const Setup& s, const std::vector<std::byte>& scales) {
  std::vector<std::uint8_t> q(s.q.size());
  for (std::int64_t r = 0; r < s.p.rows; ++r)
    for (std::int64_t i = 0; i < s.p.cols; ++i) {
      const float inv = 1.0f / static_cast<float>(scale_at(s, scales, r, i));
      q[static_cast<std::size_t>(r * s.p.cols + i)] = encode(s.spec.format, static_cast<float>(yx(s, r * s.p.cols + i)) * inv);
    }
  return q;
}

// Truncation toward zero of y/s (y in x's dtype; saturating): the grid value of largest magnitude ≤ |y/s|.
std::vector<std::uint8_t> truncated_q(const Setup& s) {
  std::vector<std::uint8_t> q(s.q.size());
  const QuantFormat f = s.spec.format;
  for (std::int64_t r = 0; r < s.p.rows; ++r)
    for (std::int64_t i = 0; i < s.p.cols; ++i) {
      const double t = yx(s, r * s.p.cols + i) / scale_at(s, s.scales, r, i);
      std::int64_t k = ordinal_of_code(f, encode(f, t));
      if (std::fabs(value_of_ordinal(f, k)) > std::fabs(t)) k += t > 0 ? -1 : 1;
      q[static_cast<std::size_t>(r * s.p.cols + i)] = code_of_ordinal(f, k);
    }
  return q;
}

struct Combo {
  QuantFormat f;
  Scaling sc;
  std::int64_t group;
  float scale;
};
const Combo kCombos[] = {
    {QuantFormat::fp8_e4m3, Scaling::tensor, 0, 0.00390625f}, {QuantFormat::fp8_e4m3, Scaling::row, 0, 0},
    {QuantFormat::fp8_e5m2, Scaling::group, 128, 0},          {QuantFormat::int8, Scaling::row, 0, 0},
    {QuantFormat::int8, Scaling::tensor, 0, 0.0371f},         {QuantFormat::fp8_e4m3, Scaling::mx, 0, 0},
    {QuantFormat::int8, Scaling::group, 64, 0},
};

std::string label(DType d, const Combo& c) {
  QuantSpec sp{c.f, c.sc, c.group, c.scale};
  return std::string(name(d)) + " " + describe(sp);
}

}  // namespace

TEST_CASE("quantized verdicts: the exact q passes at 100% correctly rounded, and y rounded to x dtype first passes",
          "[quant][verdicts]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    for (const Combo& c : kCombos) {
      INFO(label(d, c));
      const Setup s = make(d, Op::rmsnorm, c.f, c.sc, c.group, c.scale, 8, 4096, 11);
      const QuantSummary exact = measure(s, s.q, s.scales);
      CHECK(exact.q_pass());
      CHECK(exact.scales_pass());
      CHECK(exact.correctly_rounded == exact.elements);
      CHECK(exact.max_ulp <= 0.5);
      const std::vector<std::byte> ks = s.per_row ? scales_from_y(s) : s.scales;
      const QuantSummary recipe = measure(s, recipe_q(s, ks), ks);
      INFO("recipe: max " << recipe.max_ulp << " quanta, worst excess " << recipe.worst_excess << ", scales max "
                          << recipe.scale_max_ulp);
      CHECK(recipe.q_pass());
      CHECK(recipe.scales_pass());
      CHECK(recipe.nonfinite_mismatches == 0);
    }
}

TEST_CASE("quantized verdicts: truncation, one quantum off, NaN for saturation and scales 2^-8 off fail",
          "[quant][verdicts]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    for (const Combo& c : kCombos) {
      INFO(label(d, c));
      const Setup s = make(d, Op::layernorm, c.f, c.sc, c.group, c.scale, 8, 4096, 21);
      const QuantSummary trunc = measure(s, truncated_q(s), s.scales);
      CHECK_FALSE(trunc.q_pass());
      std::vector<std::uint8_t> off = s.q;
      // One element one quantum up, where that is not the largest value.
      for (std::size_t i = 0; i < off.size(); ++i) {
        const std::int64_t k = ordinal_of_code(c.f, off[i]);
        if (k > 4 && k < max_ordinal(c.f)) {
          off[i] = code_of_ordinal(c.f, k + 1);
          break;
        }
      }
      CHECK_FALSE(measure(s, off, s.scales).q_pass());
      if (s.per_row) {  // scales 2^-8 off, q consistent with them
        std::vector<std::byte> bad = s.scales;
        if (s.spec.scales_are_e8m0()) {
          for (std::byte& b : bad) b = static_cast<std::byte>(static_cast<int>(b) + 1);  // 2x: the E8M0 step
        } else {
          for (std::size_t i = 0; i < bad.size(); i += 4) {
            float v;
            std::memcpy(&v, bad.data() + i, 4);
            v = static_cast<float>(v * (1 + 0x1p-8));
            std::memcpy(bad.data() + i, &v, 4);
          }
        }
        const QuantSummary r = measure(s, recipe_q(s, bad), bad);
        INFO("scales off: max " << r.scale_max_ulp << ", q max " << r.max_ulp);
        CHECK_FALSE(r.scales_pass());
        CHECK(r.q_pass());  // q itself is consistent with the scales it was given
      }
    }
}

TEST_CASE("quantized verdicts: NaN where the exact q saturates is a non-finite mismatch", "[quant][verdicts]") {
  for (QuantFormat f : {QuantFormat::fp8_e4m3, QuantFormat::fp8_e5m2}) {
    // A static scale small enough that |y/S| passes the format's largest value.
    const float scale = f == QuantFormat::fp8_e4m3 ? 0x1p-8f : 0x1p-15f;
    const Setup s = make(DType::bf16, Op::rmsnorm, f, Scaling::tensor, 0, scale, 4, 1024, 5);
    std::vector<std::uint8_t> q = s.q;
    std::int64_t saturated = 0;
    for (std::uint8_t& c : q)
      if (std::fabs(decode(f, c)) == qmax(f)) c = 0x7f, ++saturated;
    REQUIRE(saturated > 0);
    const QuantSummary r = measure(s, q, s.scales);
    CHECK(r.nonfinite_mismatches > 0);
    CHECK_FALSE(r.q_pass());
    CHECK(measure(s, s.q, s.scales).saturated > 0);
  }
}

TEST_CASE("quantized verdicts: f32 y divided in f32 lands on E4M3 midpoints under per-token bf16 scaling, within 0.5 + 1e-6",
          "[quant][verdicts]") {
  // The case: 8x1024 bf16, per-token E4M3. y rounded to f32 and divided by s in f32 can give an exact
  // midpoint the tie then sends one quantum from the exact answer; the metric reads just over 0.5 and the default
  // budget accepts it (the rounding of y to x's dtype is bigger still).
  const Setup s = make(DType::bf16, Op::rmsnorm, QuantFormat::fp8_e4m3, Scaling::row, 0, 0, 8, 1024, 3);
  // y* rounded to f32: the reference of the same values as an f32 problem.
  std::vector<std::uint8_t> q(s.q.size());
  Problem p32 = s.p;
  p32.dtype = p32.param_dtype = DType::f32;
  std::vector<std::byte> x32(static_cast<std::size_t>(s.p.rows * s.p.cols) * 4), g32(static_cast<std::size_t>(s.p.cols) * 4);
  for (std::int64_t i = 0; i < s.p.rows * s.p.cols; ++i) {
    const float v = static_cast<float>(value_at(DType::bf16, s.x.data(), i));
    std::memcpy(x32.data() + i * 4, &v, 4);
  }
  for (std::int64_t i = 0; i < s.p.cols; ++i) {
    const float v = static_cast<float>(value_at(DType::bf16, s.gamma.data(), i));
    std::memcpy(g32.data() + i * 4, &v, 4);
  }
  std::vector<std::uint8_t> q32(q.size());
  std::vector<std::byte> y32(x32.size()), s32(static_cast<std::size_t>(s.p.rows) * 4);
  QuantSpec spec = s.spec;
  quantize_reference(p32, spec, x32.data(), nullptr, g32.data(), nullptr, s.p.rows, 2, q32.data(), s32.data(), y32.data());
  std::int64_t moved = 0;
  for (std::int64_t r = 0; r < s.p.rows; ++r)
    for (std::int64_t i = 0; i < s.p.cols; ++i) {
      float y, sc;
      std::memcpy(&y, y32.data() + (r * s.p.cols + i) * 4, 4);
      std::memcpy(&sc, s.scales.data() + r * 4, 4);
      const std::uint8_t c = encode(QuantFormat::fp8_e4m3, y / sc);  // f32 division, then one rounding
      moved += c != s.q[static_cast<std::size_t>(r * s.p.cols + i)];
      q[static_cast<std::size_t>(r * s.p.cols + i)] = c;
    }
  const QuantSummary m = measure(s, q, s.scales);
  INFO("elements one quantum from the exact q: " << moved << "; max " << m.max_ulp << " quanta");
  CHECK(m.q_pass());
  CHECK(m.max_ulp <= 0.5 + 1e-6);
  CHECK(m.correctly_rounded == m.elements - moved);
}
