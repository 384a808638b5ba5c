// The SIMD kernels' algorithms on every machine, at both widths (tests/simd_emulation.hpp: simd_body.hpp and
// simd_backward_body.hpp compiled against the lane-by-lane emulation): the verify suite with the native twins'
// budgets.toml sections (avx512_emu with avx512's, avx2_cr_emu with avx2_cr's, ...), and constant rows giving
// beta bit for bit. The full suites are the hidden tests "[full]" (16 lanes) and "[avx2_full]" (8 lanes), run
// by ctest avx512_emulation_verify_full (label slow: scripts/test.sh runs it) and avx2_emulation_verify_full (label
// nightly: scripts/test-nightly.sh).
// LNORM_VERIFY_SEED=S and LNORM_VERIFY_OP=rmsnorm run it at another seed or for one op (by hand: the
// seeds 1-5 runs of an op's budgets).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "simd_emulation.hpp"
#include "env_settings.hpp"
#include "kernel_cases.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/verify.hpp"

using namespace lnorm;
namespace emu = lnorm::testing::simd_emulation;

namespace {
const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

using emu::native_name;  // the native kernel whose budgets the emulated one is held to
using Kernels = std::vector<const KernelInfo*>;
const Kernels kWide{&emu::kAvx512Emu, &emu::kAvx512CrEmu}, kNarrow{&emu::kAvx2Emu, &emu::kAvx2CrEmu};

// The slow suites here (ctest avx512_emulation_verify_full/_add/_bwd) verify the AVX-512 code where the CPU
// cannot run it. Where it can, verify_full/_add/_bwd verify the native kernels and ctest
// avx512_native_equals_emulation_quick (per change) and _full (nightly) show the emulation computes their bits on
// every case of every op's suite, so running the emulation's suites too verified the same code twice (~200 s of
// CI's release run). ctest reports the test skipped (SKIP_REGULAR_EXPRESSION); LNORM_EMULATION_ON_NATIVE=1 runs it.
bool skipped_on_native(const char* suite) {
  const char* force = std::getenv("LNORM_EMULATION_ON_NATIVE");
  const KernelInfo* native = find_kernel("avx512");
  if ((force && *force == '1') || !native || native->why_not(make_problem(1, 1, DType::f32, 1e-5, false, false))) return false;
  WARN("skipped: native AVX-512 runs here; ctest verify_full* verify it and avx512_native_equals_emulation_quick/_full "
       "show the emulation's bits are its bits (" << suite << "; LNORM_EMULATION_ON_NATIVE=1 runs it anyway)");
  return true;
}

void run_suite(const Kernels& kernels, bool quick, std::uint64_t seed, const std::vector<Op>& ops = testing::ops_from_env(), int cases = 0) {
  const auto budgets = verify::Budgets::builtin();
  verify::Settings settings;
  settings.quick = quick;
  settings.seed = testing::seed_from_env(seed);
  settings.cases = cases;
  settings.command = "ctest -R emulation (lane-by-lane emulation of the SIMD kernels)";
  for (const KernelInfo* k : kernels) {
    for (Op op : ops) {
      if (!k->implements(op)) continue;  // the _cr kernels have no backward
      for (DType d : kDTypes) {
        const verify::KernelBudget& budget = budgets.for_kernel(op, native_name(*k), d);
        // Add & Norm falls back to its norm's sections (budgets.toml has no [add_*.avx512.*] of its own); the
        // backward ops have their own.
        const std::string level = op.direction == Direction::bwd ? std::string(name(op)) + "."
                                  : op.norm == Norm::layernorm ? ""
                                                                 : std::string(name(plain(op.norm))) + ".";
        REQUIRE(budget.section == level + native_name(*k) + "." + std::string(name(d)));
        for (const verify::Outcome& o : verify::verify_kernel(*k, op, d, budget, settings)) {
          std::string worst;
          for (const auto& [what, v] : o.worst) worst += " " + what + "=" + std::to_string(v);
          INFO(k->name << " " << name(op) << " " << name(d) << " " << name(o.property) << ": " << name(o.status) << worst
                       << " correctly_rounded=" << o.correctly_rounded << "\n" << o.message << "\n" << o.counterexample);
          CHECK_FALSE(verify::is_failure(o.status));
          if (!quick) WARN(k->name << " " << name(op) << " " << name(d) << " " << name(o.property) << ": " << name(o.status)
                                << worst << " correctly_rounded=" << o.correctly_rounded);
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("avx512_emu and avx512_cr_emu: the quick verify suite holds with avx512's and avx512_cr's budgets",
          "[avx512][emulation][verify]") {
  run_suite(kWide, true, 1);
}

TEST_CASE("avx2_emu and avx2_cr_emu: the quick verify suite holds with avx2's and avx2_cr's budgets", "[avx2][emulation][verify]") {
  run_suite(kNarrow, true, 1);
}

TEST_CASE("avx512_emu and avx512_cr_emu: the full verify suite (seed 1) holds with avx512's and avx512_cr's budgets",
          "[.full][avx512][emulation]") {
  if (skipped_on_native("the full suite")) return;
  run_suite(kWide, false, 1);
}

// Never skipped, but in the nightly tier (ctest avx2_emulation_verify_full, label nightly): every machine lnorm has
// met runs AVX2 natively, so the per-change run has the native avx2 kernels' full verdicts (verify_full*) and
// avx2_native_equals_emulation_quick showing the two compute the same bits; this is the 8-lane emulation's own.
TEST_CASE("avx2_emu and avx2_cr_emu: the full verify suite (seed 1) holds with avx2's and avx2_cr's budgets",
          "[.avx2_full][avx2][emulation]") {
  run_suite(kNarrow, false, 1);
}

// Add & Norm (the body's sum, then the plain rows on h), quick at 12 cases per property as ctest
// verify_quick_add runs the registry's kernels: ctest avx512_emulation_verify_add, label slow (run once, in
// the release suite; the emulation is slow under the sanitizers). LNORM_VERIFY_OP picks one fused op.
TEST_CASE("the emulated SIMD kernels: the quick verify suite of Add & Norm holds with their twins' budgets",
          "[.add][avx512][emulation]") {
  const char* one = std::getenv("LNORM_VERIFY_OP");
  const std::vector<Op> ops = one && *one ? testing::ops_from_env() : std::vector<Op>{Op::add_layernorm, Op::add_rmsnorm};
  run_suite(kNarrow, true, 1, ops, 12);
  if (skipped_on_native("Add & Norm's suite")) return;
  run_suite(kWide, true, 1, ops, 12);
}

// The backward (avx512_emu only: avx512_cr has none), quick at 12 cases per property as ctest verify_quick_bwd:
// ctest avx512_emulation_verify_bwd, label slow (9 s here in release; run once, not under the sanitizers). The
// full suite (80 cases, as verify_full_bwd; 58 s) is the hidden "[bwd_full]", by hand with LNORM_VERIFY_SEED=S.
// LNORM_VERIFY_OP picks one backward op.
std::vector<Op> backward_ops_from_env() {
  const char* one = std::getenv("LNORM_VERIFY_OP");
  return one && *one ? testing::ops_from_env() : std::vector<Op>{std::begin(kBackwardOps), std::end(kBackwardOps)};
}

TEST_CASE("avx2_emu and avx512_emu: the quick backward verify suite holds with their twins' backward budgets", "[.bwd][avx512][emulation]") {
  run_suite(kNarrow, true, 1, backward_ops_from_env(), 12);
  if (skipped_on_native("the backward suite")) return;
  run_suite(kWide, true, 1, backward_ops_from_env(), 12);
}

TEST_CASE("avx2_emu and avx512_emu: the full backward verify suite (seed 1, 80 cases) holds with their twins' backward budgets",
          "[.bwd_full][avx512][emulation]") {
  run_suite(kWide, false, 1, backward_ops_from_env(), 80);
  run_suite(kNarrow, false, 1, backward_ops_from_env(), 80);
}

TEST_CASE("the emulated SIMD kernels: constant rows give beta bit-exactly at every tail length", "[avx512][avx2][emulation]") {
  for (const KernelInfo* k : {&emu::kAvx512Emu, &emu::kAvx512CrEmu, &emu::kAvx2Emu, &emu::kAvx2CrEmu}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : {1, 3, 8, 15, 16, 17, 63, 64, 65, 511, 512, 513, 1031, 4097}) {
        const Format f = format_of(d);
        const auto n = static_cast<std::size_t>(cols);
        const auto x = testing::encode(d, std::vector<double>(n, round_to_format(f, 7.3)));
        const auto g = testing::encode(d, testing::normal(d, n, 1, 0.5, 1)), b = testing::encode(d, testing::normal(d, n, 0, 1, 2));
        std::vector<std::byte> y(x.size());
        float mean = 0, rstd = 0;
        k->run(make_problem(1, cols, d, 1e-5, true, true), Tensors{x.data(), g.data(), b.data(), y.data(), &mean, &rstd});
        INFO(k->name << " " << name(d) << " cols " << cols);
        CHECK(y == b);
        CHECK(mean == static_cast<float>(round_to_format(f, 7.3)));
      }
    }
  }
}

TEST_CASE("avx512 emulated conversions: f32 -> bf16/f16 round to nearest even, f64 -> f32 rounds to odd",
          "[avx512][emulation]") {
  // Scalar definitions: bf16 keeps the top 16 bits after rounding the low 16 to nearest even.
  CHECK(emu::emu_bf16(1.0f) == 0x3F80);
  CHECK(emu::emu_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(emu::emu_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(emu::emu_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);
  CHECK(emu::emu_bf16(std::bit_cast<float>(0x00008000u)) == 0x0000);  // subnormal tie to even: 0
  CHECK(emu::emu_bf16(std::bit_cast<float>(0x007FFFFFu)) == 0x0080);  // rounds up to the smallest normal
  CHECK(emu::emu_bf16(std::bit_cast<float>(0x7F7FFFFFu)) == 0x7F80);  // overflow to Inf
  CHECK(emu::emu_bf16(std::bit_cast<float>(0xFFC00000u)) == 0xFFC0);  // x86's default NaN
  CHECK(emu::emu_f16(65520.0f) == 0x7C00);
  CHECK(emu::emu_f16(65519.0f) == 0x7BFF);
  CHECK(emu::emu_f16(0x1p-25f) == 0x0000);
  CHECK(emu::emu_f16(std::bit_cast<float>(0xFFC00000u)) == 0xFE00);
  // Round to odd: truncate, then set the last bit when inexact.
  CHECK(emu::emu_f32_odd(1.0) == 1.0f);
  CHECK(std::bit_cast<std::uint32_t>(emu::emu_f32_odd(1.0 + 0x1p-30)) == 0x3F800001u);
  CHECK(std::bit_cast<std::uint32_t>(emu::emu_f32_odd(-(1.0 + 0x1p-30))) == 0xBF800001u);
  CHECK(std::bit_cast<std::uint32_t>(emu::emu_f32_odd(1.0 + 0x1p-23 + 0x1p-24 + 0x1p-40)) == 0x3F800001u);  // nearest is 0x...02
  CHECK(std::bit_cast<std::uint32_t>(emu::emu_f32_odd(1e300)) == 0x7F7FFFFFu);
  CHECK(std::bit_cast<std::uint32_t>(emu::emu_f32_odd(1e-300)) == 0x00000001u);
  CHECK(std::bit_cast<std::uint32_t>(emu::emu_f32_odd(-1e-300)) == 0x80000001u);
  CHECK(std::isinf(emu::emu_f32_odd(INFINITY)));
}

TEST_CASE("avx512 emulated ops of avx512_cr: fmadd_pd, max_pd (x86 NaN rule), differ_bits, near_mid16_f",
          "[avx512][emulation]") {
  double a[8] = {1.0, NAN, 1.0, -0.0, 1.0 + 0x1p-24, 1.0 + 0x1p-24, 0x1p-20, 2.0};
  double b[8] = {2.0, 1.0, NAN, 0.0, 1.0 + 0x1p-24 + 0x1p-52, 1.0 + 0x1p-24 - 0x1p-52, 0x1p-20, 2.0};
  double c[8] = {0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -4.0};
  double fma[8], mx[8];
  std::uint8_t masks[3];
  std::uint16_t near16[16];
  emu::emu_ops_d(16, a, b, c, 0x1p-14f, fma, mx, masks, near16);
  CHECK(near16[0] == 0x3C00);  // f16 1.0
  CHECK(near16[8] == 0x3F80);  // bf16 1.0
  CHECK(near16[4] == 0x3C00);  // 1 + 2^-24: nearest f32 (tie, even) is 1.0, then f16 1.0
  CHECK(fma[0] == 2.5);
  CHECK(fma[7] == 0.0);
  CHECK(mx[0] == 2.0);
  CHECK(mx[1] == 1.0);          // a NaN: b
  CHECK(std::isnan(mx[2]));     // b NaN: b
  CHECK(!std::signbit(mx[3]));  // equal zeros: b
  // differ_bits of the f32 roundings: lane 4 is just above the f32 tie 1 + 2^-24 (rounds up) against the tie itself
  // (rounds to even, 1.0); lane 5 just below against above-tie; lane 0 1.0 vs 2.0; lanes 6, 7 equal.
  CHECK((masks[0] & 0x01) != 0);
  CHECK((masks[0] & 0x30) == 0x10);  // lane 4: 1 + 2^-24 + 2^-52 → up, a (tie) → 1: differ; lane 5: a tie, b below: both 1
  CHECK((masks[0] & 0xC0) == 0);
  // near_mid16_f: 1.0 (f32 pattern 0x3F800000: low 13 bits 0, far from 0x1000) passes for f16 and bf16;
  // NaN fails; 2^-20 < y_min fails; 1 + 2^-11 (an f16 midpoint, f32 pattern low 13 bits 0x1000) fails for f16,
  // passes for bf16 (low 16 bits 0x1000, far from 0x8000).
  CHECK((masks[1] & 0x01) == 0);
  CHECK((masks[2] & 0x01) == 0);
  CHECK((masks[1] & 0x02) != 0);
  CHECK((masks[1] & 0x40) != 0);
  CHECK((masks[2] & 0x40) != 0);
  double m[8] = {1.0 + 0x1p-11, 1.0 + 0x1p-11 + 0x1p-22, 1.0 + 0x1p-11 + 0x1p-23, 1.0 + 0x1p-8, 1.0 + 0x1p-8 + 0x1p-22, -(1.0 + 0x1p-8), 3.0, -3.0};
  emu::emu_ops_d(16, m, m, m, 0x1p-14f, fma, mx, masks, near16);
  CHECK(near16[8 + 1] == 0x3F80);  // bf16 of 1 + 2^-11 + 2^-22: 1.0
  CHECK(near16[8 + 4] == 0x3F81);  // bf16 of 1 + 2^-8 + 2^-22 (above the midpoint): up
  CHECK(masks[1] == 0x05);  // f16: the midpoint itself and 1 f32 ulp from it fail; 2 ulps (lane 1) pass
  CHECK(masks[2] == 0x28);  // bf16: the midpoints 1 + 2^-8 and its negative fail; lane 4 (2 ulps) passes
}
