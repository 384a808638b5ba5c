// Known wrong answers through `lnorm check`: each FAILS with the default budget, naming the element over its
// allowance, and beside each the right answers PASS (the exact answer, correctly rounded, and a faithful f32
// computation rounded once to the 16-bit format). Every wrong one passed before the allowance model of
// docs/verify.md "How error is measured": a 16-bit output's error was counted in ulps of its own format, and
// LayerNorm's scale was floored at 1 on rows with var << eps. python/tests/test_wrong_answers.py is the twin.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "lnorm/half.hpp"
#include "lnorm/problem.hpp"
#include "lnorm/npy.hpp"

using namespace lnorm;
using namespace lnorm::testing;
using Catch::Matchers::Contains;

namespace {

// Values of one dtype, held as floats (every f16/bf16 value is one); saved in the dtype's .npy form.
struct Array {
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<float> v;
};

float round_to(DType d, double x) {
  switch (d) {
    case DType::f16: return to_float(from_double<f16>(x));
    case DType::bf16: return to_float(from_double<bf16>(x));
    default: return static_cast<float>(x);
  }
}

Array rounded(DType d, std::vector<std::int64_t> shape, const std::vector<double>& x) {
  Array a{d, std::move(shape), {}};
  for (double e : x) a.v.push_back(round_to(d, e));
  return a;
}

void save(const std::string& path, const Array& a) {
  if (a.dtype == DType::f32) return io::save(path, "<f4", a.shape, a.v.data());
  std::vector<std::uint16_t> bits;
  for (float e : a.v) bits.push_back(a.dtype == DType::f16 ? f16_from_float(e).bits : bf16_from_float(e).bits);
  io::save(path, a.dtype == DType::f16 ? "<f2" : "<u2", a.shape, bits.data());
}

std::vector<double> normal(std::size_t n, double sd, double mean, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> v(n);
  for (double& e : v) e = d(rng);
  return v;
}

// The textbook two-pass LayerNorm in f32 arithmetic over rows of n (variance over n - ddof); gamma/beta may be empty.
std::vector<double> layernorm_f32(const std::vector<float>& x, std::size_t n, const std::vector<float>& g,
                                  const std::vector<float>& b, float eps, int ddof = 0) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    // f32 arithmetic with the sums carried in double and rounded once (a careful kernel's).
    const float* xr = &x[r * n];
    double s = 0, q = 0;
    for (std::size_t i = 0; i < n; ++i) s += xr[i];
    const float m = static_cast<float>(s / static_cast<double>(n));
    for (std::size_t i = 0; i < n; ++i) q += static_cast<double>((xr[i] - m) * (xr[i] - m));
    const float var = static_cast<float>(q / static_cast<double>(n - static_cast<std::size_t>(ddof)));
    const float rstd = 1.0f / std::sqrt(var + eps);
    for (std::size_t i = 0; i < n; ++i) {
      float v = (xr[i] - m) * rstd;
      if (!g.empty()) v *= g[i];
      if (!b.empty()) v += b[i];
      y[r * n + i] = v;
    }
  }
  return y;
}

const char* dtype_flag(DType d) { return d == DType::bf16 ? " --dtype bf16" : ""; }

// `check` on a candidate: its exit code, text and JSON.
struct Verdict {
  int code;
  std::string out;
  nlohmann::json j;
};
Verdict check(const TempDir& t, const std::string& args, const Array& cand, const std::string& flag = "--y") {
  save(t / "cand.npy", cand);
  const Result r = cli("check" + args + " " + flag + " " + (t / "cand.npy") + " --json " + (t / "c.json"));
  return {r.code, r.out, r.code <= 1 ? load_json(t / "c.json") : nlohmann::json{}};
}

}  // namespace

TEST_CASE("check: 16-bit LayerNorm with beta twice, +0.006 or var over n-1 fail, and exact and f32-rounded-once pass (CLI)", "[cli][metric]") {
  for (DType d : {DType::bf16, DType::f16}) {
    for (std::size_t n : {std::size_t{256}, std::size_t{32}}) {
      INFO(name(d) << " width " << n);
      TempDir t;
      const std::size_t rows = 64;
      const Array x = rounded(d, {64, static_cast<std::int64_t>(n)}, normal(rows * n, 1, 0, 51 + n));
      const Array g = rounded(d, {static_cast<std::int64_t>(n)}, normal(n, 0.1, 1, 52));
      const Array b = rounded(d, {static_cast<std::int64_t>(n)}, normal(n, 0.03, 0, 53));  // beta ~0.03
      save(t / "x.npy", x), save(t / "g.npy", g), save(t / "b.npy", b);
      const std::string in = std::string(dtype_flag(d)) + " --x " + (t / "x.npy") + " --gamma " + (t / "g.npy") + " --beta " + (t / "b.npy");
      REQUIRE(cli("reference" + in + " --y " + (t / "exact.npy")).code == 0);
      const Result exact = cli("check" + in + " --y " + (t / "exact.npy"));
      INFO(exact.out);
      CHECK(exact.code == 0);
      CHECK_THAT(exact.out, Contains("y max 0 scaled ulp") && Contains("correctly rounded 100.00%"));

      const std::vector<double> f32 = layernorm_f32(x.v, n, g.v, b.v, 1e-5f);
      const Verdict faithful = check(t, in, rounded(d, x.shape, f32));
      INFO(faithful.out);
      CHECK(faithful.code == 0);
      CHECK(faithful.j["bias"]["pass"] == true);

      std::vector<double> twice = f32, shifted = f32;
      for (std::size_t i = 0; i < f32.size(); ++i) twice[i] += b.v[i % n], shifted[i] += 0.006;
      for (const auto& [what, y] : {std::pair{"beta twice", twice}, {"+0.006", shifted},
                                    {"var over n-1", layernorm_f32(x.v, n, g.v, b.v, 1e-5f, 1)}}) {
        INFO(what);
        const Verdict v = check(t, in, rounded(d, x.shape, y));
        INFO(v.out);
        CHECK(v.code == 1);
        CHECK(v.j["over_budget"].get<std::int64_t>() > 0);
        // The element named is one over its own allowance, and the text says so with its numbers.
        const auto& w = v.j["worst_over_budget"];
        CHECK(w["error"].get<double>() > w["allowed"].get<double>());
        CHECK_THAT(v.out, Contains("  over      y [") && Contains("scaled ulp > allowed"));
      }
    }
  }
}

TEST_CASE("check: LayerNorm rows far below eps negated, zeroed or with eps 1e-6 fail, and exact and f32 pass (CLI)", "[cli][metric]") {
  TempDir t;
  const Array x = rounded(DType::f32, {64, 256}, normal(64 * 256, 3e-10, 0, 3));  // |y*| <= ~4e-7 at eps 1e-5
  save(t / "x.npy", x);
  const std::string in = " --eps 1e-5 --x " + (t / "x.npy");
  REQUIRE(cli("reference" + in + " --y " + (t / "exact.npy")).code == 0);
  const std::vector<float> y = load_f32(t / "exact.npy");
  CHECK(cli("check" + in + " --y " + (t / "exact.npy")).code == 0);
  const Verdict f32 = check(t, in, rounded(DType::f32, x.shape, layernorm_f32(x.v, 256, {}, {}, 1e-5f)));
  INFO(f32.out);
  CHECK(f32.code == 0);
  std::vector<double> negated(y.size()), zeros(y.size(), 0.0);
  for (std::size_t i = 0; i < y.size(); ++i) negated[i] = -y[i];
  for (const auto& [what, cand] : {std::pair{"negated", negated}, {"zeros", zeros},
                                   {"eps 1e-6", layernorm_f32(x.v, 256, {}, {}, 1e-6f)}}) {
    INFO(what);
    const Verdict v = check(t, in, rounded(DType::f32, x.shape, cand));
    INFO(v.out);
    CHECK(v.code == 1);
    CHECK(v.j["max_ulp"].get<double>() > 1e3);  // errors of |y*| itself, in ulps of the row's spread
  }
}

TEST_CASE("check --dir bwd: 16-bit dbeta/dgamma zeroed, over half the rows or summed in 16 bits, and dx without mean(g), fail (CLI)", "[cli][metric][backward]") {
  for (DType d : {DType::bf16, DType::f16}) {
    INFO(name(d));
    TempDir t;
    const std::size_t rows = 2048, n = 64;  // |dbeta| ~ sqrt(rows); the old allowance grew like rows
    const Array x = rounded(d, {2048, 64}, normal(rows * n, 1, 0, 24)), dy = rounded(d, {2048, 64}, normal(rows * n, 1, 0, 25));
    const Array g = rounded(d, {64}, normal(n, 0.1, 1, 26));
    save(t / "x.npy", x), save(t / "dy.npy", dy), save(t / "g.npy", g);
    const std::string in = std::string(" --dir bwd") + dtype_flag(d) + " --x " + (t / "x.npy") + " --dy " + (t / "dy.npy") +
                           " --gamma " + (t / "g.npy") + " --beta " + (t / "g.npy");
    REQUIRE(cli("reference" + in + " --dgamma " + (t / "dg.npy") + " --dbeta " + (t / "db.npy")).code == 0);
    const Result exact = cli("check" + in + " --dgamma " + (t / "dg.npy") + " --dbeta " + (t / "db.npy"));
    INFO(exact.out);
    CHECK(exact.code == 0);

    // The column sums in f64 rounded once (the SIMD kernels' way), and the wrong ones.
    std::vector<double> sum(n, 0), half(n, 0), in16(n, 0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < n; ++j) {
        sum[j] += dy.v[r * n + j];
        if (r < rows / 2) half[j] += dy.v[r * n + j];
        in16[j] = round_to(d, in16[j] + dy.v[r * n + j]);  // an accumulator kept in the 16-bit format
      }
    const Verdict right = check(t, in, rounded(d, {64}, sum), "--dbeta");
    INFO(right.out);
    CHECK(right.code == 0);
    for (const auto& [what, cand, flag] : {std::tuple{"dbeta zeros", std::vector<double>(n, 0.0), "--dbeta"},
                                           {"dgamma zeros", std::vector<double>(n, 0.0), "--dgamma"},
                                           {"dbeta over half the rows", half, "--dbeta"},
                                           {"dbeta summed in 16 bits", in16, "--dbeta"}}) {
      INFO(what);
      const Verdict v = check(t, in, rounded(d, {64}, cand), flag);
      INFO(v.out);
      CHECK(v.code == 1);
      CHECK_THAT(v.out, Contains("  over      " + std::string(flag + 2) + " ["));
    }

    // dx of 16 x 4096 rows in f32, with and without mean(g).
    const std::size_t r2 = 16, n2 = 4096;
    const Array x2 = rounded(d, {16, 4096}, normal(r2 * n2, 1, 0, 27)), dy2 = rounded(d, {16, 4096}, normal(r2 * n2, 1, 0, 28));
    const Array g2 = rounded(d, {4096}, normal(n2, 0.1, 1, 29));
    save(t / "x2.npy", x2), save(t / "dy2.npy", dy2), save(t / "g2.npy", g2);
    std::vector<double> dx[2];
    for (int drop = 0; drop < 2; ++drop) {
      for (std::size_t r = 0; r < r2; ++r) {
        const float* xr = &x2.v[r * n2];
        const float* dr = &dy2.v[r * n2];
        double s = 0, q = 0, sg = 0, sgx = 0;  // sums in double, rounded once (as layernorm_f32)
        for (std::size_t i = 0; i < n2; ++i) s += xr[i];
        const float m = static_cast<float>(s / static_cast<double>(n2));
        for (std::size_t i = 0; i < n2; ++i) q += static_cast<double>((xr[i] - m) * (xr[i] - m));
        const float rstd = 1.0f / std::sqrt(static_cast<float>(q / static_cast<double>(n2)) + 1e-5f);
        for (std::size_t i = 0; i < n2; ++i) sg += dr[i] * g2.v[i], sgx += dr[i] * g2.v[i] * ((xr[i] - m) * rstd);
        const float mg = drop ? 0.0f : static_cast<float>(sg / static_cast<double>(n2));
        const float mgx = static_cast<float>(sgx / static_cast<double>(n2));
        for (std::size_t i = 0; i < n2; ++i) dx[drop].push_back(rstd * (dr[i] * g2.v[i] - mg - (xr[i] - m) * rstd * mgx));
      }
    }
    const std::string in2 = std::string(" --dir bwd") + dtype_flag(d) + " --x " + (t / "x2.npy") + " --dy " + (t / "dy2.npy") +
                            " --gamma " + (t / "g2.npy");
    const Verdict with = check(t, in2, rounded(d, x2.shape, dx[0]), "--dx");
    INFO(with.out);
    CHECK(with.code == 0);
    const Verdict without = check(t, in2, rounded(d, x2.shape, dx[1]), "--dx");
    INFO(without.out);
    CHECK(without.code == 1);
  }
}

TEST_CASE("check: an f32 bias of 3 scaled ulps on every element, within every element's budget, fails by its mean (CLI)", "[cli][metric]") {
  TempDir t;
  const Array x = rounded(DType::f32, {512, 64}, normal(512 * 64, 1, 0, 9));
  save(t / "x.npy", x);
  const std::string in = " --x " + (t / "x.npy");
  REQUIRE(cli("reference" + in + " --y " + (t / "exact.npy")).code == 0);
  const std::vector<float> y = load_f32(t / "exact.npy");
  std::vector<double> up(y.size()), jitter(y.size());
  std::mt19937 rng(10);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double s = std::max(1.0, std::fabs(static_cast<double>(y[i])));  // the element's scale (gamma 1, beta 0)
    up[i] = y[i] + 3 * std::ldexp(1.0, std::ilogb(s) - 23);
    jitter[i] = std::nextafter(y[i], (rng() & 1) ? 1e30f : -1e30f);
  }
  const Verdict biased = check(t, in, rounded(DType::f32, x.shape, up));
  INFO(biased.out);
  CHECK(biased.code == 1);
  CHECK(biased.j["over_budget"] == 0);  // every element within 8 + kappa ...
  CHECK(biased.j["bias"]["pass"] == false);  // ... and all of them pushed up: 0.5 + 3 x 8 / sqrt(512) = 1.56 < 3
  CHECK(biased.j["bias"]["mean_signed_error"].get<double>() > 2);
  CHECK(biased.j["bias"]["units"] == 512);
  CHECK_THAT(biased.out, Contains("FAIL") && Contains("a systematic error, FAIL"));
  const Verdict ok = check(t, in, rounded(DType::f32, x.shape, jitter));
  INFO(ok.out);
  CHECK(ok.code == 0);
}

TEST_CASE("check: a FAIL just over budget prints the digits that show it (CLI)", "[cli][metric]") {
  TempDir t;
  io::save(t / "x.npy", "<f4", {1, 2}, std::vector<float>{-1.0f, 1.0f}.data());  // eps 0: y* = -1, 1 exactly
  io::save(t / "y.npy", "<f4", {1, 2}, std::vector<float>{-1.0f, 1.0f + 8 * 0x1p-23f}.data());  // 8 ulps of 1
  const Result r = cli("check --eps 0 --max-ulp 7.99999 --max-ulp-per-kappa 0 --x " + (t / "x.npy") + " --y " + (t / "y.npy"));
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("y max 8 scaled ulp (budget 7.99999 + 0*kappa)"));
  CHECK_THAT(r.out, Contains("[0, 1]: got 1.0000009536743164, exact 1, 8 scaled ulp > allowed 7.99999"));
}
