#include "crash_guard.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "lnorm/temp_files.hpp"

namespace lnorm::cli {

namespace {

// The running plugin kernel's name, or null. Atomic and lock-free, so the handler may read it.
std::atomic<const char*> g_running{nullptr};
std::atomic<bool> g_die_by_signal{false};
std::atomic<PluginNotes*> g_notes{nullptr};
char g_last[512];  // the plugin code that ran last (NUL-terminated: the last byte is never written)
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kTerminationSignals[] = {SIGINT, SIGTERM, SIGHUP};

// write(2) only: the handler may use nothing that allocates or locks.
void say(const char* s) {
  const std::size_t n = std::strlen(s);
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::write(STDERR_FILENO, s + done, n - done);
    if (w <= 0) return;
    done += static_cast<std::size_t>(w);
  }
}

const char* signal_text(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (misaligned or unmapped memory)";
    case SIGFPE: return "SIGFPE (arithmetic trap)";
    case SIGILL: return "SIGILL (an instruction this CPU lacks?)";
    case SIGABRT: return "SIGABRT (abort)";
  }
  return "a fatal signal";
}

void on_fatal_signal(int sig) {
  const char* name = g_running.load();
  if (name) {
    say("lnorm: plugin kernel ");
    say(name);
    say(" crashed: ");
    say(signal_text(sig));
    say("\n");
    if (PluginNotes* notes = g_notes.load()) notes->named.store(1);
  }
  io::remove_registered_temps();
  if (!name || g_die_by_signal.load()) {
    // Not plugin code (lnorm's own bug: keep the default action, core dump included), or a sandboxed
    // child whose parent reads the signal from waitpid.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  ::_exit(1);
}

// Ctrl-C, kill, a closed terminal: the temporaries go, then the signal's own action (the shell sees it).
void on_termination_signal(int sig) {
  io::remove_registered_temps();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_crash_guard() {
  static const bool installed = [] {
    // An alternate stack, so a kernel that overflows its own stack is still named.
    static char alt_stack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = alt_stack;
    ss.ss_size = sizeof alt_stack;
    ::sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    for (int sig : kFatalSignals) ::sigaction(sig, &sa, nullptr);
    struct sigaction term {};
    term.sa_handler = on_termination_signal;
    sigemptyset(&term.sa_mask);
    term.sa_flags = SA_RESETHAND;
    for (int sig : kTerminationSignals) {
      struct sigaction old {};
      // A signal the caller ignores (nohup's SIGHUP, a background job's SIGINT) stays ignored.
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      ::sigaction(sig, &term, nullptr);
    }
    return true;
  }();
  (void)installed;
}

void die_by_signal_on_crash() { g_die_by_signal.store(true); }

void share_plugin_notes(PluginNotes* notes) { g_notes.store(notes); }

std::string last_plugin_code() { return g_last; }

RunningPluginKernel::RunningPluginKernel(const char* name) : outer_(g_running.exchange(name)) {
  std::strncpy(g_last, name, sizeof g_last - 1);
  if (PluginNotes* notes = g_notes.load()) std::strncpy(notes->last, name, sizeof notes->last - 1);
}
RunningPluginKernel::~RunningPluginKernel() { g_running.store(outer_); }

}  // namespace lnorm::cli
