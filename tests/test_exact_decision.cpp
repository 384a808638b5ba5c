// kernels/cpu/exact_decision.hpp: the _cr kernels' exact rounding decision gives, for every element, the bits
// of the exact reference (lnorm_reference's RowReferencer, which shares no code with it) — on random rows, on
// rows built to be hard (exact ties, near-ties, cancellation, huge outliers, subnormals, tiny and zero eps,
// overflow) and from any starting guess.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "exact_decision.hpp"
#include "lnorm/format.hpp"
#include "lnorm/problem.hpp"
#include "lnorm/reference.hpp"

using namespace lnorm;
namespace ex = lnorm::cpu::exact;

namespace {

struct RowCase {
  std::string label;
  Op op = Op::layernorm;
  DType d = DType::f32, param = DType::f32;
  double eps = 0, offset = 0;          // exactly as the kernels would receive them (eps as an f64 on purpose)
  std::vector<double> x, gamma, beta;  // values of d / param; gamma or beta empty: absent
};

std::vector<double> rounded(DType d, std::vector<double> v) {
  for (double& e : v) e = round_to_format(format_of(d), e);
  return v;
}

std::vector<std::byte> encode(DType d, const std::vector<double>& v) {
  std::vector<std::byte> out(v.size() * size_of(d));
  for (std::size_t i = 0; i < v.size(); ++i) set_bits_at(d, out.data(), static_cast<std::int64_t>(i), double_to_bits(format_of(d), v[i]));
  return out;
}

// w = C + γ as two doubles, exactly (Knuth's TwoSum): what the kernels hand round_element.
void weight(const RowCase& c, std::size_t i, double& hi, double& lo) {
  hi = 1, lo = 0;
  if (c.gamma.empty()) return;
  hi = c.offset + c.gamma[i];
  const double bb = hi - c.offset;
  lo = (c.offset - (hi - bb)) + (c.gamma[i] - bb);
}

// A plain f64 evaluation rounded to the format: a guess of the kind the kernels have (0 where it is not finite).
std::uint32_t naive_guess(const RowCase& c, std::size_t i) {
  const double n = static_cast<double>(c.x.size());
  double mean = 0, ms = 0;
  if (c.op.norm == Norm::layernorm)
    for (double v : c.x) mean += v / n;
  for (double v : c.x) ms += (v - mean) * (v - mean) / n;
  double wh, wl;
  weight(c, i, wh, wl);
  const double y = (c.x[i] - mean) / std::sqrt(ms + c.eps) * wh + (c.beta.empty() ? 0.0 : c.beta[i]);
  return std::isfinite(y) ? static_cast<std::uint32_t>(double_to_bits(format_of(c.d), round_to_format(format_of(c.d), y))) : 0;
}

// Every element of the row through round_element, from several guesses (the answer itself, the f64 estimate,
// +0, a random pattern, and the far ends of the format), against the reference's bits. Returns the mismatches;
// `first` describes the first one; `fallbacks` counts the elements the reference had to decide exactly (its
// double-double could not: the hard ones).
int mismatches(const RowCase& c, std::mt19937_64& rng, std::string& first, std::int64_t& fallbacks, int guesses_per_element) {
  const auto n = static_cast<std::int64_t>(c.x.size());
  Problem p;
  p.rows = 1, p.cols = n, p.dtype = c.d, p.param_dtype = c.param, p.op = c.op;
  p.eps = c.eps, p.gamma_offset = c.offset, p.has_gamma = !c.gamma.empty(), p.has_beta = !c.beta.empty();
  const auto xb = encode(c.d, c.x), gb = encode(c.param, c.gamma), bb = encode(c.param, c.beta);
  std::vector<std::byte> y(xb.size());
  fallbacks += RowReferencer(p)
                   .run(xb.data(), c.gamma.empty() ? nullptr : gb.data(), c.beta.empty() ? nullptr : bb.data(), n, y.data(), nullptr)
                   .exact_fallbacks;
  const Format f = format_of(c.d);
  const std::uint32_t max_bits = static_cast<std::uint32_t>(f.inf_ordinal() - 1), sign = 1u << (f.bits - 1);
  const ex::Row* row = ex::row(xb.data(), c.d, n, c.eps, c.op.norm == Norm::layernorm);
  int bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    const auto want = static_cast<std::uint32_t>(bits_at(c.d, y.data(), i));
    const std::uint32_t guesses[] = {want, naive_guess(c, ui), 0, static_cast<std::uint32_t>(rng()) & (2 * sign - 1),
                                     max_bits | sign, max_bits};
    double wh, wl;
    weight(c, ui, wh, wl);
    for (int g = 0; g < guesses_per_element; ++g) {
      const std::uint32_t guess = guesses[(static_cast<int>(i) + g) % 6];
      const std::uint32_t got = ex::round_element(row, c.d, c.x[ui], wh, wl, c.beta.empty() ? 0.0 : c.beta[ui], guess);
      if (got != want && bad++ == 0) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s: element %lld (x = %a, w = %a + %a) from guess 0x%x: got 0x%x (%a), the reference 0x%x (%a)",
                      c.label.c_str(), static_cast<long long>(i), c.x[ui], wh, wl, guess, got, bits_to_double(f, got), want,
                      bits_to_double(f, want));
        first = buf;
      }
    }
  }
  return bad;
}

// Every row of `cases` as mismatches() checks it; returns how many elements the reference decided exactly.
std::int64_t require_reference_bits(const std::vector<RowCase>& cases, int guesses_per_element = 6) {
  std::mt19937_64 rng(20260611);
  std::int64_t elements = 0, fallbacks = 0;
  for (const RowCase& c : cases) {
    std::string first;
    INFO(c.label);
    const int bad = mismatches(c, rng, first, fallbacks, guesses_per_element);
    INFO(first);
    REQUIRE(bad == 0);
    elements += static_cast<std::int64_t>(c.x.size());
  }
  REQUIRE(elements > 0);
  return fallbacks;
}

// y exactly between two neighbouring values of f (a tie for round-to-nearest).
bool is_midpoint(DType d, double y) {
  const Format f = format_of(d);
  const std::int64_t k = round_to_ordinal(f, y);
  for (std::int64_t nb : {k - 1, k + 1})
    if (y == (bits_to_double(f, bits_of_ordinal(f, k)) + bits_to_double(f, bits_of_ordinal(f, nb))) / 2) return true;
  return false;
}

constexpr DType kOutputs[] = {DType::f32, DType::f16, DType::bf16};
double max_finite(DType d) {
  const Format f = format_of(d);
  return std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
}

std::vector<double> normal(DType d, std::size_t n, double mean, double scale, std::mt19937_64& rng) {
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (double& e : v) e = mean + scale * nd(rng);
  return rounded(d, v);
}

}  // namespace

TEST_CASE("round_element gives the reference's bits on random rows", "[exact_decision]") {
  std::mt19937_64 rng(7);
  std::vector<RowCase> cases;
  for (const Op op : {Op::layernorm, Op::rmsnorm})
    for (const DType d : kOutputs)
      for (const DType param : {d, DType::f32})
        for (const double eps : {0.0, 1e-12, 1e-5, 0.1})  // 1e-5 and 0.1 as f64s: not f32 values
          for (const std::size_t n : {2u, 7u, 64u, 300u}) {
            RowCase c;
            c.op = op, c.d = d, c.param = param, c.eps = eps;
            c.label = std::string(name(op)) + " " + std::string(name(d)) + " params " + std::string(name(param)) +
                      " eps " + std::to_string(eps) + " n " + std::to_string(n);
            c.x = normal(d, n, (n % 3) * 10.0, 1.0 + (n % 5), rng);
            const int shape = static_cast<int>(rng() % 4);  // none, gamma, gamma + beta, Gemma's 1 + γ with beta
            if (shape >= 1) c.gamma = normal(param, n, shape == 3 ? 0.0 : 1.0, shape == 3 ? 0.01 : 0.5, rng);
            if (shape >= 2) c.beta = normal(param, n, 0, 1, rng);
            if (shape == 3) c.offset = 1;
            cases.push_back(c);
          }
  require_reference_bits(cases);
}

TEST_CASE("round_element gives the reference's bits on hard rows", "[exact_decision]") {
  std::mt19937_64 rng(11);
  std::vector<RowCase> cases;
  auto add = [&](std::string label, Op op, DType d, DType param, double eps, std::vector<double> x,
                 std::vector<double> gamma = {}, std::vector<double> beta = {}, double offset = 0) {
    cases.push_back({std::move(label) + " " + std::string(name(op)) + " " + std::string(name(d)), op, d, param, eps, offset,
                     rounded(d, std::move(x)), rounded(param, std::move(gamma)), rounded(param, std::move(beta))});
  };
  for (const Op op : {Op::layernorm, Op::rmsnorm})
    for (const DType d : kOutputs) {
      const Format f = format_of(d);
      const double sub = std::ldexp(1.0, f.lsb_exponent()), big = max_finite(d);
      // A zero row with one outlier (z = −1/4 and 4 exactly for LayerNorm), gamma and beta random.
      std::vector<double> zeros(17, 0.0);
      zeros[16] = 3;
      add("zero row with one outlier", op, d, DType::f32, 0, zeros, normal(DType::f32, 17, 1, 1, rng), normal(DType::f32, 17, 0, 1, rng));
      add("zero row with one outlier, no params", op, d, d, 0, zeros);
      // Large offsets: x − mean cancels most of x.
      add("offset row", op, d, d, 1e-5, {40000, 40001, 40002, 40003});
      add("offset row eps 0", op, d, d, 0, {40000, 40001, 40002, 40003}, {1, 2, 3, 0.5}, {0.25, -1, 0, 1});
      // One huge outlier: the other elements' y sit near −w/(sqrt(n − 1)) and the outlier's far from them.
      std::vector<double> huge = normal(d, 17, 0, 1, rng);
      huge[5] = std::min(9.2e20, big);
      add("huge outlier n 17", op, d, d, 0, huge);
      std::vector<double> wide = normal(d, 4097, 0, 1, rng);
      wide[100] = std::min(1.7e38, big);
      add("huge outlier n 4097", op, d, d, 0.002, wide, normal(d, 4097, 1, 0.1, rng), normal(d, 4097, 0, 0.1, rng));
      // Subnormal rows, eps 0 (z of order 1) and eps 1e-12 (outputs far below the format's smallest values).
      for (const double eps : {0.0, 1e-12, 1e-300})
        add("subnormal row", op, d, d, eps, {sub, 3 * sub, 0, -sub, 17 * sub, 2 * sub}, {1, -1, 0.5, 2, 1, 3});
      // Constant rows: y = β for LayerNorm with eps > 0; RMSNorm's y = ±w/sqrt(1 + eps/c²), a near-tie below any
      // double-double's precision where w is a midpoint and eps tiny (f64 eps, not f32-representable).
      // w = 1 + j·2^-p, j odd: midpoints of [1, 2) (f32's through C = 1, as f32 γ cannot hold them); for j = 3 and 7
      // the even neighbour is the upper one, so taking the near-tie for a tie would round up instead of down.
      const double c_w = d == DType::f32 ? 1 : 0;
      std::vector<double> mids;
      for (const double j : {3.0, 1.0, 7.0, 5.0}) mids.push_back(1 - c_w + std::ldexp(j, -f.precision));
      for (const double eps : {1e-5, 1e-12, 1e-40, 1e-300, 0x1p-1074})
        add("constant row", op, d, DType::f32, eps, {3, 3, 3, 3}, mids,
            op == Op::layernorm ? std::vector<double>{0.5, 0, -1, 2} : std::vector<double>{}, c_w);
      add("constant row eps 0", Op::rmsnorm, d, DType::f32, 0, {-2, -2, -2, -2}, mids, {}, c_w);
      // Outputs at and around the overflow threshold (max + half an ulp rounds to Inf: ties to even), and β alone
      // (γ = 0) on midpoints and at ± the threshold.
      const double threshold = big + std::ldexp(1.0, f.emax - f.precision);
      if (d != DType::f32) {
        add("beta on the overflow threshold", op, d, DType::f32, 1e-5, {1, 2, 3, 4}, {0, 0, 0, 0}, {threshold, -threshold, big, mids[0] + 1});
        add("outputs near overflow", op, d, DType::f32, 0, {1, 2, 3, 4}, {big, big / 2, big, big}, {big / 2, -big, -big, threshold});
      } else {
        add("outputs near overflow", op, d, d, 0, {1, 2, 3, 4}, {big, big / 2, big, big}, {big / 2, -big, -big, big});
      }
      // Outputs that round to ±0 (tiny γ), and an element at the mean (y* = 0 exactly: +0).
      add("outputs rounding to zero", op, d, DType::f32, 1e-5, {-1, 0, 1, 5}, {1e-30, 1e-30, -1e-30, 1e-38});
      // Gemma's 1 + γ with tiny γ: w = w_hi + w_lo with w_lo ≠ 0.
      add("w with a low part", op, d, DType::f32, 1e-5, {-1, 0.5, 1, 5}, {1e-20, -1e-25, 3e-30, 0x1p-60}, {}, 1.0);
    }
  // W' = 0 (constant row, eps 0, LayerNorm): NaN, as the reference.
  for (const DType d : kOutputs) add("constant row eps 0", Op::layernorm, d, d, 0, {2, 2, 2});
  // Hard as claimed: many elements are ones the reference's own double-double could not decide.
  REQUIRE(require_reference_bits(cases) >= 100);
}

TEST_CASE("round_element breaks exact ties to even", "[exact_decision]") {
  // A LayerNorm zero row with one outlier at n = 17 (eps 0): W' = 16a², so z = −1/4 for the zeros and 4 for the
  // outlier, exactly, and y = −w/4 or 4w: with w on midpoints of the output format these are exact ties, which
  // no finite precision decides (the data is checked to hold them, so a wrong tie rule must fail here).
  std::mt19937_64 rng(3);
  std::vector<RowCase> cases;
  int ties = 0;
  for (const DType d : kOutputs) {
    const Format f = format_of(d);
    RowCase c;
    c.label = "ties " + std::string(name(d));
    c.d = d, c.param = DType::f32, c.eps = 0;
    c.x.assign(17, 0.0);
    c.x[16] = 2;
    for (int i = 0; i < 17; ++i) {
      // A value of the format with a one-bit extension: an exact midpoint (in f32 only with C = 1: w = 1 + γ).
      const double v = std::ldexp(static_cast<double>((rng() % (std::uint64_t{1} << f.precision)) | (std::uint64_t{1} << (f.precision - 1))), -f.precision);
      const double mid = (i % 2 ? -1 : 1) * (v + std::ldexp(1.0, -f.precision - 1));
      c.gamma.push_back(d == DType::f32 ? 0x1p-24 * (2 * i + 1) : mid * 4);
    }
    if (d == DType::f32) c.offset = 1;  // w = 1 + (2i + 1)·2^-24: −w/4 on f32 midpoints of [2^-2, 2^-1), 4w of [4, 8)
    for (int i = 0; i < 17; ++i) {
      double wh, wl;
      weight(c, static_cast<std::size_t>(i), wh, wl);
      ties += is_midpoint(d, (i == 16 ? 4 : -0.25) * (wh + wl));
    }
    cases.push_back(c);
  }
  REQUIRE(ties >= 3 * 16);
  REQUIRE(require_reference_bits(cases) >= ties);
}

TEST_CASE("round_element decides near-ties by w's low part", "[exact_decision]") {
  // The zero row with one outlier again (z = −1/4 for the zeros), Gemma's w = 1 + γ with γ = ±1e-30 (f32), so w_hi = 1
  // and w_lo = γ, and β = 0.25 + M for a midpoint M of the output format: y* = M − γ/4, within 1e-30 of a tie that
  // only w_lo decides (the data is checked: without w_lo every zero element would be a tie).
  std::mt19937_64 rng(13);
  std::vector<RowCase> cases;
  int near_ties = 0;
  for (const DType d : kOutputs) {
    const Format f = format_of(d);
    RowCase c;
    c.label = "near-ties " + std::string(name(d));
    c.d = d, c.param = DType::f32, c.eps = 0, c.offset = 1;
    c.x.assign(17, 0.0);
    c.x[16] = 5;
    for (int i = 0; i < 17; ++i) {
      // M in [2^22, 2^23) for f32 (spacing 1/2, so 0.25 + M is an f32 value), in [1, 2) for f16 and bf16.
      const int binade = d == DType::f32 ? 22 : 0;
      const double v = std::ldexp(static_cast<double>((rng() % (std::uint64_t{1} << (f.precision - 1))) | (std::uint64_t{1} << (f.precision - 1))),
                                  binade - f.precision + 1);
      const double mid = v + std::ldexp(1.0, binade - f.precision);
      c.gamma.push_back(i % 2 ? 1e-30 : -1e-30);
      c.beta.push_back(0.25 + mid);
      near_ties += i < 16 && is_midpoint(d, mid) && static_cast<double>(static_cast<float>(0.25 + mid)) == 0.25 + mid;
    }
    cases.push_back(c);
  }
  REQUIRE(near_ties == 3 * 16);
  REQUIRE(require_reference_bits(cases) >= near_ties);
}

TEST_CASE("round_element gives one answer from every guess", "[exact_decision]") {
  // The search must not depend on where it starts: every 16-bit pattern (NaNs and Infs included) as the guess for
  // a few elements, and f32 patterns spread over all 2^32.
  std::mt19937_64 rng(5);
  for (const DType d : kOutputs) {
    const Format f = format_of(d);
    const std::vector<double> x = rounded(d, {1e-3, -7, 1e4});
    const auto xb = encode(d, x);
    const ex::Row* row = ex::row(xb.data(), d, 3, 1e-5, true);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double beta = i == 2 ? 1e-30 : 0.25;
      const std::uint32_t want = ex::round_element(row, d, x[i], 3.0, 0, beta, 0);
      const std::uint64_t count = d == DType::f32 ? 4099 : 65536;
      for (std::uint64_t g = 0; g < count; ++g) {
        const auto guess = static_cast<std::uint32_t>(d == DType::f32 ? g * 1048573u + (g ? rng() % 1024 : 0) : g);
        const std::uint32_t got = ex::round_element(row, d, x[i], 3.0, 0, beta, guess);
        if (got != want) {
          INFO(name(d) << " element " << i << " guess " << guess << ": " << bits_to_double(f, got) << " vs " << bits_to_double(f, want));
          REQUIRE(got == want);
        }
      }
    }
  }
}

// Not a specification: how long one decision takes (run with `test_... "[.timing]"`).
TEST_CASE("round_element timing on a 4096-wide row", "[.timing]") {
  std::mt19937_64 rng(9);
  for (const DType d : kOutputs)
  for (const double eps : {1e-5, 1e-300}) {  // 1e-300: W' carries eps's exponent, ~800 bits more
    const std::vector<double> x = normal(d, 4096, 3, 2, rng), g = normal(DType::f32, 4096, 1, 0.5, rng);
    const auto xb = encode(d, x);
    auto t0 = std::chrono::steady_clock::now();
    const ex::Row* row = nullptr;
    for (int k = 0; k < 20; ++k) row = ex::row(xb.data(), d, 4096, eps, true);
    auto t1 = std::chrono::steady_clock::now();
    const double row_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / 20;
    std::uint32_t sink = 0;
    for (const bool far : {false, true}) {
      // The guess: the answer itself (what a double-double estimate gives), or +0 (far: a full search).
      std::vector<std::uint32_t> guesses(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) guesses[i] = far ? 0 : ex::round_element(row, d, x[i], g[i], 0, 0.5, 0);
      t0 = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < x.size(); ++i) sink ^= ex::round_element(row, d, x[i], g[i], 0, 0.5, guesses[i]);
      t1 = std::chrono::steady_clock::now();
      std::printf("%s eps %g: row() %.1f us, round_element %.2f us per call (guess %s)\n", std::string(name(d)).c_str(), eps, row_us,
                  std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(x.size()),
                  far ? "+0" : "right");
    }
    CHECK(sink != 0xFFFFFFFFu);
  }
}
