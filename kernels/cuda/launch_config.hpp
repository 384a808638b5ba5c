// How a CUDA LayerNorm is launched for a given width and dtype: which strategy, how many threads
// per row, the vector width, whether the row fits in shared memory, and the grid. Plain C++ (no CUDA
// headers), compiled by the host compiler and unit-tested on the CPU (tests/test_cuda_launch.cpp);
// the .cu files only read the plan.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lnorm/problem.hpp"

namespace lnorm::cuda {

// The registry's three CUDA kernels.
enum class Algorithm : std::uint8_t { naive, warp, block };
// How rows are mapped to threads. `warp` falls back to `block` for rows wider than kWarpMaxColsVector (kWarpMaxColsScalar without vectors).
enum class Strategy : std::uint8_t { thread_per_row, group_per_row, block_per_row };

// What the plan needs to know about the device (cudaGetDeviceProperties; tests pass an H200's).
struct DeviceLimits {
  int sm_count = 132;                           // H200 SXM: 132 multiprocessors
  std::size_t max_smem_per_block = 227 * 1024;  // sharedMemPerBlockOptin on sm_90: 227 KiB
};

// A group per row holds the row in registers, at one of these capacities (elements per lane), each a
// template instance. Measured with `nvcc -Xptxas -v` (CUDA 13.0, sm_90, this code): with 16-byte
// vectors, 64 elements take 151 registers (f32) / 125 (f16, bf16) and no spills; 128 took 244-255 and
// 4-11 s of ptxas per instance. With scalar accesses 32 elements take 174 registers; 64 took 255 and
// 128 spilled 2.5-3.3 KB. So a group holds up to 32 x 64 = 2048 elements with vectors and 32 x 32 =
// 1024 without; wider rows go to a block per row (block.cu), whose shared-memory copy of the row
// costs one more pass on chip.
inline constexpr int kElemsPerLaneVector[] = {8, 16, 32, 64};
inline constexpr int kElemsPerLaneScalar[] = {8, 16, 32};
inline constexpr std::int64_t kWarpMaxColsVector = 32 * 64, kWarpMaxColsScalar = 32 * 32;
// Threads per block for the group kernel: 8 warps. Any multiple of 32 up to 1024 works; 256 keeps
// 8 blocks per SM resident at full occupancy (2048 threads/SM on sm_90) with room for the tail.
inline constexpr int kGroupBlockThreads = 256;
// The block kernel aims at this many elements per thread per pass: enough independent loads in
// flight per thread (8 x 16 B with vectors), few enough threads idle on narrow rows.
inline constexpr int kBlockElemsPerThread = 8;
inline constexpr int kBlockMinThreads = 64, kBlockMaxThreads = 1024;  // 1024: CUDA's per-block limit
// The naive kernel: one thread per row, 128 threads per block (any multiple of 32 would do).
inline constexpr int kNaiveBlockThreads = 128;
// Blocks beyond what can be resident only queue; sm_90 keeps at most 32 blocks per SM, so capping the
// grid there never lowers occupancy, and the kernels loop over rows (64-bit) to cover the rest.
inline constexpr int kMaxResidentBlocksPerSm = 32;
// Shared memory the block kernel keeps for itself (the cross-warp reduction scratch: 32 floats
// and a flag per pass), subtracted from the device limit before deciding whether a row fits.
inline constexpr std::size_t kBlockReserveSmem = 1024;
// 16-byte vector accesses: 4 f32 or 8 f16/bf16 elements.
inline constexpr int kVectorBytes = 16;

struct LaunchConfig {
  Strategy strategy = Strategy::thread_per_row;
  int vec = 1;               // elements per memory access: 16 bytes' worth, or 1 (scalar fallback)
  int threads_per_row = 1;   // 1, a power of two <= 32 (group), or the block size
  int elems_per_lane = 0;    // group_per_row: the register capacity instance (one of kElemsPerLaneVector/Scalar)
  int block_threads = 0;     // threads per block
  int rows_per_block = 1;    // rows one block handles per step of its row loop
  std::int64_t grid = 0;     // blocks launched; 0 when there is nothing to do
  std::size_t smem_bytes = 0;  // block_per_row: dynamic shared memory for the cached row (0: streamed)
  bool row_in_smem = false;
};

// The backward (backward.cu): each team — a group of threads_per_row lanes (cuda_warp) or a block (cuda_block,
// and cuda_warp past kWarpMaxCols), as the forward's plan chooses them — takes chunks of kBackwardChunkRows
// consecutive rows and adds their dgamma/dbeta terms to the chunk's partials in row order; a second kernel sums
// the partials in chunk order. The chunk, not the grid, fixes the order: the same bits on every GPU and in the
// host emulation. 32 rows: at 16384x4096 the partials are 512 chunks x 4096 x 8 bytes x 2 = 32 MiB (4% of the
// 805 MB the backward moves) and 512 teams; unmeasured on a GPU (bench/gpu).
inline constexpr std::int64_t kBackwardChunkRows = 32;
inline std::int64_t backward_chunks(std::int64_t rows) { return (rows + kBackwardChunkRows - 1) / kBackwardChunkRows; }

// aligned16: x, y, gamma and beta all start on a 16-byte boundary (cudaMalloc guarantees 256).
// Vector accesses also need every row to start aligned, i.e. cols * sizeof(element) % 16 == 0.
LaunchConfig plan_launch(Algorithm algorithm, std::int64_t rows, std::int64_t cols, DType dtype, bool aligned16,
                         const DeviceLimits& limits);
// The backward's plan (warp or block; aligned16: x, dy and dx): the forward's team and vector width, rows
// read from global memory in every pass (no shared-memory copy), rows_per_block and grid in chunks' terms.
LaunchConfig plan_backward_launch(Algorithm algorithm, std::int64_t rows, std::int64_t cols, DType dtype, bool aligned16,
                                  const DeviceLimits& limits);

}  // namespace lnorm::cuda
