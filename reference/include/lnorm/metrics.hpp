// The error metric of every output, in one place (docs/DESIGN.md "Measuring error"): `check`, `verify`,
// `report`, the Python module and the C++ library all measure through these functions.
//   y:    scaled ulp error against the exact element (scaled_ulp_error)
//   mean: |mean − mean*| in ulps of max(|mean*|, sqrt(var + eps)) (stat_error, Stat::mean)
//   rstd: plain ulp distance to rstd* rounded once (stat_error, Stat::rstd)
// A non-finite mismatch — NaN or ±Inf where the exact answer is finite, a finite value where it is NaN,
// ±Inf where the exact answer does not round to that infinity — has error +Inf: it is never "0 ulp".
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
  // b = 0 means no kappa term even where kappa overflows double (0·Inf would be NaN, which no error exceeds).
  double allowed(double kappa) const { return b == 0 ? a : a + b * kappa; }
};

// Scaled ulp error of one output value `got` (a value of format f) against the exact element.
// +Inf for a non-finite mismatch; 0 for NaN where the exact answer is NaN.
double scaled_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                        const ElementReference& exact);

// Bit-identical to the exact answer rounded once (+0 and -0 are the same value; NaN matches NaN).
bool correctly_rounded(const Format& f, std::uint64_t got_bits, std::uint64_t exact_bits);

// |ordinal(got) − ordinal(exact)|: plain ulp distance between two values of f. NaN/NaN gives 0; a NaN on
// one side only gives +Inf. Infinities are ordinals like any other (FLT_MAX and +Inf are 1 apart): use
// stat_error to measure a statistic, which names an infinity where none belongs a mismatch.
double ulp_distance(const Format& f, double got, double exact);

enum class Stat { mean, rstd };

// Error of a per-row statistic `got` (a value of the stats format f) against its row's exact value:
//   mean: |got − mean*| / ulp(max(|mean*|, sqrt(var + eps))): an error δ in the mean moves every z by
//         δ/sqrt(var + eps), so that is the size it is measured against (a plain ulp distance would read
//         a mean of 4.66e-10 against an exact 0 as 8e8 ulp, and pass only an exact 0);
//   rstd: ulp_distance(got, rstd*) (rstd* is never near 0: its plain ulp is its relative error).
// +Inf for a non-finite mismatch (as above; the exact mean and rstd of a row holding NaN/Inf are NaN,
// and rstd* is +Inf where var + eps == 0); 0 for NaN where the exact value is NaN.
double stat_error(Stat s, const Format& f, double got, const RowReference& exact);

struct ErrorSummary {
  std::int64_t elements = 0;
  std::int64_t correctly_rounded = 0;
  std::int64_t nonfinite_mismatches = 0;
  std::int64_t over_budget = 0;  // elements (non-finite mismatches included) over a + b·kappa
  // The worst scaled ulp error: +Inf when there is any non-finite mismatch (then max_ulp_index is the
  // first one's). max_finite_ulp is the worst over the elements without one.
  double max_ulp = 0;
  std::int64_t max_ulp_index = -1;
  double max_ulp_kappa = 0, max_ulp_got = 0, max_ulp_exact = 0;
  double max_finite_ulp = 0;
  std::int64_t first_nonfinite_mismatch_index = -1;
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

// The same for a per-row statistic (mean or rstd), measured by stat_error.
struct StatSummary {
  std::int64_t rows = 0;
  std::int64_t nonfinite_mismatches = 0;
  double max_ulp = 0;  // +Inf when there is a non-finite mismatch (max_ulp_index: the first one)
  std::int64_t max_ulp_index = -1;
  double max_ulp_got = 0, max_ulp_exact = 0;
  void add(Stat s, const Format& f, std::int64_t row, double got, const RowReference& exact);
  void merge(const StatSummary& other);
  // No non-finite mismatch, and max_ulp ≤ limit when limit ≥ 0 (limit < 0: reported, not gated).
  bool passes(double limit) const { return nonfinite_mismatches == 0 && (limit < 0 || max_ulp <= limit); }
};

}  // namespace lnorm
