// bf16 rows of avx512 and avx512_cr with AVX512-BF16's vcvtneps2bf16 for the narrowing (the rest as
// avx512.cpp / avx512_cr.cpp). Its own TU because it alone is built with -mavx512bf16; called only
// where cpuid reports AVX512-BF16 (simd_kernels.cpp). Same bits as the integer path (subnormal lanes
// redone, see avx512_ops.hpp; tested in tests/test_simd_native.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cr_exact.hpp"  // the body's cr:: slow paths (internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx512_bf16 {
namespace {
#include "simd_types.hpp"
#include "avx512_ops.hpp"
#include "simd_body.hpp"
}  // namespace

void rows_fast(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  fast::rows<Avx512Ops<true>, BF16>(p, t, begin, end, staged);
}

void rows_cr(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged) {
  cr::rows<Avx512Ops<true>, BF16>(p, t, begin, end, staged);
}

}  // namespace lnorm::cpu::avx512_bf16
