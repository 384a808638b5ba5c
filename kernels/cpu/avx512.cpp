// avx512 — LayerNorm with AVX-512 F/BW/VL/DQ, 16 f32 lanes; f32, f16 and bf16 storage (bf16 narrowed by
// integer round-to-nearest-even here; avx512_bf16.cpp has the AVX512-BF16 instantiation).
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -ffp-contract=off; called only after the CPU
// check in avx512_kernel.cpp. The algorithm is avx512_body.hpp's `fast` (the same source as the
// emulated test kernel avx512_emu); the operations are avx512_native_ops.hpp's intrinsics.
//
// What limits it: compute, as avx2 (17-57% of the copy in bench/README.md's run); at DRAM sizes the output
// pass and the next row's statistics read do not fully overlap the memory traffic. Its tuning constants
// (avx512_body.hpp's fast::) say the numbers that chose them; the versions' history is docs/performance.md.
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

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  fast_rows<NativeOps<false>>(p, t, begin, end, staged);
}

void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  sum_rows<NativeOps<false>>(p, t, begin, end);
}

}  // namespace lnorm::cpu::avx512
