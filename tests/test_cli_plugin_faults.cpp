// Specifications for plugins that fault, beyond a crash inside the call (test_cli_plugin.cpp): a throw, a
// write past the end of y, a hang, a crash while the library loads, two kernels of one name; and interrupted runs.
// Each: exit 1 (or 2 for a declaration lnorm refuses) with a line naming the plugin code, and no output or
// temporary left behind. The plugins are tests/plugins/misbehaving.cpp built with -DLNORM_TEST_FAULT=N.
#include <signal.h>

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace lnorm::testing;

// GCC says __SANITIZE_ADDRESS__, clang 14 only __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define LNORM_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LNORM_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef LNORM_TEST_UNDER_ASAN
#define LNORM_TEST_UNDER_ASAN 0
#endif

namespace {

const std::string kThrows = FAULT_THROWS_PLUGIN, kOob = FAULT_OOB_PLUGIN, kHang = FAULT_HANG_PLUGIN,
                  kDup = FAULT_DUP_PLUGIN, kStatic = FAULT_STATIC_PLUGIN, kTouches = FAULT_TOUCHES_PLUGIN;

struct Inputs {
  TempDir t;
  std::string x = t / "x.npy";
  Inputs() { REQUIRE(cli("gen --out " + x + " --shape 8x64").code == 0); }
};

// The command failed with exit `code`, said `must_name`, and left nothing in the folder but x.npy.
void expect_contained(const Inputs& in, const Result& r, int code, const std::string& must_name) {
  INFO(r.out);
  CHECK(r.code == code);
  CHECK_THAT(r.out, Contains(must_name));
  CHECK(in.t.entries() == std::set<std::string>{"x.npy"});
}

}  // namespace

TEST_CASE("plugin faults: a kernel that throws is exit 1 naming it, not lnorm's internal error", "[cli][plugin]") {
  Inputs in;
  const Result r = cli("run --plugin " + kThrows + " --kernel faulty:throws --x " + in.x + " --y " + in.t / "y.npy" +
                       " --mean " + in.t / "m.npy");
  expect_contained(in, r, 1, "plugin kernel faulty:throws threw an exception: faulty: thrown on purpose");
}

TEST_CASE("plugin faults: bench and report with a kernel that throws: its row says so, and neither aborts", "[cli][plugin]") {
  Inputs in;
  const Result bench = cli("bench --plugin " + kThrows + " --kernel faulty:throws --kernel naive --shape 8x64 --dtype f32 --quick --json " +
                           in.t / "b.json");
  INFO(bench.out);
  CHECK(bench.code == 1);  // a kernel that failed while timed is not a pass
  CHECK_THAT(bench.out, Contains("faulty:throws threw an exception"));
  bool failed_row = false;
  const auto b = load_json(in.t / "b.json");  // held: a range-for over a temporary's member would dangle (before C++23)
  for (const auto& r : b["results"]) failed_row = failed_row || (r["kernel"] == "faulty:throws" && r.value("failed", false));
  CHECK(failed_row);
  // report measures in worker threads: an exception there ended in std::terminate (SIGABRT) before.
  const Result report = cli("report --plugin " + kThrows + " --kernel faulty:throws --dtype f32 --quick --no-render --out " + in.t / "r");
  INFO(report.out);
  CHECK((report.code == 0 || report.code == 1));
  CHECK_THAT(report.out, !Contains("terminate"));
  bool error_cell = false;
  const auto r = load_json(in.t / "r/report.json");
  for (const auto& c : r["cells"])
    error_cell = error_cell || (c["status"] == "error" && c["message"].get<std::string>().find("threw") != std::string::npos);
  CHECK(error_cell);
}

TEST_CASE("plugin faults: a kernel that writes past the end of y is named, and nothing is written",
          "[cli][plugin]") {
  Inputs in;
  const Result r = cli("run --plugin " + kOob + " --kernel faulty:oob --x " + in.x + " --y " + in.t / "y.npy");
  // Under AddressSanitizer its report comes first, names the write, and ends the process its own way (no handler
  // of lnorm's runs, so a temporary may stay); elsewhere lnorm names the kernel.
#if LNORM_TEST_UNDER_ASAN
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("AddressSanitizer: heap-buffer-overflow"));
  CHECK_THAT(r.out, Contains("misbehaving.cpp"));
#else
  expect_contained(in, r, 1, "faulty:oob");
#endif
}

TEST_CASE("plugin faults: a crash in the library's static constructors is exit 1 naming the file", "[cli][plugin]") {
  Inputs in;
  for (const std::string& cmd : {std::string("list"), "run --kernel faulty:static --x " + in.x + " --y " + in.t / "y.npy",
                                 std::string("verify --kernel plugins --quick --cases 1")}) {
    const Result r = cli(cmd + " --plugin " + kStatic);
    expect_contained(in, r, 1, kStatic + " (loading it: its static constructors) crashed: SIGSEGV");
  }
}

// A plugin library and a budgets file are inputs too: an output onto one was written over it.
TEST_CASE("plugin faults: an output onto a loaded plugin or the budgets file is refused", "[cli][plugin]") {
  Inputs in;
  const std::string lib = in.t / "p.so", budgets = in.t / "b.toml";
  fs::copy_file(kThrows, lib);
  { std::ofstream(budgets) << "[default.f32]\ny = { a = 8, b = 1 }\n"; }
  const std::string before = file_bytes(lib);
  for (const std::string& cmd : {"bench --shape 4x8 --kernel naive --json " + lib, "select --shape 4x8 --json " + lib,
                                 "verify --kernel naive --quick --json " + lib,
                                 "run --kernel naive --x " + in.x + " --y " + lib}) {
    const Result r = cli(cmd + " --plugin " + lib);
    INFO(cmd << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("is also an input"));
  }
  const Result v = cli("verify --kernel naive --quick --budgets " + budgets + " --junit " + budgets);
  INFO(v.out);
  CHECK(v.code == 2);
  CHECK_THAT(v.out, Contains("is also an input"));
  CHECK(file_bytes(lib) == before);
}

TEST_CASE("plugin faults: two kernels of one name in a plugin are refused by name", "[cli][plugin]") {
  Inputs in;
  const Result r = cli("list --plugin " + kDup);
  expect_contained(in, r, 2, "two kernels named faulty:dup");
}

TEST_CASE("plugin faults: verify fails a case that hangs after --case-timeout, naming the case", "[cli][plugin][verify]") {
  Inputs in;
  const auto start = std::chrono::steady_clock::now();
  const Result r = cli("verify --plugin " + kHang + " --kernel plugins --property shape --quick --cases 2 --case-timeout 1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("a case took longer than --case-timeout 1 s"));
  CHECK_THAT(r.out, Contains("shape"));  // the case's describe() line names its shape
  CHECK(seconds < 60);
  expect_refused(in.t, "verify --case-timeout -1", "--case-timeout");
}

// SIGTERM and SIGHUP (a shell's background job ignores SIGINT, so a test cannot send it one; SIGINT takes the same
// handler).
TEST_CASE("plugin faults: SIGTERM or SIGHUP mid-run leaves no output and no temporary", "[cli][plugin]") {
  for (const int sig : {SIGTERM, SIGHUP}) {
    Inputs in;
    // The hanging kernel holds run inside its call, after the outputs' temporaries were created.
    const std::string cmd = "'" + std::string(LNORM_EXE) + "' run --plugin " + kHang + " --kernel faulty:hang --x " + in.x +
                            " --y " + in.t / "y.npy" + " --mean " + in.t / "m.npy" + " > /dev/null 2>&1 & echo $!";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    long pid = 0;
    REQUIRE(std::fscanf(p, "%ld", &pid) == 1);
    ::pclose(p);
    // Wait until the temporaries exist (the run is inside the kernel), at most 20 s.
    for (int i = 0; i < 200 && in.t.entries().size() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    INFO("signal " << sig);
    CHECK(in.t.entries().size() == 3);
    ::kill(static_cast<pid_t>(pid), sig);
    // The parent passes it on; the child's handler removes the temporaries, then both end by it.
    for (int i = 0; i < 100 && in.t.entries().size() > 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(in.t.entries() == std::set<std::string>{"x.npy"});
  }
}

TEST_CASE("plugin faults: a kernel that writes into its const x fails verify naming x, and run leaves x.npy as it was", "[cli][plugin]") {
  Inputs in;
  const std::string before = file_bytes(in.x);
  const Result v = cli("verify --plugin " + kTouches + " --kernel faulty:touches --quick --cases 3");
  INFO(v.out);
  CHECK(v.code == 1);
  CHECK_THAT(v.out, Contains("modified x at"));
  const Result r = cli("run --plugin " + kTouches + " --kernel faulty:touches --x " + in.x + " --y " + in.t / "y.npy");
  INFO(r.out);
  CHECK(r.code == 0);  // run cannot see it (x is its own copy in memory); the file must not change
  CHECK(file_bytes(in.x) == before);
}

TEST_CASE("plugin faults: report over a kernel that writes past y leaves no folder it created, and keeps one it did not", "[cli][plugin]") {
  Inputs in;
  const std::string cmd = "report --plugin " + kOob + " --kernel faulty:oob --dtype f32 --quick --no-render --out ";
  const Result fresh = cli(cmd + in.t / "r");
#if LNORM_TEST_UNDER_ASAN
  // AddressSanitizer reports the write and ends the process its own way: no handler of lnorm's runs (the oob test).
  INFO(fresh.out);
  CHECK_THAT(fresh.out, Contains("AddressSanitizer: heap-buffer-overflow"));
  return;
#endif
  expect_contained(in, fresh, 1, "faulty:oob");  // the empty r/ went with the crash
  fs::create_directory(in.t / "mine");
  const Result kept = cli(cmd + in.t / "mine");
  INFO(kept.out);
  CHECK(kept.code == 1);
  CHECK(fs::is_directory(in.t / "mine"));
}
