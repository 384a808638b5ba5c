// `lnorm check --recipe` on the committed examples (examples/recipes, torch's own outputs): a kernel that
// follows its recipe is its answer rounded once (0 scaled ulps: the 16-bit rounding is free, docs/verify.md) and
// ~1.3 bf16 ulps (5.6e4 f32 ulps) from the exact one; a kernel that skips a rounding the recipe has is far from the
// recipe. With a recipe, the recipe gates y; the exact answer is reported, and gates too with --max-ulp.
// Numbers from examples/recipes/README.md.
#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace lnorm::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kDir = LNORM_RECIPE_EXAMPLES;
std::string in(const char* f) { return kDir + "/" + f; }
const std::string kRms = " --op rmsnorm --dtype bf16 --eps 1e-6 --x " + in("x.npy");

}  // namespace

TEST_CASE("check --recipe llama: a Llama-style bf16 RMSNorm is its recipe's answer, not the exact one (CLI)", "[cli][recipe]") {
  TempDir t;
  const Result r = cli("check" + kRms + " --gamma " + in("w.npy") + " --y " + in("y_llama.npy") + " --recipe llama --json " + (t / "r.json"));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("y is 0 ulp from the llama recipe, 5.59e+04 scaled ulp from the exact rmsnorm"));
  CHECK_THAT(r.out, Contains("(budget not gated: the recipe is; --max-ulp gates it too)"));
  const auto j = load_json(t / "r.json");
  CHECK(j["recipe"]["name"] == "llama");
  CHECK(j["recipe"]["max_ulp"].get<double>() <= 0.5);
  CHECK(j["recipe"]["correctly_rounded"].get<double>() == 1.0);
  CHECK(j["recipe"]["pass"] == true);
  CHECK(j["max_ulp"].get<double>() > 1e4);  // the intermediate cast costs up to a bf16 ulp against the exact answer
  CHECK(j["correctly_rounded"].get<double>() < 0.8);
  CHECK(j["y_pass"] == false);  // past 8 + kappa f32 ulps of the exact answer: reported ...
  CHECK(j["pass"] == true);     // ... not gated, since the recipe is
  // Budgets may be set against either: --max-ulp gates the exact answer as well.
  CHECK(cli("check" + kRms + " --gamma " + in("w.npy") + " --y " + in("y_llama.npy") + " --recipe llama --max-ulp 8").code == 1);
}

TEST_CASE("check --recipe llama: an RMSNorm that skips the intermediate cast is over 0.5 ulp from the recipe (CLI)", "[cli][recipe]") {
  TempDir t;
  const Result r = cli("check" + kRms + " --gamma " + in("w.npy") + " --y " + in("y_no_cast.npy") + " --recipe llama --json " + (t / "r.json"));
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("recipe llama max 4.92e+04 ulp (budget 0.5)"));
  const auto j = load_json(t / "r.json");
  CHECK(j["recipe"]["max_ulp"].get<double>() > 1e4);
  CHECK(j["recipe"]["pass"] == false);
  CHECK(j["max_ulp"].get<double>() == 0);  // it is the exact answer, correctly rounded
  CHECK(j["y_pass"] == true);
  CHECK(j["pass"] == false);
}

TEST_CASE("check --recipe gemma: GemmaRMSNorm's zero-centred weight, one rounding (CLI)", "[cli][recipe]") {
  const std::string g = "check" + kRms + " --gamma " + in("w_centred.npy") + " --y " + in("y_gemma.npy");
  const Result r = cli(g + " --recipe gemma");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("weight 1 + gamma"));  // gemma sets the offset
  CHECK_THAT(r.out, Contains("y is 0 ulp from the gemma recipe, 0 scaled ulp from the exact rmsnorm"));
  CHECK(cli(g + " --gamma-offset 1 --recipe llama").code == 1);  // it is not the llama recipe
}

TEST_CASE("check --recipe unrounded_h: statistics of the rounded h (vLLM) or of the f32 sum, told apart (CLI)", "[cli][recipe]") {
  const std::string add = "check" + kRms + " --gamma " + in("w.npy") + " --residual " + in("residual.npy") + " --h " + in("h.npy");
  CHECK(cli(add + " --y " + in("y_add_llama.npy") + " --recipe llama").code == 0);
  CHECK(cli(add + " --y " + in("y_add_llama.npy") + " --recipe llama+unrounded_h").code == 1);
  const Result r = cli(add + " --y " + in("y_add_llama_f32_sum.npy") + " --recipe llama+unrounded_h");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("y is 0 ulp from the llama+unrounded_h recipe"));
  CHECK(cli(add + " --y " + in("y_add_llama_f32_sum.npy") + " --recipe llama").code == 1);
}

TEST_CASE("check --recipe: a recipe where it does not apply is a usage error naming why (CLI)", "[cli][recipe]") {
  TempDir t;
  const std::string base = "check --dtype bf16 --eps 1e-6 --x " + in("x.npy") + " --gamma " + in("w.npy") + " --y " +
                           in("y_llama.npy") + " --json " + (t / "r.json");
  // layernorm: there is no normalized value before the weight multiply for llama to round
  expect_refused(t, base + " --recipe llama", "llama is an RMSNorm recipe");
  expect_refused(t, base + " --op rmsnorm --recipe lama", "unknown recipe 'lama'");
  expect_refused(t, base + " --op rmsnorm --max-recipe-ulp 1", "--max-recipe-ulp: needs --recipe");
  expect_refused(t, base + " --op rmsnorm --recipe unrounded_h", "unrounded_h is an Add & Norm recipe");
}
