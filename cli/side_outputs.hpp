// The outputs a forward writes beside y or q — Add & Norm's h and the statistics mean and rstd — as `check` gates
// them: opened and validated once, read chunk by chunk, and reported the same way whatever the main output is (y,
// or q with --quant). Each is one OutputCheck: its verdict, a fragment of the summary line, a detail line and its
// JSON object (docs/DESIGN.md "Parts as data": one metric per output, iterated by the command).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs.hpp"
#include "lnorm/metrics.hpp"

namespace lnorm::cli {

// One output's verdict as check reports it.
struct OutputCheck {
  std::string key;      // its JSON key and its name in the text
  bool pass = true;     // joins the top-level verdict
  std::string summary;  // a fragment of the first line ("  h max 0.5 ulp (budget 0.5) ...")
  std::string detail;   // its line below the input line ("  h         PASS  max ..."), newline-terminated
  nlohmann::json json;
};

// The paths and budgets of the side outputs, as the flags give them.
struct SideOutputs {
  std::string h, mean, rstd;
  double h_budget = 0.5;                        // ulps of h's format at the exact sum (--max-h-ulp)
  double max_mean_ulp = -1, max_rstd_ulp = -1;  // < 0 reports only (--max-mean-ulp, --max-rstd-ulp)
  bool any() const { return !h.empty() || !mean.empty() || !rstd.empty(); }
};

// The candidate files, opened: each validated against the problem's inputs (dtype, shape), refused with an
// InputError naming its flag.
class SideCandidates {
 public:
  SideCandidates(const SideOutputs& paths, const ProblemInputs& in);
  // Reads rows [r0, r0 + nr) of each given output into its buffer.
  void read(std::int64_t r0, std::int64_t nr);
  // This chunk's data, or null for an output not given.
  const void* h() const { return h_ ? hbuf_.data() : nullptr; }
  const void* mean() const { return mean_ ? mbuf_.data() : nullptr; }
  const void* rstd() const { return rstd_ ? rbuf_.data() : nullptr; }
  // The reports of the outputs given, in the order h, mean, rstd, from their merged measurements.
  std::vector<OutputCheck> checks(const ErrorSummary& h, const StatSummary& mean, const StatSummary& rstd) const;

 private:
  SideOutputs paths_;
  std::vector<std::int64_t> shape_;
  std::int64_t cols_ = 0;
  std::size_t h_size_ = 0, stat_size_ = 0;
  std::optional<io::NpyReader> h_, mean_, rstd_;
  std::vector<std::byte> hbuf_, mbuf_, rbuf_;
};

// "[2, 17]": the coordinates of a flat index in a shape.
std::string coords(std::int64_t flat, const std::vector<std::int64_t>& shape);

}  // namespace lnorm::cli
