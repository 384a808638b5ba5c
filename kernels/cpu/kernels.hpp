// Declarations of the CPU kernels' KernelInfo objects, collected by registry.cpp.
#pragma once

#include "lnorm/kernel.hpp"

namespace lnorm::cpu {
extern const KernelInfo kNaive;
extern const KernelInfo kOnePass;
extern const KernelInfo kWelford;
extern const KernelInfo kAvx2;
extern const KernelInfo kAvx2Cr;
}  // namespace lnorm::cpu
