// A version-5 plugin that declares its ops as their parts (lnorm_kernel_decl), for test_cli_plugin.cpp:
//   (default)                plugin "decl": decl:two_pass, the example's correct LayerNorm, declared as
//                            {LAYERNORM, NONE, Y, FWD} with its `ops` mask left zero
//   -DLNORM_TEST_UNKNOWN_OP  the same kernel also declaring "rmsnorm_nvfp4", an epilogue this lnorm does not
//                            know, which lnorm must refuse naming the op
#include <cstdio>

#include "../../examples/plugin/two_pass.hpp"

namespace {

// A version-5 kernel is offered every parameter convention; the demo's two_pass knows no gamma offset.
int no_offset(const lnorm_problem* p, char* reason, size_t size) {
  if (p->gamma_offset == 0) return 0;
  std::snprintf(reason, size, "takes no gamma offset");
  return 1;
}

const lnorm_op_desc kOps[] = {
    {"layernorm", LNORM_NORM_LAYERNORM, LNORM_PROLOGUE_NONE, LNORM_EPILOGUE_Y, LNORM_DIRECTION_FWD},
#ifdef LNORM_TEST_UNKNOWN_OP
    {"rmsnorm_nvfp4", LNORM_NORM_RMSNORM, LNORM_PROLOGUE_NONE, 7, LNORM_DIRECTION_FWD},
#endif
};
const lnorm_kernel_decl kDecl = {sizeof(lnorm_kernel_decl), kOps, sizeof kOps / sizeof kOps[0]};
const lnorm_kernel_decl* const kDecls[] = {&kDecl};

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass", "two-pass mean and variance in double, f32 in and out (ops declared as parts)", LNORM_DTYPE_BIT(LNORM_F32),
     no_offset, demo::two_pass_f32<true>, 0},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "decl", sizeof kKernels / sizeof kKernels[0], kKernels, kDecls};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
