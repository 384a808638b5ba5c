// Validators for values given on the command line, so that a value out of range is refused naming its flag (exit 2)
// instead of read as something else: a budget of -1 or nan once meant "the default" (the flags' unset value),
// --seed -1 wrapped to 2^64 - 1, and an empty --shard "" ran every cell, as if not given.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace lnorm::cli {

// A budget: a number >= 0 (inf allowed: no gate); not negative, not nan.
inline CLI::Validator budget_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0' || !(v >= 0)) return "must be a number >= 0, not '" + s + "'";
        return "";
      },
      "NUMBER >= 0");
}

// A seed: a whole number from 0 to 2^64 - 1, written without a sign.
inline CLI::Validator seed_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return "must be a whole number from 0 to 18446744073709551615, not '" + s + "'";
        errno = 0;
        (void)std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE) return "must be at most 18446744073709551615, not '" + s + "'";
        return "";
      },
      "SEED");
}

// A value that may not be empty: where the flag's unset value is "", an empty one would silently mean "not given".
inline CLI::Validator non_empty_value() {
  return CLI::Validator([](std::string& s) -> std::string { return s.empty() ? "must not be empty" : ""; }, "TEXT");
}

}  // namespace lnorm::cli
