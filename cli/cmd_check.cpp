// `lnorm check`: the accuracy gate for any implementation's output (PyTorch, ONNX Runtime, ours).
// Computes the exact answer for the given inputs row by row (a few MiB in memory at a time) and
// measures the candidate against it with the metrics of DESIGN.md "Measuring error".
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd_backward.hpp"
#include "flag_values.hpp"
#include "cmd_quant.hpp"
#include "commands.hpp"
#include "error_text.hpp"
#include "lnorm/check.hpp"
#include "lnorm/metrics.hpp"
#include "lnorm/recipe.hpp"
#include "problem_flags.hpp"
#include "side_outputs.hpp"

namespace lnorm::cli {
namespace {

struct CheckFlags {
  ProblemFlags problem;
  std::string y, mean, rstd, json, h, recipe;
  BackwardFlags bwd;
  double max_recipe_ulp = 0.5;  // a kernel that claims a recipe rounds where it does: its answer, rounded once
  Budget budget;
  bool max_ulp_given = false;
  double max_mean_ulp = -1, max_rstd_ulp = -1;  // < 0: report only
  // h's budget in ulps of h's format at the exact sum: --max-h-ulp, else --max-ulp when given, else 0.5
  // (the sum rounded once; every kernel here writes it, and one rounding of x + residual is all a sum needs).
  double max_h_ulp = -1;
  bool strict_constant_rows = false;  // gate LayerNorm's constant rows at a + 0*kappa (CheckSummary::constant_rows)
  QuantFlags quant;                   // --quant: q (and scales) are the candidate instead of y
  double h_budget() const { return max_h_ulp >= 0 ? max_h_ulp : max_ulp_given ? budget.a : 0.5; }
  SideOutputs side() const { return {h, mean, rstd, h_budget(), max_mean_ulp, max_rstd_ulp}; }
};



// What check measures of y and beside it, merged over every chunk of rows.
struct Measured {
  ErrorSummary y, h, recipe, constant;
  StatSummary mean, rstd;
  std::int64_t inexact_sums = 0, constant_rows = 0;
};

Measured measure_chunks(ProblemInputs& in, io::NpyReader& cand, SideCandidates& side, const CheckFlags& f, const Recipe& recipe) {
  const Problem& p = in.problem;
  const bool fused = p.op.prologue == Prologue::residual_add;
  const std::size_t es = size_of(p.dtype), hs = size_of(p.residual_dtype);
  const std::int64_t chunk = rows_per_chunk(p.cols, es);
  Measured m;
  std::vector<std::byte> xbuf, cbuf, resbuf;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    xbuf.resize(static_cast<std::size_t>(nr * p.cols) * es);
    cbuf.resize(xbuf.size());
    in.x.read(r0 * p.cols, nr * p.cols, xbuf.data());
    cand.read(r0 * p.cols, nr * p.cols, cbuf.data());
    side.read(r0, nr);
    if (fused) {
      resbuf.resize(static_cast<std::size_t>(nr * p.cols) * hs);
      in.residual->read(r0 * p.cols, nr * p.cols, resbuf.data());
    }
    // Each thread takes a contiguous block of rows; partial summaries merge in row order, so the
    // report does not depend on the thread count.
    const CheckSummary part = measure_rows(p, xbuf.data(), in.gamma_data.empty() ? nullptr : in.gamma_data.data(),
                                           in.beta_data.empty() ? nullptr : in.beta_data.data(), cbuf.data(),
                                           side.mean(), side.rstd(), nr, r0, f.budget, p.threads,
                                           AddInputs{fused ? resbuf.data() : nullptr, side.h(), Budget{f.h_budget(), 0}},
                                           RecipeInputs{recipe.empty() ? nullptr : &recipe, {f.max_recipe_ulp, 0}});
    m.y.merge(part.y);
    m.recipe.merge(part.recipe);
    m.constant.merge(part.constant_rows);
    m.constant_rows += part.constant_row_count;
    m.inexact_sums += part.recipe_inexact_sums;
    m.h.merge(part.h);
    m.mean.merge(part.mean);
    m.rstd.merge(part.rstd);
  }
  return m;
}

// LayerNorm's rows constant in storage (exact answer beta whatever their kappa): reported, gated with
// --strict-constant-rows; its JSON object whenever the norm is LayerNorm.
OutputCheck constant_rows_check(const Measured& m, const CheckFlags& f, const std::vector<std::int64_t>& shape) {
  const ErrorSummary& e = m.constant;
  OutputCheck c{"constant_rows", !f.strict_constant_rows || e.within_budget(), "", "", {}};
  if (m.constant_rows > 0) {
    c.summary = text("  constant rows %lld: max %.3g scaled ulp at kappa 0", static_cast<long long>(m.constant_rows), e.max_ulp) +
                (f.strict_constant_rows ? text(" (budget %g)", f.budget.a) : "");
    if (e.max_ulp_index >= 0)
      c.detail = text("  constant  %lld rows constant in storage (exact answer beta whatever their kappa): worst %s got %.17g, "
                      "exact %.17g, %.4g scaled ulp at kappa 0; %lld of %lld elements over %g%s\n",
                      static_cast<long long>(m.constant_rows), coords(e.max_ulp_index, shape).c_str(), e.max_ulp_got,
                      e.max_ulp_exact, e.max_ulp, static_cast<long long>(e.over_budget), static_cast<long long>(e.elements),
                      f.budget.a, f.strict_constant_rows ? " (gated: --strict-constant-rows)" : " (reported; --strict-constant-rows gates them)");
  }
  c.json = {{"count", m.constant_rows}, {"metric", "scaled ulps at kappa 0 (the exact answer is beta)"},
            {"max_ulp", ulp_json(e.max_ulp)}, {"max_ulp_nonfinite", std::isinf(e.max_ulp)},
            {"max_ulp_index", e.max_ulp_index}, {"max_ulp_got", e.max_ulp_got},
            {"max_ulp_exact", e.max_ulp_exact}, {"over_budget", e.over_budget},
            {"budget", f.budget.a}, {"strict", f.strict_constant_rows}, {"pass", e.within_budget()}};
  return c;
}

// y against a recipe's answer (--recipe): the recipe replaces the exact answer as what y is gated against.
OutputCheck recipe_check(const Measured& m, const Recipe& recipe, const CheckFlags& f, Op op, const std::vector<std::int64_t>& shape) {
  const ErrorSummary& e = m.recipe;
  OutputCheck c{"recipe", e.within_budget(), "", "", {}};
  c.summary = text("  recipe %s max %.3g ulp (budget %g) correctly rounded %.2f%%", recipe.name.c_str(), e.max_ulp,
                   f.max_recipe_ulp, 100 * e.correctly_rounded_fraction());
  c.detail = text("  recipe    %s  y is %.3g ulp from the %s recipe, %.3g scaled ulp from the exact %s; correctly rounded: %.2f%% to "
                  "the recipe, %.2f%% to the exact answer; %lld of %lld over the recipe's budget\n",
                  c.pass ? "PASS" : "FAIL", e.max_ulp, recipe.name.c_str(), m.y.max_ulp, std::string(name(op)).c_str(),
                  100 * e.correctly_rounded_fraction(), 100 * m.y.correctly_rounded_fraction(),
                  static_cast<long long>(e.over_budget), static_cast<long long>(e.elements));
  if (e.max_ulp_index >= 0)
    c.detail += text("  worst vs recipe %s: got %.17g, recipe %.17g, %.4g scaled ulp%s\n", coords(e.max_ulp_index, shape).c_str(),
                     e.max_ulp_got, e.max_ulp_exact, e.max_ulp, std::isinf(e.max_ulp) ? " (non-finite mismatch)" : "");
  if (m.inexact_sums > 0)
    c.detail += text("  note      %lld unrounded sums x + residual were not doubles: the recipe used the nearest double (2^-53 relative)\n",
                     static_cast<long long>(m.inexact_sums));
  c.json = {{"name", recipe.name}, {"metric", "scaled ulps against the recipe's answer (before its last rounding)"},
            {"max_ulp", ulp_json(e.max_ulp)}, {"max_ulp_nonfinite", std::isinf(e.max_ulp)},
            {"max_finite_ulp", e.max_finite_ulp}, {"max_ulp_index", e.max_ulp_index},
            {"max_ulp_got", e.max_ulp_got}, {"max_ulp_recipe", e.max_ulp_exact},
            {"correctly_rounded", e.correctly_rounded_fraction()},
            {"nonfinite_mismatches", e.nonfinite_mismatches}, {"over_budget", e.over_budget},
            {"budget", f.max_recipe_ulp}, {"inexact_sums", m.inexact_sums}, {"pass", c.pass}};
  return c;
}

// y's detail lines: the worst element, the over-budget count and where.
std::string y_detail(const ErrorSummary& ey, const std::vector<std::int64_t>& shape, bool gated) {
  std::string d;
  if (ey.max_ulp_index >= 0)
    d += text("  worst y   %s: got %.17g, exact %.17g, %.4g scaled ulp%s, row kappa %.3g\n", coords(ey.max_ulp_index, shape).c_str(),
              ey.max_ulp_got, ey.max_ulp_exact, ey.max_ulp, std::isinf(ey.max_ulp) ? " (non-finite mismatch)" : "", ey.max_ulp_kappa);
  if (ey.nonfinite_mismatches > 0)
    d += text("  finite    max %.4g scaled ulp over the elements without a non-finite mismatch\n", ey.max_finite_ulp);
  d += text("  over budget %lld of %lld elements\n", static_cast<long long>(ey.over_budget), static_cast<long long>(ey.elements));
  d += over_budget_lines("y", ey, [&](std::int64_t i) { return coords(i, shape); }, "rows", gated);
  if (ey.first_nonfinite_mismatch_index >= 0)
    d += text("  first non-finite mismatch at %s\n", coords(ey.first_nonfinite_mismatch_index, shape).c_str());
  return d;
}

int run_check(const CheckFlags& f) {
  check_outputs({{f.json, "--json"}}, {f.problem.x, f.problem.gamma, f.problem.beta, f.y, f.mean, f.rstd, f.problem.residual, f.h});
  if (f.max_h_ulp >= 0 && f.h.empty()) throw InputError("--max-h-ulp: needs --h (the candidate h it gates)");
  check_stat_flags(op_flag(f.problem.op), f.mean);
  if (f.strict_constant_rows && op_flag(f.problem.op).norm != Norm::layernorm)
    throw InputError("--strict-constant-rows: LayerNorm only (RMSNorm has no mean, so no kappa term to lift)");
  if (f.max_mean_ulp >= 0 && f.mean.empty())
    throw InputError("--max-mean-ulp: needs --mean (the candidate mean it gates)");
  if (f.max_rstd_ulp >= 0 && f.rstd.empty())
    throw InputError("--max-rstd-ulp: needs --rstd (the candidate rstd it gates)");
  ProblemInputs in = load_problem(f.problem);
  Recipe recipe;
  if (!f.recipe.empty()) {
    try {
      recipe = parse_recipe(f.recipe);
      if (recipe.quant_vllm) throw std::invalid_argument("vllm is a quantized output's recipe (give --quant and --q)");
      in.problem = recipe_problem(in.problem, recipe);
    } catch (const std::invalid_argument& e) {
      throw InputError(std::string("--recipe: ") + e.what());
    }
  }
  const Problem& p = in.problem;
  io::NpyReader cand(f.y);
  if (cand.header().descr != in.x.header().descr)
    throw InputError(f.y + ": holds '" + cand.header().descr + "' but x holds '" + in.x.header().descr + "'");
  if (cand.header().shape != in.shape)
    throw InputError(f.y + ": has shape " + shape_text(cand.header().shape) + " but x has shape " + shape_text(in.shape));
  SideCandidates side(f.side(), in);
  const Measured m = measure_chunks(in, cand, side, f, recipe);
  const ErrorSummary& ey = m.y;

  // The outputs beside y, in the order their fragments and details print.
  std::vector<OutputCheck> outs;
  if (p.op.norm == Norm::layernorm) outs.push_back(constant_rows_check(m, f, in.shape));
  for (OutputCheck& c : side.checks(m.h, m.mean, m.rstd)) outs.push_back(std::move(c));
  if (!recipe.empty()) outs.push_back(recipe_check(m, recipe, f, p.op, in.shape));
  // A recipe replaces the exact answer as what y is gated against (its rounding points are the model's, and a
  // 16-bit recipe output is a 16-bit rounding or more from y*, far past an allowance in f32 ulps); y against the
  // exact answer is still measured and reported (y_pass), and gates as well when --max-ulp is given.
  const bool y_gated = recipe.empty() || f.max_ulp_given;
  bool pass = !y_gated || ey.passes();
  for (const OutputCheck& c : outs) pass &= c.pass;
  // RMSNorm has no mean and so no kappa (0 by definition): its line prints the budget that applies.
  const std::string budget_text = !y_gated ? std::string("not gated: the recipe is; --max-ulp gates it too")
                                  : p.op.norm == Norm::layernorm ? text("%g + %g*kappa", f.budget.a, f.budget.b)
                                                                 : text("%g", f.budget.a);

  // One summary line first (scripts and the demo read it), then the details.
  // max is "inf" where any output is a non-finite mismatch (NaN or Inf where the answer is finite, ...).
  std::printf("%s  y max %s scaled ulp (budget %s)  correctly rounded %.2f%%  non-finite mismatches %lld",
              pass ? "PASS" : "FAIL", std::isinf(ey.max_ulp) ? "inf" : number_text(ey.max_ulp, f.budget.a).c_str(),
              budget_text.c_str(), 100 * ey.correctly_rounded_fraction(), static_cast<long long>(ey.nonfinite_mismatches));
  if (y_gated && !ey.bias_within()) std::printf("  bias %+.3g scaled ulp (bound %.3g)", ey.mean_signed_error(), ey.bias_bound());
  for (const OutputCheck& c : outs) std::printf("%s", c.summary.c_str());
  std::printf("\n  input     %s %s, %s %s, axis %d, eps %.9g, %lld rows x %lld", f.problem.x.c_str(),
              shape_text(in.shape).c_str(), std::string(name(p.op)).c_str(), std::string(name(p.dtype)).c_str(),
              in.axis, p.eps, static_cast<long long>(p.rows), static_cast<long long>(p.cols));
  if (p.param_dtype != p.dtype) std::printf(", gamma/beta %s", std::string(name(p.param_dtype)).c_str());
  if (p.gamma_offset != 0) std::printf(", weight %.9g + gamma", p.gamma_offset);
  if (in.residual) std::printf(", residual %s %s", f.problem.residual.c_str(), std::string(name(p.residual_dtype)).c_str());
  std::printf("\n%s", y_detail(ey, in.shape, y_gated).c_str());
  for (const OutputCheck& c : outs) std::printf("%s", c.detail.c_str());

  if (!f.json.empty()) {
    nlohmann::json j = {
        {"x", f.problem.x}, {"candidate", f.y}, {"op", std::string(name(p.op))}, {"shape", in.shape}, {"axis", in.axis},
        {"dtype", std::string(name(p.dtype))}, {"param_dtype", std::string(name(p.param_dtype))},
        {"gamma_offset", p.gamma_offset}, {"eps", p.eps}, {"rows", p.rows}, {"cols", p.cols},
        {"nan_mismatches", ey.nonfinite_mismatches},  // deprecated alias of nonfinite_mismatches (README)
        {"first_nonfinite_mismatch_index", ey.first_nonfinite_mismatch_index},
        {"metric", "scaled ulps of the compute format (f32; f64 for f64) at the element's scale, from the interval of "
                   "reals that round to the output (docs/verify.md \"How error is measured\")"},
        {"budget", {{"a", f.budget.a}, {"b", f.budget.b}}}, {"pass", pass}};
    j.update(error_json(ey, y_gated));
    for (const OutputCheck& c : outs) j[c.key] = c.json;
    if (in.residual) j["residual"] = f.problem.residual, j["residual_dtype"] = std::string(name(p.residual_dtype));
    if (!f.h.empty() || !recipe.empty()) j["y_pass"] = ey.passes();
    write_text_atomically(f.json, j.dump(2) + "\n");
  }
  return pass ? 0 : 1;
}

}  // namespace

void add_check(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<CheckFlags>();
  auto* cmd = app.add_subcommand("check", "Measure a candidate output against the exact answer and gate on a budget");
  add_problem_flags(*cmd, f->problem);
  cmd->add_option("--y", f->y, "Candidate output (.npy, x's shape and dtype; required unless --dir bwd)");
  cmd->add_option("--mean", f->mean, "Candidate per-row mean (.npy, f32; f64 for f64 data; layernorm only)");
  cmd->add_option("--rstd", f->rstd, "Candidate per-row rstd (.npy, f32; f64 for f64 data)");
  cmd->add_option("--h", f->h, "Add & Norm: candidate h = x + residual (.npy, the residual's shape and dtype; needs --residual)");
  auto* max_ulp = cmd->add_option("--max-ulp", f->budget.a, "Budget: allowed scaled ulps per element, flat part a (and h's budget unless --max-h-ulp)")->check(budget_number())->default_val(8.0);
  cmd->add_option("--max-h-ulp", f->max_h_ulp, "Budget for h: ulps of h's format at the exact sum (default: --max-ulp if given, else 0.5: h rounded once)")->check(budget_number());
  cmd->add_option("--max-ulp-per-kappa", f->budget.b, "Budget: allowed scaled ulps per unit of row kappa, b")->check(budget_number())
      ->default_val(1.0);
  cmd->add_option("--max-mean-ulp", f->max_mean_ulp, "Also gate the mean: its error in ulps of max(|mean|, sqrt(var + eps)), as verify and budgets.toml measure it (default: report only)")->check(budget_number());
  cmd->add_option("--max-rstd-ulp", f->max_rstd_ulp, "Also gate rstd: its plain ulp distance to the exact rstd rounded once (default: report only)")->check(budget_number());
  std::string recipe_help = "Also measure y against this recipe's answer (the op's exact arithmetic with roundings at declared points) and gate it by --max-recipe-ulp; combine with '+'. Known:";
  for (const RecipeInfo& r : known_recipes()) recipe_help += std::string(" ") + r.name + " (" + r.ops + ": " + r.description + ");";
  cmd->add_option("--recipe", f->recipe, recipe_help)->check(non_empty_value());
  auto* max_recipe = cmd->add_option("--max-recipe-ulp", f->max_recipe_ulp, "Budget against the recipe's answer, scaled ulps per element (default 0.5: rounded like the recipe)")->check(budget_number())->default_val(0.5);
  cmd->add_flag("--strict-constant-rows", f->strict_constant_rows,
               "LayerNorm: also gate the rows constant in storage at --max-ulp with no kappa term (their exact answer is "
               "beta whatever their kappa; the default reports them on the summary line and in the JSON)");
  cmd->add_option("--json", f->json, "Write the measurements as JSON here")->check(non_empty_value());
  cmd->add_option("--threads", f->problem.threads, "Threads for the reference (default: all cores)")
      ->default_val(std::max(1u, std::thread::hardware_concurrency()));
  add_backward_flags(*cmd, f->bwd, true);
  add_quant_flags(*cmd, f->quant, true);
  cmd->callback([f, max_ulp, max_recipe, &exit_code] {
    f->max_ulp_given = max_ulp->count() > 0;
    if (quant_asked(f->quant)) {
      if (backward_asked(f->bwd)) throw InputError("--quant: a forward output (--dir bwd gates --dx, --dgamma, --dbeta)");
      if (f->max_ulp_given || f->strict_constant_rows) throw InputError("--max-ulp/--strict-constant-rows: y's; --quant gates q by --max-q-ulp");
      if (f->max_h_ulp >= 0 && f->h.empty()) throw InputError("--max-h-ulp: needs --h (the candidate h it gates)");
      if (f->max_mean_ulp >= 0 && f->mean.empty()) throw InputError("--max-mean-ulp: needs --mean (the candidate mean it gates)");
      if (f->max_rstd_ulp >= 0 && f->rstd.empty()) throw InputError("--max-rstd-ulp: needs --rstd (the candidate rstd it gates)");
      // --y with --quant: the y the candidate's quantizer was handed; q and scales are gated against the rule on it.
      // h, mean and rstd beside q: gated as beside y (h at 0.5 ulp unless --max-h-ulp).
      const SideOutputs side{f->h, f->mean, f->rstd, f->max_h_ulp >= 0 ? f->max_h_ulp : 0.5, f->max_mean_ulp, f->max_rstd_ulp};
      exit_code = run_quant_check(f->problem, f->quant, f->json, f->recipe, f->max_recipe_ulp, f->y, side);
      return;
    }
    refuse_quant_flags_without_quant(f->quant);
    if (backward_asked(f->bwd)) {
      for (const auto& [v, flag] : {std::pair{f->y, "--y"}, {f->mean, "--mean"}, {f->rstd, "--rstd"}, {f->h, "--h"},
                                    {f->recipe, "--recipe"}})
        if (!v.empty()) throw InputError(std::string(flag) + ": a forward flag; --dir bwd gates --dx, --dgamma, --dbeta");
      if (f->strict_constant_rows) throw InputError("--strict-constant-rows: a forward flag (LayerNorm's y)");
      if (!(f->budget.a >= 0) || !(f->budget.b >= 0)) throw InputError("--max-ulp/--max-ulp-per-kappa: must be >= 0");
      exit_code = run_backward_check(f->problem, f->bwd, f->budget.a, f->budget.b, f->json);
      return;
    }
    if (f->y.empty()) throw InputError("--y is required (the candidate output; --dir bwd gates --dx, --dgamma, --dbeta instead)");
    if (max_recipe->count() > 0 && f->recipe.empty()) throw InputError("--max-recipe-ulp: needs --recipe (the recipe it gates against)");
    if (!(f->max_recipe_ulp >= 0)) throw InputError("--max-recipe-ulp: must be >= 0");
    if (!(f->budget.a >= 0) || !(f->budget.b >= 0)) throw InputError("--max-ulp/--max-ulp-per-kappa: must be >= 0");
    exit_code = run_check(*f);
  });
}

}  // namespace lnorm::cli
