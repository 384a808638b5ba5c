// The SIMD kernels with every vector operation emulated lane by lane (simd_emulation.cpp: the kernels' own
// source, kernels/cpu/simd_body.hpp and simd_backward_body.hpp, compiled against
// kernels/cpu/simd_emulated_ops.hpp in generic code), at both widths: 16 lanes (avx512's) and 8 (avx2's).
// Test kernels, not in the registry: the verify suite runs them on every machine with their native twins'
// budgets (tests/test_simd_emulation.cpp), and where the CPU has the ISA their bits are checked against the
// native kernels' (tests/test_simd_native.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "lnorm/kernel.hpp"
#include "lnorm/quant.hpp"

namespace lnorm::testing::simd_emulation {

extern const KernelInfo kAvx512Emu;    // "avx512_emu": budgets of avx512
extern const KernelInfo kAvx512CrEmu;  // "avx512_cr_emu": budgets of avx512_cr
extern const KernelInfo kAvx2Emu;      // "avx2_emu": budgets of avx2
extern const KernelInfo kAvx2CrEmu;    // "avx2_cr_emu": budgets of avx2_cr

// The native kernel an emulated one twins ("avx512_emu" -> "avx512").
std::string native_name(const KernelInfo& emulated);

// The emulated conversions, for the operation tests (tests/test_simd_native.cpp).
std::uint16_t emu_bf16(float f);
std::uint16_t emu_f16(float f);
float emu_f32_odd(double d);
float emu_widen_f16(std::uint16_t h);
// The correctly rounded kernels' f64 operations on the lanes of a, b, c (8 for lanes = 16, 4 for lanes = 8):
// fma = fmadd_pd(a, b, c), mx = max_pd(a, b); masks[0] = cvt_differ_f32(a, b), masks[1] = near_mid16<F16>(a, y_min),
// masks[2] = near_mid16<BF16>(a, y_min); near16[0..7] = store_d_near<F16>(a), near16[8..15] = store_d_near<BF16>(a)
// (the first lanes/2 of each). tests/avx512_native_probe.cpp and avx2_native_probe.cpp have the native twins.
void emu_ops_d(int lanes, const double* a, const double* b, const double* c, float y_min, double* fma, double* mx,
               std::uint8_t* masks, std::uint16_t* near16);

// The backward's subnormal test (subnormal_key over two vectors, then any_subnormal) on groups of 2·lanes floats:
// out[g] = whether group g holds a subnormal. The probes' any_subnormal are the native twins.
void emu_any_subnormal(int lanes, const float* in, std::int64_t groups, std::uint8_t* out);

// The correctly rounded kernels' settled-code test on V's lanes (kernels/cpu/simd_quant_exact.hpp settle_codes), at
// 16 or 8 lanes: codes[i] and settled[i] for y[0, n) in groups of G, group g over the scale s[g], and the bound
// e_abs + e_rel·|y_i|.
void emu_settle_codes(int lanes, QuantFormat f, const double* y, std::int64_t n, std::int64_t G, const double* s,
                      double e_abs, double e_rel, std::uint8_t* codes, std::uint8_t* settled);

// The same kernels' largest |y| of each group of G (simd_cr_rows.hpp group_max_abs), a NaN dropped.
void emu_group_max_abs(int lanes, const double* y, std::int64_t n, std::int64_t G, double* amax);

}  // namespace lnorm::testing::simd_emulation
