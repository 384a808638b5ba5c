// Specifications for the `lnorm` command line (DESIGN.md "CLI contract"), driven through the real
// executable: output shapes and dtypes, seed examples, exact ulp reporting and gating, bitwise
// determinism across threads, N-d axes, and bad input refused with exit 2, one line naming the
// culprit, and no output file left behind.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lnorm/format.hpp"
#include "cli_support.hpp"
#include "lnorm/npy.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using lnorm::DType;
using Shape = std::vector<std::int64_t>;

namespace {

using namespace lnorm::testing;

std::string descr_of(DType d) { return std::string(lnorm::npy_descr(d)); }

// An .npy file's contents.
struct Array {
  std::string descr;
  Shape shape;
  std::vector<std::byte> bytes;
  std::size_t item() const { return descr == "<f8" ? 8 : descr == "<f4" ? 4 : 2; }
  std::size_t size() const { return bytes.size() / item(); }
  std::uint64_t bits(std::size_t i) const {
    std::uint64_t b = 0;
    std::memcpy(&b, bytes.data() + i * item(), item());  // little-endian host
    return b;
  }
  void set_bits(std::size_t i, std::uint64_t b) { std::memcpy(bytes.data() + i * item(), &b, item()); }
};

Array load(const std::string& path) {
  lnorm::io::NpyReader r(path);
  return {r.header().descr, r.header().shape, lnorm::io::read_all(r)};
}

void save(const std::string& path, const Array& a) { lnorm::io::save(path, a.descr, a.shape, a.bytes.data()); }

// Writes values (rounded once to dtype d) as an .npy file of d's descr.
void save_values(const std::string& path, DType d, const Shape& shape, const std::vector<double>& v) {
  const lnorm::Format f = lnorm::format_of(d);
  Array a{descr_of(d), shape, std::vector<std::byte>(v.size() * lnorm::size_of(d))};
  for (std::size_t i = 0; i < v.size(); ++i) a.set_bits(i, lnorm::double_to_bits(f, lnorm::round_to_format(f, v[i])));
  save(path, a);
}

void save_f32(const std::string& path, const Shape& shape, const std::vector<double>& v) {
  save_values(path, DType::f32, shape, v);
}

// The values of a loaded array of dtype d (f32 or f64 for stats files).
std::vector<double> values(const Array& a, DType d) {
  std::vector<double> v(a.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = lnorm::bits_to_double(lnorm::format_of(d), a.bits(i));
  return v;
}

std::vector<double> load_values(const std::string& path, DType d) { return values(load(path), d); }

// Byte equality of two files' contents, without printing binary bytes on failure.
bool identical(const std::string& a, const std::string& b) { return a == b; }

std::vector<double> random_values(std::size_t n, double offset, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> v(n);
  for (auto& e : v) e = offset + normal(rng);
  return v;
}

// The 16-value row with mean 0 and variance exactly 4: with eps 0, rstd = 1/2 and y = x/2 exactly.
const std::vector<double> kExactRow = {-3, -1, 3, -1, 3, -3, 1, -1, 1, -3, 1, 3, -1, 1, -1, 1};
constexpr std::size_t kPlanted = 4;  // kExactRow[4] = 3, so its exact y is 1.5

}  // namespace

TEST_CASE("cli: list exits 0 and names naive, onepass and welford, as a table and as JSON", "[cli]") {
  const Result table = cli("list");
  CHECK(table.code == 0);
  for (const char* k : {"naive", "onepass", "welford"}) CHECK_THAT(table.out, Contains(k));

  const Result json = cli("list --json");
  REQUIRE(json.code == 0);
  CHECK_THAT(json.out, Contains("\"name\": \"welford\""));
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.is_array());
  std::set<std::string> names;
  for (const auto& k : j) names.insert(k.at("name").get<std::string>());
  CHECK(names.count("naive") == 1);
  CHECK(names.count("onepass") == 1);
  CHECK(names.count("welford") == 1);
}

TEST_CASE("cli: run and reference write y in x's shape and dtype, mean and rstd in ONNX's stats shape", "[cli]") {
  struct AxisCase {
    int axis;
    Shape stats;
  };
  const Shape shape{2, 3, 4};
  const std::vector<AxisCase> axes{{-1, {2, 3, 1}}, {1, {2, 1, 1}}, {0, {1, 1, 1}}, {2, {2, 3, 1}}};
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const char* cmd : {"run --kernel welford", "reference"}) {
      for (const auto& [axis, stats] : axes) {
        TempDir t;
        save_values(t / "x.npy", d, shape, random_values(24, 3, 7));
        const std::string dtype_flag = d == DType::bf16 ? " --dtype bf16" : "";
        const Result r = cli(std::string(cmd) + " --x " + (t / "x.npy") + " --axis " + std::to_string(axis) +
                             dtype_flag + " --y " + (t / "y.npy") + " --mean " + (t / "m.npy") + " --rstd " +
                             (t / "r.npy"));
        INFO(cmd << " dtype " << lnorm::name(d) << " axis " << axis << ": " << r.out);
        REQUIRE(r.code == 0);
        const Array y = load(t / "y.npy");
        CHECK(y.descr == descr_of(d));
        CHECK(y.shape == shape);
        const std::string stats_descr = d == DType::f64 ? "<f8" : "<f4";
        for (const char* s : {"m.npy", "r.npy"}) {
          const Array a = load(t / s);
          CHECK(a.descr == stats_descr);
          CHECK(a.shape == stats);
        }
      }
    }
  }
}

TEST_CASE("cli: a '<u2' file without --dtype bf16 is refused with exit 2 naming the file", "[cli]") {
  TempDir t;
  save_values(t / "x.npy", DType::bf16, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_refused(t, "reference --x " + (t / "x.npy") + " --y " + (t / "y.npy"), t / "x.npy");
  expect_refused(t, "reference --x " + (t / "x.npy") + " --y " + (t / "y.npy"), "--dtype bf16");
}

TEST_CASE("cli: reference gives the exact seed answers for small rows", "[cli]") {
  TempDir t;
  const auto reference = [&](const std::vector<double>& x, const std::string& extra) {
    save_f32(t / "x.npy", {1, static_cast<std::int64_t>(x.size())}, x);
    const Result r = cli("reference --x " + (t / "x.npy") + " --y " + (t / "y.npy") + " --mean " + (t / "m.npy") +
                         " --rstd " + (t / "r.npy") + " " + extra);
    INFO(r.out);
    REQUIRE(r.code == 0);
  };
  SECTION("[1,2,3,4], eps 0: mean 2.5, rstd 1/sqrt(1.25), y = (x - 2.5)/sqrt(1.25)") {
    reference({1, 2, 3, 4}, "--eps 0");
    CHECK(load_values(t / "m.npy", DType::f32) == std::vector<double>{2.5});
    CHECK(load_values(t / "r.npy", DType::f32)[0] == Approx(0.894427191).epsilon(1e-7));
    const auto y = load_values(t / "y.npy", DType::f32);
    const std::vector<double> want{-1.3416407865, -0.4472135955, 0.4472135955, 1.3416407865};
    REQUIRE(y.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-7));
    CHECK(y[0] == -y[3]);
    CHECK(y[1] == -y[2]);
  }
  SECTION("[2,4,6], eps 0: y = [-sqrt(1.5), 0, sqrt(1.5)]") {
    reference({2, 4, 6}, "--eps 0");
    const auto y = load_values(t / "y.npy", DType::f32);
    REQUIRE(y.size() == 3);
    CHECK(y[0] == Approx(-1.2247448714).epsilon(1e-7));
    CHECK(y[1] == 0.0);
    CHECK(y[2] == Approx(1.2247448714).epsilon(1e-7));
  }
  SECTION("a constant row with eps 1e-5 gives y == beta exactly") {
    save_f32(t / "b.npy", {4}, {0.5, -1, 2, 3});
    reference({5, 5, 5, 5}, "--eps 1e-5 --beta " + (t / "b.npy"));
    CHECK(load_values(t / "y.npy", DType::f32) == std::vector<double>{0.5, -1, 2, 3});
    CHECK(load_values(t / "m.npy", DType::f32) == std::vector<double>{5});
  }
  SECTION("a constant row with eps 0 gives rstd = +Inf and y all NaN") {
    reference({5, 5, 5, 5}, "--eps 0");
    const auto rstd = load_values(t / "r.npy", DType::f32);
    CHECK(std::isinf(rstd.at(0)));
    CHECK(rstd.at(0) > 0);
    for (double v : load_values(t / "y.npy", DType::f32)) CHECK(std::isnan(v));
  }
}

TEST_CASE("cli: onepass turns an offset row into NaN and check fails it, welford stays finite and passes", "[cli]") {
  TempDir t;
  save_f32(t / "x.npy", {1, 4}, {40000, 40001, 40002, 40003});
  for (const char* k : {"onepass", "welford"}) {
    const Result r = cli(std::string("run --kernel ") + k + " --x " + (t / "x.npy") + " --y " + (t / k) + ".npy");
    INFO(k << ": " << r.out);
    REQUIRE(r.code == 0);
  }
  for (double v : load_values(t / "onepass.npy", DType::f32)) CHECK(std::isnan(v));
  for (double v : load_values(t / "welford.npy", DType::f32)) CHECK(std::isfinite(v));
  const Result bad = cli("check --x " + (t / "x.npy") + " --y " + (t / "onepass.npy"));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.out, Contains("FAIL"));
  const Result good = cli("check --x " + (t / "x.npy") + " --y " + (t / "welford.npy"));
  CHECK(good.code == 0);
  CHECK_THAT(good.out, Contains("PASS"));
}

// A k-ulp error planted at an exact 1.5: k scaled ulps in f32. A 16-bit output is measured from the interval of
// reals that round to it, in f32 ulps (docs/verify.md "How error is measured"): k steps off is (k − 0.5) of its
// own ulps past that interval, (k − 0.5)·2^13 f32 ulps for f16 and (k − 0.5)·2^16 for bf16.
TEST_CASE("cli: check reports a planted k-ulp error as its scaled ulps and gates on --max-ulp", "[cli]") {
  struct Fmt {
    DType d;
    double ulp_of_1_5;
    double f32_ulps_per_ulp;  // 0: f32, read as k
  };
  for (const auto& [d, ulp, per] : {Fmt{DType::f32, 0x1p-23, 0}, Fmt{DType::f16, 0x1p-10, 0x1p13}, Fmt{DType::bf16, 0x1p-7, 0x1p16}}) {
    TempDir t;
    const std::string dtype = std::string(" --dtype ") + std::string(lnorm::name(d));
    const std::string x = " --x " + (t / "x.npy") + dtype + " --eps 0";
    save_values(t / "x.npy", d, {1, 16}, kExactRow);
    REQUIRE(cli("reference" + x + " --y " + (t / "y.npy")).code == 0);
    const Array exact = load(t / "y.npy");
    REQUIRE(values(exact, d)[kPlanted] == 1.5);
    for (int k : {1, 3, 7}) {
      INFO("dtype " << lnorm::name(d) << ", k = " << k);
      Array cand = exact;
      cand.set_bits(kPlanted, exact.bits(kPlanted) + static_cast<std::uint64_t>(k));
      REQUIRE(values(cand, d)[kPlanted] == 1.5 + k * ulp);
      save(t / "cand.npy", cand);
      const std::string check = "check" + x + " --y " + (t / "cand.npy") + " --max-ulp-per-kappa 0 --json " +
                                (t / "out.json") + " --max-ulp ";
      const double want = per == 0 ? k : (k - 0.5) * per;
      const Result ok = cli(check + std::to_string(want));
      INFO(ok.out);
      CHECK(ok.code == 0);
      const auto j = load_json(t / "out.json");
      CHECK(j.at("max_ulp").get<double>() == want);
      CHECK(j.at("max_ulp_index").get<std::int64_t>() == static_cast<std::int64_t>(kPlanted));
      CHECK(j.at("correctly_rounded").get<double>() == 15.0 / 16.0);
      CHECK(j.at("pass").get<bool>());
      const Result over = cli(check + std::to_string(want - 0.5));
      INFO(over.out);
      CHECK(over.code == 1);
      CHECK_FALSE(load_json(t / "out.json").at("pass").get<bool>());
    }
  }
}

TEST_CASE("cli: check --json holds the contract's keys, mean/rstd objects, and counts a planted NaN", "[cli]") {
  TempDir t;
  save_f32(t / "x.npy", {4, 16}, random_values(64, 10, 3));
  const std::string x = " --x " + (t / "x.npy");
  REQUIRE(cli("reference" + x + " --y " + (t / "y.npy") + " --mean " + (t / "m.npy") + " --rstd " + (t / "r.npy"))
              .code == 0);

  const Result plain = cli("check" + x + " --y " + (t / "y.npy") + " --json " + (t / "plain.json"));
  CHECK(plain.code == 0);
  const auto p = load_json(t / "plain.json");
  for (const char* key : {"elements", "max_ulp", "max_ulp_index", "correctly_rounded", "nan_mismatches", "pass"})
    CHECK(p.contains(key));
  CHECK(p.at("elements").get<std::int64_t>() == 64);
  CHECK(p.at("max_ulp").get<double>() <= 0.5);  // measured against the exact real answer
  CHECK(p.at("correctly_rounded").get<double>() == 1.0);
  CHECK(p.at("nan_mismatches").get<std::int64_t>() == 0);
  CHECK(p.at("budget").at("a").get<double>() == 8);  // the defaults
  CHECK(p.at("budget").at("b").get<double>() == 1);
  CHECK(p.at("pass").get<bool>());
  CHECK_FALSE(p.contains("mean"));
  CHECK_FALSE(p.contains("rstd"));

  const Result stats = cli("check" + x + " --y " + (t / "y.npy") + " --mean " + (t / "m.npy") + " --rstd " +
                           (t / "r.npy") + " --max-ulp 2 --max-ulp-per-kappa 0.5 --json " + (t / "stats.json"));
  CHECK(stats.code == 0);
  const auto s = load_json(t / "stats.json");
  CHECK(s.at("budget").at("a").get<double>() == 2);
  CHECK(s.at("budget").at("b").get<double>() == 0.5);
  CHECK(s.at("mean").at("max_ulp").get<double>() == 0);
  CHECK(s.at("rstd").at("max_ulp").get<double>() == 0);

  Array y = load(t / "y.npy");
  y.set_bits(21, 0x7FC00000u);  // a quiet NaN in row 1, whose exact answer is finite
  save(t / "nan.npy", y);
  const Result nan = cli("check" + x + " --y " + (t / "nan.npy") + " --max-ulp 1e9 --json " + (t / "nan.json"));
  CHECK(nan.code == 1);
  const auto n = load_json(t / "nan.json");
  CHECK(n.at("nan_mismatches").get<std::int64_t>() == 1);
  CHECK_FALSE(n.at("pass").get<bool>());
}

TEST_CASE("cli: y is bitwise the same for any --threads, for run and for reference", "[cli]") {
  TempDir t;
  save_f32(t / "x7.npy", {7, 33}, random_values(7 * 33, 100, 11));
  save_f32(t / "x5.npy", {5, 33}, random_values(5 * 33, -50, 12));
  const auto run = [&](const std::string& cmd, const std::string& x, int threads) {
    const std::string y = t / (x + "_" + std::to_string(threads) + "_" + std::to_string(cmd.size()) + ".npy");
    const Result r = cli(cmd + " --x " + (t / (x + ".npy")) + " --threads " + std::to_string(threads) + " --y " + y);
    INFO(cmd << " " << x << " threads " << threads << ": " << r.out);
    REQUIRE(r.code == 0);
    return file_bytes(y);
  };
  const std::string welford = "run --kernel welford";
  const std::string w7 = run(welford, "x7", 1);
  CHECK(identical(run(welford, "x7", 2), w7));
  CHECK(identical(run(welford, "x7", 3), w7));
  CHECK(identical(run(welford, "x5", 3), run(welford, "x5", 1)));
  const std::string r7 = run("reference", "x7", 1);
  CHECK(identical(run("reference", "x7", 2), r7));
  CHECK(identical(run("reference", "x5", 3), run("reference", "x5", 1)));
}

TEST_CASE("cli: --axis normalizes the trailing dims from axis on, counting negative axes from the end", "[cli]") {
  TempDir t;
  const auto data = random_values(24, 5, 21);
  save_f32(t / "x3.npy", {2, 3, 4}, data);
  save_f32(t / "x2.npy", {2, 12}, data);
  save_f32(t / "x1.npy", {1, 24}, data);
  const auto reference = [&](const std::string& x, const std::string& axis, const std::string& tag) {
    const Result r = cli("reference --x " + (t / x) + " --axis " + axis + " --y " + (t / ("y" + tag + ".npy")) +
                         " --mean " + (t / ("m" + tag + ".npy")));
    INFO(x << " axis " << axis << ": " << r.out);
    REQUIRE(r.code == 0);
    return std::pair{load(t / ("y" + tag + ".npy")), load(t / ("m" + tag + ".npy"))};
  };
  const auto [y_axis1, m_axis1] = reference("x3.npy", "1", "a1");
  const auto [y_rows12, m_rows12] = reference("x2.npy", "-1", "r12");
  CHECK(y_axis1.shape == Shape{2, 3, 4});
  CHECK(y_axis1.bytes == y_rows12.bytes);
  CHECK(m_axis1.shape == Shape{2, 1, 1});
  CHECK(m_axis1.bytes == m_rows12.bytes);

  const auto [y_axis0, m_axis0] = reference("x3.npy", "0", "a0");
  const auto [y_row24, m_row24] = reference("x1.npy", "-1", "r24");
  CHECK(y_axis0.bytes == y_row24.bytes);
  CHECK(m_axis0.shape == Shape{1, 1, 1});
  CHECK(m_axis0.bytes == m_row24.bytes);
  CHECK(y_axis0.bytes != y_axis1.bytes);

  reference("x3.npy", "-3", "m3");
  CHECK(identical(file_bytes(t / "ya0.npy"), file_bytes(t / "ym3.npy")));

  for (const char* bad : {"3", "-4"})
    expect_refused(t, "reference --x " + (t / "x3.npy") + " --axis " + bad + " --y " + (t / "y.npy"), "--axis");
}

TEST_CASE("cli: bad input files are refused with exit 2, one line naming the file, and no output", "[cli]") {
  TempDir t;
  const std::string x = t / "x.npy", y = t / "y.npy";
  save_f32(x, {4, 8}, random_values(32, 0, 5));
  const std::string out = " --y " + y + " --mean " + (t / "m.npy") + " --rstd " + (t / "r.npy");

  SECTION("a missing x") { expect_refused(t, "reference --x " + (t / "nope.npy") + out, t / "nope.npy"); }
  SECTION("a file that is not an npy") {
    std::ofstream(t / "garbage.npy") << "this is not a numpy file at all\n";
    expect_refused(t, "run --kernel naive --x " + (t / "garbage.npy") + out, t / "garbage.npy");
  }
  SECTION("truncated data") {
    const std::string whole = file_bytes(x);
    std::ofstream(t / "short.npy", std::ios::binary) << whole.substr(0, whole.size() - 5);
    expect_refused(t, "reference --x " + (t / "short.npy") + out, t / "short.npy");
  }
  SECTION("--dtype that does not match the file") {
    expect_refused(t, "reference --x " + x + " --dtype f16" + out, x);
  }
  SECTION("gamma of the wrong shape") {
    save_f32(t / "g.npy", {7}, {1, 1, 1, 1, 1, 1, 1});
    expect_refused(t, "reference --x " + x + " --gamma " + (t / "g.npy") + out, t / "g.npy");
  }
  SECTION("gamma of another dtype than x") {
    save_values(t / "g.npy", DType::f64, {8}, {1, 1, 1, 1, 1, 1, 1, 1});
    expect_refused(t, "run --kernel welford --x " + x + " --gamma " + (t / "g.npy") + out, t / "g.npy");
  }
  SECTION("a candidate y of another shape in check") {
    save_f32(t / "cand.npy", {8, 4}, random_values(32, 0, 6));
    expect_refused(t, "check --x " + x + " --y " + (t / "cand.npy") + " --json " + (t / "j.json"), t / "cand.npy");
  }
  SECTION("x with zero-width rows (shape 4x0)") {
    save_f32(t / "empty.npy", {4, 0}, {});
    expect_refused(t, "reference --x " + (t / "empty.npy") + out, t / "empty.npy");
  }
}

TEST_CASE("cli: bad flags are refused with exit 2, one line naming the flag, and no output", "[cli]") {
  TempDir t;
  const std::string x = t / "x.npy", y = t / "y.npy";
  save_f32(x, {4, 8}, random_values(32, 0, 5));
  const std::string run = "run --kernel welford --x " + x;
  const std::string out = " --y " + y + " --mean " + (t / "m.npy");

  SECTION("an unknown kernel, listing the known ones") {
    const std::string args = "run --kernel fastest --x " + x + out;
    expect_refused(t, args, "--kernel");
    for (const char* k : {"fastest", "naive", "onepass", "welford"}) CHECK_THAT(cli(args).out, Contains(k));
  }
  SECTION("an unknown dtype") { expect_refused(t, run + " --dtype f8" + out, "--dtype"); }
  SECTION("a negative eps") { expect_refused(t, run + " --eps=-1" + out, "--eps"); }
  SECTION("a negative eps as a separate argument") { expect_refused(t, run + " --eps -1e-5" + out, "--eps"); }
  SECTION("eps nan") { expect_refused(t, "reference --x " + x + " --eps nan" + out, "--eps"); }
  SECTION("an output in a missing directory") {
    expect_refused(t, run + " --y " + (t / "no/such/dir/y.npy"), t / "no/such/dir/y.npy");
  }
  SECTION("two outputs naming the same file") {
    expect_refused(t, run + " --y " + y + " --mean " + y, "--mean");
  }
  SECTION("check --json into a missing folder fails before any report") {
    REQUIRE(cli("reference --x " + x + " --y " + y).code == 0);
    const Result r = cli("check --x " + x + " --y " + y + " --json " + (t / "nodir/out.json"));
    CHECK(r.code == 2);
    CHECK_THAT(r.out, !Contains("PASS"));
  }
  SECTION("a tiny negative eps is shown as given") {
    CHECK_THAT(cli(run + " --eps -1e-10" + out).out, Contains("-1e-10"));
  }
  SECTION("--y naming the --x file, which is left untouched") {
    const std::string before = file_bytes(x);
    expect_refused(t, run + " --y " + x, "--y");
    CHECK(identical(file_bytes(x), before));
  }
}

TEST_CASE("cli: zero rows (shape 0x8) are valid and give empty outputs of the right shape", "[cli]") {
  TempDir t;
  save_f32(t / "x.npy", {0, 8}, {});
  for (const char* cmd : {"reference", "run --kernel welford"}) {
    const Result r = cli(std::string(cmd) + " --x " + (t / "x.npy") + " --y " + (t / "y.npy") + " --mean " +
                         (t / "m.npy"));
    INFO(cmd << ": " << r.out);
    REQUIRE(r.code == 0);
    CHECK(load(t / "y.npy").shape == Shape{0, 8});
    CHECK(load(t / "m.npy").shape == Shape{0, 1});
  }
  const Result check = cli("check --x " + (t / "x.npy") + " --y " + (t / "y.npy"));
  CHECK(check.code == 0);
}
