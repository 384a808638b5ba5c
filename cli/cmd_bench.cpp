// lnorm bench — kernels beside the copy ceiling and oneDNN in one run; lnorm select — the fastest kernel here
// whose verified budget meets the accuracy asked. Both time single calls on resident, warm data.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flag_values.hpp"
#include "plugins.hpp"
#include "inputs.hpp"
#include "lnorm/bench.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/select.hpp"

namespace lnorm::cli {

namespace {

using bench::Entry;
using bench::Result;
using bench::Shape;

std::vector<DType> dtypes_or(const std::vector<std::string>& names, std::vector<DType> fallback) {
  if (names.empty()) return fallback;
  std::vector<DType> out;
  for (const std::string& n : names) out.push_back(dtype_flag(n));
  return out;
}

// Bytes per element a timed shape may hold at once, at most: x, y, Add & Norm's residual and h (or the backward's
// dy and dx), in f64 at worst (16 bytes each would be 64; 16 is f32's four streams or f64's two: a shape past
// physical memory at that rate cannot be timed here).
constexpr double kTimedBytesPerElement = 16;

Shape shape_flag(const std::string& s) {
  const auto shape = bench::parse_shape(s);
  if (!shape) throw InputError("--shape " + s + ": expected ROWSxCOLS with both at least 1, e.g. 4096x1024");
  // Checked before anything is allocated (a 2^32 x 2^32 shape once grew select to 1.7 GB in 6 s and never ended).
  const double need = static_cast<double>(shape->rows) * static_cast<double>(shape->cols) * kTimedBytesPerElement;
  const double have = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > have) {
    char msg[200];
    std::snprintf(msg, sizeof msg, ": shape too large: its operands need about %.3g GiB, this machine has %.3g GiB of memory",
                  need / 0x1p30, have / 0x1p30);
    throw InputError("--shape " + s + msg);
  }
  return *shape;
}

// A progress line on a terminal: "bench [3/40] avx2/f32/64x4096".
std::function<void(const std::string&)> progress_line(std::size_t total) {
  if (!isatty(fileno(stderr))) return {};
  auto done = std::make_shared<std::size_t>(0);
  return [done, total](const std::string& name) {
    std::fprintf(stderr, "\r\033[Kbench [%zu/%zu] %s", ++*done, total, name.c_str());
  };
}

const Result* find(const std::vector<Result>& rs, const std::string& what, DType d, const Shape& s, Op op = Op::layernorm) {
  for (const Result& r : rs) {
    if (r.entry.what == what && r.entry.dtype == d && r.entry.shape.rows == s.rows && r.entry.shape.cols == s.cols &&
        r.entry.op == op)
      return &r;
  }
  return nullptr;
}

nlohmann::json result_json(const Result& r, const std::vector<Result>& all) {
  nlohmann::json j = {{"name", r.entry.name()},         {"kernel", r.entry.what}, {"op", name(r.entry.op)},
                      {"quant", r.entry.op.epilogue == Epilogue::quantized ? nlohmann::json(describe(r.entry.quant)) : nlohmann::json(nullptr)},
                      {"dtype", name(r.entry.dtype)},   {"shape", r.entry.shape.text()},
                      {"seconds", r.seconds},           {"bytes_per_second", r.bytes_per_second},
                      {"rows_per_second", r.rows_per_second}};
  if (!r.skipped.empty()) j["skipped"] = r.skipped;
  if (r.failed) j["failed"] = true;  // it threw while timed: the run exits 1
  // Each round's GB/s (the entries of a dtype, shape and stream count timed once per round, back to back): a ratio
  // of two kernels taken per round sees the same second of a shared machine (scripts/bench_ratios.py).
  if (!r.round_bytes_per_second.empty()) j["round_bytes_per_second"] = r.round_bytes_per_second;
  const auto ceiling = bench::copy_ceiling(all, r.entry.dtype, r.entry.shape, r.entry.op);
  const Result* od = find(all, "onednn", r.entry.dtype, r.entry.shape, r.entry.op);
  if (ceiling) j["copy"] = {{"winner", ceiling->winner}, {"bytes_per_second", ceiling->bytes_per_second}};
  if (const auto f = bench::fraction_of_copy(r, all); f && ceiling) {
    j["fraction_of_copy"] = *f;
    j["ceiling_suspect"] = bench::ceiling_suspect(*f);
  }
  if (od && od->skipped.empty() && r.skipped.empty()) j["times_onednn"] = r.rows_per_second / od->rows_per_second;
  return j;
}

// The kernel column: 10 wide, wider for a longer (plugin) name.
int name_width(const std::vector<std::string>& names) {
  std::size_t w = 10;
  for (const std::string& n : names) w = std::max(w, n.size());
  return static_cast<int>(w);
}

// What cannot run here at all, once per run (not once per shape and dtype): "  avx512 (f32, bf16): needs ...".
void print_unavailable(const std::vector<Result>& results) {
  std::vector<std::pair<std::string, std::string>> seen;  // (what, reason), in first-seen order
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> dtypes;
  for (const Result& r : results) {
    if (!r.unavailable) continue;
    const auto key = std::make_pair(r.entry.what, r.skipped);
    auto& ds = dtypes[key];
    if (ds.empty()) seen.push_back(key);
    const std::string d(name(r.entry.dtype));
    if (std::find(ds.begin(), ds.end(), d) == ds.end()) ds.push_back(d);
  }
  if (seen.empty()) return;
  std::printf("\nnot run here (every shape):\n");
  for (const auto& key : seen) {
    std::string ds;
    for (const std::string& d : dtypes[key]) ds += (ds.empty() ? "" : ", ") + d;
    std::printf("  %s (%s): %s\n", key.first.c_str(), ds.c_str(), key.second.c_str());
  }
}

// Under the ceiling's row: every copy measured for it, in GB/s, so the winner is seen beside the others
// (the 512-bit loops where the CPU has AVX-512; the copies that cannot run here are listed once, at the end).
void print_copies(const std::vector<Result>& results, DType d, const Shape& s, Op op) {
  std::string line;
  for (const Result& r : results) {
    if (!bench::is_copy(r.entry.what) || r.entry.dtype != d || r.entry.shape.rows != s.rows || r.entry.shape.cols != s.cols) continue;
    if (r.entry.op.prologue != op.prologue || !r.skipped.empty() || r.unavailable || !(r.bytes_per_second > 0)) continue;
    char cell[64];
    std::snprintf(cell, sizeof cell, "%s%s %.2f", line.empty() ? "" : ", ", r.entry.what.c_str(), r.bytes_per_second / 1e9);
    line += cell;
  }
  if (!line.empty()) std::printf("    copies measured: %s\n", line.c_str());
}

void print_tables(const std::vector<Result>& results, const std::vector<Shape>& shapes, const std::vector<Op>& ops) {
  std::vector<std::string> names;
  for (const Result& r : results) names.push_back(bench::is_copy(r.entry.what) ? "copy " + r.entry.what : r.entry.label());
  const int w = name_width(names);
  for (const Op op : ops) {
    const std::string op_text = op == Op::layernorm ? "" : " " + std::string(name(op));
    const char* params = op.norm == Norm::layernorm ? "gamma/beta" : "gamma";
    const bool fused = op.prologue == Prologue::residual_add;
    for (const Shape& s : shapes) {
      if (fused) {
        std::printf("\n%s%s (GB/s of x + residual read, h + y written + %s; single calls, median; copy = fastest "
                    "copy of x to y and residual to h)\n", s.text().c_str(), op_text.c_str(), params);
      } else if (op.direction == Direction::bwd) {
        std::printf("\n%s%s (GB/s of x + dy read, dx written + %s and their gradients; single calls, median; copy = "
                    "fastest copy of x to y: the ceiling is its bandwidth)\n", s.text().c_str(), op_text.c_str(), params);
      } else {
        std::printf("\n%s%s (GB/s of x read + y written + %s; single calls, median; copy = fastest copy of x to y)\n",
                    s.text().c_str(), op_text.c_str(), params);
      }
      std::printf("  %-*s %-5s %9s %10s %10s\n", w, "kernel", "dtype", "GB/s", "% of copy", "x oneDNN");
      DType last = DType::f64;
      for (const Result& r : results) {
        if (r.entry.shape.rows != s.rows || r.entry.shape.cols != s.cols || r.unavailable) continue;
        const bool copy = bench::is_copy(r.entry.what);
        Op base = r.entry.op;  // a quantized output sits under its op, labelled with its format
        base.epilogue = Epilogue::y_as_x;
        if (!copy && base != op) continue;
        if (copy && (r.entry.op.prologue == Prologue::residual_add) != fused) continue;
        const std::string d(name(r.entry.dtype));
        const auto ceiling = bench::copy_ceiling(results, r.entry.dtype, s, op);
        const Result* od = find(results, "onednn", r.entry.dtype, s, op);
        if (copy) {
          // One row per dtype: the ceiling and the copy that set it.
          if (last == r.entry.dtype) continue;
          last = r.entry.dtype;
          if (!ceiling) {
            std::printf("  %-*s %-5s  no copy measured\n", w, "copy", d.c_str());
            continue;
          }
          char x[32] = "-";
          if (od && od->skipped.empty()) std::snprintf(x, sizeof x, "%.2fx", (ceiling->bytes_per_second / od->bytes_per_second));
          std::printf("  %-*s %-5s %9.2f %10s %10s\n", w, ("copy " + ceiling->winner).c_str(), d.c_str(),
                      ceiling->bytes_per_second / 1e9, "100%", x);
          print_copies(results, r.entry.dtype, s, op);
          continue;
        }
        if (!r.skipped.empty()) {
          std::printf("  %-*s %-5s  skipped: %s\n", w, r.entry.label().c_str(), d.c_str(), r.skipped.c_str());
          continue;
        }
        char x[32] = "-";
        if (od && od->skipped.empty()) std::snprintf(x, sizeof x, "%.2fx", r.rows_per_second / od->rows_per_second);
        const auto f = bench::fraction_of_copy(r, results);
        const std::string pct = ceiling && f ? bench::percent_of_copy(*f, r.bytes_per_second, *ceiling) : "-";
        if (ceiling && f && bench::ceiling_suspect(*f)) {
          std::printf("  %-*s %-5s %9.2f  %s\n", w, r.entry.label().c_str(), d.c_str(), r.bytes_per_second / 1e9, pct.c_str());
        } else {
          std::printf("  %-*s %-5s %9.2f %10s %10s\n", w, r.entry.label().c_str(), d.c_str(), r.bytes_per_second / 1e9,
                      pct.c_str(), x);
        }
      }
    }
  }
}

// --quant, --scaling, --scale as bench and select take them (bench: each kernel that writes q also runs with q
// instead of y; select: the kernels that write q, timed writing it).
struct BenchQuantFlags {
  std::string quant, scaling = "row";
  double scale = 0;
  // nvfp4's G where none is given: the tensor's own for an amax|y| of 6 (2688/6), which normalized rows of 4096
  // reach; G changes the block scales' values, not the work (bench does not compute y*'s amax for its G).
  double global_scale = 448;
  std::string mx_rule, scale_format;
  CLI::Option* scale_opt = nullptr;
  void add_to(CLI::App* cmd, const char* what) {
    cmd->add_option("--quant", quant, std::string(what) + ": " + quant_format_names() + " (GB/s of x read + q and scales written)");
    cmd->add_option("--scaling", scaling, "With --quant: " + scaling_syntaxes() + " (default row)")->default_val("row");
    scale_opt = cmd->add_option("--scale", scale, "With --quant and tensor scaling: the scale S (an f32 > 0)");
    cmd->add_option("--global-scale", global_scale, "With --quant fp4_e2m1 --scaling nvfp4: the global scale G (default 448)");
    cmd->add_option("--mx-rule", mx_rule, "With --scaling mx: floor (default), ceil, even or rceil");
    cmd->add_option("--scale-format", scale_format, "With --scaling row or group:G: f32 (default) or ue8m0");
  }
  // What bench and select both refuse, before anything runs: a spec for the backward or for f64 x, or one that does
  // not fit a shape's row (bench once dropped such a spec and exited 0 where select refused it).
  static void check_request(const QuantSpec& spec, Direction dir, const std::vector<DType>& dtypes, const std::vector<Shape>& shapes) {
    if (dir == Direction::bwd) throw InputError("--quant is a forward output: not with --dir bwd");
    for (DType d : dtypes)
      if (d == DType::f64) throw InputError("--quant takes f32, f16 or bf16 x, not f64");
    for (const Shape& s : shapes)
      if (const std::string why = quant_spec_error(spec, s.cols); !why.empty())
        throw InputError("--quant: " + why + (shapes.size() > 1 ? " (--shape " + s.text() + ")" : ""));
  }
  // The spec (groups checked against each shape's row where it runs); parse_quant_spec's refusals as InputError.
  std::optional<QuantSpec> spec() const {
    if (quant.empty()) return std::nullopt;
    try {
      QuantSpec s = parse_quant_spec(quant, scaling, scale_opt->count() > 0 ? std::optional<double>(scale) : std::nullopt, 0, {},
                                     std::nullopt, mx_rule, scale_format);
      if (s.scaling_info().global_scale)
        s = parse_quant_spec(quant, scaling, std::nullopt, 0, {}, global_scale, mx_rule, scale_format);
      return s;
    } catch (const QuantSpecError& e) {
      throw InputError(e.what());
    }
  }
};

struct BenchFlags {
  std::vector<std::string> kernels, shapes, dtypes, ops;
  BenchQuantFlags quant;
  std::string dir = "fwd";
  int threads = 1;
  bool quick = false, cold = false;
  std::string json;
};

struct SelectFlags {
  std::string shape, dtype = "f32", json, op = "layernorm", dir = "fwd";
  double max_ulp = -1;
  int threads = 1;
  BenchQuantFlags quant;
};

}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Throughput of the kernels beside the copy ceiling and oneDNN, in one run");
  auto f = std::make_shared<BenchFlags>();
  cmd->add_option("--kernel", f->kernels, "Kernel, repeatable (default: every available one but the cautionary)");
  cmd->add_option("--shape", f->shapes, "ROWSxCOLS, repeatable (default: bench/shapes.txt; its quick lines with --quick)");
  cmd->add_option("--dtype", f->dtypes, "f32, f16, bf16 (f64 for the scalar kernels), repeatable (default: f32, bf16, f16)");
  cmd->add_option("--op", f->ops, "layernorm, rmsnorm, add_layernorm or add_rmsnorm, repeatable (default: layernorm); "
                                  "RMSNorm runs with gamma, no beta; Add & Norm with a residual in x's dtype, against "
                                  "a copy of x to y and residual to h");
  cmd->add_option("--dir", f->dir,
                  "fwd (default) or bwd: the backward of the --op norms (x and dy read, dx written, dgamma/dbeta; "
                  "from the forward's saved statistics), against the copy's bandwidth")
      ->default_val("fwd");
  cmd->add_option("--threads", f->threads, "Threads per kernel call (default 1)")->check(CLI::Range(1, 1024));
  cmd->add_flag("--quick", f->quick, "Fewer shapes and repetitions: every available kernel in under 2 minutes");
  cmd->add_flag("--cold", f->cold, "Evict the caches (64 MiB) before every timed call: data comes from DRAM");
  cmd->add_option("--json", f->json, "Write the results (and the hardware) as JSON to this file");
  f->quant.add_to(cmd, "Also run each kernel that writes quantized outputs with q instead of y");
  add_plugin_flag(cmd);
  cmd->callback([f, &exit_code] {
    check_outputs({{f->json, "--json"}}, plugin_paths());
    const std::optional<QuantSpec> quant = f->quant.spec();
    std::vector<Shape> shapes;
    for (const std::string& s : f->shapes) shapes.push_back(shape_flag(s));
    if (shapes.empty()) shapes = bench::builtin_shapes(f->quick);
    const auto dtypes = dtypes_or(f->dtypes, {DType::f32, DType::bf16, DType::f16});
    const Direction dir = dir_flag(f->dir);
    const bool bwd = dir == Direction::bwd;
    if (quant) BenchQuantFlags::check_request(*quant, dir, dtypes, shapes);
    std::vector<Op> ops;
    for (const std::string& o : f->ops) ops.push_back(op_flag(o, dir));
    if (ops.empty()) ops.push_back(bwd ? Op::layernorm_bwd : Op::layernorm);
    std::vector<const KernelInfo*> kernels;
    for (const std::string& k : f->kernels) kernels.push_back(&kernel_flag(k));
    if (kernels.empty()) {
      for (const KernelInfo& k : registry()) {
        if (!k.cautionary) kernels.push_back(&k);
      }
    }
    const auto onednn_why = bench::onednn_not_built();
    std::vector<Entry> entries;
    for (const Shape& s : shapes) {
      for (DType d : dtypes) {
        // The copies once per stream count the ops need: x to y, and x to y with residual to h.
        const bool plain = std::any_of(ops.begin(), ops.end(), [](Op o) { return o.prologue != Prologue::residual_add; });
        const bool fused = std::any_of(ops.begin(), ops.end(), [](Op o) { return o.prologue == Prologue::residual_add; });
        for (const std::string& c : bench::copy_names()) {
          if (plain) entries.push_back({c, nullptr, d, s});
          if (fused) entries.push_back({c, nullptr, d, s, Op::add_layernorm});
        }
        for (const Op op : ops) {
          // oneDNN has no fused residual add: no baseline for Add & Norm (its column shows "-").
          if (!onednn_why && op.prologue != Prologue::residual_add && op.direction != Direction::bwd) entries.push_back({"onednn", nullptr, d, s, op});
          for (const KernelInfo* k : kernels) {
            if (k->takes.dtypes.contains(d) && k->implements(op)) entries.push_back({std::string(k->name), k, d, s, op});
            // The same op with q instead of y, in the same run (where the spec fits the shape).
            if (quant && k->takes.dtypes.contains(d) && k->implements(quantized(op)))  // check_request: it fits
              entries.push_back({std::string(k->name), k, d, s, quantized(op), *quant});
          }
        }
      }
    }
    bench::Settings settings;
    settings.threads = f->threads;
    settings.cold = f->cold;
    if (f->quick) settings.repetitions = 3, settings.min_seconds = 0.05;
    std::printf("lnorm bench on %s, %d thread(s), %d rounds%s\n", bench::hardware().c_str(), settings.threads,
                settings.repetitions, settings.cold ? ", cold caches" : ", warm caches");
    if (onednn_why) std::printf("oneDNN baseline: not built (%s)\n", onednn_why->c_str());
    std::fflush(stdout);
    const auto results = bench::run(entries, settings, progress_line(entries.size()));
    if (isatty(fileno(stderr))) std::fprintf(stderr, "\r\033[K");
    print_unavailable(results);
    print_tables(results, shapes, ops);
    if (!f->json.empty()) {
      nlohmann::json all = nlohmann::json::array();
      for (const Result& r : results) all.push_back(result_json(r, results));
      const nlohmann::json out = {{"hardware", bench::hardware()}, {"threads", settings.threads},
                                  {"repetitions", settings.repetitions}, {"cold", settings.cold},
                                  {"onednn", onednn_why ? "not built (" + *onednn_why + ")" : std::string("built")},
                                  {"results", all}};
      write_text_atomically(f->json, out.dump(2) + "\n");
    }
    // A kernel that threw while timed (a plugin's exception) is in the table with its message; the run is not a pass.
    const auto failed = std::count_if(results.begin(), results.end(), [](const Result& r) { return r.failed; });
    if (failed > 0) std::fprintf(stderr, "lnorm: %ld kernel run(s) failed while timed (their rows say why)\n", static_cast<long>(failed));
    exit_code = failed > 0 ? 1 : 0;
  });
}

void add_select(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("select", "Recommend the fastest kernel here whose verified budget meets --max-ulp");
  auto f = std::make_shared<SelectFlags>();
  cmd->add_option("--shape", f->shape, "ROWSxCOLS of the problem")->required();
  cmd->add_option("--dtype", f->dtype, "f32, f64, f16 or bf16 (default f32)");
  cmd->add_option("--op", f->op, "layernorm, rmsnorm, add_layernorm or add_rmsnorm (default layernorm): kernels that implement it, on its budgets (Add & Norm: the norm's unless budgets.toml has the op's)");
  cmd->add_option("--max-ulp", f->max_ulp,
                  "Accuracy asked: a kernel qualifies when its budgets.toml y budget is at most this many scaled ulps "
                  "and has no kappa term (default: any kernel that passes its own accuracy property)")->check(budget_number());
  cmd->add_option("--dir", f->dir,
                  "fwd (default) or bwd: the op's backward, qualified on the larger of its dx and dgamma budgets")
      ->default_val("fwd");
  cmd->add_option("--threads", f->threads, "Threads per kernel call (default 1)")->check(CLI::Range(1, 1024));
  cmd->add_option("--json", f->json, "Write {\"kernel\": ..., \"candidates\": [...]} to this file");
  f->quant.add_to(cmd, "Choose among the kernels that write the norm's output quantized, timed writing q and its scales");
  add_plugin_flag(cmd);
  cmd->callback([f, &exit_code] {
    check_outputs({{f->json, "--json"}}, plugin_paths());
    const Op op = op_flag(f->op, dir_flag(f->dir));
    const bench::SelectRequest request{shape_flag(f->shape), dtype_flag(f->dtype), f->max_ulp, op, f->quant.spec()};
    if (request.quant) BenchQuantFlags::check_request(*request.quant, op.direction, {request.dtype}, {request.shape});
    const verify::Budgets budgets = verify::Budgets::builtin();
    // The verified accuracy select qualifies kernels on: budgets.toml (plugins: its [default] sections); a
    // backward on the larger of its dx and dgamma budgets.
    const auto accuracy = [&](const KernelInfo& k) {
      const verify::KernelBudget& kb = budgets.for_kernel(request.op, k.name, request.dtype);
      const Budget b = request.op.direction == Direction::bwd ? Budget{std::max(kb.dx.a, kb.dgamma.a), std::max(kb.dx.b, kb.dgamma.b)} : kb.y;
      bench::Accuracy a{b.a, b.b, std::nullopt};
      if (const auto x = kb.expected_failures.find(verify::Property::accuracy); x != kb.expected_failures.end())
        a.accuracy_failure = x->second;
      return a;
    };
    std::vector<bench::Candidate> cands = bench::qualify(registry(), request, accuracy);
    const std::vector<Entry> entries = bench::entries_to_time(cands, request);
    if (entries.size() == bench::copy_names().size()) {
      std::printf("no kernel here meets the accuracy asked for %s %s\n", request.shape.text().c_str(),
                  std::string(name(request.dtype)).c_str());
    }
    bench::Settings settings;
    settings.threads = f->threads;
    settings.repetitions = 3;
    const auto results = bench::run(entries, settings, progress_line(entries.size()));
    if (isatty(fileno(stderr))) std::fprintf(stderr, "\r\033[K");
    const bench::Candidate* best = bench::rank(cands, results, request);
    const auto ceiling = bench::copy_ceiling(results, request.dtype, request.shape, request.op);

    std::printf("lnorm select %s%s %s%s on %s\n", request.shape.text().c_str(),
                request.op == Op::layernorm ? "" : (" " + std::string(name(request.op))).c_str(),
                std::string(name(request.dtype)).c_str(), request.quant ? (" -> q " + describe(*request.quant)).c_str() : "",
                bench::hardware().c_str());
    std::vector<std::string> names;
    for (const bench::Candidate& c : cands) names.push_back(std::string(c.kernel->name));
    const int w = name_width(names);
    std::printf("  %-*s %-12s %8s %14s  %s\n", w, "kernel", "status", "GB/s", "budget", "why");
    for (const bench::Candidate& c : cands) {
      char budget[48];
      std::snprintf(budget, sizeof budget, "%g+%g*k", c.a, c.b);
      std::printf("  %-*s %-12s %8.2f %14s  %s\n", w, std::string(c.kernel->name).c_str(), c.status.c_str(),
                  c.gb_per_second, budget, c.reason.c_str());
    }
    if (ceiling) {
      std::printf("  %-*s %-12s %8.2f %14s  fastest copy of x to y%s, %d thread(s): %s\n", w, "copy", "ceiling",
                  ceiling->bytes_per_second / 1e9, "", request.op.prologue == Prologue::residual_add ? " and residual to h" : "", settings.threads,
                  ceiling->winner.c_str());
    }
    std::printf("%s\n", best ? ("recommended: " + std::string(best->kernel->name)).c_str() : "recommended: none");
    if (!f->json.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const bench::Candidate& c : cands) {
        list.push_back({{"kernel", c.kernel->name}, {"status", c.status}, {"reason", c.reason},
                        {"gb_per_second", c.gb_per_second}, {"budget", {{"a", c.a}, {"b", c.b}}}});
      }
      const nlohmann::json out = {
          {"kernel", best ? nlohmann::json(std::string(best->kernel->name)) : nlohmann::json(nullptr)},
          {"shape", request.shape.text()}, {"op", name(request.op)}, {"dtype", name(request.dtype)},
          {"quant", request.quant ? nlohmann::json(describe(*request.quant)) : nlohmann::json(nullptr)},
          {"hardware", bench::hardware()},
          {"threads", settings.threads}, {"candidates", list},
          {"copy", ceiling ? nlohmann::json{{"winner", ceiling->winner}, {"bytes_per_second", ceiling->bytes_per_second}}
                           : nlohmann::json(nullptr)}};
      write_text_atomically(f->json, out.dump(2) + "\n");
    }
    exit_code = best ? 0 : 1;
  });
}

}  // namespace lnorm::cli
