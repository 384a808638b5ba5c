// `lnorm verify` for a plugin kernel, one property per forked child, so a kernel that crashes fails
// the property it crashed in (with the signal named) and the run goes on with the next property and
// the next kernel. lnorm's own kernels run in-process: they are tested, and fork would only cost.
#pragma once

#include <vector>

#include "lnorm/verify.hpp"

namespace lnorm::cli {

// As verify::verify_kernel; `progress` is called in this process before each property.
std::vector<verify::Outcome> verify_in_child(const KernelInfo& kernel, Op op, DType dtype, const verify::KernelBudget& budget,
                                             const verify::Settings& settings, const verify::Progress& progress);

}  // namespace lnorm::cli
