// Specifications for `lnorm bench` and `lnorm select` through the real executable. Only structure and
// exit codes: speed targets belong in benchmarks, never in timed unit tests.
#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace lnorm::testing;

TEST_CASE("cli bench: names KERNEL/DTYPE/RxC, memcpy and onednn rows, fractions in JSON", "[cli][bench]") {
  TempDir t;
  const Result r = cli("bench --kernel welford --shape 4x64 --dtype f32 --quick --json " + t / "b.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("4x64"));
  CHECK_THAT(r.out, Contains("% memcpy"));
  const auto j = load_json(t / "b.json");
  CHECK(j["hardware"].is_string());
  bool saw_welford = false, saw_memcpy = false, saw_onednn = false;
  for (const auto& res : j["results"]) {
    const std::string name = res["name"];
    if (name == "welford/f32/4x64") {
      saw_welford = true;
      CHECK(res["bytes_per_second"].get<double>() > 0);
      CHECK(res["fraction_of_memcpy"].get<double>() > 0);
    }
    saw_memcpy = saw_memcpy || name == "memcpy/f32/4x64";
    saw_onednn = saw_onednn || name == "onednn/f32/4x64";  // measured, or skipped with its reason
  }
  CHECK(saw_welford);
  CHECK(saw_memcpy);
  CHECK(saw_onednn);
}

TEST_CASE("cli bench --cold: evicts the caches before every call and says so", "[cli][bench]") {
  const Result r = cli("bench --kernel welford --shape 4x64 --dtype f32 --quick --cold");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("cold caches"));
}

TEST_CASE("cli select: recommends an accurate kernel, says why the others lost", "[cli][bench]") {
  TempDir t;
  const Result r = cli("select --shape 8x256 --dtype f32 --max-ulp 12 --json " + t / "s.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("recommended: "));
  CHECK_THAT(r.out, Contains("onepass"));  // listed, excluded as cautionary
  const auto j = load_json(t / "s.json");
  REQUIRE(j["kernel"].is_string());
  for (const auto& c : j["candidates"]) {
    INFO(c.dump());
    if (c["kernel"] == "naive" || c["kernel"] == "onepass") CHECK(c["status"] != "chosen");
    if (c["status"] != "chosen" && c["status"] != "slower") CHECK_FALSE(c["reason"].get<std::string>().empty());
  }
  // Nothing meets 0.1 scaled ulps: exit 1, "none".
  const Result none = cli("select --shape 8x256 --dtype f32 --max-ulp 0.1");
  CHECK(none.code == 1);
  CHECK_THAT(none.out, Contains("recommended: none"));
}

TEST_CASE("cli bench/select: bad shapes and names exit 2 naming the flag", "[cli][bench]") {
  TempDir t;
  expect_refused(t, "bench --shape 4y64", "--shape 4y64");
  expect_refused(t, "bench --shape 0x64", "--shape 0x64");
  expect_refused(t, "bench --kernel nope --shape 4x64", "--kernel nope: no such kernel");
  expect_refused(t, "select --shape 4x64 --dtype f8", "--dtype f8");
}
