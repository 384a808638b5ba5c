// The "demo_buggy" plugin: demo_buggy:two_pass, the same kernel with eps outside the square root,
// 1/(sqrt(var) + eps). Harmless while var >> eps, so a test on normal data passes it; verify's
// eps_edges property (rows with var near or below eps) is what catches it.
#include "two_pass.hpp"

namespace {

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass", "two-pass in double with eps outside the sqrt (a planted bug)", LNORM_DTYPE_BIT(LNORM_F32),
     nullptr, demo::two_pass_f32<false>},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "demo_buggy", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
