// The three views of a verify run: a terminal table, JSON, and JUnit XML for CI systems.
#pragma once

#include <cstddef>
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
  // What was asked (dir, kernels, ops, dtypes, properties, in a fixed spelling): shards merge only with
  // shards of the same selection, seed, cases and budgets.
  std::string selection;
  // verify --shard K/N ran the cells i with i mod N = K − 1 of the cells_total the unsharded run has
  // (Outcome::cell numbers them); 1/1 is the whole run. merged_from: how many shards a merged run joined (0: none).
  int shard = 1, shards = 1, merged_from = 0;
  std::size_t cells_total = 0;
};

// The table (kernel × dtype × property: status, cases, worst errors), then every failure with its
// counterexample and reproduction line, then a one-line verdict.
std::string table_text(const std::vector<Outcome>& outcomes, const RunInfo& info);
std::string json_text(const std::vector<Outcome>& outcomes, const RunInfo& info);
// `lnorm verify --merge`: the shards' JSON files (json_text's) joined into the run they split, outcomes in
// the unsharded run's cell order. Throws std::runtime_error, naming the file, when a file is not a verify JSON,
// the shards are of different runs (selection, seed, cases, quick, budgets, shard count), a shard is
// missing or given twice, or the cells do not add up to the run's.
struct MergedRun {
  std::vector<Outcome> outcomes;
  RunInfo info;
};
MergedRun merge_json_shards(const std::vector<std::string>& paths);
// One testcase per kernel × dtype × property; fail, XPASS and mistrusted are failures, skips and
// expected failures are <skipped> with the reason.
std::string junit_text(const std::vector<Outcome>& outcomes, const RunInfo& info);
// "worst y 2.31 ulp, mean 0.5, rstd 1" — the measures of one outcome, compactly.
std::string worst_text(const Outcome& o);

}  // namespace lnorm::verify
