// The backward reference (reference/include/lnorm/backward.hpp): correctly rounded against an independent
// 1000-bit evaluation of the textbook formulas; the formulas themselves against central finite differences
// of a 1000-bit forward; exact zeros, ties and NaN isolation; the documented undecided case.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "independent_backward.hpp"
#include "lnorm/backward.hpp"
#include "kernel_cases.hpp"
#include "lnorm/format.hpp"

using namespace lnorm;
using lnorm::testing::Big;
using lnorm::testing::round_big;

namespace {

struct Data {
  Problem p;
  std::vector<double> x, dy, gamma;  // values of p.dtype / p.param_dtype
};

using testing::encode;
double decode(DType d, const std::vector<std::byte>& b, std::size_t i) { return value_at(d, b.data(), static_cast<std::int64_t>(i)); }

Data draw_data(Op op, DType d, std::int64_t rows, std::int64_t cols, double offset, double eps, bool gamma,
                 double gamma_offset, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  const Format f = format_of(d);
  Data out;
  out.p = with_op(make_problem(rows, cols, d, eps, gamma, false), op);
  if (gamma) out.p = set_params(out.p, d, gamma_offset);
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    out.x.push_back(round_to_format(f, offset + nd(rng)));
    out.dy.push_back(round_to_format(f, nd(rng)));
  }
  for (std::int64_t j = 0; gamma && j < cols; ++j) out.gamma.push_back(round_to_format(f, 1 + 0.3 * nd(rng)));
  return out;
}

struct Run {
  std::vector<std::byte> dx, dgamma, dbeta;
  BackwardReference ref;
};
Run run(const Data& d, int threads = 1) {
  Problem p = d.p;
  p.threads = threads;
  const auto x = encode(p.dtype, d.x), dy = encode(p.dtype, d.dy), g = encode(p.param_dtype, d.gamma);
  Run out{std::vector<std::byte>(x.size()), std::vector<std::byte>(static_cast<std::size_t>(p.cols) * size_of(p.param_dtype)),
          std::vector<std::byte>(static_cast<std::size_t>(p.cols) * size_of(p.param_dtype)), {}};
  reference_backward(p, x.data(), d.gamma.empty() ? nullptr : g.data(), dy.data(), out.dx.data(), out.dgamma.data(),
                     out.dbeta.data(), &out.ref);
  return out;
}

void check_against_textbook(const Data& d) {
  const Run r = run(d);
  const testing::BigGrads b = testing::textbook_gradients(d.p, d.x, d.dy, d.gamma);
  const Format f = format_of(d.p.dtype), pf = format_of(d.p.param_dtype);
  int compared = 0;
  for (std::size_t i = 0; i < b.dx.size(); ++i) {
    const auto want = round_big(f, b.dx[i]);
    if (!want) continue;
    INFO(name(d.p.op) << " " << name(d.p.dtype) << " dx[" << i << "] = " << decode(d.p.dtype, r.dx, i) << ", textbook "
                      << b.dx[i].convert_to<double>());
    if (std::isnan(*want)) {  // a constant row with eps = 0 (bf16 rounds offset rows to constants)
      REQUIRE(std::isnan(decode(d.p.dtype, r.dx, i)));
      continue;
    }
    REQUIRE(decode(d.p.dtype, r.dx, i) == *want);
    // The metric's reference: the value to double precision (measured against the scale: an exact 0 reads
    // as 2^-1000-ish noise in the textbook's cancelling sum), and the scale bounds it (|dx| ≤ s).
    REQUIRE(std::fabs(r.ref.dx[i].y_hi - b.dx[i].convert_to<double>()) <=
            std::fabs(r.ref.dx[i].y_hi) * 0x1p-50 + r.ref.dx[i].scale * 0x1p-90);
    REQUIRE(std::fabs(r.ref.dx[i].y_hi) <= r.ref.dx[i].scale * (1 + 0x1p-40));
    ++compared;
  }
  for (std::size_t j = 0; j < b.dgamma.size(); ++j) {
    const auto wg = round_big(pf, b.dgamma[j]), wb = round_big(pf, b.dbeta[j]);
    INFO(name(d.p.op) << " " << name(d.p.dtype) << " column " << j);
    if (wg && std::isnan(*wg)) REQUIRE(std::isnan(decode(d.p.param_dtype, r.dgamma, j)));
    else if (wg) REQUIRE(decode(d.p.param_dtype, r.dgamma, j) == *wg);
    if (wb) REQUIRE(decode(d.p.param_dtype, r.dbeta, j) == *wb);
  }
  CHECK(r.ref.dgamma_undecided == 0);
  CHECK(compared > static_cast<int>(b.dx.size()) * 9 / 10);
}

}  // namespace

TEST_CASE("backward reference: dx, dgamma and dbeta correctly rounded against a 1000-bit textbook evaluation", "[backward]") {
  std::uint64_t seed = 1;
  for (Op op : {Op::layernorm, Op::rmsnorm}) {
    for (DType d : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{7, 13}, {3, 64}, {2, 1}, {16, 5}}) {
        for (double offset : {0.0, 300.0}) {
          for (double eps : {1e-5, 0.0}) {
            if (cols == 1 && eps == 0) continue;  // a constant row with eps = 0 has no gradient (NaN: tested below)
            const Data data = draw_data(op, d, rows, cols, offset, eps, true, seed % 3 == 0 ? 1.0 : 0.0, seed);
            ++seed;
            check_against_textbook(data);
          }
        }
      }
    }
  }
}

TEST_CASE("backward reference: the gradient formulas match central finite differences of a 1000-bit forward", "[backward]") {
  for (Op op : {Op::layernorm, Op::rmsnorm}) {
    const Data d = draw_data(op, DType::f64, 3, 6, 2.0, 1e-3, true, 0.0, 77);
    const Run r = run(d);
    const std::int64_t R = d.p.rows, n = d.p.cols;
    // L(x, gamma) = Σ dy·y: its gradients are dx, dgamma and (for beta) dbeta.
    auto loss = [&](const std::vector<Big>& x, const std::vector<Big>& gamma) {
      Big L = 0;
      for (std::int64_t rr = 0; rr < R; ++rr) {
        Big mean = 0, var = 0;
        for (std::int64_t i = 0; i < n; ++i) mean += x[rr * n + i];
        mean = op.norm == Norm::layernorm ? mean / n : Big(0);
        for (std::int64_t i = 0; i < n; ++i) var += (x[rr * n + i] - mean) * (x[rr * n + i] - mean);
        const Big rstd = 1 / sqrt(var / n + Big(d.p.eps));
        for (std::int64_t i = 0; i < n; ++i) L += Big(d.dy[rr * n + i]) * (x[rr * n + i] - mean) * rstd * gamma[i];
      }
      return L;
    };
    std::vector<Big> x(d.x.begin(), d.x.end()), g(d.gamma.begin(), d.gamma.end());
    const Big h = ldexp(Big(1), -300);
    for (std::size_t i = 0; i < x.size(); ++i) {
      auto xp = x, xm = x;
      xp[i] += h, xm[i] -= h;
      const double fd = ((loss(xp, g) - loss(xm, g)) / (2 * h)).convert_to<double>();
      INFO(name(op) << " dx[" << i << "]: finite difference " << fd << ", reference " << r.ref.dx[i].y_hi);
      CHECK(std::fabs(fd - r.ref.dx[i].y_hi) <= 1e-14 * r.ref.dx[i].scale);
    }
    for (std::int64_t j = 0; j < n; ++j) {
      auto gp = g, gm = g;
      gp[j] += h, gm[j] -= h;
      const double fd = ((loss(x, gp) - loss(x, gm)) / (2 * h)).convert_to<double>();
      INFO(name(op) << " dgamma[" << j << "]: finite difference " << fd << ", reference " << r.ref.dgamma[j].y_hi);
      CHECK(std::fabs(fd - r.ref.dgamma[j].y_hi) <= 1e-14 * r.ref.dgamma[j].scale);
    }
  }
}

TEST_CASE("backward reference: width-1 LayerNorm rows and dy = 0 give exact zeros, and dbeta is Σ dy", "[backward]") {
  Data d = draw_data(Op::layernorm, DType::f32, 5, 1, 3.0, 1e-5, true, 0.0, 5);
  Run r = run(d);
  for (std::int64_t i = 0; i < 5; ++i) CHECK(std::bit_cast<std::uint32_t>(static_cast<float>(decode(DType::f32, r.dx, i))) == 0u);
  CHECK(std::bit_cast<std::uint32_t>(static_cast<float>(decode(DType::f32, r.dgamma, 0))) == 0u);  // every xhat is 0
  double sum = 0;
  for (double v : d.dy) sum += v;  // 5 small f32 values: exact in double
  CHECK(decode(DType::f32, r.dbeta, 0) == static_cast<double>(static_cast<float>(sum)));
  d = draw_data(Op::rmsnorm, DType::bf16, 4, 9, 0.0, 1e-5, true, 0.0, 6);
  std::fill(d.dy.begin(), d.dy.end(), 0.0);
  r = run(d);
  for (std::size_t i = 0; i < 36; ++i) CHECK(decode(DType::bf16, r.dx, i) == 0.0);
  for (std::size_t j = 0; j < 9; ++j) CHECK((decode(DType::bf16, r.dgamma, j) == 0.0 && decode(DType::bf16, r.dbeta, j) == 0.0));
}

TEST_CASE("backward reference: a NaN poisons its dx row and the columns it touches, nothing else, and an Inf gives IEEE's sums", "[backward]") {
  Data d = draw_data(Op::layernorm, DType::f32, 4, 6, 0.0, 1e-5, true, 0.0, 8);
  d.dy[1 * 6 + 3] = NAN;  // dy[1][3]: dx row 1 (through mean(g)), dgamma and dbeta of column 3
  Run r = run(d);
  for (std::int64_t row = 0; row < 4; ++row)
    for (std::int64_t i = 0; i < 6; ++i) CHECK(std::isnan(decode(DType::f32, r.dx, row * 6 + i)) == (row == 1));
  for (std::size_t j = 0; j < 6; ++j) {
    CHECK(std::isnan(decode(DType::f32, r.dgamma, j)) == (j == 3));
    CHECK(std::isnan(decode(DType::f32, r.dbeta, j)) == (j == 3));
  }
  d.dy[1 * 6 + 3] = 0.5;
  d.x[2 * 6 + 1] = NAN;  // row 2's statistics: its dx row, and dgamma of every column (row 2 touches them all)
  r = run(d);
  for (std::int64_t row = 0; row < 4; ++row)
    for (std::int64_t i = 0; i < 6; ++i) CHECK(std::isnan(decode(DType::f32, r.dx, row * 6 + i)) == (row == 2));
  for (std::size_t j = 0; j < 6; ++j) {
    CHECK(std::isnan(decode(DType::f32, r.dgamma, j)));
    CHECK_FALSE(std::isnan(decode(DType::f32, r.dbeta, j)));  // dbeta does not read x
  }
  // An infinite dy: IEEE's sums. dbeta_3 = -Inf; dgamma_3 = -Inf·sign(xhat) (one infinite term); with a
  // +Inf in another row of the column, dbeta is NaN (Inf - Inf); dx of both rows NaN (mean(g) = ±Inf).
  d.x[2 * 6 + 1] = 0.25;
  d.dy[1 * 6 + 3] = -INFINITY;
  r = run(d);
  for (std::int64_t row = 0; row < 4; ++row)
    for (std::int64_t i = 0; i < 6; ++i) CHECK(std::isnan(decode(DType::f32, r.dx, row * 6 + i)) == (row == 1));
  double mean1 = 0;
  for (std::int64_t i = 0; i < 6; ++i) mean1 += d.x[static_cast<std::size_t>(6 + i)] / 6;
  CHECK(decode(DType::f32, r.dbeta, 3) == -INFINITY);
  CHECK(decode(DType::f32, r.dgamma, 3) == (d.x[6 + 3] > mean1 ? -INFINITY : INFINITY));
  for (std::size_t j = 0; j < 6; ++j)
    if (j != 3) CHECK((std::isfinite(decode(DType::f32, r.dbeta, j)) && std::isfinite(decode(DType::f32, r.dgamma, j))));
  d.dy[3 * 6 + 3] = INFINITY;
  r = run(d);
  CHECK(std::isnan(decode(DType::f32, r.dbeta, 3)));
  // A constant row with eps = 0 has no xhat: NaN like the forward's y.
  Data c = draw_data(Op::layernorm, DType::f32, 2, 4, 0.0, 0.0, false, 0.0, 9);
  std::fill(c.x.begin(), c.x.begin() + 4, 1.5);
  const Run rc = run(c);
  for (std::size_t i = 0; i < 8; ++i) CHECK(std::isnan(decode(DType::f32, rc.dx, i)) == (i < 4));
}

TEST_CASE("backward reference: dgamma at an exact tie is decided exactly (rational terms), ties to even", "[backward]") {
  // Width-2 LayerNorm rows with eps = 0: W = (a - b)^2 is a perfect square and xhat = ±1, so dgamma is a sum of
  // dyadic terms: dy = 1 and 2^-24 on x = (0, 1) rows make dgamma_1 = 1 + 2^-24, the midpoint of 1 and
  // 1 + 2^-23 in f32: even is 1. With 2^-24 + 2^-40 it rounds up.
  Data d;
  d.p = with_op(make_problem(2, 2, DType::f32, 0.0, false, false), Op::layernorm);
  d.x = {0, 1, 0, 1};  // xhat = -1, +1 on both rows
  d.dy = {0, 1, 0, 0x1p-24};
  Run r = run(d);
  CHECK(decode(DType::f32, r.dgamma, 1) == 1.0);
  CHECK(r.ref.dgamma_undecided == 0);
  d.dy = {0, 1, 0, 0x1p-24 + 0x1p-40};
  r = run(d);
  CHECK(decode(DType::f32, r.dgamma, 1) == 1.0 + 0x1p-23);
}

TEST_CASE("backward reference: terms that cancel exactly across rows scaled by 2^k are 0, and by 3 the column is counted undecided",
          "[backward]") {
  // eps = 0: xhat is scale invariant, so rows x and 2x have the same xhat, and dy = +1, -1 cancel dgamma exactly.
  // W differs by 4: one square class, merged, coefficient 0: exactly +0.
  Data d;
  d.p = with_op(make_problem(2, 3, DType::f32, 0.0, false, false), Op::layernorm);
  d.x = {0.25, 1, 3, 0.5, 2, 6};
  d.dy = {1, 1, 1, -1, -1, -1};
  Run r = run(d);
  for (std::size_t j = 0; j < 3; ++j) CHECK(std::bit_cast<std::uint32_t>(static_cast<float>(decode(DType::f32, r.dgamma, j))) == 0u);
  CHECK(r.ref.dgamma_undecided == 0);
  // Rows x and 3x: W differs by 9, not a power of 4 — the documented undecided case (the value is 0, rounded
  // from the 6144-bit evaluation, and counted).
  d.x = {0.25, 1, 3, 0.75, 3, 9};
  r = run(d);
  for (std::size_t j = 0; j < 3; ++j) CHECK(decode(DType::f32, r.dgamma, j) == 0.0);
  CHECK(r.ref.dgamma_undecided > 0);
}

TEST_CASE("backward reference: the same bits at every thread count", "[backward]") {
  const Data d = draw_data(Op::layernorm, DType::bf16, 37, 17, 5.0, 1e-5, true, 1.0, 12);
  const Run one = run(d, 1);
  for (int t : {2, 3, 8}) {
    const Run r = run(d, t);
    CHECK(r.dx == one.dx);
    CHECK(r.dgamma == one.dgamma);
    CHECK(r.dbeta == one.dbeta);
  }
}
