// Splitting rows across threads. Rows are independent, so the split cannot change any bit of the
// result; it only changes which thread computes which row.
//
// One persistent pool (parallel.cpp), started on first use and grown to the most threads ever asked
// for; the caller runs the first row range itself, and any range whose worker has not woken up yet.
// Chosen by measurement (numbers below): a std::thread started and joined per call costs
// 50-250 us, which made 64x4096 f32 slower on 2 threads than on 1. libgomp (GCC's OpenMP) with its
// default active wait costs 12-24 ms per call on this shared machine (its spinning thread competes with
// the caller for a busy core) and ~25 us with OMP_WAIT_POLICY=passive, a setting we could not impose on
// users; its threads are also invisible to ThreadSanitizer (CI's concurrency test would report races
// inside libgomp), an exception cannot leave an OpenMP region, and every file including this header
// would need -fopenmp. The pool is ~150 lines of std::atomic and std::thread that TSan understands.
//
// Measured with bench/pool_overhead.cpp (`build/release/bench/lnorm_pool_overhead`; medians of 9 runs
// of >= 20 ms, the fastest run in brackets) on the 2-core AMD EPYC dev machine, 2026-12-01 00:16 UTC,
// while other builds kept its load average at 7-9 (so a second thread rarely finds an idle core):
//   empty call, 2 ranges (us):  spawn 113-128 (50-75)   pool 0.5-3.3 (0.04)   libgomp 20000 (13600)
//                               (libgomp with OMP_WAIT_POLICY=passive: 26; the pool's caller takes an
//                               empty range before the worker wakes, hence ~0)
//   avx2 f32 64x4096, GB/s:     1 thread 12.3-13.2 | 2 threads: spawn 4.2-5.3  pool 8.6-9.1  libgomp 0.1-0.8
//   avx2 f32 16384x4096, GB/s:  1 thread 6.5-7.4   | 2 threads: spawn 4.5-6.4  pool 4.6-6.0  libgomp 4.3-4.6
//   split break-even (avx2 f32 Rx4096, us, 1 thread / 2 threads on the pool, fastest runs):
//     2x4096 3.2-4.0 / 7.3-9.1;  4x4096 7.5-8.0 / 11-13;  8x4096 17-20 / 17-22;  16x4096 30-34 / 28-34;
//     32x4096 71-79 / 71-88
// So on this loaded machine two threads do not yet beat one at 64x4096 (the pool's target shape): the
// second thread waits for a core. What the pool removes is the per-call cost (113 us -> ~3 us).
//
// Guarantees:
// - fn(begin, end) is called on contiguous ranges that cover [0, rows) exactly once; range i of t is
//   [rows*i/t, rows*(i+1)/t), so the split depends only on (rows, t).
// - The first exception (in range order) thrown by any range is rethrown on the caller's thread, after
//   every range has finished.
// - Safe from several caller threads at once: the pool serves one call at a time; a call that finds it
//   busy, or that is made from inside a range (nested), runs its ranges one after another on its own
//   thread — the same ranges, so the same bits.
// - Safe in a fork()ed child (lnorm verify's sandbox): the child has the pool's bookkeeping but not its
//   threads, and the caller takes every range whose worker has not started, so it does them all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace lnorm {

// Below this many elements per thread a split costs more than it saves. Measured above: splitting
// Rx4096 f32 over 2 threads loses up to 8x4096 (32768 elements, 16k per thread) and breaks even at
// 16x4096 (32k per thread); 65536 per thread keeps the second thread for work where it can win by more
// than a wake-up (~3-10 us here, the time avx2 needs for ~8-20k in-cache elements).
inline constexpr std::int64_t kMinElementsPerThread = 65536;
// More threads than this are not used (the pool's claim word counts ranges in 16 bits; the CLI takes 1024).
inline constexpr int kMaxThreads = 1024;

namespace detail {
using RangeFn = void (*)(void* ctx, std::int64_t begin, std::int64_t end);
// Runs fn on the `parts` ranges of [0, rows) (parallel.cpp). parts >= 1.
void run_ranges(std::int64_t rows, int parts, RangeFn fn, void* ctx);
// How many parallel_rows calls in this process split their rows into more than one range (one relaxed
// atomic add per such call). Tests read it to see that a kernel keeps a small problem on one thread.
std::uint64_t split_calls();
}  // namespace detail

// How many threads parallel_rows uses: at most `threads`, at most one per row, and, when the row
// length is given (row_elements > 0), at most one per kMinElementsPerThread elements.
constexpr int split_threads(std::int64_t rows, int threads, std::int64_t row_elements = 0) {
  std::int64_t t = std::clamp<std::int64_t>(threads, 1, std::min<std::int64_t>(std::max<std::int64_t>(rows, 1), kMaxThreads));
  if (row_elements > 0) t = std::min(t, std::max<std::int64_t>(1, rows * row_elements / kMinElementsPerThread));
  return static_cast<int>(t);
}

// Calls fn(begin, end) on contiguous row ranges covering [0, rows), on up to `threads` threads (see
// split_threads for row_elements). The first exception thrown by any range is rethrown here.
template <class Fn>
void parallel_rows(std::int64_t rows, int threads, Fn&& fn, std::int64_t row_elements = 0) {
  const int t = split_threads(rows, threads, row_elements);
  if (t == 1) {
    fn(std::int64_t{0}, rows);
    return;
  }
  using F = std::remove_reference_t<Fn>;
  detail::run_ranges(
      rows, t, [](void* ctx, std::int64_t begin, std::int64_t end) { (*static_cast<F*>(ctx))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace lnorm
