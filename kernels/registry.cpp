// The one registry. Explicit list (no self-registering statics: a static library would drop
// them). Order: the recommended kernel of each family first; the CUDA kernels, when built
// (LNORM_HAVE_CUDA), after the CPU ones; plugin kernels (append_kernel) last.
#include "lnorm/registry.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/kernels.hpp"
#ifdef LNORM_HAVE_CUDA
#include "cuda/cuda_kernels.hpp"
#endif

namespace lnorm {

namespace {

std::vector<KernelInfo>& kernels() {
  static std::vector<KernelInfo> list = [] {
    std::vector<KernelInfo> v{cpu::kAvx512Cr, cpu::kAvx512, cpu::kAvx2Cr, cpu::kAvx2, cpu::kWelford, cpu::kNaive, cpu::kOnePass
#ifdef LNORM_HAVE_CUDA
                              , cuda::kCudaWarp, cuda::kCudaBlock, cuda::kCudaNaive
#endif
    };
    v.reserve(v.size() + kMaxAppendedKernels);
    return v;
  }();
  return list;
}

std::size_t builtin_count() {
  static const std::size_t n = kernels().size();
  return n;
}

}  // namespace

std::span<const KernelInfo> registry() { return kernels(); }

const KernelInfo* find_kernel(std::string_view name) {
  for (const KernelInfo& k : registry())
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<const KernelInfo*> kernels_for(Op op) {
  std::vector<const KernelInfo*> out;
  for (const KernelInfo& k : registry())
    if (k.implements(op)) out.push_back(&k);
  return out;
}

void append_kernel(const KernelInfo& kernel) {
  const std::size_t builtins = builtin_count();
  if (find_kernel(kernel.name)) throw std::invalid_argument("kernel " + std::string(kernel.name) + " is already registered");
  if (kernels().size() - builtins >= kMaxAppendedKernels) {
    throw std::invalid_argument("kernel " + std::string(kernel.name) + ": more than " +
                                std::to_string(kMaxAppendedKernels) + " plugin kernels in one run");
  }
  kernels().push_back(kernel);
}

}  // namespace lnorm
