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


// 8 rows x 64: rows of subnormal values (the engine of issue 21 returned ±Inf on them with eps = 0, where
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
