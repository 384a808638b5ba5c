// Splitting rows across threads. Rows are independent, so the split cannot change any bit of the
// result; it only changes which thread computes which row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace lnorm {

// Calls fn(begin, end) on contiguous row ranges covering [0, rows), on up to `threads` threads.
// The first exception thrown by any range is rethrown on the caller's thread.
template <class Fn>
void parallel_rows(std::int64_t rows, int threads, Fn&& fn) {
  const std::int64_t t = std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(rows, 1));
  if (t == 1) {
    fn(std::int64_t{0}, rows);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(t));
  pool.reserve(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i) {
    const std::int64_t begin = rows * i / t, end = rows * (i + 1) / t;
    pool.emplace_back([&, i, begin, end] {
      try {
        fn(begin, end);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace lnorm
