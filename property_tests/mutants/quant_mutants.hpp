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
  // Quantizer bugs that hide inside q's budget (issue 52): wrong only at a tie or by one rounding of the scale, so
  // only the contract applied to the kernel's own y (verify's part (2)) sees them.
  ties_away,               // an exact tie rounded away from zero (roundf, C's round-half-away)
  ties_to_odd,             // an exact tie rounded to the odd code
  scale_truncated,         // row/group scale amax/qmax rounded toward zero (a float division in round-to-zero mode)
  scale_times_reciprocal,  // row/group scale f32(amax · f32(1/qmax)): two roundings where the contract has one
  reciprocal_multiply,     // q = Q(f32(y · f32(1/s))) where the contract says Q(y/s) (vLLM's rounding points)
  mx_exponent_of_bf16_amax,  // the MX exponent from floor(log2) of amax rounded to bf16: a binade high just below 2^k
  // FNUZ's two classic slips (issue 55): OCP habits in a format that differs from OCP exactly there.
  fnuz_negative_zero,  // a negative value that rounds to zero written as the sign bit alone: −0 in OCP, FNUZ's NaN
  fnuz_ocp_bias,       // FNUZ written with the OCP twin's codes (bias 7 / 15, not 8 / 16): every value read back halved
};

// forward: q and scales from y, which y_forward computes in x's dtype (the problem with y_as_x) into scratch.
void run_quant_defect(QuantDefect defect, ForwardFn y_forward, const Problem& p, const Tensors& t);

}  // namespace lnorm::mutants
