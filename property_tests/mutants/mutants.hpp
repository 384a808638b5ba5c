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

// The mutants without their defect: must pass every property, or a "caught" mutant proves nothing.
const KernelInfo& control();

}  // namespace lnorm::mutants
