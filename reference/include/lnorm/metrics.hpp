// Error metrics of DESIGN.md "Measuring error": scaled ulp error of y against the exact answer, the
// correctly rounded fraction, NaN mismatches, and plain ulp distance of mean and rstd.
#pragma once

#include <cstdint>
#include <limits>

#include "lnorm/format.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {

// Allowed scaled-ulp error per element: a + b·kappa (kappa of the element's row).
struct Budget {
  double a = 8;
  double b = 1;
  double allowed(double kappa) const { return a + b * kappa; }
};

// Scaled ulp error of one output value `got` (a value of format f) against the exact element.
// Returns +Inf for a NaN mismatch (NaN or Inf where the rounded exact answer is finite, or a
// non-NaN where the exact answer is NaN), 0 for NaN where the exact answer is NaN.
double scaled_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                        const ElementReference& exact);

// Bit-identical to the exact answer rounded once (+0 and -0 are the same value; NaN matches NaN).
bool correctly_rounded(const Format& f, std::uint64_t got_bits, std::uint64_t exact_bits);

// |ordinal(got) − ordinal(exact)|: plain ulp distance of a statistic. NaN/NaN gives 0; a NaN on one
// side only gives +Inf.
double ulp_distance(const Format& f, double got, double exact);

struct ErrorSummary {
  std::int64_t elements = 0;
  std::int64_t correctly_rounded = 0;
  std::int64_t nan_mismatches = 0;
  std::int64_t over_budget = 0;  // elements (NaN mismatches included) over a + b·kappa
  double max_ulp = 0;            // max scaled ulp error over elements without NaN mismatch
  std::int64_t max_ulp_index = -1;
  double max_ulp_kappa = 0, max_ulp_got = 0, max_ulp_exact = 0;
  std::int64_t first_nan_mismatch_index = -1;
  double worst_excess = -std::numeric_limits<double>::infinity();  // max of e − allowed
  std::int64_t worst_excess_index = -1;

  double correctly_rounded_fraction() const {
    return elements ? static_cast<double>(correctly_rounded) / static_cast<double>(elements) : 1.0;
  }
  bool within_budget() const { return over_budget == 0; }
  void add(const Format& f, std::int64_t index, double got, std::uint64_t got_bits,
           std::uint64_t exact_bits, const ElementReference& exact, double kappa, const Budget& budget);
  void merge(const ErrorSummary& other);  // other's indices must already be global
};

// The same for a per-row statistic (mean or rstd): plain ulp distance.
struct StatSummary {
  std::int64_t rows = 0;
  std::int64_t nan_mismatches = 0;
  double max_ulp = 0;
  std::int64_t max_ulp_index = -1;
  double max_ulp_got = 0, max_ulp_exact = 0;
  void add(const Format& f, std::int64_t row, double got, double exact);
  void merge(const StatSummary& other);
};

}  // namespace lnorm
