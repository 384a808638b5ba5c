// Throughput of kernels beside the memory system and the vendor library, in one Google Benchmark run
// (DESIGN.md "Speed"). Used by `lnorm bench`, `lnorm select` and the lnorm_gbench binary.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lnorm/kernel.hpp"

namespace lnorm::bench {

struct Shape {
  std::int64_t rows = 0, cols = 0;
  std::string text() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};
std::optional<Shape> parse_shape(std::string_view s);  // "ROWSxCOLS"
// bench/shapes.txt as built in; quick: the lines marked `quick`.
std::vector<Shape> builtin_shapes(bool quick);

// One row of a benchmark run: a kernel, or a baseline ("memcpy", "onednn").
struct Entry {
  std::string what;                    // kernel name, "memcpy" or "onednn"
  const KernelInfo* kernel = nullptr;  // null for baselines
  DType dtype = DType::f32;
  Shape shape;
  std::string name() const;            // "what/dtype/RxC", Google Benchmark's name
};

struct Result {
  Entry entry;
  double seconds = 0;         // median wall time of one call
  double bytes_per_second = 0;  // x read + y written + gamma/beta once, over the median time
  double rows_per_second = 0;
  std::string skipped;        // why it did not run (unavailable kernel, oneDNN declined)
};

struct Settings {
  int threads = 1;
  int repetitions = 5;
  double min_seconds = 0.1;  // per repetition
  bool affine = true;        // gamma and beta, as oneDNN's use_scale | use_shift
  bool cold = false;         // evict the caches before every timed call (data comes from DRAM)
};

// "" when oneDNN was built in and can run this dtype here; otherwise why not.
std::string onednn_unavailable(DType d);

// Registers the entries with Google Benchmark (names Entry::name()). For the lnorm_gbench binary,
// which passes benchmark_flags(settings) ahead of its own command line.
void register_entries(const std::vector<Entry>& entries, const Settings& settings);
std::vector<std::string> benchmark_flags(const Settings& settings);
// Runs the entries and returns their medians; progress(name) before each.
std::vector<Result> run(const std::vector<Entry>& entries, const Settings& settings,
                        const std::function<void(const std::string&)>& progress = {});

// CPU model and ISA extensions, e.g. "AMD EPYC (avx2 fma f16c)".
std::string hardware();

}  // namespace lnorm::bench
