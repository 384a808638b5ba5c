// The CPU kernels' quantized epilogue (lnorm/quant.hpp): a row's y as the kernel formed it in f32 — before any
// rounding to x's dtype — quantized by the problem's spec. What every CPU kernel computes, so their q differ only
// where their f32 y does:
//   tensor   q = Q(y / S)
//   row, group:G
//            s = f32(amax / qmax) per group (f32 amax of |y|, one f32 division); 1 for a group of zeros and where
//            amax/qmax is below f32's range (rounds to 0); NaN (and NaN codes) for a group holding a NaN
//   mx       X = floor(log2 amax) − emax_elem clamped to [−127, 127] (−127 for a group of zeros), s = 2^X, stored
//            as E8M0 X + 127 (255, NaN, for a group holding a NaN)
//   nvfp4    c = E4M3(amax·G/6) per block of 16, s = f32(E4M3value(c)/G), +Inf where c is 0 (q ±0); c = 0x7f
//            (E4M3's NaN) and codes 0 for a block holding a NaN
// y / s is divided in double: y and s are f32, so y/s, unless it is a midpoint of the grid (≤ 9 significant bits),
// differs from one by at least 2^-33 of itself (y − m·s is a nonzero multiple of the smaller of their last bits),
// which double's 2^-53 rounding can neither reach nor cross: Q(double(y / s)) = Q(y / s), y's exact quotient
// rounded once, whatever the kernel. (An f32 division would not do: it can land on a midpoint y/s is 2^-30 from.)
// Declared here, defined in quant_epilogue.cpp (a generic translation unit): the ISA kernels call it without
// compiling an inline copy of it under their flags (ctest isa_objects_share_no_code).
#pragma once

#include <cstdint>

#include "lnorm/quant.hpp"

namespace lnorm::cpu {

// Row `row` of q and of the scales (the row's spec.scales_per_row(n) entries) from y (n f32 values); q and scales
// are the whole tensor's (a packed format's row starts at byte row·n/2: lnorm/quant.hpp store_code).
void quantize_row(const QuantSpec& spec, const float* y, std::int64_t n, std::uint8_t* q, void* scales, std::int64_t row);

// Q(y / s) for one element: y/s in double (above), a NaN quotient's code with y's sign (Inf / Inf in a group
// whose amax is Inf has no sign of its own). quantize_row's and the SIMD epilogue's tails.
std::uint8_t encode_quotient(QuantFormat f, float y, float s);

// spec.group_size(n) and spec.scales_per_row(n) for the ISA code, which must not compile its own copies of
// QuantSpec's inline members (clang's ASan build emitted scales_per_row as a weak symbol in avx2.cpp.o).
// row_bytes: q's bytes per row (n, or n/2 for a packed format).
void quant_groups(const QuantSpec& spec, std::int64_t n, std::int64_t& group, std::int64_t& per_row, std::int64_t& row_bytes);

// A packed format's codes (one a byte, n even) into q, two a byte, element 2i in the low nibble (lnorm/quant.hpp).
void pack_codes(const std::uint8_t* codes, std::int64_t n, std::uint8_t* q);

// One group's scale from its amax (the f32 max of |y|) and whether it holds a NaN: written to scales[at] (f32, or
// E8M0 for mx; nothing for tensor) and returned as s (NaN for a NaN group, whose codes are all encode(NaN)).
// quantize_row's and the SIMD epilogue's (simd_quant.hpp) one rule.
float group_scale(const QuantSpec& spec, float amax, bool nan, void* scales, std::int64_t at);

// Which of group_scale's rules spec takes, for the SIMD epilogue, which forms L groups' scales at once in lanes for
// these (simd_quant.hpp group_scales_simd) and calls group_scale for every other rule and for its rare lanes.
//   quotient    row or group:G with f32 scales: s = f32(amax / qmax)
//   pow2_floor  mx with the floor rule: s = 2^clamp(floor(log2 amax) − emax_elem, −127, 127), E8M0
//   nvfp4       c = E4M3(amax·G/6), s = f32(E4M3value(c) / G)
//   other       tensor, UE8M0 scales (rceil), mx's other rules
enum class ScaleRule : std::uint8_t { other, quotient, pow2_floor, nvfp4 };
ScaleRule scale_rule(const QuantSpec& spec);

}  // namespace lnorm::cpu
