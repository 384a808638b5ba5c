// `lnorm verify` as a library: run the properties for one kernel × dtype and say, for each, whether
// it held, on how many cases of which classes, the worst errors seen, and how to reproduce a failure.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lnorm/budgets.hpp"
#include "lnorm/cases.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/properties.hpp"

namespace lnorm::verify {

enum class Status {
  pass,              // held on every case, and every input class was generated
  fail,              // a case broke it
  expected_failure,  // broke it, and budgets.toml lists this property as expected to fail
  unexpected_pass,   // listed as expected to fail, but held on the full suite: budgets.toml is stale
  unconfirmed,       // listed as expected to fail, held on the quick suite's few cases, or held on a
                     // full run where the entry is non-strict (strict = false): reported, not failed
  mistrusted,        // held, but some input class was never generated: the run proved too little
  skipped,           // the kernel cannot run here (the reason is in `message`)
};
std::string_view name(Status s);
// Whether this outcome makes `lnorm verify` exit 1.
bool is_failure(Status s);

struct Settings {
  int cases = 0;                    // per property; 0: the default for quick/full
  std::uint64_t seed = 1;           // the run's seed; each kernel × dtype × property derives its own
  bool quick = false;
  std::vector<Property> properties;  // empty: every property of the op (properties_for)
  std::string dump_dir;             // when set, each failing case is written there as .npy files
  std::string command = "lnorm verify";  // how reproduction lines start
  // Shrink a failing case to a minimal one (RapidCheck). The mutants test turns it off: it asks only
  // whether a defect is caught, and shrinking cases the exact reference finds hard costs minutes.
  bool shrink = true;
  // Called with each case before it runs (verify's sandbox: the case a timeout names, and the timer's restart).
  std::function<void(const CaseSpec&)> on_case;
  // Seconds one case of a plugin kernel may take in the sandbox (0: no limit); lnorm's own kernels run in-process.
  double case_timeout_s = 0;
  int default_cases() const { return cases > 0 ? cases : quick ? 24 : 160; }
};

struct Outcome {
  std::string kernel;
  Op op = Op::layernorm;
  DType dtype = DType::f32;
  Property property = Property::shape;
  Status status = Status::pass;
  int cases = 0;                         // generated cases checked (before any shrinking)
  double seconds = 0;
  std::uint64_t seed = 0;                // the derived seed RapidCheck ran with
  std::map<std::string, double> worst;   // worst value of each measure seen (scaled ulps, ratios)
  std::map<std::string, int> classes;    // generated cases per primary input class
  std::map<std::string, double> totals;  // counters summed over the run (elements, misrounded per class)
  double correctly_rounded = -1;         // fraction of y elements checked that were correctly rounded (-1: none)
  std::string message;                   // what broke (or why skipped / mistrusted)
  std::string counterexample;            // the shrunk case, one line
  std::string reproduce;                 // one command line that reruns exactly this
  std::string expected_reason;           // from budgets.toml, for expected failures
  std::vector<std::string> dumped;       // .npy files written for the counterexample
  std::string check_command;             // lnorm run + lnorm check on the dumped files
  std::shared_ptr<const Case> failing_case;  // the shrunk case's data (failures and expected failures)
  std::int64_t cell = -1;                // index in the whole (unsharded) run's kernel × op × dtype × property order
};

// Whether a run checked nothing: no outcome that ran (only skipped cells, or none). Its verdict is NOTHING VERIFIED
// and `lnorm verify` exits 1: a CI gate that verified nothing has not passed.
bool verified_nothing(const std::vector<Outcome>& outcomes);

// Called before each property with (kernel, dtype, property).
using Progress = std::function<void(std::string_view, DType, Property)>;

// Whether verify runs property p on this kernel's op: p is one of the op's (applies), and `quantized` only where the
// kernel writes quantized outputs (a capability, like an op: a kernel without it has no cell, not a skipped one).
bool runs_property(const KernelInfo& kernel, Property p, Op op);

// The op's properties (or settings.properties that apply to it) for one kernel × dtype.
std::vector<Outcome> verify_kernel(const KernelInfo& kernel, Op op, DType dtype, const KernelBudget& budget,
                                   const Settings& settings, const Progress& progress = {});
inline std::vector<Outcome> verify_kernel(const KernelInfo& kernel, DType dtype, const KernelBudget& budget,
                                          const Settings& settings, const Progress& progress = {}) {
  return verify_kernel(kernel, Op::layernorm, dtype, budget, settings, progress);
}

}  // namespace lnorm::verify
