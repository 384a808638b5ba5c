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

// One row of a benchmark run: a kernel, or a baseline (one of copy_names(), or "onednn").
struct Entry {
  std::string what;                    // kernel name, a copy's name or "onednn"
  const KernelInfo* kernel = nullptr;  // null for baselines
  DType dtype = DType::f32;
  Shape shape;
  // Kernels and oneDNN: the op. Copies move the same bytes for either norm; with an Add & Norm op they copy
  // x to y and residual to h (four streams, as the fused kernel moves).
  Op op = Op::layernorm;
  // A kernel's quantized output (op.epilogue == quantized): q and scales written instead of y.
  QuantSpec quant{};
  // "what/dtype/RxC" ("what/rmsnorm/dtype/RxC"; a four-stream copy "what/add/dtype/RxC"; quantized
  // "what/q:fp8_e4m3-row/dtype/RxC"), Google Benchmark's name
  std::string name() const;
  // The kernel column: what, and the quantized output's format/scaling ("avx2 fp8_e4m3/row")
  std::string label() const;
};

struct Result {
  Entry entry;
  double seconds = 0;         // median wall time of one call
  // x read + y written + gamma (and beta for LayerNorm) once, over the median time; Add & Norm adds residual
  // read and h written (the residual in x's dtype: four streams of x's size); quantized: q (one byte an element)
  // and the scales written in y's place
  double bytes_per_second = 0;
  double rows_per_second = 0;
  // Each round's bytes per second, in round order (run(): every entry of a dtype, shape and stream count is timed
  // once per round, back to back); empty when it did not run or came from elsewhere.
  std::vector<double> round_bytes_per_second;
  std::string skipped;        // why it did not run (unavailable kernel, oneDNN declined)
  bool unavailable = false;   // skipped before the run: this machine or build cannot run it at all
  bool failed = false;        // it threw while timed (a plugin kernel's exception): `lnorm bench` exits 1
};

struct Settings {
  int threads = 1;
  int repetitions = 5;       // rounds (`lnorm bench`), or Google Benchmark repetitions (lnorm_gbench)
  double min_seconds = 0.1;  // per round: back-to-back calls of one entry for at least this long
  bool affine = true;        // gamma and beta, as oneDNN's use_scale | use_shift; RMSNorm: gamma only (Llama, Gemma)
  bool cold = false;         // evict the caches before every timed call (data comes from DRAM)
};

// "" when oneDNN was built in and can run this op and dtype here at the thread count asked; otherwise why not.
std::string onednn_unavailable(DType d, Op op = Op::layernorm);
// When lnorm was built without oneDNN: why (the build's LNORM_ONEDNN_WHY, else "built without oneDNN").
std::optional<std::string> onednn_not_built();

// The copy ceiling (docs/DESIGN.md "Speed"): the fastest of these copies of exactly a kernel's x and y
// bytes, in the same run, at the same thread count, split into the same row ranges, on buffers allocated
// as the kernel's are: glibc memcpy, AVX2 and AVX-512 load/store loops, and the same loops with streaming
// stores + sfence. The fastest copy a machine has is among them wherever it has AVX2 or AVX-512.
const std::vector<std::string>& copy_names();  // "memcpy", "avx2_copy", "avx2_stream", "avx512_copy", "avx512_stream"
bool is_copy(std::string_view what);
// "" when this copy runs here; otherwise why not (the vector loops need their ISA; `lnorm bench` prints
// the reason once per run under "not run here").
std::string copy_unavailable(std::string_view what);

struct Ceiling {
  double bytes_per_second = 0;
  std::string winner;  // the copy that set it (in most rounds)
};
// The copy ceiling for this dtype and shape moving op's streams (x to y, and residual to h for Add & Norm):
// where the copies were timed in the same rounds, the median over rounds of each round's fastest copy; otherwise
// the fastest copy's median. nullopt when no copy was measured.
std::optional<Ceiling> copy_ceiling(const std::vector<Result>& results, DType d, const Shape& s, Op op = Op::layernorm);
// A result's speed as a fraction of the copy: the median over rounds of its speed over that round's fastest copy
// (a kernel and the copy sampled in the same second of a shared memory system, whose bandwidth here moves 2x from
// minute to minute); without rounds, its median over the ceiling. nullopt without a ceiling or a measurement.
std::optional<double> fraction_of_copy(const Result& r, const std::vector<Result>& results);

// Above this fraction of the ceiling a result is not trusted: a kernel moves at least the copy's bytes,
// so it cannot beat the fastest copy; 5% is the spread of medians of repeated copies on a busy machine.
inline constexpr double kSuspectAbove = 1.05;
bool ceiling_suspect(double fraction);
// The "% of copy" cell: "41%", or "ceiling suspect: 26.10 GB/s vs copy 24.00 GB/s (avx2_stream)".
std::string percent_of_copy(double fraction, double bytes_per_second, const Ceiling& c);

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
