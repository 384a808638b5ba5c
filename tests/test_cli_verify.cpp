// Specifications for `lnorm verify`, the CI gate, driven through the real executable: exit codes,
// the table, --json and --junit contents, expected failures, reproduction and dumped cases, and bad
// usage refused with exit 2.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "cli_support.hpp"
#include "lnorm/npy.hpp"

using namespace lnorm::testing;

namespace {

// welford's f32 section with an impossible y budget (0 ulps: not even correct rounding passes).
const char* kImpossible = R"(
[welford.f32]
y = { a = 0, b = 0, reason = "impossible on purpose" }
mean = { ulp = 1000, reason = "r" }
rstd = { ulp = 1000, reason = "r" }
exact_mean = { value = false, reason = "r" }
)";

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("cli verify: welford f32 passes every property of every op, and JSON and JUnit say so case by case",
          "[cli][verify]") {
  TempDir t;
  // Without --op, every op the kernel implements: LayerNorm's 13 properties (quantized among them: welford writes
  // quantized outputs), RMSNorm's 14, then Add & Norm's (the norm's and four of its own): 17 and 18.
  const Result r = cli("verify --kernel welford --dtype f32 --quick --json " + t / "v.json" + " --junit " + t / "v.xml");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("PASS: 62 passed, 0 failed"));
  const auto j = load_json(t / "v.json");
  CHECK(j["pass"] == true);
  CHECK(j["seed"] == 1);
  REQUIRE(j["results"].size() == 62);
  std::size_t index = 0;
  for (const auto& res : j["results"]) {
    CHECK(res["kernel"] == "welford");
    CHECK(res["op"] == (index < 13 ? "layernorm" : index < 27 ? "rmsnorm" : index < 44 ? "add_layernorm" : "add_rmsnorm"));
    ++index;
    CHECK(res["dtype"] == "f32");
    CHECK(res["status"] == "pass");
    CHECK(res["cases"] == 24);
    CHECK(res["seed"].is_number());
    CHECK(res["classes"].is_object());
  }
  CHECK(j["results"][2]["property"] == "accuracy");
  CHECK(j["results"][2]["worst"]["y_ulp"].get<double>() >= 0);
  CHECK(j["results"][5]["property"] == "batch_invariance");
  CHECK(j["results"][6]["property"] == "quantized");
  CHECK(j["results"][13]["property"] == "shape");
  CHECK(j["results"][40]["property"] == "add_rounding");
  CHECK(j["results"][61]["property"] == "add_residual_zero");
  const std::string xml = file_bytes(t / "v.xml");
  CHECK_THAT(xml, Contains("<testsuite name=\"lnorm.verify\" tests=\"62\" failures=\"0\""));
  CHECK_THAT(xml, Contains("<testcase classname=\"lnorm.verify.welford.f32\" name=\"accuracy\""));
  CHECK_THAT(xml, Contains("<testcase classname=\"lnorm.verify.welford.rmsnorm.f32\" name=\"accuracy\""));
  CHECK_THAT(xml, Contains("<testcase classname=\"lnorm.verify.welford.add_rmsnorm.f32\" name=\"add_h_then_norm\""));
  // --op layernorm: LayerNorm's alone.
  const Result ln = cli("verify --kernel welford --dtype f32 --op layernorm --quick");
  CHECK(ln.code == 0);
  CHECK_THAT(ln.out, Contains("PASS: 13 passed, 0 failed"));
}

TEST_CASE("cli verify: a budgets file without RMSNorm sections gates LayerNorm alone, and says so", "[cli][verify]") {
  TempDir t;
  // A user's budgets.toml from before RMSNorm existed: verify keeps gating what it covers.
  write_file(t / "ln.toml", "[welford.f32]\ny = { a = 16, b = 0, reason = \"r\" }\nmean = { ulp = 16, reason = \"r\" }\n"
                            "rstd = { ulp = 16, reason = \"r\" }\nexact_mean = { value = false, reason = \"r\" }\n");
  const Result r = cli("verify --kernel welford --dtype f32 --property accuracy --quick --budgets " + t / "ln.toml");
  INFO(r.out);
  CHECK(r.code == 0);
  // LayerNorm and its Add & Norm form (which falls back to LayerNorm's sections).
  CHECK_THAT(r.out, Contains("PASS: 2 passed, 0 failed"));
  CHECK_THAT(r.out, Contains("has no rmsnorm sections ([rmsnorm.<kernel>.<dtype>] or [rmsnorm.default.<dtype>]): rmsnorm not verified"));
  CHECK_THAT(r.out, Contains("has no add_rmsnorm sections ([add_rmsnorm.<kernel>.<dtype>] or [add_rmsnorm.default.<dtype>]) nor rmsnorm sections to fall back to: add_rmsnorm not verified"));
  // Asked for by name, the missing section is an error naming it.
  const Result asked = cli("verify --kernel welford --dtype f32 --op rmsnorm --quick --budgets " + t / "ln.toml");
  CHECK(asked.code == 2);
  CHECK_THAT(asked.out, Contains("no [rmsnorm.welford.f32] and no [rmsnorm.default.f32] section"));
}

TEST_CASE("cli verify: onepass's accuracy failure is expected (exit 0, xfail with its reason)", "[cli][verify]") {
  const Result r = cli("verify --kernel onepass --dtype f32 --property accuracy --quick");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("xfail"));
  CHECK_THAT(r.out, Contains("expected: "));
  CHECK_THAT(r.out, Contains("1 expected failures (0 not seen"));
}

TEST_CASE("cli verify: over budget exits 1 with the shrunk case, a reproduction line and the case as .npy", "[cli][verify]") {
  TempDir t;
  write_file(t / "b.toml", kImpossible);
  const Result r = cli("verify --kernel welford --dtype f32 --property accuracy --quick --budgets " + t / "b.toml" +
                       " --dump-failures " + t / "cases" + " --junit " + t / "v.xml");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("FAIL: welford f32 accuracy"));
  CHECK_THAT(r.out, Contains("shrunk case: f32 "));
  CHECK_THAT(r.out, Contains("reproduce: lnorm verify --kernel welford --dtype f32 --property accuracy --seed 1"));
  const std::string x = t / "cases/welford-f32-accuracy/x.npy";
  CHECK_THAT(r.out, Contains("wrote " + x));
  lnorm::io::NpyReader reader(x);
  CHECK(reader.header().descr == "<f4");
  CHECK_THAT(file_bytes(t / "v.xml"), Contains("<failure type=\"FAIL\""));
  // The same seed reproduces the same counterexample.
  const Result again = cli("verify --kernel welford --dtype f32 --property accuracy --quick --budgets " + t / "b.toml");
  const auto line = [](const std::string& out) { return out.substr(out.find("shrunk case:"), out.find('\n', out.find("shrunk case:")) - out.find("shrunk case:")); };
  CHECK(line(again.out) == line(r.out));
}

TEST_CASE("cli verify: bad usage exits 2 with one line naming the problem", "[cli][verify]") {
  TempDir t;
  expect_refused(t, "verify --kernel nope --quick", "--kernel nope: no such kernel");
  expect_refused(t, "verify --property nope --quick", "--property nope");
  expect_refused(t, "verify --dtype f8 --quick", "--dtype f8");
  expect_refused(t, "verify --budgets " + t / "missing.toml", "missing.toml: cannot open");
  write_file(t / "typo.toml", std::string(kImpossible) + "[welford.f64]\nyy = 1\n");
  expect_refused(t, "verify --budgets " + t / "typo.toml", "welford.f64.yy: unknown key");
  expect_refused(t, "verify --quick --json " + t / "no/such/dir/v.json", "--json");
}
