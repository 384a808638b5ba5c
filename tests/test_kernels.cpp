// The scalar kernels against the exact reference, and the registry's contract.
#include <cpuid.h>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "kernel_cases.hpp"
#include "lnorm/format.hpp"
#include "lnorm/params.hpp"
#include "lnorm/registry.hpp"

// F16C from cpuid leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c" (the asan
// preset builds with clang), as in kernels/cpu/simd_kernels.cpp.
static bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}


using namespace lnorm;
using lnorm::testing::foundation_cases;
using lnorm::testing::measure;

namespace {

const KernelInfo& kernel(std::string_view name) {
  const KernelInfo* k = find_kernel(name);
  REQUIRE(k != nullptr);
  return *k;
}

}  // namespace

TEST_CASE("registry: unique names in a fixed order, found by name, scalar kernels run everywhere, ISA kernels say why not",
          "[registry]") {
  std::set<std::string_view> names;
  __builtin_cpu_init();
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  const bool has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  for (const KernelInfo& k : registry()) {
    CHECK(names.insert(k.name).second);
    CHECK(find_kernel(k.name) == &k);
    CHECK_FALSE(k.summary.empty());
    for (DType d : kAllDTypes) {
      const auto why = unavailable_reason(k, make_problem(1, 8, d, 1e-5, false, false));
      INFO(k.name << " " << name(d) << ": " << why.value_or("available"));
      if (!k.takes.dtypes.contains(d)) CHECK(why.has_value());
      else if (k.name == "avx2" || k.name == "avx2_cr") CHECK(why.has_value() != has_avx2);
      else if (k.name == "avx512" || k.name == "avx512_cr") {
        CHECK(why.has_value() != has_avx512);  // a missing feature is named: "CPU lacks avx512bw"
        if (why) CHECK_THAT(*why, Catch::Matchers::StartsWith("CPU lacks avx512") || Catch::Matchers::Contains("f16c"));
      }
      else if (k.name.starts_with("cuda_"))  // in plain words: "no NVIDIA GPU or driver on this machine", or the device it found
        CHECK_THAT(why.value_or("GPU"), Catch::Matchers::Contains("GPU") || Catch::Matchers::Contains("compute capability"));
      else CHECK_FALSE(why.has_value());
    }
  }
  CHECK(registry()[0].name == "avx512_cr");
  CHECK(registry()[1].name == "avx512");
  CHECK(registry()[2].name == "avx2_cr");
  CHECK(registry()[4].name == "welford");
#ifdef LNORM_HAVE_CUDA
  // Built with CUDA: the three CUDA kernels follow every CPU kernel.
  REQUIRE(registry().size() == 10);
  CHECK(registry()[7].name == "cuda_warp");
  CHECK(registry()[8].name == "cuda_block");
  CHECK(registry()[9].name == "cuda_naive");
#else
  CHECK(registry().size() == 7);
#endif
  CHECK(find_kernel("no-such-kernel") == nullptr);
  CHECK(kernel("onepass").cautionary);
  CHECK_FALSE(kernel("welford").cautionary);
}

// Including the range cases (x² near f32/f64 overflow, subnormal rows with eps = 0), which welford
// handles by rescaling the row by a power of two.
TEST_CASE("welford: within 8 + 1*kappa scaled ulps on every foundation case",
          "[kernels][welford]") {
  const Budget budget{8, 1};
  for (DType d : kAllDTypes) {
    for (const auto& c : foundation_cases(d)) {
      const auto m = measure(kernel("welford"), d, c.x, c.eps, budget);
      INFO(name(d) << " " << c.label << ": max " << m.y.max_ulp << " scaled ulp, kappa " << m.y.max_ulp_kappa
                   << ", NaN mismatches " << m.y.nonfinite_mismatches);
      CHECK(m.y.within_budget());
      CHECK(m.rstd.nonfinite_mismatches == 0);
    }
  }
}

// RMSNorm's small outputs, measured against themselves (RMSNorm's metric has no floor at 1): a row scaled down.
//   spread: 1e37 beside values ~1e-3 with eps 0: the row is scaled down by 2^-123, the small elements' x·scale fall
//           among the subnormals and lose bits that rstd·γ amplified (6.6 ulps of a subnormal output, verify's raw-bits
//           rows); y ~ 1e-40 is subnormal in f32.
// Every kernel that runs RMSNorm here (the SIMD ones hand the row to welford's row) within 2 scaled ulps. The other
// half of the bug (rows of values ~1e-30 whose eps·scale² overflowed, y = 0) is verify's shrunk counterexamples in
// the regression corpus, property_tests/corpus/regressions.txt (ctest verify_corpus fails on welford without the fix).
TEST_CASE("RMSNorm kernels: a row scaled down past its small elements keeps their outputs right to their own size",
          "[kernels][rmsnorm]") {
  std::vector<double> spread(64);
  for (std::size_t i = 0; i < spread.size(); ++i) spread[i] = round_to_format(format_of(DType::f32), (static_cast<double>(i % 13) - 6.1) * 1.7e-3);
  spread[5] = 1e37;
  for (const KernelInfo& k : registry()) {
    const Problem p = with_op(make_problem(1, static_cast<std::int64_t>(spread.size()), DType::f32, 0.0, false, false), Op::rmsnorm);
    if (k.name == "naive" || k.name == "onepass" || unavailable_reason(k, p)) continue;  // naive: the textbook
    const auto m = measure(k, DType::f32, spread, 0.0, Budget{2, 0}, 1, Op::rmsnorm);
    INFO(k.name << ": max " << m.y.max_ulp << " scaled ulp at " << m.y.max_ulp_index << " (got " << m.y.max_ulp_got
                << ", exact " << m.y.max_ulp_exact << ")");
    CHECK(m.y.within_budget());
  }
}

TEST_CASE("welford: a constant row gives y = beta bit-exactly for every dtype", "[kernels][welford]") {
  for (DType d : kAllDTypes) {
    const Format f = format_of(d);
    const std::vector<double> x(37, round_to_format(f, 7.3)), g = testing::normal(d, 37, 1, 0.5, 1),
                              b = testing::normal(d, 37, 0, 1, 2);
    const auto xb = testing::encode(d, x), gb = testing::encode(d, g), bb = testing::encode(d, b);
    std::vector<std::byte> y(xb.size()), mean(8), rstd(8);
    kernel("welford").run(make_problem(1, 37, d, 1e-5, true, true),
                          Tensors{xb.data(), gb.data(), bb.data(), y.data(), mean.data(), rstd.data()});
    INFO(name(d));
    CHECK(std::memcmp(y.data(), bb.data(), y.size()) == 0);
  }
}

TEST_CASE("onepass: flagged on offset rows (E[x^2] - E[x]^2 cancels), for every dtype", "[kernels][onepass]") {
  for (DType d : {DType::f32, DType::f64}) {
    const auto x = testing::normal(d, 1024, 1e4, 1, 3);
    const auto m = measure(kernel("onepass"), d, x, 1e-5, Budget{8, 1});
    INFO(name(d) << ": max " << m.y.max_ulp << " NaN mismatches " << m.y.nonfinite_mismatches);
    CHECK_FALSE(m.y.within_budget());
  }
  // f16/bf16 storage caps kappa (≈ 2^p), and f32 accumulation loses ≈ kappa²·2^-24 relative — less
  // than the budget's 1·kappa output ulps. onepass is caught there where var goes negative (NaN):
  // two-valued rows [o, o + ulp(o), ...] (found by sweeping o and n; measured kappa 4e3 and 5e2).
  for (auto [d, n] : {std::pair{DType::f16, 64}, std::pair{DType::bf16, 1024}}) {
    const Format f = format_of(d);
    std::vector<double> x(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1000 + static_cast<double>(i % 2) * ulp_at(f, 1000);
    const auto m = measure(kernel("onepass"), d, x, 1e-5, Budget{8, 1});
    INFO(name(d) << ": max " << m.y.max_ulp << " NaN mismatches " << m.y.nonfinite_mismatches);
    CHECK(m.y.nonfinite_mismatches > 0);
  }
  // The famous report: [40000, 40001, 40002, 40003] in f32 gives NaN.
  const auto m = measure(kernel("onepass"), DType::f32, {40000, 40001, 40002, 40003}, 1e-5, Budget{8, 1});
  CHECK(m.y.nonfinite_mismatches == 4);
  CHECK(measure(kernel("welford"), DType::f32, {40000, 40001, 40002, 40003}, 1e-5, Budget{8, 1}).y.within_budget());
}

TEST_CASE("naive: flagged on long offset rows (its sequential f32 sum loses the mean)", "[kernels][naive]") {
  const auto x = testing::normal(DType::f32, 1024, 1e4, 1, 7);
  CHECK_FALSE(measure(kernel("naive"), DType::f32, x, 1e-5, Budget{8, 1}).y.within_budget());
  // ... and fine on short centred rows.
  CHECK(measure(kernel("naive"), DType::f32, testing::normal(DType::f32, 64, 0, 1, 7), 1e-5, Budget{8, 1}).y.within_budget());
}

TEST_CASE("every kernel: results are bitwise identical for 1, 2 and 3 threads", "[kernels][threads]") {
  for (const KernelInfo& k : registry()) {
    for (DType d : kAllDTypes) {
      // Kernels that cannot run here (no AVX2, no CUDA device, dtype not offered) have nothing to compare.
      if (unavailable_reason(k, make_problem(1, 8, d, 1e-5, false, false))) continue;
      const std::int64_t rows = 7, cols = 129;
      const auto x = testing::encode(d, testing::normal(d, rows * cols, 3, 2, 11));
      const std::size_t ss = size_of(stats_dtype(d));
      std::vector<std::vector<std::byte>> ys;
      for (int threads : {1, 2, 3}) {
        std::vector<std::byte> y(x.size()), mean(rows * ss), rstd(rows * ss);
        k.run(make_problem(rows, cols, d, 1e-5, false, false, threads),
              Tensors{x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data()});
        y.insert(y.end(), mean.begin(), mean.end());
        y.insert(y.end(), rstd.begin(), rstd.end());
        ys.push_back(std::move(y));
      }
      INFO(k.name << " " << name(d));
      CHECK(ys[0] == ys[1]);
      CHECK(ys[0] == ys[2]);
    }
  }
}

// verify draws finite gamma and beta; this is their NaN and Inf. The SIMD kernels' bf16 narrowing skips its NaN
// case where gamma and beta are finite (simd_body.hpp kFiniteNarrowing): here they are not, and every column whose
// gamma or beta is NaN or Inf must come out non-finite as welford's does, the others finite and as before.
TEST_CASE("every kernel: NaN or Inf in gamma or beta gives welford's non-finite columns and no other", "[kernels][nan]") {
  for (const KernelInfo& k : registry()) {
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      if (unavailable_reason(k, make_problem(1, 8, d, 1e-5, true, true))) continue;
      for (std::int64_t cols : {129, 4100}) {  // 4100: past kWideMax, gamma and beta read in x's dtype
        const std::int64_t rows = 5;
        const auto x = testing::encode(d, testing::normal(d, rows * cols, 3, 2, 21));
        auto g = testing::normal(d, cols, 1, 0.5, 22), b = testing::normal(d, cols, 0, 1, 23);
        g[3] = std::numeric_limits<double>::quiet_NaN(), g[6] = std::numeric_limits<double>::infinity();
        b[10] = -std::numeric_limits<double>::quiet_NaN(), b[12] = -std::numeric_limits<double>::infinity();
        const auto gb = testing::encode(d, g), bb = testing::encode(d, b);
        const auto run = [&](const KernelInfo& kk) {
          std::vector<std::byte> y(x.size()), mean(rows * 8), rstd(rows * 8);
          kk.run(make_problem(rows, cols, d, 1e-5, true, true), Tensors{x.data(), gb.data(), bb.data(), y.data(), mean.data(), rstd.data()});
          return y;
        };
        const auto want = run(kernel("welford")), got = run(k);
        INFO(k.name << " " << name(d) << " cols " << cols);
        int non_finite = 0;
        for (std::int64_t i = 0; i < rows * cols; ++i) {
          const double w = value_at(d, want.data(), i), v = value_at(d, got.data(), i);
          if (std::isnan(w) != std::isnan(v) || std::isinf(w) != std::isinf(v)) FAIL_CHECK("element " << i << ": " << v << ", welford " << w);
          non_finite += !std::isfinite(v);
        }
        CHECK(non_finite == 4 * rows);
      }
    }
  }
}

TEST_CASE("stage_params: w = C + gamma is added in the staging type and rounded once", "[kernels][params]") {
  // f64 gamma with C = 1: 1 + 2^-60 needs 61 bits, so it is exact in long double (welford's f64 working type);
  // added in double first (as before) it became 1, and welford's f64 backward lost 6.6 ulps of dx to that.
  const Problem p = set_params(make_problem(1, 2, DType::f64, 1e-5, true, false), DType::f64, 1.0);
  const double gamma[2] = {0x1p-60, -0.75};
  Tensors t;
  t.gamma = gamma;
  const cpu::StagedParams<long double> staged = cpu::stage_params<long double>(p, t);
  CHECK(staged.w[0] == 1.0L + 0x1p-60L);
  CHECK(staged.w[1] == 0.25L);
  // f32 staging of f32 gamma: one rounding of the exact sum (1 + 2^-30 rounds to 1).
  const Problem q = set_params(make_problem(1, 1, DType::f32, 1e-5, true, false), DType::f32, 1.0);
  const float g32[2] = {0x1p-30f, 0.0f};  // two floats: GCC's -Warray-bounds reads param_value's f64 branch too
  t.gamma = g32;
  CHECK(cpu::stage_params<float>(q, t).w[0] == 1.0f);
}

TEST_CASE("backward kernels: the element that dominates a row's sum of squares gets a dx accurate to its own size",
          "[kernels][backward]") {
  // tests/kernel_cases.hpp's DominantRow: the careful row computes the dominant element's dx from the other
  // elements' sums (backward_scalar.cpp); the SIMD kernels hand the row to it (rstd·dy is past their range).
  const testing::DominantRow row;
  for (const char* name : {"welford", "avx2", "avx512"}) {
    const KernelInfo* k = find_kernel(name);
    REQUIRE(k);
    const Problem p = with_op(make_problem(1, 2, DType::f32, 0.0, false, false), Op::rmsnorm_bwd);
    if (k->why_not && k->why_not(p)) continue;  // this CPU cannot run it
    const float rstd[1] = {static_cast<float>(std::sqrt(2.0L / (static_cast<long double>(row.x[0]) * row.x[0] + static_cast<long double>(row.x[1]) * row.x[1])))};
    float dx[2] = {0, 0};
    Tensors t;
    t.x = row.x, t.dy = row.dy, t.dx = dx, t.saved_rstd = rstd;
    k->run(p, t);
    INFO(name << ": dx = " << dx[0] << ", " << dx[1] << "; exact " << static_cast<double>(row.expected[0]) << ", "
              << static_cast<double>(row.expected[1]));
    CHECK(row.close(0, dx[0]));
    CHECK(row.close(1, dx[1]));
  }
}

TEST_CASE("backward kernels: a width-1 RMSNorm row with eps = 0 (y = sign(x)) has dx = 0 exactly, even where rstd·dy "
          "overflows", "[kernels][backward]") {
  // rstd = 1/|x| is ~2^140 on a subnormal x; computed through xhat = x·rstd = ±(1 ± u), dx = rstd·g·u overflowed to
  // −Inf with dy near f32's top (welford's careful row, found by verify's range-edge dy). dgamma = dy·sign(x).
  for (const char* name : {"welford", "avx2", "avx512"}) {
    const KernelInfo* k = find_kernel(name);
    REQUIRE(k);
    const Problem p = with_op(make_problem(2, 1, DType::f32, 0.0, true, false), Op::rmsnorm_bwd);
    if (k->why_not && k->why_not(p)) continue;  // this CPU cannot run it
    // Row 0: x = −49·2^-146, where 49·fl(1/49) is not 1 in f64 (its f32 rstd overflows: the SIMD kernels hand the
    // row to the careful one); row 1 an ordinary one.
    const float x[2] = {-0x31p-146f, 0.3f}, dy[2] = {0x1p120f, 0x1p120f}, gamma[1] = {1.5f};
    const float rstd[2] = {INFINITY, 1.0f / 0.3f};  // the exact 1/|x| rounded to f32
    float dx[2] = {1, 1}, dg[1] = {0};
    Tensors t;
    t.x = x, t.dy = dy, t.gamma = gamma, t.dx = dx, t.dgamma = dg, t.saved_rstd = rstd;
    k->run(p, t);
    INFO(name);
    CHECK(dx[0] == 0.0f);
    CHECK(dx[1] == 0.0f);
    CHECK(dg[0] == -0x1p120f + 0x1p120f);
    // A finite saved rstd (1/|x| = 1.3e9) beside a large dy: the SIMD kernels' fast path computed rstd times f32's
    // rounding residue of g − xhat²·g and overflowed to +Inf (verify --dir bwd, avx2 bf16, seed 1) until their range
    // check counted rstd; the careful row gives 0.
    {
      const float x1[1] = {-7.7852746e-10f}, dy1[1] = {1.6e36f}, rstd1[1] = {1.0f / 7.7852746e-10f};
      float dx1[1] = {1}, dg1[1] = {0};
      Tensors t1;
      t1.x = x1, t1.dy = dy1, t1.gamma = gamma, t1.dx = dx1, t1.dgamma = dg1, t1.saved_rstd = rstd1;
      k->run(with_op(make_problem(1, 1, DType::f32, 0.0, true, false), Op::rmsnorm_bwd), t1);
      CHECK(dx1[0] == 0.0f);
      CHECK(dg1[0] == -1.6e36f);
    }
    // A width-2 LayerNorm row with eps = 0 (y = ±1), subnormal (its saved rstd overflows f32: the careful row's).
    {
      const float x2[2] = {-0x62p-146f, 0.0f}, dy2[2] = {0x1p120f, -0x1p119f}, g2[2] = {1.5f, 0.5f};
      const float mean2[1] = {-0x31p-146f}, rstd2[1] = {INFINITY};
      float dx2[2] = {1, 1}, dg2[2] = {1, 1}, db2[2] = {1, 1};
      Tensors t2;
      t2.x = x2, t2.dy = dy2, t2.gamma = g2, t2.dx = dx2, t2.dgamma = dg2, t2.dbeta = db2, t2.saved_mean = mean2, t2.saved_rstd = rstd2;
      k->run(with_op(make_problem(1, 2, DType::f32, 0.0, true, true), Op::layernorm_bwd), t2);
      CHECK(dx2[0] == 0.0f);
      CHECK(dx2[1] == 0.0f);
      CHECK(dg2[0] == -0x1p120f);
      CHECK(dg2[1] == -0x1p119f);
      // A NaN in one dy poisons the whole row's dx (mean(g) is NaN), not just its element.
      const float dy2n[2] = {NAN, 1.0f};
      t2.dy = dy2n;
      k->run(with_op(make_problem(1, 2, DType::f32, 0.0, true, true), Op::layernorm_bwd), t2);
      CHECK(std::isnan(dx2[0]));
      CHECK(std::isnan(dx2[1]));
    }
    // A NaN in dy: that row's dx is NaN (the exact gradient is), not the sign row's 0.
    const float dy_nan[2] = {NAN, 1.0f};
    t.dy = dy_nan;
    k->run(p, t);
    CHECK(std::isnan(dx[0]));
    CHECK(dx[1] == 0.0f);
  }
}
