// The CUDA kernels' launch plan (kernels/cuda/launch_config.cpp), on the CPU: which strategy each
// width gets, lanes per row, vector width, shared-memory fit and the grid. Runs on every machine,
// with or without CUDA; the limits are an H200's unless a case says otherwise.
#include <catch2/catch.hpp>

#include "../kernels/cuda/launch_config.hpp"

using namespace lnorm;
using namespace lnorm::cuda;

namespace {
const DeviceLimits kH200{132, 227 * 1024};
}

TEST_CASE("cuda launch: widths up to 2048 go to a lane group, the fewest lanes holding the row at the smallest capacity",
          "[cuda][launch]") {
  struct Want {
    std::int64_t cols;
    DType dtype;
    int vec, lanes, elems;
  };
  for (const Want& w : {Want{1, DType::f32, 1, 1, 8}, Want{8, DType::f32, 4, 1, 8}, Want{64, DType::f32, 4, 8, 8},
                        Want{256, DType::f32, 4, 32, 8}, Want{257, DType::f32, 1, 32, 16}, Want{768, DType::bf16, 8, 32, 32},
                        Want{1024, DType::f32, 4, 32, 32}, Want{1024, DType::f16, 8, 32, 32}, Want{1025, DType::f32, 1, 0, 0},
                        Want{2040, DType::f32, 4, 32, 64}, Want{2048, DType::bf16, 8, 32, 64}}) {
    const LaunchConfig c = plan_launch(Algorithm::warp, 1000, w.cols, w.dtype, true, kH200);
    INFO("cols " << w.cols << " " << name(w.dtype));
    if (w.lanes == 0) {  // 1025 is odd: no vectors, and scalar groups stop at 1024
      CHECK(c.strategy == Strategy::block_per_row);
      continue;
    }
    CHECK(c.strategy == Strategy::group_per_row);
    CHECK(c.vec == w.vec);
    CHECK(c.threads_per_row == w.lanes);
    CHECK(c.elems_per_lane == w.elems);
    CHECK(c.threads_per_row * static_cast<std::int64_t>(c.elems_per_lane) >= w.cols);  // the row fits its group
    CHECK(c.block_threads % c.threads_per_row == 0);
    CHECK(c.rows_per_block == c.block_threads / c.threads_per_row);
  }
}

TEST_CASE("cuda launch: vectors need 16-byte rows and aligned buffers, and odd widths (2041) fall back to scalar accesses",
          "[cuda][launch]") {
  CHECK(plan_launch(Algorithm::warp, 10, 2040, DType::f32, true, kH200).vec == 4);
  CHECK(plan_launch(Algorithm::warp, 10, 2040, DType::bf16, true, kH200).vec == 8);
  CHECK(plan_launch(Algorithm::warp, 10, 2040, DType::f32, false, kH200).vec == 1);  // misaligned buffer
  CHECK(plan_launch(Algorithm::block, 10, 2041, DType::f32, true, kH200).vec == 1);
  CHECK(plan_launch(Algorithm::block, 10, 4100, DType::f16, true, kH200).vec == 1);  // 8200 B rows: not 16-B aligned
  CHECK(plan_launch(Algorithm::block, 10, 4104, DType::f16, true, kH200).vec == 8);
  // 2041 has no vector path, so a scalar group of 32 lanes would need 64 registers per lane: block.
  const LaunchConfig odd = plan_launch(Algorithm::warp, 10, 2041, DType::f32, true, kH200);
  CHECK(odd.strategy == Strategy::block_per_row);
  CHECK(odd.vec == 1);
}

TEST_CASE("cuda launch: wide rows get a block per row, about 8 accesses per thread, row in shared memory when it fits",
          "[cuda][launch]") {
  const LaunchConfig w = plan_launch(Algorithm::warp, 100, 8192, DType::f32, true, kH200);
  CHECK(w.strategy == Strategy::block_per_row);
  CHECK(w.block_threads == 256);  // 2048 vectors / 8
  CHECK(w.rows_per_block == 1);
  CHECK(w.row_in_smem);
  CHECK(w.smem_bytes == 8192 * 4);
  const LaunchConfig b = plan_launch(Algorithm::block, 100, 8192, DType::f32, true, kH200);
  CHECK(b.block_threads == w.block_threads);
  CHECK(b.smem_bytes == w.smem_bytes);
  // Narrow rows on cuda_block still work: at least two warps.
  CHECK(plan_launch(Algorithm::block, 100, 3, DType::f32, true, kH200).block_threads == kBlockMinThreads);
  // Never past CUDA's 1024 threads per block.
  CHECK(plan_launch(Algorithm::block, 1, 1 << 20, DType::f32, true, kH200).block_threads == kBlockMaxThreads);
  // 227 KiB less the reserve holds 57856 f32 (116 KiB: f16 twice that); one element more streams from global.
  const std::int64_t fit_f32 = (227 * 1024 - static_cast<std::int64_t>(kBlockReserveSmem)) / 4;
  CHECK(plan_launch(Algorithm::block, 1, fit_f32, DType::f32, true, kH200).row_in_smem);
  const LaunchConfig over = plan_launch(Algorithm::block, 1, fit_f32 + 4, DType::f32, true, kH200);
  CHECK_FALSE(over.row_in_smem);
  CHECK(over.smem_bytes == 0);
  CHECK(plan_launch(Algorithm::block, 1, fit_f32 + 4, DType::bf16, true, kH200).row_in_smem);
  // The shared-memory size is padded to whole 16-byte vectors (2041 f32 = 8164 B -> 8176).
  CHECK(plan_launch(Algorithm::block, 1, 2041, DType::f32, true, kH200).smem_bytes == 8176);
  // A device with the default 48 KB limit keeps fewer rows on chip.
  CHECK_FALSE(plan_launch(Algorithm::block, 1, 16384, DType::f32, true, DeviceLimits{16, 48 * 1024}).row_in_smem);
}

TEST_CASE("cuda launch: the grid is capped at 32 resident blocks per SM and rows loop with 64-bit indices",
          "[cuda][launch]") {
  // 2^31 + 1 rows of 1024 f32 (8 TiB, never allocated here): the grid stays launchable.
  const std::int64_t rows = (std::int64_t{1} << 31) + 1;
  for (Algorithm a : {Algorithm::naive, Algorithm::warp, Algorithm::block}) {
    const LaunchConfig c = plan_launch(a, rows, 1024, DType::f32, true, kH200);
    CHECK(c.grid == 132 * kMaxResidentBlocksPerSm);
  }
  // Few rows: one block per rows_per_block rows, no empty blocks.
  const LaunchConfig few = plan_launch(Algorithm::warp, 100, 64, DType::f32, true, kH200);
  CHECK(few.rows_per_block == 32);
  CHECK(few.grid == 4);
  CHECK(plan_launch(Algorithm::naive, 129, 64, DType::f32, true, kH200).grid == 2);
  CHECK(plan_launch(Algorithm::block, 7, 64, DType::f32, true, kH200).grid == 7);
  CHECK(plan_launch(Algorithm::warp, 0, 64, DType::f32, true, kH200).grid == 0);
  CHECK(plan_launch(Algorithm::warp, 5, 0, DType::f32, true, kH200).grid == 0);
}

TEST_CASE("cuda launch: f64 and negative shapes are refused", "[cuda][launch]") {
  CHECK_THROWS_AS(plan_launch(Algorithm::warp, 1, 8, DType::f64, true, kH200), std::invalid_argument);
  CHECK_THROWS_AS(plan_launch(Algorithm::warp, -1, 8, DType::f32, true, kH200), std::invalid_argument);
}
