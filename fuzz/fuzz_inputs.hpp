// The small valid inputs the CLI fuzz target's folder holds before every run, so that fuzzed file
// flags (--x x.npy, --gamma g.npy, ...) reach the code past the file checks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lnorm/npy.hpp"

namespace lnorm::fuzz {

inline constexpr const char* kInputNames[] = {"x.npy", "g.npy", "b.npy", "x16.npy", "y.npy", "m.npy", "x3.npy"};

inline void write_inputs(const std::string& dir) {
  std::vector<float> x(32), g(8, 1.5f), b(8, -0.25f), m(4, 0.5f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 1.75f;
  std::vector<std::uint16_t> bf16(32);
  for (std::size_t i = 0; i < bf16.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    bf16[i] = static_cast<std::uint16_t>(bits >> 16);  // x's values are exact in bf16
  }
  std::vector<double> x3(24);
  for (std::size_t i = 0; i < x3.size(); ++i) x3[i] = 1e4 + static_cast<double>(i % 3);
  io::save(dir + "/x.npy", "<f4", {4, 8}, x.data());
  io::save(dir + "/g.npy", "<f4", {8}, g.data());
  io::save(dir + "/b.npy", "<f4", {8}, b.data());
  io::save(dir + "/x16.npy", "<u2", {4, 8}, bf16.data());
  io::save(dir + "/y.npy", "<f4", {4, 8}, x.data());
  io::save(dir + "/m.npy", "<f4", {4, 1}, m.data());
  io::save(dir + "/x3.npy", "<f8", {2, 3, 4}, x3.data());
}

}  // namespace lnorm::fuzz
