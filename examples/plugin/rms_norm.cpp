// The "rms" plugin (written for plugin ABI version 2; it builds against later headers unchanged): one
// correct f32 RMSNorm, rms:two_pass_rms, the kind of kernel a user brings for a Llama-style model (the row:
// rms_row.hpp). The kernel has no mean output (lnorm passes mean = NULL for RMSNorm). Gate it with
// `lnorm verify --plugin librms.so --op rmsnorm`.
#include <cstdint>

#include "lnorm/plugin.h"
#include "rms_row.hpp"

namespace {

void two_pass_rms(const lnorm_problem* p, const lnorm_tensors* t) {
  const auto* x = static_cast<const float*>(t->x);
  auto* y = static_cast<float*>(t->y);
  auto* rstd = static_cast<float*>(t->rstd);
  // f32 x: parameters are f32 too
  for (std::int64_t r = 0; r < p->rows; ++r)
    example::rms_row_f32(x + r * p->cols, y + r * p->cols, p->cols, p->eps, static_cast<const float*>(t->gamma),
                         static_cast<const float*>(t->beta), p->gamma_offset, rstd ? rstd + r : nullptr);
}

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass_rms", "RMSNorm, mean(x^2) in double, f32 in and out (takes the gamma offset)", LNORM_DTYPE_BIT(LNORM_F32),
     nullptr, two_pass_rms, LNORM_OP_BIT(LNORM_RMSNORM)},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "rms", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
