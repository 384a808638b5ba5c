// lnorm verify — the CI gate: each op's properties (property_tests/) for each chosen kernel × op × dtype,
// judged against budgets.toml. Exit 0 when every property holds (expected failures excepted), 1 when
// any fails, is mistrusted, or an expected failure starts passing; 2 on bad usage.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "flag_values.hpp"
#include "inputs.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/verify.hpp"
#include "lnorm/verify_report.hpp"
#include "plugins.hpp"
#include "verify_sandbox.hpp"

namespace lnorm::cli {

namespace {

struct VerifyFlags {
  std::vector<std::string> kernels{"all"};
  std::vector<std::string> ops;
  std::string dir = "fwd";
  std::vector<std::string> dtypes;
  std::vector<std::string> properties;
  std::string budgets, json, junit, dump;
  int cases = 0;
  std::uint64_t seed = 1;
  bool quick = false;
  double case_timeout = 60;  // s; 0: none
  std::string shard;               // "K/N"
  std::vector<std::string> merge;  // shard JSON files
};

// --shard K/N -> (K, N), 1 <= K <= N.
std::pair<int, int> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  int k = 0, n = 0;
  std::size_t used_k = 0, used_n = 0;
  try {
    if (slash != std::string::npos) {
      k = std::stoi(s.substr(0, slash), &used_k);
      n = std::stoi(s.substr(slash + 1), &used_n);
    }
  } catch (const std::exception&) {
    k = n = 0;
  }
  if (slash == std::string::npos || used_k != slash || used_n != s.size() - slash - 1 || n < 1 || k < 1 || k > n)
    throw InputError("--shard " + s + ": expected K/N with 1 <= K <= N (e.g. --shard 2/4)");
  return {k, n};
}

void print_and_write(const std::vector<lnorm::verify::Outcome>& outcomes, const lnorm::verify::RunInfo& info,
                     const VerifyFlags& f, int& exit_code) {
  using namespace lnorm::verify;
  std::fputs(table_text(outcomes, info).c_str(), stdout);
  if (!f.json.empty()) write_text_atomically(f.json, json_text(outcomes, info));
  if (!f.junit.empty()) write_text_atomically(f.junit, junit_text(outcomes, info));
  bool failed = verified_nothing(outcomes);  // NOTHING VERIFIED (every cell skipped here) is not a pass
  for (const Outcome& o : outcomes) failed = failed || is_failure(o.status);
  exit_code = failed ? 1 : 0;
}

}  // namespace

void add_verify(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("verify", "Check the kernels' properties against the exact reference and budgets.toml");
  auto f = std::make_shared<VerifyFlags>();
  cmd->add_option("--kernel", f->kernels, "Kernel name, repeatable, 'all' (default), or 'plugins' (every --plugin kernel)");
  cmd->add_option("--op", f->ops,
                  "layernorm, rmsnorm, add_layernorm or add_rmsnorm (with --dir bwd: layernorm or rmsnorm, the same as "
                  "layernorm_bwd, rmsnorm_bwd), repeatable (default: every op of the direction the kernel implements)");
  cmd->add_option("--dir", f->dir, "fwd (the norms, default) or bwd (their backward: dx, dgamma, dbeta)")->default_val("fwd");
  cmd->add_option("--dtype", f->dtypes, "f32, f64, f16 or bf16, repeatable (default: every dtype the kernel takes)");
  std::string property_names;
  for (lnorm::verify::Property p : lnorm::verify::kAllProperties) {
    property_names += (property_names.empty() ? "" : ", ") + std::string(lnorm::verify::name(p));
  }
  cmd->add_option("--property", f->properties,
                  "Only this property, repeatable (default: every property of the op; a property of another op is not "
                  "run): " + property_names);
  cmd->add_option("--budgets", f->budgets, "Budgets file (default: the built-in property_tests/budgets.toml)");
  cmd->add_option("--cases", f->cases, "Generated cases per property (default: 24 with --quick, else 160)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--seed", f->seed, "Seed of the run (default 1); the same seed reproduces the same cases")->check(seed_number());
  cmd->add_flag("--quick", f->quick, "The quick suite ctest runs (24 cases per property)");
  cmd->add_option("--json", f->json, "Write the results as JSON to this file")->check(non_empty_value());
  cmd->add_option("--junit", f->junit, "Write JUnit XML (one testcase per kernel x dtype x property) to this file")->check(non_empty_value());
  cmd->add_option("--dump-failures", f->dump, "Write each failing case's x/gamma/beta as .npy under this folder");
  cmd->add_option("--shard", f->shard,
                  "K/N: run only the cells (kernel x op x dtype x property, in the whole run's order) i with i mod N = K-1; "
                  "same seeds and results as the whole run; --merge joins the N shards' --json files")->check(non_empty_value());
  cmd->add_option("--merge", f->merge,
                  "Join these shard --json files (verify --shard K/N of one run) into one verdict, table, --json and "
                  "--junit, as the unsharded run would give; takes no other selection flag")
      ->expected(1, -1);
  cmd->add_option("--case-timeout", f->case_timeout,
                  "Seconds one case of a plugin kernel may take (its kernel run and its checks) before its cell fails "
                  "naming the case (default 60; 0: no limit)")
      ->check(CLI::Range(0.0, 86400.0));
  add_plugin_flag(cmd);
  cmd->callback([f, property_names, &exit_code] {
    using namespace lnorm::verify;
    // --merge's shards are inputs: an output that is one of them would be overwritten.
    std::vector<std::string> inputs = with_plugin_paths(f->merge);
    inputs.push_back(f->budgets);
    check_outputs({{f->json, "--json"}, {f->junit, "--junit"}}, inputs);
    if (!f->merge.empty()) {
      if (!f->shard.empty() || f->kernels != std::vector<std::string>{"all"} || !f->ops.empty() || f->dir != "fwd" ||
          !f->dtypes.empty() || !f->properties.empty() || !f->budgets.empty() || f->cases || f->seed != 1 || f->quick || !f->dump.empty())
        throw InputError("--merge takes only --json and --junit: the shards' files say what was run");
      MergedRun merged;
      try {
        merged = merge_json_shards(f->merge);
      } catch (const std::runtime_error& e) {
        throw InputError(e.what());
      }
      print_and_write(merged.outcomes, merged.info, *f, exit_code);
      return;
    }
    const auto [shard, shards] = f->shard.empty() ? std::pair<int, int>{1, 1} : parse_shard(f->shard);
    const std::vector<const KernelInfo*> kernels = kernels_flag(f->kernels);
    std::vector<DType> dtypes;
    for (const std::string& d : f->dtypes) dtypes.push_back(dtype_flag(d));
    Settings settings;
    settings.cases = f->cases;
    settings.seed = f->seed;
    settings.quick = f->quick;
    settings.dump_dir = f->dump;
    settings.case_timeout_s = f->case_timeout;
    for (const std::string& p : f->properties) {
      const auto parsed = parse_property(p);
      if (!parsed) throw InputError("--property " + p + ": not a property (have: " + property_names + ")");
      settings.properties.push_back(*parsed);
    }
    Budgets budgets;
    try {
      budgets = f->budgets.empty() ? Budgets::builtin() : Budgets::load(f->budgets);
    } catch (const BudgetError& e) {
      throw InputError(e.what());
    }
    const Direction dir = dir_flag(f->dir);
    const bool bwd = dir == Direction::bwd;
    std::vector<Op> ops;
    for (const std::string& o : f->ops) ops.push_back(op_flag(o, dir));
    if (ops.empty()) {
      // Every op of the direction, but only those the budgets speak of: a budgets file from before RMSNorm
      // existed is a LayerNorm gate and keeps working as one (said once; --op rmsnorm then names the missing section).
      for (Op o : bwd ? std::vector<Op>(std::begin(kBackwardOps), std::end(kBackwardOps))
                      : std::vector<Op>(std::begin(kForwardOps), std::end(kForwardOps))) {
        if (budgets.covers(o)) {
          ops.push_back(o);
        } else {
          const std::string op_name(name(o)), level = o == Op::layernorm ? "" : op_name + ".";
          // Add & Norm falls back to its norm's sections (budgets.hpp): say which are missing.
          const std::string also = o.prologue == Prologue::residual_add ? " nor " + std::string(name(plain(o.norm))) + " sections to fall back to" : "";
          std::fprintf(stderr, "lnorm: %s has no %s sections ([%s<kernel>.<dtype>] or [%sdefault.<dtype>])%s: %s not verified\n",
                       budgets.source().c_str(), op_name.c_str(), level.c_str(), level.c_str(), also.c_str(), op_name.c_str());
        }
      }
      if (ops.empty()) throw InputError(budgets.source() + ": no section for any op");
    }
    // The work list (kernel x op x dtype, op-major per kernel), so progress can say "n of m". Each property of
    // a work item is a cell, numbered in this order; --shard K/N keeps the cells i with i mod N = K - 1. A cell's
    // seed derives from its kernel, op, dtype and property alone (verify.cpp), so a shard's cells are the
    // whole run's.
    struct Work {
      const KernelInfo* k;
      Op op;
      DType d;
      std::vector<Property> props;       // this shard's
      std::vector<std::int64_t> cells;   // their cell numbers
    };
    std::vector<Work> work;
    std::size_t total = 0, cells_total = 0;
    for (const KernelInfo* k : kernels) {
      for (Op o : ops) {
        if (!k->implements(o)) continue;
        for (DType d : dtypes.empty() ? std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)) : dtypes) {
          if (!k->takes.dtypes.contains(d)) continue;
          Work w{k, o, d, {}, {}};
          for (Property p : settings.properties.empty() ? properties_for(o) : settings.properties) {
            // The cells verify_kernel runs (a kernel without quantized outputs has no `quantized` cell): counted with
            // applies() alone, such a cell had a number and no outcome, and the cells after it took the wrong numbers.
            if (!runs_property(*k, p, o)) continue;
            const std::size_t cell = cells_total++;
            if (static_cast<int>(cell % static_cast<std::size_t>(shards)) != shard - 1) continue;
            w.props.push_back(p);
            w.cells.push_back(static_cast<std::int64_t>(cell));
          }
          total += w.props.size();
          work.push_back(std::move(w));
        }
      }
    }
    if (work.empty()) throw InputError("no chosen kernel implements the chosen op and dtype");
    // A selection with no cell verifies nothing ("PASS: 0 passed, 0 failed" before): a usage error, named.
    if (cells_total == 0)
      throw InputError("nothing to verify: no chosen kernel runs the chosen properties on the chosen ops and dtypes"
                       " (`quantized` needs a kernel that writes quantized outputs, on a forward op; `lnorm list` and"
                       " docs/verify.md have which kernel runs what)");
    const bool tty = isatty(fileno(stderr));
    std::size_t done = 0;
    const auto start = std::chrono::steady_clock::now();
    std::vector<Outcome> outcomes;
    for (const auto& [k, op, d, props, cells] : work) {
      if (props.empty()) continue;  // none of this item's cells is this shard's
      Settings cell_settings = settings;
      cell_settings.properties = props;
      std::size_t next_cell = 0;
      const auto numbered = [&, cells = &cells](Outcome&& o) {
        o.cell = (*cells)[next_cell++];
        outcomes.push_back(std::move(o));
      };
      KernelBudget budget;
      try {
        budget = budgets.for_kernel(op, k->name, d);
      } catch (const BudgetError& e) {
        throw InputError(e.what());
      }
      auto progress = [&, op = op](std::string_view kernel, DType dtype, Property p) {
        ++done;
        if (tty) {
          std::fprintf(stderr, "\r\033[Kverify [%zu/%zu] %s%s %s %s", done, total, std::string(kernel).c_str(),
                       op == Op::layernorm ? "" : (" " + std::string(name(op))).c_str(),
                       std::string(name(dtype)).c_str(), std::string(name(p)).c_str());
        }
      };
      if (const std::string* plugin = plugin_path_of(*k)) {
        // A plugin kernel runs in forked children: a crash fails one property, and the run goes on.
        Settings with_plugin = cell_settings;
        with_plugin.command = "lnorm verify --plugin " + *plugin;
        for (Outcome& o : verify_in_child(*k, op, d, budget, with_plugin, progress)) {
          if (o.check_command.rfind("lnorm run ", 0) == 0) o.check_command.insert(10, "--plugin " + *plugin + " ");
          numbered(std::move(o));
        }
        continue;
      }
      for (Outcome& o : verify_kernel(*k, op, d, budget, cell_settings, progress)) numbered(std::move(o));
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    RunInfo info;
    info.seed = settings.seed;
    info.quick = settings.quick;
    info.cases = settings.default_cases();
    info.budgets_source = budgets.source();
    info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    info.shard = shard;
    info.shards = shards;
    info.cells_total = cells_total;
    info.selection = "dir " + f->dir;
    for (const char* what : {"kernels", "ops", "dtypes", "properties"}) {
      std::string list;
      const auto add = [&](std::string_view item) { list += (list.empty() ? "" : ",") + std::string(item); };
      if (what == std::string("kernels")) for (const KernelInfo* k : kernels) add(k->name);
      if (what == std::string("ops")) for (Op o : ops) add(name(o));
      if (what == std::string("dtypes")) for (DType d : dtypes) add(name(d));
      if (what == std::string("properties")) for (Property p : settings.properties) add(name(p));
      info.selection += std::string("; ") + what + " " + (list.empty() ? "all" : list);
    }
    print_and_write(outcomes, info, *f, exit_code);
  });
}

}  // namespace lnorm::cli
