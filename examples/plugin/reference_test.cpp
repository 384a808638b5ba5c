// The kernel's own test, with lnorm's exact reference and metrics as a library: run demo's two_pass
// on rows far from zero mean (kappa ~ 1e4) and measure its scaled-ulp error against the exact answer
// rounded once, with DESIGN.md's general budget 8 + 1*kappa. Exit 0 within budget, 1 over.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "lnorm/metrics.hpp"
#include "lnorm/reference.hpp"
#include "two_pass.hpp"

int main() {
  const std::int64_t rows = 32, cols = 1000;
  const lnorm::Problem p = lnorm::make_problem(rows, cols, lnorm::DType::f32, 1e-5, true, true);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols), gamma(cols), beta(cols), y(x.size()), mean(rows), rstd(rows);
  for (float& v : x) v = 1e4f + normal(rng);  // offset rows: the mean carries kappa ~ 1e4
  for (float& v : gamma) v = 1.0f + 0.25f * normal(rng);
  for (float& v : beta) v = 0.1f * normal(rng);

  const lnorm_problem cp{p.rows, p.cols, LNORM_F32, 1, p.eps, 1, 1};
  const lnorm_tensors ct{x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data()};
  demo::two_pass_f32<true>(&cp, &ct);

  const lnorm::Format f = lnorm::format_of(lnorm::DType::f32);
  const lnorm::Budget budget{8, 1};  // DESIGN.md's general budget, as [default.f32]
  lnorm::RowReferencer ref(lnorm::DType::f32, p.eps);
  std::vector<float> exact(cols);
  std::vector<lnorm::ElementReference> elems(cols);
  lnorm::ErrorSummary summary;
  for (std::int64_t r = 0; r < rows; ++r) {
    const lnorm::RowReference row = ref.run(&x[r * cols], gamma.data(), beta.data(), cols, exact.data(), elems.data());
    for (std::int64_t i = 0; i < cols; ++i) {
      std::uint32_t got_bits, exact_bits;
      std::memcpy(&got_bits, &y[r * cols + i], 4);
      std::memcpy(&exact_bits, &exact[i], 4);
      summary.add(f, r * cols + i, y[r * cols + i], got_bits, exact_bits, elems[i], row.kappa, budget);
    }
  }
  std::printf("two_pass f32 %lldx%lld offset rows: max %.3g scaled ulp (kappa %.3g), %.4f%% correctly rounded, %lld over budget\n",
              static_cast<long long>(rows), static_cast<long long>(cols), summary.max_ulp, summary.max_ulp_kappa,
              100 * summary.correctly_rounded_fraction(), static_cast<long long>(summary.over_budget));
  return summary.within_budget() ? 0 : 1;
}
