// The exact reference for every op and parameter convention (docs/DESIGN.md "Ops"): RMSNorm, the gamma
// offset C of (C + gamma), and f32 gamma/beta with f16/bf16 x, bit for bit against the independent
// rational evaluation (tests/independent_exact.hpp), and on hand-computed values.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "independent_exact.hpp"
#include "kernel_cases.hpp"
#include "lnorm/format.hpp"
#include "lnorm/reference.hpp"

using namespace lnorm;
using lnorm::testing::encode;

namespace {

using Out = lnorm::testing::ReferenceRowValues;
using lnorm::testing::in_format;
using lnorm::testing::same_value;

Out run(const Problem& p, const std::vector<double>& x, const std::vector<double>* g, const std::vector<double>* b) {
  RowReferencer ref(p);
  return lnorm::testing::reference_row(ref, p.dtype, p.param_dtype, x, g, b);
}

std::string compare(Op op, DType d, DType pd, double eps, double offset, const std::vector<double>& x,
                    const std::vector<double>* g = nullptr, const std::vector<double>* b = nullptr) {
  Problem p = with_op(make_problem(1, static_cast<std::int64_t>(x.size()), d, eps, g != nullptr, b != nullptr), op);
  p = set_params(p, pd, g ? offset : 0.0);
  const Out got = run(p, x, g, b);
  const auto want = lnorm::testing::independent_norm(format_of(d), format_of(stats_dtype(d)), x, g, b, p.eps,
                                                     op.norm == Norm::layernorm, p.gamma_offset);
  if (!same_value(got.row.mean, want.mean)) return "mean: got " + std::to_string(got.row.mean) + " want " + std::to_string(want.mean);
  if (!same_value(got.row.rstd, want.rstd)) return "rstd: got " + std::to_string(got.row.rstd) + " want " + std::to_string(want.rstd);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same_value(got.y[i], want.y[i])) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "y[%zu]: got %.17g want %.17g (x = %.17g)", i, got.y[i], want.y[i], x[i]);
      return buf;
    }
  return "";
}

// The rows where RMSNorm breaks: x² overflowing f32 near |x| 1.8e19, eps dominating, subnormals,
// long rows, sparse rows with outliers, a zero row, a constant row.
std::vector<std::pair<std::string, std::vector<double>>> rms_rows(DType d) {
  const Format f = format_of(d);
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  const double min_sub = std::ldexp(1.0, f.lsb_exponent());
  std::vector<std::pair<std::string, std::vector<double>>> rows;
  for (std::size_t n : {1u, 2u, 17u, 4097u}) rows.push_back({"normal n=" + std::to_string(n), lnorm::testing::normal(d, n, 0, 1, n)});
  rows.push_back({"offset 1e4", lnorm::testing::normal(d, 64, 1e4, 1, 7)});
  rows.push_back({"zero", std::vector<double>(9, 0.0)});
  rows.push_back({"constant", std::vector<double>(33, round_to_format(f, -3.14159))});
  rows.push_back({"huge (x^2 past f32)", in_format(d, {max_finite, -max_finite / 2, 2e19, -1.9e19, max_finite})});
  rows.push_back({"tiny (eps dominates)", lnorm::testing::normal(d, 16, 0, 1e-6, 3)});
  rows.push_back({"subnormal", {min_sub, -3 * min_sub, 0, 17 * min_sub, 2 * min_sub}});
  rows.push_back({"sparse outliers", in_format(d, {0, 0, 0, 1e3, 0, 0, -2e3, 0, 0, 0, 0, 0, 0, 0, 0, 1})});
  rows.push_back({"perfect square ms", {3, 4, -3, -4}});  // mean(x²) = 12.5: not a square; with eps = 0 ...
  rows.push_back({"rational rstd", {2, 2, 2, 2}});        // ... mean(x²) = 4: rstd = 1/2 exactly, ties possible
  rows.push_back({"nan row", {1, NAN, 2}});
  rows.push_back({"inf row", {1, INFINITY, 2}});
  return rows;
}

}  // namespace

TEST_CASE("reference ops: RMSNorm on hand-computed values", "[reference][ops]") {
  // x = [3, 4]: mean(x²) = 12.5, rstd = 1/sqrt(12.5) with eps = 0; y = x·rstd.
  Problem p = with_op(make_problem(1, 2, DType::f64, 0, false, false), Op::rmsnorm);
  const Out o = run(p, {3, 4}, nullptr, nullptr);
  CHECK(o.row.rstd == 1 / std::sqrt(12.5));
  CHECK(o.row.mean == 0);   // no mean subtracted, none reported
  CHECK(o.row.kappa == 0);  // kappa does not condition RMSNorm
  CHECK(o.y[0] == Approx(3 / std::sqrt(12.5)).epsilon(1e-15));
  CHECK(o.y[1] == Approx(4 / std::sqrt(12.5)).epsilon(1e-15));
  // A zero row: 0 with eps > 0, NaN with eps = 0 (rstd = +Inf, 0·Inf).
  p = with_op(make_problem(1, 3, DType::f32, 1e-5, false, false), Op::rmsnorm);
  const Out z = run(p, {0, 0, 0}, nullptr, nullptr);
  CHECK(z.y == std::vector<double>{0, 0, 0});
  p.eps = 0;
  const Out zn = run(p, {0, 0, 0}, nullptr, nullptr);
  CHECK(std::isnan(zn.y[0]));
  CHECK(std::isinf(zn.row.rstd));
  // A constant row c: c/sqrt(c² + eps)·gamma.
  p = set_params(with_op(make_problem(1, 4, DType::f64, 0.25, true, false), Op::rmsnorm), DType::f64, 0);
  const std::vector<double> g(4, 2.0);
  const Out c = run(p, std::vector<double>(4, 1.5), &g, nullptr);
  CHECK(c.y[0] == Approx(2 * 1.5 / std::sqrt(1.5 * 1.5 + 0.25)).epsilon(1e-15));
}

TEST_CASE("reference ops: RMSNorm is bit-exact against the independent evaluation on its hard rows", "[reference][ops]") {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (double eps : {0.0, 1e-12, 1e-6, 1.0}) {
      for (const auto& [label, x] : rms_rows(d)) {
        INFO(std::string(name(d)) << " " << label << " eps " << eps);
        CHECK(compare(Op::rmsnorm, d, d, eps, 0, x) == "");
      }
    }
    const auto x = lnorm::testing::normal(d, 17, 0.5, 2, 99);
    auto g = lnorm::testing::normal(d, 17, 1, 0.5, 5), b = lnorm::testing::normal(d, 17, 0, 0.3, 6);
    g[3] = 0, b[4] = 0;
    INFO(std::string(name(d)) << " affine");
    CHECK(compare(Op::rmsnorm, d, d, 1e-6, 0, x, &g) == "");
    CHECK(compare(Op::rmsnorm, d, d, 1e-6, 0, x, &g, &b) == "");
  }
}

TEST_CASE("reference ops: f64 rows near overflow, whose rstd is subnormal in f64, are rounded exactly (both ops)", "[reference][ops]") {
  const double max = 0x1.fffffffffffffp1023;
  for (Op op : kNormOps) {
    for (const std::vector<double>& x : {std::vector<double>{max, -max / 2, 2e307, -1.9e307, max},
                                         std::vector<double>{max, -max, max / 2, max / 3, -max / 7, max / 5}}) {
      INFO(name(op));
      CHECK(compare(op, DType::f64, DType::f64, 1e-5, 0, x) == "");
    }
  }
}

TEST_CASE("reference ops: the gamma offset (C + gamma) is exact, for both ops, Gemma's C = 1 and others", "[reference][ops]") {
  for (Op op : kNormOps) {
    for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      const auto x = lnorm::testing::normal(d, 33, 0.25, 1.5, 11);
      // Zero-centred weights (Gemma stores w, uses 1 + w), tiny ones (1 + w is not exact in w's format),
      // and -C (a weight of exactly 0).
      auto w = lnorm::testing::normal(d, 33, 0, 0.02, 12);
      w[0] = round_to_format(format_of(d), 1e-30), w[1] = -1, w[2] = 0;
      const auto b = lnorm::testing::normal(d, 33, 0, 0.3, 13);
      for (double c : {1.0, -0.5, 3.0}) {
        INFO(name(op) << " " << name(d) << " C = " << c);
        CHECK(compare(op, d, d, 1e-5, c, x, &w) == "");
        CHECK(compare(op, d, d, 1e-5, c, x, &w, &b) == "");
      }
    }
  }
}

TEST_CASE("reference ops: f32 gamma/beta with f16/bf16 x, for both ops", "[reference][ops]") {
  for (Op op : kNormOps) {
    for (DType d : {DType::f16, DType::bf16}) {
      const auto x = lnorm::testing::normal(d, 65, 0.25, 1.5, 21);
      // f32 values that f16/bf16 cannot hold: the parameters are read in their own format.
      const auto g = lnorm::testing::normal(DType::f32, 65, 1, 0.3, 22), b = lnorm::testing::normal(DType::f32, 65, 0, 0.3, 23);
      INFO(name(op) << " " << name(d));
      CHECK(compare(op, d, DType::f32, 1e-5, 0, x, &g, &b) == "");
      CHECK(compare(op, d, DType::f32, 1e-5, 1, x, &g, &b) == "");
    }
  }
}

TEST_CASE("reference ops: bad parameter conventions are refused", "[reference][ops]") {
  const Problem p = make_problem(1, 4, DType::f32, 1e-5, true, false);
  CHECK_THROWS_WITH(set_params(p, DType::f16, 0), "gamma/beta in f16 with f32 x: parameters are x's dtype, or f32 with f16/bf16 x");
  CHECK_THROWS_WITH(set_params(make_problem(1, 4, DType::f32, 1e-5, false, false), DType::f32, 1), "a gamma offset needs gamma");
  CHECK(set_params(make_problem(1, 4, DType::bf16, 1e-5, true, true), DType::f32, 0.1).gamma_offset == static_cast<float>(0.1));
}
