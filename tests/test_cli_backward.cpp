// `lnorm reference --dir bwd` and `lnorm check --dir bwd`: the exact gradients written in the
// right shapes and dtypes, a candidate equal to them passes correctly rounded, one perturbed by an ulp of a
// small dx is caught, and the flags that do not belong to a direction are refused.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "cli_support.hpp"
#include "lnorm/npy.hpp"

using namespace lnorm;
using namespace lnorm::testing;
using Catch::Matchers::Contains;

namespace {


}  // namespace

TEST_CASE("reference in the backward direction writes dx, dgamma, dbeta, and check passes them correctly rounded (CLI)", "[cli][backward]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 6x2x16 --dist offset --offset 3").code == 0);
  REQUIRE(cli("gen --out " + t / "g.npy" + " --shape 2x16").code == 0);  // gamma over the normalized dims (axis 1 on)
  REQUIRE(cli("gen --out " + t / "dy.npy" + " --shape 6x2x16").code == 0);
  const std::string in = " --x " + t / "x.npy" + " --gamma " + t / "g.npy" + " --beta " + t / "g.npy" + " --dy " + t / "dy.npy" + " --axis 1";
  for (const char* op : {"layernorm", "rmsnorm"}) {
    INFO(op);
    const std::string p = std::string(" --op ") + op + in;
    REQUIRE(cli("reference --dir bwd" + p + " --dx " + t / "dx.npy" + " --dgamma " + t / "dg.npy" + " --dbeta " + t / "db.npy").code == 0);
    CHECK(io::NpyReader(t / "dx.npy").header().shape == std::vector<std::int64_t>{6, 2, 16});
    CHECK(io::NpyReader(t / "dg.npy").header().shape == std::vector<std::int64_t>{2, 16});  // the normalized dims (axis 1 on)
    CHECK(io::NpyReader(t / "db.npy").header().descr == "<f4");
    const Result c = cli("check --dir bwd" + p + " --dx " + t / "dx.npy" + " --dgamma " + t / "dg.npy" + " --dbeta " + t / "db.npy" +
                         " --json " + t / "c.json");
    INFO(c.out);
    CHECK(c.code == 0);
    const auto j = load_json(t / "c.json");
    CHECK(j["dir"] == "bwd");
    CHECK(j["pass"] == true);
    for (const char* g : {"dx", "dgamma", "dbeta"}) {
      CHECK(j[g]["correctly_rounded"].get<double>() == 1.0);
      CHECK(j[g]["max_ulp"].get<double>() <= 0.5);
      CHECK(j[g]["nonfinite_mismatches"] == 0);
      CHECK(j[g]["budget"].get<double>() == 8);  // --max-ulp's default, for every gradient
    }
  }
}

TEST_CASE("check in the backward direction: a dx off by many ulps fails with its index, and per-output budgets gate separately (CLI)", "[cli][backward]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 4x32 --gamma-out " + t / "g.npy").code == 0);
  REQUIRE(cli("gen --out " + t / "dy.npy" + " --shape 4x32").code == 0);
  const std::string in = " --x " + t / "x.npy" + " --gamma " + t / "g.npy" + " --dy " + t / "dy.npy";
  REQUIRE(cli("reference --dir bwd" + in + " --dx " + t / "dx.npy" + " --dgamma " + t / "dg.npy").code == 0);
  std::vector<float> dx = load_f32(t / "dx.npy");
  dx[37] = dx[37] * (1 + 0x1p-10f);  // ~8000 ulps of the element
  io::save(t / "bad.npy", "<f4", {4, 32}, dx.data());
  const Result c = cli("check --dir bwd" + in + " --dx " + t / "bad.npy" + " --dgamma " + t / "dg.npy" + " --json " + t / "c.json");
  INFO(c.out);
  CHECK(c.code == 1);
  CHECK_THAT(c.out, Contains("FAIL"));
  const auto j = load_json(t / "c.json");
  CHECK(j["dx"]["pass"] == false);
  CHECK(j["dx"]["max_ulp_index"] == 37);
  CHECK(j["dx"]["over_budget"] == 1);
  CHECK(j["dgamma"]["pass"] == true);
  CHECK(cli("check --dir bwd" + in + " --dx " + t / "bad.npy" + " --max-dx-ulp 1e9").code == 0);
}

TEST_CASE("the backward direction refuses forward flags, a missing dy, Add & Norm and a kernel without it, and backward flags need it (CLI)", "[cli][backward]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 2x8").code == 0);
  REQUIRE(cli("gen --out " + t / "dy.npy" + " --shape 2x8").code == 0);
  const std::string x = " --x " + t / "x.npy";
  expect_refused(t, "reference --dir bwd" + x + " --dx " + t / "dx.npy", "needs --dy");
  expect_refused(t, "reference --dir bwd" + x + " --dy " + t / "dy.npy" + " --y " + t / "y.npy", "--y: a forward output");
  expect_refused(t, "reference --dir bwd" + x + " --dy " + t / "dy.npy", "give at least one of --dx, --dgamma, --dbeta");
  expect_refused(t, "reference --dir bwd" + x + " --dy " + t / "dy.npy" + " --residual " + t / "dy.npy" + " --dx " + t / "dx.npy",
                 "Add & Norm's backward is not built");
  expect_refused(t, "reference" + x + " --dx " + t / "dx.npy", "--dx: needs --dir bwd");
  expect_refused(t, "reference" + x, "--y is required");
  expect_refused(t, "reference --dir sideways" + x + " --y " + t / "y.npy", "--dir sideways: expected fwd or bwd");
  expect_refused(t, "run --kernel avx2_cr --dir bwd" + x + " --dy " + t / "dy.npy" + " --dx " + t / "dx.npy",
                 "cannot run the backward here");
  // dgamma and dbeta need the parameter they are the gradient of, in reference, run and check alike.
  for (const char* cmd : {"reference --dir bwd", "run --kernel welford --dir bwd", "check --dir bwd"}) {
    INFO(cmd);
    expect_refused(t, cmd + x + " --dy " + t / "dy.npy" + " --dgamma " + t / "dg.npy", "--dgamma: needs --gamma");
    expect_refused(t, cmd + x + " --dy " + t / "dy.npy" + " --dbeta " + t / "db.npy", "--dbeta: needs --beta");
  }
  expect_refused(t, "run --kernel welford --op layernorm_bwd" + x + " --y " + t / "y.npy", "--op layernorm --dir bwd");
  expect_refused(t, "check --dir bwd" + x + " --dy " + t / "dy.npy" + " --y " + t / "x.npy", "--y: a forward flag");
  expect_refused(t, "check --dir bwd" + x + " --dy " + t / "dy.npy" + " --max-dgamma-ulp 1 --dx " + t / "x.npy",
                 "--max-dgamma-ulp: needs the candidate it gates");
}

// run --dir bwd: a kernel's gradients, gated by check --dir bwd at their documented budgets (welford's
// careful backward is correctly rounded here; naive's textbook is within its budget on these centred rows).
TEST_CASE("run --dir bwd writes a kernel's gradients, and check --dir bwd gates them (CLI)", "[cli][backward]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 130x24 --seed 3").code == 0);
  REQUIRE(cli("gen --out " + t / "dy.npy" + " --shape 130x24 --seed 4").code == 0);
  REQUIRE(cli("gen --out " + t / "g.npy" + " --shape 24 --seed 5").code == 0);
  const std::string in = " --x " + t / "x.npy" + " --dy " + t / "dy.npy" + " --gamma " + t / "g.npy" + " --beta " + t / "g.npy";
  for (const char* kernel : {"welford", "naive"}) {
    INFO(kernel);
    const std::string outs = " --dx " + t / "dx.npy" + " --dgamma " + t / "dg.npy" + " --dbeta " + t / "db.npy";
    REQUIRE(cli(std::string("run --kernel ") + kernel + " --dir bwd --threads 3" + in + outs).code == 0);
    const auto c = cli("check --dir bwd" + in + outs + " --max-ulp 8 --json " + t / "c.json");
    INFO(c.out);
    CHECK(c.code == 0);
    const auto j = load_json(t / "c.json");
    if (std::string(kernel) == "welford") {
      CHECK(j["dx"]["correctly_rounded"].get<double>() == 1.0);
      CHECK(j["dgamma"]["correctly_rounded"].get<double>() == 1.0);
    }
  }
}

TEST_CASE("verify --dir bwd: a failing backward outcome's reproduce line is a command the CLI runs (CLI)", "[cli][backward]") {
  TempDir t;
  // A 0-ulp dx budget fails every kernel's accuracy; the reproduce line must ask the op as --op N --dir bwd.
  const std::string budgets = t / "b.toml";
  {
    std::FILE* f = std::fopen(budgets.c_str(), "w");
    REQUIRE(f);
    std::fputs("[rmsnorm_bwd.welford.f32]\ndx = { a = 0, b = 0, reason = \"test\" }\ndgamma = { a = 8, b = 0, reason = \"test\" }\n"
               "dbeta = { ulp = 8, reason = \"test\" }\n",
               f);
    std::fclose(f);
  }
  const auto r = cli("verify --op rmsnorm --dir bwd --kernel welford --dtype f32 --property accuracy --quick --cases 4 --budgets " + budgets +
                     " --json " + t / "v.json");
  INFO(r.out);
  REQUIRE(r.code == 1);
  const std::string repro = load_json(t / "v.json")["results"][0]["reproduce"].get<std::string>();
  CHECK_THAT(repro, Contains(" --op rmsnorm --dir bwd "));
  CHECK_THAT(repro, !Contains("rmsnorm_bwd"));
  // The same command (lnorm's own name stripped) runs: it fails the same way, not on its flags (exit 2).
  REQUIRE(repro.rfind("lnorm verify", 0) == 0);
  const auto again = cli(repro.substr(std::strlen("lnorm ")) + " --budgets " + budgets);
  INFO(again.out);
  CHECK(again.code == 1);
}
