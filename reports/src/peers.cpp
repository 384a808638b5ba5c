#include "peers.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lnorm/format.hpp"
#include "lnorm/npy.hpp"

namespace lnorm::report {
namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void write_npy(const std::string& path, DType d, std::vector<std::int64_t> shape, const std::vector<double>& values) {
  const Format f = format_of(d);
  io::NpyWriter w(path, std::string(npy_descr(d)), std::move(shape));
  std::vector<std::byte> bytes(values.size() * size_of(d));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t b = double_to_bits(f, values[i]);
    std::memcpy(bytes.data() + i * size_of(d), &b, size_of(d));
  }
  w.write(bytes.data(), bytes.size());
  w.commit();
}

// The file's elements as bit patterns, or an error when it is missing the expected dtype or count.
std::vector<std::uint64_t> read_bits(const std::string& path, DType d, std::int64_t count, std::string& error) {
  io::NpyReader r(path);
  if (r.header().descr != npy_descr(d)) {
    error = path + ": dtype " + r.header().descr + ", expected " + std::string(npy_descr(d));
    return {};
  }
  if (r.header().elements != count) {
    error = path + ": " + std::to_string(r.header().elements) + " elements, expected " + std::to_string(count);
    return {};
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(count) * size_of(d));
  r.read(0, count, bytes.data());
  std::vector<std::uint64_t> bits(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&bits[i], bytes.data() + i * size_of(d), size_of(d));
  return bits;
}

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

PeerOutputs run_peer(const std::string& command, const verify::Case& input, const std::string& dir) {
  const DType d = input.spec.dtype;
  const std::int64_t rows = input.spec.rows(), cols = input.spec.cols();
  const std::string x = dir + "/x.npy", gamma = dir + "/gamma.npy", beta = dir + "/beta.npy", y = dir + "/y.npy",
                    mean = dir + "/mean.npy", rstd = dir + "/rstd.npy", log = dir + "/peer.log";
  write_npy(x, d, {rows, cols}, input.x);
  write_npy(gamma, d, {cols}, input.gamma.empty() ? std::vector<double>(static_cast<std::size_t>(cols), 1.0) : input.gamma);
  write_npy(beta, d, {cols}, input.beta.empty() ? std::vector<double>(static_cast<std::size_t>(cols), 0.0) : input.beta);

  char eps[64];
  std::snprintf(eps, sizeof eps, "%.17g", input.spec.eps);
  const std::pair<std::string, std::string> fields[] = {
      {"{x}", shell_quote(x)},       {"{gamma}", shell_quote(gamma)}, {"{beta}", shell_quote(beta)},
      {"{y}", shell_quote(y)},       {"{mean}", shell_quote(mean)},   {"{rstd}", shell_quote(rstd)},
      {"{eps}", eps},                {"{dtype}", std::string(name(d))}};
  std::string cmd = command;
  for (const auto& [key, value] : fields)
    for (std::size_t at = cmd.find(key); at != std::string::npos; at = cmd.find(key, at + value.size()))
      cmd.replace(at, key.size(), value);

  PeerOutputs out;
  const int status = std::system(("(" + cmd + ") >" + shell_quote(log) + " 2>&1").c_str());
  if (status != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out.error = "exit " + std::to_string(code) + ": " + last_line(log);
    return out;
  }
  namespace fs = std::filesystem;
  if (!fs::exists(y)) {
    out.error = "the command wrote no {y} file";
    return out;
  }
  try {
    out.y = read_bits(y, d, rows * cols, out.error);
    if (out.error.empty() && fs::exists(mean)) out.mean = read_bits(mean, stats_dtype(d), rows, out.error);
    if (out.error.empty() && fs::exists(rstd)) out.rstd = read_bits(rstd, stats_dtype(d), rows, out.error);
  } catch (const io::NpyError& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace lnorm::report
