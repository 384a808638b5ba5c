// The exact reference: hand-computed values, and bit-exactness (y, mean, rstd) against an
// independent exact computation (tests/independent_exact.hpp) on cases built to be hard.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "independent_exact.hpp"
#include "kernel_cases.hpp"
#include "lnorm/format.hpp"
#include "lnorm/reference.hpp"

using namespace lnorm;

namespace {

using lnorm::testing::encode;
using lnorm::testing::in_format;
std::vector<double> normal_row(DType d, std::size_t n, double offset, double scale, std::uint64_t seed) {
  return lnorm::testing::normal(d, n, offset, scale, seed);
}


using Out = lnorm::testing::ReferenceRowValues;

Out run_reference(DType d, double eps, const std::vector<double>& x, const std::vector<double>* g = nullptr,
                  const std::vector<double>* b = nullptr) {
  RowReferencer ref(d, eps);
  return lnorm::testing::reference_row(ref, d, d, x, g, b);
}

bool same(double a, double b) { return lnorm::testing::same_value(a, b); }

// Compares lnorm's reference with the independent one on a row; returns a description of the first
// difference (empty when bit-identical).
std::string compare_with_independent(DType d, double eps, const std::vector<double>& x,
                                     const std::vector<double>* g = nullptr, const std::vector<double>* b = nullptr) {
  const Format f = format_of(d), sf = format_of(stats_dtype(d));
  const double eps_k = d == DType::f64 ? eps : static_cast<double>(static_cast<float>(eps));
  const Out got = run_reference(d, eps_k, x, g, b);
  const auto want = lnorm::testing::independent_layernorm(f, sf, x, g, b, eps_k);
  if (!same(got.row.mean, want.mean))
    return "mean: got " + std::to_string(got.row.mean) + " want " + std::to_string(want.mean);
  if (!same(got.row.rstd, want.rstd))
    return "rstd: got " + std::to_string(got.row.rstd) + " want " + std::to_string(want.rstd);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same(got.y[i], want.y[i])) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "y[%zu]: got %.17g want %.17g (x = %.17g)", i, got.y[i], want.y[i], x[i]);
      return buf;
    }
  return "";
}

}  // namespace

TEST_CASE("reference: seed examples match hand-computed values", "[reference]") {
  // [1,2,3,4], eps 0: mean 2.5, var 1.25, y = (x − 2.5)/sqrt(1.25) = ±3/sqrt(5), ±1/sqrt(5).
  const Out a = run_reference(DType::f32, 0.0, {1, 2, 3, 4});
  CHECK(a.row.mean == 2.5);
  CHECK(a.row.rstd == static_cast<float>(0.894427190999915878564));  // 2/sqrt(5)
  CHECK(a.y[0] == static_cast<float>(-1.34164078649987381784));
  CHECK(a.y[1] == static_cast<float>(-0.44721359549995793928));
  CHECK(a.y[2] == static_cast<float>(0.44721359549995793928));
  CHECK(a.y[3] == static_cast<float>(1.34164078649987381784));
  CHECK(a.row.kappa == Approx(2.5 / std::sqrt(1.25)));
  // [2,4,6], eps 0: mean 4, var 8/3, y = ±sqrt(3/2), 0.
  const Out b = run_reference(DType::f32, 0.0, {2, 4, 6});
  CHECK(b.y[0] == static_cast<float>(-1.22474487139158904909));
  CHECK(b.y[1] == 0.0);
  CHECK(b.y[2] == static_cast<float>(1.22474487139158904909));
  // [5,5,5,5] with eps > 0: y = beta exactly.
  const std::vector<double> beta{0.5, -1, 2, 3};
  const Out c = run_reference(DType::f32, static_cast<float>(1e-5), {5, 5, 5, 5}, nullptr, &beta);
  CHECK(c.y == beta);
  CHECK(c.row.mean == 5);
  CHECK(c.row.kappa == Approx(5 / std::sqrt(static_cast<double>(static_cast<float>(1e-5)))));  // |mean|/sqrt(var + eps)
  // ... and with eps = 0: rstd = +Inf and y = NaN (0·Inf), as IEEE arithmetic says.
  const Out z = run_reference(DType::f32, 0.0, {5, 5, 5, 5});
  CHECK(std::isinf(z.row.rstd));
  for (double v : z.y) CHECK(std::isnan(v));
}

TEST_CASE("reference: exact ties round to even (rational rstd)", "[reference]") {
  // x = [-1, 1] → z = ±1 exactly; γ = 2^-24 and β = 1 put y = 1 ± 2^-24 exactly on f32 midpoints:
  // 1 + 2^-24 ties to 1 (even), 1 − 2^-24 is representable... use 1 − 2^-25 (tie between
  // 1 − 2^-24 (odd) and 1 (even)) via γ = 2^-25.
  const std::vector<double> g1{0x1p-24, 0x1p-24}, g2{0x1p-25, 0x1p-25}, b{1, 1};
  const Out a = run_reference(DType::f32, 0.0, {-1, 1}, &g1, &b);
  CHECK(a.y[0] == 1 - 0x1p-24);  // exactly representable
  CHECK(a.y[1] == 1.0);          // 1 + 2^-24 is a tie: even is 1
  const Out c = run_reference(DType::f32, 0.0, {-1, 1}, &g2, &b);
  CHECK(c.y[0] == 1.0);  // 1 − 2^-25 is a tie between 1 − 2^-24 (odd mantissa) and 1 (even)
  CHECK(c.y[1] == 1.0);  // 1 + 2^-25 is below the tie: 1
  // The independent computation agrees.
  CHECK(compare_with_independent(DType::f32, 0.0, {-1, 1}, &g1, &b) == "");
  CHECK(compare_with_independent(DType::f32, 0.0, {-1, 1}, &g2, &b) == "");
}

TEST_CASE("reference: bit-exact against an independent exact computation on hard cases", "[reference][slow-ish]") {
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  for (DType d : dtypes) {
    const Format f = format_of(d);
    const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
    const double min_sub = std::ldexp(1.0, f.lsb_exponent());
    std::vector<std::pair<std::string, std::vector<double>>> rows;
    for (std::size_t n : {1u, 3u, 17u, 4097u})
      rows.push_back({"normal n=" + std::to_string(n), normal_row(d, n, 0, 1, n)});
    // Offsets: kappa up to the format's limit (f32 keeps ~7 digits, so 1e15 needs a matching spread).
    for (double offset : {1e4, 1e7, 1e15}) {
      const double scale = std::max(1.0, offset * std::ldexp(1.0, -f.precision + 4));
      if (offset < max_finite) rows.push_back({"offset " + std::to_string(offset), normal_row(d, 64, offset, scale, 7)});
    }
    rows.push_back({"constant", std::vector<double>(33, round_to_format(f, 3.14159))});
    rows.push_back({"near overflow", in_format(d, {max_finite, -max_finite, max_finite / 2, max_finite, -max_finite / 3})});
    rows.push_back({"all max", std::vector<double>(5, max_finite)});
    rows.push_back({"subnormal", {min_sub, 3 * min_sub, 0, -min_sub, 17 * min_sub, 2 * min_sub}});
    rows.push_back({"mixed tiny and huge", in_format(d, {min_sub, max_finite / 4, -1, 1e-3, 0})});
    rows.push_back({"nan row", {1, NAN, 2}});
    rows.push_back({"inf row", {1, INFINITY, 2}});
    rows.push_back({"seed 1234", {1, 2, 3, 4}});
    rows.push_back({"40000..", in_format(d, {40000, 40001, 40002, 40003})});
    for (double eps : {0.0, 1e-12, 1e-5, 1.0}) {
      for (const auto& [label, x] : rows) {
        INFO(std::string(name(d)) << " " << label << " eps " << eps);
        CHECK(compare_with_independent(d, eps, x) == "");
      }
    }
    // gamma/beta, random and with zeros.
    const auto x = normal_row(d, 17, 3, 2, 99);
    auto g = normal_row(d, 17, 1, 0.5, 5), b = normal_row(d, 17, 0, 0.3, 6);
    g[3] = 0;
    b[4] = 0;
    g[5] = 0;
    b[5] = 0;
    INFO(std::string(name(d)) << " affine");
    CHECK(compare_with_independent(d, 1e-5, x, &g, &b) == "");
    const std::vector<double> big_g(17, max_finite / 8);  // outputs overflow to Inf in the format
    CHECK(compare_with_independent(d, 1e-5, x, &big_g, &b) == "");
  }
}

TEST_CASE("reference: bit-exact at width 65537 (f32, bf16)", "[reference][slow-ish]") {
  for (DType d : {DType::f32, DType::bf16}) {
    INFO(name(d));
    CHECK(compare_with_independent(d, 1e-5, normal_row(d, 65537, 100, 1, 3)) == "");
  }
}

TEST_CASE("reference: N-d inputs normalized from every axis are rows x cols of the flattened tensor",
          "[reference]") {
  // A 3x4x5 tensor from axis a is rows = prod(shape[:a]) rows of cols = prod(shape[a:]).
  const auto x = normal_row(DType::f32, 60, 2, 3, 11);
  for (int axis = 0; axis < 3; ++axis) {
    const std::int64_t rows = axis == 0 ? 1 : axis == 1 ? 3 : 12, cols = 60 / rows;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<double> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
      INFO("axis " << axis << " row " << r);
      CHECK(compare_with_independent(DType::f32, 1e-5, row) == "");
    }
  }
}

TEST_CASE("reference: non-finite rows give NaN for that row only", "[reference]") {
  const std::vector<float> x{1, 2, NAN, 4, 5, 6, 7, 8, INFINITY};  // 3 rows of 3
  std::vector<float> y(9), mean(3), rstd(3);
  double kappa[3];
  const Problem p = make_problem(3, 3, DType::f32, 1e-5, false, false);
  reference(p, Tensors{x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data()}, kappa);
  for (int i = 0; i < 3; ++i) CHECK(std::isnan(y[static_cast<std::size_t>(i)]));
  for (int i = 3; i < 6; ++i) CHECK(std::isfinite(y[static_cast<std::size_t>(i)]));
  for (int i = 6; i < 9; ++i) CHECK(std::isnan(y[static_cast<std::size_t>(i)]));
  CHECK(std::isnan(mean[0]));
  CHECK(mean[1] == 5);
  CHECK(std::isnan(rstd[2]));
}

TEST_CASE("reference: the result does not depend on the thread count", "[reference]") {
  const auto xd = normal_row(DType::f32, 7 * 129, 10, 1, 5);
  const std::vector<float> x(xd.begin(), xd.end());
  std::vector<float> y1(x.size()), y3(x.size()), m1(7), m3(7), r1(7), r3(7);
  reference(make_problem(7, 129, DType::f32, 1e-5, false, false, 1), Tensors{x.data(), nullptr, nullptr, y1.data(), m1.data(), r1.data()});
  reference(make_problem(7, 129, DType::f32, 1e-5, false, false, 3), Tensors{x.data(), nullptr, nullptr, y3.data(), m3.data(), r3.data()});
  CHECK(std::memcmp(y1.data(), y3.data(), y1.size() * 4) == 0);
  CHECK(std::memcmp(r1.data(), r3.data(), r1.size() * 4) == 0);
}

// round_to_format is the rounding every exact answer goes through. The oracle: the nearest of the two
// format values around v (ties to the even pattern), found in the sorted table of every finite f16 or bf16
// value; for f32, whose table is too large, the two neighbours come from the bits of the truncated float.
TEST_CASE("round_to_format is round-to-nearest-even into the format, overflow to Inf, on every binade",
          "[reference][format]") {
  std::mt19937_64 rng(11);
  const auto check_format = [&](DType d, const std::vector<double>& sorted, int tries) {
    const Format f = format_of(d);
    const double top = sorted.back(), inf = std::numeric_limits<double>::infinity();
    for (int t = 0; t < tries; ++t) {
      // Any double from far below the smallest subnormal to far above the largest finite value, and
      // the midpoints between neighbours (the ties).
      double v;
      std::size_t k = rng() % (sorted.size() - 1);
      switch (t % 3) {
        case 0: v = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng), static_cast<int>(rng() % 400) - 200); break;
        case 1: v = 0.5 * (sorted[k] + sorted[k + 1]); break;
        default: v = sorted[k] + (sorted[k + 1] - sorted[k]) * std::uniform_real_distribution<double>(0, 1)(rng); break;
      }
      if (rng() & 1) v = -v;
      const double a = std::fabs(v);
      double want;
      const double gap = top - sorted[sorted.size() - 2];
      if (a >= top + gap / 2) {
        want = inf;  // past the midpoint to the next binade's first value: IEEE's overflow
      } else if (a >= top) {
        want = top;
      } else {
        const auto hi = std::upper_bound(sorted.begin(), sorted.end(), a);
        const double h = *hi, l = *(hi - 1);
        const std::size_t li = static_cast<std::size_t>(hi - 1 - sorted.begin());
        want = (a - l < h - a) ? l : (h - a < a - l) ? h : ((li % 2 == 0) ? l : h);
      }
      want = std::copysign(want, v);
      INFO(std::string(name(d)) << " v = " << v);
      REQUIRE(round_to_format(f, v) == want);
      REQUIRE(std::signbit(round_to_format(f, v)) == std::signbit(v));
    }
  };
  // Non-negative finite values by pattern: ordinals 0..inf-1 are increasing, so sorted and their
  // parity is the mantissa's last bit (ties to even).
  const auto table = [](DType d) {
    const Format f = format_of(d);
    std::vector<double> out;
    for (std::int64_t k = 0; k < f.inf_ordinal(); ++k) out.push_back(bits_to_double(f, bits_of_ordinal(f, k)));
    return out;
  };
  check_format(DType::f16, table(DType::f16), 200000);
  check_format(DType::bf16, table(DType::bf16), 200000);
  // f32: neighbours from the ordinal of the float below v.
  const Format f = format_of(DType::f32);
  for (int t = 0; t < 200000; ++t) {
    const double v = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng), static_cast<int>(rng() % 320) - 160) *
                     ((rng() & 1) ? -1 : 1);
    const double a = std::fabs(v);
    // The largest float <= a, by bisection on the ordinals (no float conversion involved).
    std::int64_t lo = 0, hi = f.inf_ordinal();
    while (hi - lo > 1) {
      const std::int64_t mid = (lo + hi) / 2;
      (bits_to_double(f, bits_of_ordinal(f, mid)) <= a ? lo : hi) = mid;
    }
    const double l = bits_to_double(f, bits_of_ordinal(f, lo));
    const double h = hi == f.inf_ordinal() ? std::ldexp(1.0, 128) : bits_to_double(f, bits_of_ordinal(f, hi));
    double want = (a - l < h - a) ? l : (h - a < a - l) ? h : ((lo % 2 == 0) ? l : h);
    if (want == std::ldexp(1.0, 128)) want = std::numeric_limits<double>::infinity();
    INFO("f32 v = " << v);
    REQUIRE(round_to_format(f, v) == std::copysign(want, v));
  }
}
