// The regression corpus (property_tests/corpus/*.txt): the shrunk counterexamples `lnorm verify` has found,
// kept as data and replayed on every kernel in every build (ctest verify_corpus), as fuzz/corpus/ is for the
// fuzzers. A line is a property and the case exactly as verify printed it ("shrunk case: ..."):
//
//   # why this case is here (the bug it found, and where)
//   params f64 small shape=[38,2,1] axis=2 (76x1) eps=0 gamma=with_zeros beta=random misalign=5 seed=1002075082 op=rmsnorm_bwd gamma_offset=1 dy=huge
//
// The case's values come from its spec (materialize), so the line is the whole case.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lnorm/budgets.hpp"
#include "lnorm/cases.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/properties.hpp"

namespace lnorm::verify {

// CaseSpec::describe()'s line back into the spec. Throws std::invalid_argument naming the token that is
// wrong; the parsed spec's describe() is the line again (the caller may check: load_corpus does).
CaseSpec parse_case(std::string_view line);

struct CorpusEntry {
  std::string where;  // file:line
  Property property = Property::accuracy;
  CaseSpec spec;
};

// Every *.txt under dir, in name order. Throws std::runtime_error (file:line: what) on a malformed line, a
// property the case's op does not have, or a line that does not describe() back to itself.
std::vector<CorpusEntry> load_corpus(const std::string& dir);

// The entry's property on its one case for this kernel: "" when it holds, else what broke.
std::string replay(const KernelInfo& kernel, const KernelBudget& budget, const CorpusEntry& entry);

}  // namespace lnorm::verify
