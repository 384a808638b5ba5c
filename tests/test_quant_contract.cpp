// The quantizer's contract applied to the y it was handed (lnorm/quant_contract.hpp): quantize_given_y against the
// independent quantizer (tests/independent_quant.hpp: 1600-bit values, the grid enumerated from its bit layout) on
// random f32 y dense in ties, and measure_consistency's verdicts on the quantizer bugs a budget hides: ties away
// from zero, a scale rounded toward zero, an mx exponent from ceil(log2 amax), the sign of zero; the vllm rule.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "independent_quant.hpp"
#include "lnorm/quant_contract.hpp"

using namespace lnorm;
using lnorm::testing::IndependentQuantizer;
using lnorm::testing::RealValue;

namespace {

QuantSpec spec_of(QuantFormat f, Scaling sc, std::int64_t group = 0, float scale = 0) {
  QuantSpec s;
  s.format = f, s.scaling = sc, s.group = group, s.scale = scale;
  return s;
}

// Rows dense in decisions: per group a power-of-two s, values at midpoints of the grid times s (exact ties), grid
// points, the f32 neighbours of the midpoints, zeros, random values; each group holds an element at qmax·s
// exactly (a dynamic scale then is s itself, and the ties stay ties; tensor scaling: s is the given scale).
std::vector<float> decision_rows(QuantFormat f, std::int64_t rows, std::int64_t cols, std::int64_t G, std::uint64_t seed,
                                 double tensor_scale) {
  std::mt19937_64 rng(seed);
  const IndependentQuantizer iq(f);
  const auto& grid = iq.positive();
  std::vector<float> y(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / G; ++g) {
      const double s = tensor_scale > 0 ? tensor_scale : std::ldexp(1.0, static_cast<int>(rng() % 40) - 20);
      for (std::int64_t i = 0; i < G; ++i) {
        const std::size_t k = 1 + rng() % (grid.size() - 1);
        const double mid = (grid[k - 1].magnitude + grid[k].magnitude) / 2;
        double v = 0;
        switch (rng() % 6) {
          case 0: v = mid; break;
          case 1: v = grid[k].magnitude; break;
          case 2: v = std::nextafter(static_cast<float>(mid * s), 0.0f) / s; break;
          case 3: v = std::nextafter(static_cast<float>(mid * s), 1e30f) / s; break;
          case 4: v = 0; break;
          default: v = std::uniform_real_distribution<double>(0, qmax(f))(rng); break;
        }
        y[static_cast<std::size_t>(r * cols + g * G + i)] = static_cast<float>((rng() & 1 ? -v : v) * s);
      }
      if (tensor_scale == 0)
        y[static_cast<std::size_t>(r * cols + g * G + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(G)))] =
            static_cast<float>(qmax(f) * s);
    }
  return y;
}

double stored_mx(const std::uint8_t* s, std::int64_t at) { return s[at] == 255 ? NAN : std::ldexp(1.0, s[at] - 127); }

}  // namespace

TEST_CASE("quantize_given_y is the independent quantizer's Q(y/s) and scale, on rows dense in ties", "[quant_contract]") {
  for (const FormatInfo& fi : kFormatTable)
    for (Scaling sc : {Scaling::tensor, Scaling::row, Scaling::group, Scaling::mx, Scaling::nvfp4})
    for (const MxRuleInfo& rule : kMxRuleTable) {
      const QuantFormat f = fi.format;
      // mx under every rule; group:16 with f32 scales (floor's pass) and with UE8M0 ones (rceil's pass, their rule)
      const bool ue8m0 = sc == Scaling::group && rule.rule == MxRule::rceil;
      if (!takes(sc, f) || (sc != Scaling::mx && rule.rule != MxRule::floor && !ue8m0)) continue;
      const std::int64_t rows = 24, cols = 64;
      QuantSpec spec = spec_of(f, sc, sc == Scaling::group ? 16 : 0, sc == Scaling::tensor ? 0.0078125f : 0.0f);
      if (sc == Scaling::nvfp4) spec.global_scale = 1.0f;  // block scales 2^k: ties of q (test_quant_simd has 24-bit G)
      if (sc == Scaling::mx) spec.mx_rule = rule.rule;
      if (ue8m0) spec.scale_format = ScaleFormat::ue8m0;
      const std::int64_t G = spec.group_size(cols), per_row = spec.scales_per_row(cols);
      std::vector<float> y = decision_rows(f, rows, cols, G, 17 + static_cast<unsigned>(f) * 4 + static_cast<unsigned>(sc),
                                     spec.scale);
      y[5] = NAN;  // a NaN in row 0's first group
      std::vector<std::uint8_t> q(static_cast<std::size_t>(spec.q_bytes(rows, cols)));
      std::vector<std::byte> scales(static_cast<std::size_t>(rows * per_row * 4));
      quantize_given_y(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), scales.data());
      const auto code_at = [&](std::int64_t e) {  // as stored; fp4: element 2i in byte i's low nibble, by hand
        return f == QuantFormat::fp4_e2m1 ? static_cast<std::uint8_t>(e % 2 ? q[static_cast<std::size_t>(e / 2)] >> 4 : q[static_cast<std::size_t>(e / 2)] & 0x0f)
                                          : q[static_cast<std::size_t>(e)];
      };
      const IndependentQuantizer iq(f);
      std::int64_t ties = 0, bad = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < cols / G; ++g) {
          std::vector<RealValue> yg;
          for (std::int64_t i = 0; i < G; ++i) yg.push_back(lnorm::testing::real_of(y[static_cast<std::size_t>(r * cols + g * G + i)]));
          double s = spec.scale;
          bool nan = false;
          if (per_row) {
            const auto want = sc == Scaling::nvfp4 ? lnorm::testing::independent_nvfp4_scale(yg.data(), yg.size(), spec.global_scale)
                                                   : lnorm::testing::independent_scale(f, spec.scales_are_e8m0(), yg.data(), yg.size(),
                                                                                      spec.exponent_rule());
            const std::int64_t at = r * per_row + g;
            nan = want.nan;
            s = want.value;
            if (sc == Scaling::nvfp4) {
              bad += reinterpret_cast<const std::uint8_t*>(scales.data())[at] != want.e4m3_code;
            } else if (spec.scales_are_e8m0()) {
              bad += reinterpret_cast<const std::uint8_t*>(scales.data())[at] != want.mx_code;
            } else {
              float got = 0;
              std::memcpy(&got, scales.data() + 4 * at, 4);
              bad += !(got == want.value || (std::isnan(got) && want.nan));
            }
          }
          const lnorm::testing::BigF inv = s > 0 && std::isfinite(s) ? lnorm::testing::BigF(lnorm::testing::BigF(1) / lnorm::testing::BigF(s)) : lnorm::testing::BigF(0);
          IndependentQuantizer::Counts counts;
          for (std::int64_t i = 0; i < G; ++i) {
            const float yi = y[static_cast<std::size_t>(r * cols + g * G + i)];
            // The reals have one zero (+0); the rule keeps y's sign of zero (−0 / s = −0, fp8's 0x80).
            std::uint8_t want = nan ? iq.nan_code() : iq.quantize_scaled(yg[static_cast<std::size_t>(i)], s, inv, &counts);
            if (!nan && yi == 0 && std::signbit(yi) && is_float(f) && !lnorm::testing::independent_fnuz(f))
              want = static_cast<std::uint8_t>(sign_bit(f));  // −0 (FNUZ: one zero)
            const std::uint8_t got = code_at(r * cols + g * G + i);
            const bool ok = is_float(f) && code_is_nan(f, want) ? code_is_nan(f, got) : got == want;
            if (!ok) UNSCOPED_INFO("row " << r << " col " << g * G + i << " y " << y[static_cast<std::size_t>(r * cols + g * G + i)]
                                          << " got 0x" << std::hex << int(got) << " want 0x" << int(want) << std::dec);
            bad += !ok;
          }
          ties += counts.ties;
        }
      INFO(describe(spec));
      CHECK(bad == 0);
      // The rows decide ties, not only easy cases. nvfp4: E4M3's block scales are powers of two over 15 of the 40
      // binades decision_rows draws scales from; the other groups are all ±0 (c = 0) or saturate.
      CHECK(ties > rows * cols / (sc == Scaling::nvfp4 ? 20 : 10));
      CHECK(measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), scales.data()).pass());
    }
}

TEST_CASE("measure_consistency fails the quantizer bugs a budget hides", "[quant_contract]") {
  const std::int64_t rows = 8, cols = 64;
  const QuantFormat f = QuantFormat::fp8_e4m3;
  SECTION("ties away from zero: the tie 272 between 256 (even) and 288 (E4M3, s = 1)") {
    const QuantSpec spec = spec_of(f, Scaling::tensor, 0, 1.0f);
    std::vector<float> y(static_cast<std::size_t>(rows * cols), 272.0f);
    for (std::size_t i = 1; i < y.size(); i += 2) y[i] = -272.0f;
    std::vector<std::uint8_t> q(y.size());
    quantize_given_y(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), nullptr);
    CHECK(decode(f, q[0]) == 256.0);
    CHECK(decode(f, q[1]) == -256.0);
    CHECK(measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), nullptr).pass());
    std::vector<std::uint8_t> away = q;
    for (std::size_t i = 0; i < away.size(); ++i) away[i] = encode(f, y[i] > 0 ? 288.0 : -288.0);
    const ConsistencySummary c = measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, away.data(), nullptr);
    CHECK(c.codes_differ == rows * cols);
    REQUIRE_FALSE(c.first.empty());
    CHECK(c.first[0].got == 288.0);
    CHECK(c.first[0].expected == 256.0);
    CHECK(describe(c, spec).find("q[0] = 288") != std::string::npos);
  }
  SECTION("a row scale rounded toward zero") {
    const QuantSpec spec = spec_of(f, Scaling::row);
    std::vector<float> y(static_cast<std::size_t>(rows * cols));
    std::mt19937 rng(5);
    for (float& v : y) v = std::normal_distribution<float>(0, 1)(rng);
    std::vector<std::uint8_t> q(y.size());
    std::vector<float> s(static_cast<std::size_t>(rows));
    quantize_given_y(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), s.data());
    std::vector<float> truncated = s;
    std::int64_t differ = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      float amax = 0;
      for (std::int64_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(y[static_cast<std::size_t>(r * cols + i)]));
      const double exact = static_cast<double>(amax) / 448.0;  // 53 bits: enough to see the direction
      float t = static_cast<float>(exact);
      if (t > exact) t = std::nextafter(t, 0.0f);
      truncated[static_cast<std::size_t>(r)] = t;
      differ += t != s[static_cast<std::size_t>(r)];
    }
    REQUIRE(differ > 0);
    const ConsistencySummary c = measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), truncated.data());
    CHECK(c.scales_differ == differ);
    CHECK(c.first.front().scale);
  }
  SECTION("an mx exponent from ceil(log2 amax): the same at a power of two, one step up elsewhere") {
    const QuantSpec spec = spec_of(f, Scaling::mx);
    std::vector<float> y(static_cast<std::size_t>(rows * cols), 0.25f);
    y[0] = 4.0f;   // row 0 group 0: amax exactly 2^2, X = 2 − 8 by either rule
    y[32] = 0.3f;  // row 0 group 1: floor(log2 0.3) = −2, ceil −1
    std::vector<std::uint8_t> q(y.size());
    std::vector<std::uint8_t> s(static_cast<std::size_t>(rows * 2));
    quantize_given_y(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), s.data());
    CHECK(stored_mx(s.data(), 0) == std::ldexp(1.0, -6));
    CHECK(stored_mx(s.data(), 1) == std::ldexp(1.0, -10));
    std::vector<std::uint8_t> up = s;
    up[1] += 1;  // ceil's exponent for group 1
    const ConsistencySummary c = measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), up.data());
    CHECK(c.scales_differ == 1);
    CHECK(c.first.front().index == 1);
  }
  SECTION("a zero group accepts any finite positive scale, with codes ±0; a NaN group any NaN code") {
    const QuantSpec spec = spec_of(f, Scaling::group, 32);
    std::vector<float> y(static_cast<std::size_t>(rows * cols), 0.0f);
    y[1] = -0.0f;
    y[40] = NAN;
    std::vector<std::uint8_t> q(y.size());
    std::vector<float> s(static_cast<std::size_t>(rows * 2));
    quantize_given_y(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), s.data());
    CHECK(s[0] == 1.0f);
    CHECK(q[1] == 0x80);  // −0 / s = −0
    CHECK(std::isnan(s[1]));
    s[0] = 3.0f;
    for (std::int64_t i = 32; i < 64; ++i) q[static_cast<std::size_t>(i)] = 0xff;  // the negative NaN code
    CHECK(measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), s.data()).pass());
    q[1] = 0x00;  // +0 for −0: the sign of zero is the rule's
    CHECK(measure_consistency(spec, ConsistencyRule::contract, y.data(), rows, cols, q.data(), s.data()).codes_differ == 1);
  }
  SECTION("the vllm rule: Q(f32(y · f32(1/s))), two f32 roundings the contract does not make") {
    // s = 41 (a row scale: amax 18368 = 41·448): y = 17712 is 432·s, the tie between 416 (odd) and 448 (even);
    // f32(1/41) is below 1/41, so f32(17712 · f32(1/41)) = 431.99997 and the recipe rounds down.
    const QuantSpec spec = spec_of(f, Scaling::row);
    std::vector<float> y(static_cast<std::size_t>(cols), 17712.0f);
    y[0] = 18368.0f;
    std::vector<std::uint8_t> qc(y.size()), qv(y.size());
    std::vector<float> sc(1), sv(1);
    quantize_given_y(spec, ConsistencyRule::contract, y.data(), 1, cols, qc.data(), sc.data());
    quantize_given_y(spec, ConsistencyRule::vllm, y.data(), 1, cols, qv.data(), sv.data());
    CHECK(sc[0] == 41.0f);
    CHECK(sv[0] == 41.0f);
    CHECK(decode(f, qc[1]) == 448.0);
    CHECK(decode(f, qv[1]) == 416.0);
    CHECK_FALSE(measure_consistency(spec, ConsistencyRule::vllm, y.data(), 1, cols, qc.data(), sc.data()).pass());
    CHECK(measure_consistency(spec, ConsistencyRule::vllm, y.data(), 1, cols, qv.data(), sv.data()).pass());
  }
}
