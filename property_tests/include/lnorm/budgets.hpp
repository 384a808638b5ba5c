// Error budgets per kernel × dtype, read from budgets.toml (property_tests/budgets.toml is built in;
// `lnorm verify --budgets F` reads another). Every number carries a one-line reason.
//
//   [welford.f32]
//   y    = { a = 4, b = 1, reason = "..." }      # scaled ulps per element: a + b·kappa
//   mean = { ulp = 2, reason = "..." }           # ulps of max(|mean|, sqrt(var + eps)), stats format
//   rstd = { ulp = 3, reason = "..." }           # plain ulps of rstd, stats format
//   exact_mean = { value = true, reason = "..." } # mean bit-exact on exact-statistics rows
//   correctly_rounded = { min = 0.9999, reason = "..." }  # optional: least correctly rounded fraction of y
//   [welford.f32.expected_failures]
//   accuracy = "why this algorithm cannot meet the budget"      # strict: must fail on every full run
//   invariance = { reason = "...", strict = false }             # may hold on some seeds
//
// A strict expected failure is a claim that the generator reliably produces inputs on which the
// kernel fails, at every seed: if the full suite holds, it is XPASS and the run fails (budgets.toml
// is stale). A non-strict one (pytest's non-strict xfail) fails only on rare inputs that some seeds
// do not draw: holding is reported as "xpass?" and does not fail the run.
//
// A kernel with no section of its own (a plugin, a test mutant) is held to [default.<dtype>].
//
// Ops other than LayerNorm have their own level (docs/DESIGN.md "Ops"); LayerNorm's sections keep their
// names ([layernorm.avx2.f32] is accepted as the same as [avx2.f32]):
//   [rmsnorm.avx2.f32]
//   y    = { a = 4, b = 0, reason = "..." }      # RMSNorm has no kappa: b is 0 unless a reason says
//   rstd = { ulp = 3, reason = "..." }
//   sign_symmetric = { value = true, reason = "..." }  # RMS(−x) = −RMS(x) bit for bit (property oddness)
//   (no mean, no exact_mean: RMSNorm takes the mean as 0)
// and [rmsnorm.default.<dtype>] for kernels without a section.
// Add & Norm ([add_layernorm.K.D], [add_rmsnorm.K.D], with its norm's keys) falls back to its norm's
// sections: y, mean and rstd are the norm's of h, and h itself is bit-exact for every kernel.
// The backward ops have their own keys (docs/DESIGN.md "Backward": scaled ulps against each gradient's scale):
//   [layernorm_bwd.naive.f32]
//   dx     = { a = 4, b = 1, reason = "..." }    # a + b·kappa, kappa the row's
//   dgamma = { a = 4, b = 1, reason = "..." }    # a + b·kappa, kappa the column's largest
//   dbeta  = { ulp = 2, reason = "..." }         # a sum of dy: no kappa
// Every numeric entry may say its basis: basis = "bound" (the algorithm's proven error bound), "measured" (the
// worst over many seeds, with a margin) or "policy" (a general budget the kernel is held to); the built-in file
// says it for every entry.
// and [layernorm_bwd.default.<dtype>] (rmsnorm_bwd likewise) for kernels without a section.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "lnorm/metrics.hpp"
#include "lnorm/problem.hpp"
#include "lnorm/properties.hpp"

namespace lnorm::verify {

struct KernelBudget {
  Budget y;                 // a + b·kappa scaled ulps
  double mean_ulp = 0;      // |mean − mean*| in ulps of max(|mean*|, sqrt(var* + eps)) (stats format)
  double rstd_ulp = 0;      // |rstd − rstd*| in plain ulps (stats format)
  bool exact_mean = false;  // mean must be bit-exact on exact-statistics rows
  double min_correctly_rounded = 0;  // least fraction of y bit-identical to the exact answer rounded once
  bool sign_symmetric = false;       // rmsnorm: y(−x) = −y(x) bit for bit
  Budget dx, dgamma;                 // backward ops: a + b·kappa scaled ulps
  double dbeta_ulp = 0;              // backward ops: scaled ulps
  std::string dx_reason, dgamma_reason, dbeta_reason;
  std::string y_reason, mean_reason, rstd_reason, exact_mean_reason, correctly_rounded_reason, sign_symmetric_reason;
  std::map<Property, std::string> expected_failures;  // property → why it is expected to fail
  std::set<Property> non_strict_failures;  // those of expected_failures that may hold on some seeds
  // Each numeric budget's basis by key (y, mean, rstd, correctly_rounded, dx, dgamma, dbeta): "bound", "measured",
  // "policy", or "" where the file gives none (budgets.cpp's basis_at).
  std::map<std::string, std::string> basis;
  std::string section;      // "welford.f32", "default.f32", "rmsnorm.avx2.f32": where these numbers came from
  Op op = Op::layernorm;
};

class BudgetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Budgets {
 public:
  // Parses TOML text; `source` names it in error messages. Throws BudgetError naming the key.
  static Budgets parse(std::string_view toml_text, const std::string& source);
  static Budgets load(const std::string& path);
  static Budgets builtin();  // property_tests/budgets.toml as built into the binary

  // The kernel's own section for the op, or the op's default section; throws BudgetError if neither exists.
  const KernelBudget& for_kernel(Op op, std::string_view kernel, DType dtype) const;
  const KernelBudget& for_kernel(std::string_view kernel, DType dtype) const { return for_kernel(Op::layernorm, kernel, dtype); }
  bool has_own(Op op, std::string_view kernel, DType dtype) const;
  bool has_own(std::string_view kernel, DType dtype) const { return has_own(Op::layernorm, kernel, dtype); }
  // Whether any section (a kernel's or the default) is for this op: a budgets file written before
  // RMSNorm existed has none of its sections, and `lnorm verify` then leaves RMSNorm out unless asked.
  bool covers(Op op) const;
  const std::string& source() const { return source_; }
  std::vector<const KernelBudget*> sections() const;  // every section parsed, in the file's key order

 private:
  std::map<std::tuple<Op, std::string, DType>, KernelBudget> table_;
  std::string source_;
};

}  // namespace lnorm::verify
