// The one ordered registry. Explicit list (no self-registering statics: a static library would drop
// them). Order: the recommended kernel of each family first.
#include "lnorm/registry.hpp"

#include <array>

#include "cpu/kernels.hpp"

namespace lnorm {

std::span<const KernelInfo> registry() {
  static const std::array<KernelInfo, 5> kernels{cpu::kAvx2Cr, cpu::kAvx2, cpu::kWelford, cpu::kNaive,
                                                 cpu::kOnePass};
  return kernels;
}

const KernelInfo* find_kernel(std::string_view name) {
  for (const KernelInfo& k : registry())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace lnorm
