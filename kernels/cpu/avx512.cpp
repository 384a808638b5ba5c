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
#include "avx512_backward_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  fast_rows<NativeOps<false>>(p, t, begin, end, staged);
}

void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  sum_rows<NativeOps<false>>(p, t, begin, end);
}

// The backward rows, f32 math on the data's storage (f16 and bf16 rounded once by the integer path; dx has
// no AVX512-BF16 instantiation: the same bits, avx512_native_ops.hpp).
void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  switch (a.dtype) {
    case DType::f16: return bwd::rows<NativeOps<false>, F16>(a, r0, r1, dg, db);
    case DType::bf16: return bwd::rows<NativeOps<false>, BF16>(a, r0, r1, dg, db);
    default: return bwd::rows<NativeOps<false>, F32>(a, r0, r1, dg, db);
  }
}

}  // namespace lnorm::cpu::avx512
