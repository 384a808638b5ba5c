// Deliberately wrong LayerNorm kernels, one defect each, for the test that checks the
// property-based suite catches every one of them. Not in the harness's registry; see mutants.cpp.
#pragma once

#include <span>

#include "lnorm/kernel.hpp"

namespace lnorm::mutants {

// Every mutant, in a fixed order. Each KernelInfo: name "mutant_<short>", summary = the defect,
// all four dtypes, why_not = nullptr, cautionary = false (the suite must catch them, not excuse
// them).
std::span<const KernelInfo> all();

// Whether the mutant's defect lives in this op (the add_* mutants are the control in the plain norms,
// so the suite can compare their fused ops with their plain ones; only their fused ops must be caught).
bool defect_in(const KernelInfo& mutant, Op op);

// The mutants without their defect: must pass every property, or a "caught" mutant proves nothing.
const KernelInfo& control();

}  // namespace lnorm::mutants
