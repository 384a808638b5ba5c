// Measuring a candidate output against the exact answer over a block of rows: what `lnorm check`
// and the Python module's lnorm.check share (DESIGN.md "Measuring error").
#pragma once

#include <cstdint>

#include "lnorm/add.hpp"
#include "lnorm/backward.hpp"
#include "lnorm/metrics.hpp"
#include "lnorm/problem.hpp"
#include "lnorm/recipe.hpp"

namespace lnorm {

struct CheckSummary {
  ErrorSummary y;
  ErrorSummary h = storage_summary();  // Add & Norm's sum, when a candidate h was given (elements == 0 otherwise)
  StatSummary mean, rstd;  // empty (rows == 0) when that statistic was not given
  ErrorSummary recipe;     // y against the recipe's answer, when a recipe was given (elements == 0 otherwise)
  // LayerNorm's rows that are constant in storage (x, or h for Add & Norm; finite): their exact answer is β
  // whatever their kappa, and the budget's kappa term (a model of the mean's rounding error) would let any value
  // pass there when eps dominates. Their y measured again at kappa 0 (the `budget` argument's a alone), so a
  // caller can name them and gate them (`check --strict-constant-rows`). Empty for RMSNorm (no mean).
  ErrorSummary constant_rows;
  std::int64_t constant_row_count = 0;
  std::int64_t recipe_inexact_sums = 0;  // RecipeReferencer::run's count (unrounded_h)
  void merge(const CheckSummary& other);  // other's indices must already be global
};

// Rows [0, rows) of x and of the candidate y (rows*problem.cols elements each, problem.dtype; null: not measured, as
// `check --quant` gates q and measures h and the statistics beside it), and
// of the candidate mean/rstd (rows elements of the stats dtype, or null: not measured), measured
// against the exact answer. Element and row indices in the summary are offset by first_row, so blocks
// of one large tensor can be measured in turn and merged. gamma/beta: problem.cols elements or null.
// Rows are split over `threads` contiguous blocks merged in row order: the summary does not depend on
// the thread count.
// Add & Norm: the residual (input) and the candidate h (null: not measured), rows*cols elements of
// problem.residual_dtype each. y is measured against the norm of the exact h (x + residual rounded
// once), whatever the candidate's h; h against the exact sum, in ulps of h's format at the exact sum
// (a correctly rounded h reads at most 0.5), gated by h_budget (b is unused: no kappa for a sum).
struct AddInputs {
  const void* residual = nullptr;
  const void* h = nullptr;
  Budget h_budget{0.5, 0};
};

// A recipe (recipe.hpp; null: none): y is also measured against the recipe's answer, gated by budget
// (b is unused: the recipe's kappa is the op's, and a kernel claiming a recipe rounds like it). problem
// must then come from recipe_problem (gemma's offset): y is measured against that problem's exact answer.
struct RecipeInputs {
  const Recipe* recipe = nullptr;
  Budget budget{0.5, 0};
};

CheckSummary measure_rows(const Problem& problem, const void* x, const void* gamma, const void* beta, const void* y,
                          const void* mean, const void* rstd, std::int64_t rows, std::int64_t first_row,
                          const Budget& budget, int threads, const AddInputs& add = {}, const RecipeInputs& recipe = {});

// One candidate gradient against the exact one, as `check --dir bwd` and lnorm.check_backward gate it (DESIGN.md
// "Backward"): x and dy of problem.dtype (rows*cols), `got` and `exact` of the gradient's dtype (dx: problem.dtype,
// rows*cols; dgamma, dbeta: problem.param_dtype, cols), ref from reference_backward. Each element's budget is
// a + b·kappa at dx's row kappa or dgamma's column's largest (none for dbeta). The bias gate's units are dx's rows
// (a row shares its statistics' errors) and the parameter gradients' columns (each its own sum), one per distinct
// input: x's and dy's row, or column (dbeta: dy's column); identical rows or columns (a constant dy) count once.
enum class Gradient { dx, dgamma, dbeta };
ErrorSummary measure_gradient(Gradient g, const Problem& problem, const void* x, const void* dy, const void* got,
                              const void* exact, const BackwardReference& ref, const Budget& budget);

}  // namespace lnorm
