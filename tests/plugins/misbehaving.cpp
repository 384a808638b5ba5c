// Test plugins that misbehave on purpose, for test_cli_plugin.cpp. One source, several builds:
//   (default)            plugin "crashy": crashy:segv dereferences null in run; crashy:picky is the
//                        example's correct two_pass but declines rows narrower than 4 (why_not)
//   -DLNORM_TEST_ABI=N   the same with abi_version N (0: older, 6: newer), which lnorm must refuse
//   -DLNORM_TEST_NO_ENTRY a shared library without lnorm_plugin_entry
#include <cstdio>

#include "../../examples/plugin/two_pass.hpp"

#ifndef LNORM_TEST_NO_ENTRY
namespace {

void segv(const lnorm_problem*, const lnorm_tensors*) {
  volatile float* nowhere = nullptr;
  *nowhere = 1.0f;  // the crash lnorm must name
}

int at_least_four_wide(const lnorm_problem* p, char* reason, size_t size) {
  if (p->cols >= 4) return 0;
  std::snprintf(reason, size, "needs rows of at least 4 elements, got %lld", static_cast<long long>(p->cols));
  return 1;
}

const lnorm_plugin_kernel kKernels[] = {
    {"segv", "crashes on every call", LNORM_DTYPE_BIT(LNORM_F32), nullptr, segv, LNORM_OP_BIT(LNORM_LAYERNORM)},
    {"picky", "two_pass, but only rows of 4 or more", LNORM_DTYPE_BIT(LNORM_F32), at_least_four_wide,
     demo::two_pass_f32<true>, LNORM_OP_BIT(LNORM_LAYERNORM)},
};

#ifdef LNORM_TEST_ABI
constexpr unsigned kAbi = LNORM_TEST_ABI;
#else
constexpr unsigned kAbi = LNORM_PLUGIN_ABI_VERSION;
#endif
const lnorm_plugin kPlugin = {kAbi, "crashy", sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
#else
extern "C" int lnorm_test_not_a_plugin(void) { return 0; }
#endif
