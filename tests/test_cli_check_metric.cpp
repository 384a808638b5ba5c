// One error metric everywhere (lnorm/metrics.hpp): `lnorm check` names non-finite outputs as such — never
// "0 ulp" — and measures the mean exactly as `lnorm verify`'s accuracy property does.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "cli_support.hpp"
#include "lnorm/format.hpp"
#include "lnorm/npy.hpp"
#include "properties.hpp"

using namespace lnorm;
using namespace lnorm::testing;

namespace {

void save_f32(const std::string& path, const std::vector<std::int64_t>& shape, const std::vector<float>& v) {
  io::save(path, "<f4", shape, v.data());
}


// 8 rows x 64: rows of subnormal values (an earlier engine returned ±Inf on them with eps = 0, where
// the exact answer is finite), then ordinary rows.
std::vector<float> subnormal_rows() {
  std::vector<float> x(8 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float k = static_cast<float>(static_cast<int>(i % 64) - 31);
    x[i] = i < 4 * 64 ? k * 0x1p-140f : k * 0.25f + 1.0f;
  }
  return x;
}

}  // namespace

TEST_CASE("check: ±Inf and NaN where the answer is finite are non-finite mismatches, max_ulp inf, FAIL (CLI)", "[cli][metric]") {
  TempDir t;
  save_f32(t / "x.npy", {8, 64}, subnormal_rows());
  const std::string x = " --x " + (t / "x.npy") + " --eps 0";
  REQUIRE(cli("reference" + x + " --y " + (t / "y.npy")).code == 0);
  std::vector<float> y = load_f32(t / "y.npy");
  for (float v : y) REQUIRE(std::isfinite(v));  // the exact answer is finite everywhere
  // The first four (subnormal) rows: +Inf or -Inf by sign, as the engine gave; one NaN in row 5.
  for (std::size_t i = 0; i < 4 * 64; ++i) y[i] = y[i] < 0 ? -INFINITY : INFINITY;
  y[5 * 64 + 3] = NAN;
  save_f32(t / "bad.npy", {8, 64}, y);

  const Result r = cli("check" + x + " --y " + (t / "bad.npy") + " --max-ulp 1e30 --json " + (t / "bad.json"));
  INFO(r.out);
  CHECK(r.code == 1);  // over budget whatever the budget: no flat budget admits an infinity
  CHECK_THAT(r.out, Contains("FAIL  y max inf scaled ulp"));
  CHECK_THAT(r.out, Contains("non-finite mismatches 257"));
  const auto j = load_json(t / "bad.json");
  CHECK(j.at("nonfinite_mismatches").get<std::int64_t>() == 4 * 64 + 1);
  CHECK(j.at("nan_mismatches").get<std::int64_t>() == 4 * 64 + 1);  // the deprecated alias, for one release
  CHECK(j.at("max_ulp").is_null());                                  // JSON has no Inf: null ...
  CHECK(j.at("max_ulp_nonfinite").get<bool>());                      // ... and this says why
  CHECK(j.at("max_ulp_index").get<std::int64_t>() == 0);             // the first non-finite mismatch
  CHECK(j.at("first_nonfinite_mismatch_index").get<std::int64_t>() == 0);
  CHECK(j.at("max_finite_ulp").get<double>() <= 0.5);  // the rest is the exact answer rounded once
  CHECK(j.at("correctly_rounded").get<double>() == Approx((4 * 64 - 1) / 512.0));
  CHECK_FALSE(j.at("pass").get<bool>());

  // NaN alone, where the answer is finite, also fails, and is counted as one.
  std::vector<float> one_nan = load_f32(t / "y.npy");
  one_nan[100] = NAN;
  save_f32(t / "nan.npy", {8, 64}, one_nan);
  const Result n = cli("check" + x + " --y " + (t / "nan.npy") + " --json " + (t / "nan.json"));
  CHECK(n.code == 1);
  const auto jn = load_json(t / "nan.json");
  CHECK(jn.at("nonfinite_mismatches").get<std::int64_t>() == 1);
  CHECK(jn.at("max_ulp").is_null());
  CHECK(jn.at("max_ulp_index").get<std::int64_t>() == 100);
}

TEST_CASE("check: a mean 1e-7 from an exact mean of 0 (std 1) is 0.84 ulp, within 8, in check exactly as in verify", "[cli][metric]") {
  TempDir t;
  // Row [-1, 1]: mean 0 exactly, var 1; eps = 0, so sqrt(var + eps) = 1 and ulp(1) = 2^-23.
  save_f32(t / "x.npy", {1, 2}, {-1.0f, 1.0f});
  const std::string x = " --x " + (t / "x.npy") + " --eps 0";
  REQUIRE(cli("reference" + x + " --y " + (t / "y.npy") + " --rstd " + (t / "r.npy")).code == 0);
  const float mean = 1e-7f;
  save_f32(t / "m.npy", {1, 1}, {mean});
  const std::string args = "check" + x + " --y " + (t / "y.npy") + " --mean " + (t / "m.npy") + " --rstd " + (t / "r.npy");
  const Result pass = cli(args + " --max-mean-ulp 8 --json " + (t / "m.json"));
  INFO(pass.out);
  CHECK(pass.code == 0);
  const double from_check = load_json(t / "m.json").at("mean").at("max_ulp").get<double>();
  CHECK(from_check == Approx(static_cast<double>(mean) / 0x1p-23));  // 0.839, not 8e8 plain ulps
  CHECK(cli(args + " --max-mean-ulp 0.5").code == 1);

  // verify's accuracy property, on the same row and outputs: the same number, the same verdicts.
  verify::Case c;
  c.spec.dtype = DType::f32;
  c.spec.row_classes = {verify::RowClass::exact_stats};
  c.spec.shape = {1, 2};
  c.spec.axis = 1;
  c.spec.eps = 0;
  c.x = {-1.0, 1.0};
  const verify::Exact exact = verify::exact_answer(c);
  verify::Outputs got;
  got.y = exact.y;
  got.mean = {double_to_bits(format_of(DType::f32), mean)};
  got.rstd = {double_to_bits(format_of(DType::f32), exact.rows[0].rstd)};
  verify::KernelBudget budget;
  budget.mean_ulp = 8;
  budget.rstd_ulp = 0;
  verify::Worst worst;
  const KernelInfo none{};
  CHECK(verify::check_stats_within_budget({none, budget, worst}, c, got, exact).empty());
  CHECK(worst.values.at("mean_ulp") == from_check);
  budget.mean_ulp = 0.5;
  CHECK_THAT(verify::check_stats_within_budget({none, budget, worst}, c, got, exact), Contains("> allowed 0.5"));
}

// RMSNorm measured against itself. A 4x256 f32 RMSNorm of values ~1e-30: x² underflows f32 and eps
// dominates, so every exact output is a normal f32 near 1e-27. welford wrote 0 for all of them (eps·scale²
// overflowed, rstd_scaled = 0) and the old metric, floored at max(1, |z|), passed the zeros at 9e-21 ulp.
TEST_CASE("check: RMSNorm's small outputs are measured against themselves: welford's row passes, all zeros FAIL (CLI)", "[cli][metric]") {
  TempDir t;
  std::vector<float> x(4 * 256);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int>(i * 37 % 101) - 50) * 2e-32);
  save_f32(t / "x.npy", {4, 256}, x);
  const std::string in = " --op rmsnorm --x " + (t / "x.npy");
  REQUIRE(cli("run --kernel welford" + in + " --y " + (t / "y.npy")).code == 0);
  const Result ok = cli("check" + in + " --y " + (t / "y.npy") + " --json " + (t / "ok.json"));
  INFO(ok.out);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Contains("(budget 8)"));  // RMSNorm has no kappa: the budget that applies, not "8 + 1*kappa"
  const auto j = load_json(t / "ok.json");
  CHECK(j.at("max_ulp").get<double>() <= 2);  // welford.f32's measured worst here is 1.17
  CHECK_FALSE(j.contains("constant_rows"));   // LayerNorm's notion

  save_f32(t / "zeros.npy", {4, 256}, std::vector<float>(x.size(), 0.0f));
  const Result zeros = cli("check" + in + " --y " + (t / "zeros.npy") + " --json " + (t / "zeros.json"));
  INFO(zeros.out);
  CHECK(zeros.code == 1);
  std::int64_t nonzero = 0;
  for (float v : x) nonzero += v != 0;
  CHECK(load_json(t / "zeros.json").at("over_budget").get<std::int64_t>() == nonzero);  // y* ≠ 0 wherever x ≠ 0

  // One step off: every output moved by 2 ulps of itself reads ~2 (the floor read ~2^-90 of that).
  std::vector<float> y = load_f32(t / "y.npy");
  for (float& v : y) v = std::nextafter(std::nextafter(v, INFINITY), INFINITY);
  save_f32(t / "off.npy", {4, 256}, y);
  const Result off = cli("check" + in + " --y " + (t / "off.npy") + " --max-ulp 1.5 --json " + (t / "off.json"));
  CHECK(off.code == 1);
  CHECK(load_json(t / "off.json").at("max_ulp").get<double>() > 1.5);
  CHECK_THAT(cli("check" + in + " --y " + (t / "y.npy") + " --strict-constant-rows").out, Contains("LayerNorm only"));
}

// RMSNorm's backward: dx on the same small rows is measured against its own terms (rstd·(|g| + |xhat|·mean|g·xhat|)).
TEST_CASE("check --dir bwd: RMSNorm's dx and dgamma on small rows: zeros FAIL, the exact ones pass (CLI)", "[cli][metric][backward]") {
  TempDir t;
  std::vector<float> x(4 * 64), dy(4 * 64), g(64, 1.5f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((static_cast<int>(i * 37 % 101) - 50) * 2e-32);
    dy[i] = static_cast<float>((static_cast<int>(i * 53 % 97) - 48) * 0.01);
  }
  save_f32(t / "x.npy", {4, 64}, x);
  save_f32(t / "dy.npy", {4, 64}, dy);
  save_f32(t / "g.npy", {64}, g);
  const std::string in = " --op rmsnorm --dir bwd --x " + (t / "x.npy") + " --gamma " + (t / "g.npy") + " --dy " + (t / "dy.npy");
  REQUIRE(cli("reference" + in + " --dx " + (t / "dx.npy") + " --dgamma " + (t / "dg.npy")).code == 0);
  CHECK(cli("check" + in + " --dx " + (t / "dx.npy") + " --dgamma " + (t / "dg.npy")).code == 0);
  save_f32(t / "dg0.npy", {64}, std::vector<float>(64, 0.0f));
  const Result dg0 = cli("check" + in + " --dgamma " + (t / "dg0.npy") + " --json " + (t / "dg0.json"));
  INFO(dg0.out);
  CHECK(dg0.code == 1);  // dgamma = Σ dy·xhat ~ 1e-27: 0 is not within 8 ulps of it
  // The smallest nonzero dx (|dy| = 0.01 where mean|dy| is 0.24) moved by 2 ulps of itself reads 2 (its own terms:
  // xhat·mean(g·xhat) is ~1e-54 of g here); the floor measured it against rstd·(|g| + mean|g|) and read ~0.1.
  std::vector<float> dx = load_f32(t / "dx.npy");
  std::size_t k = 0;
  for (std::size_t i = 0; i < dx.size(); ++i)
    if (dx[i] != 0 && (dx[k] == 0 || std::fabs(dx[i]) < std::fabs(dx[k]))) k = i;
  dx[k] = std::nextafter(std::nextafter(dx[k], INFINITY), INFINITY);
  save_f32(t / "dx2.npy", {4, 64}, dx);
  const Result dx2 = cli("check" + in + " --dx " + (t / "dx2.npy") + " --json " + (t / "dx2.json"));
  INFO(dx2.out);
  CHECK(dx2.code == 0);
  const auto jd = load_json(t / "dx2.json").at("dx");
  CHECK(jd.at("max_ulp").get<double>() > 1.5);
  CHECK(jd.at("max_ulp_index").get<std::size_t>() == k);
}

// A real engine returned y ≡ −1 on rows constant in storage (exact answer β = 0) and passed at the default budget:
// the kappa term (|mean|/sqrt(var + eps) = 3.2e8 here) models a mean's rounding, which a constant row does not have.
TEST_CASE("check: LayerNorm's constant rows are named, and --strict-constant-rows gates them at kappa 0 (CLI)", "[cli][metric]") {
  TempDir t;
  std::vector<float> x(4 * 32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = i < 32 ? 1e6f : static_cast<float>(static_cast<int>(i % 32) - 16);
  save_f32(t / "x.npy", {4, 32}, x);
  const std::string in = " --x " + (t / "x.npy") + " --eps 1e-5";
  REQUIRE(cli("reference" + in + " --y " + (t / "y.npy")).code == 0);
  std::vector<float> y = load_f32(t / "y.npy");
  for (std::size_t i = 0; i < 32; ++i) y[i] = -1.0f;  // the engine's answer on the constant row
  save_f32(t / "bad.npy", {4, 32}, y);
  const Result def = cli("check" + in + " --y " + (t / "bad.npy") + " --json " + (t / "def.json"));
  INFO(def.out);
  CHECK(def.code == 0);  // default verdicts unchanged
  CHECK_THAT(def.out, Contains("constant rows 1: max 8.39e+06 scaled ulp at kappa 0"));
  const auto j = load_json(t / "def.json");
  CHECK(j.at("constant_rows").at("count") == 1);
  CHECK(j.at("constant_rows").at("max_ulp").get<double>() == 0x1p23);  // |−1 − 0| / ulp(1)
  CHECK(j.at("constant_rows").at("pass") == false);
  CHECK(j.at("constant_rows").at("strict") == false);
  const Result strict = cli("check" + in + " --y " + (t / "bad.npy") + " --strict-constant-rows --json " + (t / "s.json"));
  INFO(strict.out);
  CHECK(strict.code == 1);
  CHECK(load_json(t / "s.json").at("pass") == false);
  // The exact answer passes strictly, constant row and all.
  CHECK(cli("check" + in + " --y " + (t / "y.npy") + " --strict-constant-rows").code == 0);
}
