// A plain two-pass LayerNorm over f32 rows, the kind of kernel a user brings to lnorm. Statistics in
// double: a sequential double sum of n values errs by at most about n*2^-53 of sum|x|, which for the
// widths verify generates (up to 65537 = 2^16 + 1) stays below 2^-36 relative, far inside the 8 +
// 1*kappa f32 ulps of lnorm's default budget ([default.f32]); verify measured 0.5 scaled ulp.
// `kEpsInsideSqrt = false` plants the classic bug: 1/(sqrt(var) + eps).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "lnorm/plugin.h"

namespace demo {

template <bool kEpsInsideSqrt>
void two_pass_f32(const lnorm_problem* p, const lnorm_tensors* t) {
  const auto* x = static_cast<const float*>(t->x);
  const auto* gamma = static_cast<const float*>(t->gamma);
  const auto* beta = static_cast<const float*>(t->beta);
  auto* y = static_cast<float*>(t->y);
  auto* mean_out = static_cast<float*>(t->mean);
  auto* rstd_out = static_cast<float*>(t->rstd);
  const std::int64_t n = p->cols;
  for (std::int64_t r = 0; r < p->rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double sum = 0;
    bool finite = true;
    for (std::int64_t i = 0; i < n; ++i) {
      sum += xr[i];
      finite = finite && std::isfinite(xr[i]);
    }
    if (!finite) {  // a row holding NaN or Inf is NaN throughout (DESIGN.md), not Inf - Inf by accident
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (std::int64_t i = 0; i < n; ++i) yr[i] = nan;
      mean_out[r] = rstd_out[r] = nan;
      continue;
    }
    const double mean = sum / static_cast<double>(n);
    double ss = 0;
    for (std::int64_t i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    const double var = ss / static_cast<double>(n);
    const double rstd = kEpsInsideSqrt ? 1.0 / std::sqrt(var + p->eps) : 1.0 / (std::sqrt(var) + p->eps);
    for (std::int64_t i = 0; i < n; ++i) {
      const double g = gamma ? gamma[i] : 1.0, b = beta ? beta[i] : 0.0;
      yr[i] = static_cast<float>((xr[i] - mean) * rstd * g + b);
    }
    mean_out[r] = static_cast<float>(mean);
    rstd_out[r] = static_cast<float>(rstd);
  }
}

}  // namespace demo
