// The error metrics of DESIGN.md "Measuring error", on hand-computed values.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "lnorm/metrics.hpp"

using namespace lnorm;

namespace {
ElementReference exact(double y, double z, double gamma = 1, double beta = 0) {
  return {y, 0, z, std::fabs(gamma) * std::max(1.0, std::fabs(z)) + std::fabs(beta)};
}
std::uint64_t bits(const Format& f, double v) { return double_to_bits(f, v); }
}  // namespace

TEST_CASE("metrics: ulp(s) is the format's spacing at s, floored at the smallest normal binade", "[metrics]") {
  const Format f32 = format_of(DType::f32), f16 = format_of(DType::f16), bf = format_of(DType::bf16);
  CHECK(ulp_at(f32, 1.0) == 0x1p-23);
  CHECK(ulp_at(f32, 1.5) == 0x1p-23);
  CHECK(ulp_at(f32, 2.0) == 0x1p-22);
  CHECK(ulp_at(f32, 0.75) == 0x1p-24);
  CHECK(ulp_at(f32, 0.0) == 0x1p-149);
  CHECK(ulp_at(f16, 1.0) == 0x1p-10);
  CHECK(ulp_at(f16, 1e-7) == 0x1p-24);  // subnormal range
  CHECK(ulp_at(bf, 3.0) == 0x1p-6);
  CHECK(format_of(DType::f64).unit_roundoff() == 0x1p-53);
}

TEST_CASE("metrics: a value k ulps from an exactly representable answer has scaled error k", "[metrics]") {
  const Format f = format_of(DType::f32);
  for (int k : {0, 1, 2, 5, 100}) {
    const double got = 1.5 + k * 0x1p-23;
    CHECK(scaled_ulp_error(f, got, bits(f, got), bits(f, 1.5), exact(1.5, 1.5)) == k);
  }
  // Below 1 the output's ulp is finer than ulp(s) (s >= |gamma|): half a scaled ulp per output ulp.
  CHECK(scaled_ulp_error(f, 0.5 + 0x1p-24, bits(f, 0.5 + 0x1p-24), bits(f, 0.5), exact(0.5, 0.5)) == 0.5);
  // beta enters the scale: gamma = 1, beta = 3, z = 1 → s = 4, ulp(s) = 2^-21.
  CHECK(scaled_ulp_error(f, 4 + 0x1p-21, 0, 0, exact(4, 1, 1, 3)) == 1);
}

TEST_CASE("metrics: NaN rules", "[metrics]") {
  const Format f = format_of(DType::f32);
  const ElementReference nan_ref{NAN, NAN, NAN, NAN};
  CHECK(scaled_ulp_error(f, NAN, bits(f, NAN), bits(f, NAN), nan_ref) == 0);               // NaN where NaN: exact
  CHECK(std::isinf(scaled_ulp_error(f, 1.0, bits(f, 1.0), bits(f, NAN), nan_ref)));       // finite where NaN
  CHECK(std::isinf(scaled_ulp_error(f, NAN, bits(f, NAN), bits(f, 1.0), exact(1, 1))));  // NaN where finite
  CHECK(std::isinf(scaled_ulp_error(f, INFINITY, bits(f, INFINITY), bits(f, 1.0), exact(1, 1))));
  CHECK(scaled_ulp_error(f, INFINITY, bits(f, INFINITY), bits(f, INFINITY), exact(1e39, 1, 1e39)) == 0);
  CHECK(correctly_rounded(f, bits(f, NAN), bits(f, NAN)));
  CHECK(correctly_rounded(f, bits(f, -0.0), bits(f, 0.0)));
  CHECK_FALSE(correctly_rounded(f, bits(f, 1.0), bits(f, NAN)));
}

TEST_CASE("metrics: ulp distance of statistics counts representable values between", "[metrics]") {
  const Format f = format_of(DType::f32);
  CHECK(ulp_distance(f, 1.0, 1.0) == 0);
  CHECK(ulp_distance(f, 1.0 + 0x1p-23 * 3, 1.0) == 3);
  CHECK(ulp_distance(f, 1.0 - 0x1p-24, 1.0 + 0x1p-23) == 2);  // across a binade
  CHECK(ulp_distance(f, -0x1p-149, 0x1p-149) == 2);            // through zero
  CHECK(std::isinf(ulp_distance(f, NAN, 1.0)));
  CHECK(ulp_distance(f, NAN, NAN) == 0);
}

TEST_CASE("metrics: the summary keeps the worst element, budget a + b*kappa, and a non-finite mismatch makes max_ulp inf", "[metrics]") {
  const Format f = format_of(DType::f32);
  ErrorSummary s;
  const Budget budget{2, 0.5};
  s.add(f, 0, 1.5, bits(f, 1.5), bits(f, 1.5), exact(1.5, 1.5), 0, budget);                   // exact
  s.add(f, 1, 1.5 + 3 * 0x1p-23, 0, bits(f, 1.5), exact(1.5, 1.5), 0, budget);               // 3 > 2: over
  s.add(f, 2, 1.5 + 5 * 0x1p-23, 0, bits(f, 1.5), exact(1.5, 1.5), 8, budget);               // 5 <= 2 + 4
  CHECK(s.max_ulp == 5);
  CHECK(s.max_ulp_index == 2);
  CHECK(s.max_ulp_kappa == 8);
  s.add(f, 3, NAN, bits(f, NAN), bits(f, 1.5), exact(1.5, 1.5), 0, budget);                   // non-finite mismatch
  s.add(f, 4, INFINITY, bits(f, INFINITY), bits(f, 1.5), exact(1.5, 1.5), 0, budget);         // and another
  CHECK(s.elements == 5);
  CHECK(s.correctly_rounded == 1);
  CHECK(std::isinf(s.max_ulp));   // never "0 ulp" or "5 ulp" beside a NaN
  CHECK(s.max_ulp_index == 3);    // the first non-finite mismatch
  CHECK(std::isnan(s.max_ulp_got));
  CHECK(s.max_finite_ulp == 5);
  CHECK(s.nonfinite_mismatches == 2);
  CHECK(s.first_nonfinite_mismatch_index == 3);
  CHECK(s.over_budget == 3);
  CHECK_FALSE(s.within_budget());
}

TEST_CASE("metrics: Inf is a non-finite mismatch where the answer is finite, exact where it rounds to Inf", "[metrics]") {
  const Format f = format_of(DType::f32);
  const double max = 0x1.fffffep127;
  CHECK(std::isinf(scaled_ulp_error(f, INFINITY, bits(f, INFINITY), bits(f, max), exact(max, 1))));
  CHECK(std::isinf(scaled_ulp_error(f, -INFINITY, bits(f, -INFINITY), bits(f, 1.0), exact(1.0, 1))));
  CHECK(scaled_ulp_error(f, INFINITY, bits(f, INFINITY), bits(f, INFINITY), exact(INFINITY, 1)) == 0);
  CHECK(std::isinf(scaled_ulp_error(f, 1.0, bits(f, 1.0), bits(f, NAN), exact(NAN, NAN))));  // finite where NaN
  CHECK(scaled_ulp_error(f, NAN, bits(f, NAN), bits(f, NAN), exact(NAN, NAN)) == 0);
  // Summed over a block: every infinity counted, max_ulp infinite, the verdict FAIL.
  ErrorSummary s;
  for (int i = 0; i < 512; ++i) s.add(f, i, INFINITY, bits(f, INFINITY), bits(f, 1.0), exact(1.0, 1), 0, Budget{});
  CHECK(s.nonfinite_mismatches == 512);
  CHECK(std::isinf(s.max_ulp));
  CHECK(s.correctly_rounded_fraction() == 0);
  CHECK_FALSE(s.within_budget());
}

TEST_CASE("metrics: the mean's error is in ulps of max(|mean|, sqrt(var + eps)), rstd's in plain ulps", "[metrics]") {
  const Format f = format_of(DType::f32);
  RowReference row;
  row.mean = 0;     // an exact mean of 0 ...
  row.rstd = 1;     // ... on a row with std 1
  // 1e-7 away: 1e-7 / ulp(1) = 1e-7 / 2^-23 = 0.839 ulp (a plain ulp distance says 8.7e8).
  CHECK(stat_error(Stat::mean, f, 1e-7, row) == Approx(1e-7 / 0x1p-23));
  CHECK(stat_error(Stat::mean, f, 1e-7, row) <= 8);
  CHECK(ulp_distance(f, 1e-7, 0) > 8e8);
  row.mean = 1e4;   // |mean| > sqrt(var + eps): the mean's own ulp
  CHECK(stat_error(Stat::mean, f, 1e4 + 0x1p-10, row) == 1);  // ulp(1e4) = 2^-10
  CHECK(stat_error(Stat::rstd, f, 1 + 0x1p-23 * 3, row) == 3);
  CHECK(std::isinf(stat_error(Stat::rstd, f, INFINITY, row)));
  CHECK(std::isinf(stat_error(Stat::mean, f, NAN, row)));
  row.rstd = INFINITY;  // var + eps == 0
  CHECK(stat_error(Stat::rstd, f, INFINITY, row) == 0);
  row.mean = row.rstd = NAN;  // a row holding NaN/Inf
  CHECK(stat_error(Stat::mean, f, NAN, row) == 0);
  CHECK(std::isinf(stat_error(Stat::rstd, f, 1.0, row)));
  StatSummary m;
  row.mean = 0, row.rstd = 1;
  m.add(Stat::mean, f, 0, 1e-7, row);
  CHECK(m.passes(8));
  CHECK_FALSE(m.passes(0.5));
  m.add(Stat::mean, f, 1, INFINITY, row);
  CHECK(std::isinf(m.max_ulp));
  CHECK(m.max_ulp_index == 1);
  CHECK(m.nonfinite_mismatches == 1);
  CHECK_FALSE(m.passes(-1));  // a non-finite mismatch fails even when the mean is not gated
}

// The allowance model (docs/verify.md "How error is measured"): a 16-bit output measured from the interval of
// reals that round to it, in ulps of its compute format (f32).
TEST_CASE("metrics: a 16-bit output reads its distance from y* to the interval that rounds to it, in f32 ulps", "[metrics]") {
  const Format bf = format_of(DType::bf16), f16 = format_of(DType::f16);
  CHECK(compute_format(bf).dtype == DType::f32);
  CHECK(compute_format(format_of(DType::f64)).dtype == DType::f64);
  // y* = 1.1 (w = 2, beta = 0.5, z = 0.3: s = 2.5, ulp_f32(2.5) = 2^-22). bf16 near 1.1 is spaced 2^-7.
  const ElementReference e{1.1, 0, 0.3, 2.5};
  CHECK(scaled_ulp_error(bf, 1.1015625, bits(bf, 1.1015625), bits(bf, 1.1015625), e) == 0);  // correctly rounded
  // One step up: its interval starts at 1.10546875, 0.00546875 above y*.
  CHECK(scaled_ulp_error(bf, 1.109375, bits(bf, 1.109375), 0, e) == Approx(0.00546875 / 0x1p-22).epsilon(1e-12));
  CHECK(signed_scaled_error(bf, 1.109375, bits(bf, 1.109375), e) > 0);
  CHECK(signed_scaled_error(bf, 1.09375, bits(bf, 1.09375), e) < 0);
  // An exact tie at the midpoint 1.09765625 is 0 from both neighbours' closed intervals (correctly_rounded tells them apart).
  const ElementReference tie{1.09765625, 0, 0.3, 2.5};
  CHECK(scaled_ulp_error(bf, 1.09375, bits(bf, 1.09375), 0, tie) == 0);
  CHECK(scaled_ulp_error(bf, 1.1015625, bits(bf, 1.1015625), 0, tie) == 0);
  // Zero: its interval is ± half the smallest subnormal; f16's largest value ends at the overflow threshold 65520.
  CHECK(scaled_ulp_error(f16, 0.0, bits(f16, 0.0), 0, ElementReference{0x1p-26, 0, 0, 1}) == 0);
  CHECK(scaled_ulp_error(f16, 65504, bits(f16, 65504), 0, ElementReference{65519, 0, 1, 65519}) == 0);
  CHECK(scaled_ulp_error(f16, 65504, bits(f16, 65504), 0, ElementReference{65536, 0, 1, 65536}) == Approx(16 / 0x1p-7));
  // An f32 output is measured as before: |got − y*| in f32 ulps.
  const Format f32 = format_of(DType::f32);
  CHECK(scaled_error_to(f32, 1.0 + 3 * 0x1p-23, 1.0, 1.0) == 3);
  CHECK(scaled_error_to(bf, 1.0, 1.0 + 0x1p-9, 1.0) == 0);  // within bf16's rounding interval of 1
  CHECK(storage_ulp_in_compute_ulps(bf) == 0x1p16);
  CHECK(storage_ulp_in_compute_ulps(f16) == 0x1p13);
  CHECK(storage_ulp_in_compute_ulps(f32) == 1);
}

TEST_CASE("metrics: LayerNorm's floor is rho rounded up to a power of two, and the kappa term stays at the floor of 1", "[metrics]") {
  CHECK(rho_floor(1.0) == 1);
  CHECK(rho_floor(0.6) == 1);   // var >= eps/3: the floor of 1, as the budgets were measured
  CHECK(rho_floor(0.5) == 1);
  CHECK(rho_floor(0.3) == 0.5);
  CHECK(rho_floor(0.25) == 0.25);
  CHECK(rho_floor(9.5e-8) == 0x1p-23);
  CHECK(rho_floor(0.0) == 1);   // a constant row keeps 1
  CHECK(output_scale(0x1p-23, 2, 1e-9, 0) == 2 * 0x1p-23);
  CHECK(output_scale(0, 2, 1e-9, 0) == 2e-9);  // RMSNorm: no floor
  // allowed_ulps: a + b·kappa·ulp(kappa_scale)/ulp(scale).
  const Format f32 = format_of(DType::f32);
  ElementReference e{1e-7, 0, 1e-7, 0x1p-23};
  e.kappa_scale = 1;
  CHECK(allowed_ulps(f32, Budget{8, 1}, e, 10) == 8 + 10 * 0x1p23);
  CHECK(allowed_ulps(f32, Budget{8, 0}, e, 10) == 8);
  CHECK(allowed_ulps(f32, Budget{8, 1}, ElementReference{1, 0, 1, 1}, 10) == 18);
  // allowed_distance: the compute error, plus one rounding for a 16-bit output.
  CHECK(allowed_distance(f32, ElementReference{1, 0, 1, 1}, 8) == 8 * 0x1p-23);
  CHECK(allowed_distance(format_of(DType::bf16), ElementReference{1, 0, 1, 1}, 8) == 8 * 0x1p-23 + 0x1p-8);
}

TEST_CASE("metrics: the bias gate fails a mean signed error past 0.5 + 3 x mean allowance / sqrt(distinct units), whatever the split", "[metrics]") {
  const Format f32 = format_of(DType::f32);
  // 400 rows of 8 elements, each y* = 1 (s = 1), each output 2 ulps high: every element within 8, the mean 2 past
  // 0.5 + 3·8/20 = 1.7.
  ErrorSummary whole;
  std::vector<ErrorSummary> parts(3);
  for (int r = 0; r < 400; ++r) {
    ErrorSummary& part = parts[static_cast<std::size_t>(r % 3)];
    const std::uint64_t key = UnitKey().word(static_cast<std::uint64_t>(r)).value();  // 400 distinct rows
    whole.add_unit(key), part.add_unit(key);
    for (int i = 0; i < 8; ++i) {
      const double got = 1 + 2 * 0x1p-23;
      whole.add(f32, r * 8 + i, got, bits(f32, got), bits(f32, 1.0), exact(1, 1), 0, Budget{8, 0});
      part.add(f32, r * 8 + i, got, bits(f32, got), bits(f32, 1.0), exact(1, 1), 0, Budget{8, 0});
    }
  }
  CHECK(whole.within_budget());
  CHECK(whole.mean_signed_error() == Approx(2));
  CHECK(whole.bias_bound() == Approx(0.5 + 3 * 8 / 20.0));
  CHECK_FALSE(whole.bias_within());
  CHECK_FALSE(whole.passes());
  ErrorSummary merged;
  for (const ErrorSummary& p : parts) merged.merge(p);
  CHECK(merged.mean_signed_error() == whole.mean_signed_error());  // fixed point: exact whatever the split
  CHECK(merged.units() == 400);
  // Without units the bias is reported, not gated.
  ErrorSummary ungated = whole;
  ungated.unit_keys.clear();
  CHECK(ungated.bias_within());
  // 400 copies of one row share their errors: one unit, and the bound is 0.5 + 3·8.
  ErrorSummary copies = whole;
  copies.unit_keys = {UnitKey().bytes("row", 3).value()};
  CHECK(copies.bias_bound() == Approx(24.5));
  CHECK(copies.bias_within());
  // The kappa part of an allowance (a mean rounded to the working format) may share its sign across rows: allowed
  // whole. With kappa 10 at b = 1 the same 2-ulp shift is within 0.5 + 3·8/20 + 10.
  ErrorSummary kappa_rows;
  for (int r = 0; r < 400; ++r) {
    kappa_rows.add_unit(UnitKey().word(static_cast<std::uint64_t>(r)).value());
    for (int i = 0; i < 8; ++i)
      kappa_rows.add(f32, r * 8 + i, 1 + 2 * 0x1p-23, bits(f32, 1 + 2 * 0x1p-23), bits(f32, 1.0), exact(1, 1), 10, Budget{8, 1});
  }
  CHECK(kappa_rows.mean_kappa_allowed() == Approx(10));
  CHECK(kappa_rows.bias_bound() == Approx(0.5 + 3 * 8 / 20.0 + 10));
  CHECK(kappa_rows.bias_within());
  // Equal inputs give equal keys; different ones (bytes or length) do not.
  CHECK(UnitKey().bytes("abcdefghij", 10).value() == UnitKey().bytes("abcdefghij", 10).value());
  CHECK(UnitKey().bytes("abcdefghij", 10).value() != UnitKey().bytes("abcdefghik", 10).value());
  CHECK(UnitKey().bytes("abc", 3).value() != UnitKey().bytes("abc\0", 4).value());
  // The element furthest over its own allowance is kept with its numbers.
  ErrorSummary s;
  s.add(f32, 0, 1 + 20 * 0x1p-23, 0, 0, exact(1, 1), 100, Budget{8, 1});  // 20 within 108 (kappa 100)
  s.add(f32, 1, 1 + 9 * 0x1p-23, 0, 0, exact(1, 1), 0, Budget{8, 1});     // 9 over 8
  CHECK(s.max_ulp_index == 0);
  CHECK(s.worst_excess_index == 1);
  CHECK(s.worst_excess_error == 9);
  CHECK(s.worst_excess_allowed == 8);
  CHECK(s.over_budget == 1);
}

TEST_CASE("metrics: h is measured in ulps of its own format, its one rounding included", "[metrics]") {
  const Format bf = format_of(DType::bf16);
  ErrorSummary h = storage_summary();
  // The exact sum 1 + 2^-8 is a tie between bf16's 1 and 1 + 2^-7: either reads 0.5 ulp; 1 + 2^-6 reads 1.5.
  const ElementReference sum{1 + 0x1p-8, 0, 0, 1 + 0x1p-8};
  h.add(bf, 0, 1.0, bits(bf, 1.0), bits(bf, 1.0), sum, 0, Budget{0.5, 0});
  h.add(bf, 1, 1 + 0x1p-6, bits(bf, 1 + 0x1p-6), bits(bf, 1.0), sum, 0, Budget{0.5, 0});
  CHECK(h.max_ulp == 1.5);
  CHECK(h.over_budget == 1);
  CHECK(h.signed_elements == 0);  // no bias part: a sum's rounding is judged element by element
}
