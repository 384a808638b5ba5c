// The "rms" plugin (plugin ABI version 2): one correct f32 RMSNorm, rms:two_pass_rms, the kind of kernel a
// user brings for a Llama-style model:
//     rstd = 1/sqrt(mean(x^2) + eps),  y = x * rstd * (C + gamma) (+ beta)
// with C the gamma offset lnorm passes (1 for Gemma's (1 + w), else 0). mean(x^2) in double: a sequential
// double sum of n squares errs by at most about n*2^-53 relative, far inside the [rmsnorm.default.f32]
// budget of 8 scaled ulps. The kernel has no mean output (lnorm passes mean = NULL for RMSNorm). Gate it
// with `lnorm verify --plugin librms.so --op rmsnorm`.
#include <cmath>
#include <cstdint>
#include <limits>

#include "lnorm/plugin.h"

namespace {

void two_pass_rms(const lnorm_problem* p, const lnorm_tensors* t) {
  const auto* x = static_cast<const float*>(t->x);
  const auto* gamma = static_cast<const float*>(t->gamma);  // f32 x: parameters are f32 too
  const auto* beta = static_cast<const float*>(t->beta);
  auto* y = static_cast<float*>(t->y);
  auto* rstd_out = static_cast<float*>(t->rstd);
  const std::int64_t n = p->cols;
  for (std::int64_t r = 0; r < p->rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double ss = 0;
    bool finite = true;
    for (std::int64_t i = 0; i < n; ++i) {
      ss += static_cast<double>(xr[i]) * xr[i];  // f32 squares are exact in double: no overflow near f32's max
      finite = finite && std::isfinite(xr[i]);
    }
    if (!finite) {  // a row holding NaN or Inf is NaN throughout (docs/DESIGN.md)
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (std::int64_t i = 0; i < n; ++i) yr[i] = nan;
      if (rstd_out) rstd_out[r] = nan;
      continue;
    }
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(n) + p->eps);
    for (std::int64_t i = 0; i < n; ++i) {
      const double w = gamma ? p->gamma_offset + gamma[i] : 1.0, b = beta ? beta[i] : 0.0;
      yr[i] = static_cast<float>(xr[i] * rstd * w + b);
    }
    if (rstd_out) rstd_out[r] = static_cast<float>(rstd);
  }
}

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass_rms", "RMSNorm, mean(x^2) in double, f32 in and out (takes the gamma offset)", LNORM_DTYPE_BIT(LNORM_F32),
     nullptr, two_pass_rms, LNORM_OP_BIT(LNORM_RMSNORM)},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "rms", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
