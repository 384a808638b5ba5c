// avx512 — LayerNorm with AVX-512 F/BW/VL/DQ, 16 f32 lanes; f32, f16 and bf16 storage (bf16 narrowed by
// integer round-to-nearest-even here; avx512_bf16.cpp has the AVX512-BF16 instantiation).
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -ffp-contract=off; called only after the CPU
// check in avx512_kernel.cpp. The algorithm is avx512_body.hpp's `fast` (the same source as the
// emulated test kernel avx512_emu); the operations are avx512_native_ops.hpp's intrinsics.
//
// MEASURED on a 2-core AMD EPYC (Zen 5, AVX-512 F/BW/VL/DQ/BF16), 2026-12-01, single thread.
// Second version (avx2's fused statistics, next row's statistics before this row's output, L2 prefetch
// of row + 2 when streaming, y by one FMA about the two-float mean, 16-bit gamma/beta widened once per
// call, streaming above 8 MiB of y). One `lnorm bench --quick` run on an idle machine (bench/README.md's
// example), GB/s, avx512 / avx2 in the same run:
//   shape       f32                 bf16                f16
//   64x768      65.7 / 50.3 (1.31)  29.6 / 21.4 (1.38)  36.1 / 25.5 (1.42)
//   64x4096     41.2 / 41.6 (0.99)  36.0 / 22.9 (1.57)  38.4 / 27.1 (1.42)
//   4096x1024   38.8 / 28.0 (1.38)  29.0 / 20.4 (1.43)  33.8 / 24.5 (1.38)
//   16384x4096  20.2 / 18.5 (1.10)  19.8 / 17.3 (1.14)  19.8 / 21.1 (0.93)   streaming copy 43-52
// The first version (three passes: a sum about x[0], the corrected two-pass, the output; gamma/beta
// converted per row; streaming above 32 MiB of y) ran at 0.61-1.05x avx2 in the README's previous run
// (0.63 at 4096x1024 f32, 0.61 at 16384x4096 f16). The choices, each by lnorm_gbench (medians of 5,
// 16384x4096 and 4096x1024/2048, in one run against the streaming copy; DRAM bandwidth here moved by
// up to 1.7x between runs with the neighbours, so only same-run ratios):
//   - L2 prefetch of row + 2 during the output pass: f32 0.62 of the copy with it, 0.55 without;
//     bf16 0.61 vs 0.43. Row + 1 (0.61, 0.37) and row + 4 (0.50, 0.39) were no better.
//   - streaming above 8 MiB of y (avx512_body.hpp's fast::kStreamBytes has the numbers): 4096x1024
//     f32 20.5 -> 37.8 GB/s. Not streaming at all: 16384x4096 f32 0.50, bf16 0.29 of the copy.
//   - 4 accumulators x 16 lanes, 512-element blocks: the depth of avx2's sums (8 adds per lane per
//     block), so the same error bound;
//   - no per-element max|x - m| (avx2's pass 1b has one): the range check is on the sums
//     (avx512_body.hpp);
//   - bf16 with vfpclassps for the subnormal repair: 18 GB/s at 1024x768 in the first version, 15
//     with two compares.
// What limits it: compute, as avx2 (17-57% of the copy in the run above); at DRAM sizes the output
// pass and the next row's statistics read do not yet overlap the memory traffic fully (47% of this
// run's streaming copy).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "avx2_cr_exact.hpp"  // avx512_body.hpp's cr:: slow paths (internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx512 {
namespace {
#include "avx512_types.hpp"
#include "avx512_native_ops.hpp"
#include "avx512_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  fast_rows<NativeOps<false>>(p, t, begin, end);
}

}  // namespace lnorm::cpu::avx512
