// Fuzz target: the `lnorm` command line, in-process (lnorm::cli::run_cli). The input is the argument
// list, one argument per line; the command runs in a private temporary folder holding small valid
// inputs (x.npy 4x8 f32, gamma/beta, a bf16 file, a candidate y, a mean), so file flags can name
// them. Any exit code but 3 is fine; exit 3 (an unexpected exception: bad input should be 2), a
// crash, a sanitizer report or a hang is a bug.
//
// Bounds, so every run is short and touches nothing outside its folder:
//   - at most 24 arguments of at most 64 bytes; no '/' and no ".." (every path stays in the folder);
//   - no `verify`, `bench`, `select` or `report` argument: those run the property suite, timed
//     benchmarks or sweeps (seconds to minutes per call) whatever the flags say, so they cannot be
//     fuzzed in a 60 s budget; and report's --peer runs a shell command, which a fuzzer must not write;
//   - no number in an argument above 65536, nor a product of numbers above it (shapes like 64x1024):
//     `gen` would otherwise fill gigabytes, `--threads` start thousands of threads;
//   - the process works in that folder (chdir), so corpus folders must be given as absolute paths;
//   - the folder is emptied and the inputs rewritten before every run, so runs do not depend on each
//     other (gen --out x.npy may overwrite an input).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_inputs.hpp"
#include "lnorm/run_cli.hpp"

namespace {

constexpr std::size_t kMaxArgs = 24, kMaxArgBytes = 64;
constexpr std::uint64_t kMaxNumber = 65536;  // 256x256 elements: milliseconds for any subcommand

bool numbers_small(std::string_view arg) {
  std::uint64_t product = 1;
  for (std::size_t i = 0; i < arg.size();) {
    if (arg[i] < '0' || arg[i] > '9') {
      ++i;
      continue;
    }
    std::uint64_t v = 0;
    for (; i < arg.size() && arg[i] >= '0' && arg[i] <= '9'; ++i) {
      v = v * 10 + static_cast<std::uint64_t>(arg[i] - '0');
      if (v > kMaxNumber) return false;
    }
    product *= std::max<std::uint64_t>(v, 1);
    if (product > kMaxNumber) return false;
  }
  return true;
}

bool allowed(std::string_view arg) {
  if (arg.size() > kMaxArgBytes || arg.find('/') != arg.npos || arg.find("..") != arg.npos) return false;
  if (arg.find('\0') != arg.npos) return false;  // argv strings end at NUL
  for (std::string_view slow : {"verify", "bench", "select", "report"})
    if (arg == slow) return false;
  return numbers_small(arg);
}

// g_root/inputs holds the inputs, written once; g_root/run is the folder the command runs in.
std::string g_root, g_dir;

void empty_folder(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        ::unlink((dir + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
}

// Hard links to the inputs: lnorm writes every output to a new file and renames it into place, so
// even `gen --out x.npy` replaces the link and never changes the inputs' own bytes.
void reset_folder() {
  empty_folder(g_dir);
  for (const char* f : lnorm::fuzz::kInputNames)
    if (::link((g_root + "/inputs/" + f).c_str(), (g_dir + "/" + f).c_str()) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // /dev/shm when there is one: outputs are fsync'ed, which costs disk time on a real file system.
  char tmpl[] = "/dev/shm/lnorm_cli_fuzz.XXXXXX";
  char tmpl_tmp[] = "/tmp/lnorm_cli_fuzz.XXXXXX";
  const char* root = ::mkdtemp(tmpl);
  if (root == nullptr) root = ::mkdtemp(tmpl_tmp);
  if (root == nullptr) std::abort();
  g_root = root;
  g_dir = g_root + "/run";
  if (::mkdir((g_root + "/inputs").c_str(), 0700) != 0 || ::mkdir(g_dir.c_str(), 0700) != 0) std::abort();
  lnorm::fuzz::write_inputs(g_root + "/inputs");
  if (::chdir(g_dir.c_str()) != 0) std::abort();
  // list/--help print tables; only the exit code and sanitizers matter here.
  const int devnull = ::open("/dev/null", O_WRONLY);
  if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
  std::atexit([] {
    empty_folder(g_dir);
    empty_folder(g_root + "/inputs");
    ::rmdir(g_dir.c_str());
    ::rmdir((g_root + "/inputs").c_str());
    ::rmdir(g_root.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"lnorm"};
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    const std::string_view arg = rest.substr(0, nl);
    if (!allowed(arg) || args.size() > kMaxArgs) return -1;  // -1: libFuzzer keeps it out of the corpus
    args.emplace_back(arg);
    rest = nl == rest.npos ? std::string_view{} : rest.substr(nl + 1);
  }
  if (g_dir.empty()) LLVMFuzzerInitialize(nullptr, nullptr);  // replay runs without libFuzzer's call
  reset_folder();
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int code = lnorm::cli::run_cli(static_cast<int>(args.size()), argv.data());
  if (code == 3) {
    std::fprintf(stderr, "cli_fuzz: exit 3 (internal error) for:");
    for (const std::string& a : args) std::fprintf(stderr, " '%s'", a.c_str());
    std::fprintf(stderr, "\n");
    std::abort();
  }
  return 0;
}
