// One cell of a report: one implementation's outputs on one sweep point, against the exact answer.
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bounds.hpp"
#include "lnorm/harness.hpp"

namespace lnorm::report {

// Scaled-ulp histogram bins: exactly 0, then (0, 1/2], (1/2, 1], (1, 2], ... (2^19, 2^20], above 2^20;
// non-finite mismatches (lnorm/metrics.hpp) are counted apart. Fixed edges, so histograms from different machines add up.
std::vector<double> histogram_edges();

// Median and maximum of the finite row kappas (NaN when there are none).
struct KappaStats {
  double median = 0, max = 0;
};

struct Measurement {
  std::int64_t elements = 0, correctly_rounded = 0, nonfinite_mismatches = 0;
  std::vector<float> errors;          // scaled ulp error of every element without a non-finite mismatch
  std::vector<std::int64_t> histogram;  // histogram_edges().size() + 1 bins
  std::optional<double> mean_max_ulp, rstd_max_ulp;  // absent when the implementation gave none
  std::int64_t stat_nonfinite_mismatches = 0;
  void merge(const Measurement& other);
  nlohmann::json summary() const;  // max, p99.9, correctly-rounded fraction, non-finite mismatches, stats
};

// y_bits: rows*cols bit patterns of the case's dtype; mean/rstd: rows bit patterns of the stats dtype,
// or empty when the implementation does not produce them.
Measurement measure(const verify::Case& input, const verify::Exact& exact, const std::vector<std::uint64_t>& y_bits,
                    const std::vector<std::uint64_t>& mean_bits, const std::vector<std::uint64_t>& rstd_bits);

// The backward (lnorm report --dir bwd): dx as a Measurement (its histogram and errors, the plots' series), and
// dgamma's and dbeta's worst scaled ulp, correctly rounded count and non-finite mismatches beside it.
struct GradientStats {
  std::int64_t elements = 0, correctly_rounded = 0, nonfinite_mismatches = 0;
  double max_finite_ulp = 0;
  void merge(const GradientStats& o);
  nlohmann::json summary(const char* prefix) const;  // prefix_max_ulp (null when non-finite), ..._correctly_rounded, ...
};
struct BackwardMeasurement {
  Measurement dx;
  GradientStats dgamma, dbeta;
  void merge(const BackwardMeasurement& o);
  nlohmann::json summary() const;  // dx's as Measurement::summary (max_ulp is dx's), then dgamma_*, dbeta_*
};
BackwardMeasurement measure_backward(const verify::Case& input, const verify::ExactBackward& exact, const verify::BackwardOutputs& got);
// Median and maximum of the finite row kappas of the backward's exact answer.
KappaStats kappa_stats(const verify::ExactBackward& exact);

// The algorithm's worst-case bound over the case's finite rows; nullopt when no row is finite or a
// row leaves the range the bound assumes (bound_applies).
std::optional<double> bound_for(Algorithm a, const verify::Case& input, const verify::Exact& exact);

// Median and maximum of the finite row kappas (NaN when there are none).
KappaStats kappa_stats(const verify::Exact& exact);

// The p-quantile (0..1) of the values, nearest rank; 0 for none. Reorders `values`.
double quantile(std::vector<float>& values, double p);

}  // namespace lnorm::report
