// avx2's non-temporal path: a problem above the streaming threshold (fast::kStreamBytes in
// kernels/cpu/simd_body.hpp, 8 MiB of y) writes y with streaming stores after a head that aligns each
// row; the values must be the bits of the same rows computed one small problem at a time.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "kernel_cases.hpp"
#include "lnorm/registry.hpp"

using namespace lnorm;

TEST_CASE("avx2: a problem large enough for streaming stores gives the bits of each row run alone",
          "[kernels][avx2][stream]") {
  const KernelInfo* k = find_kernel("avx2");
  REQUIRE(k != nullptr);
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    if (const auto why = unavailable_reason(*k, make_problem(1, 8, d, 1e-5, true, true))) {
      WARN("skipped: avx2 " << name(d) << ": " << *why);
      continue;
    }
    // cols odd, so successive rows start at every alignment (the head of 0..15 elements varies);
    // x + y > 16 MiB for every dtype (2 bytes: 2·1100·4099·2 = 18 MB).
    const std::int64_t rows = 1100, cols = 4099;
    const auto x = testing::encode(d, testing::normal(d, rows * cols, 3, 2, 21));
    const auto g = testing::encode(d, testing::normal(d, cols, 1, 0.5, 22));
    const auto b = testing::encode(d, testing::normal(d, cols, 0, 0.5, 23));
    const std::size_t es = size_of(d), ss = size_of(stats_dtype(d));
    std::vector<std::byte> y(x.size()), mean(rows * ss), rstd(rows * ss);
    k->run(make_problem(rows, cols, d, 1e-5, true, true), Tensors{x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data()});
    std::int64_t mismatched_rows = 0;
    std::vector<std::byte> y1(cols * es), mean1(ss), rstd1(ss);
    for (std::int64_t r = 0; r < rows; r += 7) {  // every 7th row: all 16 alignments, a fraction of the time
      k->run(make_problem(1, cols, d, 1e-5, true, true),
             Tensors{x.data() + r * cols * es, g.data(), b.data(), y1.data(), mean1.data(), rstd1.data()});
      const bool same = std::equal(y1.begin(), y1.end(), y.begin() + r * cols * es) &&
                        std::equal(mean1.begin(), mean1.end(), mean.begin() + r * ss) &&
                        std::equal(rstd1.begin(), rstd1.end(), rstd.begin() + r * ss);
      mismatched_rows += same ? 0 : 1;
    }
    INFO("avx2 " << name(d) << ": rows differing between the streamed problem and one-row problems");
    CHECK(mismatched_rows == 0);
  }
}
