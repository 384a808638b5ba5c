// avx512 — the SIMD kernels' fast forward, backward and Add & Norm sum (simd_body.hpp fast:: and add::,
// simd_backward_body.hpp) on avx512_ops.hpp's 16 f32 lanes: AVX-512 F/BW/VL/DQ, f32, f16 and bf16 storage (bf16
// narrowed by integer round-to-nearest-even here; avx512_bf16.cpp has the AVX512-BF16 instantiation). Built
// with the AVX-512 flags and -ffp-contract=off; called only after the CPU check in simd_kernels.cpp. The same
// source as the emulated test kernel avx512_emu and, on 8 lanes, avx2. Its tuning constants (simd_body.hpp's
// fast::) say the numbers that chose them; the versions' history is docs/performance.md.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cr_exact.hpp"  // the body's cr:: slow paths (internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx512 {
namespace {
#include "simd_types.hpp"
#include "avx512_ops.hpp"
#include "simd_body.hpp"
#include "simd_backward_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  fast_rows<Avx512Ops<false>>(p, t, begin, end, staged);
}

void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  sum_rows<Avx512Ops<false>>(p, t, begin, end);
}

// The backward rows, f32 math on the data's storage (f16 and bf16 rounded once by the integer path; dx has
// no AVX512-BF16 instantiation: the same bits, avx512_ops.hpp).
void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  switch (a.dtype) {
    case DType::f16: return bwd::rows<Avx512Ops<false>, F16>(a, r0, r1, dg, db);
    case DType::bf16: return bwd::rows<Avx512Ops<false>, BF16>(a, r0, r1, dg, db);
    default: return bwd::rows<Avx512Ops<false>, F32>(a, r0, r1, dg, db);
  }
}

}  // namespace lnorm::cpu::avx512
