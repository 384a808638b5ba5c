#include "lnorm/metrics.hpp"

#include <cmath>
#include <algorithm>
#include <cstdlib>

namespace lnorm {

bool correctly_rounded(const Format& f, std::uint64_t got_bits, std::uint64_t exact_bits) {
  const bool gn = bits_is_nan(f, got_bits), en = bits_is_nan(f, exact_bits);
  if (gn || en) return gn && en;
  return ordinal_of_bits(f, got_bits) == ordinal_of_bits(f, exact_bits);
}

double scaled_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                        const ElementReference& exact) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (std::isnan(exact.y_hi)) return std::isnan(got) ? 0.0 : kInf;
  if (std::isnan(got)) return kInf;
  if (std::isinf(got)) return got_bits == exact_bits ? 0.0 : kInf;  // Inf only where y* rounds to Inf
  // |got − (y_hi + y_lo)| without cancellation: (got − y_hi) is exact when they are close (Sterbenz)
  // and accurate to 2^-53 relative otherwise, far below what a reported error shows.
  const double diff = (got - exact.y_hi) - exact.y_lo;
  return std::fabs(diff) / ulp_at(f, exact.scale);
}

double ulp_distance(const Format& f, double got, double exact) {
  if (std::isnan(got) || std::isnan(exact)) return std::isnan(got) && std::isnan(exact) ? 0.0 : std::numeric_limits<double>::infinity();
  const auto a = ordinal_of_bits(f, double_to_bits(f, got));
  const auto b = ordinal_of_bits(f, double_to_bits(f, exact));
  return static_cast<double>(a > b ? a - b : b - a);
}

double stat_error(Stat s, const Format& f, double got, const RowReference& exact) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double want = s == Stat::mean ? exact.mean : exact.rstd;
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : kInf;
  if (std::isnan(got)) return kInf;
  if (std::isinf(got)) return got == want ? 0.0 : kInf;  // Inf only where the exact value rounds to it
  if (s == Stat::rstd) return ulp_distance(f, got, want);  // rstd* = +Inf: the distance to Inf's ordinal
  // mean* is finite here (|mean| <= max |x|). sqrt(var + eps) = 1/rstd*, 0 where rstd* overflowed.
  const double size = std::max(std::fabs(want), std::isinf(exact.rstd) ? 0.0 : 1.0 / exact.rstd);
  return std::fabs(got - want) / ulp_at(f, size);
}

void ErrorSummary::add(const Format& f, std::int64_t index, double got, std::uint64_t got_bits,
                       std::uint64_t exact_bits, const ElementReference& exact, double kappa,
                       const Budget& budget) {
  ++elements;
  if (lnorm::correctly_rounded(f, got_bits, exact_bits)) ++correctly_rounded;
  const double e = scaled_ulp_error(f, got, got_bits, exact_bits, exact);
  const double allowed = budget.allowed(std::isnan(kappa) ? 0.0 : kappa);
  const bool nonfinite = std::isinf(e);
  if (nonfinite) {
    ++nonfinite_mismatches;
    if (first_nonfinite_mismatch_index < 0) first_nonfinite_mismatch_index = index;
  } else {
    max_finite_ulp = std::max(max_finite_ulp, e);
  }
  // Strictly greater: the first element of a run of equal errors (and the first non-finite one) is kept.
  if (e > max_ulp || max_ulp_index < 0) {
    max_ulp = e;
    max_ulp_index = index;
    max_ulp_kappa = kappa;
    max_ulp_got = got;
    max_ulp_exact = exact.y_hi + exact.y_lo;
  }
  if (e > allowed) ++over_budget;
  if (e - allowed > worst_excess) {
    worst_excess = e - allowed;
    worst_excess_index = index;
  }
}

void ErrorSummary::merge(const ErrorSummary& o) {
  elements += o.elements;
  correctly_rounded += o.correctly_rounded;
  nonfinite_mismatches += o.nonfinite_mismatches;
  over_budget += o.over_budget;
  max_finite_ulp = std::max(max_finite_ulp, o.max_finite_ulp);
  if (o.max_ulp_index >= 0 && (o.max_ulp > max_ulp || max_ulp_index < 0)) {
    max_ulp = o.max_ulp;
    max_ulp_index = o.max_ulp_index;
    max_ulp_kappa = o.max_ulp_kappa;
    max_ulp_got = o.max_ulp_got;
    max_ulp_exact = o.max_ulp_exact;
  }
  if (first_nonfinite_mismatch_index < 0) first_nonfinite_mismatch_index = o.first_nonfinite_mismatch_index;
  if (o.worst_excess > worst_excess) {
    worst_excess = o.worst_excess;
    worst_excess_index = o.worst_excess_index;
  }
}

void StatSummary::add(Stat s, const Format& f, std::int64_t row, double got, const RowReference& exact) {
  ++rows;
  const double d = stat_error(s, f, got, exact);
  if (std::isinf(d)) ++nonfinite_mismatches;
  if (d > max_ulp || max_ulp_index < 0) {
    max_ulp = d;
    max_ulp_index = row;
    max_ulp_got = got;
    max_ulp_exact = s == Stat::mean ? exact.mean : exact.rstd;
  }
}

void StatSummary::merge(const StatSummary& o) {
  rows += o.rows;
  nonfinite_mismatches += o.nonfinite_mismatches;
  if (o.max_ulp_index >= 0 && (o.max_ulp > max_ulp || max_ulp_index < 0)) {
    max_ulp = o.max_ulp;
    max_ulp_index = o.max_ulp_index;
    max_ulp_got = o.max_ulp_got;
    max_ulp_exact = o.max_ulp_exact;
  }
}

}  // namespace lnorm
