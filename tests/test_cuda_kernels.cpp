// The CUDA kernels on a device (ctest label `gpu`; run through lnorm_cuda_probe, which skips them
// with the reason when there is no device): against the exact reference, the CPU kernels' semantics
// (NaN rows, constant rows give beta bit-exactly, eps), every launch strategy (lane groups of each
// size, vectors and scalar accesses, shared-memory and streamed block rows), the grid's row loop,
// and 64-bit indexing past 2^31 elements. `lnorm verify --kernel cuda_*` is the other half.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernels/cuda/device_api.hpp"
#include "cuda_emulation.hpp"
#include "kernel_cases.hpp"
#include "lnorm/half.hpp"
#include "lnorm/registry.hpp"

using namespace lnorm;
using lnorm::testing::encode;
using lnorm::testing::measure;

namespace {

const KernelInfo& kernel(std::string_view name) {
  const KernelInfo* k = find_kernel(name);
  REQUIRE(k != nullptr);
  return *k;
}

const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
// Widths that reach every strategy: lane groups of 1..32 lanes with vectors (8, 64, 1024, 2048) and
// without (3, 17, 1023), block rows with vectors (4096, 8192), without (2041, 4097), and streamed from
// global memory (65537 f32 and 131072: past 227 KiB of shared memory).
const std::int64_t kWidths[] = {1, 3, 8, 17, 64, 1023, 1024, 2041, 2048, 4096, 4097, 8192, 65537, 131072};

struct Output {
  std::vector<std::byte> y;
  std::vector<float> mean, rstd;
  std::vector<std::byte> h;  // Add & Norm only
};

// residual: Add & Norm (x's dtype), or null.
Output run(const KernelInfo& k, const Problem& p, const std::vector<std::byte>& x, const std::vector<std::byte>* gamma,
           const std::vector<std::byte>* beta, const std::vector<std::byte>* residual = nullptr) {
  Output o{std::vector<std::byte>(x.size()), std::vector<float>(static_cast<std::size_t>(p.rows)),
           std::vector<float>(static_cast<std::size_t>(p.rows)), std::vector<std::byte>(residual ? x.size() : 0)};
  k.run(p, Tensors{x.data(), gamma ? gamma->data() : nullptr, beta ? beta->data() : nullptr, o.y.data(),
                   p.op.norm == Norm::layernorm ? o.mean.data() : nullptr, o.rstd.data(), residual ? residual->data() : nullptr,
                   residual ? o.h.data() : nullptr});
  return o;
}

bool same_bits_or_both_nan(const Output& a, const Output& b, DType d) {
  const Format f = format_of(d);
  const std::size_t es = size_of(d);
  for (std::size_t i = 0; i < a.y.size() / es; ++i) {
    const std::uint64_t ga = testing::bits_at(a.y, es, i), gb = testing::bits_at(b.y, es, i);
    if (ga != gb && !(std::isnan(bits_to_double(f, ga)) && std::isnan(bits_to_double(f, gb)))) return false;
  }
  for (std::size_t i = 0; i < a.h.size() / es; ++i) {
    const std::uint64_t ga = testing::bits_at(a.h, es, i), gb = testing::bits_at(b.h, es, i);
    if (ga != gb && !(std::isnan(bits_to_double(f, ga)) && std::isnan(bits_to_double(f, gb)))) return false;
  }
  for (std::size_t r = 0; r < a.mean.size(); ++r) {
    if (std::memcmp(&a.mean[r], &b.mean[r], 4) != 0 && !(std::isnan(a.mean[r]) && std::isnan(b.mean[r]))) return false;
    if (std::memcmp(&a.rstd[r], &b.rstd[r], 4) != 0 && !(std::isnan(a.rstd[r]) && std::isnan(b.rstd[r]))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("cuda kernels: available on this device", "[cuda][gpu]") {
  INFO(cuda::device_unavailable_reason().value_or("available"));
  REQUIRE_FALSE(cuda::device_unavailable_reason().has_value());
}

TEST_CASE("cuda_naive: bitwise the CPU naive kernel (NaN as NaN), every dtype and width, with and without affine",
          "[cuda][gpu][cuda_naive]") {
  for (DType d : kDTypes) {
    for (std::int64_t cols : {1, 3, 17, 64, 1000, 2041, 4097}) {
      const std::int64_t rows = 37;
      auto values = testing::normal(d, static_cast<std::size_t>(rows * cols), 2, 3, static_cast<std::uint64_t>(cols));
      values[static_cast<std::size_t>(5 * cols)] = NAN;  // row 5 poisoned
      const auto x = encode(d, values), g = encode(d, testing::normal(d, cols, 1, 0.5, 3)),
                 b = encode(d, testing::normal(d, cols, 0, 1, 4));
      for (bool affine : {false, true}) {
        const Problem p = make_problem(rows, cols, d, 1e-5, affine, affine);
        INFO(name(d) << " cols " << cols << (affine ? " with gamma, beta" : ""));
        CHECK(same_bits_or_both_nan(run(kernel("cuda_naive"), p, x, &g, &b), run(kernel("naive"), p, x, &g, &b), d));
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block: the device computes the CPU emulation's bits (NaN as NaN), every width and dtype",
          "[cuda][gpu][emulation]") {
  // tests/cuda_emulation.hpp runs the kernels' own statistics code on the CPU in the device's order;
  // a difference here is a device-side defect (indexing, a race, a missing barrier) or a contraction
  // the emulation does not model, and names the shape it happened on.
  for (const auto& [device, host] : {std::pair{"cuda_warp", &testing::cuda_emulation::kWarp},
                                     std::pair{"cuda_block", &testing::cuda_emulation::kBlock}}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : kWidths) {
        const std::int64_t rows = cols > 10000 ? 3 : 19;
        auto values = testing::normal(d, static_cast<std::size_t>(rows * cols), 100, 3, static_cast<std::uint64_t>(cols));
        values[static_cast<std::size_t>(cols)] = NAN;  // row 1 poisoned
        const auto x = encode(d, values), g = encode(d, testing::normal(d, cols, 1, 0.5, 3)),
                   b = encode(d, testing::normal(d, cols, 0, 1, 4));
        const Problem p = make_problem(rows, cols, d, 1e-5, true, true);
        INFO(device << " " << name(d) << " cols " << cols);
        CHECK(same_bits_or_both_nan(run(kernel(device), p, x, &g, &b), run(*host, p, x, &g, &b), d));
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block: RMSNorm, f32 gamma/beta and the gamma offset compute the CPU emulation's bits",
          "[cuda][gpu][emulation]") {
  // The same comparison for the paths the op axis added: row_stats.hpp with the mean 0, and parameters
  // staged in f32 (cuda_kernels.cpp) read by the device as f32 beside 16-bit x.
  for (const auto& [device, host] : {std::pair{"cuda_warp", &testing::cuda_emulation::kWarp},
                                     std::pair{"cuda_block", &testing::cuda_emulation::kBlock}}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : kWidths) {
        const std::int64_t rows = cols > 10000 ? 3 : 19;
        auto values = testing::normal(d, static_cast<std::size_t>(rows * cols), 0.5, 3, static_cast<std::uint64_t>(cols));
        values[static_cast<std::size_t>(cols)] = NAN;  // row 1 poisoned
        const auto x = encode(d, values);
        const DType pd = d == DType::f32 ? d : DType::f32;
        const auto g = encode(pd, testing::normal(pd, cols, 0, 0.5, 3)), b = encode(pd, testing::normal(pd, cols, 0, 1, 4));
        for (Op op : kNormOps) {
          const Problem p = set_params(with_op(make_problem(rows, cols, d, 1e-5, true, true), op), pd, 1.0);
          INFO(device << " " << name(op) << " " << name(d) << " cols " << cols << " (f32 params, offset 1)");
          CHECK(same_bits_or_both_nan(run(kernel(device), p, x, &g, &b), run(*host, p, x, &g, &b), d));
        }
        const auto gt = encode(d, testing::normal(d, cols, 1, 0.5, 3));
        const Problem rms = with_op(make_problem(rows, cols, d, 1e-5, true, false), Op::rmsnorm);
        INFO(device << " rmsnorm " << name(d) << " cols " << cols);
        CHECK(same_bits_or_both_nan(run(kernel(device), rms, x, &gt, nullptr), run(*host, rms, x, &gt, nullptr), d));
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block: the backward computes the CPU emulation's dx, dgamma and dbeta bits at every "
          "strategy's widths, rows across several 32-row chunks",
          "[cuda][gpu][emulation][backward]") {
  // backward.cu against tests/cuda_emulation.hpp's run_backward_typed: the f64 sums in the device's order (a
  // group's butterflies, a block's warps folded in order), the chunk partials in row order, the chunks in chunk
  // order. A difference is a device-side defect (indexing, a race on a partial column, a missing barrier) or a
  // contraction (backward.cu is built with --fmad=false). 70 rows: three chunks, the last partial; a NaN in row 1's
  // x and an Inf in row 2's dy.
  for (const auto& [device, host] : {std::pair{"cuda_warp", &testing::cuda_emulation::kWarp},
                                     std::pair{"cuda_block", &testing::cuda_emulation::kBlock}}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : kWidths) {
        const std::int64_t rows = cols > 10000 ? 3 : 70;
        const auto n = static_cast<std::size_t>(rows * cols);
        auto xv = testing::normal(d, n, 100, 3, static_cast<std::uint64_t>(cols));
        auto dyv = testing::normal(d, n, 0, 1, static_cast<std::uint64_t>(cols) + 1);
        xv[static_cast<std::size_t>(cols)] = NAN;
        if (rows > 2) dyv[static_cast<std::size_t>(2 * cols)] = INFINITY;
        const auto x = encode(d, xv), dy = encode(d, dyv);
        for (Op op : kBackwardOps) {
          for (const DType pd : {d, DType::f32}) {
            const auto g = encode(pd, testing::normal(pd, cols, 1, 0.5, 3));
            const Problem p = set_params(with_op(make_problem(rows, cols, d, 1e-5, true, true), op), pd, pd == d ? 0.0 : 1.0);
            const std::size_t pb = static_cast<std::size_t>(cols) * size_of(pd);
            std::vector<std::byte> dx_dev(x.size()), dx_emu(x.size()), dg_dev(pb), dg_emu(pb), db_dev(pb), db_emu(pb);
            const auto tensors = [&](std::vector<std::byte>& dxo, std::vector<std::byte>& dgo, std::vector<std::byte>& dbo) {
              Tensors t;
              t.x = x.data(), t.dy = dy.data(), t.gamma = g.data(), t.dx = dxo.data(), t.dgamma = dgo.data(), t.dbeta = dbo.data();
              return t;
            };
            kernel(device).run(p, tensors(dx_dev, dg_dev, db_dev));
            host->run(p, tensors(dx_emu, dg_emu, db_emu));
            INFO(device << " " << name(op) << " " << name(d) << " params " << name(pd) << " " << rows << "x" << cols);
            const auto same = [](const std::vector<std::byte>& a, const std::vector<std::byte>& b, DType t) {
              const Format f = format_of(t);
              const std::size_t es = size_of(t);
              for (std::size_t i = 0; i < a.size() / es; ++i) {
                const std::uint64_t ga = testing::bits_at(a, es, i), gb = testing::bits_at(b, es, i);
                if (ga != gb && !(std::isnan(bits_to_double(f, ga)) && std::isnan(bits_to_double(f, gb)))) return false;
              }
              return true;
            };
            CHECK(same(dx_dev, dx_emu, d));
            CHECK(same(dg_dev, dg_emu, pd));
            CHECK(same(db_dev, db_emu, pd));
          }
        }
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block: Add & Norm computes the CPU emulation's h and y bits at every strategy's widths",
          "[cuda][gpu][emulation]") {
  // h = x + residual formed per lane (group.cu) or per thread before a barrier (block.cu, cached or streamed):
  // every width of kWidths, a residual that cancels x on some elements (|x| ~ |residual| ~ 1e4).
  for (const auto& [device, host] : {std::pair{"cuda_warp", &testing::cuda_emulation::kWarp},
                                     std::pair{"cuda_block", &testing::cuda_emulation::kBlock}}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : kWidths) {
        const std::int64_t rows = cols > 10000 ? 3 : 19;
        const auto count = static_cast<std::size_t>(rows * cols);
        auto xv = testing::normal(d, count, 0, 1e4, static_cast<std::uint64_t>(cols));
        auto rv = testing::normal(d, count, 0, 1, static_cast<std::uint64_t>(cols) + 1);
        for (std::size_t i = 0; i < count; i += 3) rv[i] = round_to_format(format_of(d), -xv[i] + rv[i]);  // cancels
        const auto x = encode(d, xv), res = encode(d, rv);
        const auto g = encode(d, testing::normal(d, cols, 1, 0.5, 3)), b = encode(d, testing::normal(d, cols, 0, 1, 4));
        for (Op op : {Op::add_layernorm, Op::add_rmsnorm}) {
          const Problem p = set_residual(with_op(make_problem(rows, cols, d, 1e-5, true, true), op), d);
          INFO(device << " " << name(op) << " " << name(d) << " cols " << cols);
          CHECK(same_bits_or_both_nan(run(kernel(device), p, x, &g, &b, &res), run(*host, p, x, &g, &b, &res), d));
        }
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block: every foundation case within 8 + 1*kappa scaled ulps", "[cuda][gpu]") {
  for (std::string_view kn : {"cuda_warp", "cuda_block"}) {
    for (DType d : kDTypes) {
      for (const auto& c : testing::foundation_cases(d)) {
        const auto m = measure(kernel(kn), d, c.x, c.eps, Budget{8, 1});
        INFO(kn << " " << name(d) << " " << c.label << ": max " << m.y.max_ulp << " scaled ulp, kappa "
                << m.y.max_ulp_kappa << ", NaN mismatches " << m.y.nonfinite_mismatches);
        CHECK(m.y.within_budget());
        CHECK(m.rstd.nonfinite_mismatches == 0);
        CHECK(m.mean.nonfinite_mismatches == 0);
      }
    }
  }
}

TEST_CASE("cuda_warp and cuda_block: offset rows (kappa 1e4) at every width stay within 10 scaled ulps, no kappa term",
          "[cuda][gpu]") {
  for (std::string_view kn : {"cuda_warp", "cuda_block"}) {
    for (std::int64_t cols : kWidths) {
      const auto x = testing::normal(DType::f32, static_cast<std::size_t>(cols), 1e4, 1, 5);
      const auto m = measure(kernel(kn), DType::f32, x, 1e-5, Budget{10, 0});
      INFO(kn << " cols " << cols << ": max " << m.y.max_ulp << " at kappa " << m.y.max_ulp_kappa);
      CHECK(m.y.within_budget());
    }
  }
}

TEST_CASE("cuda kernels: a constant row gives y = beta bit-exactly, at every width and dtype", "[cuda][gpu]") {
  for (std::string_view kn : {"cuda_warp", "cuda_block"}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : kWidths) {
        const Format f = format_of(d);
        const auto n = static_cast<std::size_t>(cols);
        const auto x = encode(d, std::vector<double>(n, round_to_format(f, 7.3)));
        const auto g = encode(d, testing::normal(d, n, 1, 0.5, 1)), b = encode(d, testing::normal(d, n, 0, 1, 2));
        const Output o = run(kernel(kn), make_problem(1, cols, d, 1e-5, true, true), x, &g, &b);
        INFO(kn << " " << name(d) << " cols " << cols);
        CHECK(o.y == b);
        CHECK(o.mean[0] == static_cast<float>(round_to_format(f, 7.3)));
      }
    }
  }
}

TEST_CASE("cuda kernels: a NaN or Inf row is NaN (y, mean, rstd) and leaves its neighbours bit for bit alone",
          "[cuda][gpu]") {
  for (std::string_view kn : {"cuda_warp", "cuda_block", "cuda_naive"}) {
    for (DType d : kDTypes) {
      for (std::int64_t cols : {17, 1024, 4097}) {
        const std::int64_t rows = 5;
        auto clean = testing::normal(d, static_cast<std::size_t>(rows * cols), 1, 2, 9);
        auto dirty = clean;
        dirty[static_cast<std::size_t>(1 * cols + cols / 2)] = NAN;
        dirty[static_cast<std::size_t>(3 * cols + cols - 1)] = -INFINITY;
        const Problem p = make_problem(rows, cols, d, 1e-5, false, false);
        const Output a = run(kernel(kn), p, encode(d, clean), nullptr, nullptr);
        const Output o = run(kernel(kn), p, encode(d, dirty), nullptr, nullptr);
        INFO(kn << " " << name(d) << " cols " << cols);
        const Format f = format_of(d);
        const std::size_t es = size_of(d);
        for (std::int64_t r = 0; r < rows; ++r) {
          const bool poisoned = r == 1 || r == 3;
          CHECK(std::isnan(o.mean[r]) == poisoned);
          CHECK(std::isnan(o.rstd[r]) == poisoned);
          for (std::int64_t i = 0; i < cols; ++i) {
            const auto at = static_cast<std::size_t>(r * cols + i);
            if (poisoned) {
              if (!std::isnan(bits_to_double(f, testing::bits_at(o.y, es, at)))) FAIL("row " << r << " element " << i << " not NaN");
            } else if (testing::bits_at(o.y, es, at) != testing::bits_at(a.y, es, at)) {
              FAIL("row " << r << " element " << i << " changed by a NaN in another row");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cuda kernels: a row's result does not depend on how many rows share the launch (grid loop, groups)",
          "[cuda][gpu]") {
  // More rows than the capped grid covers in one step (132 SMs x 32 blocks x 32 rows of 64), so the
  // kernels' row loop runs; each row must equal the same row normalized alone.
  for (std::string_view kn : {"cuda_warp", "cuda_block"}) {
    for (std::int64_t cols : {64, 2041}) {
      const std::int64_t rows = cols == 64 ? 140000 : 5000;
      const auto x = encode(DType::f32, testing::normal(DType::f32, static_cast<std::size_t>(rows * cols), 3, 2, 13));
      const Output all = run(kernel(kn), make_problem(rows, cols, DType::f32, 1e-5, false, false), x, nullptr, nullptr);
      for (std::int64_t r : {std::int64_t{0}, std::int64_t{1}, rows / 2, rows - 1}) {
        const std::vector<std::byte> one(x.begin() + r * cols * 4, x.begin() + (r + 1) * cols * 4);
        const Output o = run(kernel(kn), make_problem(1, cols, DType::f32, 1e-5, false, false), one, nullptr, nullptr);
        INFO(kn << " cols " << cols << " row " << r);
        CHECK(std::memcmp(o.y.data(), all.y.data() + r * cols * 4, static_cast<std::size_t>(cols) * 4) == 0);
        CHECK(o.mean[0] == all.mean[static_cast<std::size_t>(r)]);
        CHECK(o.rstd[0] == all.rstd[static_cast<std::size_t>(r)]);
      }
    }
  }
}

TEST_CASE("cuda kernels: 64-bit indexing, 2^31 + 2048 bf16 elements, last rows right", "[cuda][gpu][large]") {
  // 4 GiB of x and 4 GiB of y on host and device: the first element index past 2^31 is in the last row.
  const std::int64_t cols = 2048, rows = (std::int64_t{1} << 31) / cols + 1;
  const auto n = static_cast<std::size_t>(rows * cols);
  std::vector<std::uint16_t> x(n);
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;  // LCG: cheap, every row different
    x[i] = bf16_from_float(static_cast<float>(state >> 8) * 0x1p-24f - 0.5f).bits;
  }
  for (std::string_view kn : {"cuda_warp", "cuda_block"}) {
    std::vector<std::uint16_t> y(n, 0xFFFF);  // NaN: an unwritten element shows
    std::vector<float> mean(static_cast<std::size_t>(rows)), rstd(static_cast<std::size_t>(rows));
    kernel(kn).run(make_problem(rows, cols, DType::bf16, 1e-5, false, false),
                   Tensors{x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data()});
    // Each checked row, normalized alone, must give the same bits (so the big launch indexed it
    // right), and be within bf16's budget of the exact answer.
    for (std::int64_t r : {std::int64_t{0}, rows - 2, rows - 1}) {
      std::vector<double> row(static_cast<std::size_t>(cols));
      for (std::int64_t i = 0; i < cols; ++i) row[static_cast<std::size_t>(i)] = to_float(lnorm::bf16{x[static_cast<std::size_t>(r * cols + i)]});
      const auto m = measure(kernel(kn), DType::bf16, row, 1e-5, Budget{1, 0});
      INFO(kn << " row " << r << ": max " << m.y.max_ulp << " scaled ulp");
      CHECK(m.y.within_budget());
      CHECK(std::memcmp(m.y_bits.data(), y.data() + r * cols, static_cast<std::size_t>(cols) * 2) == 0);
    }
  }
}
