// ctest verify_corpus: every case of the regression corpus (property_tests/corpus/*.txt, lnorm/corpus.hpp)
// replayed on every registry kernel that runs it here, against budgets.toml. A kernel whose budget lists the
// property as an expected failure may fail it (said, not failed); any other failure fails the test with the
// case, the kernel and what broke. A malformed corpus line fails it too.
// Usage: verify_corpus CORPUS_DIR
#include <cstdio>
#include <exception>
#include <string>

#include "lnorm/budgets.hpp"
#include "lnorm/corpus.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/registry.hpp"

int main(int argc, char** argv) {
  using namespace lnorm;
  using namespace lnorm::verify;
  if (argc != 2) {
    std::fprintf(stderr, "usage: verify_corpus CORPUS_DIR\n");
    return 2;
  }
  std::vector<CorpusEntry> corpus;
  try {
    corpus = load_corpus(argv[1]);
  } catch (const std::exception& e) {
    std::printf("FAIL: the corpus: %s\n", e.what());
    return 1;
  }
  const Budgets budgets = Budgets::builtin();
  int failures = 0, runs = 0, xfails = 0;
  for (const CorpusEntry& e : corpus) {
    const Case probe = materialize(e.spec);
    std::string ran;
    for (const KernelInfo& k : registry()) {
      if (!k.implements(e.spec.op) || !k.takes.dtypes.contains(e.spec.dtype) || unavailable_reason(k, probe.problem())) continue;
      const KernelBudget budget = budgets.for_kernel(e.spec.op, k.name, e.spec.dtype);
      const std::string broke = replay(k, budget, e);
      ++runs;
      ran += " " + std::string(k.name);
      if (broke.empty()) continue;
      if (budget.expected_failures.count(e.property)) {
        ++xfails;
        ran += "(xfail)";
        continue;
      }
      ++failures;
      std::printf("FAIL: %s: %s on %s: %s\n  case: %s %s\n", e.where.c_str(), std::string(k.name).c_str(),
                  std::string(name(e.property)).c_str(), broke.c_str(), std::string(name(e.property)).c_str(),
                  e.spec.describe().c_str());
    }
    std::printf("%s %s:%s\n", e.where.c_str(), std::string(name(e.property)).c_str(), ran.empty() ? " no kernel runs it here" : ran.c_str());
  }
  std::printf("\n%s: %zu corpus cases, %d kernel runs, %d failed, %d expected failures\n", failures ? "FAIL" : "PASS",
              corpus.size(), runs, failures, xfails);
  return failures ? 1 : 0;
}
