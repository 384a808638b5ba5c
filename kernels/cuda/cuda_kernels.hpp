// Declarations of the CUDA kernels' KernelInfo objects, collected by registry.cpp when lnorm is built
// with CUDA (LNORM_HAVE_CUDA).
#pragma once

#include "lnorm/kernel.hpp"

namespace lnorm::cuda {
extern const KernelInfo kCudaWarp;
extern const KernelInfo kCudaBlock;
extern const KernelInfo kCudaNaive;
}  // namespace lnorm::cuda
