// Names the plugin kernel that was running when the process gets a fatal signal (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGABRT). lnorm's own kernels are tested here; a user's plugin is not, and "lnorm
// crashed" would send its author looking in the wrong place.
//
// A signal handler can only say so and end the process: after a wild write nothing in the address
// space can be trusted, so there is no resuming. Where a run must go on past a crashing kernel,
// `lnorm verify` runs each plugin kernel in a forked child (verify_sandbox.hpp) and this guard, in
// the child, ends it by the same signal so the parent learns which one.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>

namespace lnorm::cli {

// Installs the handlers (once; later calls do nothing). On a fatal signal while a RunningPluginKernel
// is alive, writes "lnorm: plugin kernel NAME crashed: SIGSEGV (...)" to stderr and exits 1 (the
// kernel failed), or, after die_by_signal_on_crash(), ends the process by that signal. Signals
// outside plugin code keep their default action. Every handler, SIGINT, SIGTERM and SIGHUP's included, first
// removes the temporary outputs in flight (lnorm/temp_files.hpp): an interrupted command leaves no `*.tmp.*`.
// The `lnorm` executable installs it before anything else (cli/main.cpp); the fuzz target, in libFuzzer's
// process, does not.
void install_crash_guard();
// In a sandboxed child: end by the signal itself, so the parent's waitpid sees which one.
void die_by_signal_on_crash();

// What a child tells its parent through memory they share (plugin_child.hpp): the last plugin code that ran, and
// whether the child's own handler already named a crash in it.
struct PluginNotes {
  char last[512];
  std::atomic<int> named;
};
// From now on RunningPluginKernel records into `notes` (memory shared with the parent), and the handler marks it.
void share_plugin_notes(PluginNotes* notes);
// The plugin code that ran last in this process ("" if none): who to name for damage found after its call returned.
std::string last_plugin_code();

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

// A plugin kernel that threw out of its call (C++ exceptions are no part of the C ABI): the command ends with exit
// 1 naming it, as for a crash, not as lnorm's internal error (exit 3).
struct PluginFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace lnorm::cli
