// lnorm_time_split: where a row-wise norm's time goes on this CPU, as fractions of the copy ceiling
// measured in the same run. For each shape and op (LayerNorm with gamma and beta, RMSNorm with gamma),
// f32, one thread, on the same buffers:
//   copy       the faster of memcpy and an AVX2 streaming copy of x to y (bench/README "copy ceiling")
//   avx2       the registry's avx2 kernel (lnorm bench's entry, without its harness)
//   sketch     a plain AVX2 kernel: shift x[0], one fused read of Σd and Σd², one output pass, no
//              special cases, no accuracy guarantee (a "60-line sketch")
//   stats      the sketch's statistics pass alone (reads x once)
//   output     the sketch's output pass alone (reads x, gamma, beta; writes y)
// Every variant is run once untimed and then timed once per round, rounds interleaved, and the medians
// compared, so a busy machine slows all of them alike. Scratch-grade code on purpose: it answers "which pass limits us",
// and its numbers are quoted in docs/performance.md. Run: build/release/bench/lnorm_time_split [rounds]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "lnorm/operands.hpp"
#include "lnorm/registry.hpp"

namespace {

using namespace lnorm;

struct Stats {
  float centre, rstd;
};

__attribute__((target("avx2,fma"))) float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) Stats sketch_stats(const float* x, std::int64_t n, float eps, bool rms) {
  const float shift = rms ? 0.0f : x[0];
  const __m256 c = _mm256_set1_ps(shift);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), c), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), c);
    if (!rms) {
      s0 = _mm256_add_ps(s0, d0);
      s1 = _mm256_add_ps(s1, d1);
    }
    q0 = _mm256_fmadd_ps(d0, d0, q0);
    q1 = _mm256_fmadd_ps(d1, d1, q1);
  }
  float s = hsum(_mm256_add_ps(s0, s1)), q = hsum(_mm256_add_ps(q0, q1));
  for (; i < n; ++i) {
    const float d = x[i] - shift;
    s += d;
    q += d * d;
  }
  const float nf = static_cast<float>(n), ms = s / nf, var = rms ? q / nf : q / nf - ms * ms;
  return {rms ? 0.0f : shift + ms, 1.0f / std::sqrt(var + eps)};
}

__attribute__((target("avx2,fma"))) void sketch_output(const float* x, const float* g, const float* b, float* y,
                                                        std::int64_t n, Stats st, bool rms) {
  const __m256 m = _mm256_set1_ps(st.centre), r = _mm256_set1_ps(st.rstd);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), r);
    _mm256_storeu_ps(y + i, rms ? _mm256_mul_ps(t, _mm256_loadu_ps(g + i))
                                : _mm256_fmadd_ps(t, _mm256_loadu_ps(g + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = (x[i] - st.centre) * st.rstd * g[i] + (rms ? 0.0f : b[i]);
}

__attribute__((target("avx2"))) void stream_copy(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n && reinterpret_cast<std::uintptr_t>(y + i) % 32 != 0; ++i) y[i] = x[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(y + i, _mm256_loadu_ps(x + i));
  for (; i < n; ++i) y[i] = x[i];
  _mm_sfence();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::puts("lnorm_time_split: this CPU lacks AVX2/FMA");
    return 77;
  }
  const int rounds = argc > 1 ? std::max(3, std::atoi(argv[1])) : 51;
  const KernelInfo* avx2 = find_kernel("avx2");
  const std::int64_t shapes[][2] = {{64, 768}, {64, 4096}, {1024, 768}, {16384, 4096}};
  std::printf("fraction of the copy's speed (copy time / variant time), f32, one thread, medians of %d interleaved rounds\n",
              rounds);
  std::printf("%-9s %-12s %9s %6s %7s %7s %7s\n", "op", "shape", "copy GB/s", "avx2", "sketch", "stats", "output");
  for (const auto& shape : shapes) {
    const std::int64_t rows = shape[0], cols = shape[1];
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    std::vector<float> x(n), y(n), gamma(static_cast<std::size_t>(cols)), beta(gamma.size()), mean(static_cast<std::size_t>(rows)),
        rstd(mean.size());
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(rng);
    for (float& v : gamma) v = normal(rng);
    for (float& v : beta) v = normal(rng);
    std::fill(y.begin(), y.end(), 0.0f);
    // DRAM shapes (512 MiB of x + y) take ~40 ms a call: fewer rounds.
    const int r_count = n > (std::size_t{1} << 24) ? std::max(3, rounds / 8) : rounds;
    for (bool rms : {false, true}) {
      Problem p = make_problem(rows, cols, DType::f32, 1e-5, true, !rms);
      if (rms) p = with_op(p, Op::rmsnorm);
      // The slots this problem has (the operand table's presence rule: RMSNorm has no beta and no mean), pointed at
      // the f32 vectors this lab tool owns.
      const std::pair<Operand, float*> owned[] = {{Operand::x, x.data()},       {Operand::gamma, gamma.data()},
                                                  {Operand::beta, beta.data()}, {Operand::y, y.data()},
                                                  {Operand::mean, mean.data()}, {Operand::rstd, rstd.data()}};
      Tensors t;
      for (const auto& [operand, data] : owned)
        if (present(info(operand), p)) set_slot(t, info(operand), data);
      const float eps = 1e-5f;
      std::vector<std::function<void()>> variants = {
          [&] { std::memcpy(y.data(), x.data(), 4 * n); },
          [&] { stream_copy(x.data(), y.data(), n); },
          [&] { avx2->run(p, t); },
          [&] {
            for (std::int64_t r = 0; r < rows; ++r) {
              const Stats st = sketch_stats(x.data() + r * cols, cols, eps, rms);
              sketch_output(x.data() + r * cols, gamma.data(), beta.data(), y.data() + r * cols, cols, st, rms);
            }
          },
          [&] {
            for (std::int64_t r = 0; r < rows; ++r) rstd[static_cast<std::size_t>(r)] = sketch_stats(x.data() + r * cols, cols, eps, rms).rstd;
          },
          [&] {
            for (std::int64_t r = 0; r < rows; ++r)
              sketch_output(x.data() + r * cols, gamma.data(), beta.data(), y.data() + r * cols, cols, {0.1f, 1.1f}, rms);
          },
      };
      std::vector<std::vector<double>> times(variants.size());
      for (auto& v : variants) v();  // warm: pages touched, code and data in cache
      for (int round = 0; round < r_count; ++round) {
        for (std::size_t v = 0; v < variants.size(); ++v) {
          // Once untimed first: the streaming copy leaves y out of the caches, and a variant timed
          // right after it would pay for that (lnorm bench times warm calls too).
          variants[v]();
          const auto start = std::chrono::steady_clock::now();
          variants[v]();
          times[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
      }
      std::vector<double> med;
      for (auto& tv : times) med.push_back(median(tv));
      const double copy = std::min(med[0], med[1]);
      const double bytes = 8.0 * static_cast<double>(n);  // x read + y written, as the copy moves them
      char shape_text[32];
      std::snprintf(shape_text, sizeof shape_text, "%lldx%lld", static_cast<long long>(rows), static_cast<long long>(cols));
      std::printf("%-9s %-12s %9.1f %6.2f %7.2f %7.2f %7.2f\n", rms ? "rmsnorm" : "layernorm", shape_text,
                  bytes / copy / 1e9, copy / med[2], copy / med[3], copy / med[4], copy / med[5]);
    }
  }
  return 0;
}
