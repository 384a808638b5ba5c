// The CUDA kernels' algorithm on the CPU (tests/cuda_emulation.hpp: the device code of row_stats.hpp
// with every lane emulated, on the device's launch plan): the verify suite's properties with
// cuda_warp's and cuda_block's budgets, the exact reference on the foundation cases, and the CPU
// kernels' semantics. Runs everywhere; the GPU tests check that the device computes these bits.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_emulation.hpp"
#include "env_settings.hpp"
#include "kernel_cases.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/verify.hpp"

using namespace lnorm;
namespace emu = lnorm::testing::cuda_emulation;

namespace {
const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
}

TEST_CASE("cuda_warp and cuda_block (CPU emulation): every foundation case within 8 + 1*kappa scaled ulps",
          "[cuda][emulation]") {
  for (const KernelInfo* k : {&emu::kWarp, &emu::kBlock}) {
    for (DType d : kDTypes) {
      for (const auto& c : testing::foundation_cases(d)) {
        const auto m = testing::measure(*k, d, c.x, c.eps, Budget{8, 1});
        INFO(k->name << " " << name(d) << " " << c.label << ": max " << m.y.max_ulp << " scaled ulp, kappa "
                     << m.y.max_ulp_kappa << ", NaN mismatches " << m.y.nonfinite_mismatches);
        CHECK(m.y.within_budget());
        CHECK(m.rstd.nonfinite_mismatches == 0);
        CHECK(m.mean.nonfinite_mismatches == 0);
      }
    }
  }
}

static void run_suite(bool quick, const std::vector<Op>& ops = testing::ops_from_env(), int cases = 0) {
  const auto budgets = verify::Budgets::builtin();
  verify::Settings settings;
  settings.quick = quick;
  settings.cases = cases;
  settings.seed = testing::seed_from_env(1);
  settings.command = "ctest -R test_cuda_emulation (CPU emulation of the CUDA kernels)";
  for (const KernelInfo* k : {&emu::kWarp, &emu::kBlock}) {
    for (Op op : ops) {
      for (DType d : kDTypes) {
        const verify::KernelBudget& budget = budgets.for_kernel(op, k->name, d);
        const Op norm = plain(op.norm);  // Add & Norm falls back to its norm's sections; the backward has its own
        const std::string level = op.direction == Direction::bwd ? std::string(name(op)) + "." : norm == Op::layernorm ? "" : std::string(name(norm)) + ".";
        REQUIRE(budget.section == level + std::string(k->name) + "." + std::string(name(d)));
        for (const verify::Outcome& o : verify::verify_kernel(*k, op, d, budget, settings)) {
          std::string worst;
          for (const auto& [what, v] : o.worst) worst += " " + what + "=" + std::to_string(v);
          INFO(k->name << " " << name(op) << " " << name(d) << " " << name(o.property) << ": " << name(o.status) << worst
                       << "\n" << o.message << "\n" << o.counterexample);
          CHECK_FALSE(verify::is_failure(o.status));
          if (!quick) WARN(k->name << " " << name(op) << " " << name(d) << " " << name(o.property) << ": " << name(o.status) << worst);
        }
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block (CPU emulation): the quick verify suite holds for both ops with their budgets.toml sections",
          "[cuda][emulation][verify]") {
  run_suite(true);
}

// The full suite, by hand (not in ctest: the quick one runs there): test_cuda_emulation "[full]", with
// LNORM_VERIFY_SEED=S and LNORM_VERIFY_OP=rmsnorm to pick a seed and an op.
TEST_CASE("cuda_warp and cuda_block (CPU emulation): the full verify suite holds with their budgets",
          "[.full][cuda][emulation]") {
  run_suite(false);
}

// Add & Norm (h = x + residual rounded once, then the norm of h), quick at 12 cases per property as ctest
// verify_quick_add: ctest cuda_emulation_verify_add, label slow. LNORM_VERIFY_OP picks one fused op.
TEST_CASE("cuda_warp and cuda_block (CPU emulation): the quick verify suite of Add & Norm holds with their norms' budgets",
          "[.add][cuda][emulation]") {
  const char* one = std::getenv("LNORM_VERIFY_OP");
  run_suite(true, one && *one ? testing::ops_from_env() : std::vector<Op>{Op::add_layernorm, Op::add_rmsnorm}, 12);
}

// The backward (backward.cu emulated), quick at 12 cases per property as ctest verify_quick_bwd: ctest
// cuda_emulation_verify_bwd, label slow (41 s here in release: three f64 passes per row, every thread emulated;
// run once, not under the sanitizers). The full suite (80 cases, as verify_full_bwd) is the hidden "[bwd_full]",
// by hand with LNORM_VERIFY_SEED=S. LNORM_VERIFY_OP picks one backward op.
static std::vector<Op> backward_ops_from_env() {
  const char* one = std::getenv("LNORM_VERIFY_OP");
  return one && *one ? testing::ops_from_env() : std::vector<Op>{std::begin(kBackwardOps), std::end(kBackwardOps)};
}

TEST_CASE("cuda_warp and cuda_block (CPU emulation): the quick backward verify suite holds with their budgets",
          "[.bwd][cuda][emulation]") {
  run_suite(true, backward_ops_from_env(), 12);
}

TEST_CASE("cuda_warp and cuda_block (CPU emulation): the full backward verify suite holds with their budgets",
          "[.bwd_full][cuda][emulation]") {
  run_suite(false, backward_ops_from_env(), 80);
}

TEST_CASE("cuda_warp and cuda_block (CPU emulation): constant rows give beta bit-exactly at every strategy's widths",
          "[cuda][emulation]") {
  for (const KernelInfo* k : {&emu::kWarp, &emu::kBlock}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : {1, 3, 8, 17, 1023, 1024, 2041, 2048, 4097, 8192, 65537}) {
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

TEST_CASE("cuda_warp and cuda_block (CPU emulation): the element that dominates a row's sum of squares gets a dx accurate to its own size",
          "[cuda][emulation]") {
  // As welford's careful row (tests/test_kernels.cpp, kernel_cases.hpp's DominantRow): backward_row.hpp's pass B2.
  const testing::DominantRow row;
  for (const KernelInfo* k : {&emu::kWarp, &emu::kBlock}) {
    float dx[2] = {0, 0};
    Tensors t;
    t.x = row.x, t.dy = row.dy, t.dx = dx;
    k->run(with_op(make_problem(1, 2, DType::f32, 0.0, false, false), Op::rmsnorm_bwd), t);
    INFO(k->name << ": dx = " << dx[0] << ", " << dx[1]);
    CHECK(row.close(0, dx[0]));
    CHECK(row.close(1, dx[1]));
  }
}

TEST_CASE("cuda_warp and cuda_block (CPU emulation): a width-1 RMSNorm row and a width-2 LayerNorm row with eps = 0 have dx = 0 exactly",
          "[cuda][emulation]") {
  // As welford's careful row (tests/test_kernels.cpp): x = −49·2^-146, whose xhat = x·fl(1/|x|) is not −1 in f64,
  // with dy near f32's top; backward_row.hpp's sign_row gives xhat = ±1 and dx = 0.
  for (const KernelInfo* k : {&emu::kWarp, &emu::kBlock}) {
    const Problem p = with_op(make_problem(2, 1, DType::f32, 0.0, true, false), Op::rmsnorm_bwd);
    const float x[2] = {-0x31p-146f, 0.3f}, dy[2] = {0x1p120f, 0x1p120f}, gamma[1] = {1.5f};
    float dx[2] = {1, 1}, dg[1] = {1};
    Tensors t;
    t.x = x, t.dy = dy, t.gamma = gamma, t.dx = dx, t.dgamma = dg;
    k->run(p, t);
    INFO(k->name);
    CHECK(dx[0] == 0.0f);
    CHECK(dx[1] == 0.0f);
    CHECK(dg[0] == 0.0f);
    // A width-2 LayerNorm row with eps = 0 (y = ±1), subnormal, with dy near f32's top: dx = 0, dgamma = dy·(±1).
    const float x2[2] = {-0x62p-146f, 0.0f}, dy2[2] = {0x1p120f, -0x1p119f}, g2[2] = {1.5f, 0.5f};
    float dx2[2] = {1, 1}, dg2[2] = {1, 1}, db2[2] = {1, 1};
    Tensors t2;
    t2.x = x2, t2.dy = dy2, t2.gamma = g2, t2.dx = dx2, t2.dgamma = dg2, t2.dbeta = db2;
    k->run(with_op(make_problem(1, 2, DType::f32, 0.0, true, true), Op::layernorm_bwd), t2);
    CHECK(dx2[0] == 0.0f);
    CHECK(dx2[1] == 0.0f);
    CHECK(dg2[0] == -0x1p120f);
    CHECK(dg2[1] == -0x1p119f);
    const float dy2n[2] = {NAN, 1.0f};  // a NaN in one dy poisons the whole row's dx
    t2.dy = dy2n;
    k->run(with_op(make_problem(1, 2, DType::f32, 0.0, true, true), Op::layernorm_bwd), t2);
    CHECK(std::isnan(dx2[0]));
    CHECK(std::isnan(dx2[1]));
  }
}
