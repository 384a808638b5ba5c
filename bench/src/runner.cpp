// Entries → Results: `lnorm bench` times them in rounds (rounds.cpp); the lnorm_gbench binary registers them
// with Google Benchmark.
#include <algorithm>
#include <benchmark/benchmark.h>
#include <cpuid.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "bodies.hpp"
#include "rounds.hpp"
#include "lnorm/operands.hpp"
#include "lnorm/bench.hpp"

namespace lnorm::bench {

extern const char* const kBuiltinShapes;  // bench/shapes.txt, generated at build time

std::optional<Shape> parse_shape(std::string_view s) {
  const auto x = s.find('x');
  if (x == std::string_view::npos) return std::nullopt;
  try {
    std::size_t used = 0;
    const std::string r(s.substr(0, x)), c(s.substr(x + 1));
    const long long rows = std::stoll(r, &used);
    if (used != r.size()) return std::nullopt;
    const long long cols = std::stoll(c, &used);
    if (used != c.size() || rows < 1 || cols < 1) return std::nullopt;
    return Shape{rows, cols};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<Shape> builtin_shapes(bool quick) {
  std::vector<Shape> out;
  std::istringstream in(kBuiltinShapes);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string shape, tag;
    words >> shape >> tag;
    if (quick && tag != "quick") continue;
    if (const auto s = parse_shape(shape)) out.push_back(*s);
  }
  return out;
}

std::string Entry::name() const {
  Op base = op;
  base.epilogue = Epilogue::y_as_x;
  const std::string op_part = is_copy(what) ? (op.prologue == Prologue::residual_add ? "add/" : "")
                              : base == Op::layernorm ? "" : std::string(lnorm::name(op)) + "/";
  std::string q_part;
  if (op.epilogue == Epilogue::quantized) {
    q_part = "q:" + describe(quant) + "/";
    std::replace(q_part.begin(), q_part.end() - 1, '/', '-');
  }
  return what + "/" + op_part + q_part + std::string(lnorm::name(dtype)) + "/" + shape.text();
}

std::string Entry::label() const { return op.epilogue == Epilogue::quantized ? what + " " + describe(quant) : what; }

namespace {

double bytes_per_call(const Entry& e, const Settings& s) {
  const double es = static_cast<double>(size_of(e.dtype));
  if (is_copy(e.what)) {  // the copy moves x's bytes (and the residual's into h for Add & Norm's copy)
    const double streams = e.op.prologue == Prologue::residual_add ? 4.0 : 2.0;
    return streams * static_cast<double>(e.shape.rows * e.shape.cols) * es;
  }
  // A kernel's call: every operand of its op from the operand table (lnorm/operands.hpp) — x read, y or q and its
  // scales written, Add & Norm's residual read and h written, the backward's dy read and dx written, gamma/beta (and
  // dgamma/dbeta) once — except the per-row statistics (mean, rstd, the saved ones: 1/cols of a row's bytes), which
  // were never counted, and quant_y (not asked for here). Parameters in x's dtype, as the bodies allocate them.
  const bool beta = s.affine && e.op.norm == Norm::layernorm;
  Problem p = with_op(make_problem(e.shape.rows, e.shape.cols, e.dtype, 1e-5, s.affine, beta, 1), e.op);
  if (e.op.epilogue == Epilogue::quantized) p.quant = e.quant;
  double bytes = 0;
  for (const OperandInfo& o : kOperandTable)
    if (present(o, p) && !o.optional && o.extent != Extent::per_row) bytes += static_cast<double>(byte_count(o, p));
  return bytes;
}

// Google Benchmark calls a benchmark's function once per repetition (and more to size the
// iteration count); the data is made once per entry and kept until the next entry.
void body(benchmark::State& state, Entry e, Settings s) {
  static std::string cached_name;
  static std::unique_ptr<Body> cached;
  if (cached_name != e.name() || !cached) {
    cached.reset();
    cached_name.clear();
    try {
      cached = make_body(e, s);
      cached_name = e.name();
    } catch (const std::exception& ex) {
      state.SkipWithError(ex.what());
      return;
    }
  }
  Body* b = cached.get();
  if (!b) {
    state.SkipWithError("not runnable here");
    return;
  }
  for (auto _ : state) {
    if (s.cold) {
      state.PauseTiming();
      evict_caches();
      state.ResumeTiming();
    }
    b->call();
    benchmark::ClobberMemory();
  }
  const double bytes = bytes_per_call(e, s);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
  state.counters["rows_per_second"] = benchmark::Counter(
      static_cast<double>(e.shape.rows) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

void register_entries(const std::vector<Entry>& entries, const Settings& settings) {
  // Repetitions and minimum time come from Google Benchmark's flags (see run() and lnorm_gbench's
  // main): set per benchmark, they would be appended to the names, which must stay KERNEL/DTYPE/RxC.
  for (const Entry& e : entries) {
    auto* b = benchmark::RegisterBenchmark(e.name().c_str(), body, e, settings);
    // Cold calls are timed with the eviction paused out, so Google Benchmark would keep adding
    // iterations (each with a 64 MiB sweep) to reach its minimum time: fix the count instead.
    if (settings.cold) b->Iterations(kColdCalls);
  }
}

std::vector<std::string> benchmark_flags(const Settings& settings) {
  char min_time[64];
  std::snprintf(min_time, sizeof min_time, "--benchmark_min_time=%g", settings.min_seconds);
  return {"--benchmark_repetitions=" + std::to_string(settings.repetitions), min_time,
          "--benchmark_report_aggregates_only=true"};
}

std::vector<Result> run(const std::vector<Entry>& entries, const Settings& settings,
                        const std::function<void(const std::string&)>& progress) {
  std::vector<Result> results;
  for (const Entry& e : entries) {
    Result r;
    r.entry = e;
    if (e.kernel) {
      Problem p = with_op(make_problem(e.shape.rows, e.shape.cols, e.dtype, 1e-5, true, e.op.norm == Norm::layernorm), e.op);
      if (e.op.prologue == Prologue::residual_add) p = set_residual(p, e.dtype);
      if (auto why = unavailable_reason(*e.kernel, p)) r.skipped = *why;
    } else if (e.what == "onednn") {
      r.skipped = onednn_unavailable(e.dtype, e.op);
    } else if (is_copy(e.what)) {
      r.skipped = copy_unavailable(e.what);
    }
    r.unavailable = !r.skipped.empty();
    results.push_back(r);
  }
  std::vector<Result*> todo;
  for (Result& r : results)
    if (r.skipped.empty()) todo.push_back(&r);
  time_in_rounds(todo, settings, [&](const Entry& e) { return bytes_per_call(e, settings); }, progress);
  return results;
}

std::string hardware() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  __builtin_cpu_init();
  std::string isa;
  const auto has = [&](const char* name, bool yes) {
    if (!yes) return;
    if (!isa.empty()) isa += ' ';
    isa += name;
  };
  has("avx2", __builtin_cpu_supports("avx2"));
  has("fma", __builtin_cpu_supports("fma"));
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // cpuid: clang 14's __builtin_cpu_supports lacks "f16c"
  has("f16c", __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0);
  has("avx512f", __builtin_cpu_supports("avx512f"));
  has("avx512bw", __builtin_cpu_supports("avx512bw"));
  has("avx512vl", __builtin_cpu_supports("avx512vl"));
  has("avx512bf16", __builtin_cpu_supports("avx512bf16"));
  return model + " (" + (isa.empty() ? "no AVX2" : isa) + ")";
}

}  // namespace lnorm::bench
