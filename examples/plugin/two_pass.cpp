// The "demo" plugin: one correct f32 kernel, demo:two_pass. Build it against an installed lnorm
// (find_package(lnorm)) and gate it with `lnorm verify --plugin libdemo.so`.
#include "two_pass.hpp"

namespace {

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass", "two-pass mean and variance in double, f32 in and out", LNORM_DTYPE_BIT(LNORM_F32), nullptr,
     demo::two_pass_f32<true>},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "demo", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
