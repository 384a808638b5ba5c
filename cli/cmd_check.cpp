// `lnorm check`: the accuracy gate for any implementation's output (PyTorch, ONNX Runtime, ours).
// Computes the exact answer for the given inputs row by row (a few MiB in memory at a time) and
// measures the candidate against it with the metrics of DESIGN.md "Measuring error".
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "lnorm/check.hpp"
#include "lnorm/metrics.hpp"
#include "problem_flags.hpp"

namespace lnorm::cli {
namespace {

struct CheckFlags {
  ProblemFlags problem;
  std::string y, mean, rstd, json;
  Budget budget;
  double max_mean_ulp = -1, max_rstd_ulp = -1;  // < 0: report only
};

io::NpyReader open_stats(const std::string& path, const char* flag, const ProblemInputs& in) {
  io::NpyReader r(path);
  const std::string want = descr_of(stats_dtype(in.problem.dtype));
  if (r.header().descr != want)
    throw InputError(path + ": " + flag + " holds '" + r.header().descr + "' but the stats dtype is '" + want + "'");
  const std::vector<std::int64_t> lead(in.shape.begin(), in.shape.begin() + in.axis);
  if (r.header().shape != in.stats_shape() && r.header().shape != lead)
    throw InputError(path + ": " + flag + " has shape " + shape_text(r.header().shape) + "; expected " +
                     shape_text(in.stats_shape()) + " (one value per row)");
  return r;
}

std::string coords(std::int64_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    c[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  std::string s = "[";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "]";
}

// An error as JSON: a number, or null where it is infinite (a non-finite mismatch; JSON has no Inf).
nlohmann::json ulp_json(double e) { return std::isinf(e) ? nlohmann::json(nullptr) : nlohmann::json(e); }

nlohmann::json stat_json(const StatSummary& s, double limit, const char* metric) {
  return {{"max_ulp", ulp_json(s.max_ulp)}, {"max_ulp_nonfinite", std::isinf(s.max_ulp)}, {"metric", metric},
          {"max_ulp_row", s.max_ulp_index}, {"got", s.max_ulp_got}, {"exact", s.max_ulp_exact},
          {"nonfinite_mismatches", s.nonfinite_mismatches}, {"nan_mismatches", s.nonfinite_mismatches},
          {"budget", limit < 0 ? nlohmann::json(nullptr) : nlohmann::json(limit)}, {"pass", s.passes(limit)}};
}

int run_check(const CheckFlags& f) {
  check_outputs({{f.json, "--json"}}, {f.problem.x, f.problem.gamma, f.problem.beta, f.y, f.mean, f.rstd});
  check_stat_flags(op_flag(f.problem.op), f.mean);
  if (f.max_mean_ulp >= 0 && f.mean.empty())
    throw InputError("--max-mean-ulp: needs --mean (the candidate mean it gates)");
  if (f.max_rstd_ulp >= 0 && f.rstd.empty())
    throw InputError("--max-rstd-ulp: needs --rstd (the candidate rstd it gates)");
  ProblemInputs in = load_problem(f.problem);
  const Problem& p = in.problem;
  io::NpyReader cand(f.y);
  if (cand.header().descr != in.x.header().descr)
    throw InputError(f.y + ": holds '" + cand.header().descr + "' but x holds '" + in.x.header().descr + "'");
  if (cand.header().shape != in.shape)
    throw InputError(f.y + ": has shape " + shape_text(cand.header().shape) + " but x has shape " + shape_text(in.shape));
  std::optional<io::NpyReader> mean_in, rstd_in;
  if (!f.mean.empty()) mean_in.emplace(open_stats(f.mean, "--mean", in));
  if (!f.rstd.empty()) rstd_in.emplace(open_stats(f.rstd, "--rstd", in));

  const std::size_t es = size_of(p.dtype), ss = size_of(stats_dtype(p.dtype));
  const std::int64_t chunk = rows_per_chunk(p.cols, es);
  const int threads = p.threads;
  ErrorSummary ey;
  StatSummary em, er;
  std::vector<std::byte> xbuf, cbuf, mbuf, rbuf;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    xbuf.resize(static_cast<std::size_t>(nr * p.cols) * es);
    cbuf.resize(xbuf.size());
    in.x.read(r0 * p.cols, nr * p.cols, xbuf.data());
    cand.read(r0 * p.cols, nr * p.cols, cbuf.data());
    mbuf.resize(static_cast<std::size_t>(nr) * ss);
    rbuf.resize(mbuf.size());
    if (mean_in) mean_in->read(r0, nr, mbuf.data());
    if (rstd_in) rstd_in->read(r0, nr, rbuf.data());
    // Each thread takes a contiguous block of rows; partial summaries merge in row order, so the
    // report does not depend on the thread count.
    const CheckSummary part = measure_rows(p, xbuf.data(), in.gamma_data.empty() ? nullptr : in.gamma_data.data(),
                                           in.beta_data.empty() ? nullptr : in.beta_data.data(), cbuf.data(),
                                           mean_in ? mbuf.data() : nullptr, rstd_in ? rbuf.data() : nullptr, nr, r0,
                                           f.budget, threads);
    ey.merge(part.y);
    em.merge(part.mean);
    er.merge(part.rstd);
  }

  const bool mean_ok = !mean_in || em.passes(f.max_mean_ulp);
  const bool rstd_ok = !rstd_in || er.passes(f.max_rstd_ulp);
  const bool pass = ey.within_budget() && mean_ok && rstd_ok;

  // One summary line first (scripts and the demo read it), then the details.
  // max is "inf" where any output is a non-finite mismatch (NaN or Inf where the answer is finite, ...).
  std::printf("%s  y max %.3g scaled ulp (budget %g + %g*kappa)  correctly rounded %.2f%%  non-finite mismatches %lld",
              pass ? "PASS" : "FAIL", ey.max_ulp, f.budget.a, f.budget.b, 100 * ey.correctly_rounded_fraction(),
              static_cast<long long>(ey.nonfinite_mismatches));
  if (mean_in) std::printf("  mean %g ulp", em.max_ulp);
  if (rstd_in) std::printf("  rstd %g ulp", er.max_ulp);
  std::printf("\n");
  std::printf("  input     %s %s, %s %s, axis %d, eps %.9g, %lld rows x %lld", f.problem.x.c_str(),
              shape_text(in.shape).c_str(), std::string(name(p.op)).c_str(), std::string(name(p.dtype)).c_str(),
              in.axis, p.eps, static_cast<long long>(p.rows), static_cast<long long>(p.cols));
  if (p.param_dtype != p.dtype) std::printf(", gamma/beta %s", std::string(name(p.param_dtype)).c_str());
  if (p.gamma_offset != 0) std::printf(", weight %.9g + gamma", p.gamma_offset);
  std::printf("\n");
  if (ey.max_ulp_index >= 0)
    std::printf("  worst y   %s: got %.17g, exact %.17g, %.4g scaled ulp%s, row kappa %.3g\n",
                coords(ey.max_ulp_index, in.shape).c_str(), ey.max_ulp_got, ey.max_ulp_exact, ey.max_ulp,
                std::isinf(ey.max_ulp) ? " (non-finite mismatch)" : "", ey.max_ulp_kappa);
  if (ey.nonfinite_mismatches > 0)
    std::printf("  finite    max %.4g scaled ulp over the elements without a non-finite mismatch\n", ey.max_finite_ulp);
  std::printf("  over budget %lld of %lld elements\n", static_cast<long long>(ey.over_budget),
              static_cast<long long>(ey.elements));
  if (ey.first_nonfinite_mismatch_index >= 0)
    std::printf("  first non-finite mismatch at %s\n", coords(ey.first_nonfinite_mismatch_index, in.shape).c_str());
  if (mean_in && em.max_ulp_index >= 0)
    std::printf("  mean      max %g ulp of max(|mean|, sqrt(var+eps)) at row %lld (got %.9g, exact %.9g), non-finite mismatches %lld\n",
                em.max_ulp, static_cast<long long>(em.max_ulp_index), em.max_ulp_got, em.max_ulp_exact,
                static_cast<long long>(em.nonfinite_mismatches));
  if (rstd_in && er.max_ulp_index >= 0)
    std::printf("  rstd      max %g ulp at row %lld (got %.9g, exact %.9g), non-finite mismatches %lld\n", er.max_ulp,
                static_cast<long long>(er.max_ulp_index), er.max_ulp_got, er.max_ulp_exact,
                static_cast<long long>(er.nonfinite_mismatches));

  if (!f.json.empty()) {
    nlohmann::json j = {
        {"x", f.problem.x}, {"candidate", f.y}, {"op", std::string(name(p.op))}, {"shape", in.shape}, {"axis", in.axis},
        {"dtype", std::string(name(p.dtype))}, {"param_dtype", std::string(name(p.param_dtype))},
        {"gamma_offset", p.gamma_offset}, {"eps", p.eps}, {"rows", p.rows}, {"cols", p.cols},
        {"elements", ey.elements}, {"max_ulp", ulp_json(ey.max_ulp)}, {"max_ulp_nonfinite", std::isinf(ey.max_ulp)},
        {"max_finite_ulp", ey.max_finite_ulp}, {"max_ulp_index", ey.max_ulp_index},
        {"max_ulp_kappa", ey.max_ulp_kappa}, {"max_ulp_got", ey.max_ulp_got}, {"max_ulp_exact", ey.max_ulp_exact},
        {"correctly_rounded", ey.correctly_rounded_fraction()}, {"nonfinite_mismatches", ey.nonfinite_mismatches},
        {"nan_mismatches", ey.nonfinite_mismatches},  // deprecated alias of nonfinite_mismatches (README)
        {"first_nonfinite_mismatch_index", ey.first_nonfinite_mismatch_index},
        {"over_budget", ey.over_budget}, {"budget", {{"a", f.budget.a}, {"b", f.budget.b}}}, {"pass", pass}};
    if (mean_in) j["mean"] = stat_json(em, f.max_mean_ulp, "ulps of max(|mean|, sqrt(var + eps))");
    if (rstd_in) j["rstd"] = stat_json(er, f.max_rstd_ulp, "ulps of rstd");
    write_text_atomically(f.json, j.dump(2) + "\n");
  }
  return pass ? 0 : 1;
}

}  // namespace

void add_check(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<CheckFlags>();
  auto* cmd = app.add_subcommand("check", "Measure a candidate output against the exact answer and gate on a budget");
  add_problem_flags(*cmd, f->problem);
  cmd->add_option("--y", f->y, "Candidate output (.npy, x's shape and dtype)")->required();
  cmd->add_option("--mean", f->mean, "Candidate per-row mean (.npy, f32; f64 for f64 data; layernorm only)");
  cmd->add_option("--rstd", f->rstd, "Candidate per-row rstd (.npy, f32; f64 for f64 data)");
  cmd->add_option("--max-ulp", f->budget.a, "Budget: allowed scaled ulps per element, flat part a")->default_val(8.0);
  cmd->add_option("--max-ulp-per-kappa", f->budget.b, "Budget: allowed scaled ulps per unit of row kappa, b")
      ->default_val(1.0);
  cmd->add_option("--max-mean-ulp", f->max_mean_ulp, "Also gate the mean: its error in ulps of max(|mean|, sqrt(var + eps)), as verify and budgets.toml measure it (default: report only)");
  cmd->add_option("--max-rstd-ulp", f->max_rstd_ulp, "Also gate rstd: its plain ulp distance to the exact rstd rounded once (default: report only)");
  cmd->add_option("--json", f->json, "Write the measurements as JSON here");
  cmd->add_option("--threads", f->problem.threads, "Threads for the reference (default: all cores)")
      ->default_val(std::max(1u, std::thread::hardware_concurrency()));
  cmd->callback([f, &exit_code] {
    if (!(f->budget.a >= 0) || !(f->budget.b >= 0)) throw InputError("--max-ulp/--max-ulp-per-kappa: must be >= 0");
    exit_code = run_check(*f);
  });
}

}  // namespace lnorm::cli
