// The one ordered registry. Explicit list (no self-registering statics: a static library would drop
// them). Order: the recommended kernel of each family first; the CUDA kernels, when built
// (LNORM_HAVE_CUDA), after the CPU ones.
#include "lnorm/registry.hpp"

#include <array>

#include "cpu/kernels.hpp"
#ifdef LNORM_HAVE_CUDA
#include "cuda/cuda_kernels.hpp"
#endif

namespace lnorm {

std::span<const KernelInfo> registry() {
  static const std::array kernels{cpu::kAvx2Cr, cpu::kAvx2, cpu::kWelford, cpu::kNaive, cpu::kOnePass
#ifdef LNORM_HAVE_CUDA
                                  , cuda::kCudaWarp, cuda::kCudaBlock, cuda::kCudaNaive
#endif
  };
  return kernels;
}

const KernelInfo* find_kernel(std::string_view name) {
  for (const KernelInfo& k : registry())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace lnorm
