// avx512 — LayerNorm with AVX-512 F/BW/VL/DQ, 16 f32 lanes; f32, f16 and bf16 storage (bf16 narrowed by
// integer round-to-nearest-even here; avx512_bf16.cpp has the AVX512-BF16 instantiation).
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -ffp-contract=off; called only after the CPU
// check in avx512_kernel.cpp. The algorithm is avx512_body.hpp's `fast` (the same source as the
// emulated test kernel avx512_emu); the operations are avx512_native_ops.hpp's intrinsics.
//
// Measured on this 2-core AMD EPYC (Zen 5, AVX-512 F/BW/VL/DQ/BF16), 2026-12-01, single thread, GB/s of
// x read + y written, medians of 5-7 interleaved rounds of thread CPU time (the machine ran ~5 other
// builds at load 9-12, so wall-clock numbers were meaningless; ratios are within one run):
//   shape       dtype  best copy  avx512  avx512_cr  avx2     avx512/copy
//   64x4096     f32    75-81      30-34   8.4-9.1    24-25    0.40
//   64x4096     bf16   89-132     16-17   2.3-2.8    7.6-8.7  0.15
//   1024x768    f32    75         42      9.0        31       0.57
//   1024x768    bf16   88         18      3.1        8.6      0.20
//   16384x4096  f32    23.5       14.3    6.3        11.8     0.61
//   16384x4096  f16    23.0       9.2     2.5        7.8      0.40
//   16384x4096  bf16   25.0       9.0     2.5        6.7      0.36
// (bf16 with vfpclassps for the subnormal repair: 18 GB/s at 1024x768, 15 with two compares.) Per
// element avx512 is 1.3-1.9x avx2, but compute-bound below the copy everywhere, including DRAM sizes
// for 16-bit storage: the three passes (two over L1) cost more than the row's memory traffic here.
// The choices:
//   - 4 accumulators x 16 lanes, 512-element blocks: the depth of avx2's sums (8 adds per lane per
//     block), so the same error bound, and each FMA chain of pass 2 gets one FMA per iteration;
//   - no per-element max|x - m| (avx2 has one): the range check is on the sums (avx512_body.hpp), 8 of
//     pass 2's 20 operations per 64 elements saved;
//   - non-temporal stores when y > 32 MiB (kStreamBytes): the write then costs no read-for-ownership;
//   - tried and dropped: prefetching the next row during the output pass (64x4096 f32: 30.0 GB/s with,
//     33.9 without, within the noise).
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
