// Specifications for `--plugin PATH.so`: users' kernels through the C ABI of lnorm/plugin.h, beside
// ours in list, run, verify, bench and select; load failures, ABI mismatches and crashes named.
// The plugins: examples/plugin's demo (correct) and demo_buggy (eps outside the sqrt), built in-tree,
// and tests/plugins/misbehaving.cpp (a crashing kernel, a picky one, wrong ABI versions, no entry).
#include <set>

#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace lnorm::testing;

namespace {

const std::string kDemo = DEMO_PLUGIN, kBuggy = DEMO_BUGGY_PLUGIN, kCrashy = CRASHY_PLUGIN;

// The statuses verify's JSON gives each property of `kernel`.
std::map<std::string, std::string> statuses(const nlohmann::json& j, const std::string& kernel) {
  std::map<std::string, std::string> out;
  for (const auto& r : j["results"])
    if (r["kernel"] == kernel) out[r["property"]] = r["status"];
  return out;
}

}  // namespace

TEST_CASE("cli plugin list: plugin kernels come after ours, prefixed by the plugin's name", "[cli][plugin]") {
  TempDir t;
  const Result r = cli("list --json --plugin " + kDemo + " --plugin " + kBuggy + " > " + t / "l.json");
  REQUIRE(r.code == 0);
  const auto j = load_json(t / "l.json");
  std::vector<std::string> names;
  for (const auto& k : j) names.push_back(k["name"]);
  REQUIRE(names.size() >= 3);
  CHECK(names[names.size() - 2] == "demo:two_pass");
  CHECK(names.back() == "demo_buggy:two_pass");
  CHECK(j[names.size() - 2]["plugin"] == kDemo);
  CHECK(j[0]["plugin"].is_null());  // a built-in kernel
  CHECK(j[names.size() - 2]["available"] == true);
}

TEST_CASE("cli plugin run: the plugin kernel's output passes lnorm check", "[cli][plugin]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 16x300 --dist offset --offset 100 --gamma-out " + t / "g.npy" +
              " --beta-out " + t / "b.npy").code == 0);
  const std::string in = " --x " + t / "x.npy" + " --gamma " + t / "g.npy" + " --beta " + t / "b.npy";
  const Result run = cli("run --plugin " + kDemo + " --kernel demo:two_pass" + in + " --y " + t / "y.npy");
  INFO(run.out);
  REQUIRE(run.code == 0);
  const Result check = cli("check" + in + " --y " + t / "y.npy");
  INFO(check.out);
  CHECK(check.code == 0);
}

TEST_CASE("cli plugin verify: the correct kernel passes on the default budgets, the buggy twin fails eps_edges",
          "[cli][plugin][verify]") {
  TempDir t;
  const Result good = cli("verify --quick --plugin " + kDemo + " --kernel plugins --json " + t / "good.json");
  INFO(good.out);
  CHECK(good.code == 0);
  const auto gs = statuses(load_json(t / "good.json"), "demo:two_pass");
  CHECK(gs.size() == 12);  // every LayerNorm property, f32
  for (const auto& [property, status] : gs) {
    INFO(property);
    // The example's source leaves ops unset (written for ABI version 1): a LayerNorm kernel that is not
    // offered f32 parameters or an offset, so the params property is skipped with that reason.
    CHECK(status == (property == "params" ? "skipped" : "pass"));
  }

  const Result bad = cli("verify --quick --plugin " + kBuggy + " --kernel demo_buggy:two_pass --json " + t / "bad.json");
  INFO(bad.out);
  CHECK(bad.code == 1);
  const auto bs = statuses(load_json(t / "bad.json"), "demo_buggy:two_pass");
  CHECK(bs.at("eps_edges") == "FAIL");
  CHECK(bs.at("shape") == "pass");  // the bug is in the arithmetic, not the plumbing
  CHECK_THAT(bad.out, Contains("--plugin " + kBuggy));  // the reproduce line loads the plugin
}

TEST_CASE("cli plugin verify --budgets: a section with the kernel's full name replaces [default]", "[cli][plugin][verify]") {
  TempDir t;
  // Budgets far too tight for any kernel: 0 ulps, so accuracy must fail, and the section is named.
  std::ofstream(t / "tight.toml") << "[\"demo:two_pass\".f32]\n"
                                     "y = { a = 0, b = 0, reason = \"test: nothing allowed\" }\n"
                                     "mean = { ulp = 0, reason = \"test\" }\n"
                                     "rstd = { ulp = 0, reason = \"test\" }\n"
                                     "exact_mean = { value = true, reason = \"test\" }\n"
                                     "[default.f32]\n"
                                     "y = { a = 8, b = 1, reason = \"test\" }\n"
                                     "mean = { ulp = 8, reason = \"test\" }\n"
                                     "rstd = { ulp = 8, reason = \"test\" }\n"
                                     "exact_mean = { value = true, reason = \"test\" }\n";
  const Result r = cli("verify --quick --plugin " + kDemo + " --kernel demo:two_pass --property accuracy --budgets " +
                       t / "tight.toml" + " --json " + t / "v.json");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(statuses(load_json(t / "v.json"), "demo:two_pass").at("accuracy") == "FAIL");
}

TEST_CASE("cli plugin verify: a crashing kernel fails with its name and the signal, and the run goes on",
          "[cli][plugin][verify]") {
  TempDir t;
  const Result r = cli("verify --quick --plugin " + kCrashy + " --kernel crashy:segv --kernel welford --dtype f32 "
                       "--property shape --property accuracy --json " + t / "v.json");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("plugin kernel crashy:segv crashed"));
  const auto j = load_json(t / "v.json");
  const auto segv = statuses(j, "crashy:segv");
  CHECK(segv.at("shape") == "FAIL");
  CHECK(segv.at("accuracy") == "FAIL");  // the next property ran (and crashed) too
  CHECK(statuses(j, "welford").at("accuracy") == "pass");  // and so did the next kernel
  for (const auto& res : j["results"])
    if (res["kernel"] == "crashy:segv") CHECK_THAT(res["message"].get<std::string>(), Contains("crashed"));
}

TEST_CASE("cli plugin run: a crashing kernel is named, exit 1, no output file", "[cli][plugin]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 4x16").code == 0);
  const Result r = cli("run --plugin " + kCrashy + " --kernel crashy:segv --x " + t / "x.npy" + " --y " + t / "y.npy");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("lnorm: plugin kernel crashy:segv crashed: SIGSEGV"));
  CHECK_FALSE(fs::exists(t / "y.npy"));
}

TEST_CASE("cli plugin run: the plugin's why_not reason is passed on (exit 2)", "[cli][plugin]") {
  TempDir t;
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 4x2").code == 0);
  expect_refused(t, "run --plugin " + kCrashy + " --kernel crashy:picky --x " + t / "x.npy" + " --y " + t / "y.npy",
                 "needs rows of at least 4 elements, got 2");
}

TEST_CASE("cli plugin: load failures name the file and the problem (exit 2)", "[cli][plugin]") {
  TempDir t;
  expect_refused(t, "list --plugin " + t / "missing.so", t / "missing.so");
  expect_refused(t, "list --plugin " + t / "missing.so", "cannot load");
  std::ofstream(t / "text.so") << "not a shared library\n";
  expect_refused(t, "list --plugin " + t / "text.so", "cannot load");
  expect_refused(t, "list --plugin " + std::string(NO_ENTRY_PLUGIN), "no symbol lnorm_plugin_entry");
  expect_refused(t, "list --plugin " + std::string(OLD_ABI_PLUGIN),
                 "plugin ABI version 0, but this lnorm reads versions 1 to 5");
  expect_refused(t, "list --plugin " + std::string(NEW_ABI_PLUGIN),
                 "plugin ABI version 6, but this lnorm reads versions 1 to 5");
  expect_refused(t, "list --plugin " + std::string(OLD_ABI_PLUGIN), OLD_ABI_PLUGIN);
  expect_refused(t, "list --plugin " + kDemo + " --plugin " + kDemo, "demo:two_pass is already loaded");
  expect_refused(t, "verify --kernel plugins", "no --plugin was given");
}

TEST_CASE("cli plugin bench and select: plugin kernels measured beside ours and the copy ceiling", "[cli][plugin][bench]") {
  TempDir t;
  const Result b = cli("bench --plugin " + kDemo + " --kernel demo:two_pass --kernel welford --shape 4x256 --dtype f32 "
                       "--quick --json " + t / "b.json");
  INFO(b.out);
  REQUIRE(b.code == 0);
  CHECK_THAT(b.out, Contains("demo:two_pass"));
  bool saw_plugin = false, saw_welford = false;
  const auto bj = load_json(t / "b.json");
  for (const auto& res : bj["results"]) {
    if (res["name"] == "demo:two_pass/f32/4x256") {
      saw_plugin = true;
      CHECK(res["fraction_of_copy"].get<double>() > 0);
    }
    saw_welford = saw_welford || res["name"] == "welford/f32/4x256";
  }
  CHECK(saw_plugin);
  CHECK(saw_welford);

  const Result s = cli("select --plugin " + kDemo + " --shape 8x256 --dtype f32 --json " + t / "s.json");
  INFO(s.out);
  REQUIRE(s.code == 0);
  bool candidate = false;
  const auto sj = load_json(t / "s.json");
  for (const auto& c : sj["candidates"]) {
    if (c["kernel"] != "demo:two_pass") continue;
    candidate = true;
    CHECK((c["status"] == "chosen" || c["status"] == "slower"));  // measured, on the default budget
    CHECK(c["gb_per_second"].get<double>() > 0);
  }
  CHECK(candidate);
}

TEST_CASE("cli plugin: a version-1 binary still loads and is verified as a LayerNorm kernel", "[cli][plugin]") {
  // test_plugin_v1 is examples/plugin/two_pass.cpp built against the frozen version-1 header
  // (tests/plugins/v1): abi_version 1 and version 1's kernel struct in the binary.
  TempDir t;
  const std::string v1 = V1_PLUGIN;
  const Result l = cli("list --json --plugin " + v1);
  INFO(l.out);
  REQUIRE(l.code == 0);
  bool found = false;
  for (const auto& k : nlohmann::json::parse(l.out)) {
    if (k["name"] != "demo:two_pass") continue;
    found = true;
    CHECK(k["ops"] == nlohmann::json::array({"layernorm"}));
  }
  CHECK(found);
  const Result v = cli("verify --quick --plugin " + v1 + " --kernel plugins --json " + t / "v.json");
  INFO(v.out);
  CHECK(v.code == 0);
  bool params_skipped = false;
  const nlohmann::json vj = load_json(t / "v.json");
  for (const auto& o : vj["results"]) {
    CHECK(o["op"] == "layernorm");  // a version-1 kernel implements LayerNorm only
    if (o["property"] == "params") {
      params_skipped = o["status"] == "skipped" &&
                       o["message"] == "a version-1 plugin kernel takes gamma/beta in x's dtype without an offset";
    } else {
      CHECK(o["status"] == "pass");
    }
  }
  CHECK(params_skipped);
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 4x16 --gamma-out " + t / "g.npy").code == 0);
  expect_refused(t, "run --plugin " + v1 + " --kernel demo:two_pass --op rmsnorm --x " + t / "x.npy" + " --y " + t / "y.npy",
                 "demo:two_pass does not implement rmsnorm");
  expect_refused(t, "run --plugin " + v1 + " --kernel demo:two_pass --gamma-offset 1 --gamma " + t / "g.npy" + " --x " +
                        t / "x.npy" + " --y " + t / "y.npy",
                 "a version-1 plugin kernel takes gamma/beta in x's dtype without an offset");
}

TEST_CASE("cli plugin: a version-2 RMSNorm kernel (examples/plugin/rms_norm.cpp, a version-2 binary) is verified as one", "[cli][plugin]") {
  TempDir t;
  const std::string rms = RMS_PLUGIN;
  const Result v = cli("verify --quick --plugin " + rms + " --kernel plugins --json " + t / "v.json");
  INFO(v.out);
  CHECK(v.code == 0);
  int rms_properties = 0;
  const nlohmann::json vj = load_json(t / "v.json");
  for (const auto& o : vj["results"]) {
    CHECK(o["op"] == "rmsnorm");  // the only op it declares
    CHECK(o["status"] == "pass");
    ++rms_properties;
  }
  CHECK(rms_properties == 13);  // RMSNorm's properties, oddness and scale invariance among them
  // run and check through the CLI, with Gemma's offset.
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 8x64 --gamma-out " + t / "g.npy").code == 0);
  const std::string common = " --op rmsnorm --gamma-offset 1 --x " + t / "x.npy" + " --gamma " + t / "g.npy";
  REQUIRE(cli("run --plugin " + rms + " --kernel rms:two_pass_rms" + common + " --y " + t / "y.npy").code == 0);
  const Result c = cli("check" + common + " --y " + t / "y.npy" + " --max-ulp 8 --max-ulp-per-kappa 0");
  INFO(c.out);
  CHECK(c.code == 0);
}

TEST_CASE("cli plugin: a version-3 Add & Norm kernel (examples/plugin/add_rms_norm.cpp): h gated bit for bit, y by the laws", "[cli][plugin]") {
  TempDir t;
  const std::string add = ADD_RMS_PLUGIN;
  const Result l = cli("list --json --plugin " + add);
  REQUIRE(l.code == 0);
  bool listed = false;
  for (const auto& k : nlohmann::json::parse(l.out)) {
    if (k["name"] != "addrms:add_rms") continue;
    listed = true;
    CHECK(k["ops"] == nlohmann::json::array({"rmsnorm", "add_rmsnorm"}));
  }
  CHECK(listed);
  const Result v = cli("verify --quick --cases 12 --plugin " + add + " --kernel plugins --op add_rmsnorm --json " + t / "v.json");
  INFO(v.out);
  CHECK(v.code == 0);
  bool h_law = false;
  const nlohmann::json vj = load_json(t / "v.json");
  for (const auto& o : vj["results"]) {
    CHECK(o["op"] == "add_rmsnorm");
    CHECK(o["status"] == "pass");
    h_law = h_law || o["property"] == "add_rounding";
  }
  CHECK(h_law);
  // run writes h; check gates it and y.
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 8x64 --gamma-out " + t / "g.npy").code == 0);
  REQUIRE(cli("gen --out " + t / "r.npy" + " --shape 8x64 --dist offset --offset 3").code == 0);
  const std::string common = " --op rmsnorm --x " + t / "x.npy" + " --residual " + t / "r.npy" + " --gamma " + t / "g.npy";
  REQUIRE(cli("run --plugin " + add + " --kernel addrms:add_rms" + common + " --y " + t / "y.npy" + " --h " + t / "h.npy").code == 0);
  const Result c = cli("check" + common + " --y " + t / "y.npy" + " --h " + t / "h.npy" + " --max-ulp 8 --max-h-ulp 0.5");
  INFO(c.out);
  CHECK(c.code == 0);
  // h: one f32 addition is the sum rounded once
  CHECK_THAT(c.out, Contains("h max 0.5 ulp (budget 0.5) correctly rounded 100.00%"));
}

TEST_CASE("cli plugin: a version-4 backward kernel (examples/plugin/layer_norm_backward.cpp) under the backward's laws, and its planted bug caught",
          "[cli][plugin]") {
  TempDir t;
  const std::string bwd = BWD_PLUGIN;
  const Result l = cli("list --json --plugin " + bwd);
  REQUIRE(l.code == 0);
  int listed = 0;
  for (const auto& k : nlohmann::json::parse(l.out)) {
    if (k["name"] == "bwd:two_pass") {
      ++listed;
      CHECK(k["ops"] == nlohmann::json::array({"layernorm_bwd", "rmsnorm_bwd"}));
    }
    if (k["name"] == "bwd:no_mean_g") {
      ++listed;
      CHECK(k["ops"] == nlohmann::json::array({"layernorm_bwd"}));
    }
  }
  CHECK(listed == 2);
  // The correct kernel: every backward property of both norms (the saved statistics reach it; it recomputes).
  const Result v = cli("verify --quick --cases 12 --dir bwd --plugin " + bwd + " --kernel bwd:two_pass --json " + t / "v.json");
  INFO(v.out);
  CHECK(v.code == 0);
  std::set<std::string> ops;
  const nlohmann::json vj = load_json(t / "v.json");  // held: a range-for over a temporary's member dangles
  for (const auto& o : vj["results"]) {
    ops.insert(o["op"].get<std::string>());
    CHECK((o["status"] == "pass" || o["status"] == "skipped"));
  }
  CHECK(ops == std::set<std::string>{"layernorm_bwd", "rmsnorm_bwd"});
  // The planted bug (no mean(g)): sum_i dx_i = 0 catches it.
  const Result b = cli("verify --quick --cases 12 --dir bwd --plugin " + bwd + " --kernel bwd:no_mean_g --property dx_sum_zero --json " +
                       t / "b.json");
  CHECK(b.code == 1);
  CHECK(statuses(load_json(t / "b.json"), "bwd:no_mean_g")["dx_sum_zero"] == "FAIL");
  // run --dir bwd writes the gradients; check --dir bwd gates them.
  REQUIRE(cli("gen --out " + t / "x.npy" + " --shape 8x64 --gamma-out " + t / "g.npy").code == 0);
  REQUIRE(cli("gen --out " + t / "dy.npy" + " --shape 8x64 --seed 9").code == 0);
  const std::string common = " --dir bwd --x " + t / "x.npy" + " --gamma " + t / "g.npy" + " --dy " + t / "dy.npy";
  const std::string outs = " --dx " + t / "dx.npy" + " --dgamma " + t / "dg.npy";
  REQUIRE(cli("run --plugin " + bwd + " --kernel bwd:two_pass" + common + outs).code == 0);
  const Result c = cli("check" + common + outs);
  INFO(c.out);
  CHECK(c.code == 0);
}

TEST_CASE("cli plugin: a version-5 kernel declares its ops as parts, and an op this lnorm does not know is refused by name",
          "[cli][plugin]") {
  TempDir t;
  const Result l = cli("list --json --plugin " + std::string(DECL_PLUGIN));
  REQUIRE(l.code == 0);
  bool listed = false;
  for (const auto& k : nlohmann::json::parse(l.out)) {
    if (k["name"] != "decl:two_pass") continue;
    listed = true;
    CHECK(k["ops"] == nlohmann::json::array({"layernorm"}));  // the declaration, not the (zero) ops mask
  }
  CHECK(listed);
  const Result v = cli("verify --quick --plugin " + std::string(DECL_PLUGIN) + " --kernel decl:two_pass --json " + t / "v.json");
  INFO(v.out);
  CHECK(v.code == 0);
  const nlohmann::json vj = load_json(t / "v.json");
  std::size_t passed = 0;
  for (const auto& o : vj["results"]) passed += o["status"] == "pass";
  CHECK(passed > 0);
  expect_refused(t, "list --plugin " + std::string(UNKNOWN_OP_PLUGIN),
                 "declares the op 'rmsnorm_nvfp4' (norm rmsnorm, prologue none, epilogue 7, direction fwd), which this "
                 "lnorm does not know");
}

TEST_CASE("cli plugin: a version-5 kernel that declares the quantized epilogue is listed, run and gated, and a truncating one fails",
          "[cli][plugin][quant]") {
  TempDir t;
  const Result l = cli("list --json --plugin " + std::string(QUANT_PLUGIN));
  REQUIRE(l.code == 0);
  bool listed = false;
  for (const auto& k : nlohmann::json::parse(l.out)) {
    if (k["name"] != "quant:two_pass") continue;
    listed = true;
    CHECK_FALSE(k["quantized"].is_null());  // declared: {LAYERNORM, NONE, QUANTIZED, FWD}
  }
  CHECK(listed);
  const std::string common = " --kernel quant:two_pass --property quantized --op layernorm --dtype f32 --seed 1";
  const Result v = cli("verify --quick --plugin " + std::string(QUANT_PLUGIN) + common + " --json " + t / "v.json");
  INFO(v.out);
  CHECK(v.code == 0);
  std::size_t passed = 0;
  const nlohmann::json vj = load_json(t / "v.json");
  for (const auto& o : vj["results"]) passed += o["status"] == "pass";
  CHECK(passed > 0);
  const Result bad = cli("verify --quick --plugin " + std::string(QUANT_TRUNCATING_PLUGIN) + common);
  INFO(bad.out);
  CHECK(bad.code == 1);
  CHECK(bad.out.find("quanta") != std::string::npos);  // the metric's words: q far from y*/s
  // A kernel that writes one format and scaling (static FP8) is checked on that one, every case.
  const Result st = cli("verify --quick --plugin " + std::string(QUANT_STATIC_PLUGIN) + common + " --json " + t / "s.json");
  INFO(st.out);
  CHECK(st.code == 0);
  const nlohmann::json sj = load_json(t / "s.json");
  CHECK(sj["results"][0]["status"] == "pass");
}

TEST_CASE("cli plugin: quantizer bugs inside q's budget (ties away, a reciprocal scale, an MX exponent of a rounded amax) fail "
          "verify at seeds 1-5 through the y the kernel hands out, and its correct build passes",
          "[cli][plugin][quant]") {
  const std::string common = " --kernel quant:two_pass --property quantized --op layernorm --dtype f32";
  for (int seed = 1; seed <= 5; ++seed) {
    const std::string s = " --seed " + std::to_string(seed);
    const Result ok = cli("verify --quick --plugin " + std::string(QUANT_PLUGIN) + common + s);
    INFO(ok.out);
    CHECK(ok.code == 0);
    for (const char* bad_plugin : {QUANT_TIES_AWAY_PLUGIN, QUANT_SCALE_RECIPROCAL_PLUGIN, QUANT_MX_BF16_AMAX_PLUGIN}) {
      const Result bad = cli("verify --quick --plugin " + std::string(bad_plugin) + common + s);
      INFO(bad_plugin << " seed " << seed << "\n" << bad.out);
      CHECK(bad.code == 1);
      // The part that sees it: the contract applied to the y it handed out (q's budget passes these).
      CHECK(bad.out.find("not the contract applied to the y it was handed (f32_y)") != std::string::npos);
    }
  }
}
