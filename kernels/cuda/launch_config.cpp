// The launch plan of the CUDA kernels (see launch_config.hpp for the constants and why).
#include "launch_config.hpp"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>

namespace lnorm::cuda {
namespace {

static_assert(kWarpMaxColsVector == 32 * kElemsPerLaneVector[std::size(kElemsPerLaneVector) - 1]);
static_assert(kWarpMaxColsScalar == 32 * kElemsPerLaneScalar[std::size(kElemsPerLaneScalar) - 1]);

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::int64_t next_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

void plan_block(LaunchConfig& c, std::int64_t cols, std::size_t element_bytes, const DeviceLimits& limits) {
  c.strategy = Strategy::block_per_row;
  // Threads: enough for ~kBlockElemsPerThread elements (vectors count as one access each) per
  // thread per pass, a power of two so the block reduction halves cleanly.
  const std::int64_t accesses = ceil_div(cols, c.vec);
  c.block_threads = static_cast<int>(std::clamp<std::int64_t>(next_pow2(ceil_div(accesses, kBlockElemsPerThread)),
                                                              kBlockMinThreads, kBlockMaxThreads));
  c.threads_per_row = c.block_threads;
  c.rows_per_block = 1;
  // The row is read four times (three statistics passes and the output pass): from shared memory
  // when it fits, else from global memory (L2 catches most re-reads of a row being worked on).
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * element_bytes;
  const std::size_t padded = (row_bytes + kVectorBytes - 1) / kVectorBytes * kVectorBytes;
  c.row_in_smem = limits.max_smem_per_block >= kBlockReserveSmem && padded <= limits.max_smem_per_block - kBlockReserveSmem;
  c.smem_bytes = c.row_in_smem ? padded : 0;
}

}  // namespace

LaunchConfig plan_launch(Algorithm algorithm, std::int64_t rows, std::int64_t cols, DType dtype, bool aligned16,
                         const DeviceLimits& limits) {
  if (dtype == DType::f64) throw std::invalid_argument("the CUDA kernels take f32, f16 or bf16, not f64");
  if (rows < 0 || cols < 0) throw std::invalid_argument("negative shape " + std::to_string(rows) + "x" + std::to_string(cols));
  LaunchConfig c;
  const std::size_t element_bytes = size_of(dtype);
  const int vector_elems = static_cast<int>(kVectorBytes / element_bytes);
  // Vectors only when every row starts on a 16-byte boundary; otherwise coalesced scalar accesses
  // (lane i reads element i of each 32-element stretch), which still use whole 32-byte sectors.
  const bool vector_ok = aligned16 && (static_cast<std::size_t>(cols) * element_bytes) % kVectorBytes == 0;
  switch (algorithm) {
    case Algorithm::naive:
      c.strategy = Strategy::thread_per_row;
      c.block_threads = kNaiveBlockThreads;
      c.rows_per_block = kNaiveBlockThreads;
      break;
    case Algorithm::warp: {
      c.vec = vector_ok ? vector_elems : 1;
      const std::span<const int> capacities =
          vector_ok ? std::span<const int>(kElemsPerLaneVector) : std::span<const int>(kElemsPerLaneScalar);
      if (cols <= (vector_ok ? kWarpMaxColsVector : kWarpMaxColsScalar)) {
        c.strategy = Strategy::group_per_row;
        // The smallest register capacity a full warp can hold the row in, then the fewest lanes
        // (a power of two, so groups tile a warp and shuffle with xor) that hold it at that capacity:
        // narrow rows share a warp, so no lane sits idle on a 64-wide row.
        for (int e : capacities) {
          if (32 * static_cast<std::int64_t>(e) >= cols) {
            c.elems_per_lane = e;
            break;
          }
        }
        c.threads_per_row = static_cast<int>(next_pow2(ceil_div(cols, c.elems_per_lane)));
        c.block_threads = kGroupBlockThreads;
        c.rows_per_block = kGroupBlockThreads / c.threads_per_row;
        break;
      }
      plan_block(c, cols, element_bytes, limits);
      break;
    }
    case Algorithm::block:
      c.vec = vector_ok ? vector_elems : 1;
      plan_block(c, cols, element_bytes, limits);
      break;
  }
  if (rows == 0 || cols == 0) {
    c.grid = 0;
    return c;
  }
  const std::int64_t max_grid = static_cast<std::int64_t>(std::max(1, limits.sm_count)) * kMaxResidentBlocksPerSm;
  c.grid = std::min(ceil_div(rows, c.rows_per_block), max_grid);
  return c;
}

LaunchConfig plan_backward_launch(Algorithm algorithm, std::int64_t rows, std::int64_t cols, DType dtype, bool aligned16,
                                  const DeviceLimits& limits) {
  if (algorithm == Algorithm::naive) throw std::invalid_argument("cuda_naive has no backward");
  LaunchConfig c = plan_launch(algorithm, rows, cols, dtype, aligned16, limits);
  c.row_in_smem = false;
  c.smem_bytes = 0;
  const int teams_per_block = c.strategy == Strategy::block_per_row ? 1 : c.block_threads / c.threads_per_row;
  c.rows_per_block = teams_per_block * static_cast<int>(kBackwardChunkRows);
  if (c.grid == 0) return c;
  const std::int64_t max_grid = static_cast<std::int64_t>(std::max(1, limits.sm_count)) * kMaxResidentBlocksPerSm;
  c.grid = std::min(ceil_div(backward_chunks(rows), teams_per_block), max_grid);
  return c;
}

}  // namespace lnorm::cuda
