// The backward mutants' defects (backward_mutants.cpp has the list and the control they start from).
#pragma once

#include "lnorm/problem.hpp"

namespace lnorm::mutants {

enum class BackwardDefect {
  none,  // the control
  drops_mean_g,
  drops_xhat_term,
  dgamma_wrong_axis,
  var_unbiased,
  eps_outside_sqrt,
  dbeta_wrong_rows,
  drops_tail_block,
  saved_wrong_row,
  dbeta_zero,
  param_sums_in_x_dtype,
};

void run_backward_mutant(BackwardDefect defect, const Problem& p, const Tensors& t);

}  // namespace lnorm::mutants
