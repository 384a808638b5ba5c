// `check --quant`: a candidate's q (and its scales) measured against the exact quantized answer, and, given the y its
// quantizer was handed (--y), against the quantizer's contract applied to that y; h, mean and rstd beside q as beside
// y (side_outputs.hpp). Each output is one OutputCheck; the command opens, measures chunk by chunk, then reports.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd_quant.hpp"
#include "error_text.hpp"
#include "lnorm/check.hpp"
#include "lnorm/format.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/quant_contract.hpp"
#include "lnorm/recipe.hpp"
#include "lnorm/scale_layout.hpp"

namespace lnorm::cli {
namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }


// --recipe with --quant: the recipe's problem (its y's roundings) and its q rounding (vllm).
struct QuantRecipe {
  std::optional<Recipe> recipe;
  Problem problem;
};
QuantRecipe open_recipe(const std::string& name, double max_recipe_ulp, const Problem& p) {
  QuantRecipe r;
  if (name.empty()) return r;
  try {
    r.recipe = parse_recipe(name);
    if (!r.recipe->quant_vllm)
      throw std::invalid_argument("with --quant the recipe must say how q is rounded: name vllm (e.g. '" + name + "+vllm')");
    r.problem = recipe_problem(p, *r.recipe);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("--recipe: ") + e.what());
  }
  if (!(max_recipe_ulp >= 0)) throw InputError("--max-recipe-ulp: must be >= 0");
  return r;
}

// The candidate's q, its scales and the y its quantizer was handed, opened and validated, read chunk by chunk.
struct QuantCandidates {
  std::optional<io::NpyReader> q, scales, y;
  DType y_dtype = DType::f32;  // the handed y: f32, or x's dtype (vLLM quantizes y rounded to x's dtype)
  std::int64_t per_row = 0;
  std::vector<std::uint8_t> qbuf;
  std::vector<std::byte> sbuf, ybuf;
  std::vector<std::byte> all_scales;  // --scale-layout col or swizzled: every scale, row-major
  std::int64_t padding_nonzero = 0;   // swizzled: padding scales that are not 0 (fail the scales' verdict)
  std::vector<float> yf;

  QuantCandidates(const QuantFlags& f, const std::string& y_path, const QuantSetup& s) : per_row(s.spec.scales_per_row(s.in.problem.cols)) {
    if (per_row == 0 && !f.scales.empty()) throw InputError("--scales: tensor scaling has one given scale (--scale), no file");
    if (per_row > 0 && f.scales.empty())
      throw InputError("--scales is required with " + f.scaling + " scaling (the candidate's scales its q was computed with)");
    if (f.budget.max_scale_ulp >= 0 && per_row == 0) throw InputError("--max-scale-ulp: tensor scaling's scale is given, not measured");
    q.emplace(f.q);
    if (q->header().descr != q_descr(s.spec))
      throw InputError(f.q + ": holds '" + q->header().descr + "' but " + std::string(name(s.spec.format)) + " is stored as '" +
                       q_descr(s.spec) + "'");
    if (q->header().shape != s.q_shape)
      throw InputError(f.q + ": has shape " + shape_text(q->header().shape) + " but " + std::string(name(s.spec.format)) +
                       " codes of x " + shape_text(s.in.shape) + " are " + shape_text(s.q_shape) +
                       (is_packed(s.spec.format) ? " (two a byte, element 2i in the low nibble)" : ""));
    if (per_row > 0) {
      scales.emplace(f.scales);
      if (scales->header().descr != scales_descr(s.spec))
        throw InputError(f.scales + ": holds '" + scales->header().descr + "' but " + f.scaling + " scales are '" +
                         scales_descr(s.spec) + "'");
      // One scale per row may also come shaped x.shape[:axis] (ONNX's ReduceMax with keepdims=0 gives [rows]): the
      // same values in the same order.
      const ScaleLayout layout = s.spec.scale_layout;
      const std::vector<std::int64_t>& shape = scales->header().shape;
      const std::vector<std::int64_t> rows_shape(s.scales_shape.begin(), s.scales_shape.end() - 1);
      // swizzled may also come as its tiles' 2-D view [round_up(rows, 128), round_up(groups, 4)]: the same bytes.
      const std::int64_t stored = stored_scale_count(layout, s.rows, per_row);
      const bool tiles_2d = layout == ScaleLayout::swizzled && shape.size() == 2 && shape[0] * shape[1] == stored && shape[0] % 128 == 0;
      if (shape != s.scales_shape && !(layout == ScaleLayout::row && per_row == 1 && shape == rows_shape) && !tiles_2d)
        throw InputError(f.scales + ": has shape " + shape_text(shape) + "; expected " + shape_text(s.scales_shape) + " (" +
                         std::to_string(per_row) + " per row" +
                         (layout == ScaleLayout::row ? "" : ", --scale-layout " + std::string(info(layout).name)) + ")");
      if (layout != ScaleLayout::row) {  // a layout's order is not the rows': read whole, back to row-major
        std::vector<std::byte> laid(static_cast<std::size_t>(stored) * scale_size(s.spec));
        scales->read(0, stored, laid.data());
        padding_nonzero = nonzero_padding(layout, s.rows, per_row, scale_size(s.spec), laid.data());
        all_scales.resize(static_cast<std::size_t>(s.rows * per_row) * scale_size(s.spec));
        scales_from_layout(layout, s.rows, per_row, scale_size(s.spec), laid.data(), all_scales.data());
      }
    }
    if (!y_path.empty()) open_y(y_path, s);
  }
  void open_y(const std::string& path, const QuantSetup& s) {
    y.emplace(path);
    const std::string& d = y->header().descr;
    const DType x_dtype = s.in.problem.dtype;
    if (d == descr_of(DType::f32)) y_dtype = DType::f32;
    else if (d == descr_of(x_dtype)) y_dtype = x_dtype;
    else
      throw InputError(path + ": holds '" + d + "' but the y a quantizer is handed is f32 ('" + descr_of(DType::f32) +
                       "') or x's dtype ('" + descr_of(x_dtype) + "')");
    if (y->header().shape != s.in.shape)
      throw InputError(path + ": has shape " + shape_text(y->header().shape) + " but x has shape " + shape_text(s.in.shape));
  }
  void read(std::int64_t r0, std::int64_t nr, std::int64_t cols, const QuantSpec& spec) {
    const std::int64_t row_bytes = spec.q_bytes(1, cols);
    qbuf.resize(static_cast<std::size_t>(nr * row_bytes));
    q->read(r0 * row_bytes, nr * row_bytes, qbuf.data());
    if (scales) {
      const std::size_t bytes = scale_size(spec);
      sbuf.resize(static_cast<std::size_t>(nr * per_row) * bytes);
      if (all_scales.empty()) scales->read(r0 * per_row, nr * per_row, sbuf.data());
      else std::copy_n(all_scales.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r0 * per_row) * bytes), sbuf.size(), sbuf.begin());
    }
    if (y) {
      const std::int64_t count = nr * cols;
      ybuf.resize(static_cast<std::size_t>(count) * size_of(y_dtype));
      y->read(r0 * cols, count, ybuf.data());
      yf.resize(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) yf[static_cast<std::size_t>(i)] = static_cast<float>(value_at(y_dtype, ybuf.data(), i));
    }
  }
  const void* scales_data() const { return scales ? sbuf.data() : nullptr; }
};

// q and its scales: q's line leads the summary.
std::vector<OutputCheck> q_checks(const QuantSummary& sum, const QuantSetup& s, const QuantFlags& f, std::int64_t padding_nonzero) {
  const std::string q_budget = f.budget.max_q_ulp >= 0 ? std::to_string(f.budget.max_q_ulp) : "0.5 + x-dtype rounding";
  // Digits enough for the verdict: against a flat budget, against it; by default, against the 0.5 a correctly
  // rounded code needs (0.500064 does not read "0.5").
  const double q_limit = f.budget.max_q_ulp >= 0 ? f.budget.max_q_ulp : 0.5;
  OutputCheck q{"q", sum.q_pass(), "", "", {}};
  q.summary = text("  q %s max %s quanta (budget %s)  correctly rounded %s%%  non-finite mismatches %lld  saturated %lld",
                   describe(s.spec).c_str(), number_text(sum.max_ulp, q_limit).c_str(), q_budget.c_str(),
                   percent_text(sum.correctly_rounded_fraction()).c_str(), static_cast<long long>(sum.nonfinite_mismatches),
                   static_cast<long long>(sum.saturated));
  if (sum.max_ulp_index >= 0)
    q.detail = text("  worst q   element %lld: got %.9g, y/s %.17g, %.4g quanta%s\n", static_cast<long long>(sum.max_ulp_index),
                    sum.max_ulp_got, sum.max_ulp_target, sum.max_ulp, std::isinf(sum.max_ulp) ? " (non-finite mismatch)" : "");
  q.detail += text("  over budget %lld of %lld elements", static_cast<long long>(sum.over_budget), static_cast<long long>(sum.elements));
  if (sum.worst_excess_index >= 0 && sum.over_budget > 0)
    q.detail += text(" (worst at element %lld, allowed %.4g)", static_cast<long long>(sum.worst_excess_index), sum.worst_excess_allowed);
  q.detail += "\n";
  q.json = {{"candidate", f.q}, {"metric", "quanta of the format at y*/s (clamped to its range), s the candidate's scale"},
            {"elements", sum.elements}, {"max_ulp", num(sum.max_ulp)}, {"max_ulp_nonfinite", std::isinf(sum.max_ulp)},
            {"max_finite_ulp", sum.max_finite_ulp}, {"max_ulp_index", sum.max_ulp_index},
            {"max_ulp_got", num(sum.max_ulp_got)}, {"max_ulp_target", num(sum.max_ulp_target)},
            {"correctly_rounded", sum.correctly_rounded_fraction()}, {"nonfinite_mismatches", sum.nonfinite_mismatches},
            {"saturated", sum.saturated}, {"over_budget", sum.over_budget},
            {"budget", f.budget.max_q_ulp >= 0 ? nlohmann::json(f.budget.max_q_ulp) : nlohmann::json("default")},
            {"pass", sum.q_pass()}};
  if (!s.spec.has_scales()) return {q};
  const ScaleStorageInfo& st = s.spec.storage();
  OutputCheck sc{"scales", sum.scales_pass() && padding_nonzero == 0, "", "", {}};
  sc.summary = text("  scales max %s %s, %lld of %lld over budget",
                    number_text(sum.scale_max_ulp, f.budget.max_scale_ulp >= 0 ? f.budget.max_scale_ulp : 0).c_str(),
                    std::string(st.unit).c_str(), static_cast<long long>(sum.scales_over_budget), static_cast<long long>(sum.scales));
  if (padding_nonzero > 0)
    sc.summary += text(", %lld padding scale%s not 0", static_cast<long long>(padding_nonzero), padding_nonzero == 1 ? "" : "s");
  const std::string values_note = st.values_are.empty() ? "" : " (" + std::string(st.values_are) + ")";
  if (sum.scale_max_index >= 0)
    sc.detail = text("  worst scale %lld: got %.9g, exact %.9g%s; zero groups %lld\n", static_cast<long long>(sum.scale_max_index),
                     sum.scale_max_got, sum.scale_max_exact, values_note.c_str(), static_cast<long long>(sum.zero_groups));
  sc.json = {{"candidate", f.scales}, {"metric", st.metric},
             {"count", sum.scales}, {"max_ulp", num(sum.scale_max_ulp)}, {"max_ulp_index", sum.scale_max_index},
             {"max_ulp_got", num(sum.scale_max_got)}, {"max_ulp_exact", num(sum.scale_max_exact)},
             {"nonfinite_mismatches", sum.scale_nonfinite_mismatches}, {"zero_groups", sum.zero_groups},
             {"over_budget", sum.scales_over_budget}, {"layout", std::string(info(s.spec.scale_layout).name)},
             {"padding_nonzero", padding_nonzero},
             {"budget", f.budget.max_scale_ulp >= 0 ? nlohmann::json(f.budget.max_scale_ulp) : nlohmann::json("default")},
             {"pass", sc.pass}};
  return {q, sc};
}

OutputCheck recipe_check(const QuantRecipeSummary& rsum, const QuantSummary& sum, const Recipe& recipe, double max_recipe_ulp,
                         const QuantSpec& spec) {
  OutputCheck c{"recipe", rsum.pass(max_recipe_ulp), "", "", {}};
  c.detail = text("  recipe    %s  q is %s quanta from the %s recipe's value (budget %g), %s%% its code; %s quanta from "
                  "y*/s, %s%% correctly rounded; %lld of %lld scales differ from the recipe's (worst %.3g %s)\n",
                  c.pass ? "PASS" : "FAIL", number_text(rsum.max_quanta, max_recipe_ulp).c_str(), recipe.name.c_str(),
                  max_recipe_ulp, percent_text(rsum.matching_fraction()).c_str(), number_text(sum.max_ulp, 0.5).c_str(),
                  percent_text(sum.correctly_rounded_fraction()).c_str(), static_cast<long long>(rsum.scales_differ),
                  static_cast<long long>(rsum.scales), rsum.scale_max_ulp, std::string(spec.storage().unit).c_str());
  c.json = {{"name", recipe.name},
            {"metric", "quanta of the format at the recipe's value f32(y * f32(1/s)) (clamped to its range), y the recipe's in x's dtype"},
            {"elements", rsum.elements}, {"max_ulp", num(rsum.max_quanta)}, {"max_ulp_index", rsum.max_index},
            {"max_ulp_got", num(rsum.max_got)}, {"max_ulp_target", num(rsum.max_target)},
            {"matching", rsum.matching_fraction()}, {"nonfinite_mismatches", rsum.nonfinite_mismatches},
            {"scales", rsum.scales}, {"scales_differ", rsum.scales_differ}, {"scale_max_ulp", num(rsum.scale_max_ulp)},
            {"budget", max_recipe_ulp}, {"pass", c.pass}};
  return c;
}

OutputCheck consistency_check(const ConsistencySummary& csum, const QuantSpec& spec, bool vllm, const std::string& y_path, DType y_dtype) {
  OutputCheck c{"consistency", csum.pass(), "", "", {}};
  c.detail = text("  consistency %s  %s (%s rule, %s y)\n", c.pass ? "PASS" : "FAIL", describe(csum, spec).c_str(),
                  vllm ? "the vllm recipe's" : "lnorm/quant.hpp's", std::string(name(y_dtype)).c_str());
  nlohmann::json first = nlohmann::json::array();
  for (const ConsistencyMismatch& m : csum.first)
    first.push_back(m.scale ? nlohmann::json{{"scale", m.index}, {"amax", num(m.y)}, {"got", num(m.got)}, {"expected", num(m.expected)}}
                            : nlohmann::json{{"element", m.index}, {"y", num(m.y)}, {"got", num(m.got)}, {"expected", num(m.expected)},
                                             {"got_code", m.got_code}, {"expected_code", m.expected_code}});
  c.json = {{"y", y_path}, {"y_dtype", std::string(name(y_dtype))},
            {"rule", vllm ? "vllm: s = f32(amax/qmax), q = Q(f32(y * f32(1/s)))"
                          : "lnorm/quant.hpp: s = f32(amax/qmax) correctly rounded (mx: 2^(floor(log2 amax) - emax_elem)), q = Q(y/s) exactly"},
            {"codes", csum.codes}, {"codes_differ", csum.codes_differ}, {"scales", csum.scales},
            {"scales_differ", csum.scales_differ}, {"first", first}, {"pass", c.pass}};
  return c;
}

const void* data_or_null(const std::vector<std::byte>& v) { return v.empty() ? nullptr : v.data(); }

}  // namespace

int run_quant_check(const ProblemFlags& problem, const QuantFlags& f, const std::string& json_path,
                    const std::string& recipe_name, double max_recipe_ulp, const std::string& y_path, const SideOutputs& side_paths) {
  if (f.q.empty()) throw InputError("--q is required with --quant (the candidate's quantized output)");
  check_outputs({{json_path, "--json"}}, {problem.x, problem.gamma, problem.beta, problem.residual, f.q, f.scales, y_path,
                                          side_paths.h, side_paths.mean, side_paths.rstd});
  check_stat_flags(op_flag(problem.op), side_paths.mean);
  QuantSetup s = setup(problem, f);
  resolve_global_scale(s);
  const Problem& p = s.in.problem;
  const QuantRecipe rec = open_recipe(recipe_name, max_recipe_ulp, p);
  if (rec.recipe && s.spec.scaling_info().global_scale)
    throw InputError("--recipe: vLLM's rounding points are defined for tensor, row, group and mx scaling, not " +
                     std::string(name(s.spec.scaling)));
  QuantCandidates cand(f, y_path, s);
  SideCandidates side(side_paths, s.in);
  const void* gamma = data_or_null(s.in.gamma_data);
  const void* beta = data_or_null(s.in.beta_data);
  const std::int64_t chunk = rows_per_chunk(p.cols, size_of(p.dtype));
  std::vector<std::byte> xbuf, resbuf;
  QuantSummary sum;
  QuantRecipeSummary rsum;
  ConsistencySummary csum;
  CheckSummary side_sum;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    read_chunk(s, r0, nr, xbuf, resbuf);
    cand.read(r0, nr, p.cols, s.spec);
    const void* residual = s.in.residual ? resbuf.data() : nullptr;
    sum.merge(measure_quantized(p, s.spec, xbuf.data(), residual, gamma, beta, cand.qbuf.data(), cand.scales_data(), nr, r0,
                                f.budget, p.threads));
    if (cand.y)
      csum.merge(measure_consistency(s.spec, rec.recipe ? ConsistencyRule::vllm : ConsistencyRule::contract, cand.yf.data(), nr,
                                     p.cols, cand.qbuf.data(), cand.scales_data(), r0));
    if (side_paths.any()) {
      side.read(r0, nr);
      side_sum.merge(measure_rows(p, xbuf.data(), gamma, beta, /*y: not measured*/ nullptr, side.mean(), side.rstd(), nr, r0,
                                  Budget{}, p.threads, AddInputs{residual, side.h(), Budget{side_paths.h_budget, 0}}));
    }
    if (rec.recipe)
      rsum.merge(measure_quantized_recipe(rec.problem, s.spec, *rec.recipe, xbuf.data(), residual, gamma, beta, cand.qbuf.data(),
                                          cand.scales_data(), nr, r0));
  }
  std::vector<OutputCheck> outs = q_checks(sum, s, f, cand.padding_nonzero);
  if (rec.recipe) outs.push_back(recipe_check(rsum, sum, *rec.recipe, max_recipe_ulp, s.spec));
  if (cand.y) outs.push_back(consistency_check(csum, s.spec, rec.recipe.has_value(), y_path, cand.y_dtype));
  for (OutputCheck& c : side.checks(side_sum.h, side_sum.mean, side_sum.rstd)) outs.push_back(std::move(c));
  bool pass = true;
  for (const OutputCheck& c : outs) pass &= c.pass;
  // One summary line (q's and the scales' verdicts first), the input, then each output's detail.
  std::printf("%s", pass ? "PASS" : "FAIL");
  for (const OutputCheck& c : outs) std::printf("%s", c.summary.c_str());
  std::printf("\n  input     %s %s, %s %s, eps %.9g, %lld rows x %lld\n", problem.x.c_str(), shape_text(s.in.shape).c_str(),
              std::string(name(p.op)).c_str(), std::string(name(p.dtype)).c_str(), p.eps,
              static_cast<long long>(p.rows), static_cast<long long>(p.cols));
  for (const OutputCheck& c : outs) std::printf("%s", c.detail.c_str());
  if (!json_path.empty()) {
    nlohmann::json j = {{"x", problem.x}, {"op", std::string(name(p.op))}, {"shape", s.in.shape},
                        {"dtype", std::string(name(p.dtype))}, {"eps", p.eps}, {"rows", p.rows}, {"cols", p.cols},
                        {"quant", std::string(name(s.spec.format))}, {"scaling", std::string(name(s.spec.scaling))},
                        {"pass", pass}};
    if (s.spec.scaling_info().group_given) j["group"] = s.spec.group;
    if (s.spec.scaling_info().scale_given) j["scale"] = s.spec.scale;
    for (const OutputCheck& c : outs) j[c.key] = c.json;
    write_text_atomically(json_path, j.dump(2) + "\n");
  }
  return pass ? 0 : 1;
}

}  // namespace lnorm::cli
