// Measuring a candidate output against the exact answer over a block of rows: what `lnorm check`
// and the Python module's lnorm.check share (DESIGN.md "Measuring error").
#pragma once

#include <cstdint>

#include "lnorm/metrics.hpp"
#include "lnorm/problem.hpp"

namespace lnorm {

struct CheckSummary {
  ErrorSummary y;
  StatSummary mean, rstd;  // empty (rows == 0) when that statistic was not given
  void merge(const CheckSummary& other);  // other's indices must already be global
};

// Rows [0, rows) of x and of the candidate y (rows*problem.cols elements each, problem.dtype), and
// of the candidate mean/rstd (rows elements of the stats dtype, or null: not measured), measured
// against the exact answer. Element and row indices in the summary are offset by first_row, so blocks
// of one large tensor can be measured in turn and merged. gamma/beta: problem.cols elements or null.
// Rows are split over `threads` contiguous blocks merged in row order: the summary does not depend on
// the thread count.
CheckSummary measure_rows(const Problem& problem, const void* x, const void* gamma, const void* beta, const void* y,
                          const void* mean, const void* rstd, std::int64_t rows, std::int64_t first_row,
                          const Budget& budget, int threads);

}  // namespace lnorm
