// `lnorm report` as a library: sweep every available kernel × op × dtype (and any peer implementation)
// over the conditions that decide each op's accuracy — LayerNorm: kappa, row width, eps/var, the verify
// suite's input classes; RMSNorm: row width, eps/mean(x²), the row's magnitude, the input classes —
// measure each cell against the exact reference, and put every number in one JSON document. Rendering (Markdown, HTML, plots) is reports/render.py's job, from that document alone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lnorm/kernel.hpp"

namespace lnorm::report {

// The version of report.json's layout; render.py and --merge refuse other versions.
inline constexpr const char* kSchema = "lnorm-report/1";

// Another implementation fed through the same metric: a shell command that reads the inputs and
// writes y (and optionally mean/rstd) as .npy. See peers.hpp for the variables it receives.
struct Peer {
  std::string name;
  std::string command;
};

struct Settings {
  bool quick = false;
  std::uint64_t seed = 1;
  std::vector<const KernelInfo*> kernels;  // empty: every kernel in the registry
  std::vector<DType> dtypes;               // empty: f32, f64, f16, bf16
  std::vector<Op> ops;                     // empty: every op (layernorm, rmsnorm); each with its own sweeps
  std::vector<Peer> peers;
  std::string machine_label;               // empty: the host name
  int threads = 1;                         // cells measured in parallel (each kernel runs on one thread)
  std::string scratch_dir;                 // where peers' .npy files go (a folder that exists)
  // Kernels for which this says true run one at a time (the others still in parallel): plugin kernels,
  // so that when one crashes the CLI's crash guard names the one that was running.
  std::function<bool(const KernelInfo&)> run_alone;
};

// Progress: which sweep, cells done so far of the total.
using Progress = std::function<void(const std::string& sweep, int done, int total)>;

nlohmann::json run(const Settings& settings, const Progress& progress = {});

// Several report.json documents (one per machine) as one, each measurement labelled by its machine.
// Throws std::invalid_argument naming the input when a document is not an lnorm report of kSchema.
nlohmann::json merge(const std::vector<nlohmann::json>& reports, const std::vector<std::string>& names);

// Checks the parts of the layout render.py relies on; returns what is wrong, or an empty string.
std::string schema_problem(const nlohmann::json& report);

// The plotting script, compiled in so an installed lnorm needs no source tree.
const std::string& render_script();

}  // namespace lnorm::report
