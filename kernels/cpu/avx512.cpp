// avx512 — LayerNorm with AVX-512 F/BW/VL/DQ, 16 f32 lanes; f32, f16 and bf16 storage (bf16 narrowed by
// integer round-to-nearest-even here; avx512_bf16.cpp has the AVX512-BF16 instantiation).
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -ffp-contract=off; called only after the CPU
// check in avx512_kernel.cpp. The algorithm is avx512_body.hpp's `fast` (the same source as the
// emulated test kernel avx512_emu); the operations are avx512_native_ops.hpp's intrinsics.
//
// Measured (lnorm_gbench, single thread, medians of 5; this 2-core AMD EPYC Zen 5, 2026-12-01): see
// README "AVX-512 kernels" and the numbers in the branch's report; the choices:
//   - 4 accumulators x 16 lanes, 512-element blocks: the depth of avx2's sums (8 adds per lane per
//     block), so the same error bound, and the FMA chains of pass 2 are one FMA per iteration each;
//   - no per-element max|x − m| (avx2 has one): the range check is on the sums (avx512_body.hpp), 8 of
//     pass 2's 20 operations per 64 elements saved;
//   - non-temporal stores when y > 32 MiB (kStreamBytes): the write then costs no read-for-ownership.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

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
