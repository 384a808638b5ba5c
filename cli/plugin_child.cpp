#include "plugin_child.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <new>
#include <string.h>  // strsignal (POSIX)
#include <string_view>

#include "crash_guard.hpp"

namespace lnorm::cli {

namespace {

pid_t g_child = 0;

// The parent passes Ctrl-C, kill and hang-ups on to the child (whose handlers remove its temporaries), then waits.
void forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

bool loads_plugins(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) == "verify") return false;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--plugin" || a.rfind("--plugin=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::optional<int> run_plugins_in_child(int argc, char** argv) {
  if (!loads_plugins(argc, argv)) return std::nullopt;
  void* shared = ::mmap(nullptr, sizeof(PluginNotes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return std::nullopt;  // no sandbox, but the command still runs (and its guard names crashes)
  auto* notes = new (shared) PluginNotes{};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    // The child dies with its parent (a parent killed by SIGKILL cannot pass the signal on), by SIGTERM, whose
    // handler removes the temporaries.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    share_plugin_notes(notes);
    die_by_signal_on_crash();
    return std::nullopt;
  }
  g_child = pid;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, forward);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WTERMSIG(status);
  if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {  // interrupted: end as the child did
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return 128 + sig;
  }
  if (!notes->named.load()) {  // the child's handler named a crash inside plugin code; this one came after it
    const char* last = notes->last[0] ? notes->last : nullptr;
    std::fprintf(stderr,
                 "lnorm: crashed: signal %d (%s)%s%s%s; no output was written\n", sig, ::strsignal(sig),
                 last ? " after plugin code ran: " : "", last ? last : "",
                 last ? " (a plugin that writes outside its outputs corrupts lnorm's memory; `lnorm verify --plugin` "
                        "checks every write a kernel makes)"
                      : "");
  }
  return 1;
}

}  // namespace lnorm::cli
