// avx2_cr — the correctly rounded forward (simd_body.hpp cr::; the algorithm and its proven bound are in
// cr_exact.hpp's header) on avx2_ops.hpp's 4 f64 lanes: AVX2 + FMA + F16C, f32, f16 and bf16 storage.
// Built with -mavx2 -mfma -mf16c -ffp-contract=off; called only after avx2_why_not() (simd_kernels.cpp).
// The same source as the emulated test kernel avx2_cr_emu.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cr_exact.hpp"  // the body's cr:: slow paths (internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx2_cr {
namespace {
#include "simd_types.hpp"
#include "avx2_ops.hpp"
#include "simd_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged) {
  cr_rows<Avx2Ops>(p, t, begin, end, staged);
}

}  // namespace lnorm::cpu::avx2_cr
