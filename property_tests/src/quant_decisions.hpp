// Cases dense in a quantizer's decisions: rows whose y* is known in closed form and sits on the points
// where a quantizer can go wrong without leaving q's budget, so that `verify --quick` decides them at every seed.
//
// The rows are ±1 (half of each sign, so LayerNorm's mean is exactly 0 and both norms' variance exactly 1) with
// gamma in the params dtype, no beta, no offset, and eps 2^-40 (BERT's 1e-12 order) or 0 (one case in four):
//   y* = ±gamma / sqrt(1 + eps)
// With eps 0 that is ±gamma exactly; with 2^-40 it is gamma·(1 − 2^-41), which every accurate f32 y rounds back to
// gamma: an exact tie in the y a kernel hands its quantizer, and just below it in y* (so that a kernel deciding from
// y* — the _cr kernels — and one deciding from its f32 y part ways there: either one's rule, broken, is seen).
//
// gamma is laid out per scale group (the row for row scaling), one kind of group each:
//   power-of-two scale  an element at qmax·2^k (s = 2^k exactly, the saturation boundary), the rest on the grid's
//                       midpoints and codes times s: exact ties
//   rounded scale       amax a random params value, s = f32(amax/qmax) (which a truncating or reciprocal-multiplying
//                       scale gets wrong by one rounding), the rest f32(midpoint·s): ties to within an f32 rounding
//   below a power of 2  amax the largest params value below 2^j (mx: floor(log2) and an exponent from a rounded
//                       amax part ways), the rest as above
//   zero / NaN group    (group and mx scaling) all ±0; one NaN
// Tensor scaling gets one scale for the case, a power of two or a random f32, midpoints and codes times it, and
// values past the saturation boundary.
#pragma once

#include <cstdint>

#include "lnorm/cases.hpp"
#include "lnorm/quant.hpp"

namespace lnorm::verify {

struct DecisionCase {
  Case c;          // 4 rows of 256 (every group size verify draws divides it, with more than one group)
  QuantSpec spec;  // the spec it is laid out for (tensor scaling: with the case's own scale)
};

// The decision case for `spec`, derived from `from` (its dtype, op, params and residual storage, misalignment) and
// its data seed; salt tells the specs of one case apart.
DecisionCase decision_case(const Case& from, const QuantSpec& spec, int salt);

}  // namespace lnorm::verify
