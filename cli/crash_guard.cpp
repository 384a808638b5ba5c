#include "crash_guard.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace lnorm::cli {

namespace {

// The running plugin kernel's name, or null. Atomic and lock-free, so the handler may read it.
std::atomic<const char*> g_running{nullptr};
std::atomic<bool> g_die_by_signal{false};
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
// Fixed buffers: the handler cannot allocate. g_remove_count is published after the paths are written.
char g_remove[kMaxRemoveOnCrash][4096];
std::atomic<int> g_remove_count{0};

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
  }
  for (int i = 0, n = g_remove_count.load(); i < n; ++i) ::unlink(g_remove[i]);
  if (!name || g_die_by_signal.load()) {
    // Not plugin code (lnorm's own bug: keep the default action, core dump included), or a sandboxed
    // child whose parent reads the signal from waitpid.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  ::_exit(1);
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
    return true;
  }();
  (void)installed;
}

void die_by_signal_on_crash() { g_die_by_signal.store(true); }

RemoveOnCrash::RemoveOnCrash(const std::vector<std::string>& paths) {
  int n = 0;
  for (const std::string& p : paths) {
    if (n == kMaxRemoveOnCrash || p.empty() || p.size() >= sizeof g_remove[0]) continue;
    std::memcpy(g_remove[n], p.c_str(), p.size() + 1);
    ++n;
  }
  g_remove_count.store(n);
}
RemoveOnCrash::~RemoveOnCrash() { g_remove_count.store(0); }

RunningPluginKernel::RunningPluginKernel(const char* name) : outer_(g_running.exchange(name)) {}
RunningPluginKernel::~RunningPluginKernel() { g_running.store(outer_); }

}  // namespace lnorm::cli
