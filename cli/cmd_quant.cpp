// `reference --quant` and `check --quant`: the exact quantized answer, and a candidate's q measured against it
// (lnorm/quantize.hpp has the definitions). Both stream row chunks like run and check.
#include "cmd_quant.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_text.hpp"
#include "lnorm/check.hpp"
#include "lnorm/format.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/quant_contract.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/recipe.hpp"
#include "lnorm/reference.hpp"

namespace lnorm::cli {
namespace {

struct QuantSetup {
  ProblemInputs in;
  QuantSpec spec;
  std::vector<std::int64_t> scales_shape;  // x.shape[:axis] + (groups per row,)
};

QuantSetup setup(const ProblemFlags& problem, const QuantFlags& f) {
  QuantSetup s{load_problem(problem), {}, {}};
  const Problem& p = s.in.problem;
  if (p.dtype == DType::f64) throw InputError("--quant: x must be f32, f16 or bf16 (a quantized output's scales are f32)");
  if (p.op.direction != Direction::fwd) throw InputError("--quant: a forward output (--dir bwd has no quantized outputs)");
  try {
    const bool scale_given = f.scale_opt && f.scale_opt->count() > 0;
    s.spec = parse_quant_spec(f.quant, f.scaling, scale_given ? std::optional<double>(f.scale) : std::nullopt, p.cols);
  } catch (const QuantSpecError& e) {
    throw InputError(e.what());
  }
  s.scales_shape.assign(s.in.shape.begin(), s.in.shape.begin() + s.in.axis);
  s.scales_shape.push_back(s.spec.scales_per_row(p.cols));
  return s;
}

std::string q_descr(const QuantSpec& s) { return std::string(s.format_info().npy_descr); }
std::string scales_descr(const QuantSpec& s) { return std::string(s.storage().npy_descr); }
std::size_t scale_size(const QuantSpec& s) { return s.storage().bytes; }

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Rows [r0, r0 + nr) of x (and the residual, for Add & Norm) into the chunk buffers.
void read_chunk(QuantSetup& s, std::int64_t r0, std::int64_t nr, std::vector<std::byte>& xbuf, std::vector<std::byte>& resbuf) {
  const Problem& p = s.in.problem;
  xbuf.resize(static_cast<std::size_t>(nr * p.cols) * size_of(p.dtype));
  s.in.x.read(r0 * p.cols, nr * p.cols, xbuf.data());
  if (s.in.residual) {
    resbuf.resize(static_cast<std::size_t>(nr * p.cols) * size_of(p.residual_dtype));
    s.in.residual->read(r0 * p.cols, nr * p.cols, resbuf.data());
  }
}

}  // namespace

void add_quant_flags(CLI::App& cmd, QuantFlags& f, bool check) {
  cmd.add_option("--quant", f.quant,
                 "Quantized output instead of y: fp8_e4m3 (OCP E4M3FN), fp8_e5m2 or int8; q = Q(y / s), rounded once to "
                 "nearest even, saturating (never NaN/Inf for a finite y)");
  f.scaling_opt = cmd.add_option("--scaling", f.scaling,
                                 "With --quant: tensor (one --scale S), row (per-row f32 amax/qmax), group:G (per G "
                                 "elements) or mx (OCP MX: groups of 32, E8M0 power-of-two scales)")
                      ->default_val("tensor");
  f.scale_opt = cmd.add_option("--scale", f.scale, "tensor scaling's scale S (an f32 > 0; required there, refused elsewhere)");
  if (check) {
    cmd.add_option("--q", f.q, "The candidate's quantized output (.npy, x's shape: '|u1' fp8 bit patterns or '|i1' int8)");
    cmd.add_option("--scales", f.scales,
                   "The candidate's scales for row/group:G/mx (.npy, x.shape[:axis] + (groups,): '<f4', or '|u1' E8M0 for mx)");
    cmd.add_option("--max-q-ulp", f.budget.max_q_ulp,
                   "Budget for q in quanta at y/s, flat (default per element: 0.5 + what rounding y to x's dtype first "
                   "moves y/s, + 2^-14)");
    cmd.add_option("--max-scale-ulp", f.budget.max_scale_ulp,
                   "Budget for dynamic scales: f32 ulps (row, group) or E8M0 steps (mx), flat (default per group: 2 ulps + "
                   "what rounding y to x's dtype first moves the scale; mx: that move alone)");
  } else {
    cmd.add_option("--q", f.q, "With --quant: write the exact q here (.npy, x's shape: '|u1' fp8 bit patterns or '|i1' int8)");
    cmd.add_option("--scales", f.scales,
                   "With --quant and row/group:G/mx scaling: write the exact scales here (.npy, x.shape[:axis] + (groups,): "
                   "'<f4', or '|u1' E8M0 for mx)");
  }
}

bool quant_asked(const QuantFlags& f) { return !f.quant.empty(); }

void refuse_quant_flags_without_quant(const QuantFlags& f) {
  if (f.scale_opt && f.scale_opt->count() > 0) throw InputError("--scale: needs --quant (tensor scaling's scale)");
  if (f.scaling_opt && f.scaling_opt->count() > 0) throw InputError("--scaling: needs --quant");
  if (!f.q.empty()) throw InputError("--q: needs --quant (the quantized output's format)");
  if (!f.scales.empty()) throw InputError("--scales: needs --quant");
  if (f.budget.max_q_ulp >= 0 || f.budget.max_scale_ulp >= 0) throw InputError("--max-q-ulp/--max-scale-ulp: need --quant");
}

int run_quant_reference(const ProblemFlags& problem, const QuantFlags& f, const std::string& y_path, const KernelInfo* kernel,
                        const SideOutputs& side) {
  if (f.q.empty()) throw InputError(std::string("--q is required with --quant (the ") + (kernel ? "kernel's" : "exact") + " quantized output's file)");
  if (kernel && !y_path.empty()) throw InputError("--y: a kernel with --quant writes q (and its scales), not y");
  const bool dynamic_scales = f.scaling != "tensor";
  if (!f.scales.empty() && !dynamic_scales) throw InputError("--scales: tensor scaling has one given scale (--scale), no file");
  check_outputs({{f.q, "--q"}, {f.scales, "--scales"}, {y_path, "--y"}, {side.h, "--h"}, {side.mean, "--mean"}, {side.rstd, "--rstd"}},
                {problem.x, problem.gamma, problem.beta, problem.residual});
  if (!side.h.empty() && problem.residual.empty()) throw InputError("--h: needs --residual (h = x + residual)");
  check_stat_flags(op_flag(problem.op), side.mean);
  QuantSetup s = setup(problem, f);
  const Problem& p = s.in.problem;
  Problem kp;  // the kernel's problem: the op with the quantized epilogue
  const bool stats = !side.mean.empty() || !side.rstd.empty();
  if (kernel) {
    kp = set_quant(p, s.spec);
    if (const auto why = unavailable_reason(*kernel, kp))
      throw InputError("--kernel " + std::string(kernel->name) + ": cannot run here: " + *why);
    if (stats)
      if (const auto why = unavailable_reason(*kernel, p))
        throw InputError("--mean/--rstd with --quant: the kernel's statistics come from its run of " + std::string(name(p.op)) +
                         " with y, which it cannot do here: " + *why);
  }
  io::NpyWriter q(f.q, q_descr(s.spec), s.in.shape);
  std::optional<io::NpyWriter> scales, y;
  if (!f.scales.empty()) scales.emplace(f.scales, scales_descr(s.spec), s.scales_shape);
  if (!y_path.empty()) y.emplace(y_path, s.in.x.header().descr, s.in.shape);
  std::optional<io::NpyWriter> h_out, mean_out, rstd_out;
  const std::string stats_descr = descr_of(stats_dtype(p.dtype));
  if (!side.h.empty()) h_out.emplace(side.h, s.in.residual->header().descr, s.in.shape);
  if (!side.mean.empty()) mean_out.emplace(side.mean, stats_descr, s.in.stats_shape());
  if (!side.rstd.empty()) rstd_out.emplace(side.rstd, stats_descr, s.in.stats_shape());
  const std::size_t ss = size_of(stats_dtype(p.dtype));
  std::vector<std::byte> mbuf, rbuf, scratch_y;
  const std::size_t es = size_of(p.dtype);
  const std::int64_t per_row = s.spec.scales_per_row(p.cols);
  const std::int64_t chunk = rows_per_chunk(p.cols, es);
  std::vector<std::byte> xbuf, resbuf, ybuf, sbuf, hbuf;
  std::vector<std::uint8_t> qbuf;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    read_chunk(s, r0, nr, xbuf, resbuf);
    qbuf.resize(static_cast<std::size_t>(nr * p.cols));
    sbuf.resize(static_cast<std::size_t>(nr * per_row) * scale_size(s.spec));
    ybuf.resize(y ? xbuf.size() : 0);
    const void* gamma = s.in.gamma_data.empty() ? nullptr : s.in.gamma_data.data();
    const void* beta = s.in.beta_data.empty() ? nullptr : s.in.beta_data.data();
    if (s.in.residual) hbuf.resize(resbuf.size());
    if (kernel) {
      Problem part = kp;
      part.rows = nr;
      Tensors t{xbuf.data(), gamma, beta};
      if (s.in.residual) {
        t.residual = resbuf.data();
        t.h = hbuf.data();
      }
      t.q = qbuf.data();
      t.scales = per_row ? sbuf.data() : nullptr;
      kernel->run(part, t);
    } else {
      quantize_reference(p, s.spec, xbuf.data(), s.in.residual ? resbuf.data() : nullptr, gamma, beta, nr, p.threads,
                         qbuf.data(), per_row ? sbuf.data() : nullptr, y ? ybuf.data() : nullptr);
    }
    // h and the statistics: the op with y (the exact answer rounded once, or the kernel's own run of it), into scratch
    // y; with a kernel, h is the quantized run's own (above).
    if (stats || (h_out && !kernel)) {
      Problem part = p;
      part.rows = nr;
      mbuf.resize(static_cast<std::size_t>(nr) * ss);
      rbuf.resize(mbuf.size());
      scratch_y.resize(xbuf.size());
      std::vector<std::byte> h_again(kernel ? hbuf.size() : 0);
      Tensors t{xbuf.data(), gamma, beta, scratch_y.data(), p.op.norm == Norm::layernorm ? mbuf.data() : nullptr, rbuf.data()};
      if (s.in.residual) {
        t.residual = resbuf.data();
        t.h = kernel ? h_again.data() : hbuf.data();
      }
      if (kernel) kernel->run(part, t);
      else reference(part, t);
    }
    if (h_out) h_out->write(hbuf.data(), hbuf.size());
    if (mean_out) mean_out->write(mbuf.data(), mbuf.size());
    if (rstd_out) rstd_out->write(rbuf.data(), rbuf.size());
    q.write(qbuf.data(), qbuf.size());
    if (scales) scales->write(sbuf.data(), sbuf.size());
    if (y) y->write(ybuf.data(), ybuf.size());
  }
  q.commit();
  if (scales) scales->commit();
  if (y) y->commit();
  if (h_out) h_out->commit();
  if (mean_out) mean_out->commit();
  if (rstd_out) rstd_out->commit();
  return 0;
}

int run_quant_check(const ProblemFlags& problem, const QuantFlags& f, const std::string& json_path,
                    const std::string& recipe_name, double max_recipe_ulp, const std::string& y_path, const SideOutputs& side) {
  if (f.q.empty()) throw InputError("--q is required with --quant (the candidate's quantized output)");
  check_outputs({{json_path, "--json"}},
                {problem.x, problem.gamma, problem.beta, problem.residual, f.q, f.scales, y_path, side.h, side.mean, side.rstd});
  if (!side.h.empty() && problem.residual.empty()) throw InputError("--h: needs --residual (the candidate h is x + residual)");
  check_stat_flags(op_flag(problem.op), side.mean);
  QuantSetup s = setup(problem, f);
  const Problem& p = s.in.problem;
  // The recipe: its y (x's dtype, after its other parts' roundings) row by row, then its q (quantize.hpp).
  std::optional<Recipe> recipe;
  Problem recipe_p;
  if (!recipe_name.empty()) {
    try {
      recipe = parse_recipe(recipe_name);
      if (!recipe->quant_vllm)
        throw std::invalid_argument("with --quant the recipe must say how q is rounded: name vllm (e.g. '" + recipe_name + "+vllm')");
      recipe_p = recipe_problem(p, *recipe);
    } catch (const std::invalid_argument& e) {
      throw InputError(std::string("--recipe: ") + e.what());
    }
    if (!(max_recipe_ulp >= 0)) throw InputError("--max-recipe-ulp: must be >= 0");
  }
  const std::int64_t per_row = s.spec.scales_per_row(p.cols);
  if (per_row == 0 && !f.scales.empty()) throw InputError("--scales: tensor scaling has one given scale (--scale), no file");
  if (per_row > 0 && f.scales.empty())
    throw InputError("--scales is required with " + f.scaling + " scaling (the candidate's scales its q was computed with)");
  if (f.budget.max_scale_ulp >= 0 && per_row == 0) throw InputError("--max-scale-ulp: tensor scaling's scale is given, not measured");
  io::NpyReader q(f.q);
  if (q.header().descr != q_descr(s.spec))
    throw InputError(f.q + ": holds '" + q.header().descr + "' but " + std::string(name(s.spec.format)) + " is stored as '" +
                     q_descr(s.spec) + "'");
  if (q.header().shape != s.in.shape)
    throw InputError(f.q + ": has shape " + shape_text(q.header().shape) + " but x has shape " + shape_text(s.in.shape));
  std::optional<io::NpyReader> scales;
  if (per_row > 0) {
    scales.emplace(f.scales);
    if (scales->header().descr != scales_descr(s.spec))
      throw InputError(f.scales + ": holds '" + scales->header().descr + "' but " + f.scaling + " scales are '" +
                       scales_descr(s.spec) + "'");
    // One scale per row may also come shaped x.shape[:axis] (ONNX's ReduceMax with keepdims=0 gives [rows]): the
    // same values in the same order.
    const std::vector<std::int64_t> rows_shape(s.scales_shape.begin(), s.scales_shape.end() - 1);
    if (scales->header().shape != s.scales_shape && !(per_row == 1 && scales->header().shape == rows_shape))
      throw InputError(f.scales + ": has shape " + shape_text(scales->header().shape) + "; expected " +
                       shape_text(s.scales_shape) + " (" + std::to_string(per_row) + " per row)");
  }
  // The y the candidate's quantizer was handed: f32, or x's dtype (vLLM quantizes y rounded to x's dtype).
  std::optional<io::NpyReader> yin;
  DType y_dtype = DType::f32;
  if (!y_path.empty()) {
    yin.emplace(y_path);
    const std::string& d = yin->header().descr;
    if (d == descr_of(DType::f32)) y_dtype = DType::f32;
    else if (d == descr_of(p.dtype)) y_dtype = p.dtype;
    else
      throw InputError(y_path + ": holds '" + d + "' but the y a quantizer is handed is f32 ('" + descr_of(DType::f32) +
                       "') or x's dtype ('" + descr_of(p.dtype) + "')");
    if (yin->header().shape != s.in.shape)
      throw InputError(y_path + ": has shape " + shape_text(yin->header().shape) + " but x has shape " + shape_text(s.in.shape));
  }
  // Add & Norm's h and the statistics beside q, measured as check measures them beside y.
  std::optional<io::NpyReader> h_in, mean_in, rstd_in;
  if (!side.h.empty()) {
    h_in.emplace(side.h);
    if (h_in->header().descr != s.in.residual->header().descr)
      throw InputError(side.h + ": --h holds '" + h_in->header().descr + "' but the residual holds '" +
                       s.in.residual->header().descr + "' (h is stored in the residual's dtype)");
    if (h_in->header().shape != s.in.shape)
      throw InputError(side.h + ": has shape " + shape_text(h_in->header().shape) + " but x has shape " + shape_text(s.in.shape));
  }
  if (!side.mean.empty()) mean_in.emplace(open_stats_input(side.mean, "--mean", s.in));
  if (!side.rstd.empty()) rstd_in.emplace(open_stats_input(side.rstd, "--rstd", s.in));
  CheckSummary side_sum;
  std::vector<std::byte> hbuf, mbuf, rbuf;
  const std::size_t ss = size_of(stats_dtype(p.dtype));
  const ConsistencyRule rule = recipe ? ConsistencyRule::vllm : ConsistencyRule::contract;
  const std::size_t es = size_of(p.dtype);
  const std::int64_t chunk = rows_per_chunk(p.cols, es);
  std::vector<std::byte> xbuf, resbuf, sbuf, ybuf;
  std::vector<float> yf;
  std::vector<std::uint8_t> qbuf;
  QuantSummary sum;
  QuantRecipeSummary rsum;
  ConsistencySummary csum;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    read_chunk(s, r0, nr, xbuf, resbuf);
    qbuf.resize(static_cast<std::size_t>(nr * p.cols));
    q.read(r0 * p.cols, nr * p.cols, qbuf.data());
    if (scales) {
      sbuf.resize(static_cast<std::size_t>(nr * per_row) * scale_size(s.spec));
      scales->read(r0 * per_row, nr * per_row, sbuf.data());
    }
    sum.merge(measure_quantized(p, s.spec, xbuf.data(), s.in.residual ? resbuf.data() : nullptr,
                                s.in.gamma_data.empty() ? nullptr : s.in.gamma_data.data(),
                                s.in.beta_data.empty() ? nullptr : s.in.beta_data.data(), qbuf.data(),
                                scales ? sbuf.data() : nullptr, nr, r0, f.budget, p.threads));
    if (yin) {
      const std::int64_t count = nr * p.cols;
      ybuf.resize(static_cast<std::size_t>(count) * size_of(y_dtype));
      yin->read(r0 * p.cols, count, ybuf.data());
      yf.resize(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) yf[static_cast<std::size_t>(i)] = static_cast<float>(value_at(y_dtype, ybuf.data(), i));
      csum.merge(measure_consistency(s.spec, rule, yf.data(), nr, p.cols, qbuf.data(), scales ? sbuf.data() : nullptr, r0));
    }
    if (side.any()) {
      if (h_in) {
        hbuf.resize(resbuf.size());
        h_in->read(r0 * p.cols, nr * p.cols, hbuf.data());
      }
      mbuf.resize(static_cast<std::size_t>(nr) * ss);
      rbuf.resize(mbuf.size());
      if (mean_in) mean_in->read(r0, nr, mbuf.data());
      if (rstd_in) rstd_in->read(r0, nr, rbuf.data());
      side_sum.merge(measure_rows(p, xbuf.data(), s.in.gamma_data.empty() ? nullptr : s.in.gamma_data.data(),
                                  s.in.beta_data.empty() ? nullptr : s.in.beta_data.data(), /*y: not measured*/ nullptr,
                                  mean_in ? mbuf.data() : nullptr, rstd_in ? rbuf.data() : nullptr, nr, r0, Budget{}, p.threads,
                                  AddInputs{s.in.residual ? resbuf.data() : nullptr, h_in ? hbuf.data() : nullptr,
                                            Budget{side.h_budget, 0}}));
    }
    if (recipe)
      rsum.merge(measure_quantized_recipe(recipe_p, s.spec, *recipe, xbuf.data(), s.in.residual ? resbuf.data() : nullptr,
                                          s.in.gamma_data.empty() ? nullptr : s.in.gamma_data.data(),
                                          s.in.beta_data.empty() ? nullptr : s.in.beta_data.data(), qbuf.data(),
                                          scales ? sbuf.data() : nullptr, nr, r0));
  }
  const bool recipe_pass = !recipe || rsum.pass(max_recipe_ulp);
  const bool consistent = !yin || csum.pass();
  const bool h_ok = !h_in || side_sum.h.within_budget();
  const bool mean_ok = !mean_in || side_sum.mean.passes(side.max_mean_ulp);
  const bool rstd_ok = !rstd_in || side_sum.rstd.passes(side.max_rstd_ulp);
  const bool pass = sum.q_pass() && sum.scales_pass() && recipe_pass && consistent && h_ok && mean_ok && rstd_ok;
  const std::string q_budget = f.budget.max_q_ulp >= 0 ? std::to_string(f.budget.max_q_ulp) : "0.5 + x-dtype rounding";
  // Digits enough for the verdict: against a flat budget, against it; by default, against the 0.5 a correctly
  // rounded code needs (0.500064 does not read "0.5").
  const double q_limit = f.budget.max_q_ulp >= 0 ? f.budget.max_q_ulp : 0.5;
  std::printf("%s  q %s max %s quanta (budget %s)  correctly rounded %s%%  non-finite mismatches %lld  saturated %lld",
              pass ? "PASS" : "FAIL", describe(s.spec).c_str(), number_text(sum.max_ulp, q_limit).c_str(), q_budget.c_str(),
              percent_text(sum.correctly_rounded_fraction()).c_str(), static_cast<long long>(sum.nonfinite_mismatches),
              static_cast<long long>(sum.saturated));
  if (per_row > 0)
    std::printf("  scales max %s %s, %lld of %lld over budget",
                number_text(sum.scale_max_ulp, f.budget.max_scale_ulp >= 0 ? f.budget.max_scale_ulp : 0).c_str(),
                std::string(s.spec.storage().unit).c_str(), static_cast<long long>(sum.scales_over_budget),
                static_cast<long long>(sum.scales));
  std::printf("\n  input     %s %s, %s %s, eps %.9g, %lld rows x %lld\n", problem.x.c_str(), shape_text(s.in.shape).c_str(),
              std::string(name(p.op)).c_str(), std::string(name(p.dtype)).c_str(), p.eps,
              static_cast<long long>(p.rows), static_cast<long long>(p.cols));
  if (sum.max_ulp_index >= 0)
    std::printf("  worst q   element %lld: got %.9g, y/s %.17g, %.4g quanta%s\n", static_cast<long long>(sum.max_ulp_index),
                sum.max_ulp_got, sum.max_ulp_target, sum.max_ulp, std::isinf(sum.max_ulp) ? " (non-finite mismatch)" : "");
  std::printf("  over budget %lld of %lld elements", static_cast<long long>(sum.over_budget), static_cast<long long>(sum.elements));
  if (sum.worst_excess_index >= 0 && sum.over_budget > 0)
    std::printf(" (worst at element %lld, allowed %.4g)", static_cast<long long>(sum.worst_excess_index), sum.worst_excess_allowed);
  std::printf("\n");
  const std::string values_note = s.spec.storage().values_are.empty() ? "" : " (" + std::string(s.spec.storage().values_are) + ")";
  if (per_row > 0 && sum.scale_max_index >= 0)
    std::printf("  worst scale %lld: got %.9g, exact %.9g%s; zero groups %lld\n", static_cast<long long>(sum.scale_max_index),
                sum.scale_max_got, sum.scale_max_exact, values_note.c_str(),
                static_cast<long long>(sum.zero_groups));
  if (recipe)
    std::printf("  recipe    %s  q is %s quanta from the %s recipe's value (budget %g), %s%% its code; %s quanta from "
                "y*/s, %s%% correctly rounded; %lld of %lld scales differ from the recipe's (worst %.3g %s)\n",
                recipe_pass ? "PASS" : "FAIL", number_text(rsum.max_quanta, max_recipe_ulp).c_str(), recipe->name.c_str(),
                max_recipe_ulp, percent_text(rsum.matching_fraction()).c_str(), number_text(sum.max_ulp, 0.5).c_str(),
                percent_text(sum.correctly_rounded_fraction()).c_str(), static_cast<long long>(rsum.scales_differ),
                static_cast<long long>(rsum.scales), rsum.scale_max_ulp, std::string(s.spec.storage().unit).c_str());
  if (h_in && side_sum.h.max_ulp_index >= 0)
    std::printf("  h         %s  max %s ulp of h's format at the exact sum (budget %g), correctly rounded %s%%; %lld of %lld over "
                "budget (worst at element %lld: got %.17g, exact sum %.17g)\n",
                h_ok ? "PASS" : "FAIL", number_text(side_sum.h.max_ulp, side.h_budget).c_str(), side.h_budget,
                percent_text(side_sum.h.correctly_rounded_fraction()).c_str(), static_cast<long long>(side_sum.h.over_budget),
                static_cast<long long>(side_sum.h.elements), static_cast<long long>(side_sum.h.max_ulp_index),
                side_sum.h.max_ulp_got, side_sum.h.max_ulp_exact);
  const auto stat_line = [&](const char* label, const StatSummary& st, double limit, bool ok, const char* metric) {
    if (st.max_ulp_index < 0) return;
    std::printf("  %-9s %s  max %s %s at row %lld (got %.9g, exact %.9g), non-finite mismatches %lld%s\n", label,
                limit < 0 ? "(reported)" : ok ? "PASS" : "FAIL", number_text(st.max_ulp, limit < 0 ? 0 : limit).c_str(), metric,
                static_cast<long long>(st.max_ulp_index), st.max_ulp_got, st.max_ulp_exact,
                static_cast<long long>(st.nonfinite_mismatches), limit < 0 ? "" : (" (budget " + number_text(limit, limit) + ")").c_str());
  };
  if (mean_in) stat_line("mean", side_sum.mean, side.max_mean_ulp, mean_ok, "ulp of max(|mean|, sqrt(var+eps))");
  if (rstd_in) stat_line("rstd", side_sum.rstd, side.max_rstd_ulp, rstd_ok, "ulp");
  if (yin)
    std::printf("  consistency %s  %s (%s rule, %s y)\n", consistent ? "PASS" : "FAIL", describe(csum, s.spec).c_str(),
                recipe ? "the vllm recipe's" : "lnorm/quant.hpp's", std::string(name(y_dtype)).c_str());
  if (!json_path.empty()) {
    nlohmann::json j = {{"x", problem.x}, {"op", std::string(name(p.op))}, {"shape", s.in.shape},
                        {"dtype", std::string(name(p.dtype))}, {"eps", p.eps}, {"rows", p.rows}, {"cols", p.cols},
                        {"quant", std::string(name(s.spec.format))}, {"scaling", std::string(name(s.spec.scaling))},
                        {"pass", pass}};
    if (s.spec.scaling_info().group_given) j["group"] = s.spec.group;
    if (s.spec.scaling_info().scale_given) j["scale"] = s.spec.scale;
    j["q"] = {{"candidate", f.q}, {"metric", "quanta of the format at y*/s (clamped to its range), s the candidate's scale"},
              {"elements", sum.elements}, {"max_ulp", num(sum.max_ulp)}, {"max_ulp_nonfinite", std::isinf(sum.max_ulp)},
              {"max_finite_ulp", sum.max_finite_ulp}, {"max_ulp_index", sum.max_ulp_index},
              {"max_ulp_got", num(sum.max_ulp_got)}, {"max_ulp_target", num(sum.max_ulp_target)},
              {"correctly_rounded", sum.correctly_rounded_fraction()}, {"nonfinite_mismatches", sum.nonfinite_mismatches},
              {"saturated", sum.saturated}, {"over_budget", sum.over_budget},
              {"budget", f.budget.max_q_ulp >= 0 ? nlohmann::json(f.budget.max_q_ulp) : nlohmann::json("default")},
              {"pass", sum.q_pass()}};
    if (per_row > 0)
      j["scales"] = {{"candidate", f.scales},
                     {"metric", s.spec.storage().metric},
                     {"count", sum.scales}, {"max_ulp", num(sum.scale_max_ulp)}, {"max_ulp_index", sum.scale_max_index},
                     {"max_ulp_got", num(sum.scale_max_got)}, {"max_ulp_exact", num(sum.scale_max_exact)},
                     {"nonfinite_mismatches", sum.scale_nonfinite_mismatches}, {"zero_groups", sum.zero_groups},
                     {"over_budget", sum.scales_over_budget},
                     {"budget", f.budget.max_scale_ulp >= 0 ? nlohmann::json(f.budget.max_scale_ulp) : nlohmann::json("default")},
                     {"pass", sum.scales_pass()}};
    if (recipe)
      j["recipe"] = {{"name", recipe->name},
                     {"metric", "quanta of the format at the recipe's value f32(y * f32(1/s)) (clamped to its range), y the recipe's in x's dtype"},
                     {"elements", rsum.elements}, {"max_ulp", num(rsum.max_quanta)}, {"max_ulp_index", rsum.max_index},
                     {"max_ulp_got", num(rsum.max_got)}, {"max_ulp_target", num(rsum.max_target)},
                     {"matching", rsum.matching_fraction()}, {"nonfinite_mismatches", rsum.nonfinite_mismatches},
                     {"scales", rsum.scales}, {"scales_differ", rsum.scales_differ}, {"scale_max_ulp", num(rsum.scale_max_ulp)},
                     {"budget", max_recipe_ulp}, {"pass", recipe_pass}};
    if (yin) {
      nlohmann::json first = nlohmann::json::array();
      for (const ConsistencyMismatch& m : csum.first)
        first.push_back(m.scale ? nlohmann::json{{"scale", m.index}, {"amax", num(m.y)}, {"got", num(m.got)}, {"expected", num(m.expected)}}
                                : nlohmann::json{{"element", m.index}, {"y", num(m.y)}, {"got", num(m.got)}, {"expected", num(m.expected)},
                                                 {"got_code", m.got_code}, {"expected_code", m.expected_code}});
      j["consistency"] = {{"y", y_path}, {"y_dtype", std::string(name(y_dtype))},
                          {"rule", recipe ? "vllm: s = f32(amax/qmax), q = Q(f32(y * f32(1/s)))"
                                          : "lnorm/quant.hpp: s = f32(amax/qmax) correctly rounded (mx: 2^(floor(log2 amax) - emax_elem)), q = Q(y/s) exactly"},
                          {"codes", csum.codes}, {"codes_differ", csum.codes_differ}, {"scales", csum.scales},
                          {"scales_differ", csum.scales_differ}, {"first", first}, {"pass", consistent}};
    }
    if (h_in)
      j["h"] = {{"candidate", side.h}, {"metric", "ulps of h's format at the exact sum x + residual"},
                {"elements", side_sum.h.elements}, {"max_ulp", num(side_sum.h.max_ulp)},
                {"max_ulp_index", side_sum.h.max_ulp_index}, {"max_ulp_got", num(side_sum.h.max_ulp_got)},
                {"max_ulp_exact", num(side_sum.h.max_ulp_exact)}, {"correctly_rounded", side_sum.h.correctly_rounded_fraction()},
                {"nonfinite_mismatches", side_sum.h.nonfinite_mismatches}, {"over_budget", side_sum.h.over_budget},
                {"budget", side.h_budget}, {"pass", h_ok}};
    const auto stat_json = [&](const StatSummary& st, double limit, const char* metric, const std::string& path) {
      return nlohmann::json{{"candidate", path}, {"metric", metric}, {"max_ulp", num(st.max_ulp)},
                            {"max_ulp_row", st.max_ulp_index}, {"got", num(st.max_ulp_got)}, {"exact", num(st.max_ulp_exact)},
                            {"nonfinite_mismatches", st.nonfinite_mismatches},
                            {"budget", limit < 0 ? nlohmann::json(nullptr) : nlohmann::json(limit)}, {"pass", st.passes(limit)}};
    };
    if (mean_in) j["mean"] = stat_json(side_sum.mean, side.max_mean_ulp, "ulps of max(|mean|, sqrt(var + eps))", side.mean);
    if (rstd_in) j["rstd"] = stat_json(side_sum.rstd, side.max_rstd_ulp, "ulps of rstd", side.rstd);
    write_text_atomically(json_path, j.dump(2) + "\n");
  }
  return pass ? 0 : 1;
}

}  // namespace lnorm::cli
