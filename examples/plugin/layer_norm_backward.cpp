// The "bwd" plugin (plugin ABI version 4): LayerNorm's and RMSNorm's backward over f32 rows, the kernel a user
// brings for training. bwd:two_pass recomputes each row's statistics in double (two passes; it ignores the
// forward's saved f32 mean and rstd, whose rstd is +Inf on subnormal rows with eps = 0 and whose mean costs
// kappa ulps on offset rows), forms dx = rstd*(g - mean(g) - xhat*mean(g*xhat)) in double and rounds it once,
// and sums dgamma and dbeta per column in double, in row order, on one thread (so the bits cannot depend on
// the thread count). bwd:no_mean_g plants a classic bug: LayerNorm's dx without its mean(g) term (RMSNorm's
// formula), which `lnorm verify --dir bwd` catches by the law sum_i dx_i = 0.
//     lnorm verify --plugin libbwd.so --kernel bwd:two_pass --dir bwd
#include <cmath>
#include <cstdint>
#include <vector>

#include "lnorm/plugin.h"

namespace {

template <bool kMeanG>
void backward_f32(const lnorm_problem* p, const lnorm_tensors* t) {
  const auto* x = static_cast<const float*>(t->x);
  const auto* dy = static_cast<const float*>(t->dy);
  const auto* gamma = static_cast<const float*>(t->gamma);
  auto* dx = static_cast<float*>(t->dx);
  const std::int64_t n = p->cols;
  const bool centred = p->op == LNORM_LAYERNORM_BWD;
  std::vector<double> dgamma(static_cast<std::size_t>(n), 0.0), dbeta(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t r = 0; r < p->rows; ++r) {
    const float* xr = x + r * n;
    const float* dyr = dy + r * n;
    double mean = 0, ss = 0;
    if (centred) {
      for (std::int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= static_cast<double>(n);
    }
    for (std::int64_t i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    // A NaN or Inf in the row makes mean, ss and so every xhat NaN: its dx row and every dgamma column.
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(n) + p->eps);
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double w = gamma ? p->gamma_offset + gamma[i] : 1.0;
      const double g = dyr[i] * w, xhat = (xr[i] - mean) * rstd;
      sum_g += g;
      sum_gx += g * xhat;
    }
    const double mean_g = kMeanG && centred ? sum_g / static_cast<double>(n) : 0.0;
    const double mean_gx = sum_gx / static_cast<double>(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double w = gamma ? p->gamma_offset + gamma[i] : 1.0;
      const double xhat = (xr[i] - mean) * rstd;
      dx[r * n + i] = static_cast<float>(rstd * (dyr[i] * w - mean_g - xhat * mean_gx));
      dgamma[static_cast<std::size_t>(i)] += dyr[i] * xhat;
      dbeta[static_cast<std::size_t>(i)] += dyr[i];
    }
  }
  // f32 x: dgamma and dbeta are f32 too (param_dtype is x's dtype for f32 data).
  for (std::int64_t j = 0; j < n; ++j) {
    if (t->dgamma) static_cast<float*>(t->dgamma)[j] = static_cast<float>(dgamma[static_cast<std::size_t>(j)]);
    if (t->dbeta) static_cast<float*>(t->dbeta)[j] = static_cast<float>(dbeta[static_cast<std::size_t>(j)]);
  }
}

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass", "LayerNorm/RMSNorm backward, statistics and sums in double, f32 in and out (takes the gamma offset)",
     LNORM_DTYPE_BIT(LNORM_F32), nullptr, backward_f32<true>, LNORM_OP_BIT(LNORM_LAYERNORM_BWD) | LNORM_OP_BIT(LNORM_RMSNORM_BWD)},
    {"no_mean_g", "two_pass without LayerNorm's mean(g) term (a planted bug)", LNORM_DTYPE_BIT(LNORM_F32), nullptr,
     backward_f32<false>, LNORM_OP_BIT(LNORM_LAYERNORM_BWD)},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "bwd", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
