// Helpers for tests that drive the real `lnorm` executable (LNORM_EXE): temporary folders, running
// the command, reading its files.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "lnorm/npy.hpp"

namespace lnorm::testing {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// A fresh directory per test, removed at the end even when the test fails.
struct TempDir {
  fs::path dir;
  TempDir() {
    std::random_device rd;
    dir = fs::temp_directory_path() / ("lnorm_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> s;
    for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
    return s;
  }
};

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `lnorm ARGS` through the shell and captures its output and exit status. `shell_prefix` runs
// before it in the same shell (e.g. "ulimit -v 2097152; ").
inline Result cli(const std::string& args, const std::string& shell_prefix = "") {
  const std::string cmd = shell_prefix + "'" + LNORM_EXE + "' " + args + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  Result r;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline nlohmann::json load_json(const std::string& path) { return nlohmann::json::parse(file_bytes(path)); }

// An f32 .npy file's values (the test's own output files; for the tests that link lnorm_io).
inline std::vector<float> load_f32(const std::string& path) {
  io::NpyReader r(path);
  const std::vector<std::byte> b = io::read_all(r);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// A .npy file's element bytes, whatever its descr (q codes, scales).
inline std::vector<std::uint8_t> npy_bytes(const std::string& path) {
  io::NpyReader r(path);
  const std::vector<std::byte> b = io::read_all(r);
  std::vector<std::uint8_t> v(b.size());
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Exit 2, exactly one line "lnorm: ..." that contains `must_name`, and no file but the inputs.
inline void expect_refused(const TempDir& t, const std::string& args, const std::string& must_name) {
  const auto before = t.entries();
  const Result r = cli(args);
  INFO("lnorm " << args << "\n-> exit " << r.code << ": " << r.out);
  CHECK(r.code == 2);
  CHECK(r.out.rfind("lnorm: ", 0) == 0);
  CHECK(r.out.find('\n') == r.out.size() - 1);  // one line, newline-terminated
  CHECK_THAT(r.out, Contains(must_name));
  CHECK(t.entries() == before);
}

}  // namespace lnorm::testing
