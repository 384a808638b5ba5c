// The ordered list of every kernel lnorm ships. Order: best first within a family, then the
// reference-like scalar kernels; `lnorm list` prints it in this order.
#pragma once

#include <span>
#include <string_view>

#include "lnorm/kernel.hpp"

namespace lnorm {

std::span<const KernelInfo> registry();
// nullptr when no kernel has this name.
const KernelInfo* find_kernel(std::string_view name);

}  // namespace lnorm
