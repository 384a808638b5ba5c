#include "error_text.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lnorm::cli {
namespace {

std::string printed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

}  // namespace

nlohmann::json ulp_json(double e) { return std::isinf(e) ? nlohmann::json(nullptr) : nlohmann::json(e); }

std::string number_text(double value, double limit) {
  for (int digits = 3; digits < 17; ++digits) {
    const std::string t = printed(value, digits);
    const double read = std::strtod(t.c_str(), nullptr), lim = std::strtod(printed(limit, digits).c_str(), nullptr);
    // The text must compare with the limit's text as the values compare.
    if ((value > limit) == (read > lim) && (value < limit) == (read < lim)) return t;
  }
  return printed(value, 17);
}

std::string percent_text(double fraction) {
  char buf[64];
  for (int decimals = 2; decimals <= 12; ++decimals) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, 100 * fraction);
    const double read = std::strtod(buf, nullptr);
    if ((fraction < 1) == (read < 100) && (fraction > 0) == (read > 0)) break;
  }
  return buf;
}

nlohmann::json error_json(const ErrorSummary& s, bool gated) {
  nlohmann::json j = {
      {"elements", s.elements}, {"max_ulp", ulp_json(s.max_ulp)}, {"max_ulp_nonfinite", std::isinf(s.max_ulp)},
      {"max_finite_ulp", s.max_finite_ulp}, {"max_ulp_index", s.max_ulp_index}, {"max_ulp_kappa", s.max_ulp_kappa},
      {"max_ulp_got", s.max_ulp_got}, {"max_ulp_exact", s.max_ulp_exact},
      {"correctly_rounded", s.correctly_rounded_fraction()}, {"nonfinite_mismatches", s.nonfinite_mismatches},
      {"over_budget", s.over_budget}};
  // The element furthest over its own allowance (the least under it when none is over): where a FAIL is.
  if (s.worst_excess_index >= 0)
    j["worst_over_budget"] = {{"index", s.worst_excess_index}, {"error", ulp_json(s.worst_excess_error)},
                              {"allowed", ulp_json(s.worst_excess_allowed)}, {"kappa", s.worst_excess_kappa},
                              {"got", s.worst_excess_got}, {"exact", s.worst_excess_exact}};
  const bool bias_gated = gated && s.units() > 0;
  j["bias"] = {{"metric", "mean signed error in scaled ulps (positive: above the exact answer)"},
               {"mean_signed_error", s.mean_signed_error()}, {"mean_allowed", s.mean_allowed()},
               {"mean_kappa_allowed", s.mean_kappa_allowed()}, {"elements", s.signed_elements}, {"units", s.units()},
               {"bound", s.units() > 0 ? nlohmann::json(s.bias_bound()) : nlohmann::json(nullptr)},
               {"gated", bias_gated}, {"pass", !bias_gated || s.bias_within()}};
  return j;
}

std::string over_budget_lines(const char* name, const ErrorSummary& s, const Where& where, const char* unit, bool gated) {
  std::string out;
  char buf[512];
  if (s.over_budget > 0 && s.worst_excess_index >= 0) {
    const bool nonfinite = std::isinf(s.worst_excess_error);
    std::snprintf(buf, sizeof buf,
                  "  over      %s %s: got %.17g, exact %.17g, %s scaled ulp > allowed %s (row kappa %.4g)%s; %lld of %lld "
                  "elements over budget%s\n",
                  name, where(s.worst_excess_index).c_str(), s.worst_excess_got, s.worst_excess_exact,
                  nonfinite ? "inf" : number_text(s.worst_excess_error, s.worst_excess_allowed).c_str(),
                  number_text(s.worst_excess_allowed, s.worst_excess_error).c_str(), s.worst_excess_kappa,
                  nonfinite ? " (non-finite mismatch)" : "", static_cast<long long>(s.over_budget),
                  static_cast<long long>(s.elements), gated ? "" : " (reported, not gated)");
    out += buf;
  }
  if (s.units() > 0 && s.signed_elements > 0) {
    const double m = s.mean_signed_error(), bound = s.bias_bound(), kappa_part = s.mean_kappa_allowed();
    const std::string kappa_text = kappa_part > 0 ? " + kappa part " + number_text(kappa_part, 0) : std::string();
    std::snprintf(buf, sizeof buf,
                  "  bias      %s mean signed error %s scaled ulp over %lld elements, bound %s (%g + %g x mean allowance "
                  "%.4g / sqrt(%lld %s)%s)%s\n",
                  name, (m >= 0 ? "+" + number_text(m, bound) : "-" + number_text(-m, bound)).c_str(),
                  static_cast<long long>(s.signed_elements), number_text(bound, std::fabs(m)).c_str(), ErrorSummary::kBiasFloor,
                  ErrorSummary::kBiasSpread, s.mean_allowed() - kappa_part, static_cast<long long>(s.units()), unit,
                  kappa_text.c_str(),
                  s.bias_within() ? "" : gated ? ": a systematic error, FAIL" : ": a systematic error (reported, not gated)");
    out += buf;
  }
  return out;
}

}  // namespace lnorm::cli
