// avx512 and avx512_cr with every AVX-512 operation emulated lane by lane (avx512_emulation.cpp: the
// kernels' own source, kernels/cpu/avx512_body.hpp, compiled against kernels/cpu/avx512_emulated_ops.hpp
// in generic code). Test kernels, not in the registry: the verify suite runs them on every machine
// with avx512's and avx512_cr's budgets (tests/test_avx512_emulation.cpp), and on a CPU with AVX-512
// their bits are checked against the native kernels' (tests/test_avx512_native.cpp).
#pragma once

#include <cstdint>

#include "lnorm/kernel.hpp"

namespace lnorm::testing::avx512_emulation {

extern const KernelInfo kAvx512Emu;    // "avx512_emu": budgets of avx512
extern const KernelInfo kAvx512CrEmu;  // "avx512_cr_emu": budgets of avx512_cr

// The emulated conversions, for the operation tests (tests/test_avx512_native.cpp).
std::uint16_t emu_bf16(float f);
std::uint16_t emu_f16(float f);
float emu_f32_odd(double d);
float emu_widen_f16(std::uint16_t h);
// avx512_cr's f64 operations on 8 lanes of a, b, c: fma = fmadd_pd(a, b, c), mx = max_pd(a, b);
// masks[0] = cvt_differ_f32(a, b), masks[1] = near_mid16<F16>(a, y_min), masks[2] = near_mid16<BF16>(a, y_min);
// near16[0..7] = store8_near<F16>(a), near16[8..15] = store8_near<BF16>(a).
// tests/avx512_native_probe.cpp has the native twin (avx512_probe::ops8) with the same signature.
void emu_ops8(const double* a, const double* b, const double* c, float y_min, double* fma, double* mx, std::uint8_t* masks, std::uint16_t* near16);

}  // namespace lnorm::testing::avx512_emulation
