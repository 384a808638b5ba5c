// `--dir bwd` of `lnorm reference` and `lnorm check`: the exact gradients dx, dgamma, dbeta of the
// norm at x, gamma and the upstream dy (reference/include/lnorm/backward.hpp), written or gated. The whole
// problem is read into memory: dgamma and dbeta sum over every row.
#include "cmd_backward.hpp"
#include "flag_values.hpp"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "lnorm/backward.hpp"
#include "lnorm/check.hpp"
#include "lnorm/metrics.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/reference.hpp"
#include "error_text.hpp"
#include "lnorm/operand_streams.hpp"
#include "output_files.hpp"
#include "plugins.hpp"

namespace lnorm::cli {
namespace {

struct Loaded {
  ProblemInputs in;
  std::vector<std::byte> x, dy;
  std::vector<std::int64_t> param_shape;  // the normalized dims: dgamma's and dbeta's shape
};

Loaded load(const ProblemFlags& pf, const BackwardFlags& bf) {
  if (!pf.residual.empty()) throw InputError("--residual: Add & Norm's backward is not built (--dir bwd takes layernorm and rmsnorm)");
  if (bf.dy.empty()) throw InputError("--dir bwd: needs --dy (the upstream gradient, x's shape and dtype)");
  Loaded l{load_problem(pf), {}, {}, {}};
  const Op op = l.in.problem.op;
  if (op != Op::layernorm && op != Op::rmsnorm) throw InputError("--dir bwd: takes --op layernorm or rmsnorm");
  io::NpyReader dy(bf.dy);
  if (dy.header().descr != l.in.x.header().descr)
    throw InputError(bf.dy + ": --dy holds '" + dy.header().descr + "' but x holds '" + l.in.x.header().descr + "'");
  if (dy.header().shape != l.in.shape)
    throw InputError(bf.dy + ": --dy has shape " + shape_text(dy.header().shape) + " but x has shape " + shape_text(l.in.shape));
  l.x = io::read_all(l.in.x);
  l.dy = io::read_all(dy);
  l.param_shape.assign(l.in.shape.begin() + l.in.axis, l.in.shape.end());
  return l;
}

// A candidate gradient: its file must hold `descr` in `shape`.
std::vector<std::byte> candidate(const std::string& path, const char* flag, const std::string& descr,
                                 const std::vector<std::int64_t>& shape) {
  io::NpyReader r(path);
  if (r.header().descr != descr)
    throw InputError(path + ": " + flag + " holds '" + r.header().descr + "' but the gradient is stored as '" + descr + "'");
  if (r.header().shape != shape)
    throw InputError(path + ": " + flag + " has shape " + shape_text(r.header().shape) + "; expected " + shape_text(shape));
  return io::read_all(r);
}

struct Gated {
  const char* name;
  std::string path;
  ErrorSummary s;
  double budget = 0;
};

// The backward's inputs as operands: x, dy and gamma in memory (every row at once: dgamma and dbeta sum them all).
OperandStreams gradient_inputs(const Loaded& l) {
  OperandStreams ops;
  ops.point(Operand::x, l.x.data()).point(Operand::dy, l.dy.data());
  if (!l.in.gamma_data.empty()) ops.point(Operand::gamma, l.in.gamma_data.data());
  return ops;
}

// The gradients asked for, as files: dx in x's shape, dgamma and dbeta in the normalized dims'.
OutputFiles gradient_files(const Loaded& l, const Problem& p, const BackwardFlags& bf) {
  OutputFiles files(p, {l.in.shape, l.in.stats_shape(), l.param_shape, {}, {}});
  files.open(Operand::dx, bf.dx);
  files.open(Operand::dgamma, bf.dgamma);
  files.open(Operand::dbeta, bf.dbeta);
  return files;
}

}  // namespace

void add_backward_flags(CLI::App& cmd, BackwardFlags& f, bool check) {
  cmd.add_option("--dir", f.dir, "fwd (the norm, default) or bwd (its gradients dx, dgamma, dbeta at x, gamma and --dy)")
      ->default_val("fwd");
  cmd.add_option("--dy", f.dy, "--dir bwd: the upstream gradient (.npy, x's shape and dtype)");
  const char* what = check ? "--dir bwd: candidate " : "--dir bwd: write ";
  cmd.add_option("--dx", f.dx, std::string(what) + "dx (.npy, x's shape and dtype)");
  cmd.add_option("--dgamma", f.dgamma, std::string(what) + "dgamma (.npy, the normalized dims' shape, gamma's dtype: x's, or f32 beside 16-bit x; needs --gamma)");
  cmd.add_option("--dbeta", f.dbeta, std::string(what) + "dbeta (.npy, as dgamma; needs --beta, whose values are not read)");
  if (!check) return;
  cmd.add_option("--max-dx-ulp", f.max_dx_ulp, "--dir bwd: dx's budget in scaled ulps (default: --max-ulp)")->check(budget_number());
  cmd.add_option("--max-dgamma-ulp", f.max_dgamma_ulp, "--dir bwd: dgamma's budget in scaled ulps (default: --max-ulp)")->check(budget_number());
  cmd.add_option("--max-dbeta-ulp", f.max_dbeta_ulp, "--dir bwd: dbeta's budget in scaled ulps (default: --max-ulp)")->check(budget_number());
}

bool backward_asked(const BackwardFlags& f) {
  const bool bwd = dir_flag(f.dir) == Direction::bwd;
  if (!bwd) {
    for (const auto& [v, flag] : {std::pair{f.dy, "--dy"}, {f.dx, "--dx"}, {f.dgamma, "--dgamma"}, {f.dbeta, "--dbeta"}})
      if (!v.empty()) throw InputError(std::string(flag) + ": needs --dir bwd");
    if (f.max_dx_ulp >= 0 || f.max_dgamma_ulp >= 0 || f.max_dbeta_ulp >= 0)
      throw InputError("--max-dx-ulp/--max-dgamma-ulp/--max-dbeta-ulp: need --dir bwd");
  }
  return bwd;
}

// One rule for reference, run and check: dgamma is the gradient of the weights --gamma gives, dbeta of the bias
// --beta says there is (its values are not read). Without them there is no parameter to differentiate (reference
// once wrote a dgamma of weight 1 in x's dtype where run refused the same flags).
void check_param_gradients(const ProblemFlags& pf, const BackwardFlags& bf) {
  if (!bf.dgamma.empty() && pf.gamma.empty()) throw InputError("--dgamma: needs --gamma (the weights it is the gradient of)");
  if (!bf.dbeta.empty() && pf.beta.empty()) throw InputError("--dbeta: needs --beta (its values are not read: it says there is a bias)");
}

int run_backward_reference(const ProblemFlags& pf, const BackwardFlags& bf) {
  if (bf.dx.empty() && bf.dgamma.empty() && bf.dbeta.empty())
    throw InputError("--dir bwd: give at least one of --dx, --dgamma, --dbeta");
  check_param_gradients(pf, bf);
  check_outputs({{bf.dx, "--dx"}, {bf.dgamma, "--dgamma"}, {bf.dbeta, "--dbeta"}}, with_plugin_paths({pf.x, pf.gamma, pf.beta, bf.dy}));
  Loaded l = load(pf, bf);
  const Problem p = with_op(l.in.problem, Op{.norm = l.in.problem.op.norm, .direction = Direction::bwd});
  OutputFiles files = gradient_files(l, p, bf);
  OperandStreams ops = gradient_inputs(l);
  ops.unread(Operand::saved_mean).unread(Operand::saved_rstd);  // the exact gradients need no saved statistics
  files.connect(ops);
  BackwardReference ref;
  // Only the gradients asked for: the exact dgamma and dbeta cost more than dx.
  const auto asked = [&](Operand o, void* slot) { return files.has(o) ? slot : nullptr; };
  ops.run(p, p.rows, {}, [&](const Problem& part, const Tensors& t) {
    reference_backward(part, t.x, t.gamma, t.dy, asked(Operand::dx, t.dx), asked(Operand::dgamma, t.dgamma),
                       asked(Operand::dbeta, t.dbeta), &ref);
  });
  files.commit();
  if (ref.dgamma_undecided > 0)
    std::fprintf(stderr, "lnorm: %lld dgamma columns could not be decided exactly (rounded from 6144 bits; docs/DESIGN.md \"Backward\")\n",
                 static_cast<long long>(ref.dgamma_undecided));
  return 0;
}

int run_backward_kernel(const ProblemFlags& pf, const BackwardFlags& bf, const KernelInfo& kernel) {
  if (bf.dx.empty() && bf.dgamma.empty() && bf.dbeta.empty())
    throw InputError("--dir bwd: give at least one of --dx, --dgamma, --dbeta");
  check_param_gradients(pf, bf);
  check_outputs({{bf.dx, "--dx"}, {bf.dgamma, "--dgamma"}, {bf.dbeta, "--dbeta"}}, with_plugin_paths({pf.x, pf.gamma, pf.beta, bf.dy}));
  Loaded l = load(pf, bf);
  const Problem p = with_op(l.in.problem, Op{.norm = l.in.problem.op.norm, .direction = Direction::bwd});
  if (const auto why = unavailable_reason(kernel, p))
    throw InputError("--kernel " + std::string(kernel.name) + ": cannot run the backward here: " + *why);
  // The forward's saved statistics, as a framework saves them: the exact mean and rstd rounded once.
  Problem fwd = l.in.problem;
  fwd.has_beta = false;  // the statistics do not read beta (nor does the backward)
  std::vector<std::byte> mean, rstd;
  OperandStreams forward = gradient_inputs(l);
  forward.write(Operand::mean, append_to(mean)).write(Operand::rstd, append_to(rstd));
  forward.run(fwd, fwd.rows, {}, [](const Problem& part, const Tensors& t) { reference(part, t); });
  OutputFiles files = gradient_files(l, p, bf);
  OperandStreams ops = gradient_inputs(l);
  ops.point(Operand::saved_mean, mean.data()).point(Operand::saved_rstd, rstd.data());
  files.connect(ops);
  ops.run(p, p.rows, {}, [&](const Problem& part, const Tensors& t) { kernel.run(part, t); });
  files.commit();
  return 0;
}

int run_backward_check(const ProblemFlags& pf, const BackwardFlags& bf, double max_ulp, double per_kappa, const std::string& json) {
  if (bf.dx.empty() && bf.dgamma.empty() && bf.dbeta.empty())
    throw InputError("--dir bwd: give at least one candidate: --dx, --dgamma, --dbeta");
  check_param_gradients(pf, bf);
  for (const auto& [flag, v, path] : {std::tuple{"--max-dx-ulp", bf.max_dx_ulp, bf.dx}, {"--max-dgamma-ulp", bf.max_dgamma_ulp, bf.dgamma},
                                      {"--max-dbeta-ulp", bf.max_dbeta_ulp, bf.dbeta}})
    if (v >= 0 && path.empty()) throw InputError(std::string(flag) + ": needs the candidate it gates");
  check_outputs({{json, "--json"}}, {pf.x, pf.gamma, pf.beta, bf.dy, bf.dx, bf.dgamma, bf.dbeta});
  Loaded l = load(pf, bf);
  const Problem& p = l.in.problem;
  const std::string pdescr = descr_of(p.param_dtype);
  const std::vector<std::byte> cdx = bf.dx.empty() ? std::vector<std::byte>{} : candidate(bf.dx, "--dx", l.in.x.header().descr, l.in.shape);
  const std::vector<std::byte> cdg = bf.dgamma.empty() ? std::vector<std::byte>{} : candidate(bf.dgamma, "--dgamma", pdescr, l.param_shape);
  const std::vector<std::byte> cdb = bf.dbeta.empty() ? std::vector<std::byte>{} : candidate(bf.dbeta, "--dbeta", pdescr, l.param_shape);
  std::vector<std::byte> edx(l.x.size());
  const std::size_t pbytes = static_cast<std::size_t>(p.cols) * size_of(p.param_dtype);
  std::vector<std::byte> edg(pbytes), edb(pbytes);
  BackwardReference ref;
  reference_backward(p, l.x.data(), l.in.gamma_data.empty() ? nullptr : l.in.gamma_data.data(), l.dy.data(), edx.data(),
                     edg.data(), edb.data(), &ref);
  std::vector<Gated> gated;
  const auto measure = [&](const char* nm, Gradient which, const std::string& path, const std::vector<std::byte>& got,
                           const std::vector<std::byte>& exact, double own) {
    if (path.empty()) return;
    Gated g{nm, path, {}, own >= 0 ? own : max_ulp};
    g.s = measure_gradient(which, p, l.x.data(), l.dy.data(), got.data(), exact.data(), ref, Budget{g.budget, per_kappa});
    gated.push_back(std::move(g));
  };
  measure("dx", Gradient::dx, bf.dx, cdx, edx, bf.max_dx_ulp);
  measure("dgamma", Gradient::dgamma, bf.dgamma, cdg, edg, bf.max_dgamma_ulp);
  measure("dbeta", Gradient::dbeta, bf.dbeta, cdb, edb, bf.max_dbeta_ulp);
  bool pass = true;
  for (const Gated& g : gated) pass = pass && g.s.passes();

  std::printf("%s ", pass ? "PASS" : "FAIL");
  for (const Gated& g : gated)
    std::printf(" %s max %s scaled ulp (budget %g + %g*kappa) correctly rounded %.2f%% non-finite mismatches %lld%s ", g.name,
                std::isinf(g.s.max_ulp) ? "inf" : number_text(g.s.max_ulp, g.budget).c_str(), g.budget,
                g.name == std::string("dbeta") ? 0.0 : per_kappa, 100 * g.s.correctly_rounded_fraction(),
                static_cast<long long>(g.s.nonfinite_mismatches), g.s.bias_within() ? "" : " BIASED");
  std::printf("\n  input     %s %s, %s backward %s, axis %d, eps %.9g, %lld rows x %lld, dy %s", pf.x.c_str(),
              shape_text(l.in.shape).c_str(), std::string(name(p.op)).c_str(), std::string(name(p.dtype)).c_str(), l.in.axis,
              p.eps, static_cast<long long>(p.rows), static_cast<long long>(p.cols), bf.dy.c_str());
  if (p.gamma_offset != 0) std::printf(", weight %.9g + gamma", p.gamma_offset);
  std::printf("\n");
  for (const Gated& g : gated) {
    if (g.s.max_ulp_index < 0) continue;
    std::printf("  worst %-6s at %lld: got %.17g, exact %.17g, %.4g scaled ulp%s; %lld of %lld over budget\n", g.name,
                static_cast<long long>(g.s.max_ulp_index), g.s.max_ulp_got, g.s.max_ulp_exact, g.s.max_ulp,
                std::isinf(g.s.max_ulp) ? " (non-finite mismatch)" : "", static_cast<long long>(g.s.over_budget),
                static_cast<long long>(g.s.elements));
    const bool is_dx = g.name == std::string("dx");
    const auto where = [&](std::int64_t i) {
      return is_dx ? "[" + std::to_string(i / p.cols) + ", " + std::to_string(i % p.cols) + "]" : "[" + std::to_string(i) + "]";
    };
    std::printf("%s", over_budget_lines(g.name, g.s, where, is_dx ? "rows" : "columns").c_str());
  }
  if (ref.dgamma_undecided > 0)
    std::printf("  note      %lld dgamma columns rounded from 6144 bits, not decided exactly (docs/DESIGN.md \"Backward\")\n",
                static_cast<long long>(ref.dgamma_undecided));
  if (!json.empty()) {
    nlohmann::json j = {{"x", pf.x}, {"dy", bf.dy}, {"dir", "bwd"}, {"op", std::string(name(p.op))}, {"shape", l.in.shape},
                        {"axis", l.in.axis}, {"dtype", std::string(name(p.dtype))}, {"param_dtype", std::string(name(p.param_dtype))},
                        {"gamma_offset", p.gamma_offset}, {"eps", p.eps}, {"rows", p.rows}, {"cols", p.cols},
                        {"dgamma_undecided", ref.dgamma_undecided}, {"pass", pass}};
    for (const Gated& g : gated) {
      j[g.name] = error_json(g.s);
      j[g.name].update({{"candidate", g.path}, {"budget", g.budget}, {"budget_per_kappa", per_kappa}, {"pass", g.s.passes()}});
    }
    write_text_atomically(json, j.dump(2) + "\n");
  }
  return pass ? 0 : 1;
}

}  // namespace lnorm::cli
