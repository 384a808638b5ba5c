// The three views of a verify run: a terminal table, JSON, and JUnit XML for CI systems.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lnorm/verify.hpp"

namespace lnorm::verify {

struct RunInfo {
  std::uint64_t seed = 1;
  bool quick = false;
  int cases = 0;
  std::string budgets_source;
  double seconds = 0;
};

// The table (kernel × dtype × property: status, cases, worst errors), then every failure with its
// counterexample and reproduction line, then a one-line verdict.
std::string table_text(const std::vector<Outcome>& outcomes, const RunInfo& info);
std::string json_text(const std::vector<Outcome>& outcomes, const RunInfo& info);
// One testcase per kernel × dtype × property; fail, XPASS and mistrusted are failures, skips and
// expected failures are <skipped> with the reason.
std::string junit_text(const std::vector<Outcome>& outcomes, const RunInfo& info);
// "worst y 2.31 ulp, mean 0.5, rstd 1" — the measures of one outcome, compactly.
std::string worst_text(const Outcome& o);

}  // namespace lnorm::verify
