// The copy ceiling: the fastest copy measured beside a kernel, and how a kernel's speed is shown against
// it (DESIGN "Speed", issue 15).
#include <cstdio>

#include "lnorm/bench.hpp"

namespace lnorm::bench {

std::optional<Ceiling> copy_ceiling(const std::vector<Result>& results, DType d, const Shape& s, Op op) {
  std::optional<Ceiling> best;
  for (const Result& r : results) {
    if (!is_copy(r.entry.what) || r.entry.dtype != d || r.entry.shape.rows != s.rows || r.entry.shape.cols != s.cols) continue;
    if (r.entry.op.prologue != op.prologue) continue;  // two streams or four
    if (!r.skipped.empty() || !(r.bytes_per_second > 0)) continue;
    if (!best || r.bytes_per_second > best->bytes_per_second) best = Ceiling{r.bytes_per_second, r.entry.what};
  }
  return best;
}

bool ceiling_suspect(double bytes_per_second, const Ceiling& c) {
  return bytes_per_second > kSuspectAbove * c.bytes_per_second;
}

std::string percent_of_copy(double bytes_per_second, const Ceiling& c) {
  char buf[128];
  if (ceiling_suspect(bytes_per_second, c)) {
    std::snprintf(buf, sizeof buf, "ceiling suspect: %.2f GB/s vs copy %.2f GB/s (%s)", bytes_per_second / 1e9,
                  c.bytes_per_second / 1e9, c.winner.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%.0f%%", 100 * bytes_per_second / c.bytes_per_second);
  }
  return buf;
}

}  // namespace lnorm::bench
