// avx512_cr — correctly rounded LayerNorm (f64 statistics and output math, rounded once) with AVX-512
// F/BW/VL/DQ, 8 f64 lanes; f32, f16, bf16 storage (bf16 by integer rounding here; avx512_bf16.cpp has
// the AVX512-BF16 instantiation). Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -ffp-contract=off; called only after the CPU check in avx512_kernel.cpp. The algorithm is
// avx512_body.hpp's `cr`: avx2_cr.cpp's Ziv rounding test with its proven bound on 8 f64 lanes, and
// avx2_cr_exact.hpp's scalar medium and double-double paths for the rare elements the vector test
// cannot certify: every element correctly rounded. The same source as the emulated test kernel avx512_cr_emu.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "avx2_cr_exact.hpp"  // avx512_body.hpp's cr:: slow paths (internal linkage)
#include "isa.hpp"

namespace lnorm::cpu::avx512_cr {
namespace {
#include "avx512_types.hpp"
#include "avx512_native_ops.hpp"
#include "avx512_body.hpp"
}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  cr_rows<NativeOps<false>>(p, t, begin, end);
}

}  // namespace lnorm::cpu::avx512_cr
