// The SIMD kernels' quantized epilogue (kernels/cpu/simd_quant.hpp) writes quantize_row's bits
// (kernels/cpu/quant_epilogue.cpp, the scalar kernels' epilogue and the definition the metric was tested against),
// at both widths, emulated on every machine and native where the CPU has the ISA:
//   - on adversarial y: gamma = 0 makes the kernel's f32 y its beta exactly (x̂·0 + β), so beta carries y values
//     chosen to break a vector quantizer — grid points and exact midpoints (ties) of every binade, the subnormal
//     codes, values past saturation, Inf, f32 subnormals, NaN of both signs — in rows and groups whose length
//     leaves a scalar tail (group:40 and a row of 1447 on 16 lanes);
//   - on normal data, every forward op and dtype: native == emulated, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernel_cases.hpp"
#include "lnorm/quantize.hpp"
#include "lnorm/registry.hpp"
#include "quant_epilogue.hpp"
#include "simd_emulation.hpp"

using namespace lnorm;
namespace emu = lnorm::testing::simd_emulation;

namespace {

// Every format × scaling, tensor scales a power of two (y/s exact: the ties are exact ties) and not.
std::vector<QuantSpec> specs() {
  std::vector<QuantSpec> out;
  for (const FormatInfo& fi : kFormatTable) {  // every format, the appended ones included
    const QuantFormat f = fi.format;
    out.push_back({f, Scaling::tensor, 0, 0.125f});
    out.push_back({f, Scaling::tensor, 0, 0.0371f});
    out.push_back({f, Scaling::row, 0, 0});
    out.push_back({f, Scaling::group, 40, 0});
    out.push_back({f, Scaling::group, 32, 0});
    out.push_back({f, Scaling::group, 32, 0, 0, MxRule::floor, ScaleFormat::ue8m0});
    if (takes(Scaling::mx, f))
      for (const MxRuleInfo& r : kMxRuleTable) out.push_back({f, Scaling::mx, 0, 0, 0, r.rule});
    if (takes(Scaling::nvfp4, f))
      for (float g : {1.0f, 0x1.4cccccp+7f}) out.push_back({f, Scaling::nvfp4, 0, 0, g});
  }
  return out;
}

// The kernels under test: the emulated twins always, the native ones where this CPU runs them.
std::vector<const KernelInfo*> simd_kernels(const Problem& probe) {
  std::vector<const KernelInfo*> ks{&emu::kAvx2Emu, &emu::kAvx512Emu};
  for (const char* name : {"avx2", "avx512"})
    if (const KernelInfo* k = find_kernel(name); k && !unavailable_reason(*k, probe)) ks.push_back(k);
  return ks;
}

// n f32 values a vector quantizer gets wrong first (none zero: x̂·0 + β's zero would take x̂'s sign).
std::vector<float> adversarial_row(const QuantSpec& spec, std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const QuantFormat f = spec.format;
  const double s = spec.scaling == Scaling::tensor ? spec.scale : 0.125;  // dynamic: s follows the group's amax
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            3e38f, -1e-40f, 1e-45f, std::numeric_limits<float>::min(), std::nanf(""), -std::nanf("")};
  std::vector<float> y(static_cast<std::size_t>(n));
  for (float& v : y) {
    const double pick = u(rng);
    if (pick < 0.6) {  // a grid point or the midpoint above it, times s
      const std::int64_t k = min_ordinal(f) + static_cast<std::int64_t>(u(rng) * static_cast<double>(max_ordinal(f) - min_ordinal(f)));
      double g = value_of_ordinal(f, k);
      if (u(rng) < 0.5) g = 0.5 * (g + value_of_ordinal(f, k + 1));
      v = static_cast<float>(g * s);
      // A few f32 steps off a midpoint times s (a third of them): where y·f32(1/s), the epilogue's quotient, may
      // round to the other side of the midpoint than y/s does (simd_quant.hpp kWindowUlps: such lanes go to f64).
      if (u(rng) < 0.33) {
        const int steps = 1 + static_cast<int>(u(rng) * 4);
        for (int j = 0; j < steps; ++j) v = std::nextafter(v, u(rng) < 0.5 ? 0.0f : 2 * v);
      }
    } else if (pick < 0.999) {  // (specials rare enough that some rows have none: a row's amax stays finite)  // any binade from far below the grid to far past it
      v = static_cast<float>(std::ldexp(1.0 + u(rng), static_cast<int>(u(rng) * 80) - 40) * (u(rng) < 0.5 ? -1 : 1));
    } else {
      v = specials[static_cast<std::size_t>(u(rng) * 8)];
    }
    if (v == 0) v = 1.5f;
  }
  return y;
}

struct Out {
  std::vector<std::uint8_t> q;
  std::vector<std::uint8_t> scales;  // bytes
};

Out run_quantized(const KernelInfo& k, const Problem& p, const QuantSpec& spec, const Tensors& in) {
  Out o;
  o.q.assign(static_cast<std::size_t>(spec.q_bytes(p.rows, p.cols)), 0xAA);
  const std::int64_t per_row = spec.scales_per_row(p.cols);
  o.scales.assign(static_cast<std::size_t>(p.rows * per_row) * spec.storage().bytes, 0xAA);
  Tensors t = in;
  t.q = o.q.data();
  t.scales = per_row ? o.scales.data() : nullptr;
  k.run(p, t);
  return o;
}

}  // namespace

TEST_CASE("simd quantized epilogue: q and scales equal quantize_row's on adversarial y, both widths, native and emulated", "[quant][simd]") {
  const std::int64_t rows = 3;
  int compared = 0;
  for (const std::int64_t n : {std::int64_t{1440}, std::int64_t{1447}})
    for (const QuantSpec& spec : specs()) {
      if (!quant_spec_error(spec, n).empty()) continue;  // group:40, group:32 and mx need a row they divide
      Problem p = set_quant(make_problem(rows, n, DType::f32, 1e-5, true, true), spec);
      const auto x = testing::encode(DType::f32, testing::normal(DType::f32, static_cast<std::size_t>(rows * n), 0.5, 1.0, 3));
      const std::vector<float> gamma(static_cast<std::size_t>(n), 0.0f);
      for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        const std::vector<float> beta = adversarial_row(spec, n, seed);
        Out want;
        want.q.resize(static_cast<std::size_t>(spec.q_bytes(rows, n)));
        const std::int64_t per_row = spec.scales_per_row(n);
        want.scales.resize(static_cast<std::size_t>(rows * per_row) * spec.storage().bytes);
        for (std::int64_t r = 0; r < rows; ++r)
          cpu::quantize_row(spec, beta.data(), n, want.q.data(), per_row ? want.scales.data() : nullptr, r);
        for (const KernelInfo* k : simd_kernels(p)) {
          INFO(k->name << " " << describe(spec) << " n " << n << " seed " << seed);
          const Out got = run_quantized(*k, p, spec, Tensors{x.data(), gamma.data(), beta.data()});
          std::size_t first = 0;
          while (first < got.q.size() && got.q[first] == want.q[first]) ++first;
          const float y_first = first < got.q.size() ? beta[first % static_cast<std::size_t>(n)] : 0.0f;
          INFO("first differing q at " << first << ": y " << y_first << " got " << int(first < got.q.size() ? got.q[first] : 0)
                                        << " want " << int(first < got.q.size() ? want.q[first] : 0));
          CHECK(first == got.q.size());
          CHECK(got.scales == want.scales);
          ++compared;
        }
      }
    }
  CHECK(compared >= 2 * 17 * 8);
}

// Groups whose scale group_scale forms apart from the vector lanes' rule (simd_quant.hpp group_scales_simd): groups of
// zeros (quotient: s = 1; mx floor: 2^-127; nvfp4: c = 0, s = +Inf), of f32 subnormals and of the smallest normals
// (mx's exponent field 0 against ilogb), past E4M3's 448 once over 6/G (nvfp4's saturated scale), of Inf and NaN,
// beside ordinary groups, in rows of 16 groups or more so that whole vectors of scales are formed in lanes.
TEST_CASE("simd quantized epilogue: groups of zeros, subnormals, huge and non-finite values take group_scale's scales", "[quant][simd]") {
  const std::int64_t rows = 2, n = 1280;  // 40 groups of 32, 80 of 16, 32 of 40: a vector of scales and a tail
  int compared = 0;
  for (const QuantSpec& spec : specs()) {
    if (spec.scaling == Scaling::tensor || spec.scaling == Scaling::row || !quant_spec_error(spec, n).empty()) continue;
    const std::int64_t G = spec.group_size(n);
    Problem p = set_quant(make_problem(rows, n, DType::f32, 1e-5, true, true), spec);
    const auto x = testing::encode(DType::f32, testing::normal(DType::f32, static_cast<std::size_t>(rows * n), 0.5, 1.0, 5));
    const std::vector<float> gamma(static_cast<std::size_t>(n), 0.0f);
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<double> u(0, 1);
      std::vector<float> beta = adversarial_row(spec, n, seed);
      for (std::int64_t g = 0; g < n / G; ++g) {
        const std::int64_t kind = static_cast<std::int64_t>(u(rng) * 7);
        for (std::int64_t i = g * G; i < (g + 1) * G; ++i) {
          float& v = beta[static_cast<std::size_t>(i)];
          const float sign = u(rng) < 0.5 ? -1.0f : 1.0f;
          if (kind == 0) v = 0.0f;                                                                     // zeros
          else if (kind == 1) v = sign * static_cast<float>(u(rng) * 1e-39);                          // subnormals (and 0)
          else if (kind == 2) v = sign * std::ldexp(1.0f + static_cast<float>(u(rng)), -126 - static_cast<int>(u(rng) * 3));
          else if (kind == 3) v = sign * static_cast<float>(std::ldexp(1.0 + u(rng), 10 + static_cast<int>(u(rng) * 100)));  // huge
          else if (kind == 4 && i == g * G + 3) v = u(rng) < 0.5 ? std::numeric_limits<float>::infinity() : std::nanf("");
        }
      }
      Out want;
      want.q.resize(static_cast<std::size_t>(spec.q_bytes(rows, n)));
      const std::int64_t per_row = spec.scales_per_row(n);
      want.scales.resize(static_cast<std::size_t>(rows * per_row) * spec.storage().bytes);
      for (std::int64_t r = 0; r < rows; ++r) cpu::quantize_row(spec, beta.data(), n, want.q.data(), want.scales.data(), r);
      for (const KernelInfo* k : simd_kernels(p)) {
        INFO(k->name << " " << describe(spec) << " seed " << seed);
        const Out got = run_quantized(*k, p, spec, Tensors{x.data(), gamma.data(), beta.data()});
        CHECK(got.q == want.q);
        CHECK(got.scales == want.scales);
        ++compared;
      }
    }
  }
  CHECK(compared >= 2 * 10 * 4);
}

// The fast rows take a row-scaled quantizer's amax and NaN flag while forming the row (simd_fast_rows.hpp Amax),
// in vector lanes and a scalar tail: the one large value, or the one NaN, at each of the row's last positions (the
// tail after the last full vector at either width) and its first, must set the scale as quantize_row's does.
TEST_CASE("simd quantized epilogue: a row's amax or its one NaN in its tail or head sets the row scale", "[quant][simd]") {
  int compared = 0;
  for (const std::int64_t n : {std::int64_t{1447}, std::int64_t{1455}, std::int64_t{40}})
    for (const QuantFormat f : {QuantFormat::fp8_e4m3, QuantFormat::int8})
      for (const bool with_nan : {false, true}) {
        const QuantSpec spec{f, Scaling::row, 0, 0};
        Problem p = set_quant(make_problem(1, n, DType::f32, 1e-5, true, true), spec);
        const auto x = testing::encode(DType::f32, testing::normal(DType::f32, static_cast<std::size_t>(n), 0.5, 1.0, 5));
        const std::vector<float> gamma(static_cast<std::size_t>(n), 0.0f);
        std::vector<std::int64_t> at{0, 1};
        for (std::int64_t j = n - 17; j < n; ++j) at.push_back(j);
        for (const std::int64_t j : at) {
          std::vector<float> beta(static_cast<std::size_t>(n));
          for (std::int64_t i = 0; i < n; ++i) beta[static_cast<std::size_t>(i)] = 0.25f + 0.5f * static_cast<float>(i % 7) / 7.0f;
          beta[static_cast<std::size_t>(j)] = with_nan ? std::nanf("") : -96.0f;
          Out want;
          want.q.resize(static_cast<std::size_t>(spec.q_bytes(1, n)));
          want.scales.resize(spec.storage().bytes);
          cpu::quantize_row(spec, beta.data(), n, want.q.data(), want.scales.data(), 0);
          for (const KernelInfo* k : simd_kernels(p)) {
            INFO(k->name << " " << describe(spec) << " n " << n << " at " << j << (with_nan ? " NaN" : " -96"));
            const Out got = run_quantized(*k, p, spec, Tensors{x.data(), gamma.data(), beta.data()});
            CHECK(got.scales == want.scales);
            CHECK(got.q == want.q);
            ++compared;
          }
        }
      }
  CHECK(compared >= 3 * 2 * 2 * 19 * 2);
}

TEST_CASE("simd quantized epilogue: y a few f32 steps from every midpoint times a scale whose reciprocal is inexact",
          "[quant][simd]") {
  // The epilogue's quotient is y·f32(1/s) (simd_quant.hpp kRecip), within 2^-22 of itself of y/s: near a midpoint it
  // can fall on the other side, and those lanes must be redone exactly. Every midpoint of every format (both signs),
  // f32(m·s) and 1..6 f32 steps either side, under tensor scales with inexact reciprocals and under a row scale
  // f32(amax/qmax) planted by the row's amax element.
  for (const FormatInfo& fi : kFormatTable)
    for (const float scale : {0.0371f, 0.3f, 1.0f / 3.0f, 7.1f, 1.3e-3f, 0.0f}) {
      const QuantFormat f = fi.format;
      std::vector<float> y;
      const float amax = static_cast<float>(qmax(f)) * 0.77f;  // the row scale's amax (scale 0: row scaling)
      const float s = scale > 0 ? scale : amax / static_cast<float>(qmax(f));
      if (scale == 0) y.push_back(amax);
      for (std::int64_t k = min_ordinal(f); k < max_ordinal(f); ++k) {
        const double m = 0.5 * (value_of_ordinal(f, k) + value_of_ordinal(f, k + 1));
        const float c = static_cast<float>(m * static_cast<double>(s));
        if (scale == 0 && std::fabs(c) > amax) continue;  // past the row's amax: it would set another scale
        for (int d = -6; d <= 6; ++d) {
          float v = c;
          for (int j = 0; j < (d < 0 ? -d : d); ++j) v = std::nextafter(v, d < 0 ? -3e38f : 3e38f);
          if (v != 0 && (scale > 0 || std::fabs(v) <= amax)) y.push_back(v);
        }
      }
      const std::int64_t n = static_cast<std::int64_t>(y.size() + (y.size() & 1));  // even: fp4 packs two a byte
      y.resize(static_cast<std::size_t>(n), s);
      const QuantSpec spec = scale > 0 ? QuantSpec{f, Scaling::tensor, 0, scale} : QuantSpec{f, Scaling::row, 0, 0};
      Problem p = set_quant(make_problem(1, n, DType::f32, 1e-5, true, true), spec);
      const auto x = testing::encode(DType::f32, testing::normal(DType::f32, static_cast<std::size_t>(n), 0.5, 1.0, 3));
      const std::vector<float> gamma(static_cast<std::size_t>(n), 0.0f);
      Out want;
      want.q.resize(static_cast<std::size_t>(spec.q_bytes(1, n)));
      want.scales.resize(static_cast<std::size_t>(spec.scales_per_row(n)) * spec.storage().bytes);
      cpu::quantize_row(spec, y.data(), n, want.q.data(), want.scales.empty() ? nullptr : want.scales.data(), 0);
      for (const KernelInfo* k : simd_kernels(p)) {
        INFO(k->name << " " << describe(spec) << " s " << s << " n " << n);
        const Out got = run_quantized(*k, p, spec, Tensors{x.data(), gamma.data(), y.data()});
        std::size_t first = 0;
        while (first < got.q.size() && got.q[first] == want.q[first]) ++first;
        INFO("first differing q byte " << first);
        CHECK(first == got.q.size());
        CHECK(got.scales == want.scales);
      }
    }
}

TEST_CASE("simd quantized epilogue: native kernels write their emulated twins' q and scales, every forward op and dtype", "[quant][simd]") {
  const std::int64_t rows = 3, cols = 1440;
  const std::pair<const char*, const KernelInfo*> pairs[] = {{"avx2", &emu::kAvx2Emu}, {"avx512", &emu::kAvx512Emu}};
  const Op ops[] = {Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm};
  for (const auto& [name, twin] : pairs) {
    const KernelInfo* native = find_kernel(name);
    const Problem probe = set_quant(make_problem(1, 256, DType::f32, 1e-5, true, true), {QuantFormat::int8, Scaling::row, 0, 0});
    if (!native || unavailable_reason(*native, probe)) {
      WARN(name << " does not run on this CPU: its emulated twin alone is checked (the test above)");
      continue;
    }
    for (Op op : ops)
      for (DType d : {DType::f32, DType::bf16, DType::f16})
        for (const QuantSpec& spec : specs()) {
          INFO(name << " " << lnorm::name(op) << " " << lnorm::name(d) << " " << describe(spec));
          const Problem p = set_quant(with_op(make_problem(rows, cols, d, 1e-5, true, op.norm == Norm::layernorm), op), spec);
          const auto x = testing::encode(d, testing::normal(d, static_cast<std::size_t>(rows * cols), 0.5, 1.0, 11));
          const auto res = testing::encode(d, testing::normal(d, static_cast<std::size_t>(rows * cols), 0.0, 0.5, 12));
          const auto g = testing::encode(d, testing::normal(d, static_cast<std::size_t>(cols), 1.0, 0.2, 13));
          const auto b = testing::encode(d, testing::normal(d, static_cast<std::size_t>(cols), 0.0, 0.1, 14));
          std::vector<std::byte> h1(x.size()), h2(x.size());
          Tensors t{x.data(), g.data(), p.has_beta ? b.data() : nullptr};
          const bool add = op.prologue == Prologue::residual_add;
          if (add) t.residual = res.data(), t.h = h1.data();
          const Out a = run_quantized(*native, p, spec, t);
          if (add) t.h = h2.data();
          const Out e = run_quantized(*twin, p, spec, t);
          CHECK(a.q == e.q);
          CHECK(a.scales == e.scales);
          if (add) CHECK(h1 == h2);
        }
  }
}

// The _cr kernels' settled-code test on vector lanes (simd_quant_exact.hpp) may call a code settled only where every
// value the bound allows quantizes to it: y at grid midpoints times s, a few f64 steps off them, with a bound of
// several steps (so a test that ignored the bound would settle lanes whose neighbourhood straddles the midpoint),
// and far from them, where most lanes must settle (a test that settled nothing would pass the first check alone).
// One scale for the whole span, and groups of 16, 32 and 128 each over its own scale (a row's small groups in one
// call), among them groups whose scale is 0 or +Inf (nothing may settle there) and one whose bound is as wide as the
// small codes' half quanta: a test that kept one group's constants for the next, or formed them from the wrong
// group's scale, would settle codes the bound does not.
TEST_CASE("correctly rounded kernels: a vector-settled code is the code of every value within the bound", "[quant][simd][cr]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  // The last, 2^-33, puts e_abs/s at 2^-7 of t: as wide as the small codes' half quanta (a C formed from another
  // group's 1/s, or too small, settles lanes near their midpoints there); its far lanes need not settle.
  const double kScales[] = {0.125, 0.0371, 3.0e-3, 1.7e4, 0x1p-20, 0x1p-33};
  for (const FormatInfo& fi : kFormatTable) {
    const QuantFormat f = fi.format;
    for (const std::int64_t G : {std::int64_t{4096}, std::int64_t{16}, std::int64_t{32}, std::int64_t{128}})
      for (int first = 0; first < 3; ++first)
        for (const int lanes : {16, 8}) {
          const std::int64_t n = 4096;
          std::vector<double> y(static_cast<std::size_t>(n)), s(static_cast<std::size_t>(n / G));
          for (std::size_t g = 0; g < s.size(); ++g) s[g] = G == n ? kScales[first] : kScales[(g + static_cast<std::size_t>(first)) % 6];
          if (G < n) s[3] = 0, s[7] = INFINITY;  // no scale: nothing settles
          const double e_abs = 0x1p-40, e_rel = 0x1p-48;  // several f64 steps of y at these magnitudes
          for (std::int64_t i = 0; i < n; ++i) {
            const double si = s[static_cast<std::size_t>(i / G)] > 0 && std::isfinite(s[static_cast<std::size_t>(i / G)]) ? s[static_cast<std::size_t>(i / G)] : 0.5;
            const std::int64_t k = min_ordinal(f) + static_cast<std::int64_t>(u(rng) * static_cast<double>(max_ordinal(f) - min_ordinal(f)));
            const double mid = 0.5 * (value_of_ordinal(f, k) + value_of_ordinal(f, k + 1));
            const bool unscaled = !(s[static_cast<std::size_t>(i / G)] > 0 && std::isfinite(s[static_cast<std::size_t>(i / G)]));
            // Far lanes 0.3 of a quantum off a grid value; in a group without a scale, on it (its low bits all zero:
            // a bits window that let such a group through would settle them).
            double v = (i % 2 == 0 ? mid : value_of_ordinal(f, k) + (unscaled ? 0.0 : 0.3) * (value_of_ordinal(f, k + 1) - value_of_ordinal(f, k))) * si;
            if (i % 4 == 0) {  // a few f64 steps off the midpoint, inside the bound
              const int steps = static_cast<int>(u(rng) * 64) - 32;
              for (int j = 0; j < (steps < 0 ? -steps : steps); ++j) v = std::nextafter(v, steps < 0 ? -INFINITY : INFINITY);
            } else if (i % 4 == 2) {  // a quarter of e_abs off the midpoint: inside the bound, outside a C a quarter its size
              v += 0.25 * e_abs;
            }
            y[static_cast<std::size_t>(i)] = v;
          }
          // NaN (a tensor scale's NaN y*: never settled) and ±Inf (saturated, or unsettled) among the near lanes.
          for (std::int64_t i = 40; i < n; i += 400) y[static_cast<std::size_t>(i)] = i % 800 == 40 ? std::numeric_limits<double>::quiet_NaN() : (i % 1200 == 440 ? -INFINITY : INFINITY);
          std::vector<std::uint8_t> codes(static_cast<std::size_t>(n)), settled(static_cast<std::size_t>(n));
          emu::emu_settle_codes(lanes, f, y.data(), n, G, s.data(), e_abs, e_rel, codes.data(), settled.data());
          std::int64_t settled_far = 0, far = 0, wrong = 0;
          for (std::int64_t i = 0; i < n; ++i) {
            const double yi = y[static_cast<std::size_t>(i)], err = 0.5 * (e_abs + e_rel * std::fabs(yi));
            const double si = s[static_cast<std::size_t>(i / G)];
            const bool scaled = si > 0 && std::isfinite(si);
            if (i % 2 == 1 && scaled && si != 0x1p-33) {
              ++far;
              settled_far += settled[static_cast<std::size_t>(i)];
            }
            if (!settled[static_cast<std::size_t>(i)]) continue;
            if (yi != yi || !scaled) {
              ++wrong;
              continue;
            }
            if (std::isinf(yi)) {  // y overflowed: y* is as large (the bound is relative), y*/s saturates
              wrong += codes[static_cast<std::size_t>(i)] != encode(f, yi);
              continue;
            }
            const std::uint8_t lo = encode(f, (yi - err) / si), hi = encode(f, (yi + err) / si);
            wrong += lo != codes[static_cast<std::size_t>(i)] || hi != codes[static_cast<std::size_t>(i)];
          }
          INFO(info(f).name << " G " << G << " first scale " << kScales[first] << " lanes " << lanes);
          CHECK(wrong == 0);
          CHECK(settled_far >= far * 99 / 100);
        }
  }
}

// The groups' largest |y| on vector lanes (the amax* bounds are formed from it): one group of every length from 1
// past two vectors, the largest element at each position, signs mixed, and a NaN beside it dropped; then groups of
// 16 and 32 in one call, each its own largest (ExactQuantRow::max_abs).
TEST_CASE("correctly rounded kernels: the vector largest |y| is the scalar max, every length and position", "[quant][simd][cr]") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const int lanes : {16, 8}) {
    for (std::int64_t n = 1; n <= 40; ++n)
      for (std::int64_t big = 0; big < n; ++big) {
        std::vector<double> y(static_cast<std::size_t>(n));
        for (double& v : y) v = u(rng);
        y[static_cast<std::size_t>(big)] = (big % 2 ? -3.0 : 3.0) + u(rng) * 0x1p-30;
        double want = 0, got = -1;
        for (const double v : y) want = std::max(want, std::fabs(v));
        INFO("lanes " << lanes << " n " << n << " largest at " << big);
        emu::emu_group_max_abs(lanes, y.data(), n, n, &got);
        CHECK(got == want);
        if (n > 1) {  // a NaN elsewhere drops out
          y[static_cast<std::size_t>((big + 1) % n)] = std::numeric_limits<double>::quiet_NaN();
          emu::emu_group_max_abs(lanes, y.data(), n, n, &got);
          CHECK(got == want);
        }
      }
    for (const std::int64_t G : {16, 32}) {
      std::vector<double> y(512), got(512 / static_cast<std::size_t>(G), -1);
      for (double& v : y) v = u(rng) * (1 + std::fabs(u(rng)) * 8);
      emu::emu_group_max_abs(lanes, y.data(), 512, G, got.data());
      for (std::size_t g = 0; g < got.size(); ++g) {
        double want = 0;
        for (std::size_t i = g * static_cast<std::size_t>(G); i < (g + 1) * static_cast<std::size_t>(G); ++i) want = std::max(want, std::fabs(y[i]));
        INFO("lanes " << lanes << " G " << G << " group " << g);
        CHECK(got[g] == want);
      }
    }
  }
}

TEST_CASE("correctly rounded kernels: q and scales are the reference's bit for bit, near-ties included", "[quant][simd][cr]") {
  // The near-tie case first (8x1024 bf16 RMSNorm, per-token E4M3: y*/s within 1e-7 of a midpoint, where an
  // f32 y moves a code), then the other scalings, formats and dtypes.
  struct Spec {
    DType d;
    Op op;
    QuantSpec spec;
  };
  const Spec cases[] = {
      {DType::bf16, Op::rmsnorm, {QuantFormat::fp8_e4m3, Scaling::row, 0, 0}},
      {DType::f16, Op::layernorm, {QuantFormat::int8, Scaling::group, 64, 0}},
      {DType::f32, Op::layernorm, {QuantFormat::fp8_e5m2, Scaling::mx, 0, 0}},
      {DType::bf16, Op::add_rmsnorm, {QuantFormat::fp8_e4m3, Scaling::tensor, 0, 0.0078125f}},
  };
  std::vector<const KernelInfo*> ks{&emu::kAvx2CrEmu, &emu::kAvx512CrEmu};
  for (const char* name : {"avx2_cr", "avx512_cr"})
    if (const KernelInfo* k = find_kernel(name); k && !unavailable_reason(*k, make_problem(1, 64, DType::f32, 1e-5, true, false)))
      ks.push_back(k);
  const std::int64_t rows = 8, cols = 1024;
  for (const Spec& c : cases) {
    const Problem p = set_quant(with_op(make_problem(rows, cols, c.d, 1e-5, true, false), c.op), c.spec);
    const auto x = testing::encode(c.d, testing::normal(c.d, static_cast<std::size_t>(rows * cols), 0.0, 1.0, 3));
    const auto res = testing::encode(c.d, testing::normal(c.d, static_cast<std::size_t>(rows * cols), 0.0, 0.5, 5));
    const auto g = testing::encode(c.d, testing::normal(c.d, static_cast<std::size_t>(cols), 1.0, 0.1, 4));
    const bool add = c.op.prologue == Prologue::residual_add;
    const std::int64_t per_row = c.spec.scales_per_row(cols);
    Out want;
    want.q.resize(static_cast<std::size_t>(rows * cols));
    want.scales.resize(static_cast<std::size_t>(rows * per_row) * c.spec.storage().bytes);
    quantize_reference(p, c.spec, x.data(), add ? res.data() : nullptr, g.data(), nullptr, rows, 2, want.q.data(),
                       per_row ? want.scales.data() : nullptr, nullptr);
    for (const KernelInfo* k : ks) {
      INFO(k->name << " " << name(c.op) << " " << name(c.d) << " " << describe(c.spec));
      std::vector<std::byte> h(x.size());
      Tensors t{x.data(), g.data(), nullptr};
      if (add) t.residual = res.data(), t.h = h.data();
      const Out got = run_quantized(*k, p, c.spec, t);
      std::size_t first = 0;
      while (first < got.q.size() && got.q[first] == want.q[first]) ++first;
      INFO("first differing q at " << first);
      CHECK(first == got.q.size());
      CHECK(got.scales == want.scales);
    }
  }
}

TEST_CASE("correctly rounded kernels: y* a hair below a tie or a power of two that f64 arithmetic rounds onto it", "[quant][simd][cr]") {
  // x = ±1, eps = 2^-60: y* = ±γ/sqrt(1 + 2^-60) = ±γ(1 − 2^-61 + ...), which f64's 1 + 2^-60 = 1 puts exactly on γ.
  // γ/s on a midpoint whose even neighbour is the upper one (E4M3 1.1875 between 1.125 and 1.25; E5M2 1.375; int8 3.5), or γ a
  // power of two (mx: floor(log2 amax*) is one less than f64's): only the exact decision gets q and X right.
  struct Spec {
    QuantSpec spec;
    float gamma;
  };
  const Spec cases[] = {
      {{QuantFormat::fp8_e4m3, Scaling::tensor, 0, 0.125f}, 1.1875f * 0.125f},
      {{QuantFormat::int8, Scaling::tensor, 0, 0.125f}, 3.5f * 0.125f},
      {{QuantFormat::fp8_e4m3, Scaling::mx, 0, 0}, 0.5f},
      {{QuantFormat::fp8_e5m2, Scaling::tensor, 0, 0.125f}, 1.375f * 0.125f},  // between 1.25 and 1.5
  };
  std::vector<const KernelInfo*> ks{&emu::kAvx2CrEmu, &emu::kAvx512CrEmu};
  for (const char* name : {"avx2_cr", "avx512_cr"})
    if (const KernelInfo* k = find_kernel(name); k && !unavailable_reason(*k, make_problem(1, 64, DType::f32, 1e-5, true, false)))
      ks.push_back(k);
  const std::int64_t rows = 2, cols = 64;
  for (const Norm norm : {Norm::layernorm, Norm::rmsnorm})
    for (const Spec& c : cases) {
      const Op op = norm == Norm::layernorm ? Op::layernorm : Op::rmsnorm;
      const Problem p = set_quant(with_op(make_problem(rows, cols, DType::bf16, 0x1p-60, true, false), op), c.spec);
      std::vector<double> xv(static_cast<std::size_t>(rows * cols));
      for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = (i * 7 / 3) % 2 ? 1.0 : -1.0;  // as many +1 as −1 per row
      const auto x = testing::encode(DType::bf16, xv);
      const auto g = testing::encode(DType::bf16, std::vector<double>(static_cast<std::size_t>(cols), c.gamma));
      const std::int64_t per_row = c.spec.scales_per_row(cols);
      Out want;
      want.q.resize(static_cast<std::size_t>(c.spec.q_bytes(rows, cols)));
      want.scales.resize(static_cast<std::size_t>(rows * per_row) * c.spec.storage().bytes);
      quantize_reference(p, c.spec, x.data(), nullptr, g.data(), nullptr, rows, 1, want.q.data(), per_row ? want.scales.data() : nullptr);
      // What f64 arithmetic alone gives (y = ±γ): a different answer, or the case tests nothing.
      std::vector<std::uint8_t> f64_q(want.q.size());
      std::vector<std::uint8_t> f64_scales(want.scales.size());
      std::vector<float> y_f64(static_cast<std::size_t>(cols));
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t i = 0; i < cols; ++i) y_f64[static_cast<std::size_t>(i)] = static_cast<float>(xv[static_cast<std::size_t>(r * cols + i)] * c.gamma);
        cpu::quantize_row(c.spec, y_f64.data(), cols, f64_q.data(), per_row ? f64_scales.data() : nullptr, r);
      }
      INFO(name(op) << " " << describe(c.spec));
      CHECK((f64_q != want.q || f64_scales != want.scales));
      for (const KernelInfo* k : ks) {
        INFO(k->name);
        const Out got = run_quantized(*k, p, c.spec, Tensors{x.data(), g.data(), nullptr});
        CHECK(got.q == want.q);
        CHECK(got.scales == want.scales);
      }
    }
}
