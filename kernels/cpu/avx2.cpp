// avx2 — the SIMD kernels' fast forward, backward and Add & Norm sum (simd_body.hpp fast:: and add::,
// simd_backward_body.hpp) on avx2_ops.hpp's 8 f32 lanes: AVX2 + FMA + F16C, f32, f16 and bf16 storage.
// Built with -mavx2 -mfma -mf16c -ffp-contract=off (the emulated twin avx2_emu, the same source on
// EmulatedOps<8>, must give its bits); called only after avx2_why_not() (simd_kernels.cpp) found all three.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cr_exact.hpp"  // storage tags; the body's cr:: slow paths (unused here, internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx2 {
namespace {
#include "simd_types.hpp"
#include "avx2_ops.hpp"
#include "simd_body.hpp"
#include "simd_backward_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  fast_rows<Avx2Ops>(p, t, begin, end, staged);
}

void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) { sum_rows<Avx2Ops>(p, t, begin, end); }

void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  switch (a.dtype) {
    case DType::f16: return bwd::rows<Avx2Ops, F16>(a, r0, r1, dg, db);
    case DType::bf16: return bwd::rows<Avx2Ops, BF16>(a, r0, r1, dg, db);
    default: return bwd::rows<Avx2Ops, F32>(a, r0, r1, dg, db);
  }
}

}  // namespace lnorm::cpu::avx2
