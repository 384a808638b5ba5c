// Hand-run knobs of the long emulation suites: LNORM_VERIFY_SEED=S picks the seed, LNORM_VERIFY_OP=O
// one op (layernorm, rmsnorm, or a fused or backward op where the test runs those), so a budget's seeds 1-5 runs need no rebuild. Unset: the defaults
// ctest runs. A value that does not parse aborts the test rather than silently running the default.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "lnorm/problem.hpp"

namespace lnorm::testing {

inline std::uint64_t seed_from_env(std::uint64_t fallback) {
  const char* s = std::getenv("LNORM_VERIFY_SEED");
  if (!s || !*s) return fallback;
  std::size_t used = 0;
  const unsigned long long v = std::stoull(s, &used);
  if (used != std::string(s).size()) throw std::invalid_argument(std::string("LNORM_VERIFY_SEED=") + s);
  return v;
}

inline std::vector<Op> ops_from_env() {
  const char* s = std::getenv("LNORM_VERIFY_OP");
  if (!s || !*s) return {std::begin(kNormOps), std::end(kNormOps)};
  const auto op = parse_op(s);
  if (!op) throw std::invalid_argument(std::string("LNORM_VERIFY_OP=") + s + ": expected an op (layernorm, rmsnorm, layernorm_bwd, ...)");
  return {*op};
}

}  // namespace lnorm::testing
