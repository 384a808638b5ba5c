// Test plugins that misbehave on purpose, for test_cli_plugin.cpp and test_cli_plugin_faults.cpp. One source,
// several builds:
//   (default)             plugin "crashy": crashy:segv dereferences null in run; crashy:picky is the
//                         example's correct two_pass but declines rows narrower than 4 (why_not)
//   -DLNORM_TEST_ABI=N    the same with abi_version N (0: older, 6: newer), which lnorm must refuse
//   -DLNORM_TEST_NO_ENTRY a shared library without lnorm_plugin_entry
//   -DLNORM_TEST_FAULT=F  plugin "faulty", one kernel faulty:F that does fault F after computing two_pass's y:
//     1 throws   throws a C++ exception out of run (lnorm must say so and exit 1, not 3)
//     2 oob      writes 4 KiB past the end of y (heap corruption that crashes lnorm later, or not at all)
//     3 hang     never returns (verify's per-case timeout must end it)
//     4 dup      no fault in run: the plugin declares two kernels named faulty:dup
//     5 static   a static constructor dereferences null while the plugin loads
//     6 touches  writes into its const x after computing y (verify must name x; the file x was read from must not
//                change)
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

#include "../../examples/plugin/two_pass.hpp"

#ifndef LNORM_TEST_NO_ENTRY
namespace {

#ifndef LNORM_TEST_FAULT
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
constexpr const char* kPluginName = "crashy";
#else
constexpr int kFault = LNORM_TEST_FAULT;
constexpr const char* kFaultNames[] = {"", "throws", "oob", "hang", "dup", "static", "touches"};

void faulty(const lnorm_problem* p, const lnorm_tensors* t) {
  demo::two_pass_f32<true>(p, t);
  const auto bytes = static_cast<std::size_t>(p->rows * p->cols) * sizeof(float);
  if (kFault == 1) throw std::runtime_error("faulty: thrown on purpose");
  if (kFault == 2) std::memset(static_cast<char*>(t->y) + bytes, 0x5A, 4096);
  if (kFault == 3)
    for (;;) ::pause();
  if (kFault == 6) const_cast<float*>(static_cast<const float*>(t->x))[p->cols / 2] += 1.0f;
}

#if LNORM_TEST_FAULT == 5
int* volatile nowhere = nullptr;  // read at run time: a store through a known null the compiler deletes
struct CrashesOnLoad {
  CrashesOnLoad() { *nowhere = 1; }
} crashes_on_load;
#endif

const lnorm_plugin_kernel kKernels[] = {
    {kFaultNames[kFault], "two_pass with a planted fault", LNORM_DTYPE_BIT(LNORM_F32), nullptr, faulty,
     LNORM_OP_BIT(LNORM_LAYERNORM)},
#if LNORM_TEST_FAULT == 4
    {kFaultNames[kFault], "the same name again", LNORM_DTYPE_BIT(LNORM_F32), nullptr, faulty,
     LNORM_OP_BIT(LNORM_LAYERNORM)},
#endif
};
constexpr const char* kPluginName = "faulty";
#endif

#ifdef LNORM_TEST_ABI
constexpr unsigned kAbi = LNORM_TEST_ABI;
#else
constexpr unsigned kAbi = LNORM_PLUGIN_ABI_VERSION;
#endif
const lnorm_plugin kPlugin = {kAbi, kPluginName, sizeof kKernels / sizeof kKernels[0], kKernels};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
#else
extern "C" int lnorm_test_not_a_plugin(void) { return 0; }
#endif
