// Specifications for `lnorm bench` and `lnorm select` through the real executable. Only structure and
// exit codes: speed targets belong in benchmarks, never in timed unit tests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli_support.hpp"

using namespace lnorm::testing;

TEST_CASE("cli bench: names KERNEL/DTYPE/RxC, copy and onednn rows, the copy ceiling's winner in JSON", "[cli][bench]") {
  TempDir t;
  const Result r = cli("bench --kernel welford --shape 4x64 --dtype f32 --quick --json " + t / "b.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("4x64"));
  CHECK_THAT(r.out, Contains("% of copy"));
  CHECK_THAT(r.out, !Contains("% memcpy"));
  const auto j = load_json(t / "b.json");
  CHECK(j["hardware"].is_string());
  bool saw_welford = false, saw_memcpy = false, saw_onednn = false;
  for (const auto& res : j["results"]) {
    const std::string name = res["name"];
    if (name == "welford/f32/4x64") {
      saw_welford = true;
      CHECK(res["bytes_per_second"].get<double>() > 0);
      CHECK(res["fraction_of_copy"].get<double>() > 0);
      CHECK(res["ceiling_suspect"].is_boolean());
      // The ceiling is the median over rounds of each round's fastest measured copy, and it is named.
      const std::string winner = res["copy"]["winner"];
      std::vector<double> fastest;  // per round
      for (const auto& c : j["results"]) {
        const std::string n = c["name"];
        if (n.size() > 9 && n.substr(n.size() - 9) == "/f32/4x64" && !c.contains("skipped") &&
            (c["kernel"] == "memcpy" || c["kernel"] == "avx2_copy" || c["kernel"] == "avx2_stream" ||
             c["kernel"] == "avx512_copy" || c["kernel"] == "avx512_stream")) {  // the 512-bit copies win at times
          const auto rounds = c["round_bytes_per_second"].get<std::vector<double>>();
          if (fastest.empty()) fastest.assign(rounds.size(), 0.0);
          REQUIRE(rounds.size() == fastest.size());
          for (std::size_t i = 0; i < rounds.size(); ++i) fastest[i] = std::max(fastest[i], rounds[i]);
        }
      }
      REQUIRE(fastest.size() % 2 == 1);  // --quick: 3 rounds, so the median is one of them
      std::sort(fastest.begin(), fastest.end());
      CHECK(res["copy"]["bytes_per_second"].get<double>() == fastest[fastest.size() / 2]);
      CHECK_THAT(r.out, Contains("copy " + winner));
    }
    saw_memcpy = saw_memcpy || name == "memcpy/f32/4x64";
    saw_onednn = saw_onednn || name == "onednn/f32/4x64";  // measured, or skipped with its reason
  }
  CHECK(saw_welford);
  CHECK(saw_memcpy);
  CHECK(saw_onednn);
}

TEST_CASE("cli bench: what cannot run here is reported once per run, not per shape and dtype", "[cli][bench]") {
  // oneDNN never runs f16: with it built, one line names the reason; without it, one line says so.
  const Result r = cli("bench --kernel welford --shape 4x64 --shape 8x64 --dtype f16 --dtype f32 --quick");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto count = [&](const std::string& what) {
    int n = 0;
    for (std::size_t at = r.out.find(what); at != std::string::npos; at = r.out.find(what, at + 1)) ++n;
    return n;
  };
  if (count("oneDNN baseline: not built") == 1) {
    CHECK(count("onednn") == 0);
  } else {
    CHECK(count("oneDNN's layer norm takes f32 and bf16 only") == 1);
    CHECK(count("skipped:") == 0);
  }
}

TEST_CASE("cli bench: the 512-bit copies are in the ceiling where the CPU has AVX-512, else 'not run here' once", "[cli][bench]") {
  TempDir t;
  const Result r = cli("bench --kernel welford --shape 4x64 --shape 8x64 --dtype f32 --dtype bf16 --quick --json " +
                       t / "b.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto count = [&](const std::string& what) {
    int n = 0;
    for (std::size_t at = r.out.find(what); at != std::string::npos; at = r.out.find(what, at + 1)) ++n;
    return n;
  };
  const nlohmann::json j = load_json(t / "b.json");
  __builtin_cpu_init();
  for (const char* copy : {"avx512_copy", "avx512_stream"}) {
    int measured = 0;
    for (const auto& e : j.at("results"))
      if (e.at("kernel") == copy && !e.contains("skipped")) ++measured;
    if (__builtin_cpu_supports("avx512f")) {
      CHECK(measured == 4);  // 2 shapes x 2 dtypes, each a candidate for the ceiling
      // The text names them too: one "copies measured" line per shape and dtype lists every copy that ran.
      CHECK(count(std::string(", ") + copy + " ") == 4);
      CHECK(count("    copies measured: memcpy ") == 4);
    } else {
      CHECK(measured == 0);
      CHECK(count(std::string("  ") + copy + " (f32, bf16): needs AVX-512 F (this CPU lacks it)") == 1);
    }
  }
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
  CHECK_THAT(r.out, Contains("copy"));
  const auto j = load_json(t / "s.json");
  REQUIRE(j["kernel"].is_string());
  CHECK(j["copy"]["winner"].is_string());  // the copy ceiling beside the candidates, named
  CHECK(j["threads"] == 1);
  for (const auto& c : j["candidates"]) {
    INFO(c.dump());
    if (c["kernel"] == "naive" || c["kernel"] == "onepass") CHECK(c["status"] != "chosen");
    if (c["status"] != "chosen" && c["status"] != "slower") CHECK_FALSE(c["reason"].get<std::string>().empty());
  }
  // --threads: the kernels and the copy ceiling at that thread count.
  const Result two = cli("select --shape 8x256 --dtype f32 --threads 2 --json " + t / "s2.json");
  INFO(two.out);
  CHECK(two.code == 0);
  CHECK(load_json(t / "s2.json")["threads"] == 2);
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

TEST_CASE("cli bench --op rmsnorm: the RMSNorm kernels beside the copy, and oneDNN says why it cannot run", "[cli][bench]") {
  TempDir t;
  const Result r = cli("bench --op rmsnorm --kernel welford --kernel onepass --shape 4x64 --dtype f32 --quick --json " +
                       t / "b.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("4x64 rmsnorm (GB/s of x read + y written + gamma;"));
  const nlohmann::json j = load_json(t / "b.json");
  bool welford = false;
  for (const auto& e : j.at("results")) {
    if (e.at("kernel") == "welford") {
      welford = true;
      CHECK(e.at("op") == "rmsnorm");
      CHECK(e.at("name") == "welford/rmsnorm/f32/4x64");
      CHECK_FALSE(e.contains("skipped"));
    }
    CHECK(e.at("kernel") != "onepass");  // a LayerNorm-only kernel is not an RMSNorm entry
    if (e.at("kernel") == "onednn") CHECK(e.contains("skipped"));
  }
  CHECK(welford);
}

TEST_CASE("cli bench --op add_rmsnorm: the fused kernels against the copy of x, residual, h and y bytes", "[cli][bench]") {
  TempDir t;
  const Result r = cli("bench --op add_rmsnorm --kernel welford --shape 4x64 --dtype f32 --quick --json " + t / "b.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("4x64 add_rmsnorm (GB/s of x + residual read, h + y written + gamma;"));
  CHECK_THAT(r.out, Contains("copy = fastest copy of x to y and residual to h"));
  const nlohmann::json j = load_json(t / "b.json");
  bool welford = false, four_stream_copy = false;
  for (const auto& e : j.at("results")) {
    if (e.at("name") == "memcpy/add/f32/4x64") four_stream_copy = true;
    CHECK(e.at("kernel") != "onednn");  // no fused baseline: oneDNN has no residual add
    if (e.at("kernel") != "welford") continue;
    welford = true;
    CHECK(e.at("name") == "welford/add_rmsnorm/f32/4x64");
    CHECK(e.at("copy").at("bytes_per_second").get<double>() > 0);
    CHECK(e.at("fraction_of_copy").get<double>() > 0);
  }
  CHECK(welford);
  CHECK(four_stream_copy);
}

TEST_CASE("cli select --op rmsnorm: recommends among the RMSNorm kernels on their RMSNorm budgets", "[cli][bench]") {
  TempDir t;
  const Result r = cli("select --op rmsnorm --shape 8x256 --dtype f32 --max-ulp 1 --json " + t / "s.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = load_json(t / "s.json");
  CHECK(j.at("op") == "rmsnorm");
  for (const auto& c : j.at("candidates")) CHECK(c.at("kernel") != "onepass");
  CHECK_THAT(r.out, Contains("recommended: "));
}


TEST_CASE("cli select --op add_rmsnorm: recommends among the fused kernels against the four-stream copy", "[cli][bench]") {
  TempDir t;
  const Result r = cli("select --op add_rmsnorm --shape 8x256 --dtype f32 --json " + t / "s.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("fastest copy of x to y and residual to h"));
  const nlohmann::json j = load_json(t / "s.json");
  CHECK(j.at("op") == "add_rmsnorm");
  CHECK(j.at("kernel").is_string());  // welford and naive run everywhere
  for (const auto& c : j.at("candidates")) CHECK(c.at("kernel") != "onepass");  // LayerNorm only
}

TEST_CASE("cli select and bench --dir bwd: the backward kernels only, on their dx and dgamma budgets", "[cli][bench]") {
  TempDir t;
  const Result r = cli("select --dir bwd --op rmsnorm --shape 8x256 --dtype f32 --max-ulp 1 --json " + t / "s.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = load_json(t / "s.json");
  CHECK(j.at("op") == "rmsnorm_bwd");
  CHECK(j.at("kernel") == "welford");  // the one backward budget of at most 1 ulp (dx and dgamma a = 1, no kappa)
  // The candidates are the kernels that implement rmsnorm_bwd (lnorm list's ops; those this CPU cannot run are
  // candidates too, "unavailable"), and only those.
  const Result l = cli("list --json");
  REQUIRE(l.code == 0);
  std::vector<std::string> backward_kernels;
  for (const auto& k : nlohmann::json::parse(l.out))
    for (const auto& op : k.at("ops"))
      if (op == "rmsnorm_bwd") backward_kernels.push_back(k.at("name").get<std::string>());
  CHECK(backward_kernels.size() >= 4);  // naive, welford, avx2, avx512
  std::vector<std::string> candidates;
  for (const auto& c : j.at("candidates")) candidates.push_back(c.at("kernel").get<std::string>());
  std::sort(candidates.begin(), candidates.end());
  std::sort(backward_kernels.begin(), backward_kernels.end());
  CHECK(candidates == backward_kernels);
  const Result b = cli("bench --dir bwd --op rmsnorm --kernel welford --shape 8x256 --dtype f32 --quick");
  INFO(b.out);
  CHECK(b.code == 0);
  CHECK_THAT(b.out, Contains("8x256 rmsnorm_bwd (GB/s of x + dy read, dx written"));
  CHECK(cli("select --dir bwd --op add_rmsnorm --shape 8x256").code == 2);
}

TEST_CASE("cli report: Add & Norm is refused naming the commands that take it (exit 2)", "[cli][bench]") {
  TempDir t;
  expect_refused(t, "report --quick --op add_rmsnorm --out " + t / "r",
                 "`lnorm report` does not take Add & Norm yet (run, reference, check, verify, bench and select do)");
}
