// ctest `mutants`: the suite must catch every deliberately wrong kernel. Runs the quick suite on each
// mutant × dtype against the [default.*] budgets (a mutant has no section of its own), prints which
// properties caught which mutant, and exits 1 if any mutant got through every property. A mutant × op is done at
// the first dtype whose properties catch it: the gate is caught or not, and the later dtypes were most of the time
// (`mutants --cases 12` 37.3 → 16.0 s, the backward's 69.0 → 24.3 s, Zen 5, one run each; the same 87 and 19
// mutant × op caught). `--every-dtype` runs them all, for the full table of which property sees which defect where.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lnorm/budgets.hpp"
#include "lnorm/verify.hpp"
#include "mutants.hpp"

// Arguments (optional): `--cases N` (default: the quick suite's 24), `--seed S` (default: verify's, 1),
// `--every-dtype`, then the ops to run, e.g. `mutants add_rmsnorm` (default: every forward op).
int main(int argc, char** argv) {
  using namespace lnorm;
  using namespace lnorm::verify;
  std::vector<Op> ops;
  int cases = 0;
  long long seed = -1;
  bool every_dtype = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--every-dtype") {
      every_dtype = true;
      continue;
    }
    if (std::string(argv[i]) == "--cases" && i + 1 < argc) {
      cases = std::atoi(argv[++i]);
      continue;
    }
    if (std::string(argv[i]) == "--seed" && i + 1 < argc) {
      seed = std::atoll(argv[++i]);
      continue;
    }
    const auto op = parse_op(argv[i]);
    if (!op) {
      std::fprintf(stderr, "mutants: %s is not an op\n", argv[i]);
      return 2;
    }
    ops.push_back(*op);
  }
  // Default: the forward ops (ctest `mutants`); the backward's run as `mutants layernorm_bwd rmsnorm_bwd`.
  if (ops.empty()) ops.assign(std::begin(kForwardOps), std::end(kForwardOps));
  const Budgets budgets = Budgets::builtin();
  Settings settings;
  settings.quick = true;
  settings.cases = cases;
  if (seed >= 0) settings.seed = static_cast<decltype(settings.seed)>(seed);
  settings.shrink = false;  // caught or not is the question; the first failing case is printed unshrunk
  settings.command = "lnorm verify (mutant: rebuild with it in the registry)";
  int uncaught = 0;
  // The control first: if it failed, the mutants' failures could be the base's, not their defects'.
  for (Op op : ops) {
    for (DType d : kAllDTypes) {
      std::fprintf(stderr, "control %s %s\n", std::string(name(op)).c_str(), std::string(name(d)).c_str());
      for (const Outcome& o :
           verify_kernel(mutants::control(), op, d, budgets.for_kernel(op, mutants::control().name, d), settings)) {
        if (is_failure(o.status)) {
          std::printf("FAIL: the control kernel (no defect) fails %s %s %s: %s\n  case: %s\n", std::string(name(op)).c_str(),
                      std::string(name(d)).c_str(), std::string(name(o.property)).c_str(), o.message.c_str(),
                      o.counterexample.c_str());
          return 1;
        }
      }
    }
  }
  std::printf("%-26s passes every property x dtype (%s)\n\n", std::string(mutants::control().name).c_str(),
              std::string(mutants::control().summary).c_str());
  // Each mutant must be caught in every op it implements (a defect that only one op's laws see would
  // otherwise hide behind the other op's failures).
  for (const KernelInfo& mutant : mutants::all()) {
    for (Op op : ops) {
      if (!mutant.implements(op) || !mutants::defect_in(mutant, op)) continue;
      std::string caught_by, first;
      int failures = 0, runs = 0;
      for (DType d : kAllDTypes) {
        std::string props;
        // A quant_* mutant's y is the control's (which passes everything above): only `quantized` can see its defect,
        // so it runs that property alone (the other 20-odd would only repeat the control's run).
        Settings s = settings;
        if (std::string_view(mutant.name).substr(0, 13) == "mutant_quant_") s.properties = {Property::quantized};
        for (const Outcome& o : verify_kernel(mutant, op, d, budgets.for_kernel(op, mutant.name, d), s)) {
          ++runs;
          if (!is_failure(o.status)) continue;
          ++failures;
          if (!props.empty()) props += ' ';
          props += name(o.property);
          if (first.empty()) first = std::string(name(d)) + " " + std::string(name(o.property)) + ": " + o.message + "\n      case: " + o.counterexample;
        }
        if (!props.empty()) caught_by += "\n    " + std::string(name(d)) + ": " + props;
        if (failures && !every_dtype) break;
      }
      std::printf("%-26s %-9s %s — %s (%d of %d kernel x dtype x property runs failed)%s%s%s\n", std::string(mutant.name).c_str(),
                  std::string(name(op)).c_str(), failures ? "CAUGHT" : "MISSED", std::string(mutant.summary).c_str(), failures,
                  runs, caught_by.c_str(), first.empty() ? "" : "\n    first: ", first.c_str());
      if (!failures) ++uncaught;
    }
  }
  std::printf("\n%s: %d mutant x op(s) got through every property\n", uncaught ? "FAIL" : "PASS", uncaught);
  return uncaught ? 1 : 0;
}
