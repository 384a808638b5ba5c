// avx512_cr — the correctly rounded forward (simd_body.hpp cr::; the algorithm and its proven bound are in
// cr_exact.hpp's header) on avx512_ops.hpp's 8 f64 lanes: AVX-512 F/BW/VL/DQ, f32, f16 and bf16 storage (bf16
// by integer rounding here; avx512_bf16.cpp has the AVX512-BF16 instantiation). Built with the AVX-512 flags
// and -ffp-contract=off; called only after the CPU check in simd_kernels.cpp. The same source as the emulated
// test kernel avx512_cr_emu and, on 4 lanes, avx2_cr.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cr_exact.hpp"  // the body's cr:: slow paths (internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx512_cr {
namespace {
#include "simd_types.hpp"
#include "avx512_ops.hpp"
#include "simd_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged) {
  cr_rows<Avx512Ops<false>>(p, t, begin, end, staged);
}

}  // namespace lnorm::cpu::avx512_cr
