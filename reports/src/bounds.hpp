// Worst-case error bounds of the LayerNorm algorithms, in the scaled ulps of DESIGN.md "Measuring
// error", printed beside each measurement so a reader sees how far below its algorithm's guarantee a
// kernel runs — and which algorithm has no guarantee at all on offset rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "lnorm/problem.hpp"

namespace lnorm::report {

enum class Algorithm {
  two_pass,            // mean by a sequential sum, then Σ(x − mean)²        (naive)
  one_pass,            // Σx and Σx² in one pass, var = E[x²] − E[x]²          (onepass)
  shifted_welford,     // Welford blocks of 32 on x − x[0], pairwise merges    (welford)
  corrected_two_pass,  // shifted blocked sums, two-float mean, Σ(x − m) fix   (avx2)
  correctly_rounded,   // f64 statistics and output math, rounded once        (avx2_cr)
};
std::string_view name(Algorithm a);
std::string_view citation(Algorithm a);

// The algorithm a built-in kernel implements; nullopt for kernels whose algorithm lnorm does not
// know (plugins, kernels added without an entry here): their reports show no bound.
std::optional<Algorithm> algorithm_of(std::string_view kernel);

// First-order worst-case bound on the scaled ulp error of y for one row: width n, condition
// kappa = |mean|/sqrt(var + eps), storage dtype d. +Inf when the algorithm guarantees nothing
// (the one-pass variance can lose every digit).
double error_bound(Algorithm a, std::int64_t n, double kappa, DType d);

// The bounds assume no overflow or underflow in the working precision. welford, avx2 and avx2_cr
// rescale rows that would leave the range (or work in f64), so theirs always apply; the plain
// two-pass and one-pass sums do not, and have no bound on a row whose n·max|x|² overflows or whose
// var + eps is so small that its squares lose precision in the subnormal range.
bool bound_applies(Algorithm a, std::int64_t n, double max_abs_x, double var_plus_eps, DType d);

}  // namespace lnorm::report
