// Timing in rounds (rounds.cpp): the entries of a group, one call-batch each per round, back to back.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lnorm/bench.hpp"

namespace lnorm::bench {

// Times every result's entry (skipped ones are left alone) and fills seconds (the median over rounds),
// bytes_per_second, rows_per_second and round_bytes_per_second; bytes(entry) is what one call moves.
// An entry that cannot be set up or throws gets `skipped`. progress(name) before each entry's set-up.
void time_in_rounds(const std::vector<Result*>& todo, const Settings& settings, const std::function<double(const Entry&)>& bytes,
                    const std::function<void(const std::string&)>& progress);

// The median of v (the mean of the middle two for an even count); v not empty. Of an entry's rounds, and of a
// kernel's per-round fractions of the copy (ceiling.cpp).
double median(std::vector<double> v);

}  // namespace lnorm::bench
