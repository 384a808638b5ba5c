// The quantized epilogue's mutants: the control's y, quantized with one defect each, for the mutants
// test (mutants_test.cpp) to check that verify's `quantized` property catches every one. See quant_mutants.cpp.
#pragma once

#include <string_view>

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
  // Quantizer bugs that hide inside q's budget: wrong only at a tie or by one rounding of the scale, so
  // only the contract applied to the kernel's own y (verify's part (2)) sees them.
  ties_away,               // an exact tie rounded away from zero (roundf, C's round-half-away)
  ties_to_odd,             // an exact tie rounded to the odd code
  scale_truncated,         // row/group scale amax/qmax rounded toward zero (a float division in round-to-zero mode)
  scale_times_reciprocal,  // row/group scale f32(amax · f32(1/qmax)): two roundings where the contract has one
  reciprocal_multiply,     // q = Q(f32(y · f32(1/s))) where the contract says Q(y/s) (vLLM's rounding points)
  mx_exponent_of_bf16_amax,  // the MX exponent from floor(log2) of amax rounded to bf16: a binade high just below 2^k
  // FNUZ's two classic slips: OCP habits in a format that differs from OCP exactly there.
  fnuz_negative_zero,  // a negative value that rounds to zero written as the sign bit alone: −0 in OCP, FNUZ's NaN
  fnuz_ocp_bias,       // FNUZ written with the OCP twin's codes (bias 7 / 15, not 8 / 16): every value read back halved
  // FP4's slip: the packing order (element 2i in the high nibble), every code right, every pair swapped.
  fp4_nibbles_swapped,
  // NVFP4's block scale rule: its wrong rounding (toward zero) and its off-by-one (a code up where it rounds down).
  nvfp4_scale_truncated,
  nvfp4_scale_rounds_up,
  // mx's rules (--mx-rule): the rule ignored (floor's exponent written for ceil, even and rceil: its wrong rounding),
  // and ceil computed as floor + 1 (its off-by-one, a binade too many at exact powers of two).
  mx_rule_ignored,
  mx_ceil_as_floor_plus_one,
  // UE8M0 row/group scales: the exponent by f32 log2f (vLLM's), one low just above a power of two.
  ue8m0_log2f,
};

// The quantized epilogue's mutants, one row each: mutants.cpp registers every row (every forward op, f32/f16/bf16,
// the y in x's dtype handed out). A new one is its enum value above, its row here and its code in quant_mutants.cpp.
struct QuantMutant {
  QuantDefect defect;
  std::string_view name, summary;
};
inline constexpr QuantMutant kQuantMutants[] = {
    {QuantDefect::truncates, "mutant_quant_truncates",
     "quantized: q rounded toward zero"},
    {QuantDefect::nan_on_overflow, "mutant_quant_nan_on_overflow",
     "quantized: no saturation (fp8 NaN, int8 wraps past the range)"},
    {QuantDefect::amax_of_x, "mutant_quant_amax_of_x",
     "quantized: dynamic scales from the amax of x, not of y"},
    {QuantDefect::e8m0_rounds_up, "mutant_quant_e8m0_rounds_up",
     "quantized: mx exponent from ceil(log2 amax)"},
    {QuantDefect::group_off_by_one, "mutant_quant_group_off_by_one",
     "quantized: each group's amax over a window one element off"},
    {QuantDefect::int8_clamps_127, "mutant_quant_int8_clamps_127",
     "quantized: int8 saturates at -127, never -128"},
    {QuantDefect::double_rounds, "mutant_quant_double_rounds",
     "quantized: y rounded to bf16, then divided and rounded again"},
    {QuantDefect::ties_away, "mutant_quant_ties_away",
     "quantized: exact ties rounded away from zero"},
    {QuantDefect::fnuz_negative_zero, "mutant_quant_fnuz_negative_zero",
     "quantized: FNUZ's zero from below written 0x80 (its NaN), as OCP's -0"},
    {QuantDefect::fnuz_ocp_bias, "mutant_quant_fnuz_ocp_bias",
     "quantized: FNUZ written with OCP's bias (7/15, not 8/16): values halved"},
    {QuantDefect::ties_to_odd, "mutant_quant_ties_to_odd",
     "quantized: exact ties rounded to the odd code"},
    {QuantDefect::scale_truncated, "mutant_quant_scale_truncated",
     "quantized: row/group scale amax/qmax rounded toward zero"},
    {QuantDefect::scale_times_reciprocal, "mutant_quant_scale_times_reciprocal",
     "quantized: row/group scale amax * f32(1/qmax), two roundings"},
    {QuantDefect::reciprocal_multiply, "mutant_quant_reciprocal_multiply",
     "quantized: q = Q(f32(y * f32(1/s))), not Q(y/s)"},
    {QuantDefect::mx_exponent_of_bf16_amax, "mutant_quant_mx_exponent_of_bf16_amax",
     "quantized: mx exponent of amax rounded to bf16"},
    {QuantDefect::fp4_nibbles_swapped, "mutant_quant_fp4_nibbles_swapped",
     "quantized: fp4 element 2i in the high nibble, not the low"},
    {QuantDefect::nvfp4_scale_truncated, "mutant_quant_nvfp4_scale_truncated",
     "quantized: nvfp4 block scale E4M3(amax*G/6) rounded toward zero"},
    {QuantDefect::nvfp4_scale_rounds_up, "mutant_quant_nvfp4_scale_rounds_up",
     "quantized: nvfp4 block scale rounded up where it rounds down"},
    {QuantDefect::mx_rule_ignored, "mutant_quant_mx_rule_ignored",
     "quantized: mx exponent by floor whatever --mx-rule says"},
    {QuantDefect::mx_ceil_as_floor_plus_one, "mutant_quant_mx_ceil_as_floor_plus_one",
     "quantized: mx ceil/rceil exponent as floor + 1 (wrong at powers of two)"},
    {QuantDefect::ue8m0_log2f, "mutant_quant_ue8m0_log2f",
     "quantized: UE8M0 exponent as ceilf(log2f(amax/qmax)) in f32"},
};

// forward: q and scales from y, which y_forward computes in x's dtype (the problem with y_as_x) into scratch.
void run_quant_defect(QuantDefect defect, ForwardFn y_forward, const Problem& p, const Tensors& t);

}  // namespace lnorm::mutants
