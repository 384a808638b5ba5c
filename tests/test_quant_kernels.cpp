// The CPU kernels' quantized epilogue (kernels/cpu/quant_epilogue.hpp): every kernel that declares it writes q and
// scales that pass the metric's budget (0.5 quanta + the rounding y to x's dtype could add + the kernel's own f32 y
// error, QuantBudget::y_a/y_b), on every forward op, f32/bf16/f16 x, every format and scaling; y itself is not
// written; a kernel that does not declare it refuses the problem; and the epilogue's own semantics hold exactly on
// hand-made rows (zero groups, NaN groups, s below f32's range, −0).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernel_cases.hpp"
#include "lnorm/quantize.hpp"
#include "lnorm/registry.hpp"
#include "quant_epilogue.hpp"

using namespace lnorm;

namespace {

struct Spec {
  QuantFormat f;
  Scaling sc;
  std::int64_t group;
  float scale;
};
const Spec kSpecs[] = {
    {QuantFormat::fp8_e4m3, Scaling::tensor, 0, 0.0078125f}, {QuantFormat::fp8_e5m2, Scaling::tensor, 0, 0.0371f},
    {QuantFormat::int8, Scaling::tensor, 0, 0.0234375f},     {QuantFormat::fp8_e4m3, Scaling::row, 0, 0},
    {QuantFormat::int8, Scaling::row, 0, 0},                 {QuantFormat::fp8_e5m2, Scaling::group, 64, 0},
    {QuantFormat::int8, Scaling::group, 128, 0},             {QuantFormat::fp8_e4m3, Scaling::mx, 0, 0},
    {QuantFormat::fp8_e5m2, Scaling::mx, 0, 0},
    {QuantFormat::fp8_e4m3fnuz, Scaling::row, 0, 0},      {QuantFormat::fp8_e5m2fnuz, Scaling::group, 64, 0},
    {QuantFormat::fp8_e4m3fnuz, Scaling::tensor, 0, 0.0078125f},
};

}  // namespace

TEST_CASE("quantized kernels: q and scales within the metric's budget, every op, dtype, format and scaling", "[quant][kernels]") {
  const Op ops[] = {Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm};
  int kernels_run = 0;
  for (const KernelInfo& k : registry()) {
    if (!k.takes.epilogues.contains(Epilogue::quantized)) continue;
    if (unavailable_reason(k, set_quant(make_problem(1, 256, DType::f32, 1e-5, true, true), {QuantFormat::int8, Scaling::row, 0, 0})))
      continue;  // an ISA this CPU lacks (its emulated twin is checked by test_simd_emulation)
    ++kernels_run;
    for (Op op : ops)
      for (DType d : {DType::f32, DType::bf16, DType::f16})
        for (const Spec& sp : kSpecs) {
          const std::int64_t rows = 6, cols = 512;
          const QuantSpec spec{sp.f, sp.sc, sp.group, sp.scale};
          INFO(k.name << " " << name(op) << " " << name(d) << " " << describe(spec));
          Problem p = set_quant(with_op(make_problem(rows, cols, d, 1e-5, true, op.norm == Norm::layernorm), op), spec);
          const auto x = testing::encode(d, testing::normal(d, static_cast<std::size_t>(rows * cols), 0.5, 1.0, 7));
          const auto res = testing::encode(d, testing::normal(d, static_cast<std::size_t>(rows * cols), 0.0, 0.5, 8));
          const auto g = testing::encode(d, testing::normal(d, static_cast<std::size_t>(cols), 1.0, 0.2, 9));
          const auto b = testing::encode(d, testing::normal(d, static_cast<std::size_t>(cols), 0.0, 0.1, 10));
          std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * cols), 0xAA);
          const std::int64_t per_row = spec.scales_per_row(cols);
          std::vector<std::byte> scales(static_cast<std::size_t>(rows * per_row) * spec.storage().bytes);
          std::vector<std::byte> h(x.size());
          Tensors t{x.data(), g.data(), p.has_beta ? b.data() : nullptr};
          const bool add = op.prologue == Prologue::residual_add;
          if (add) t.residual = res.data(), t.h = h.data();
          t.q = q.data();
          t.scales = per_row ? scales.data() : nullptr;
          REQUIRE_FALSE(unavailable_reason(k, p));
          k.run(p, t);
          QuantBudget budget;
          budget.y_a = 8, budget.y_b = 1;  // a kernel's f32 y within check's default 8 + kappa scaled ulps
          const QuantSummary m = measure_quantized(p, spec, x.data(), add ? res.data() : nullptr, g.data(),
                                                   p.has_beta ? b.data() : nullptr, q.data(), t.scales, rows, 0, budget, 1);
          INFO("max " << m.max_ulp << " quanta, worst excess " << m.worst_excess << ", scales max " << m.scale_max_ulp
                      << ", correctly rounded " << m.correctly_rounded_fraction());
          CHECK(m.q_pass());
          CHECK(m.scales_pass());
          CHECK(m.nonfinite_mismatches == 0);
          CHECK(m.correctly_rounded_fraction() > 0.99);  // an f32 y off by a few ulps rarely moves q
          if (k.name.ends_with("_cr")) {  // exact (kernels/cpu/quant_exact.hpp): every code and scale
            CHECK(m.correctly_rounded == m.elements);
            CHECK(m.scale_max_ulp == 0);
          }
        }
  }
  CHECK(kernels_run >= 2);  // naive and welford everywhere
}

TEST_CASE("quantized kernels: a kernel that does not declare the epilogue refuses it", "[quant][kernels]") {
  const KernelInfo* cr = find_kernel("onepass");
  REQUIRE(cr);
  const Problem p = set_quant(make_problem(1, 64, DType::f32, 1e-5, false, false), {QuantFormat::int8, Scaling::row, 0, 0});
  const auto why = unavailable_reason(*cr, p);
  REQUIRE(why);
  // The part it lacks, not the norm it has (it once read "onepass does not implement layernorm").
  CHECK(*why == "onepass writes no quantized output (it implements layernorm with y only)");
  CHECK_THROWS(set_quant(with_op(p, Op::layernorm_bwd), {QuantFormat::int8, Scaling::row, 0, 0}));
  CHECK_THROWS(set_quant(make_problem(1, 64, DType::f64, 1e-5, false, false), {QuantFormat::int8, Scaling::row, 0, 0}));
  CHECK_THROWS(set_quant(make_problem(1, 60, DType::f32, 1e-5, false, false), {QuantFormat::int8, Scaling::group, 64, 0}));
}

TEST_CASE("quantized epilogue: zero groups, NaN groups, scales below f32's range and -0, exactly", "[quant][kernels]") {
  std::vector<float> y(64, 0.0f);
  for (int i = 32; i < 64; ++i) y[static_cast<std::size_t>(i)] = static_cast<float>(i - 40) * 0.25f;
  y[33] = -1e-30f;  // rounds to -0 in fp8 under its group's scale
  std::vector<std::uint8_t> q(64);
  std::vector<float> s(2);
  cpu::quantize_row({QuantFormat::fp8_e4m3, Scaling::group, 32, 0}, y.data(), 64, q.data(), s.data(), 0);
  CHECK(s[0] == 1.0f);  // a zero group's scale is 1, its q +0
  for (int i = 0; i < 32; ++i) CHECK(q[static_cast<std::size_t>(i)] == 0x00);
  CHECK(s[1] == 5.75f / 448.0f);  // amax = (63 − 40)·0.25, one f32 division
  CHECK(q[33] == 0x80);
  // mx: a zero group is E8M0 code 0; a NaN group is code 255 and NaN codes.
  std::vector<float> z(64, 0.0f);
  z[40] = std::nanf("");
  std::vector<std::uint8_t> e(2);
  cpu::quantize_row({QuantFormat::fp8_e4m3, Scaling::mx, 0, 0}, z.data(), 64, q.data(), e.data(), 0);
  CHECK(e[0] == 0);
  CHECK(e[1] == 255);
  for (int i = 32; i < 64; ++i) CHECK((q[static_cast<std::size_t>(i)] & 0x7f) == 0x7f);
  // amax/qmax below f32's range: scaled by 1 like a zero group, the tiny values ±0.
  std::vector<float> tiny(32, 0.0f);
  tiny[1] = 1e-45f, tiny[2] = -1e-45f;
  cpu::quantize_row({QuantFormat::fp8_e4m3, Scaling::row, 0, 0}, tiny.data(), 32, q.data(), s.data(), 0);
  CHECK(s[0] == 1.0f);
  CHECK(q[0] == 0x00);
  CHECK(q[1] == 0x00);
  CHECK(q[2] == 0x80);
}
