// avx2_cr against the exact reference, bit for bit: the foundation cases, exact ties that the f64
// path cannot tell from near ones, and how rarely its slow paths run on ordinary rows (printed).
#include <cmath>
#include <cstdio>
#include <vector>

#include <catch2/catch.hpp>

#include "isa.hpp"
#include "kernel_cases.hpp"
#include "lnorm/registry.hpp"

using namespace lnorm;
using lnorm::testing::foundation_cases;
using lnorm::testing::measure;

namespace {

const DType kCrTypes[] = {DType::f32, DType::f16, DType::bf16};

// avx2_cr, or null (with the reason printed) where this CPU cannot run it.
const KernelInfo* avx2_cr_here() {
  const KernelInfo* k = find_kernel("avx2_cr");
  REQUIRE(k != nullptr);
  if (auto why = unavailable_reason(*k, make_problem(1, 8, DType::f32, 1e-5, false, false))) {
    std::printf("skipped: avx2_cr unavailable here (%s)\n", why->c_str());
    return nullptr;
  }
  return k;
}

struct RunResult {
  std::int64_t elements = 0, correctly_rounded = 0;
};

// rows x n of x with gamma and beta through avx2_cr, compared with the reference rounded once.
RunResult run_against_reference(const KernelInfo& k, DType d, std::int64_t rows, std::int64_t n,
                                const std::vector<double>& x, const std::vector<double>& g,
                                const std::vector<double>& b, double eps) {
  const Format f = format_of(d);
  const std::size_t es = size_of(d), ss = size_of(stats_dtype(d));
  const auto xb = testing::encode(d, x), gb = testing::encode(d, g), bb = testing::encode(d, b);
  std::vector<std::byte> y(xb.size()), mean(static_cast<std::size_t>(rows) * ss), rstd(mean.size());
  const Problem p = make_problem(rows, n, d, eps, true, true);
  k.run(p, Tensors{xb.data(), gb.data(), bb.data(), y.data(), mean.data(), rstd.data()});
  RowReferencer ref(d, p.eps);
  std::vector<std::byte> exact(static_cast<std::size_t>(n) * es);
  std::vector<ElementReference> elems(static_cast<std::size_t>(n));
  RunResult out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto off = static_cast<std::size_t>(r * n) * es;
    ref.run(xb.data() + off, gb.data(), bb.data(), n, exact.data(), elems.data());
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      const std::uint64_t got = testing::bits_at(y, es, static_cast<std::size_t>(r * n) + i);
      ++out.elements;
      if (correctly_rounded(f, got, testing::bits_at(exact, es, i))) ++out.correctly_rounded;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("avx2_cr kernels: every foundation case correctly rounded, every element", "[kernels][avx2_cr]") {
  const KernelInfo* k = avx2_cr_here();
  if (!k) return;
  for (DType d : kCrTypes) {
    for (const auto& c : foundation_cases(d)) {
      const auto m = measure(*k, d, c.x, c.eps, Budget{1, 0});
      INFO(name(d) << " " << c.label << ": " << m.y.correctly_rounded << " of " << m.y.elements
                   << " correctly rounded, max " << m.y.max_ulp << " scaled ulp");
      CHECK(m.y.correctly_rounded == m.y.elements);
    }
  }
}

// A row of n − 1 zeros and one 1 with n − 1 = 4^j has z = −2^-j exactly for the zeros (eps = 0). With
// gamma = 1 + 2^(j−p−1) and beta = 1, y = (1 − 2^-j) − 2^-(p+1): exactly halfway between two values of
// the p-bit format, which must round to even. f64 alone puts it a few 2^-53 to one side.
TEST_CASE("avx2_cr kernels: exact ties round to even (zero rows with one outlier)", "[kernels][avx2_cr]") {
  const KernelInfo* k = avx2_cr_here();
  if (!k) return;
  for (DType d : kCrTypes) {
    const int p = format_of(d).precision;
    for (int j : {2, 3, 4, 6}) {
      const std::int64_t n = (std::int64_t{1} << (2 * j)) + 1;
      std::vector<double> x(static_cast<std::size_t>(n), 0.0);
      x.back() = 1;
      const std::vector<double> g(x.size(), 1 + std::ldexp(1.0, j - p - 1)), b(x.size(), 1.0);
      const RunResult r = run_against_reference(*k, d, 1, n, x, g, b, 0.0);
      INFO(name(d) << " n = " << n << ": " << r.correctly_rounded << " of " << r.elements << " correctly rounded");
      CHECK(r.correctly_rounded == r.elements);
    }
  }
}

// Near-ties the verify suite found, each misrounded by an earlier version of the exact path: 65537-wide
// zero rows with one outlier (z = 1/256 exactly: ties with eps = 0 — the double-double sums' error
// terms summed plainly lost rstd to 2^-80 — and a cancelling beta), n = 2 rows near f32's max with a
// tiny eps and subnormal rows with eps = 1 (both: y* a hair below a tie, at 2^-250 relative).
TEST_CASE("avx2_cr kernels: near-ties from the verify suite (seeds 1, 4, 24)", "[kernels][avx2_cr]") {
  const KernelInfo* k = avx2_cr_here();
  if (!k) return;
  {
    const std::int64_t n = 65537;
    std::vector<double> x(static_cast<std::size_t>(n), 0.0);
    x[36542] = -0x1.34p+7;
    const std::vector<double> g(x.size(), 0x1.8cp-1), b(x.size(), 0x1.82p-7);
    const RunResult r = run_against_reference(*k, DType::bf16, 1, n, x, g, b, 0.0);
    INFO("bf16 65537 zeros + one outlier: " << r.correctly_rounded << " of " << r.elements);
    CHECK(r.correctly_rounded == r.elements);
  }
  {  // γ/256 cancels β exactly: y* = −γ/256·eps/(2·var), 2^-50 of the terms (the double-double's low part
     // was 7% of y and had to be renormalized before rounding)
    const std::int64_t n = 65537;
    std::vector<double> x(static_cast<std::size_t>(n), 0.0);
    x[32332] = -0x1.7ap+10;
    const std::vector<double> g(x.size(), 0x1.74p+0), b(x.size(), -0x1.74p-8);
    const RunResult r = run_against_reference(*k, DType::bf16, 1, n, x, g, b, 0x1.669544p-45);
    INFO("bf16 65537 zeros + one outlier, cancelling beta: " << r.correctly_rounded << " of " << r.elements);
    CHECK(r.correctly_rounded == r.elements);
  }
  {
    const std::vector<double> x{-0x1.9600f6p+127, -0x1.8edd2p+127}, g(2, 0x1.4f0fbp+0), b(2, -0x1.7b51bep+0);
    const RunResult r = run_against_reference(*k, DType::f32, 1, 2, x, g, b, 0x1.be1b98p-40);
    INFO("f32 n = 2 near max: " << r.correctly_rounded << " of " << r.elements);
    CHECK(r.correctly_rounded == r.elements);
  }
  {
    const std::vector<double> x{0x1.a8p-128, 0x1.ep-128, -0x1.7p-127, 0x1.bp-127, 0x1.cp-128, 0x1.08p-127, 0x1.08p-128, -0x1.8p-128};
    const std::vector<double> g(x.size(), 1.0), b(x.size(), 0.0);
    const RunResult r = run_against_reference(*k, DType::bf16, 1, 8, x, g, b, 1.0);
    INFO("bf16 subnormal row, eps = 1: " << r.correctly_rounded << " of " << r.elements);
    CHECK(r.correctly_rounded == r.elements);
  }
}

// A mean 2^-113 of the row's spread: ±2^127 four times each and one small value (found by Add & Norm's
// add_rounding as a sum of cancelling residuals, shrunk by hand). The small value's y* = 1.448e-36 is
// far inside the double-double mean's error (2^-100 of the spread), which read it as 0 (beta = 0):
// the exact path now decides x − mean exactly (FixedSum) for near-zero y with beta = 0.
TEST_CASE("avx2_cr kernels: y near 0 where the mean is far below the spread (exact x − mean)", "[kernels][avx2_cr]") {
  const KernelInfo* k = avx2_cr_here();
  if (!k) return;
  for (double beta : {0.0, 0.5}) {
    std::vector<double> x{0x1p127, 0x1p127, 0x1p127, 0x1p127, -0x1p127, -0x1p127, -0x1p127, -0x1p127, 261.348876953125};
    const std::vector<double> g(x.size(), 1.0), b(x.size(), beta);
    const RunResult r = run_against_reference(*k, DType::f32, 1, static_cast<std::int64_t>(x.size()), x, g, b, 0x1.04e74cp-8);
    INFO("f32 cancelling huge row, beta " << beta << ": " << r.correctly_rounded << " of " << r.elements);
    CHECK(r.correctly_rounded == r.elements);
    // The same with a zero among them: y* = −mean·rstd, tiny and non-zero.
    x[1] = 0;
    x[5] = 0;
    const RunResult z = run_against_reference(*k, DType::f32, 1, static_cast<std::int64_t>(x.size()), x, g, b, 0x1.04e74cp-8);
    INFO("with zeros: " << z.correctly_rounded << " of " << z.elements);
    CHECK(z.correctly_rounded == z.elements);
  }
}

// The point of the design: on ordinary rows (normal x, gamma, beta) nearly every element leaves
// through the vector path. Measured here (path counts printed): see cr_exact.hpp's header. The check
// is loose (2^-8 of elements to the double-double path) but fails if the bound is ever as wide as
// an output ulp.
TEST_CASE("avx2_cr kernels: correctly rounded on 64x4096 normal rows, slow paths rare (counts printed)",
          "[kernels][avx2_cr]") {
  const KernelInfo* k = avx2_cr_here();
  if (!k) return;
  const std::int64_t rows = 64, n = 4096;
  for (DType d : kCrTypes) {
    const auto before = cpu::cr_paths();
    const RunResult r = run_against_reference(*k, d, rows, n, testing::normal(d, rows * n, 0.5, 2, 5),
                                              testing::normal(d, n, 1, 0.25, 6), testing::normal(d, n, 0, 1, 7), 1e-5);
    const auto after = cpu::cr_paths();
    const long long elements = after.elements - before.elements, medium = after.medium - before.medium;
    const long long exact = after.exact - before.exact, exact_rows = after.exact_rows - before.exact_rows;
    std::printf("avx2_cr %s %lldx%lld: %lld elements, %lld by the scalar f64 test (%.3g), %lld by double-double "
                "(%.3g) in %lld rows\n",
                std::string(name(d)).c_str(), (long long)rows, (long long)n, elements, medium,
                static_cast<double>(medium) / static_cast<double>(elements), exact,
                static_cast<double>(exact) / static_cast<double>(elements), exact_rows);
    INFO(name(d) << ": " << r.correctly_rounded << " of " << r.elements << " correctly rounded; " << medium
                 << " medium, " << exact << " exact");
    CHECK(r.correctly_rounded == r.elements);
    CHECK(elements == rows * n);
    CHECK(exact * 256 <= elements);
  }
}
