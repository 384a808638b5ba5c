// lnorm report: the precision report (reports/): sweeps every kernel × dtype, writes DIR/report.json,
// then renders DIR/report.md, DIR/index.html and the plots with the compiled-in render.py
// (matplotlib). --merge combines report.json files from several machines instead of measuring. --baseline
// OLD hands an earlier report to render.py, which lists the kernels whose verdict or worst error changed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "commands.hpp"
#include "flag_values.hpp"
#include "inputs.hpp"
#include "lnorm/precision_report.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/temp_files.hpp"
#include "plugins.hpp"

namespace lnorm::cli {
namespace {

namespace fs = std::filesystem;

struct ReportFlags {
  std::string out;
  bool quick = false;
  std::vector<std::string> kernels, dtypes, ops, peers, merge;
  std::uint64_t seed = 1;
  int threads = 0;
  std::string label;
  std::string dir = "fwd";
  bool no_render = false;
  std::string baseline;  // --baseline: an earlier report.json or the folder holding one (render.py compares)
};

report::Peer peer_flag(const std::string& text) {
  static const std::regex form("([A-Za-z0-9_.-]+)=(.+)");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw InputError("--peer " + text + ": expected NAME=COMMAND, e.g. torch='python3 peer.py --x {x} --y {y} --eps {eps}'");
  if (find_kernel(m[1].str())) throw InputError("--peer " + text + ": " + m[1].str() + " is already a kernel's name");
  if (m[2].str().find("{y}") == std::string::npos)
    throw InputError("--peer " + text + ": the command never mentions {y}, the output it must write");
  return {m[1].str(), m[2].str()};
}

// The Python that renders: $LNORM_PYTHON, else Debian's /usr/bin/python3 (where apt-get puts
// python3-matplotlib, even when another python3 comes first on PATH), else python3. Checked before a
// long run, so a missing matplotlib costs seconds, not the whole sweep.
std::string find_renderer() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("LNORM_PYTHON"); env && *env) candidates.push_back(env);
  candidates.push_back("/usr/bin/python3");
  candidates.push_back("python3");
  for (const std::string& py : candidates)
    if (std::system(("'" + py + "' -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) return py;
  throw InputError("report: rendering needs python3 with matplotlib (Debian: apt-get install python3-matplotlib); "
                   "--no-render writes report.json alone");
}

// One word for sh -c: single-quoted, a ' inside written as '\''.
std::string sh_quote(const std::string& text) {
  std::string q = "'";
  for (const char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// render.py DIR [--baseline OLD]: OLD as the user gave it (a report.json or its folder; render.py reads either),
// relative to the same working directory, which std::system keeps.
void render(const std::string& python, const std::string& dir, const std::string& baseline) {
  const std::string script = dir + "/.render.py";
  write_text_atomically(script, report::render_script());
  std::string cmd = sh_quote(python) + " " + sh_quote(script) + " " + sh_quote(dir);
  if (!baseline.empty()) cmd += " --baseline " + sh_quote(baseline);
  const int status = std::system(cmd.c_str());
  fs::remove(script);
  if (status != 0) throw std::runtime_error("render.py failed (status " + std::to_string(status) + ")");
}

std::string clock_text(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

// --baseline PATH: a report.json, or a folder holding one, that render.py can read — checked before the run, so a
// typo costs seconds, not the whole sweep. Not this run's own --out/report.json, which the run replaces before
// render.py reads the baseline (the comparison would be with itself).
void check_baseline(const ReportFlags& f) {
  if (f.baseline.empty()) return;
  if (f.no_render) throw InputError("--baseline " + f.baseline + ": the comparison is rendered; not with --no-render");
  std::error_code ec;
  const std::string path = fs::is_directory(f.baseline, ec) ? (fs::path(f.baseline) / "report.json").string() : f.baseline;
  if (!fs::exists(path, ec))
    throw InputError("--baseline " + f.baseline + ": " +
                     (path == f.baseline ? std::string("no such file or folder") : std::string("the folder holds no report.json")));
  if (!fs::is_regular_file(path, ec)) throw InputError("--baseline " + f.baseline + ": " + path + " is not a file");
  std::ifstream in(path);
  if (!in) throw InputError("--baseline " + f.baseline + ": cannot read " + path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError("--baseline " + f.baseline + ": not JSON (" + e.what() + ")");
  }
  if (const std::string why = report::schema_problem(doc); !why.empty())
    throw InputError("--baseline " + f.baseline + ": not an lnorm report (" + why + ")");
  const std::string own = f.out + "/report.json";
  if (fs::exists(own, ec) && fs::equivalent(own, path, ec))
    throw InputError("--baseline " + f.baseline + ": is the report.json this run replaces (--out " + f.out +
                     "); copy it elsewhere first");
}

nlohmann::json load_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--merge " + path + ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError("--merge " + path + ": not JSON (" + e.what() + ")");
  }
}

void run_report(const ReportFlags& f, int& exit_code) {
  if (fs::exists(f.out) && !fs::is_directory(f.out)) throw InputError("--out " + f.out + ": exists and is not a folder");
  // Every flag is checked before anything is created.
  kernels_flag(f.kernels);
  for (const std::string& d : f.dtypes) dtype_flag(d);
  for (const std::string& o : f.ops) norm_op_flag(o, "report");
  for (const std::string& p : f.peers) peer_flag(p);
  const Direction dir = dir_flag(f.dir);
  if (dir == Direction::bwd && !f.peers.empty()) throw InputError("--peer: a peer command computes the LayerNorm forward; not with --dir bwd");
  check_baseline(f);
  // The folder is created with its parents, like `cmake -B`; only a failure to create it is an error.
  // A folder this run creates is removed again if the run ends with no report in it (an error, a crash in a plugin's
  // child, a signal: remove_registered_temps rmdirs it when empty); a folder that existed is left as it was.
  struct CreatedFolder {
    std::string path;
    int slot = -1;
    bool keep = false;
    ~CreatedFolder() {
      io::unregister_temp(slot);
      std::error_code ignored;
      if (!keep && !path.empty()) fs::remove(path, ignored);  // only an empty folder goes
    }
  } created;
  std::error_code ec;
  if (!fs::exists(f.out)) created.path = f.out, created.slot = io::register_temp(f.out);
  fs::create_directories(f.out, ec);
  if (ec) throw InputError("--out " + f.out + ": cannot create the folder (" + ec.message() + ")");
  const std::string python = f.no_render ? std::string() : find_renderer();

  nlohmann::json doc;
  if (!f.merge.empty()) {
    if (!f.kernels.empty() || !f.dtypes.empty() || !f.ops.empty() || !f.peers.empty() || f.quick)
      throw InputError("--merge combines finished reports; --kernel, --dtype, --op, --peer and --quick do not apply");
    // The merged report.json must not replace one of the reports it merges (e.g. --out r1 --merge r1/report.json).
    check_outputs({{f.out + "/report.json", "--out"}}, with_plugin_paths(f.merge));
    std::vector<nlohmann::json> docs;
    for (const std::string& path : f.merge) docs.push_back(load_report(path));
    try {
      doc = report::merge(docs, f.merge);
    } catch (const std::invalid_argument& e) {
      throw InputError(std::string("--merge ") + e.what());
    }
  } else {
    report::Settings s;
    s.quick = f.quick;
    s.seed = f.seed;
    s.machine_label = f.label;
    s.run_alone = [](const KernelInfo& k) { return plugin_path_of(k) != nullptr; };
    s.threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    s.kernels = kernels_flag(f.kernels);
    for (const std::string& d : f.dtypes) s.dtypes.push_back(dtype_flag(d));
    for (const std::string& o : f.ops) s.ops.push_back(op_flag(o, dir));  // plain norms: checked above
    if (dir == Direction::bwd && s.ops.empty()) s.ops.assign(std::begin(kBackwardOps), std::end(kBackwardOps));  // both norms' backward
    for (const std::string& p : f.peers) s.peers.push_back(peer_flag(p));
    s.scratch_dir = f.out + "/.scratch";
    const bool tty = isatty(fileno(stderr));
    const auto start = std::chrono::steady_clock::now();
    auto progress = [&](const std::string& sweep, int done, int total) {
      if (!tty) return;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double left = done ? elapsed * (total - done) / done : 0;
      std::fprintf(stderr, "\r\033[Kreport [%d/%d cells] %s, %s left", done, total, sweep.c_str(), clock_text(left).c_str());
    };
    doc = report::run(s, progress);
    if (tty) std::fprintf(stderr, "\r\033[K");
    fs::remove_all(s.scratch_dir);
  }
  write_text_atomically(f.out + "/report.json", doc.dump(1) + "\n");
  created.keep = true;
  if (f.no_render) {
    std::printf("report: %s/report.json\n", f.out.c_str());
  } else {
    render(python, f.out, f.baseline);
    std::printf("report: %s/index.html (summary %s/report.md, numbers %s/report.json)\n", f.out.c_str(), f.out.c_str(),
                f.out.c_str());
  }
  exit_code = 0;
}

}  // namespace

void add_report(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand("report", "Precision report: error against kappa, width, eps/var and input class (RMSNorm: width, "
                                               "eps/mean(x²), magnitude, class), as report.json, report.md and "
                                               "index.html with plots");
  cmd->add_option("--out", flags->out, "Folder for report.json, report.md, index.html and the plots")->required();
  cmd->add_flag("--quick", flags->quick, "Smaller sweeps (about 8x fewer elements): a few minutes on two cores");
  cmd->add_option("--kernel", flags->kernels,
                  "Kernels to measure (repeatable; 'all', or 'plugins' for the --plugin files' kernels; default all)");
  cmd->add_option("--dtype", flags->dtypes, "Dtypes to measure (repeatable; default f32 f64 f16 bf16)");
  cmd->add_option("--op", flags->ops,
                  "Ops to measure, each with its own sweeps (repeatable: layernorm, rmsnorm; default both). "
                  "RMSNorm: width, eps/mean(x²), magnitude, input classes");
  cmd->add_option("--dir", flags->dir,
                  "fwd (default) or bwd: the backward of the --op norms — dx's error against kappa (LayerNorm), width, "
                  "magnitude (RMSNorm), dy's scale and input class, with dgamma's and dbeta's beside it");
  cmd->add_option("--peer", flags->peers,
                  "Another implementation as NAME=COMMAND (repeatable); COMMAND reads {x} {gamma} {beta} and writes "
                  "{y} [{mean} {rstd}] as .npy, with {eps} and {dtype} given; see reports/peers/");
  cmd->add_option("--merge", flags->merge, "Combine these report.json files (one per machine) instead of measuring")
      ->expected(1, -1);
  cmd->add_option("--seed", flags->seed, "Seed of the sweeps' data")->check(seed_number());
  cmd->add_option("--threads", flags->threads, "Cells measured in parallel (default: all cores)");
  cmd->add_option("--label", flags->label, "This machine's name in the report (default: the host name)");
  cmd->add_flag("--no-render", flags->no_render, "Write report.json only (no matplotlib needed)");
  cmd->add_option("--baseline", flags->baseline,
                  "An earlier report (its report.json or the folder holding it): the document adds, after the verdicts, "
                  "the kernels whose verdict changed or whose worst error moved by more than 10%");
  add_plugin_flag(cmd);
  cmd->callback([flags, &exit_code] { run_report(*flags, exit_code); });
}

}  // namespace lnorm::cli
