// One f32 RMSNorm row with mean(x^2) in double, shared by the "rms" and "addrms" example plugins:
//     rstd = 1/sqrt(mean(x^2) + eps),  y = x * rstd * (C + gamma) (+ beta)
// with C the gamma offset lnorm passes (1 for Gemma's (1 + w), else 0). A sequential double sum of n squares
// errs by at most about n*2^-53 relative, far inside the [rmsnorm.default.f32] budget of 8 scaled ulps.
// A row holding NaN or Inf is NaN throughout (docs/DESIGN.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace example {

// rstd_out: where rstd goes, or null.
inline void rms_row_f32(const float* x, float* y, std::int64_t n, double eps, const float* gamma, const float* beta,
                        double gamma_offset, float* rstd_out) {
  double ss = 0;
  bool finite = true;
  for (std::int64_t i = 0; i < n; ++i) {
    ss += static_cast<double>(x[i]) * x[i];  // f32 squares are exact in double: no overflow near f32's max
    finite = finite && std::isfinite(x[i]);
  }
  if (!finite) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::int64_t i = 0; i < n; ++i) y[i] = nan;
    if (rstd_out) *rstd_out = nan;
    return;
  }
  const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (std::int64_t i = 0; i < n; ++i) {
    const double w = gamma ? gamma_offset + gamma[i] : 1.0, b = beta ? beta[i] : 0.0;
    y[i] = static_cast<float>(x[i] * rstd * w + b);
  }
  if (rstd_out) *rstd_out = static_cast<float>(rstd);
}

}  // namespace example
