#include "lnorm/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "special_values.hpp"

namespace lnorm {

bool correctly_rounded(const Format& f, std::uint64_t got_bits, std::uint64_t exact_bits) {
  const bool gn = bits_is_nan(f, got_bits), en = bits_is_nan(f, exact_bits);
  if (gn || en) return gn && en;
  return ordinal_of_bits(f, got_bits) == ordinal_of_bits(f, exact_bits);
}

namespace {

using detail::kInf;

// The value of the neighbour of ordinal k one step in direction dir (±1) of a narrow format; past the largest
// finite value the ordinal order continues to 2^(emax+1) (where Inf stands), so the interval of the largest
// value ends at the overflow threshold, as rounding has it.
double neighbour(const Format& f, std::int64_t k, int dir) {
  const std::int64_t next = k + dir;
  if (next >= f.inf_ordinal()) return std::ldexp(1.0, f.emax + 1);
  if (next <= -f.inf_ordinal()) return -std::ldexp(1.0, f.emax + 1);
  return bits_to_double(f, bits_of_ordinal(f, next));
}

}  // namespace

double signed_scaled_error(const Format& f, double got, std::uint64_t got_bits, const ElementReference& exact) {
  if (!std::isfinite(got) || !std::isfinite(exact.y_hi)) return std::numeric_limits<double>::quiet_NaN();
  const Format c = compute_format(f);
  // (p − y_hi) − y_lo without cancellation: p − y_hi is exact when they are close (Sterbenz) and accurate to
  // 2^-53 relative otherwise, far below what a reported error shows.
  auto from_exact = [&](double p) { return (p - exact.y_hi) - exact.y_lo; };
  double d = 0;
  if (f.dtype == c.dtype) {
    d = from_exact(got);
  } else {
    // The interval of reals that round to got: between the midpoints to its neighbours (exact in double: a
    // 16-bit value's neighbours and their means have at most 12 significant bits). Its ends belong to it when
    // got is even (ties to even), and a distance to an end is the same either way, so the closed interval.
    const std::int64_t k = ordinal_of_bits(f, got_bits);
    const double lo = (got + neighbour(f, k, -1)) / 2, hi = (got + neighbour(f, k, +1)) / 2;
    const double below = from_exact(lo), above = from_exact(hi);  // lo − y*, hi − y*
    d = below > 0 ? below : above < 0 ? above : 0.0;
  }
  return d / ulp_at(c, exact.scale);
}

double scaled_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                        const ElementReference& exact) {
  if (std::isnan(exact.y_hi)) return std::isnan(got) ? 0.0 : kInf;
  if (std::isnan(got)) return kInf;
  if (std::isinf(got)) return got_bits == exact_bits ? 0.0 : kInf;  // Inf only where y* rounds to Inf
  if (std::isinf(exact.y_hi)) return kInf;
  return std::fabs(signed_scaled_error(f, got, got_bits, exact));
}

double storage_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                         const ElementReference& exact) {
  if (std::isnan(exact.y_hi)) return std::isnan(got) ? 0.0 : kInf;
  if (std::isnan(got)) return kInf;
  if (std::isinf(got)) return got_bits == exact_bits ? 0.0 : kInf;
  return std::fabs((got - exact.y_hi) - exact.y_lo) / ulp_at(f, exact.scale);
}

double scaled_error_to(const Format& f, double got, double target, double scale) {
  if (!std::isfinite(got) || !std::isfinite(target)) return got == target || (std::isnan(got) && std::isnan(target)) ? 0.0 : kInf;
  return std::fabs(signed_scaled_error(f, got, double_to_bits(f, got), ElementReference{target, 0, target, scale}));
}

double allowed_ulps(const Format& f, const Budget& budget, const ElementReference& exact, double kappa) {
  const double k = std::isnan(kappa) ? 0.0 : kappa;
  if (budget.b == 0 || k == 0) return budget.a;
  if (!(exact.kappa_scale > exact.scale)) return budget.a + budget.b * k;
  const Format c = compute_format(f);
  return budget.a + budget.b * k * (ulp_at(c, exact.kappa_scale) / ulp_at(c, exact.scale));
}

double allowed_distance(const Format& f, const ElementReference& exact, double ulps) {
  const Format c = compute_format(f);
  const double computed = ulps * ulp_at(c, exact.scale);
  if (f.dtype == c.dtype) return computed;
  return computed + 0.5 * ulp_at(f, std::fabs(exact.y_hi) + computed);
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

namespace {

// The bias sums' fixed point (ErrorSummary): 2^-20 scaled ulp, each term clamped to ±2^40 (a term that large is
// an element far over any budget; the mean it reads saturates but still fails).
constexpr double kFixedQuantum = 0x1p-20, kFixedClamp = 0x1p40;
ErrorSummary::Fixed to_fixed(double v) {
  return static_cast<ErrorSummary::Fixed>(std::llround(std::clamp(v, -kFixedClamp, kFixedClamp) / kFixedQuantum));
}
double from_fixed(ErrorSummary::Fixed v, std::int64_t count) {
  return count ? static_cast<double>(static_cast<long double>(v) * kFixedQuantum / static_cast<long double>(count)) : 0.0;
}

}  // namespace

double ErrorSummary::mean_signed_error() const { return from_fixed(signed_fixed, signed_elements); }
double ErrorSummary::mean_allowed() const { return from_fixed(flat_fixed + kappa_fixed, signed_elements); }
double ErrorSummary::mean_kappa_allowed() const { return from_fixed(kappa_fixed, signed_elements); }
double ErrorSummary::bias_bound() const {
  if (unit_keys.empty()) return kInf;
  return kBiasFloor + kBiasSpread * from_fixed(flat_fixed, signed_elements) / std::sqrt(static_cast<double>(units())) +
         mean_kappa_allowed();
}
bool ErrorSummary::bias_within() const { return unit_keys.empty() || std::fabs(mean_signed_error()) <= bias_bound(); }

void ErrorSummary::add_signed(double signed_error, double flat_allowed, double kappa_allowed) {
  ++signed_elements;
  signed_fixed += to_fixed(signed_error);
  flat_fixed += to_fixed(flat_allowed);
  kappa_fixed += to_fixed(kappa_allowed);
}

void ErrorSummary::add(const Format& f, std::int64_t index, double got, std::uint64_t got_bits,
                       std::uint64_t exact_bits, const ElementReference& exact, double kappa,
                       const Budget& budget, bool bias) {
  ++elements;
  if (lnorm::correctly_rounded(f, got_bits, exact_bits)) ++correctly_rounded;
  // The signed error once: its magnitude is the error wherever both sides are finite; the non-finite rules otherwise.
  const double signed_e = storage_units ? std::numeric_limits<double>::quiet_NaN() : signed_scaled_error(f, got, got_bits, exact);
  const double e = !std::isnan(signed_e) ? std::fabs(signed_e)
                   : storage_units      ? storage_ulp_error(f, got, got_bits, exact_bits, exact)
                                        : scaled_ulp_error(f, got, got_bits, exact_bits, exact);
  const double allowed = storage_units ? budget.allowed(std::isnan(kappa) ? 0.0 : kappa) : allowed_ulps(f, budget, exact, kappa);
  const bool nonfinite = std::isinf(e);
  if (nonfinite) {
    ++nonfinite_mismatches;
    if (first_nonfinite_mismatch_index < 0) first_nonfinite_mismatch_index = index;
  } else {
    max_finite_ulp = std::max(max_finite_ulp, e);
    if (bias && !std::isnan(signed_e)) add_signed(signed_e, budget.a, allowed - budget.a);
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
  // A non-finite mismatch against an infinite allowance (kappa past double's range) is still the worst excess: Inf,
  // not Inf − Inf = NaN, which no later element would compare above.
  const double excess = nonfinite ? kInf : e - allowed;
  if (excess > worst_excess || worst_excess_index < 0) {
    worst_excess = excess;
    worst_excess_index = index;
    worst_excess_error = e;
    worst_excess_allowed = allowed;
    worst_excess_kappa = kappa;
    worst_excess_got = got;
    worst_excess_exact = exact.y_hi + exact.y_lo;
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
  if (o.worst_excess_index >= 0 && (o.worst_excess > worst_excess || worst_excess_index < 0)) {
    worst_excess = o.worst_excess;
    worst_excess_index = o.worst_excess_index;
    worst_excess_error = o.worst_excess_error;
    worst_excess_allowed = o.worst_excess_allowed;
    worst_excess_kappa = o.worst_excess_kappa;
    worst_excess_got = o.worst_excess_got;
    worst_excess_exact = o.worst_excess_exact;
  }
  unit_keys.insert(o.unit_keys.begin(), o.unit_keys.end());
  signed_elements += o.signed_elements;
  signed_fixed += o.signed_fixed;
  flat_fixed += o.flat_fixed;
  kappa_fixed += o.kappa_fixed;
}

namespace {
std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

UnitKey& UnitKey::word(std::uint64_t w) {
  h_ = splitmix(h_ ^ w);
  return *this;
}

UnitKey& UnitKey::bytes(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, b + i, 8);
    word(w);
  }
  std::uint64_t tail = n;  // the length, and the last bytes
  for (; i < n; ++i) tail = (tail << 8) | b[i];
  return word(tail);
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
