// The persistent thread pool behind parallel_rows (lnorm/parallel.hpp has the why and the numbers).
//
// Each worker owns a ticket (a 32-bit atomic, so std::atomic::wait is a plain futex). A call locks the
// pool, publishes the job, bumps the tickets of the workers it needs, runs range 0, takes any range whose
// worker has not started (see Pool), and waits for `remaining` to reach 0. Waiting spins for kSpin polls
// first and then sleeps in the kernel (futex): a bench loop or a model's next layer calls again within
// microseconds, and a futex wake-up costs several. The spin is short (~10-30 us of pause) because on a
// shared machine a spinning worker takes a core from someone else; it was not tuned separately.
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lnorm/parallel.hpp"

namespace lnorm::detail {
namespace {

// Polls before sleeping (one pause each, tens of cycles on Zen): see the top of this file.
constexpr int kSpin = 1 << 10;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins, then sleeps, until a != old.
template <class T>
T wait_change(const std::atomic<T>& a, T old) {
  for (int i = 0; i < kSpin; ++i) {
    const T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    cpu_relax();
  }
  for (;;) {
    a.wait(old, std::memory_order_acquire);
    const T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
  }
}

// True on a pool worker, and on a caller while its call is running: a nested call runs serially.
thread_local bool t_inside = false;

void run_serially(std::int64_t rows, int parts, RangeFn fn, void* ctx) {
  std::exception_ptr first;
  for (int i = 0; i < parts; ++i) {
    try {
      fn(ctx, rows * i / parts, rows * (i + 1) / parts);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// Range i > 0 belongs to worker i-1, so a thread meets the same rows on every call (its L1/L2 keep them:
// 64x4096 f32 is 2 MiB, one core's L2 holds half). But a range is taken, not just handed out: each
// worker's slot holds (job generation << 1 | taken), and whoever turns `taken` on by compare-and-swap runs
// the range. The caller, once its own range 0 is done, takes every range whose worker has not started
// yet, so a worker the scheduler has not run costs the caller nothing but doing that range itself: on a
// busy machine two threads are then never much slower than one. Which thread runs a range never changes
// a bit of the result. A worker that wakes late finds its slot taken (or its compare-and-swap fails on
// the generation) and touches nothing else; it reads the job's fields only while it holds a taken,
// unfinished range, during which the caller is still waiting and cannot start another job.
class Pool {
 public:
  ~Pool() {
    stop_.store(true, std::memory_order_release);
    for (auto& w : workers_) {
      w->ticket.fetch_add(1, std::memory_order_release);
      w->ticket.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
  }

  // false: the pool is serving another caller.
  bool try_run(std::int64_t rows, int parts, RangeFn fn, void* ctx) {
    std::unique_lock lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    while (static_cast<int>(workers_.size()) < parts - 1) {
      auto w = std::make_unique<Worker>();
      Worker* raw = w.get();
      const int range = static_cast<int>(workers_.size()) + 1;
      raw->thread = std::thread([this, raw, range] { work(*raw, range); });
      workers_.push_back(std::move(w));
    }
    rows_ = rows, parts_ = parts, fn_ = fn, ctx_ = ctx;
    errors_.assign(static_cast<std::size_t>(parts), nullptr);
    remaining_.store(parts, std::memory_order_relaxed);
    ++generation_;
    for (int i = 0; i < parts - 1; ++i) {
      Worker& w = *workers_[static_cast<std::size_t>(i)];
      w.slot.store(generation_ << 1, std::memory_order_release);
      w.ticket.fetch_add(1, std::memory_order_release);
      w.ticket.notify_one();
    }
    run_range(0);
    for (int i = 0; i < parts - 1; ++i) {
      if (take(*workers_[static_cast<std::size_t>(i)], generation_ << 1)) run_range(i + 1);
    }
    for (int left = remaining_.load(std::memory_order_acquire); left != 0;) left = wait_change(remaining_, left);
    for (const std::exception_ptr& e : errors_)
      if (e) std::rethrow_exception(e);
    return true;
  }

 private:
  struct Worker {
    std::atomic<std::uint32_t> ticket{0};  // bumped to wake the worker
    std::atomic<std::uint64_t> slot{1};    // generation << 1 | taken
    std::thread thread;
  };

  static bool take(Worker& w, std::uint64_t untaken) {
    return w.slot.compare_exchange_strong(untaken, untaken | 1, std::memory_order_acq_rel, std::memory_order_relaxed);
  }

  void run_range(int i) {
    try {
      fn_(ctx_, rows_ * i / parts_, rows_ * (i + 1) / parts_);
    } catch (...) {
      errors_[static_cast<std::size_t>(i)] = std::current_exception();
    }
    // The last range finished: the caller may start the next job, so nothing is touched after this
    // (notify on a member of the pool, which outlives every job, is harmless if spurious).
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }

  void work(Worker& w, int range) {
    t_inside = true;
    std::uint32_t seen = 0;
    for (;;) {
      seen = wait_change(w.ticket, seen);
      if (stop_.load(std::memory_order_acquire)) return;
      const std::uint64_t s = w.slot.load(std::memory_order_acquire);
      if ((s & 1) == 0 && take(w, s)) run_range(range);
    }
  }

  std::mutex busy_;  // one call at a time
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  std::atomic<int> remaining_{0};  // ranges not finished
  std::uint64_t generation_ = 0;
  // The job: written by the caller before the slots are published (release), read by a worker only while
  // it holds a taken range (acquired through its slot).
  std::int64_t rows_ = 0;
  int parts_ = 1;
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::vector<std::exception_ptr> errors_;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

namespace {
std::atomic<std::uint64_t> g_split_calls{0};
}  // namespace

std::uint64_t split_calls() { return g_split_calls.load(std::memory_order_relaxed); }

void run_ranges(std::int64_t rows, int parts, RangeFn fn, void* ctx) {
  if (parts > 1) g_split_calls.fetch_add(1, std::memory_order_relaxed);
  if (parts <= 1 || t_inside) return run_serially(rows, parts, fn, ctx);
  t_inside = true;
  struct Reset {
    ~Reset() { t_inside = false; }
  } reset;
  if (!pool().try_run(rows, parts, fn, ctx)) run_serially(rows, parts, fn, ctx);
}

}  // namespace lnorm::detail
