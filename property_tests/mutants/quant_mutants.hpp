// The quantized epilogue's mutants (issue 38): the control's y, quantized with one defect each, for the mutants
// test (mutants_test.cpp) to check that verify's `quantized` property catches every one. See quant_mutants.cpp.
#pragma once

#include "lnorm/kernel.hpp"

namespace lnorm::mutants {

enum class QuantDefect {
  none,              // the control's quantizer: Q(y / s), nearest even, saturating; scales as lnorm/quant.hpp says
  truncates,         // q rounded toward zero
  nan_on_overflow,   // no saturation: a value past the largest becomes NaN (fp8) / wraps (int8)
  amax_of_x,         // row/group scales from the amax of x, not of y
  e8m0_rounds_up,    // mx exponent from ceil(log2 amax), not floor
  group_off_by_one,  // each group's amax taken over elements [gG + 1, (g + 1)G + 1)
  int8_clamps_127,   // int8 saturates at ±127: −128 never written
  double_rounds,     // y rounded to bf16 before the division (a kernel claiming one rounding of its f32 y)
};

// forward: q and scales from y, which y_forward computes in x's dtype (the problem with y_as_x) into scratch.
void run_quant_defect(QuantDefect defect, ForwardFn y_forward, const Problem& p, const Tensors& t);

}  // namespace lnorm::mutants
