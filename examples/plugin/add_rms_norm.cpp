// The "addrms" plugin (plugin ABI version 3): a fused add + RMSNorm, addrms:add_rms, as vLLM's
// fused_add_rms_norm computes it in f32 — h = x + residual rounded once to f32 (one IEEE addition), written
// to tensors->h, then the RMSNorm of h as stored (rms_row.hpp). It implements the plain RMSNorm too
// (residual and h NULL). Gate it with `lnorm verify --plugin libaddrms.so --op add_rmsnorm`: verify checks h
// bit for bit and y under RMSNorm's laws and Add & Norm's own.
#include <cstdint>

#include "lnorm/plugin.h"
#include "rms_row.hpp"

namespace {

void add_rms(const lnorm_problem* p, const lnorm_tensors* t) {
  const std::int64_t n = p->cols;
  auto* rstd = static_cast<float*>(t->rstd);
  for (std::int64_t r = 0; r < p->rows; ++r) {
    const float* in = static_cast<const float*>(t->x) + r * n;
    if (p->op == LNORM_ADD_RMSNORM) {  // h = x + residual, then the norm reads h
      const float* res = static_cast<const float*>(t->residual) + r * n;
      float* h = static_cast<float*>(t->h) + r * n;
      for (std::int64_t i = 0; i < n; ++i) h[i] = in[i] + res[i];
      in = h;
    }
    example::rms_row_f32(in, static_cast<float*>(t->y) + r * n, n, p->eps, static_cast<const float*>(t->gamma),
                         static_cast<const float*>(t->beta), p->gamma_offset, rstd ? rstd + r : nullptr);
  }
}

const lnorm_plugin_kernel kKernels[] = {
    {"add_rms", "x + residual in f32, then RMSNorm with mean(x^2) in double (and the plain RMSNorm)",
     LNORM_DTYPE_BIT(LNORM_F32), nullptr, add_rms, LNORM_OP_BIT(LNORM_RMSNORM) | LNORM_OP_BIT(LNORM_ADD_RMSNORM)},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "addrms", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
