// Every CPU kernel splits rows the same way (kernels/cpu/row_split.hpp): a problem with fewer than
// kMinElementsPerThread elements per extra thread stays on the caller's thread, a large one is split.
// avx512 was once found splitting tiny problems that avx2 kept on one thread (its driver called
// parallel_rows without the row length); this test would have caught it wherever avx512 runs, and runs
// the emulated avx512 twins on every machine.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "simd_emulation.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/registry.hpp"

using namespace lnorm;

namespace {

std::vector<const KernelInfo*> cpu_kernels() {
  std::vector<const KernelInfo*> out;
  for (const KernelInfo& k : registry())
    if (std::string_view(k.name).rfind("cuda", 0) != 0) out.push_back(&k);
  out.push_back(&testing::simd_emulation::kAvx512Emu);
  out.push_back(&testing::simd_emulation::kAvx512CrEmu);
  out.push_back(&testing::simd_emulation::kAvx2Emu);
  out.push_back(&testing::simd_emulation::kAvx2CrEmu);
  return out;
}

// How many parallel_rows calls split their rows while k ran p once.
std::uint64_t splits_of(const KernelInfo& k, const Problem& p) {
  std::vector<std::byte> x(static_cast<std::size_t>(p.elements()) * size_of(p.dtype)), y(x.size());
  for (std::size_t i = 0; i < x.size(); i += 4) x[i + 2] = std::byte{0x3f};  // f32 values near 0.5..1
  std::vector<std::byte> mean(static_cast<std::size_t>(p.rows) * 8), rstd(mean.size());
  const std::uint64_t before = detail::split_calls();
  k.run(p, Tensors{x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data()});
  return detail::split_calls() - before;
}

}  // namespace

TEST_CASE("row split: every CPU kernel keeps a small problem on one thread and splits a large one", "[parallel][kernels]") {
  for (const KernelInfo* k : cpu_kernels()) {
    if (!k->takes.dtypes.contains(DType::f32)) continue;
    const Problem large = make_problem(64, 4096, DType::f32, 1e-5, false, false, 2);  // 4 x kMinElementsPerThread
    if (const auto why = unavailable_reason(*k, large)) {
      WARN(std::string(k->name) << " skipped: " << *why);
      continue;
    }
    INFO(k->name);
    for (const auto& [rows, cols, threads] : std::vector<std::tuple<int, int, int>>{{8, 64, 8}, {1, 4096, 2}, {3, 4097, 2}, {15, 4096, 8}}) {
      INFO(rows << "x" << cols << " on " << threads << " threads: " << split_threads(rows, threads, cols) << " thread(s) asked of the split");
      REQUIRE(split_threads(rows, threads, cols) == 1);
      CHECK(splits_of(*k, make_problem(rows, cols, DType::f32, 1e-5, false, false, threads)) == 0);
    }
    CHECK(splits_of(*k, large) == 1);  // the counter sees a split: the checks above can fail
  }
}
