// Recipes (reference/include/lnorm/recipe.hpp): names and where they apply; llama's answer against an
// independent 200-bit evaluation with its two roundings; gemma's and unrounded_h's against what they
// reduce to (the op with offset 1; the op itself where the sum needs no rounding).
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <catch2/catch.hpp>

#include "lnorm/add.hpp"
#include "lnorm/format.hpp"
#include "lnorm/half.hpp"
#include "lnorm/recipe.hpp"
#include "lnorm/reference.hpp"

using namespace lnorm;
using Catch::Matchers::Contains;

namespace {

using Float200 = boost::multiprecision::number<boost::multiprecision::cpp_bin_float<200, boost::multiprecision::digit_base_2>,
                                          boost::multiprecision::et_off>;

std::vector<bf16> bf16_row(std::mt19937_64& rng, std::size_t n, double mean, double sd) {
  std::normal_distribution<double> d(mean, sd);
  std::vector<bf16> v(n);
  for (auto& e : v) e = bf16_from_float(static_cast<float>(d(rng)));
  return v;
}

Problem rms_bf16(std::int64_t n, bool fused = false) {
  Problem p = make_problem(1, n, DType::bf16, 1e-6, true, false);
  p = with_op(p, fused ? Op::add_rmsnorm : Op::rmsnorm);
  p = set_params(p, DType::bf16, 0);
  if (fused) p = set_residual(p, DType::bf16);
  return p;
}

std::string why_not(std::string_view name, const Problem& p) {
  try {
    (void)recipe_problem(p, parse_recipe(name));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("recipes: names combine with '+', unknown, repeated and conflicting names are refused", "[recipe]") {
  const Recipe r = parse_recipe("llama+unrounded_h");
  CHECK(r.round_normalized);
  CHECK(r.unrounded_sum);
  CHECK_FALSE(r.weight_in_f32);
  CHECK(parse_recipe("gemma").weight_in_f32);
  CHECK_THROWS_WITH(parse_recipe("lama"), Contains("unknown recipe 'lama'") && Contains("known: llama, gemma, unrounded_h"));
  CHECK_THROWS_WITH(parse_recipe("llama+llama"), Contains("twice"));
  CHECK_THROWS_WITH(parse_recipe("llama+gemma"), Contains("exclude each other"));
  CHECK_THROWS_WITH(parse_recipe("llama+"), Contains("unknown recipe ''"));
}

TEST_CASE("recipes: each applies where its rounding point exists, and says why not elsewhere", "[recipe]") {
  Problem ln = make_problem(1, 8, DType::bf16, 1e-5, true, true);
  CHECK_THAT(why_not("llama", ln), Contains("llama is an RMSNorm recipe"));
  CHECK_THAT(why_not("unrounded_h", rms_bf16(8)), Contains("Add & Norm recipe"));
  CHECK_THAT(why_not("llama", make_problem(1, 8, DType::f64, 1e-5, true, false)), Contains("f64"));
  CHECK(why_not("llama", rms_bf16(8)).empty());
  CHECK(why_not("llama+unrounded_h", rms_bf16(8, true)).empty());
  Problem no_gamma = with_op(make_problem(1, 8, DType::bf16, 1e-5, false, false), Op::rmsnorm);
  CHECK_THAT(why_not("gemma", no_gamma), Contains("give --gamma"));
  CHECK_THAT(why_not("gemma", set_params(rms_bf16(8), DType::bf16, 0.5)), Contains("not 0.5"));
  CHECK(recipe_problem(rms_bf16(8), parse_recipe("gemma")).gamma_offset == 1);  // the weight is stored zero-centred
}

TEST_CASE("recipe llama: y = round(w * round_bf16(x * rstd*)), against a 200-bit evaluation", "[recipe]") {
  std::mt19937_64 rng(23);
  const std::int64_t n = 512;
  const Problem p = rms_bf16(n);
  RecipeReferencer ref(p, parse_recipe("llama"));
  const Format f = format_of(DType::bf16);
  int checked = 0;
  for (int row = 0; row < 40; ++row) {
    // Offset rows as well as centred ones: RMSNorm does not subtract the mean.
    const std::vector<bf16> x = bf16_row(rng, n, row % 2 ? 3.0 : 0.0, 1.0);
    const std::vector<bf16> w = bf16_row(rng, n, 1.0, 0.2);
    std::vector<std::uint16_t> y(n);
    std::vector<ElementReference> e(n);
    ref.run(x.data(), nullptr, w.data(), nullptr, n, y.data(), e.data());
    Float200 q = 0;
    for (const bf16& v : x) q += Float200(to_float(v)) * Float200(to_float(v));
    const Float200 rstd = 1 / sqrt(q / n + Float200(p.eps));
    for (std::int64_t i = 0; i < n; ++i) {
      const Float200 z = Float200(to_float(x[i])) * rstd;
      const double vd = round_to_format(f, z.convert_to<double>());
      // Skip elements where the double nearest z* could sit on the other side of a bf16 midpoint (never
      // in practice: z* would have to be within 2^-60 of one).
      const double half_gap = std::ldexp(1.0, std::ilogb(vd == 0 ? 1 : vd) - 8);  // bf16: p = 8
      if (abs(abs(z - Float200(vd)) - Float200(half_gap)) < Float200(std::fabs(vd)) * Float200(0x1p-60)) continue;
      const double want = round_to_format(f, static_cast<double>(to_float(w[i])) * vd);  // exact product, one rounding
      INFO("row " << row << " element " << i);
      REQUIRE(bits_to_double(f, y[i]) == want);
      // The recipe's value before its last rounding is w·v, and a candidate equal to the answer reads ≤ 0.5.
      REQUIRE(e[i].y_hi + e[i].y_lo == static_cast<double>(to_float(w[i])) * vd);
      REQUIRE(std::fabs(want - e[i].y_hi) / ulp_at(f, e[i].scale) <= 0.5);
      ++checked;
    }
  }
  CHECK(checked > 40 * 500);
}

TEST_CASE("recipe gemma with bf16 weights is the exact RMSNorm with offset 1 (1 + w is exact in f32)", "[recipe]") {
  std::mt19937_64 rng(5);
  const std::int64_t n = 256;
  const Recipe g = parse_recipe("gemma");
  const Problem p = recipe_problem(rms_bf16(n), g);
  RecipeReferencer rec(p, g);
  RowReferencer op(p);
  for (int row = 0; row < 20; ++row) {
    const std::vector<bf16> x = bf16_row(rng, n, 0.0, 1.0), w = bf16_row(rng, n, 0.0, 0.1);
    std::vector<std::uint16_t> a(n), b(n);
    rec.run(x.data(), nullptr, w.data(), nullptr, n, a.data(), nullptr);
    op.run(x.data(), w.data(), nullptr, n, b.data(), nullptr);
    REQUIRE(a == b);
  }
}

TEST_CASE("recipe gemma rounds 1 + w to f32: with f32 weights below 2^-24 the weight is 1", "[recipe]") {
  const std::int64_t n = 64;
  Problem p = make_problem(1, n, DType::f32, 1e-6, true, false);
  p = with_op(p, Op::rmsnorm);
  const Recipe g = parse_recipe("gemma");
  p = recipe_problem(p, g);
  std::vector<float> x(n), w(n, 0x1p-30f), ones(n, 1.0f), y(n), plain(n);
  for (std::int64_t i = 0; i < n; ++i) x[i] = 0.37f * static_cast<float>(i) - 11.0f;
  RecipeReferencer(p, g).run(x.data(), nullptr, w.data(), nullptr, n, y.data(), nullptr);
  Problem unit = set_params(p, DType::f32, 0);
  RowReferencer(unit).run(x.data(), ones.data(), nullptr, n, plain.data(), nullptr);
  CHECK(y == plain);  // weight round_f32(1 + 2^-30) = 1
}

TEST_CASE("recipe unrounded_h: the op itself where x + residual needs no rounding, and different where it does", "[recipe]") {
  std::mt19937_64 rng(9);
  const std::int64_t n = 256;
  const Problem p = rms_bf16(n, true);
  const Recipe u = parse_recipe("unrounded_h");
  RecipeReferencer rec(p, u);
  RowReferencer op(p);
  const std::vector<bf16> x = bf16_row(rng, n, 0.0, 1.0), w = bf16_row(rng, n, 1.0, 0.1);
  std::vector<bf16> zeros(n, bf16_from_float(0.0f));
  std::vector<std::uint16_t> a(n), b(n);
  // residual 0: the sum is x, exactly, in both.
  CHECK(rec.run(x.data(), zeros.data(), w.data(), nullptr, n, a.data(), nullptr) == 0);
  op.run(x.data(), w.data(), nullptr, n, b.data(), nullptr);
  CHECK(a == b);
  // A residual whose sums need more than bf16's 8 bits: the recipe normalizes the exact sums.
  const std::vector<bf16> r = bf16_row(rng, n, 0.0, 8.0);
  std::vector<std::uint16_t> h(n);
  CHECK(rec.run(x.data(), r.data(), w.data(), nullptr, n, a.data(), nullptr) == 0);  // bf16 sums are doubles
  std::vector<float> hv(n);
  for (std::int64_t i = 0; i < n; ++i) {
    hv[i] = to_float(x[i]) + to_float(r[i]);
    REQUIRE(static_cast<double>(hv[i]) == static_cast<double>(to_float(x[i])) + to_float(r[i]));  // exact in f32
  }
  Problem on_f32 = p;
  on_f32.residual_dtype = DType::f32;  // the fused referencer reads its input in the residual's dtype
  RowReferencer on_sums(on_f32);
  on_sums.run(hv.data(), w.data(), nullptr, n, b.data(), nullptr);
  CHECK(a == b);
  // The op normalizes h rounded to bf16: a different answer (the rounding of h moves y by up to an ulp).
  std::vector<std::uint16_t> c(n);
  add_row(p, x.data(), r.data(), n, h.data(), nullptr);
  op.run(h.data(), w.data(), nullptr, n, c.data(), nullptr);
  CHECK(a != c);
}

TEST_CASE("recipe unrounded_h counts sums that are not doubles (f32 values 2^40 apart)", "[recipe]") {
  const std::int64_t n = 8;
  Problem p = make_problem(1, n, DType::f32, 1e-6, false, false);
  p = set_residual(with_op(p, Op::add_layernorm), DType::f32);
  std::vector<float> x(n, 0x1p20f), r(n, 0x1.000002p-20f), y(n);  // 2^20 + (2^-20 + 2^-43): 64 bits
  r[0] = 1.0f;                                                     // this sum is a double
  CHECK(RecipeReferencer(p, parse_recipe("unrounded_h")).run(x.data(), r.data(), nullptr, nullptr, n, y.data(), nullptr) == 7);
}
