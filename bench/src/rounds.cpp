// Timing in rounds: every entry of a group (one dtype, shape and stream count) is timed once per
// round, back to back, so a kernel and the copies it is measured against sample the same minute of a shared
// memory system. Timed one after another instead (Google Benchmark's order: all of one entry's repetitions,
// then the next's), the copy ceiling of one 16384x4096 run was 21.9 GB/s and of the next 43.7
// (docs/performance.md "DRAM forward, second look"): the ratio read 0.75, then 0.54, for the same kernel.
#include "rounds.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "bodies.hpp"

namespace lnorm::bench {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Calls per round: enough back-to-back calls to fill min_seconds, from a doubling probe after one warm-up call
// (which also takes the first touch of any lazily mapped page out of the timing).
long calls_per_round(Body& b, const Settings& s) {
  if (s.cold) return kColdCalls;
  b.call();
  for (long n = 1;; n *= 2) {
    const auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) b.call();
    benchmark::ClobberMemory();
    const double t = since(t0);
    if (t >= s.min_seconds / 4 || n >= (1L << 24))
      return std::max(1L, static_cast<long>(std::ceil(static_cast<double>(n) * s.min_seconds / std::max(t, 1e-9))));
  }
}

// Seconds per call over one round's calls.
double time_round(Body& b, long calls, bool cold) {
  double total = 0;
  if (cold) {
    for (long i = 0; i < calls; ++i) {
      evict_caches();
      const auto t0 = Clock::now();
      b.call();
      benchmark::ClobberMemory();
      total += since(t0);
    }
  } else {
    const auto t0 = Clock::now();
    for (long i = 0; i < calls; ++i) b.call();
    benchmark::ClobberMemory();
    total = since(t0);
  }
  return total / static_cast<double>(calls);
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void time_in_rounds(const std::vector<Result*>& todo, const Settings& settings, const std::function<double(const Entry&)>& bytes,
                    const std::function<void(const std::string&)>& progress) {
  // Groups in first-seen order; every body of a group is resident while it runs (memory: the sum of their
  // operands, a few GiB at 16384x4096).
  using Key = std::tuple<int, std::int64_t, std::int64_t, int>;
  std::vector<Key> order;
  std::map<Key, std::vector<Result*>> groups;
  for (Result* r : todo) {
    const Entry& e = r->entry;
    const Key k{static_cast<int>(e.dtype), e.shape.rows, e.shape.cols, static_cast<int>(e.op.prologue)};
    if (!groups.count(k)) order.push_back(k);
    groups[k].push_back(r);
  }
  for (const Key& k : order) {
    std::vector<Result*> members;
    std::vector<std::unique_ptr<Body>> bodies;
    std::vector<long> calls;
    for (Result* r : groups[k]) {
      if (progress) progress(r->entry.name());
      std::unique_ptr<Body> b;
      try {
        b = make_body(r->entry, settings);
      } catch (const std::exception& ex) {  // could not be set up (allocation, a baseline that declines)
        r->skipped = ex.what();
        continue;
      }
      if (!b) {
        r->skipped = "not runnable here";
        continue;
      }
      try {
        calls.push_back(calls_per_round(*b, settings));  // runs the kernel: a throw here is the kernel's failure
      } catch (const std::exception& ex) {
        r->skipped = ex.what();
        r->failed = true;
        continue;
      }
      bodies.push_back(std::move(b));
      members.push_back(r);
    }
    std::vector<std::vector<double>> seconds(members.size());
    for (int round = 0; round < settings.repetitions; ++round) {
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (!members[i]->skipped.empty()) continue;
        try {
          seconds[i].push_back(time_round(*bodies[i], calls[i], settings.cold));
        } catch (const std::exception& ex) {
          members[i]->skipped = ex.what();
          members[i]->failed = true;
        }
      }
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
      Result& r = *members[i];
      if (!r.skipped.empty()) continue;
      r.seconds = median(seconds[i]);
      const double b = bytes(r.entry);
      r.bytes_per_second = b / r.seconds;
      r.rows_per_second = static_cast<double>(r.entry.shape.rows) / r.seconds;
      for (double t : seconds[i]) r.round_bytes_per_second.push_back(b / t);
    }
  }
}

}  // namespace lnorm::bench
