// lnorm_pool_overhead — the measurement behind lnorm/parallel.hpp's pool: the cost of one
// parallel_rows call with nothing to do, and the avx2 kernel (f32) at 1 and 2 threads, for three ways of
// running the row ranges:
//   spawn  a std::thread started and joined per range on every call (lnorm before the pool)
//   pool   lnorm::parallel_rows (the persistent pool, parallel.cpp)
//   omp    #pragma omp parallel num_threads(t) (libgomp), each thread taking range omp_get_thread_num()
// and the split threshold: rows x 4096 f32 at 1 thread against 2 on the pool, for small row counts.
// Prints medians of 9 runs (and the fastest run); each run times enough calls to last ~20 ms.
//   build/release/bench/lnorm_pool_overhead
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

#include "isa.hpp"
#include "lnorm/operands.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/problem.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class Fn>
void spawn_rows(std::int64_t rows, int t, Fn&& fn) {
  if (t == 1) return fn(std::int64_t{0}, rows);
  std::vector<std::thread> pool;
  for (int i = 0; i < t; ++i) pool.emplace_back([&, i] { fn(rows * i / t, rows * (i + 1) / t); });
  for (auto& th : pool) th.join();
}

template <class Fn>
void omp_rows(std::int64_t rows, int t, Fn&& fn) {
  if (t == 1) return fn(std::int64_t{0}, rows);
#pragma omp parallel num_threads(t)
  {
    const int i = omp_get_thread_num(), n = omp_get_num_threads();
    fn(rows * i / n, rows * (i + 1) / n);
  }
}

double g_min = 0;  // the fastest run of the last time_call: what the machine gives when it is not busy

// Median seconds per call of f() (g_min: the fastest run).
template <class F>
double time_call(F&& f) {
  f();
  int calls = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 0.02 || calls > (1 << 20)) break;
    calls *= 2;
  }
  std::vector<double> runs;
  for (int r = 0; r < 9; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  std::sort(runs.begin(), runs.end());
  g_min = runs[0];
  return runs[4];
}

struct Data {
  lnorm::Problem p;
  lnorm::OperandBuffers ops;  // every operand the problem has, from the operand table
  Data(std::int64_t rows, std::int64_t cols)
      : p(lnorm::make_problem(rows, cols, lnorm::DType::f32, 1e-5, true, true)), ops(p) {
    float* x = f32(lnorm::Operand::x);
    for (std::int64_t i = 0; i < rows * cols; ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
    std::fill_n(f32(lnorm::Operand::gamma), cols, 1.5f);
    std::fill_n(f32(lnorm::Operand::beta), cols, 0.25f);
  }
  float* f32(lnorm::Operand o) { return reinterpret_cast<float*>(ops[o].data()); }
  lnorm::Tensors t() const { return ops.tensors(); }
};

}  // namespace

int main() {
  using lnorm::cpu::avx2::rows;
  volatile std::int64_t sink = 0;
  const auto empty = [&](std::int64_t b, std::int64_t e) { sink = sink + (e - b); };
  std::printf("empty call, 2 ranges, us median (fastest run):");
  const auto us = [](const char* what, double median) { std::printf("  %s %.2f (%.2f)", what, 1e6 * median, 1e6 * g_min); };
  us("spawn", time_call([&] { spawn_rows(2, 2, empty); }));
  us("pool", time_call([&] { lnorm::parallel_rows(2, 2, empty); }));
  us("omp", time_call([&] { omp_rows(2, 2, empty); }));
  std::printf("\n");
  for (const std::int64_t r : {std::int64_t{64}, std::int64_t{16384}}) {
    Data d(r, 4096);
    const lnorm::Tensors t = d.t();
    const auto fn = [&](std::int64_t b, std::int64_t e) { rows(d.p, t, b, e, lnorm::cpu::Staged{}); };
    const double bytes = 2.0 * 4.0 * static_cast<double>(r) * 4096;
    const auto gbps = [&](const char* what, double median) {
      std::printf("  %s %.1f (%.1f)", what, bytes / median / 1e9, bytes / g_min / 1e9);
    };
    std::printf("avx2 f32 %lldx4096, GB/s median (fastest run):", static_cast<long long>(r));
    gbps("1 thread", time_call([&] { fn(0, r); }));
    std::printf(" | 2 threads:");
    gbps("spawn", time_call([&] { spawn_rows(r, 2, fn); }));
    gbps("pool", time_call([&] { lnorm::parallel_rows(r, 2, fn); }));
    gbps("omp", time_call([&] { omp_rows(r, 2, fn); }));
    std::printf("\n");
  }
  std::printf("split threshold, avx2 f32 Rx4096, us per call at 1 thread / 2 threads on the pool, median (fastest):\n");
  for (const std::int64_t r : {2, 4, 8, 16, 32}) {
    Data d(r, 4096);
    const lnorm::Tensors t = d.t();
    const auto fn = [&](std::int64_t b, std::int64_t e) { rows(d.p, t, b, e, lnorm::cpu::Staged{}); };
    const double one = time_call([&] { fn(0, r); }), one_min = g_min;
    const double two = time_call([&] { lnorm::parallel_rows(r, 2, fn); });
    std::printf("  %2lldx4096 (%6lld elements): %.2f (%.2f) / %.2f (%.2f)\n", static_cast<long long>(r),
                static_cast<long long>(r * 4096), 1e6 * one, 1e6 * one_min, 1e6 * two, 1e6 * g_min);
  }
  return 0;
}
