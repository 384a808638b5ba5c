// The ordered list of every kernel lnorm ships. Order: best first within a family, then the
// reference-like scalar kernels; `lnorm list` prints it in this order. Kernels from plugins
// (`--plugin PATH.so`) are appended after the built-in ones, in the order they were loaded.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "lnorm/kernel.hpp"

namespace lnorm {

std::span<const KernelInfo> registry();
// nullptr when no kernel has this name.
const KernelInfo* find_kernel(std::string_view name);
// The kernels that implement op, in registry order.
std::vector<const KernelInfo*> kernels_for(Op op);

// How many kernels append_kernel may add in one process: the registry reserves room for them up
// front, so a KernelInfo* taken before a plugin is loaded stays valid (no reallocation).
inline constexpr std::size_t kMaxAppendedKernels = 64;
// Appends a kernel after the built-in ones. Its name (and summary) must outlive the process's use of
// the registry. Throws std::invalid_argument when the name is taken or kMaxAppendedKernels are in.
void append_kernel(const KernelInfo& kernel);

}  // namespace lnorm
