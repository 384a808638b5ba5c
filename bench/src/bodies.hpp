// One timed call per entry kind (bodies.cpp).
#pragma once

#include <memory>
#include <vector>

#include "lnorm/bench.hpp"

namespace lnorm::bench {

struct Body {
  virtual ~Body() = default;
  virtual void call() = 0;
};

std::unique_ptr<Body> make_body(const Entry& e, const Settings& s);  // null: not runnable
std::vector<std::byte> random_data(DType d, std::int64_t count, unsigned seed);

// --cold: calls timed per round (or per Google Benchmark repetition), each after evict_caches(), which writes and
// reads a buffer larger than any last-level cache we expect (64 MiB) so the next call finds its data in DRAM.
inline constexpr int kColdCalls = 20;  // a 4096x1024 f32 call from DRAM is ~1 ms here
void evict_caches();

}  // namespace lnorm::bench
