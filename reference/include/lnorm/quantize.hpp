// The exact answer of a quantized output and its metric (docs/DESIGN.md "Quantized outputs", "Measuring error").
//
// Exact answer: the op's exact y*, divided exactly by the scale, rounded once by Q (lnorm/quant.hpp): ties to
// even, saturating. Each rounding is decided by comparing y* with a midpoint of the grid times s, exactly
// (RowReferencer::compare), never from a rounded y. Dynamic scales come from y*'s amax, exactly: row and group
// scales are f32(amax/qmax) = max_i f32(|y*_i|/qmax) (rounding is monotonic, so no amax is ever formed); mx
// exponents are max_i floor(log2 |y*_i|) − emax_elem.
//
// Metric: a candidate's q is measured against y*/s with the candidate's own scales s (so q is judged as a
// quantization of y* by the scale it chose), in quanta of the format at y*/s clamped to the format's range (a
// saturated answer is exact: ±max reads 0). Correctly rounded: q's code is the exact one (+0 and −0 alike). A NaN
// (or E5M2 Inf) code for a finite y* is a non-finite mismatch; so is a non-NaN fp8 code for a NaN y*. Dynamic
// scales are measured against the exact ones: row/group in f32 ulps, mx in E8M0 steps; a group whose y* are all
// zero accepts any finite positive scale.
//
// Default budgets (QuantBudget at −1), per element and per group, what computing from y rounded to x's dtype
// first can do — the rounding point production kernels use (vLLM: y in x's dtype, times f32(1/S), one rounding):
//   q:      |round_x(y*)/s − y*/s| + half a quantum at round_x(y*)/s, in quanta at y*/s, + 2^-14 (0.5 + the
//           distance where both lie in one binade)
//           (2^-14 covers f32(1/S) and the product's rounding: 2 f32 roundings of a value < 2^8 quanta);
//   scales: row/group: 2 f32 ulps + the distance from s* to f32(amax_x/qmax), amax_x the amax of round_x(y*);
//           mx: |X* − X_x| steps (0 unless rounding to x's dtype carried amax up to a power of two).
// So the exact q passes at ≤ 0.5 and a kernel rounding y to x's dtype first passes; truncation (up to 1 quantum),
// one quantum off, NaN for saturation, and scales 2^-8 off do not. --max-q-ulp / --max-scale-ulp make them flat.
#pragma once

#include <cstdint>
#include <limits>

#include "lnorm/problem.hpp"
#include "lnorm/quant.hpp"

namespace lnorm {

// The exact q (rows*cols codes) and scales (rows*spec.scales_per_row(cols): f32, or E8M0 codes for mx; null for
// tensor) of rows [0, rows) of x (problem.dtype; Add & Norm: with residual, the norm of the exact h). y_out (may be
// null): y* rounded once to x's dtype, as `reference` writes it. Rows split over `threads`.
void quantize_reference(const Problem& problem, const QuantSpec& spec, const void* x, const void* residual,
                        const void* gamma, const void* beta, std::int64_t rows, int threads, std::uint8_t* q,
                        void* scales, void* y_out = nullptr);

// nvfp4's global scale where none was given (lnorm/quant.hpp): the tensor's own, nvfp4_global_scale(A). A is the
// largest |y*| of rows [0, rows) rounded to f32 (y*'s double value, rounded to f32: a convention that fixes G, whose
// value is an input of the gate, not gated); NaN elements are skipped. tensor_amax_f32 gives A for one block of rows
// (chunked callers take the max); resolve_global_scale returns spec with G set where it was 0 (any other spec as is).
float tensor_amax_f32(const Problem& problem, const void* x, const void* residual, const void* gamma, const void* beta,
                      std::int64_t rows, int threads);
QuantSpec resolve_global_scale(const Problem& problem, QuantSpec spec, const void* x, const void* residual, const void* gamma,
                               const void* beta, std::int64_t rows, int threads);
// Whether a spec still needs resolve_global_scale before a kernel runs it or the reference answers it.
inline bool needs_global_scale(const QuantSpec& spec) { return spec.scaling_info().global_scale && spec.global_scale == 0; }

struct QuantBudget {
  double max_q_ulp = -1;      // < 0: the per-element default above
  double max_scale_ulp = -1;  // < 0: the per-group default above
  // A kernel's own y error, added to the default q budget (verify: the kernel's f32 accuracy budget, since the
  // CPU kernels quantize their f32 y): (y_a + y_b·kappa) scaled f32 ulps of the element's metric scale
  // (reference.hpp output_scale), moved into quanta at y*/s. 0 for `check` (a framework's q is judged as a
  // quantization of y*, with y rounded to x's dtype as the only allowance).
  double y_a = 0, y_b = 0;
};

struct QuantSummary {
  // q
  std::int64_t elements = 0, correctly_rounded = 0, nonfinite_mismatches = 0, over_budget = 0;
  std::int64_t saturated = 0;  // elements where saturation decided q: y*/s at or past the midpoint beyond ±max
  double max_ulp = 0;          // quanta; +Inf when there is a non-finite mismatch
  std::int64_t max_ulp_index = -1;
  double max_ulp_got = 0, max_ulp_target = 0;  // decoded q, and y*/s (clamped to the format's range) there
  double max_finite_ulp = 0;
  double worst_excess = -std::numeric_limits<double>::infinity();  // max of error − allowed
  std::int64_t worst_excess_index = -1;
  double worst_excess_allowed = 0;
  // scales (dynamic scaling only)
  std::int64_t scales = 0, scales_over_budget = 0, zero_groups = 0, scale_nonfinite_mismatches = 0;
  double scale_max_ulp = 0;  // f32 ulps (row, group) or E8M0 steps (mx); +Inf for a non-finite mismatch
  std::int64_t scale_max_index = -1;
  double scale_max_got = 0, scale_max_exact = 0;

  double correctly_rounded_fraction() const {
    return elements ? static_cast<double>(correctly_rounded) / static_cast<double>(elements) : 1.0;
  }
  bool q_pass() const { return over_budget == 0; }
  bool scales_pass() const { return scales_over_budget == 0; }
  void merge(const QuantSummary& other);  // other's indices must already be global
};

// The candidate's q (rows*cols codes) and scales (as quantize_reference writes them; null for tensor) measured
// against the exact answer of rows [0, rows); indices offset by first_row (blocks of one tensor merge).
QuantSummary measure_quantized(const Problem& problem, const QuantSpec& spec, const void* x, const void* residual,
                               const void* gamma, const void* beta, const std::uint8_t* q, const void* scales,
                               std::int64_t rows, std::int64_t first_row, const QuantBudget& budget, int threads);

// The vllm recipe (lnorm/recipe.hpp) for a quantized output: from y (rows×cols values already at the recipe's
// y, i.e. in x's dtype, as doubles), the recipe's scales s_r and its pre-rounding values t = f32(y · f32(1/s_r));
// a candidate's q is measured in quanta of the format at t (clamped to its range, as measure_quantized), so the
// recipe's own q reads at most 0.5, and its scales against s_r (f32 ulps; mx: E8M0 steps).
struct QuantRecipeSummary {
  std::int64_t elements = 0, matching = 0, nonfinite_mismatches = 0;  // matching: q is the recipe's code
  double max_quanta = 0;  // +Inf with a non-finite mismatch
  std::int64_t max_index = -1;
  double max_got = 0, max_target = 0;
  std::int64_t scales = 0, scales_differ = 0;
  double scale_max_ulp = 0;
  std::int64_t scale_max_index = -1;
  void merge(const QuantRecipeSummary& o);
  bool pass(double max_quanta_budget) const {
    return nonfinite_mismatches == 0 && max_quanta <= max_quanta_budget && scales_differ == 0;
  }
  double matching_fraction() const { return elements ? static_cast<double>(matching) / static_cast<double>(elements) : 1.0; }
};
QuantRecipeSummary measure_quantized_recipe(const QuantSpec& spec, const double* y, std::int64_t rows, std::int64_t cols,
                                            const std::uint8_t* q, const void* scales, std::int64_t first_row);
struct Recipe;
// The same from the problem's inputs (as measure_quantized takes them; problem: the plain op, from recipe_problem):
// the recipe's y row by row (lnorm/recipe.hpp RecipeReferencer), then the measurement above.
QuantRecipeSummary measure_quantized_recipe(const Problem& problem, const QuantSpec& spec, const Recipe& recipe,
                                            const void* x, const void* residual, const void* gamma, const void* beta,
                                            const std::uint8_t* q, const void* scales, std::int64_t rows, std::int64_t first_row);

}  // namespace lnorm
