// Kernels share no state: two threads running different kernels on different problems at the same
// time give the same bits as each run alone. Run under ThreadSanitizer by the `tsan` preset
// (scripts/test-tsan.sh), where a data race in any kernel (a static scratch buffer, a lazily built
// table) is reported even when the bits happen to agree.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "lnorm/format.hpp"
#include "lnorm/registry.hpp"

namespace {

using namespace lnorm;

// One problem with its inputs and one set of outputs.
struct Job {
  const KernelInfo* kernel;
  Problem problem;
  std::vector<std::byte> x, gamma, beta;

  Job(const KernelInfo& k, DType d, std::int64_t rows, std::int64_t cols, int threads, std::uint64_t seed)
      : kernel(&k), problem(make_problem(rows, cols, d, 1e-5, true, true, threads)) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd;
    const Format f = format_of(d);
    auto fill = [&](std::vector<std::byte>& v, std::size_t n, double offset) {
      v.resize(n * size_of(d));
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t b = double_to_bits(f, round_to_format(f, offset + nd(rng)));
        std::memcpy(v.data() + i * size_of(d), &b, size_of(d));
      }
    };
    fill(x, static_cast<std::size_t>(rows * cols), 3.0);
    fill(gamma, static_cast<std::size_t>(cols), 1.0);
    fill(beta, static_cast<std::size_t>(cols), 0.0);
  }

  // y, then mean, then rstd, as bytes.
  std::vector<std::byte> run() const {
    const std::size_t ybytes = x.size(), sbytes = static_cast<std::size_t>(problem.rows) * size_of(stats_dtype(problem.dtype));
    std::vector<std::byte> out(ybytes + 2 * sbytes);
    kernel->run(problem, Tensors{x.data(), gamma.data(), beta.data(), out.data(), out.data() + ybytes,
                                 out.data() + ybytes + sbytes});
    return out;
  }
};

}  // namespace

TEST_CASE("concurrency: two kernels on two problems at once give the bits each gives alone", "[concurrency]") {
  // Every ordered pair of different kernels available here, on different dtypes and shapes (widths
  // off every vector width: 1027 and 263 are odd primes), the second splitting its rows across 2 threads.
  std::vector<const KernelInfo*> kernels;
  for (const KernelInfo& k : registry())
    if (!unavailable_reason(k, make_problem(1, 64, DType::f32, 1e-5, false, false))) kernels.push_back(&k);
  REQUIRE(kernels.size() >= 2);
  int pairs = 0;
  for (const KernelInfo* a : kernels) {
    for (const KernelInfo* b : kernels) {
      if (a == b) continue;
      const DType da = a->takes.dtypes.contains(DType::bf16) ? DType::bf16 : DType::f32;
      const DType db = DType::f32;
      const Job ja(*a, da, 48, 1027, 1, 1), jb(*b, db, 96, 263, 2, 2);
      if (unavailable_reason(*a, ja.problem) || unavailable_reason(*b, jb.problem)) continue;
      const auto alone_a = ja.run(), alone_b = jb.run();
      for (int round = 0; round < 3; ++round) {
        std::vector<std::byte> together_a, together_b;
        std::thread ta([&] { together_a = ja.run(); });
        std::thread tb([&] { together_b = jb.run(); });
        ta.join();
        tb.join();
        INFO(a->name << " (" << name(da) << ") beside " << b->name << " (" << name(db) << "), round " << round);
        CHECK(together_a == alone_a);
        CHECK(together_b == alone_b);
      }
      ++pairs;
    }
  }
  INFO("pairs run: " << pairs);
  CHECK(pairs >= 2);
}
