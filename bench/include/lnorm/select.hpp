// `lnorm select`'s rules: which kernels may be recommended for a problem, and which of them wins. The CLI
// gathers the inputs (the kernels, their verified budgets, a benchmark run) and prints; this decides.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lnorm/bench.hpp"
#include "lnorm/kernel.hpp"

namespace lnorm::bench {

// What select needs to know of a kernel's accuracy on a dtype: its verified y budget (budgets.toml) and,
// if it fails its own accuracy property (an expected failure), why.
struct Accuracy {
  double a = 0, b = 0;  // a + b·kappa scaled ulps
  std::optional<std::string> accuracy_failure;
};

struct SelectRequest {
  Shape shape;
  DType dtype = DType::f32;
  double max_ulp = -1;  // < 0: any kernel that passes its own accuracy property qualifies
  Op op = Op::layernorm;
  std::optional<QuantSpec> quant = std::nullopt;  // the output quantized (lnorm/quant.hpp): kernels that write q, timed writing it
  // The op the candidates run: op, or its quantized form.
  Op timed_op() const { return quant ? quantized(op) : op; }
};

struct Candidate {
  const KernelInfo* kernel = nullptr;
  double a = 0, b = 0;  // its budget, as Accuracy gave it
  // "" while it qualifies and waits for its time; then "chosen" or "slower". Disqualified before timing:
  // "unavailable" (cannot run here), "excluded" (cautionary: wrong on purpose), "over budget".
  std::string status;
  std::string reason;   // why, in words, for every status but "chosen"
  double gb_per_second = 0;
};

// One candidate per kernel that implements the op and supports the dtype, in the registry's order; those that qualify have an
// empty status. A kernel qualifies when it can run the problem here, is not cautionary, passes its own
// accuracy property, and, with max_ulp ≥ 0, its budget has no kappa term and a ≤ max_ulp (a kappa term
// has no bound that a flat accuracy request could be checked against).
std::vector<Candidate> qualify(std::span<const KernelInfo> kernels, const SelectRequest& request,
                               const std::function<Accuracy(const KernelInfo&)>& accuracy);

// The benchmark entries select times: every qualified candidate, then the copies (the ceiling printed
// beside the choice).
std::vector<Entry> entries_to_time(const std::vector<Candidate>& candidates, const SelectRequest& request);

// Reads each qualified candidate's speed from results and sets the statuses: the fastest is "chosen", the
// others "slower" (with by how much), one with no usable result "unavailable". Returns the chosen one, or
// nullptr when none qualified.
const Candidate* rank(std::vector<Candidate>& candidates, const std::vector<Result>& results,
                      const SelectRequest& request);

}  // namespace lnorm::bench
