// parallel_rows (lnorm/parallel.hpp) on its persistent pool: every row exactly once in contiguous
// ranges, the same bits from every kernel at every thread count, exceptions back on the caller, and
// nested and concurrent calls. test_concurrency covers two kernels at once under ThreadSanitizer.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lnorm/parallel.hpp"
#include "lnorm/registry.hpp"

using namespace lnorm;

TEST_CASE("parallel_rows: every row exactly once, in contiguous ranges, for threads 1..8 and rows 0..100",
          "[parallel]") {
  for (int threads = 1; threads <= 8; ++threads) {
    for (std::int64_t rows = 0; rows <= 100; ++rows) {
      for (const std::int64_t row_elements : {std::int64_t{0}, std::int64_t{1}, kMinElementsPerThread / 4}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(rows));
        std::atomic<int> calls{0}, bad_ranges{0};
        parallel_rows(rows, threads, [&](std::int64_t b, std::int64_t e) {
          if (b < 0 || e > rows || b > e) ++bad_ranges;
          for (std::int64_t r = b; r < e; ++r) ++hits[static_cast<std::size_t>(r)];
          ++calls;
        }, row_elements);
        INFO("threads " << threads << ", rows " << rows << ", row_elements " << row_elements);
        CHECK(bad_ranges == 0);
        for (std::int64_t r = 0; r < rows; ++r) REQUIRE(hits[static_cast<std::size_t>(r)] == 1);
        CHECK(calls == split_threads(rows, threads, row_elements));
      }
    }
  }
}

TEST_CASE("parallel_rows: small problems stay on one thread, big ones use every thread asked", "[parallel]") {
  CHECK(split_threads(64, 2, 64) == 1);                         // 4096 elements: not worth a wake-up
  CHECK(split_threads(2, 8, kMinElementsPerThread) == 2);        // at most one thread per row
  CHECK(split_threads(16384, 2, 4096) == 2);
  CHECK(split_threads(100, 4, 0) == 4);                          // row length unknown: as asked
  CHECK(split_threads(0, 4, 0) == 1);
  int threads_seen = 0;
  std::mutex m;
  std::vector<std::thread::id> ids;
  parallel_rows(64, 2, [&](std::int64_t, std::int64_t) {
    std::lock_guard lock(m);
    ids.push_back(std::this_thread::get_id());
    ++threads_seen;
  }, 64);
  CHECK(threads_seen == 1);
  CHECK(ids.front() == std::this_thread::get_id());
}

TEST_CASE("parallel_rows: the first exception (in range order) is rethrown on the caller, after every range ran",
          "[parallel]") {
  for (int threads = 2; threads <= 8; ++threads) {
    std::atomic<int> ran{0};
    try {
      parallel_rows(64, threads, [&](std::int64_t b, std::int64_t) {
        ++ran;
        if (b > 0) throw std::runtime_error("range at " + std::to_string(b));
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "range at " + std::to_string(64 / threads));
    }
    CHECK(ran == threads);
    // The pool still works afterwards.
    std::atomic<std::int64_t> sum{0};
    parallel_rows(64, threads, [&](std::int64_t b, std::int64_t e) { sum += e - b; });
    CHECK(sum == 64);
  }
}

TEST_CASE("parallel_rows: nested and concurrent calls cover their rows", "[parallel]") {
  std::atomic<std::int64_t> inner_rows{0};
  parallel_rows(8, 4, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) parallel_rows(10, 3, [&](std::int64_t ib, std::int64_t ie) { inner_rows += ie - ib; });
  });
  CHECK(inner_rows == 80);
  std::atomic<std::int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) parallel_rows(37, 3, [&](std::int64_t b, std::int64_t e) { total += e - b; });
    });
  }
  for (auto& t : callers) t.join();
  CHECK(total == 4 * 200 * 37);
}

TEST_CASE("parallel_rows: every kernel gives the same bits at 1..8 threads", "[parallel][kernels]") {
  // 67 x 4099 f32: 274k elements, enough for 8 threads past kMinElementsPerThread; odd width.
  const std::int64_t rows = 67, cols = 4099;
  int compared = 0;
  for (const KernelInfo& k : registry()) {
    for (const DType d : {DType::f32, DType::bf16}) {
      if (!k.takes.dtypes.contains(d)) continue;
      const Problem p1 = make_problem(rows, cols, d, 1e-5, true, true, 1);
      if (unavailable_reason(k, p1)) continue;
      std::mt19937 rng(7);
      std::vector<std::byte> x(static_cast<std::size_t>(rows * cols) * size_of(d)), g(static_cast<std::size_t>(cols) * size_of(d)), b(g.size());
      for (auto* v : {&x, &g, &b}) {
        for (std::size_t i = 0; i < v->size(); i += size_of(d)) {
          const float f = std::uniform_real_distribution<float>(-2.0f, 3.0f)(rng);
          if (d == DType::f32) std::memcpy(v->data() + i, &f, 4);
          else { std::uint32_t u; std::memcpy(&u, &f, 4); const std::uint16_t h = static_cast<std::uint16_t>(u >> 16); std::memcpy(v->data() + i, &h, 2); }
        }
      }
      const auto run = [&](int threads) {
        const Problem p = make_problem(rows, cols, d, 1e-5, true, true, threads);
        const std::size_t sb = static_cast<std::size_t>(rows) * size_of(stats_dtype(d));
        // y, then mean and rstd at an 8-byte boundary (they are float arrays: a bf16 y of odd size
        // would leave them 2-byte aligned, which UBSan rightly reports as a misaligned float store).
        const std::size_t ys = (x.size() + 7) / 8 * 8;
        std::vector<std::byte> out(ys + 2 * sb, std::byte{0x5A});
        k.run(p, Tensors{x.data(), g.data(), b.data(), out.data(), out.data() + ys, out.data() + ys + sb});
        return out;
      };
      const auto one = run(1);
      for (int threads = 2; threads <= 8; ++threads) {
        INFO(k.name << " " << name(d) << " at " << threads << " threads");
        CHECK(run(threads) == one);
      }
      ++compared;
    }
  }
  CHECK(compared >= 2);
}

#if !defined(__SANITIZE_THREAD__)  // ThreadSanitizer does not support fork() in a multithreaded process
TEST_CASE("parallel_rows: works in a forked child, where the pool's workers do not exist", "[parallel]") {
  // `lnorm verify` runs each property in a fork()ed child (cli/verify_sandbox.cpp) after the parent used
  // the pool. The child inherits the pool's bookkeeping but not its threads: the caller takes every range
  // no worker started, so the call still covers every row instead of waiting forever.
  std::atomic<std::int64_t> warm{0};
  parallel_rows(64, 4, [&](std::int64_t b, std::int64_t e) { warm += e - b; });
  REQUIRE(warm == 64);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::atomic<std::int64_t> rows{0};
    parallel_rows(100, 4, [&](std::int64_t b, std::int64_t e) { rows += e - b; });
    ::_exit(rows == 100 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif
