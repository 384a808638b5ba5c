// Names the plugin kernel that was running when the process gets a fatal signal (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGABRT). lnorm's own kernels are tested here; a user's plugin is not, and "lnorm
// crashed" would send its author looking in the wrong place.
//
// A signal handler can only say so and end the process: after a wild write nothing in the address
// space can be trusted, so there is no resuming. Where a run must go on past a crashing kernel,
// `lnorm verify` runs each plugin kernel in a forked child (verify_sandbox.hpp) and this guard, in
// the child, ends it by the same signal so the parent learns which one.
#pragma once

#include <string>
#include <vector>

namespace lnorm::cli {

// Installs the handlers (once; later calls do nothing). On a fatal signal while a RunningPluginKernel
// is alive, writes "lnorm: plugin kernel NAME crashed: SIGSEGV (...)" to stderr and exits 1 (the
// kernel failed), or, after die_by_signal_on_crash(), ends the process by that signal. Signals
// outside plugin code keep their default action.
void install_crash_guard();
// In a sandboxed child: end by the signal itself, so the parent's waitpid sees which one.
void die_by_signal_on_crash();

// Marks a plugin kernel as running for the guard, for the lifetime of this object. `name` must
// outlive it. Nesting restores the outer name.
class RunningPluginKernel {
 public:
  explicit RunningPluginKernel(const char* name);
  ~RunningPluginKernel();
  RunningPluginKernel(const RunningPluginKernel&) = delete;
  RunningPluginKernel& operator=(const RunningPluginKernel&) = delete;

 private:
  const char* outer_;
};

// Files the handler unlinks before the process ends, for this object's lifetime: the temporary
// outputs of `lnorm run`, so a crashing kernel leaves no partial file behind (DESIGN's CLI contract).
// Up to kMaxRemoveOnCrash paths shorter than 4096 bytes; longer lists or paths are not all covered.
inline constexpr int kMaxRemoveOnCrash = 8;
class RemoveOnCrash {
 public:
  explicit RemoveOnCrash(const std::vector<std::string>& paths);
  ~RemoveOnCrash();
  RemoveOnCrash(const RemoveOnCrash&) = delete;
  RemoveOnCrash& operator=(const RemoveOnCrash&) = delete;
};

}  // namespace lnorm::cli
