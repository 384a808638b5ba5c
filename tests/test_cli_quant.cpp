// `lnorm reference --quant` and `lnorm check --quant` (docs/cli.md "Quantized outputs"): the exact q and scales
// written as .npy ('|u1' fp8 bit patterns and E8M0, '|i1' int8, '<f4' scales), gated by check with JSON `q` and
// `scales` objects; a candidate one quantum off or with a wrong scale fails; every misuse is refused by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/quant.hpp"

using namespace lnorm;
using namespace lnorm::testing;
using Catch::Matchers::Contains;

namespace {

// 4 rows x 256 of smooth values with one big element per row (the amax, so dynamic scales matter).
void save_x(const std::string& path) {
  std::vector<float> x(4 * 256);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (i % 256 == 17 ? 9.0f : 1.0f);
  io::save(path, "<f4", {4, 256}, x.data());
}


}  // namespace

TEST_CASE("reference --quant writes the exact q and scales, and check passes them at 100% correctly rounded (CLI)", "[cli][quant]") {
  TempDir t;
  save_x(t / "x.npy");
  const std::string x = " --op rmsnorm --x " + (t / "x.npy");
  for (const std::string& fs : {std::string("fp8_e4m3 --scaling row"), std::string("int8 --scaling group:64"),
                                std::string("fp8_e5m2 --scaling mx"), std::string("fp8_e4m3 --scaling tensor --scale 0.0078125")}) {
    INFO(fs);
    const bool dynamic = fs.find("tensor") == std::string::npos;
    const std::string scales = dynamic ? " --scales " + (t / "s.npy") : "";
    REQUIRE(cli("reference" + x + " --quant " + fs + " --q " + (t / "q.npy") + scales).code == 0);
    io::NpyReader q(t / "q.npy");
    CHECK(q.header().descr == (fs.rfind("int8", 0) == 0 ? "|i1" : "|u1"));
    CHECK(q.header().shape == std::vector<std::int64_t>{4, 256});
    if (dynamic) {
      io::NpyReader s(t / "s.npy");
      CHECK(s.header().descr == (fs.find("mx") != std::string::npos ? "|u1" : "<f4"));
      const std::int64_t groups = fs.find("row") != std::string::npos ? 1 : fs.find("group:64") != std::string::npos ? 4 : 8;
      CHECK(s.header().shape == std::vector<std::int64_t>{4, groups});
    }
    const Result r = cli("check" + x + " --quant " + fs + " --q " + (t / "q.npy") + scales + " --json " + (t / "r.json"));
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("PASS  q "));
    const auto j = load_json(t / "r.json");
    CHECK(j["pass"] == true);
    CHECK(j["q"]["correctly_rounded"].get<double>() == 1.0);
    CHECK(j["q"]["max_ulp"].get<double>() <= 0.5);
    CHECK(j["q"]["nonfinite_mismatches"] == 0);
    CHECK(j["q"].contains("saturated"));
    CHECK(j["q"]["pass"] == true);
    CHECK(j.contains("scales") == dynamic);
    if (dynamic) CHECK(j["scales"]["max_ulp"].get<double>() == 0);
  }
}

TEST_CASE("check --quant: one quantum off, or a scale 2^-8 off, fails with its output named (CLI)", "[cli][quant]") {
  TempDir t;
  save_x(t / "x.npy");
  const std::string x = " --op rmsnorm --x " + (t / "x.npy") + " --quant fp8_e4m3 --scaling row";
  REQUIRE(cli("reference" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s.npy")).code == 0);
  std::vector<std::uint8_t> q = npy_bytes(t / "q.npy");
  for (std::uint8_t& c : q)
    if ((c & 0x7f) > 8 && (c & 0x7f) < 0x7e) {
      ++c;  // one quantum further from zero
      break;
    }
  io::save(t / "q1.npy", "|u1", {4, 256}, q.data());
  const Result off = cli("check" + x + " --q " + (t / "q1.npy") + " --scales " + (t / "s.npy") + " --json " + (t / "r.json"));
  INFO(off.out);
  CHECK(off.code == 1);
  CHECK_THAT(off.out, Contains("FAIL  q fp8_e4m3/row max "));
  CHECK_THAT(off.out, Contains("over budget 1 of 1024 elements"));
  auto j = load_json(t / "r.json");
  CHECK(j["q"]["max_ulp"].get<double>() > 0.5);
  CHECK(j["q"]["correctly_rounded"].get<double>() == Approx(1023.0 / 1024));
  CHECK(j["q"]["pass"] == false);
  CHECK(j["scales"]["pass"] == true);
  CHECK(j["pass"] == false);
  // The same q with scales 2^-8 off: q's metric uses the candidate's scales, and the scales fail.
  std::vector<std::uint8_t> s = npy_bytes(t / "s.npy");
  std::vector<float> sf(s.size() / 4);
  std::memcpy(sf.data(), s.data(), s.size());
  for (float& v : sf) v = static_cast<float>(v * (1 + 0x1p-8));
  io::save(t / "s1.npy", "<f4", {4, 1}, sf.data());
  const Result bad = cli("check" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s1.npy") + " --json " + (t / "r.json"));
  INFO(bad.out);
  CHECK(bad.code == 1);
  j = load_json(t / "r.json");
  CHECK(j["scales"]["pass"] == false);
  CHECK(j["scales"]["max_ulp"].get<double>() > 1000);
}

TEST_CASE("check --quant: a row scale of 0 under q's exact codes counts q's elements over budget (CLI)", "[cli][quant]") {
  // Before the allowance model a zero scale gave q an infinite allowance: "max 14 quanta, over budget 0 of 1024",
  // q passing, and with --max-scale-ulp 1e30 the whole check passing. Against a zero scale every nonzero y is ±max
  // (Q(±Inf), saturating): the exact codes are over by many quanta.
  TempDir t;
  save_x(t / "x.npy");
  const std::string x = " --op rmsnorm --x " + (t / "x.npy") + " --quant fp8_e4m3 --scaling row";
  REQUIRE(cli("reference" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s.npy")).code == 0);
  std::vector<std::uint8_t> s = npy_bytes(t / "s.npy");
  std::memset(s.data() + 4, 0, 4);  // row 1's scale: +0
  io::save(t / "s0.npy", "<f4", {4, 1}, s.data());
  const Result r = cli("check" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s0.npy") + " --max-scale-ulp 1e30 --json " +
                       (t / "r.json"));
  INFO(r.out);
  CHECK(r.code == 1);
  const auto j = load_json(t / "r.json");
  CHECK(j["q"]["pass"] == false);
  CHECK(j["q"]["over_budget"].get<std::int64_t>() > 200);  // row 1's nonzero elements
  CHECK(j["q"]["over_budget"].get<std::int64_t>() <= 256);
  // q consistent with the zero scale (every nonzero y at ±max, what Q(y/0) gives) is no quantization of y either:
  // a zero scale fails q's gate itself, every code of its group a non-finite mismatch.
  std::vector<std::uint8_t> q = npy_bytes(t / "q.npy");
  for (std::size_t i = 256; i < 512; ++i)
    if ((q[i] & 0x7F) != 0) q[i] = static_cast<std::uint8_t>((q[i] & 0x80) | 0x7E);  // ±448
  io::save(t / "qmax.npy", "|u1", {4, 256}, q.data());
  const Result sat = cli("check" + x + " --q " + (t / "qmax.npy") + " --scales " + (t / "s0.npy") +
                         " --max-scale-ulp 1e30 --json " + (t / "r2.json"));
  INFO(sat.out);
  CHECK(sat.code == 1);
  const auto j2 = load_json(t / "r2.json");
  CHECK(j2["q"]["pass"] == false);
  CHECK(j2["q"]["nonfinite_mismatches"].get<std::int64_t>() == 256);
}

TEST_CASE("quant flags: every misuse is refused by name and nothing is written (CLI)", "[cli][quant][bad_input]") {
  TempDir t;
  save_x(t / "x.npy");
  const std::string ref = "reference --op rmsnorm --x " + (t / "x.npy") + " --q " + (t / "q.npy");
  expect_refused(t, ref + " --quant fp8_e4m3", "--scale S");                       // tensor needs its scale
  expect_refused(t, ref + " --quant fp8_e4m3 --scaling row --scale 0.5", "--scale 0.5: row scaling computes its scales");
  expect_refused(t, ref + " --quant int8 --scaling mx", "mx scaling takes fp8_e4m3 or fp8_e5m2");
  expect_refused(t, ref + " --quant fp8_e4m3 --scaling group:96", "groups of 96 do not divide the row of 256");
  expect_refused(t, ref + " --quant fp8_e4m3 --scaling group:0", "--scaling group:0");
  expect_refused(t, ref + " --quant fp9 --scale 1", "--quant fp9: expected " + lnorm::quant_format_names());
  expect_refused(t, ref + " --quant int8 --scale 0.1", "not an f32 value");
  expect_refused(t, ref + " --quant int8 --scale -1", "finite f32 greater than 0");
  expect_refused(t, "reference --x " + (t / "x.npy") + " --quant int8 --scale 1", "--q is required");
  // bench and select parse the spec with the same parser (lnorm/quant.hpp's parse_quant_spec): the same refusals.
  expect_refused(t, "bench --shape 4x256 --quant int8 --scaling mx", "--scaling mx: mx scaling takes fp8_e4m3 or fp8_e5m2");
  expect_refused(t, "select --shape 4x256 --quant int8 --scaling mx", "--scaling mx: mx scaling takes fp8_e4m3 or fp8_e5m2");
  expect_refused(t, "bench --shape 4x256 --quant fp8_e4m3 --scaling tensor", "--scaling tensor: needs --scale S");
  expect_refused(t, "bench --shape 4x256 --quant int8 --scaling row --scale 0.1", "not an f32 value");
  // What select refuses about the request, bench refuses too (bench once dropped these and exited 0).
  for (const std::string cmd : {"bench", "select"}) {
    expect_refused(t, cmd + " --shape 4x64 --quant int8 --scaling group:3", "--quant: ");
    expect_refused(t, cmd + " --shape 4x64 --quant int8 --dir bwd", "--quant is a forward output: not with --dir bwd");
    expect_refused(t, cmd + " --shape 4x64 --quant int8 --dtype f64", "not f64");
    for (const char* scale : {"0", "-1", "inf"})
      expect_refused(t, cmd + " --shape 4x64 --quant int8 --scaling tensor --scale " + scale, "--scale");
  }
  expect_refused(t, "reference --x " + (t / "x.npy") + " --y " + (t / "y.npy") + " --scale 1", "--scale: needs --quant");
  // check: the candidate's scales are required for dynamic scaling, and q's dtype must be the format's.
  REQUIRE(cli(ref + " --quant int8 --scaling row --scales " + (t / "s.npy")).code == 0);
  const std::string chk = "check --op rmsnorm --x " + (t / "x.npy") + " --q " + (t / "q.npy");
  expect_refused(t, chk + " --quant int8 --scaling row", "--scales is required with row scaling");
  expect_refused(t, chk + " --quant fp8_e4m3 --scaling row --scales " + (t / "s.npy"), "holds '|i1' but fp8_e4m3 is stored as '|u1'");
  // --y with --quant is the y the quantizer was handed: f32 or x's dtype, x's shape.
  expect_refused(t, chk + " --quant int8 --scaling row --scales " + (t / "s.npy") + " --y " + (t / "q.npy"),
                 "holds '|i1' but the y a quantizer is handed is f32");
  expect_refused(t, chk + " --quant int8 --scaling row --scales " + (t / "s.npy") + " --mean " + (t / "q.npy"), "--mean: rmsnorm has no mean output");
  expect_refused(t, chk + " --quant int8 --scaling row --scales " + (t / "s.npy") + " --h " + (t / "q.npy"), "--h: needs --residual");
  expect_refused(t, ref + " --quant int8 --scaling row --scales " + (t / "s.npy") + " --h " + (t / "h.npy"), "--h: needs --residual");
}

TEST_CASE("check --quant --recipe vllm: vLLM's rounding points read at most 0.5 quanta from the recipe, the exact q does not", "[cli][quant][recipe]") {
  // 8x1024 bf16 RMSNorm to fp8_e4m3 per token: y rounded to bf16 first moves y by up to 2^-9 of itself, which
  // moves q across a midpoint (2^-4 of q apart) for a few percent of the elements.
  TempDir t;
  const std::int64_t rows = 8, cols = 1024;
  std::vector<std::uint16_t> xb(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < xb.size(); ++i) {
    const float v = std::sin(0.731f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 97) / 13.0f);
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    xb[i] = static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // bf16, to nearest even
  }
  io::save(t / "x.npy", "<u2", {rows, cols}, xb.data());
  const std::string x = " --op rmsnorm --dtype bf16 --eps 1e-6 --x " + (t / "x.npy") + " --quant fp8_e4m3 --scaling row";
  REQUIRE(cli("reference" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s.npy") + " --y " + (t / "y.npy")).code == 0);
  // The recipe's answer, as vLLM's kernels compute it: y in bf16, s = f32(amax/448), q = Q(f32(y * f32(1/s))).
  const std::vector<std::uint8_t> yb = npy_bytes(t / "y.npy");
  std::vector<std::uint8_t> qv(static_cast<std::size_t>(rows * cols));
  std::vector<float> sv(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> y(static_cast<std::size_t>(cols));
    float amax = 0;
    for (std::int64_t i = 0; i < cols; ++i) {
      std::uint16_t h;
      std::memcpy(&h, yb.data() + 2 * (r * cols + i), 2);
      const std::uint32_t u = std::uint32_t{h} << 16;
      std::memcpy(&y[static_cast<std::size_t>(i)], &u, 4);
      amax = std::fmax(amax, std::fabs(y[static_cast<std::size_t>(i)]));
    }
    sv[static_cast<std::size_t>(r)] = amax / 448.0f;
    const float inv = 1.0f / sv[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < cols; ++i)
      qv[static_cast<std::size_t>(r * cols + i)] = encode(QuantFormat::fp8_e4m3, y[static_cast<std::size_t>(i)] * inv);
  }
  io::save(t / "qv.npy", "|u1", {rows, cols}, qv.data());
  io::save(t / "sv.npy", "<f4", {rows, 1}, sv.data());
  const Result ok = cli("check" + x + " --q " + (t / "qv.npy") + " --scales " + (t / "sv.npy") + " --recipe vllm --json " + (t / "v.json"));
  INFO(ok.out);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Contains("recipe    PASS"));
  auto j = load_json(t / "v.json");
  CHECK(j["recipe"]["max_ulp"].get<double>() <= 0.5);
  CHECK(j["recipe"]["matching"].get<double>() == 1.0);
  CHECK(j["recipe"]["scales_differ"] == 0);
  CHECK(j["q"]["pass"] == true);                            // and within the exact answer's default budget
  CHECK(j["q"]["correctly_rounded"].get<double>() < 0.995);  // though not correctly rounded everywhere
  // The exact q (and scales) is not the recipe's answer.
  const Result exact = cli("check" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s.npy") + " --recipe vllm --json " + (t / "e.json"));
  INFO(exact.out);
  CHECK(exact.code == 1);
  j = load_json(t / "e.json");
  CHECK(j["q"]["pass"] == true);
  CHECK(j["recipe"]["pass"] == false);
  CHECK(j["recipe"]["max_ulp"].get<double>() > 0.5);
  // The recipe's misuses, by name.
  const Result no_q_rule = cli("check" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s.npy") + " --recipe llama");
  CHECK(no_q_rule.code == 2);
  CHECK_THAT(no_q_rule.out, Contains("name vllm"));
  const Result no_quant = cli("check --op rmsnorm --dtype bf16 --x " + (t / "x.npy") + " --y " + (t / "y.npy") + " --recipe vllm");
  CHECK(no_quant.code == 2);
  CHECK_THAT(no_quant.out, Contains("quantized output's recipe"));
}

TEST_CASE("check --quant --y: a quantizer breaking ties away from zero passes q's budget and fails consistency (CLI)", "[cli][quant]") {
  // RMSNorm rows of ±1 with eps 0: y* = ±gamma exactly, and gamma is 272 (the tie between E4M3's 256, the even
  // code, and 288), 100 (the tie between 96, even, and 104) or 101 (no tie): tensor scale 1, so y*/s = y*. The ties-away q is 0.5
  // quanta from y*/s, inside q's budget (the gate alone could not tell it from the right one); given the y its
  // quantizer was handed, its codes are not Q(y/s).
  TempDir t;
  const std::int64_t rows = 4, cols = 64;
  std::vector<float> x(static_cast<std::size_t>(rows * cols)), gamma(static_cast<std::size_t>(cols), 272.0f), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i * 7 % 3 == 0) ? -1.0f : 1.0f;
  gamma[3] = 100.0f;
  gamma[5] = 101.0f;
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * gamma[i % static_cast<std::size_t>(cols)];
  io::save(t / "x.npy", "<f4", {rows, cols}, x.data());
  io::save(t / "g.npy", "<f4", {cols}, gamma.data());
  io::save(t / "y.npy", "<f4", {rows, cols}, y.data());
  std::vector<std::uint8_t> away(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double v = y[i], a = std::fabs(v);
    // ties away from zero: round |v| up at a midpoint (encode's ties-to-even, nudged past the tie)
    const double nudged = a * (1 + 0x1p-30);
    away[i] = encode(QuantFormat::fp8_e4m3, v < 0 ? -nudged : nudged);
  }
  io::save(t / "away.npy", "|u1", {rows, cols}, away.data());
  const std::string base = "check --op rmsnorm --eps 0 --x " + (t / "x.npy") + " --gamma " + (t / "g.npy") +
                           " --quant fp8_e4m3 --scaling tensor --scale 1";
  REQUIRE(cli("reference --op rmsnorm --eps 0 --x " + (t / "x.npy") + " --gamma " + (t / "g.npy") +
              " --quant fp8_e4m3 --scaling tensor --scale 1 --q " + (t / "q.npy")).code == 0);
  const Result budget_only = cli(base + " --q " + (t / "away.npy"));
  INFO(budget_only.out);
  CHECK(budget_only.code == 0);  // 0.5 quanta from y*/s: q's budget alone passes it
  const Result exact = cli(base + " --q " + (t / "q.npy") + " --y " + (t / "y.npy") + " --json " + (t / "e.json"));
  INFO(exact.out);
  CHECK(exact.code == 0);
  CHECK(load_json(t / "e.json")["consistency"]["pass"] == true);
  const Result r = cli(base + " --q " + (t / "away.npy") + " --y " + (t / "y.npy") + " --json " + (t / "r.json"));
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("consistency FAIL"));
  const auto j = load_json(t / "r.json");
  CHECK(j["pass"] == false);
  CHECK(j["q"]["pass"] == true);
  CHECK(j["consistency"]["pass"] == false);
  CHECK(j["consistency"]["codes_differ"].get<std::int64_t>() == rows * (cols - 1));  // every tie; 101 is none
  CHECK(j["consistency"]["first"][0]["got"] == -288.0);  // x[0] = −1: y = −272
  CHECK(j["consistency"]["first"][0]["expected"] == -256.0);
  // A y of the wrong dtype or shape is refused by name.
  std::vector<double> yd(y.begin(), y.end());
  io::save(t / "y64.npy", "<f8", {rows, cols}, yd.data());
  const Result bad = cli(base + " --q " + (t / "q.npy") + " --y " + (t / "y64.npy"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Contains("y64.npy: holds '<f8'"));
}

TEST_CASE("check --quant: row scales shaped [rows] are read as [rows, 1] (ONNX's ReduceMax without keepdims)", "[cli][quant]") {
  TempDir t;
  save_x(t / "x.npy");
  const std::string x = " --op rmsnorm --x " + (t / "x.npy") + " --quant fp8_e4m3 --scaling row";
  REQUIRE(cli("reference" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s.npy")).code == 0);
  std::vector<std::uint8_t> s = npy_bytes(t / "s.npy");
  io::save(t / "s1.npy", "<f4", {4}, s.data());
  const Result r = cli("check" + x + " --q " + (t / "q.npy") + " --scales " + (t / "s1.npy"));
  INFO(r.out);
  CHECK(r.code == 0);
  // group:G's scales keep their group axis: [rows] is refused there, by name.
  REQUIRE(cli("reference --op rmsnorm --x " + (t / "x.npy") + " --quant fp8_e4m3 --scaling group:128 --q " + (t / "qg.npy") +
              " --scales " + (t / "sg.npy")).code == 0);
  const std::vector<std::uint8_t> sg = npy_bytes(t / "sg.npy");
  io::save(t / "sg1.npy", "<f4", {8}, sg.data());
  const Result g = cli("check --op rmsnorm --x " + (t / "x.npy") + " --quant fp8_e4m3 --scaling group:128 --q " + (t / "qg.npy") +
                       " --scales " + (t / "sg1.npy"));
  CHECK(g.code == 2);
  CHECK_THAT(g.out, Contains("expected 4x2 (2 per row)"));
}

TEST_CASE("check --quant prints the digits that explain the verdict: 0.50005 is not 'max 0.5', 99.998% is not 100.00%", "[cli][quant]") {
  // RMSNorm rows of ±1, eps 0: y* = ±gamma exactly. gamma[0] = 100.0004 (E4M3 quantum 8 there: 104 is 0.49995
  // quanta off, 96 is 0.50005); one element of 65536 written as 96 fails a flat budget of 0.5.
  TempDir t;
  const std::int64_t rows = 256, cols = 256;
  std::vector<float> x(static_cast<std::size_t>(rows * cols), 1.0f), gamma(static_cast<std::size_t>(cols), 101.0f);
  gamma[0] = 100.0004f;
  io::save(t / "x.npy", "<f4", {rows, cols}, x.data());
  io::save(t / "g.npy", "<f4", {cols}, gamma.data());
  const std::string args = " --op rmsnorm --eps 0 --x " + (t / "x.npy") + " --gamma " + (t / "g.npy") + " --quant fp8_e4m3 --scale 1";
  REQUIRE(cli("reference" + args + " --q " + (t / "q.npy")).code == 0);
  std::vector<std::uint8_t> q = npy_bytes(t / "q.npy");
  REQUIRE(decode(QuantFormat::fp8_e4m3, q[0]) == 104.0);
  q[0] = encode(QuantFormat::fp8_e4m3, 96.0);
  io::save(t / "q1.npy", "|u1", {rows, cols}, q.data());
  const Result r = cli("check" + args + " --q " + (t / "q1.npy") + " --max-q-ulp 0.5");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("max 0.50005"));
  CHECK_THAT(r.out, Contains("correctly rounded 99.998%"));
}

TEST_CASE("Add & Norm with a quantized output (vLLM's fused_add_rms_norm_static_fp8_quant): run and reference write h, "
          "mean and rstd beside q, and check gates them", "[cli][quant]") {
  TempDir t;
  save_x(t / "x.npy");
  std::vector<float> res(4 * 256);
  for (std::size_t i = 0; i < res.size(); ++i) res[i] = std::cos(0.11f * static_cast<float>(i)) / 3;
  io::save(t / "r.npy", "<f4", {4, 256}, res.data());
  const std::string in = " --op add_layernorm --x " + (t / "x.npy") + " --residual " + (t / "r.npy") + " --quant fp8_e4m3 --scaling row";
  const std::string side = " --h " + (t / "h.npy") + " --mean " + (t / "m.npy") + " --rstd " + (t / "s.npy");
  REQUIRE(cli("reference" + in + " --q " + (t / "q.npy") + " --scales " + (t / "sc.npy") + side).code == 0);
  CHECK(io::NpyReader(t / "h.npy").header().shape == std::vector<std::int64_t>{4, 256});
  CHECK(io::NpyReader(t / "m.npy").header().descr == "<f4");
  // The exact h, mean and rstd pass at their budgets (h: 0.5 ulp, one rounding of the sum; stats gated when asked).
  const std::string chk = "check" + in + " --q " + (t / "q.npy") + " --scales " + (t / "sc.npy") + side +
                          " --max-mean-ulp 1 --max-rstd-ulp 1 --json " + (t / "j.json");
  const Result ok = cli(chk);
  INFO(ok.out);
  CHECK(ok.code == 0);
  const auto j = load_json(t / "j.json");
  CHECK(j["h"]["pass"] == true);
  CHECK(j["h"]["max_ulp"].get<double>() <= 0.5);
  CHECK(j["mean"]["pass"] == true);
  CHECK(j["rstd"]["pass"] == true);
  CHECK(j["pass"] == true);
  // A kernel's run writes the same files: its h is the sum rounded once, its statistics within 1 ulp.
  const std::string kside = " --h " + (t / "kh.npy") + " --mean " + (t / "km.npy") + " --rstd " + (t / "ks.npy");
  REQUIRE(cli("run --kernel welford" + in + " --q " + (t / "kq.npy") + " --scales " + (t / "ksc.npy") + kside).code == 0);
  CHECK(npy_bytes(t / "kh.npy") == npy_bytes(t / "h.npy"));
  const Result kr = cli("check" + in + " --q " + (t / "kq.npy") + " --scales " + (t / "ksc.npy") + kside +
                        " --max-mean-ulp 4 --max-rstd-ulp 4");
  INFO(kr.out);
  CHECK(kr.code == 0);
  // h one ulp off in one element fails, named, while q stays exact.
  std::vector<float> h(4 * 256);
  io::NpyReader(t / "h.npy").read(0, static_cast<std::int64_t>(h.size()), h.data());
  h[300] = std::nextafter(h[300], 10.0f);
  io::save(t / "bad_h.npy", "<f4", {4, 256}, h.data());
  const Result bad = cli("check" + in + " --q " + (t / "q.npy") + " --scales " + (t / "sc.npy") + " --h " + (t / "bad_h.npy") +
                         " --json " + (t / "b.json"));
  INFO(bad.out);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.out, Contains("h         FAIL"));
  const auto bj = load_json(t / "b.json");
  CHECK(bj["q"]["pass"] == true);
  CHECK(bj["h"]["pass"] == false);
  CHECK(bj["h"]["max_ulp_index"] == 300);
}
