// The quantizer judged on the y it was handed (docs/verify.md "Quantized outputs: the two-part gate").
//
// A quantized output has two parts that can be wrong: the y a kernel computes, and the quantizer that turns that y
// into q and scales. measure_quantized (quantize.hpp) judges q against the exact y*, so its budget must include y's
// own error; inside that budget a quantizer's own mistakes hide (a tie broken away from zero is 0.5 quantum from
// y*/s, as the right answer is). Here the quantizer is judged alone: given the y it was handed, every scale and
// every code must be what lnorm/quant.hpp's rule makes of that y, bit for bit, with no budget:
//   row, group:G  s = f32(amax|y| / qmax) correctly rounded (one rounding of the exact quotient); 1 where that is 0
//                 (a zero group, or amax/qmax below f32's range); NaN for a group holding a NaN
//   mx            X = floor(log2 amax|y|) − emax_elem (or --mx-rule's: lnorm/quant.hpp mx_exponent) clamped to [−127, 127], −127 for a zero group, E8M0 255 for a
//                 group holding a NaN; an Inf amax reads as 2^128 (its f32 exponent field: the kernels' rule)
//   nvfp4         c = E4M3(amax|y|·G/6) per block of 16, rounded once (nearest even, saturating at 448), 0x7f for a
//                 block holding a NaN; s = f32(E4M3value(c)/G), +Inf where c is 0 (q ±0)
//   tensor        the given s
//   q             Q(y / s): the exact quotient rounded once, ties to even, saturating (lnorm/quant.hpp), the sign
//                 of zero kept (−0 for a negative y that rounds to zero, fp8); a NaN quotient (NaN y, a NaN
//                 group, ±Inf over an Inf scale) any NaN code (fp8), not gated (int8: it has no NaN)
// A zero group's scale may be any finite positive value (lnorm/quant.hpp: check has always accepted it; q is ±0
// whatever it is). Everything else is exact: the midpoints of the grid have at most 9 significant bits, so
// midpoint · s is exact in double and each decision is one exact comparison with y.
//
// The vllm recipe (lnorm/recipe.hpp) has its own rounding points: s = f32(amax / qmax) (the same), then
// q = Q(f32(y · f32(1 / s))), two f32 roundings before Q. ConsistencyRule::vllm applies that instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lnorm/quant.hpp"

namespace lnorm {

enum class ConsistencyRule : std::uint8_t { contract, vllm };

// One element (code) or group (scale) that differs from the rule's answer.
struct ConsistencyMismatch {
  bool scale = false;        // a scale (index: row·scales_per_row + group), else a code (index: row·cols + col)
  std::int64_t index = 0;
  double y = 0;              // code: the y handed in; scale: the group's amax|y|
  double got = 0;            // code: the decoded q; scale: the scale (mx: its exponent X, NaN for 255)
  double expected = 0;       //   and the rule's
  std::uint8_t got_code = 0, expected_code = 0;  // codes only
};

struct ConsistencySummary {
  std::int64_t codes = 0, codes_differ = 0, scales = 0, scales_differ = 0;
  std::vector<ConsistencyMismatch> first;  // the first kConsistencyExamples mismatches, in index order per block
  static constexpr std::size_t kExamples = 5;
  bool pass() const { return codes_differ == 0 && scales_differ == 0; }
  void merge(const ConsistencySummary& o);  // o after this in index order
};

// The rule applied to y (rows × cols f32 values: a kernel's f32 y, or its y in x's dtype widened exactly): q
// (rows·cols codes) and scales (rows·scales_per_row(cols): f32, E8M0 codes for mx; null for tensor).
void quantize_given_y(const QuantSpec& spec, ConsistencyRule rule, const float* y, std::int64_t rows, std::int64_t cols,
                      std::uint8_t* q, void* scales);

// A candidate's q and scales against quantize_given_y of the same y; indices offset by first_row.
ConsistencySummary measure_consistency(const QuantSpec& spec, ConsistencyRule rule, const float* y, std::int64_t rows,
                                       std::int64_t cols, const std::uint8_t* q, const void* scales,
                                       std::int64_t first_row = 0);

// "codes 3 of 4096 differ from Q(y/s) of the y handed in (first: q[17] = 320 for y 304, rule 288), scales 0 of 32"
std::string describe(const ConsistencySummary& c, const QuantSpec& spec);

}  // namespace lnorm
