// How one measured output (an ErrorSummary: y, h, dx, dgamma, dbeta) reads in `check`'s text and JSON, for the
// forward and the backward alike: the worst error, the element furthest over its own allowance (where a FAIL
// is), and the bias gate (the mean signed error against its bound). Numbers are printed with as many digits as
// it takes for the text to agree with the verdict: an error of 8.0001 against a budget of 8 reads "8.0001", not
// "8 … budget 8".
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "lnorm/metrics.hpp"

namespace lnorm::cli {

// printf into a std::string, whatever its length.
template <class... A>
std::string text(const char* format, A... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string s(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(s.data(), s.size() + 1, format, args...);
  return s;
}

// An error as JSON: a number, or null where it is infinite (a non-finite mismatch; JSON has no Inf).
nlohmann::json ulp_json(double e);

// `value` with 3 significant digits, or more (up to 17) until it no longer prints as `limit` does while
// comparing differently with it (value > limit must not read as equal or below).
std::string number_text(double value, double limit);

// A fraction in [0, 1] as a percentage with 2 decimals, or more until it does not read as 100% (or 0%) when it is
// not: 99.999% correctly rounded must not print "100.00%".
std::string percent_text(double fraction);

// The fields every measured output shares in check's JSON: the worst error, the worst over-budget element,
// the bias gate. The caller adds what is its own (budget, metric, candidate path). gated = false: the output is
// measured and reported but not part of the verdict (y with a recipe), so its bias neither gates nor reads FAIL.
nlohmann::json error_json(const ErrorSummary& s, bool gated = true);

// Where an element index is, as text (check: coordinates in x's shape; a gradient of the parameters: its index).
using Where = std::function<std::string(std::int64_t)>;

// The detail lines under check's summary line for one output named `name` (each begins with two spaces and
// ends with a newline): the element furthest over its allowance when any is over, and the bias line when the
// bias is gated (`unit`: what s.units counts, "rows" or "columns"). Empty when there is nothing to say.
std::string over_budget_lines(const char* name, const ErrorSummary& s, const Where& where, const char* unit,
                              bool gated = true);

}  // namespace lnorm::cli
