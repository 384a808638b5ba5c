// Add & Norm's first output: h = x + residual, the exact sum rounded once to the residual's format
// (docs/DESIGN.md "Ops"). The norm then reads h as stored (RowReferencer of an add_* problem).
#pragma once

#include <cstdint>

#include "lnorm/format.hpp"
#include "lnorm/problem.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {

// x + r = hi + lo exactly (a two-sum in double), for values x and r of any of our formats; NaN hi when
// the sum is NaN (a NaN operand, or +Inf + −Inf). With f64 operands the double sum may overflow: then
// hi is ±Inf (the correctly rounded sum) and lo is 0.
struct ExactSum {
  double hi = 0, lo = 0;
};
ExactSum exact_sum(double x, double r);

// The exact sum rounded once to f (round to nearest, ties to even, overflow to ±Inf), as bits.
std::uint64_t round_sum_bits(const Format& f, double x, double r);

// One row: h_out (n elements of problem.residual_dtype) = x (problem.dtype) + residual
// (problem.residual_dtype), rounded once. elems (n entries, may be null) receives what the h metric
// measures against: y_hi + y_lo = the exact sum, scale = |exact sum| (so a correctly rounded h reads
// at most 0.5 ulp), NaN where the sum is NaN.
void add_row(const Problem& problem, const void* x, const void* residual, std::int64_t n, void* h_out,
             ElementReference* elems);

}  // namespace lnorm
