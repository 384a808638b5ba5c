// Declarations of the CPU kernels' KernelInfo objects, collected by registry.cpp.
#pragma once

#include "lnorm/kernel.hpp"

namespace lnorm::cpu {
// Every dtype: the scalar kernels'.
inline constexpr DTypeSet kScalarDTypes{DType::f32, DType::f64, DType::f16, DType::bf16};
extern const KernelInfo kNaive;
extern const KernelInfo kOnePass;
extern const KernelInfo kWelford;
extern const KernelInfo kAvx2;
extern const KernelInfo kAvx2Cr;
extern const KernelInfo kAvx512;
extern const KernelInfo kAvx512Cr;
// Whether avx512/avx512_cr narrow bf16 with AVX512-BF16 on this CPU (else integer rounding; same bits).
bool cpu_has_avx512_bf16();
}  // namespace lnorm::cpu
