#include "verify_sandbox.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string.h>  // strsignal (POSIX)
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "crash_guard.hpp"

namespace lnorm::cli {

namespace {

constexpr std::size_t kCaseNoteBytes = 4096;  // a case's describe() line, truncated

using verify::Outcome;
using verify::Property;
using verify::Status;

// The child's one message to the parent, as CBOR (which keeps NaN and Inf; JSON text would turn a
// worst error of Inf into null). Enums travel as numbers: both ends are this binary.
nlohmann::json to_json(const Outcome& o) {
  return {{"kernel", o.kernel}, {"op", static_cast<int>(code(o.op))}, {"dtype", static_cast<int>(o.dtype)}, {"property", static_cast<int>(o.property)},
          {"status", static_cast<int>(o.status)}, {"cases", o.cases}, {"seconds", o.seconds}, {"seed", o.seed},
          {"worst", o.worst}, {"classes", o.classes}, {"totals", o.totals}, {"correctly_rounded", o.correctly_rounded},
          {"message", o.message}, {"counterexample", o.counterexample}, {"reproduce", o.reproduce},
          {"expected_reason", o.expected_reason}, {"dumped", o.dumped}, {"check_command", o.check_command}};
}

Outcome from_json(const nlohmann::json& j) {
  Outcome o;
  o.kernel = j.at("kernel").get<std::string>();
  o.op = *op_of_code(j.at("op").get<unsigned>());
  o.dtype = static_cast<DType>(j.at("dtype").get<int>());
  o.property = static_cast<Property>(j.at("property").get<int>());
  o.status = static_cast<Status>(j.at("status").get<int>());
  o.cases = j.at("cases").get<int>();
  o.seconds = j.at("seconds").get<double>();
  o.seed = j.at("seed").get<std::uint64_t>();
  o.worst = j.at("worst").get<std::map<std::string, double>>();
  o.classes = j.at("classes").get<std::map<std::string, int>>();
  o.totals = j.at("totals").get<std::map<std::string, double>>();
  o.correctly_rounded = j.at("correctly_rounded").get<double>();
  o.message = j.at("message").get<std::string>();
  o.counterexample = j.at("counterexample").get<std::string>();
  o.reproduce = j.at("reproduce").get<std::string>();
  o.expected_reason = j.at("expected_reason").get<std::string>();
  o.dumped = j.at("dumped").get<std::vector<std::string>>();
  o.check_command = j.at("check_command").get<std::string>();
  return o;
}

void write_all(int fd, const std::string& s) {
  for (std::size_t done = 0; done < s.size();) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += static_cast<std::size_t>(w);
  }
}

std::string read_all(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<std::size_t>(n));
  }
  return s;
}

// Runs one property in a child. The child sends "R <cbor>" (its outcome) or "E <message>" (an
// exception, lnorm's internal error) through a pipe and _exits; a crash ends it by the signal.
Outcome one_property(const KernelInfo& kernel, Op op, DType dtype, const verify::KernelBudget& budget,
                     const verify::Settings& settings, Property p) {
  verify::Settings one = settings;
  one.properties = {p};
  // The case running, written by the child before each case and read by the parent if a timeout ends it.
  void* shared = ::mmap(nullptr, kCaseNoteBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  const struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, kCaseNoteBytes); }
  } unmap{shared};
  char* case_note = static_cast<char*>(shared);
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  // Buffered output would otherwise be written twice, once by each process.
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    // Dies with verify: a verify killed alone (SIGINT to its pid, SIGKILL) leaves no child holding the pipe.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    die_by_signal_on_crash();
    // Each case restarts the timer; SIGALRM's default action ends the child, and the parent names the case.
    const auto timeout = static_cast<unsigned>(std::ceil(settings.case_timeout_s));
    one.on_case = [case_note, timeout](const verify::CaseSpec& spec) {
      const std::string d = spec.describe();
      const std::size_t n = std::min(d.size(), kCaseNoteBytes - 1);
      std::memcpy(case_note, d.data(), n);
      case_note[n] = '\0';
      if (timeout > 0) ::alarm(timeout);
    };
    try {
      const std::vector<Outcome> got = verify::verify_kernel(kernel, op, dtype, budget, one);
      ::alarm(0);
      const std::vector<std::uint8_t> cbor = nlohmann::json::to_cbor(to_json(got.at(0)));
      write_all(fds[1], "R " + std::string(cbor.begin(), cbor.end()));
      ::_exit(0);
    } catch (const std::exception& e) {
      write_all(fds[1], std::string("E ") + e.what());
    } catch (...) {
      write_all(fds[1], "E unknown exception");
    }
    ::_exit(3);
  }
  ::close(fds[1]);
  const std::string msg = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && msg.rfind("R ", 0) == 0) return from_json(nlohmann::json::from_cbor(msg.substr(2)));
  if (msg.rfind("E ", 0) == 0) throw std::runtime_error("verify " + std::string(kernel.name) + ": " + msg.substr(2));
  Outcome o;
  o.kernel = std::string(kernel.name);
  o.op = op;
  o.dtype = dtype;
  o.property = p;
  o.status = Status::fail;
  o.reproduce = settings.command + (op == Op::layernorm ? "" : " --op " + std::string(name(op))) + " --kernel " + o.kernel + " --dtype " + std::string(name(dtype)) + " --property " +
                std::string(verify::name(p)) + " --seed " + std::to_string(settings.seed) + " --cases " +
                std::to_string(settings.default_cases());
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM && settings.case_timeout_s > 0) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", settings.case_timeout_s);
    o.message = std::string("a case took longer than --case-timeout ") + limit + " s (the kernel hangs, or is that slow?): " +
                std::string(case_note, ::strnlen(case_note, kCaseNoteBytes));
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    o.message = "the kernel crashed: signal " + std::to_string(sig) + " (" + ::strsignal(sig) +
                "); the case died with the process: run the reproduce line under a debugger";
  } else {
    o.message = "the verifying process ended with exit status " + std::to_string(WEXITSTATUS(status)) +
                " before it reported (the kernel called exit?)";
  }
  return o;
}

}  // namespace

std::vector<Outcome> verify_in_child(const KernelInfo& kernel, Op op, DType dtype, const verify::KernelBudget& budget,
                                     const verify::Settings& settings, const verify::Progress& progress) {
  std::vector<Outcome> out;
  for (Property p : settings.properties.empty() ? verify::properties_for(op) : settings.properties) {
    if (!verify::runs_property(kernel, p, op)) continue;
    if (progress) progress(kernel.name, dtype, p);
    out.push_back(one_property(kernel, op, dtype, budget, settings, p));
  }
  return out;
}

}  // namespace lnorm::cli
