// The report's measurement loop: every sweep point once through the exact reference, then through
// every implementation; cells measured in parallel, each kernel on one thread (kernels must give the
// same bits on any thread count, so this changes no number).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include <unistd.h>

#include "bounds.hpp"
#include "cells.hpp"
#include "lnorm/bench.hpp"
#include "lnorm/precision_report.hpp"
#include "lnorm/registry.hpp"
#include "peers.hpp"
#include "quantized.hpp"
#include "sweeps.hpp"

namespace lnorm::report {
namespace {

using nlohmann::json;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// eps / var of a case's rows (median), var in long double from the stored values: this only places
// the point on the plot's axis; nothing is measured with it.
double median_eps_over_var(const verify::Case& c) {
  const std::int64_t n = c.spec.cols();
  std::vector<float> ratios;
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    long double sum = 0, sq = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += c.x[static_cast<std::size_t>(r * n + i)];
    const long double mean = sum / n;
    for (std::int64_t i = 0; i < n; ++i) {
      const long double d = c.x[static_cast<std::size_t>(r * n + i)] - mean;
      sq += d * d;
    }
    if (sq > 0) ratios.push_back(static_cast<float>(c.spec.eps / static_cast<double>(sq / n)));
  }
  return ratios.empty() ? std::nan("") : quantile(ratios, 0.5);
}

// The median over rows of eps / mean(x²) (RMSNorm's eps sweep) or of sqrt(mean(x²)) (its magnitude
// sweep), in long double from the stored values; only the plot's axis, as above. In double, not
// float: f64's magnitude sweep reaches rms 1e-300.
double median_mean_square_ratio(const verify::Case& c, bool eps_over_ms) {
  const std::int64_t n = c.spec.cols();
  std::vector<double> values;
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    long double sq = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const long double v = c.x[static_cast<std::size_t>(r * n + i)];
      sq += v * v;
    }
    const long double ms = sq / n;
    if (ms > 0) values.push_back(static_cast<double>(eps_over_ms ? c.spec.eps / ms : std::sqrt(ms)));
  }
  if (values.empty()) return std::nan("");
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);  // nearest rank, as quantile
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

double x_of(const SweepPoint& p, const KappaStats& kappa) {
  switch (p.x_axis) {
    case XAxis::kappa: return kappa.median;
    case XAxis::eps_over_var: return median_eps_over_var(p.input);
    case XAxis::eps_over_ms: return median_mean_square_ratio(p.input, true);
    case XAxis::rms: return median_mean_square_ratio(p.input, false);
    case XAxis::nominal: break;
  }
  return p.nominal;
}

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json bound_json(const std::optional<double>& b) {
  if (!b) return nullptr;
  if (std::isinf(*b)) return "unbounded";
  return *b;
}

struct Implementation {
  std::string name, kind, summary;
  const KernelInfo* kernel = nullptr;  // null for peers
  const Peer* peer = nullptr;
  std::optional<Algorithm> algorithm;
};

struct Task {
  Op op = Op::layernorm;
  SweepPoint point;
  std::vector<std::size_t> implementations;  // those that run on this dtype
};

}  // namespace

json run(const Settings& settings, const Progress& progress) {
  const auto start = std::chrono::steady_clock::now();
  const std::string machine = settings.machine_label.empty() ? host_name() : settings.machine_label;
  const std::vector<DType> dtypes =
      settings.dtypes.empty() ? std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)) : settings.dtypes;
  std::vector<Op> ops = settings.ops;
  if (ops.empty()) ops.assign(std::begin(kNormOps), std::end(kNormOps));  // Add & Norm has no sweeps yet
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  // Peers are LayerNorm commands (peers.hpp: their placeholders have no op).
  const auto probe = [](Op op, DType d) { return with_op(make_problem(1, 1024, d, 1e-5, false, false), op); };
  std::vector<const KernelInfo*> kernels = settings.kernels;
  if (kernels.empty())
    for (const KernelInfo& k : registry()) kernels.push_back(&k);

  std::vector<Implementation> impls;
  json impl_json = json::array();
  for (const KernelInfo* k : kernels) {
    Implementation im{std::string(k->name), "kernel", std::string(k->summary), k, nullptr, algorithm_of(k->name)};
    json j = {{"name", im.name}, {"kind", "kernel"}, {"summary", im.summary}, {"machine", machine},
              {"cautionary", k->cautionary},
              {"algorithm", im.algorithm ? json(std::string(report::name(*im.algorithm))) : json(nullptr)},
              {"bound_source", im.algorithm ? json(std::string(citation(*im.algorithm))) : json(nullptr)},
              {"dtypes", json::object()}, {"ops", json::object()}};
    // "dtypes": LayerNorm's availability, as before ops existed (RMSNorm-only reports: the first op's);
    // "ops": every measured op's.
    for (Op op : ops)
      for (DType d : dtypes) {
        const auto why = unavailable_reason(*k, probe(op, d));
        j["ops"][std::string(name(op))][std::string(name(d))] = why ? "skipped: " + *why : "measured";
      }
    j["dtypes"] = j["ops"][std::string(name(ops.front()))];
    impl_json.push_back(j);
    impls.push_back(im);
  }
  for (const Peer& p : settings.peers) {
    impls.push_back({p.name, "peer", p.command, nullptr, &p, std::nullopt});
    json j = {{"name", p.name}, {"kind", "peer"}, {"summary", p.command}, {"machine", machine},
              {"cautionary", false}, {"algorithm", nullptr}, {"bound_source", nullptr}, {"dtypes", json::object()},
              {"ops", json::object()}};
    for (Op op : ops)
      for (DType d : dtypes)
        j["ops"][std::string(name(op))][std::string(name(d))] =
            op == Op::layernorm ? "measured" : "skipped: a peer command computes LayerNorm";
    j["dtypes"] = j["ops"][std::string(name(ops.front()))];
    impl_json.push_back(j);
  }

  std::vector<Task> tasks;
  int total_cells = 0;
  for (Op op : ops)
    for (DType d : dtypes) {
      std::vector<std::size_t> runnable;
      for (std::size_t i = 0; i < impls.size(); ++i) {
        if (impls[i].kernel && unavailable_reason(*impls[i].kernel, probe(op, d))) continue;
        if (impls[i].peer && op != Op::layernorm) continue;
        runnable.push_back(i);
      }
      if (runnable.empty()) continue;
      for (SweepPoint& p : sweep_points(op, d, settings.quick, settings.seed)) {
        total_cells += static_cast<int>(runnable.size());
        tasks.push_back({op, std::move(p), runnable});
      }
    }

  std::mutex mu, alone;
  json cells = json::array();
  using Key = std::tuple<std::size_t, Op, DType>;  // implementation, op, dtype
  std::map<Key, Measurement> totals;
  std::map<Key, BackwardMeasurement> bwd_totals;
  std::map<Key, std::pair<double, std::string>> worst_at;
  std::atomic<std::size_t> next{0};
  int done = 0;
  const auto worker = [&](int worker_id) {
    const std::string scratch = settings.scratch_dir + "/peer-" + std::to_string(worker_id);
    for (std::size_t t = next++; t < tasks.size(); t = next++) {
      const Task& task = tasks[t];
      const verify::Case& input = task.point.input;
      const DType d = input.spec.dtype;
      const bool bwd = task.op.direction == Direction::bwd;
      // The backward's exact gradients, or the forward's exact answer (one of them per point).
      const verify::ExactBackward exact_bwd = bwd ? verify::exact_backward(input) : verify::ExactBackward{};
      const verify::Exact exact = bwd ? verify::Exact{} : verify::exact_answer(input);
      const KappaStats kappa = bwd ? kappa_stats(exact_bwd) : kappa_stats(exact);
      const double x = x_of(task.point, kappa);
      const std::string op_name(name(task.op));
      for (std::size_t i : task.implementations) {
        const Implementation& im = impls[i];
        json cell = {{"sweep", task.point.sweep}, {"op", op_name}, {"point", task.point.index}, {"label", task.point.label},
                     {"x", finite_or_null(x)}, {"dtype", std::string(name(d))}, {"implementation", im.name},
                     {"kind", im.kind}, {"machine", machine}, {"rows", input.spec.rows()}, {"cols", input.spec.cols()},
                     {"eps", input.spec.eps}, {"case", input.spec.describe()},
                     {"kappa_median", finite_or_null(kappa.median)}, {"kappa_max", finite_or_null(kappa.max)}};
        std::vector<std::uint64_t> y, mean, rstd;
        std::string error;
        if (bwd) {  // kernels only (peers compute the LayerNorm forward): run as verify --dir bwd runs them
          std::unique_lock<std::mutex> one_at_a_time(alone, std::defer_lock);
          if (settings.run_alone && settings.run_alone(*im.kernel)) one_at_a_time.lock();
          verify::BackwardOutputs out;
          try {  // a worker thread: an exception (a plugin kernel's) must end as this cell's error, not in terminate
            out = verify::run_guarded_backward(*im.kernel, input);
          } catch (const std::exception& e) {
            out.violation = std::string("the kernel threw: ") + e.what();
          }
          if (one_at_a_time.owns_lock()) one_at_a_time.unlock();
          if (!out.violation.empty()) {
            cell["status"] = "error";
            cell["message"] = out.violation;
          } else {
            const BackwardMeasurement m = measure_backward(input, exact_bwd, out);
            cell["status"] = "ok";
            cell.update(m.summary());
            cell["bound_ulp"] = nullptr;  // no bound model for the backward
            std::lock_guard lock(mu);
            bwd_totals[{i, task.op, d}].merge(m);
            double worst = m.dx.nonfinite_mismatches ? INFINITY : 0;
            for (float e : m.dx.errors) worst = std::max(worst, static_cast<double>(e));
            auto& w = worst_at[{i, task.op, d}];
            if (w.second.empty() || worst > w.first) w = {worst, task.point.label};
          }
          std::lock_guard lock(mu);
          cells.push_back(std::move(cell));
          ++done;
          if (progress) progress(task.point.sweep + " " + std::string(name(d)), done, total_cells);
          continue;
        }
        if (im.kernel) {
          std::unique_lock<std::mutex> one_at_a_time(alone, std::defer_lock);
          if (settings.run_alone && settings.run_alone(*im.kernel)) one_at_a_time.lock();
          verify::Outputs out;
          try {  // as above: the cell's error
            out = verify::run_guarded(*im.kernel, input);
          } catch (const std::exception& e) {
            out.violation = std::string("the kernel threw: ") + e.what();
          }
          if (one_at_a_time.owns_lock()) one_at_a_time.unlock();
          error = out.violation;
          y = std::move(out.y), mean = std::move(out.mean), rstd = std::move(out.rstd);
        } else {
          std::filesystem::remove_all(scratch);
          std::filesystem::create_directories(scratch);
          PeerOutputs out = run_peer(im.peer->command, input, scratch);
          error = out.error;
          y = std::move(out.y), mean = std::move(out.mean), rstd = std::move(out.rstd);
        }
        if (!error.empty()) {
          cell["status"] = "error";
          cell["message"] = error;
        } else {
          const Measurement m = measure(input, exact, y, mean, rstd);
          cell["status"] = "ok";
          cell.update(m.summary());
          // The bounds are LayerNorm's (bounds.hpp); RMSNorm has no bound model yet.
          cell["bound_ulp"] = im.algorithm && task.op == Op::layernorm
                                  ? bound_json(bound_for(*im.algorithm, input, exact)) : json(nullptr);
          std::lock_guard lock(mu);
          totals[{i, task.op, d}].merge(m);
          const double worst = cell["max_finite_ulp"].get<double>() + (m.nonfinite_mismatches ? INFINITY : 0);
          auto& w = worst_at[{i, task.op, d}];
          if (w.second.empty() || worst > w.first) w = {worst, task.point.label};
        }
        std::lock_guard lock(mu);
        cells.push_back(std::move(cell));
        ++done;
        if (progress) progress(task.point.sweep + " " + std::string(name(d)), done, total_cells);
      }
    }
    std::filesystem::remove_all(scratch);
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < std::max(1, settings.threads); ++w) pool.emplace_back(worker, w);
  worker(0);
  for (std::thread& th : pool) th.join();

  // Cells in a stable order whatever the threads did: op, dtype, sweep, point, implementation.
  const auto order = [&](const json& c) {
    const std::string& s = c["sweep"].get_ref<const std::string&>();
    int sweep = 0;
    for (const SweepInfo& info : sweep_infos())
      if (info.name != s) ++sweep; else break;
    std::size_t impl = 0;
    while (impl < impls.size() && impls[impl].name != c["implementation"].get_ref<const std::string&>()) ++impl;
    return std::make_tuple(*parse_op(c["op"].get<std::string>()), *parse_dtype(c["dtype"].get<std::string>()), sweep,
                           c["point"].get<int>(), impl);
  };
  std::vector<json> sorted(cells.begin(), cells.end());
  std::stable_sort(sorted.begin(), sorted.end(), [&](const json& a, const json& b) { return order(a) < order(b); });

  json summary = json::array();
  const auto summary_row = [&](const Key& key, const std::vector<std::int64_t>& histogram, const json& numbers) {
    const auto& [impl, op, dtype] = key;
    json s = {{"implementation", impls[impl].name}, {"kind", impls[impl].kind}, {"op", std::string(name(op))},
              {"dtype", std::string(name(dtype))}, {"machine", machine},
              {"worst_cell", worst_at[key].second}, {"histogram", histogram}};
    s.update(numbers);
    summary.push_back(s);
  };
  for (const auto& [key, m] : totals) summary_row(key, m.histogram, m.summary());
  for (const auto& [key, m] : bwd_totals) summary_row(key, m.dx.histogram, m.summary());

  json sweeps = json::array();
  for (const SweepInfo& info : sweep_infos())
    if (std::find(ops.begin(), ops.end(), info.op) != ops.end())
      sweeps.push_back({{"name", info.name}, {"title", info.title}, {"x_axis", info.x_axis}, {"log_x", info.log_x},
                        {"op", std::string(name(info.op))}});

  // The quantized outputs of the kernels that write them (quantized.hpp), forward ops only.
  std::vector<Op> forward_ops;
  for (Op op : ops)
    if (op.direction == Direction::fwd) forward_ops.push_back(op);
  if (progress && !forward_ops.empty()) progress("quantized outputs", done, total_cells);
  const json quantized = quantized_rows(kernels, forward_ops, dtypes, settings.quick, settings.seed, machine);

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  json machine_json = {{"label", machine},          {"description", bench::hardware()},
                       {"hostname", host_name()},   {"lnorm_version", LNORM_VERSION},
                       {"created", utc_now()},      {"seed", settings.seed},
                       {"quick", settings.quick},   {"seconds", seconds},
                       {"threads", settings.threads}};
  return {{"schema", kSchema},
          {"created", utc_now()},
          {"machines", json::array({machine_json})},
          {"sweeps", sweeps},
          {"histogram_edges", histogram_edges()},
          {"implementations", impl_json},
          {"cells", sorted},
          {"summary", summary},
          {"quantized", quantized}};
}

json merge(const std::vector<json>& reports, const std::vector<std::string>& names) {
  json out = {{"schema", kSchema}, {"created", utc_now()}, {"machines", json::array()}, {"sweeps", json::array()},
              {"histogram_edges", histogram_edges()}, {"implementations", json::array()},
              {"cells", json::array()}, {"summary", json::array()}, {"quantized", json::array()}};
  std::map<std::string, int> seen;
  for (std::size_t r = 0; r < reports.size(); ++r) {
    const json& in = reports[r];
    if (const std::string why = schema_problem(in); !why.empty())
      throw std::invalid_argument(names[r] + ": not an " + std::string(kSchema) + " report: " + why);
    // One report given twice (two paths, or a copy) would count every measurement twice under two machine labels.
    for (std::size_t prev = 0; prev < r; ++prev)
      if (reports[prev].value("created", json()) == in.value("created", json()) && reports[prev]["machines"] == in["machines"] &&
          reports[prev]["cells"] == in["cells"])
        throw std::invalid_argument(names[r] + ": the same report as " + names[prev] + " (merged once, not twice)");
    if (in["histogram_edges"] != out["histogram_edges"])
      throw std::invalid_argument(names[r] + ": histogram bins differ from this lnorm's");
    // The sweeps of every input (reports of different ops merge into one with both ops' sweeps).
    for (const json& sweep : in["sweeps"]) {
      bool known = false;
      for (const json& have : out["sweeps"]) known = known || have["name"] == sweep["name"];
      if (!known) out["sweeps"].push_back(sweep);
    }
    // Machine labels stay unique: the second "ci-runner" becomes "ci-runner#2".
    std::map<std::string, std::string> relabel;
    for (json m : in["machines"]) {
      const std::string label = m["label"];
      const int n = ++seen[label];
      m["label"] = n == 1 ? label : label + "#" + std::to_string(n);
      m["source"] = names[r];
      relabel[label] = m["label"];
      out["machines"].push_back(m);
    }
    for (const char* part : {"implementations", "cells", "summary", "quantized"}) {
      if (!in.contains(part)) continue;  // "quantized": reports before it had none
      for (json item : in[part]) {
        item["machine"] = relabel.at(item["machine"].get<std::string>());
        out[part].push_back(std::move(item));
      }
    }
  }
  return out;
}

std::string schema_problem(const json& r) {
  if (!r.is_object()) return "not a JSON object";
  if (!r.contains("schema") || r["schema"] != kSchema)
    return "schema is " + (r.contains("schema") ? r["schema"].dump() : std::string("missing")) + ", expected \"" + kSchema + "\"";
  for (const char* key : {"machines", "sweeps", "implementations", "cells", "summary", "histogram_edges"})
    if (!r.contains(key) || !r[key].is_array()) return std::string("'") + key + "' is missing or not an array";
  std::map<std::string, bool> machines;
  for (const json& m : r["machines"]) {
    if (!m.contains("label") || !m["label"].is_string()) return "a machine has no label";
    machines[m["label"]] = true;
  }
  const auto needs = [](const json& item, std::initializer_list<const char*> keys) -> std::string {
    for (const char* k : keys)
      if (!item.contains(k)) return std::string("an entry lacks '") + k + "'";
    return {};
  };
  for (const json& c : r["cells"]) {
    if (auto why = needs(c, {"sweep", "point", "label", "x", "dtype", "implementation", "kind", "machine", "status"}); !why.empty())
      return "cells: " + why;
    if (c["status"] == "ok")
      if (auto why = needs(c, {"max_ulp", "p999_ulp", "correctly_rounded", "nan_mismatches", "mean_max_ulp", "rstd_max_ulp", "bound_ulp"}); !why.empty())
        return "cells: " + why;
    if (!machines.count(c["machine"].get<std::string>())) return "a cell names an unknown machine " + c["machine"].dump();
  }
  for (const json& s : r["summary"])
    if (auto why = needs(s, {"implementation", "dtype", "machine", "max_ulp", "p999_ulp", "correctly_rounded", "nan_mismatches", "histogram"}); !why.empty())
      return "summary: " + why;
  // The values the tables and plots read, as reports/report.schema.json has them: an error in ulps is a number >= 0
  // (some may be null: NaN or Inf, which JSON cannot hold; a bound may be "unbounded"), a fraction lies in [0, 1], a
  // count or a size is a whole number (rows and cols >= 1).
  const auto bad_value = [](const json& item, const char* key, double lo, double hi, bool whole, bool null_ok) -> std::string {
    if (!item.contains(key)) return {};
    const json& v = item[key];
    if (v.is_null() && null_ok) return {};
    if (std::string_view(key) == "bound_ulp" && v == "unbounded") return {};
    const bool ok = v.is_number() && v.get<double>() >= lo && v.get<double>() <= hi &&
                    (!whole || v.is_number_integer() || v.is_number_unsigned());
    return ok ? std::string() : std::string("'") + key + "' is " + v.dump() + ", not " + (whole ? "a whole number" : "a number") +
                                    " in [" + json(lo).dump() + ", " + (hi == INFINITY ? "inf" : json(hi).dump()) + "]";
  };
  for (const char* part : {"cells", "summary"}) {
    for (const json& item : r[part]) {
      for (const char* key : {"max_ulp", "mean_max_ulp", "rstd_max_ulp", "bound_ulp"})
        if (auto why = bad_value(item, key, 0, INFINITY, false, true); !why.empty()) return std::string(part) + ": " + why;
      if (auto why = bad_value(item, "p999_ulp", 0, INFINITY, false, false); !why.empty()) return std::string(part) + ": " + why;
      if (auto why = bad_value(item, "correctly_rounded", 0, 1, false, false); !why.empty()) return std::string(part) + ": " + why;
      if (auto why = bad_value(item, "nan_mismatches", 0, INFINITY, true, false); !why.empty()) return std::string(part) + ": " + why;
      for (const char* key : {"rows", "cols"})
        if (auto why = bad_value(item, key, 1, INFINITY, true, false); !why.empty()) return std::string(part) + ": " + why;
    }
  }
  return {};
}

}  // namespace lnorm::report
