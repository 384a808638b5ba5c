// The quantized reference (lnorm/quantize.hpp) bit for bit against an independent exact evaluation
// (tests/independent_quant.hpp: the norm's y* at 1600 bits or as an exact rational, the grids enumerated from the
// formats' bit layouts, Q by search and one midpoint comparison), and the formats' codec (lnorm/quant.hpp's
// encode/decode/ordinals) against the same grids.
//
// Covered: every format × scaling (tensor at several f32 scales, row, group:8/16/64, mx) for layernorm, rmsnorm,
// add_layernorm and add_rmsnorm, f32/bf16/f16 x, with and without γ/β, f32 params and residuals beside 16-bit x,
// the Gemma offset; exact midpoints (rows whose rstd is rational and whose γ puts y*/s on every midpoint of the
// grid, ±; the same 2^-60 off each midpoint, where the nearest double of y*/s is the tie itself; mx amax exactly a
// power of two), saturation (and ties past the largest value), negative values rounding to −0, zero rows and zero
// groups, scales that are f32 subnormals or round to 0, mx's clamp at 2^-127, y* past f32's range, NaN/Inf rows and
// NaN γ columns, and bf16 near-ties (y*/s within 1e-7 of a midpoint, which per-token scaling of bf16 data lands on
// systematically). Every answer is also measured by measure_quantized, which must read it as exact.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "independent_exact.hpp"
#include "independent_quant.hpp"
#include "kernel_cases.hpp"
#include "lnorm/format.hpp"
#include "lnorm/problem.hpp"
#include "lnorm/quant.hpp"
#include "lnorm/quantize.hpp"

using namespace lnorm;
using lnorm::testing::BigF;
using lnorm::testing::IndependentQuantizer;
using lnorm::testing::RealValue;

namespace {

constexpr QuantFormat kFormats[] = {QuantFormat::fp8_e4m3, QuantFormat::fp8_e5m2, QuantFormat::int8, QuantFormat::fp8_e4m3fnuz,
                                     QuantFormat::fp8_e5m2fnuz, QuantFormat::fp4_e2m1};

using lnorm::testing::same_value;

bool is_nan_code(QuantFormat f, std::uint8_t c) { return std::isnan(lnorm::testing::independent_code_value(f, c)); }

// One problem's inputs (rows of x, residual for Add & Norm, γ, β as values and as stored) and its exact y*.
struct Dataset {
  std::string label;
  Problem p;
  std::vector<double> x, residual, gamma, beta;
  std::vector<std::byte> xb, rb, gb, bb;
  std::vector<RealValue> y;  // rows × cols

  const void* res() const { return rb.empty() ? nullptr : rb.data(); }
  const void* gam() const { return p.has_gamma ? gb.data() : nullptr; }
  const void* bet() const { return p.has_beta ? bb.data() : nullptr; }
};

Dataset make_dataset(std::string label, Problem p, std::vector<double> x, std::vector<double> residual,
                     std::vector<double> gamma, std::vector<double> beta) {
  Dataset d;
  d.label = std::move(label);
  d.p = p;
  d.x = std::move(x), d.residual = std::move(residual), d.gamma = std::move(gamma), d.beta = std::move(beta);
  REQUIRE(static_cast<std::int64_t>(d.x.size()) == p.rows * p.cols);
  REQUIRE(p.has_gamma == !d.gamma.empty());
  REQUIRE(p.has_beta == !d.beta.empty());
  const bool add = p.op.prologue == Prologue::residual_add;
  REQUIRE(add == !d.residual.empty());
  d.xb = lnorm::testing::encode(p.dtype, d.x);
  if (add) d.rb = lnorm::testing::encode(p.residual_dtype, d.residual);
  if (p.has_gamma) d.gb = lnorm::testing::encode(p.param_dtype, d.gamma);
  if (p.has_beta) d.bb = lnorm::testing::encode(p.param_dtype, d.beta);
  const auto n = static_cast<std::size_t>(p.cols);
  const Format hf = format_of(p.residual_dtype);
  for (std::int64_t r = 0; r < p.rows; ++r) {
    std::vector<double> row(d.x.begin() + static_cast<std::ptrdiff_t>(r * p.cols), d.x.begin() + static_cast<std::ptrdiff_t>((r + 1) * p.cols));
    if (add)
      for (std::size_t i = 0; i < n; ++i) row[i] = lnorm::testing::independent_add(hf, row[i], d.residual[static_cast<std::size_t>(r * p.cols) + i]);
    const auto y = lnorm::testing::independent_norm_real(row, p.has_gamma ? &d.gamma : nullptr, p.has_beta ? &d.beta : nullptr,
                                                         p.eps, p.op.norm == Norm::layernorm, p.gamma_offset);
    d.y.insert(d.y.end(), y.begin(), y.end());
  }
  return d;
}

std::string describe_spec(const QuantSpec& s) {
  std::string out = describe(s);
  if (s.scaling == Scaling::tensor) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " s=%a", static_cast<double>(s.scale));
    out += buf;
  }
  return out;
}

QuantSpec spec_of(QuantFormat f, Scaling sc, std::int64_t group = 0, float scale = 0) {
  QuantSpec s;
  s.format = f, s.scaling = sc, s.group = group, s.scale = scale;
  return s;
}

// Every spec of `formats` that fits a row of `cols`: tensor at `scales`, row, group:8/16/64, mx.
std::vector<QuantSpec> all_specs(std::int64_t cols, const std::vector<float>& scales,
                                 std::vector<QuantFormat> formats = {std::begin(kFormats), std::end(kFormats)}) {
  std::vector<QuantSpec> out;
  for (QuantFormat f : formats) {
    for (float s : scales) out.push_back(spec_of(f, Scaling::tensor, 0, s));
    out.push_back(spec_of(f, Scaling::row));
    for (std::int64_t g : {8, 16, 64})
      if (cols % g == 0) out.push_back(spec_of(f, Scaling::group, g));
    for (std::int64_t g : {std::int64_t{0}, std::int64_t{16}})  // UE8M0 row and group scales
      if (g == 0 || cols % g == 0) {
        QuantSpec s = spec_of(f, g == 0 ? Scaling::row : Scaling::group, g);
        s.scale_format = ScaleFormat::ue8m0;
        out.push_back(s);
      }
    if (takes(Scaling::mx, f) && cols % 32 == 0)
      for (const MxRuleInfo& r : kMxRuleTable) {  // every --mx-rule
        QuantSpec s = spec_of(f, Scaling::mx);
        s.mx_rule = r.rule;
        out.push_back(s);
      }
    // nvfp4 at a power-of-two G, a G with 24 significant bits (6·midpoint/G no double: the scaled comparisons), and
    // a large one (block scales saturating at 448)
    if (takes(Scaling::nvfp4, f) && cols % 16 == 0)
      for (float g : {1.0f, 0x1.4cccccp+7f, 0x1p20f}) {
        QuantSpec s = spec_of(f, Scaling::nvfp4);
        s.global_scale = g;
        out.push_back(s);
      }
  }
  for (const QuantSpec& s : out) REQUIRE(quant_spec_error(s, cols).empty());
  return out;
}

std::string value_text(const RealValue& v) {
  if (v.nan) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g%s", v.approx.convert_to<double>(), v.exact ? " (rational)" : "");
  return buf;
}

// Runs quantize_reference on the dataset and compares its codes, scales (and y_out with check_y) with the
// independent evaluation; "" when all agree, else the first mismatches and their count. Also measures the
// reference's own answer with measure_quantized: it must read correctly rounded everywhere.
std::string check(const Dataset& d, const QuantSpec& spec, IndependentQuantizer::Counts& counts, bool check_y = false) {
  const Problem& p = d.p;
  const std::int64_t rows = p.rows, n = p.cols;
  const QuantFormat f = spec.format;
  // mx: E8M0 exponents (mx's, or UE8M0 row/group scales); G: elements per scale, written out
  const bool mx = spec.scales_are_e8m0(), nv = spec.scaling == Scaling::nvfp4;
  const std::int64_t G = spec.scaling == Scaling::group ? spec.group : spec.scaling == Scaling::mx ? 32 : nv ? 16 : n;
  const std::int64_t per_row = spec.scaling == Scaling::tensor ? 0 : n / G;
  std::vector<std::uint8_t> q(static_cast<std::size_t>(spec.q_bytes(rows, n)), 0xa5);  // as stored (fp4: packed)
  std::vector<float> s32(static_cast<std::size_t>(rows * per_row), -7.0f);
  std::vector<std::uint8_t> s8(static_cast<std::size_t>(rows * per_row), 0xa5);
  void* scales = per_row == 0 ? nullptr : mx || nv ? static_cast<void*>(s8.data()) : static_cast<void*>(s32.data());
  std::vector<std::byte> yout(static_cast<std::size_t>(rows * n) * size_of(p.dtype));
  quantize_reference(p, spec, d.xb.data(), d.res(), d.gam(), d.bet(), rows, 2, q.data(), scales, yout.data());

  const IndependentQuantizer iq(f);
  std::string msg;
  std::int64_t bad = 0;
  const auto report = [&](const std::string& line) {
    if (++bad <= 6) msg += "\n  " + line;
  };
  char buf[400];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t g = 0; g < n / G; ++g) {
      const RealValue* yg = &d.y[static_cast<std::size_t>(r * n + g * G)];
      double s = spec.scale;
      bool group_nan = false;
      if (per_row) {
        const auto want = nv ? lnorm::testing::independent_nvfp4_scale(yg, static_cast<std::size_t>(G), spec.global_scale)
                             : lnorm::testing::independent_scale(f, mx, yg, static_cast<std::size_t>(G),
                                                                 spec.scaling == Scaling::mx ? spec.mx_rule : MxRule::rceil);
        group_nan = want.nan;
        counts.zero_groups += want.zero;
        s = want.value;
        const std::size_t at = static_cast<std::size_t>(r * per_row + g);
        if (nv) {
          if (s8[at] != want.e4m3_code) {
            std::snprintf(buf, sizeof buf, "row %lld group %lld: E4M3 block scale got 0x%02x want 0x%02x", static_cast<long long>(r),
                          static_cast<long long>(g), s8[at], want.e4m3_code);
            report(buf);
          }
        } else if (mx) {
          if (s8[at] != want.mx_code) {
            std::snprintf(buf, sizeof buf, "row %lld group %lld: E8M0 scale got %d want %d", static_cast<long long>(r),
                          static_cast<long long>(g), s8[at], want.mx_code);
            report(buf);
          }
        } else if (!same_value(s32[at], want.value)) {
          std::snprintf(buf, sizeof buf, "row %lld group %lld: f32 scale got %a want %a", static_cast<long long>(r),
                        static_cast<long long>(g), static_cast<double>(s32[at]), want.value);
          report(buf);
        }
      }
      const BigF inv_s = s > 0 && std::isfinite(s) ? BigF(BigF(1) / BigF(s)) : BigF(0);
      for (std::int64_t i = g * G; i < (g + 1) * G; ++i) {
        const RealValue& y = d.y[static_cast<std::size_t>(r * n + i)];
        const std::uint8_t want = group_nan ? iq.nan_code() : iq.quantize_scaled(y, s, inv_s, &counts);
        if (group_nan) counts.nan++;
        // The stored code: a byte, or fp4's nibble (element 2i low), unpacked here by hand, not by load_code.
        const std::size_t e = static_cast<std::size_t>(r * n + i);
        const std::uint8_t got = f == QuantFormat::fp4_e2m1 ? (e % 2 ? q[e / 2] >> 4 : q[e / 2] & 0x0f) : q[e];
        const bool ok = f != QuantFormat::int8 && is_nan_code(f, want) ? is_nan_code(f, got) : got == want;
        if (!ok) {
          std::snprintf(buf, sizeof buf, "row %lld col %lld: code got 0x%02x want 0x%02x (y* = %s, s = %a)",
                        static_cast<long long>(r), static_cast<long long>(i), got, want, value_text(y).c_str(), s);
          report(buf);
        }
      }
    }
  }
  if (check_y) {
    const Format xf = format_of(p.dtype);
    for (std::int64_t i = 0; i < rows * n; ++i) {
      const RealValue& y = d.y[static_cast<std::size_t>(i)];
      const double want = y.nan ? NAN : lnorm::testing::round_to(xf, y.approx, y.exact);
      const double got = value_at(p.dtype, yout.data(), i);
      if (!same_value(got, want)) {
        std::snprintf(buf, sizeof buf, "y_out[%lld]: got %.17g want %.17g", static_cast<long long>(i), got, want);
        report(buf);
      }
    }
  }
  // The metric on the exact answer itself: every code correctly rounded, every scale exact.
  const QuantSummary m = measure_quantized(p, spec, d.xb.data(), d.res(), d.gam(), d.bet(), q.data(), scales, rows, 0,
                                           QuantBudget{}, 2);
  if (m.correctly_rounded != m.elements || m.over_budget != 0 || m.scales_over_budget != 0 || m.scale_max_ulp != 0) {
    std::snprintf(buf, sizeof buf, "measure_quantized of the reference's own answer: %lld/%lld correctly rounded, %lld over budget, "
                  "%lld scales over budget, scale max %g",
                  static_cast<long long>(m.correctly_rounded), static_cast<long long>(m.elements),
                  static_cast<long long>(m.over_budget), static_cast<long long>(m.scales_over_budget), m.scale_max_ulp);
    report(buf);
  }
  if (bad == 0) return "";
  return d.label + " " + describe_spec(spec) + ": " + std::to_string(bad) + " mismatches" + msg;
}

std::vector<double> tile(const std::vector<double>& row, std::int64_t rows) {
  std::vector<double> out;
  for (std::int64_t r = 0; r < rows; ++r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

Problem problem(Op op, DType d, std::int64_t rows, std::int64_t cols, double eps, bool g, bool b, DType pd, double offset = 0,
                DType rd = DType::f32) {
  Problem p = with_op(make_problem(rows, cols, d, eps, g, b), op);
  p = set_params(p, pd, g ? offset : 0.0);
  if (op.prologue == Prologue::residual_add) p = set_residual(p, rd);
  return p;
}

// A row of values of d, row by row seeds.
std::vector<double> random_rows(DType d, std::int64_t rows, std::int64_t cols, double offset, double scale, std::uint64_t seed) {
  std::vector<double> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto v = lnorm::testing::normal(d, static_cast<std::size_t>(cols), offset, scale, seed * 1000 + static_cast<std::uint64_t>(r));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST_CASE("quant: the independent grids are the formats' (anchors from the OCP spec)", "[quant]") {
  using lnorm::testing::independent_code_value;
  CHECK(independent_code_value(QuantFormat::fp8_e4m3, 0x7e) == 448);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3, 0x01) == 0x1p-9);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3, 0x08) == 0x1p-6);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3, 0x38) == 1);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3, 0xfe) == -448);
  CHECK(std::isnan(independent_code_value(QuantFormat::fp8_e4m3, 0x7f)));
  CHECK(std::isnan(independent_code_value(QuantFormat::fp8_e4m3, 0xff)));
  CHECK(independent_code_value(QuantFormat::fp8_e4m3, 0x78) == 256);  // no Inf: S.1111.000 is a number
  CHECK(independent_code_value(QuantFormat::fp8_e5m2, 0x7b) == 57344);
  CHECK(independent_code_value(QuantFormat::fp8_e5m2, 0x01) == 0x1p-16);
  CHECK(independent_code_value(QuantFormat::fp8_e5m2, 0x3c) == 1);
  CHECK(independent_code_value(QuantFormat::fp8_e5m2, 0x7c) == INFINITY);
  CHECK(independent_code_value(QuantFormat::fp8_e5m2, 0xfc) == -INFINITY);
  CHECK(std::isnan(independent_code_value(QuantFormat::fp8_e5m2, 0x7d)));
  CHECK(independent_code_value(QuantFormat::int8, 0x80) == -128);
  CHECK(independent_code_value(QuantFormat::int8, 0xff) == -1);
  // FNUZ (LLVM's Float8E4M3FNUZ / Float8E5M2FNUZ): 0x80 the one NaN, no Inf, max at 0x7f.
  CHECK(independent_code_value(QuantFormat::fp8_e4m3fnuz, 0x7f) == 240);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3fnuz, 0x01) == 0x1p-10);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3fnuz, 0x40) == 1);
  CHECK(independent_code_value(QuantFormat::fp8_e4m3fnuz, 0xff) == -240);
  CHECK(std::isnan(independent_code_value(QuantFormat::fp8_e4m3fnuz, 0x80)));
  CHECK(independent_code_value(QuantFormat::fp8_e5m2fnuz, 0x7f) == 57344);
  CHECK(independent_code_value(QuantFormat::fp8_e5m2fnuz, 0x7c) == 32768);  // no Inf: a number
  CHECK(independent_code_value(QuantFormat::fp8_e5m2fnuz, 0x01) == 0x1p-17);
  CHECK(independent_code_value(QuantFormat::fp8_e5m2fnuz, 0x40) == 1);
  CHECK(std::isnan(independent_code_value(QuantFormat::fp8_e5m2fnuz, 0x80)));
  CHECK(IndependentQuantizer(QuantFormat::fp8_e4m3fnuz).positive().size() == 128);  // 0..0x7f
  CHECK(IndependentQuantizer(QuantFormat::fp8_e4m3).positive().size() == 127);  // 0..0x7e
  CHECK(IndependentQuantizer(QuantFormat::fp8_e5m2).positive().size() == 124);  // 0..0x7b
  CHECK(IndependentQuantizer(QuantFormat::int8).negative().back().magnitude == 128);
  // quant.hpp's constants agree with the ones written out in independent_quant.hpp.
  for (QuantFormat f : kFormats) {
    CHECK(qmax(f) == lnorm::testing::independent_qmax(f));
    if (f != QuantFormat::int8) CHECK(emax_elem(f) == lnorm::testing::independent_emax_elem(f));
    if (f != QuantFormat::int8 && f != QuantFormat::fp4_e2m1) CHECK(std::isnan(decode(f, lnorm::encode(f, NAN))));
  }
}

TEST_CASE("quant: decode, encode and the ordinals agree with the grids enumerated from the bit layouts", "[quant]") {
  for (QuantFormat f : kFormats) {
    INFO(name(f));
    const IndependentQuantizer iq(f);
    const bool fp8 = f != QuantFormat::int8;
    // Every code decodes to its value (NaN codes NaN, E5M2's Inf ±Inf, 0x80 −0 in fp8).
    for (int c = 0; c < (f == QuantFormat::fp4_e2m1 ? 16 : 256); ++c) {
      INFO("code " << c);
      const double want = lnorm::testing::independent_code_value(f, static_cast<std::uint8_t>(c));
      CHECK(same_value(decode(f, static_cast<std::uint8_t>(c)), want));
      CHECK(code_is_nan(f, static_cast<std::uint8_t>(c)) == std::isnan(want));
    }
    const auto want_of = [&](double v) { return iq.quantize(lnorm::testing::real_of(v)); };
    const auto check_encode = [&](double v) {
      const std::uint8_t got = lnorm::encode(f, v), want = want_of(v);
      INFO("v = " << v << " (" << std::hexfloat << v << std::defaultfloat << ")");
      CHECK(static_cast<int>(got) == static_cast<int>(want));
    };
    // Grid values, midpoints, and one double ulp either side of each midpoint, both signs.
    for (const auto* grid : {&iq.positive(), &iq.negative()}) {
      const double sign = grid == &iq.positive() ? 1 : -1;
      for (std::size_t i = 0; i < grid->size(); ++i) {
        const double v = sign * (*grid)[i].magnitude;
        if (v == 0 && sign < 0 && !fp8) continue;  // int8 has no −0 (−0.0 is checked below)
        CHECK(static_cast<int>(lnorm::encode(f, v)) == static_cast<int>((*grid)[i].code));
        if (i + 1 == grid->size()) break;
        const double mid = sign * ((*grid)[i].magnitude + (*grid)[i + 1].magnitude) / 2;
        check_encode(mid);
        check_encode(std::nextafter(mid, INFINITY));
        check_encode(std::nextafter(mid, -INFINITY));
      }
    }
    // Ties go to the even mantissa: E4M3 1.0625 → 1.0, 1.1875 → 1.25; E5M2 1.125 → 1.0, 1.375 → 1.5; int8 .5s.
    if (f == QuantFormat::fp8_e4m3) {
      CHECK(decode(f, lnorm::encode(f, 1.0625)) == 1.0);
      CHECK(decode(f, lnorm::encode(f, 1.1875)) == 1.25);
      CHECK(decode(f, lnorm::encode(f, 0x1p-10)) == 0.0);
      CHECK(lnorm::encode(f, -0x1p-10) == 0x80);          // −0
      CHECK(lnorm::encode(f, 3 * 0x1p-10) == 0x02);       // 1.5 subnormal steps → 2
      CHECK(lnorm::encode(f, 464) == 0x7e);               // the midpoint past 448 saturates
    } else if (f == QuantFormat::fp8_e5m2) {
      CHECK(decode(f, lnorm::encode(f, 1.125)) == 1.0);
      CHECK(decode(f, lnorm::encode(f, 1.375)) == 1.5);
      CHECK(lnorm::encode(f, -0x1p-17) == 0x80);
      CHECK(lnorm::encode(f, 61440) == 0x7b);  // IEEE would give Inf here
    } else if (f == QuantFormat::fp8_e4m3fnuz) {
      CHECK(decode(f, lnorm::encode(f, 1.0625)) == 1.0);
      CHECK(decode(f, lnorm::encode(f, 1.1875)) == 1.25);
      CHECK(lnorm::encode(f, 0x1p-11) == 0x00);     // half the least subnormal 2^-10: ties to 0
      CHECK(lnorm::encode(f, -0x1p-11) == 0x00);    // and from below: one zero, never 0x80 (NaN)
      CHECK(lnorm::encode(f, -0x1.8p-11) == 0x81);  // past the tie: −2^-10
      CHECK(lnorm::encode(f, 248) == 0x7f);         // saturates at 240 (OCP E4M3FN would have 256 there)
    } else if (f == QuantFormat::fp8_e5m2fnuz) {
      CHECK(decode(f, lnorm::encode(f, 1.125)) == 1.0);
      CHECK(lnorm::encode(f, -0x1p-18) == 0x00);
      CHECK(lnorm::encode(f, 1e6) == 0x7f);
    } else if (f == QuantFormat::fp4_e2m1) {  // ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}: ties to the even code
      CHECK(lnorm::encode(f, 0.25) == 0x0);
      CHECK(lnorm::encode(f, -0.25) == 0x8);  // −0
      CHECK(lnorm::encode(f, 0.75) == 0x2);   // 0.5 (code 1) or 1 (code 2): 1
      CHECK(lnorm::encode(f, 1.25) == 0x2);
      CHECK(lnorm::encode(f, 2.5) == 0x4);
      CHECK(lnorm::encode(f, 3.5) == 0x6);
      CHECK(lnorm::encode(f, 5) == 0x6);
      CHECK(lnorm::encode(f, -5.0001) == 0xf);
      CHECK(lnorm::encode(f, 7) == 0x7);      // saturates at 6
      CHECK(lnorm::encode(f, 1e30) == 0x7);
      CHECK(lnorm::encode(f, NAN) == 0x0);    // no NaN code
    } else {
      CHECK(lnorm::encode(f, 0.5) == 0);
      CHECK(lnorm::encode(f, 1.5) == 2);
      CHECK(lnorm::encode(f, -2.5) == 0xfe);
      CHECK(lnorm::encode(f, 127.5) == 127);
      CHECK(lnorm::encode(f, -127.5) == 0x80);  // the tie −127/−128 goes to −128 (even)
      CHECK(lnorm::encode(f, -128.5) == 0x80);
    }
    // Beyond the largest value, infinities, zeros, tiny values, NaN.
    const double top = iq.positive().back().magnitude, bottom = iq.negative().back().magnitude;
    for (double v : {top * (1 + 0x1p-52), top * 1.03125, top * 1.0625, top * 2, 1e300, -bottom * (1 + 0x1p-52),
                     -bottom * 1.0625, -bottom * 2, -1e300, 0.0, 0x1p-1074, -0x1p-1074, 1e-300, -1e-300})
      check_encode(v);
    CHECK(lnorm::encode(f, INFINITY) == iq.positive().back().code);
    CHECK(lnorm::encode(f, -INFINITY) == iq.negative().back().code);
    const bool fnuz = lnorm::testing::independent_fnuz(f);
    const bool fp4 = f == QuantFormat::fp4_e2m1;
    const unsigned sign = fp4 ? 0x8 : 0x80;  // the code's sign bit
    CHECK(lnorm::encode(f, -0.0) == (fp8 && !fnuz ? sign : 0x00));
    if (fnuz) {  // one zero: what rounds to zero from below is +0, and 0x80 is the NaN every NaN gets
      CHECK(lnorm::encode(f, -1e-30) == 0x00);
      CHECK(lnorm::encode(f, NAN) == 0x80);
      CHECK(lnorm::encode(f, -NAN) == 0x80);
    }
    CHECK(lnorm::encode(f, 0.0) == 0x00);
    if (fp8 && !fp4) {
      CHECK(is_nan_code(f, lnorm::encode(f, NAN)));
      CHECK(is_nan_code(f, lnorm::encode(f, -NAN)));
    } else {
      CHECK(lnorm::encode(f, NAN) == 0);
    }
    // Random doubles over the whole range, both signs.
    std::mt19937_64 rng(static_cast<std::uint64_t>(f) + 41);
    std::uniform_real_distribution<double> mant(1.0, 2.0);
    std::uniform_int_distribution<int> ex(-20, 17);
    for (int k = 0; k < 3000; ++k) check_encode((rng() & 1 ? -1 : 1) * std::ldexp(mant(rng), ex(rng)));
    // Ordinals: consecutive values, the code of an ordinal decodes to its value, and back.
    CHECK(value_of_ordinal(f, max_ordinal(f)) == top);
    CHECK(value_of_ordinal(f, min_ordinal(f)) == -bottom);
    for (std::int64_t k = min_ordinal(f); k <= max_ordinal(f); ++k) {
      INFO("ordinal " << k);
      const std::uint8_t c = code_of_ordinal(f, k);
      CHECK(lnorm::testing::independent_code_value(f, c) == value_of_ordinal(f, k));
      CHECK(ordinal_of_code(f, c) == k);
      if (k > min_ordinal(f)) CHECK(value_of_ordinal(f, k - 1) < value_of_ordinal(f, k));
    }
    CHECK(iq.positive().size() + iq.negative().size() - 1 == static_cast<std::size_t>(max_ordinal(f) - min_ordinal(f) + 1));  // 0 twice
    if (fp8 && !fnuz) {
      CHECK(code_of_ordinal(f, 0, true) == sign);
      CHECK(ordinal_of_code(f, static_cast<std::uint8_t>(sign)) == 0);
    }
    if (fnuz) CHECK(code_of_ordinal(f, 0, true) == 0x00);
  }
}

TEST_CASE("quant: quantize_reference is bit-exact on random rows, every op, dtype, format and scaling", "[quant]") {
  IndependentQuantizer::Counts counts;
  int index = 0;
  for (Op op : {Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm}) {
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      for (int affine = 0; affine < 3; ++affine, ++index) {
        const bool g = affine >= 1, b = affine == 2;
        const bool half = d != DType::f32;
        const DType pd = half && index % 3 == 0 ? DType::f32 : d;
        const DType rd = half && index % 2 == 1 ? DType::f32 : d;
        const double offset = op.norm == Norm::rmsnorm && g && index % 4 == 0 ? 1.0 : 0.0;  // Gemma's (1 + w)
        const std::int64_t rows = 3, cols = index % 2 ? 128 : 64;
        const Problem p = problem(op, d, rows, cols, 1e-5, g, b, pd, offset, rd);
        const auto seed = static_cast<std::uint64_t>(index + 1);
        const bool add = op.prologue == Prologue::residual_add;
        const Dataset ds = make_dataset(
            std::string(name(op)) + " " + std::string(name(d)) + " params " + std::string(name(pd)) + (g ? " gamma" : "") +
                (b ? " beta" : "") + (offset != 0 ? " offset 1" : "") + (add ? " residual " + std::string(name(rd)) : ""),
            p, random_rows(d, rows, cols, op.norm == Norm::layernorm ? 0.5 : 0.0, 2, seed),
            add ? random_rows(rd, rows, cols, 0, 1, seed + 100) : std::vector<double>{},
            g ? lnorm::testing::normal(pd, static_cast<std::size_t>(cols), offset != 0 ? 0 : 1, 0.5, seed + 200) : std::vector<double>{},
            b ? lnorm::testing::normal(pd, static_cast<std::size_t>(cols), 0, 0.3, seed + 300) : std::vector<double>{});
        bool first = true;
        // Tensor scales: plain, non-powers of two, saturating most elements (2e-4) or all (1e-40, an f32
        // subnormal), and rounding everything to ±0 (1e30).
        for (const QuantSpec& spec : all_specs(cols, {0.0371f, 1.0f, 0.75f, 2e-4f, 1e-40f, 1e30f})) {
          CHECK(check(ds, spec, counts, first) == "");
          first = false;
        }
      }
    }
  }
  // The sweep reaches saturation, −0 and (bf16/f16 data) near-ties.
  CHECK(counts.saturated > 0);
  CHECK(counts.negative_zero > 0);
  CHECK(counts.near_ties > 0);
}


namespace {

// Two rows whose y* are exact dyadics on chosen values t: x = ±c with alternating signs (mean 0, so LayerNorm and
// RMSNorm agree: var = mean(x²) = c²), eps with c² + eps a square R², so rstd = 1/R and z = ±c/R exactly; γ_i =
// sign(x_i)·t_i·2^k gives y_i = t_i·S, S = (c/R)·2^k, in row 0, and −t_i·S in row 1 (x negated).
// (c, eps) = (2, 0): z = ±1, S = 2^k; (3, 7): z = ±3/4, S = 0.75·2^k, a scale that is not a power of two.
// anchor (0: none): every 8th t is `anchor`; anchor = qmax makes the row and group scales exactly S (and mx's 2^k),
// so y*/s = ±t; anchor = 2^emax_elem puts mx's amax exactly on a power of two (floor(log2) decided at equality).
// Add & Norm: x = ±(c − 1/2), residual = ±1/2, h = ±c.
// nudge ≠ 0 (c = 2): β_i = ±nudge·t_i·2^k, so y*_i = t_i·S·(1 ± nudge) in row 0 (−t_i·S·(1 ∓ nudge) in row 1): with
// nudge 2^-60 the nearest double of y*/s is the midpoint itself, and only an exact comparison rounds it right.
Dataset target_rows(const std::string& label, Op op, DType d, DType pd, int c, int k,
                    const std::vector<double>& targets, double anchor, std::int64_t cols, double nudge = 0) {
  const double eps = c == 2 ? 0 : 7;
  const bool add = op.prologue == Prologue::residual_add;
  REQUIRE((nudge == 0 || c == 2));
  const Problem p = problem(op, d, 2, cols, eps, true, nudge != 0, pd, 0, d);
  REQUIRE(p.eps == eps);
  std::vector<double> x, res, gamma, beta;
  std::size_t next = 0;
  for (std::int64_t i = 0; i < cols; ++i) {
    const double sign = i % 2 ? -1 : 1;
    double t = 0;
    if (anchor != 0 && i % 8 == 0) t = anchor;
    else t = targets[next++ % targets.size()];
    gamma.push_back(sign * std::ldexp(t, k));
    if (nudge != 0) beta.push_back((i % 3 == 1 ? -nudge : nudge) * std::ldexp(t, k));
    x.push_back(sign * (add ? c - 0.5 : c));
    res.push_back(sign * 0.5);
  }
  REQUIRE(next >= targets.size());  // every target placed
  for (const double v : gamma) REQUIRE(round_to_format(format_of(pd), v) == v);
  for (const double v : beta) REQUIRE(round_to_format(format_of(pd), v) == v);
  std::vector<double> x2 = x, r2 = res;
  for (double& v : x2) v = -v;
  for (double& v : r2) v = -v;
  x.insert(x.end(), x2.begin(), x2.end());
  res.insert(res.end(), r2.begin(), r2.end());
  return make_dataset(label, p, x, add ? res : std::vector<double>{}, gamma, beta);
}

int grid_k(QuantFormat f) {
  return f == QuantFormat::fp8_e4m3 || f == QuantFormat::fp8_e4m3fnuz ? -3 : f == QuantFormat::int8 ? 2 : -4;
}

}  // namespace

TEST_CASE("quant: y*/s exactly on a midpoint rounds to even, both signs, every scaling (rational rstd)", "[quant]") {
  std::int64_t total_ties = 0;
  for (QuantFormat f : kFormats) {
    const IndependentQuantizer iq(f);
    // Every midpoint of the positive grid, then grid values to fill the row.
    std::vector<double> targets;
    const auto& grid = iq.positive();
    for (std::size_t i = 0; i + 1 < grid.size(); ++i) targets.push_back((grid[i].magnitude + grid[i + 1].magnitude) / 2);
    const std::size_t midpoints = targets.size();
    for (std::size_t i = 0; targets.size() < 224; i = (i + 7) % grid.size()) targets.push_back(grid[i].magnitude);
    const int k = grid_k(f);
    for (Op op : {Op::rmsnorm, Op::layernorm, Op::add_rmsnorm}) {
      for (DType d : {DType::f32, DType::bf16, DType::f16}) {
        for (int c : {2, 3}) {
          const DType pd = d == DType::f16 && c == 3 ? DType::f32 : d;
          const Dataset ds = target_rows(std::string("midpoints ") + std::string(name(f)) + " " + std::string(name(op)) + " " +
                                             std::string(name(d)) + " c=" + std::to_string(c),
                                         op, d, pd, c, k, targets, lnorm::testing::independent_qmax(f), 256);
          const float S = static_cast<float>(std::ldexp(c == 2 ? 1.0 : 0.75, k));
          // y*/s = ±t exactly: every midpoint is a tie, in both rows.
          IndependentQuantizer::Counts at_s;
          CHECK(check(ds, spec_of(f, Scaling::tensor, 0, S), at_s, true) == "");
          CHECK(at_s.ties == static_cast<std::int64_t>(2 * midpoints));
          if (f != QuantFormat::int8 && !lnorm::testing::independent_fnuz(f)) CHECK(at_s.negative_zero >= 1);  // −(min subnormal)/2 → −0
          total_ties += at_s.ties;
          // 2t, t/2 (ties again, mostly), a non-dyadic scale, and the dynamic scalings (s = S from the anchors).
          IndependentQuantizer::Counts counts;
          for (const QuantSpec& spec : all_specs(256, {S / 2, S * 2, 0.0371f}, {f})) CHECK(check(ds, spec, counts) == "");
          CHECK(counts.ties >= static_cast<std::int64_t>(2 * midpoints));
        }
      }
    }
    // 2^-60 off every midpoint, both ways: the nearest double of y*/s is the tie (its even neighbour), and the
    // exact comparison must move off it.
    for (DType d : {DType::f32, DType::bf16}) {
      const Dataset ds = target_rows(std::string("midpoints nudged 2^-60 ") + std::string(name(f)) + " " + std::string(name(d)),
                                     Op::rmsnorm, d, DType::f32, 2, k, targets, lnorm::testing::independent_qmax(f), 256, 0x1p-60);
      IndependentQuantizer::Counts counts;
      for (const QuantSpec& spec : all_specs(256, {static_cast<float>(std::ldexp(1.0, k))}, {f}))
        CHECK(check(ds, spec, counts, spec.scaling == Scaling::tensor) == "");
      CHECK(counts.ties == 0);
    }
    // mx (and row/group) with amax exactly 2^emax_elem·2^k and just below it: mx's s = 2^k and 2^(k−1).
    if (f == QuantFormat::int8) continue;
    if (lnorm::testing::independent_emax_elem(f) < 0) continue;  // not an MX element (FNUZ)
    const double p2 = std::ldexp(1.0, lnorm::testing::independent_emax_elem(f));
    for (double anchor : {p2, p2 * 0.9375}) {
      std::vector<double> small;  // the targets below the anchor
      for (double t : targets)
        if (t < anchor) small.push_back(t);
      for (DType d : {DType::f32, DType::bf16}) {
        const Dataset ds = target_rows(std::string("power-of-two amax ") + std::string(name(f)) + " " + std::string(name(d)),
                                       Op::rmsnorm, d, d, 2, k, small, anchor, 256);
        IndependentQuantizer::Counts counts;
        for (const QuantSpec& spec : all_specs(256, {}, {f})) CHECK(check(ds, spec, counts, spec.scaling == Scaling::mx) == "");
        CHECK(counts.ties > 0);
      }
    }
  }
  CHECK(total_ties > 0);
}

TEST_CASE("quant: saturation past the largest value, ties beyond it included, never gives NaN or Inf", "[quant]") {
  for (QuantFormat f : kFormats) {
    const IndependentQuantizer iq(f);
    const double top = iq.positive().back().magnitude, quantum = top - iq.positive()[iq.positive().size() - 2].magnitude;
    // int8's negative side reaches −128: −127.5 ties to −128 (even), −128.5 saturates there.
    std::vector<double> targets = {top + quantum / 4, top + quantum / 2, top + 3 * quantum / 4, top + quantum, 2 * top, top,
                                   top - quantum / 2, 1, 0.5};
    if (f == QuantFormat::int8) targets.insert(targets.end(), {128.5, 129, 200});
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      // f32 γ: 127.25·2^k needs 9 bits.
      const Dataset ds = target_rows(std::string("beyond max ") + std::string(name(f)) + " " + std::string(name(d)), Op::rmsnorm, d,
                                     DType::f32, 2, grid_k(f), targets, 0, 32);
      IndependentQuantizer::Counts counts;
      const float S = static_cast<float>(std::ldexp(1.0, grid_k(f)));
      for (float s : {S, S / 4, 1e-30f, 0x1p-149f}) CHECK(check(ds, spec_of(f, Scaling::tensor, 0, s), counts, s == S) == "");
      CHECK(counts.saturated > 0);
      CHECK(counts.ties > 0);
    }
  }
}

TEST_CASE("quant: zero rows and zero groups (scale 1, E8M0 code 0, q = +0)", "[quant]") {
  const std::int64_t cols = 64;
  const auto specs = all_specs(cols, {0.0371f, 1e-40f});
  std::vector<Dataset> sets;
  for (DType d : {DType::f32, DType::bf16}) {
    const std::string dn(name(d));
    // RMSNorm of zeros, no β: y* = 0 (eps > 0).
    sets.push_back(make_dataset("zero rows rmsnorm " + dn, problem(Op::rmsnorm, d, 2, cols, 1e-5, true, false, d),
                                std::vector<double>(2 * cols, 0.0), {}, lnorm::testing::normal(d, cols, 1, 0.5, 3), {}));
    // LayerNorm of a constant row, no β: x − mean = 0 exactly.
    sets.push_back(make_dataset("constant rows layernorm " + dn, problem(Op::layernorm, d, 2, cols, 1e-5, true, false, d),
                                lnorm::testing::rounded(d, tile(std::vector<double>(cols, -3.14159), 2)), {},
                                lnorm::testing::normal(d, cols, 1, 0.5, 4), {}));
    // Add & Norm whose h is 0: x = −residual.
    auto xs = random_rows(d, 2, cols, 0, 1, 5), rs = xs;
    for (double& v : rs) v = -v;
    sets.push_back(make_dataset("h = 0 add_rmsnorm " + dn, problem(Op::add_rmsnorm, d, 2, cols, 1e-5, false, false, d, 0, d), xs, rs, {}, {}));
    // Zero groups inside a live row: RMSNorm with 16 zeros first; LayerNorm whose first 8 equal the mean; γ = 0
    // on columns 24..31 (y* = 0 there, no β).
    auto x = random_rows(d, 2, cols, 0, 1, 6);
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t i = 0; i < 16; ++i) x[static_cast<std::size_t>(r * cols + i)] = 0;
    auto g = lnorm::testing::normal(d, cols, 1, 0.5, 7);
    for (std::int64_t i = 24; i < 32; ++i) g[static_cast<std::size_t>(i)] = 0;
    sets.push_back(make_dataset("zero groups rmsnorm " + dn, problem(Op::rmsnorm, d, 2, cols, 1e-5, true, false, d), x, {}, g, {}));
    std::vector<double> xl;
    for (std::int64_t i = 0; i < cols; ++i) xl.push_back(i < 8 ? 1.0 : (i % 2 ? 0.0 : 2.0));  // mean 1
    sets.push_back(make_dataset("zero groups layernorm " + dn, problem(Op::layernorm, d, 1, cols, 1e-5, true, false, d), xl, {}, g, {}));
  }
  IndependentQuantizer::Counts counts;
  for (const Dataset& ds : sets)
    for (const QuantSpec& spec : specs) CHECK(check(ds, spec, counts, &spec == &specs.front()) == "");
  CHECK(counts.zero_groups > 0);
  // The reference's own scales for a zero group: 1 (row/group) and E8M0 code 0 (mx), q = +0.
  const Dataset& z = sets.front();
  for (QuantFormat f : {QuantFormat::fp8_e4m3, QuantFormat::int8}) {
    std::vector<std::uint8_t> q(static_cast<std::size_t>(2 * cols), 0xa5);
    std::vector<float> s(2, -1);
    quantize_reference(z.p, spec_of(f, Scaling::row), z.xb.data(), nullptr, z.gam(), nullptr, 2, 1, q.data(), s.data());
    CHECK(s == std::vector<float>{1, 1});
    CHECK(q == std::vector<std::uint8_t>(static_cast<std::size_t>(2 * cols), 0));
  }
  std::vector<std::uint8_t> q(static_cast<std::size_t>(2 * cols), 0xa5), e(4, 0xa5);
  quantize_reference(z.p, spec_of(QuantFormat::fp8_e5m2, Scaling::mx), z.xb.data(), nullptr, z.gam(), nullptr, 2, 1, q.data(), e.data());
  CHECK(e == std::vector<std::uint8_t>(4, 0));
  CHECK(q == std::vector<std::uint8_t>(static_cast<std::size_t>(2 * cols), 0));
}

TEST_CASE("quant: scales at f32's edges: subnormal, rounding to 0, mx clamped at 2^-127, y* past f32's range", "[quant]") {
  const std::int64_t cols = 64;
  IndependentQuantizer::Counts counts;
  // γ tiny (f32 params): amax/qmax is an f32 subnormal (1e-40), or rounds to 0 (1e-44: the group is scaled like a
  // zero group, s = 1, and its tiny y* quantize to ±0); mx's floor(log2 amax) − emax_elem is below −127 and clamps. γ huge: y* beyond f32's range (y_out
  // Inf), the scales finite.
  for (double gs : {1e-40, 1e-44, 1e38}) {
    for (Op op : {Op::rmsnorm, Op::layernorm}) {
      auto g = lnorm::testing::normal(DType::f32, cols, 1, 0.3, 8);
      for (double& v : g) {
        v = static_cast<double>(static_cast<float>(v * gs));
        REQUIRE(std::isfinite(v));
      }
      const Dataset ds = make_dataset("gamma x " + std::to_string(gs) + " " + std::string(name(op)),
                                      problem(op, DType::f32, 2, cols, 1e-5, true, false, DType::f32),
                                      random_rows(DType::f32, 2, cols, 0, 1, 9), {}, g, {});
      for (const QuantSpec& spec : all_specs(cols, {1e-40f, 1.0f})) CHECK(check(ds, spec, counts, spec.scale == 1.0f) == "");
    }
  }
  CHECK(counts.saturated > 0);
}

TEST_CASE("quant: NaN and Inf rows give NaN codes (int8: 0) and NaN scales, and a NaN γ poisons its groups", "[quant]") {
  const std::int64_t cols = 64;
  IndependentQuantizer::Counts counts;
  std::vector<Dataset> sets;
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    const std::string dn(name(d));
    auto x = random_rows(d, 4, cols, 0, 1, 10);
    x[5] = NAN;                                         // row 0: NaN
    x[static_cast<std::size_t>(cols + 9)] = INFINITY;   // row 1: Inf (y* NaN)
    x[static_cast<std::size_t>(2 * cols + 3)] = -NAN;   // row 2: a negative-signbit NaN
    for (Op op : {Op::rmsnorm, Op::layernorm})
      sets.push_back(make_dataset("nan rows " + std::string(name(op)) + " " + dn, problem(op, d, 4, cols, 1e-5, true, true, d), x, {},
                                  lnorm::testing::normal(d, cols, 1, 0.5, 11), lnorm::testing::normal(d, cols, 0, 0.3, 12)));
    // Add & Norm: a NaN residual.
    auto r = random_rows(d, 4, cols, 0, 1, 13);
    r[static_cast<std::size_t>(3 * cols + 1)] = NAN;
    sets.push_back(make_dataset("nan residual add_layernorm " + dn, problem(Op::add_layernorm, d, 4, cols, 1e-5, false, false, d, 0, d),
                                random_rows(d, 4, cols, 0, 1, 14), r, {}, {}));
    // A zero row with eps = 0: var + eps = 0, y* = 0·Inf.
    sets.push_back(make_dataset("zero row eps 0 " + dn, problem(Op::rmsnorm, d, 1, cols, 0, false, false, d), std::vector<double>(cols, 0.0),
                                {}, {}, {}));
    // NaN γ in column 20: that element's y* is NaN, and with it its group's amax.
    auto g = lnorm::testing::normal(d, cols, 1, 0.5, 15);
    g[20] = NAN;
    sets.push_back(make_dataset("nan gamma column " + dn, problem(Op::rmsnorm, d, 2, cols, 1e-5, true, false, d),
                                random_rows(d, 2, cols, 0, 1, 16), {}, g, {}));
  }
  for (const Dataset& ds : sets)
    for (const QuantSpec& spec : all_specs(cols, {0.0371f})) CHECK(check(ds, spec, counts, spec.scaling == Scaling::tensor) == "");
  CHECK(counts.nan > 0);
}

TEST_CASE("quant: near-ties of per-token scaled bf16 RMSNorm are decided exactly", "[quant]") {
  // 8 × 1024 bf16 RMSNorm with bf16 γ: y*/s = 448·(x_i γ_i)/(x_m γ_m)·(1 + δ), |δ| ≤ 2^-24 from rounding s to f32,
  // so y*/s lands within 1e-7 of a midpoint whenever that ratio of bf16 products is one: rounding y (or y/s) to
  // f32 first decides these by chance; the exact answer decides them from y* itself.
  const std::int64_t rows = 8, cols = 1024;
  const Dataset ds = make_dataset("near ties bf16 rmsnorm", problem(Op::rmsnorm, DType::bf16, rows, cols, 1e-6, true, false, DType::bf16),
                                  random_rows(DType::bf16, rows, cols, 0, 1, 17), {},
                                  lnorm::testing::normal(DType::bf16, cols, 1, 0.3, 18), {});
  IndependentQuantizer::Counts row_e4m3;
  CHECK(check(ds, spec_of(QuantFormat::fp8_e4m3, Scaling::row), row_e4m3, true) == "");
  INFO("fp8_e4m3/row: " << row_e4m3.near_ties << " near-ties, " << row_e4m3.ties << " ties");
  CHECK(row_e4m3.near_ties > 0);
  IndependentQuantizer::Counts other;
  for (const QuantSpec& spec : {spec_of(QuantFormat::fp8_e4m3, Scaling::group, 16), spec_of(QuantFormat::fp8_e4m3, Scaling::mx),
                                spec_of(QuantFormat::fp8_e5m2, Scaling::row), spec_of(QuantFormat::int8, Scaling::row),
                                spec_of(QuantFormat::int8, Scaling::group, 64)})
    CHECK(check(ds, spec, other) == "");
}

TEST_CASE("quant: nvfp4 block scales exactly on an E4M3 midpoint round to even, and 2^-60 off it they move off", "[quant]") {
  const IndependentQuantizer e4m3(QuantFormat::fp8_e4m3);
  const auto& grid = e4m3.positive();
  int blocks = 0;
  for (std::size_t j = 1; j + 1 < grid.size(); j += 5) {
    // Every block's amax is the anchor 6·m (elements 0 and 8): amax·G/6 = m at G = 1, a tie of the block scale.
    const double m = (grid[j].magnitude + grid[j + 1].magnitude) / 2, anchor = 6 * m;
    for (const double nudge : {0.0, 0x1p-60})
      for (const DType d : {DType::f32, DType::bf16}) {
        const Dataset ds = target_rows("nvfp4 block amax 6 x " + std::to_string(m) + (nudge != 0 ? " nudged" : ""), Op::rmsnorm, d,
                                       DType::f32, 2, 0, {anchor / 2, anchor / 4, anchor * 0.375}, anchor, 64, nudge);
        QuantSpec s = spec_of(QuantFormat::fp4_e2m1, Scaling::nvfp4);
        s.global_scale = 1.0f;
        IndependentQuantizer::Counts counts;
        CHECK(check(ds, s, counts, true) == "");
        blocks += 8;
      }
  }
  CHECK(blocks > 100);
}

TEST_CASE("quant: nvfp4's own global scale is 2688 over the tensor's amax|y*| in f32", "[quant]") {
  const std::int64_t cols = 64;
  const Problem p = problem(Op::rmsnorm, DType::bf16, 3, cols, 1e-5, true, false, DType::bf16);
  const Dataset ds = make_dataset("global scale", p, random_rows(DType::bf16, 3, cols, 0, 1, 11), {},
                                  lnorm::testing::normal(DType::bf16, cols, 1, 0.5, 12), {});
  BigF amax = 0;
  for (const RealValue& v : ds.y) amax = std::max(amax, BigF(boost::multiprecision::abs(v.approx)));
  const float A = static_cast<float>(amax.convert_to<double>());
  QuantSpec s = spec_of(QuantFormat::fp4_e2m1, Scaling::nvfp4);
  CHECK(needs_global_scale(s));
  const QuantSpec r = resolve_global_scale(p, s, ds.xb.data(), nullptr, ds.gam(), nullptr, 3, 2);
  CHECK(r.global_scale == 2688.0f / A);
  CHECK(nvfp4_global_scale(0.0f) == 1.0f);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(s.q_bytes(3, cols)));
  std::vector<std::uint8_t> sc(static_cast<std::size_t>(3 * cols / 16));
  CHECK_THROWS(quantize_reference(p, s, ds.xb.data(), nullptr, ds.gam(), nullptr, 3, 1, q.data(), sc.data()));
  IndependentQuantizer::Counts counts;
  CHECK(check(ds, r, counts, true) == "");
}

TEST_CASE("quant: nvfp4's element scale is E4M3value(c)/G in one f32 division, every code", "[quant]") {
  for (const float g : {1.0f, 448.0f, 0x1.4cccccp+7f, 3e-20f})
    for (int c = 0; c < 256; ++c) {
      INFO("code " << c << " G " << g);
      const double v = lnorm::testing::independent_code_value(QuantFormat::fp8_e4m3, static_cast<std::uint8_t>(c));
      const float s = nvfp4_element_scale(static_cast<std::uint8_t>(c), g);
      if (std::isnan(v)) CHECK(std::isnan(s));
      else if (v == 0) CHECK(s == std::numeric_limits<float>::infinity());
      else CHECK(s == static_cast<float>(v) / g);
    }
}
