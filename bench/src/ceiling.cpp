// The copy ceiling: the fastest copy measured beside a kernel, and how a kernel's speed is shown against
// it (DESIGN "Speed"; the measurements in docs/performance.md).
#include <algorithm>
#include <cstdio>
#include <map>

#include "lnorm/bench.hpp"
#include "rounds.hpp"  // median

namespace lnorm::bench {

namespace {

std::vector<const Result*> copies_for(const std::vector<Result>& results, DType d, const Shape& s, Op op) {
  std::vector<const Result*> out;
  for (const Result& r : results) {
    if (!is_copy(r.entry.what) || r.entry.dtype != d || r.entry.shape.rows != s.rows || r.entry.shape.cols != s.cols) continue;
    if (r.entry.op.prologue != op.prologue) continue;  // two streams or four
    if (!r.skipped.empty() || !(r.bytes_per_second > 0)) continue;
    out.push_back(&r);
  }
  return out;
}

// Each round's fastest copy and which copy it was; empty unless every copy has the same number of rounds.
std::vector<std::pair<double, const Result*>> round_ceilings(const std::vector<const Result*>& copies) {
  if (copies.empty()) return {};
  const std::size_t rounds = copies.front()->round_bytes_per_second.size();
  for (const Result* c : copies)
    if (c->round_bytes_per_second.size() != rounds) return {};
  std::vector<std::pair<double, const Result*>> out;
  for (std::size_t i = 0; i < rounds; ++i) {
    std::pair<double, const Result*> best{0.0, nullptr};
    for (const Result* c : copies)
      if (c->round_bytes_per_second[i] > best.first) best = {c->round_bytes_per_second[i], c};
    out.push_back(best);
  }
  return out;
}

}  // namespace

std::optional<Ceiling> copy_ceiling(const std::vector<Result>& results, DType d, const Shape& s, Op op) {
  const auto copies = copies_for(results, d, s, op);
  if (copies.empty()) return std::nullopt;
  if (const auto rounds = round_ceilings(copies); !rounds.empty()) {
    std::vector<double> bps;
    std::map<std::string, int> wins;
    for (const auto& [b, c] : rounds) bps.push_back(b), ++wins[c->entry.what];
    const auto most = std::max_element(wins.begin(), wins.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    return Ceiling{median(bps), most->first};
  }
  const Result* best = *std::max_element(copies.begin(), copies.end(),
                                         [](const Result* a, const Result* b) { return a->bytes_per_second < b->bytes_per_second; });
  return Ceiling{best->bytes_per_second, best->entry.what};
}

std::optional<double> fraction_of_copy(const Result& r, const std::vector<Result>& results) {
  if (!r.skipped.empty() || !(r.bytes_per_second > 0)) return std::nullopt;
  const auto copies = copies_for(results, r.entry.dtype, r.entry.shape, r.entry.op);
  const auto rounds = round_ceilings(copies);
  if (!rounds.empty() && rounds.size() == r.round_bytes_per_second.size()) {
    std::vector<double> f;
    for (std::size_t i = 0; i < rounds.size(); ++i) f.push_back(r.round_bytes_per_second[i] / rounds[i].first);
    return median(f);
  }
  const auto c = copy_ceiling(results, r.entry.dtype, r.entry.shape, r.entry.op);
  if (!c) return std::nullopt;
  return r.bytes_per_second / c->bytes_per_second;
}

bool ceiling_suspect(double fraction) { return fraction > kSuspectAbove; }

std::string percent_of_copy(double fraction, double bytes_per_second, const Ceiling& c) {
  char buf[128];
  if (ceiling_suspect(fraction)) {
    std::snprintf(buf, sizeof buf, "ceiling suspect: %.2f GB/s vs copy %.2f GB/s (%s)", bytes_per_second / 1e9,
                  c.bytes_per_second / 1e9, c.winner.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%.0f%%", 100 * fraction);
  }
  return buf;
}

}  // namespace lnorm::bench
