// 64-bit indexing: a bf16 problem of 2^16 rows x (2^15 + 1) columns holds 2^31 + 2^16 elements, so any
// int32 element index in a kernel wraps in its last two rows (row 65534 starts at element 2^31 - 2).
// Every kernel built here runs on the whole problem; the last rows are checked bit for bit against the
// exact reference, and every other row of y must hold exactly the answer for its input, so a wrapped
// write (into early rows) or a wrapped read (of early rows' zeros) shows up.
//
// Memory: x is anonymous memory that is never written except in its last rows, so its 4.3 GB read as
// the kernel's zero page and cost almost nothing; y (4.3 GB) is real. Peak resident ≈ 4.4 GB, which
// the test prints. Label `slow` (tests/CMakeLists.txt): ~a minute on 2 cores.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "lnorm/format.hpp"
#include "lnorm/reference.hpp"
#include "lnorm/registry.hpp"

namespace {

using namespace lnorm;

constexpr std::int64_t kRows = std::int64_t{1} << 16, kCols = (std::int64_t{1} << 15) + 1;
constexpr std::int64_t kFilledRows = 4;  // random rows at the end; the rows before are all zero

// Anonymous memory: pages never written cost no RAM (they read as zeros).
struct Mapping {
  void* p = MAP_FAILED;
  std::size_t bytes;
  explicit Mapping(std::size_t n) : bytes(n) {
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  ~Mapping() {
    if (p != MAP_FAILED) ::munmap(p, bytes);
  }
  std::uint16_t* u16() const { return static_cast<std::uint16_t*>(p); }
};

long peak_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace

TEST_CASE("large: kernels index 2^31 + 2^16 bf16 elements with 64-bit offsets (last rows exact, nothing wraps)",
          "[large][slow]") {
  STATIC_REQUIRE(kRows * kCols > (std::int64_t{1} << 31));
  const auto elements = static_cast<std::size_t>(kRows * kCols);
  Mapping x(elements * 2), y(elements * 2);
  REQUIRE(x.p != MAP_FAILED);
  REQUIRE(y.p != MAP_FAILED);

  // The last rows: values of a few units around an offset, exact in bf16.
  const Format bf16 = format_of(DType::bf16);
  std::mt19937_64 rng(31);
  std::normal_distribution<double> nd;
  const std::size_t tail = static_cast<std::size_t>((kRows - kFilledRows) * kCols);
  for (std::size_t i = tail; i < elements; ++i)
    x.u16()[i] = static_cast<std::uint16_t>(double_to_bits(bf16, round_to_format(bf16, 8.0 + nd(rng))));

  const Problem whole = make_problem(kRows, kCols, DType::bf16, 1e-5, false, false, 2);
  // The exact answer for the tail rows and for one all-zero row (y = 0, mean 0, rstd = 1/sqrt(eps)).
  Problem part = whole;
  part.rows = kFilledRows;
  std::vector<std::uint16_t> want_tail(static_cast<std::size_t>(kFilledRows * kCols));
  std::vector<float> want_mean(kFilledRows + 1), want_rstd(kFilledRows + 1);
  reference(part, Tensors{x.u16() + tail, nullptr, nullptr, want_tail.data(), want_mean.data(), want_rstd.data()});
  const std::vector<std::uint16_t> zeros(static_cast<std::size_t>(kCols), 0);
  std::vector<std::uint16_t> want_zero_row(static_cast<std::size_t>(kCols));
  part.rows = 1;
  reference(part, Tensors{zeros.data(), nullptr, nullptr, want_zero_row.data(), &want_mean[kFilledRows],
                          &want_rstd[kFilledRows]});

  std::vector<float> mean(static_cast<std::size_t>(kRows)), rstd(mean.size());
  for (const KernelInfo& k : registry()) {
    if (const auto why = unavailable_reason(k, whole)) {
      WARN(k.name << ": skipped: " << *why);
      continue;
    }
    std::memset(y.p, 0xFF, y.bytes);  // NaN bits: a row the kernel never writes cannot pass
    std::fill(mean.begin(), mean.end(), -1.0f);
    const auto start = std::chrono::steady_clock::now();
    k.run(whole, Tensors{x.p, nullptr, nullptr, y.p, mean.data(), rstd.data()});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(k.name << ": " << whole.rows << " x " << whole.cols << " bf16 in " << seconds << " s, peak RSS "
                << peak_rss_mib() << " MiB");

    // Every zero row must be the zero row's exact answer (the rows are exact here for every kernel:
    // x - mean = 0). Compared row by row so a failure names the first bad row.
    std::int64_t bad_row = -1;
    for (std::int64_t r = 0; r < kRows - kFilledRows && bad_row < 0; ++r) {
      if (std::memcmp(y.u16() + r * kCols, want_zero_row.data(), static_cast<std::size_t>(kCols) * 2) != 0 ||
          mean[static_cast<std::size_t>(r)] != want_mean[kFilledRows])
        bad_row = r;
    }
    INFO(k.name << ": first zero row whose y or mean is wrong: " << bad_row);
    CHECK(bad_row == -1);

    // The tail rows, element by element. Correctly rounded kernels (avx2_cr) match the reference bit for
    // bit; the others within one bf16 ulp of it: the data are centred-ish (kappa ≈ 8), so every kernel's
    // budget in property_tests/budgets.toml is at most a few ulps, and a wrapped index gives garbage,
    // not a one-ulp difference.
    std::int64_t worst = 0;
    for (std::size_t i = 0; i < want_tail.size(); ++i) {
      const auto got = static_cast<std::int64_t>(y.u16()[tail + i]);
      const auto want = static_cast<std::int64_t>(want_tail[i]);
      // bf16 bit patterns of the same sign are ordered like their values; different signs count big.
      const std::int64_t d = ((got ^ want) & 0x8000) ? 1 << 16 : std::abs(got - want);
      worst = std::max(worst, d);
    }
    INFO(k.name << ": worst distance in bf16 ulps over the last " << kFilledRows << " rows: " << worst);
    CHECK(worst <= (k.cautionary ? 1 << 16 : 2));
    for (std::int64_t r = 0; r < kFilledRows; ++r) {
      const float got = mean[static_cast<std::size_t>(kRows - kFilledRows + r)];
      INFO(k.name << ": mean of row " << kRows - kFilledRows + r);
      CHECK(std::abs(got - want_mean[static_cast<std::size_t>(r)]) <= 1e-5f * std::abs(want_mean[static_cast<std::size_t>(r)]));
    }
  }
}
