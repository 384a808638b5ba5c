// lnorm.reference, lnorm.check, lnorm.kernels, lnorm.run: the exact answer, the metrics of
// `lnorm check` (measure_rows, shared with the CLI) and the built-in kernels, on NumPy arrays.
// The GIL is released while C++ works; inputs are read in place when contiguous.
#include <cmath>

#include "bindings.hpp"
#include "operand_arrays.hpp"
#include "lnorm/check.hpp"
#include "lnorm/reference.hpp"
#include "lnorm/registry.hpp"

namespace lnorm::python {
namespace {

py::tuple reference_py(py::handle x, py::handle gamma, py::handle beta, int axis, double eps, py::handle dtype,
                       py::object threads, const std::string& op, double gamma_offset, py::handle residual) {
  const ProblemArrays in = problem_arrays(x, gamma, beta, axis, eps, dtype,
                                          threads_or_default(threads), op, gamma_offset,
                                          residual);
  const OperandArrays out(in, in.problem, {Operand::mean, Operand::rstd});
  const Tensors t = out.tensors();
  {
    py::gil_scoped_release release;
    reference(in.problem, t);
  }
  return out.outputs();
}

py::dict stat_dict(const StatSummary& s, double limit, const char* metric) {
  py::dict d;
  d["max_ulp"] = s.max_ulp;  // inf on a non-finite mismatch (Python has inf; the CLI's JSON writes null)
  d["max_ulp_nonfinite"] = std::isinf(s.max_ulp);
  d["metric"] = metric;
  d["max_ulp_row"] = s.max_ulp_index;
  d["got"] = s.max_ulp_got;
  d["exact"] = s.max_ulp_exact;
  d["nonfinite_mismatches"] = s.nonfinite_mismatches;
  d["nan_mismatches"] = s.nonfinite_mismatches;  // deprecated alias, as in check --json
  d["budget"] = limit < 0 ? py::object(py::none()) : py::object(py::float_(limit));
  d["pass"] = s.passes(limit);
  return d;
}

py::dict check_py(py::handle x, py::handle y, py::handle gamma, py::handle beta, int axis, double eps, py::object max_ulp_arg,
                  double max_ulp_per_kappa, py::handle mean, py::handle rstd, py::object max_mean_ulp,
                  py::object max_rstd_ulp, py::handle dtype, py::object threads, const std::string& op, double gamma_offset,
                  py::object recipe_name, double max_recipe_ulp, py::handle residual, py::handle h,
                  py::object max_h_ulp) {
  ProblemArrays in = problem_arrays(x, gamma, beta, axis, eps, dtype,
                                    threads_or_default(threads), op, gamma_offset,
                                    residual);
  if (!h.is_none() && residual.is_none()) throw py::value_error("h: needs residual= (the candidate h is x + residual)");
  if (!max_h_ulp.is_none() && h.is_none()) throw py::value_error("max_h_ulp: needs h= (the candidate h it gates)");
  py::object h_arr = h.is_none() ? py::object(py::none()) : py::object(h_array(h, in));
  Recipe recipe;
  if (!recipe_name.is_none()) {
    try {
      recipe = parse_recipe(recipe_name.cast<std::string>());
      in.problem = recipe_problem(in.problem, recipe);
    } catch (const std::invalid_argument& e) {
      throw py::value_error(std::string("recipe: ") + e.what());
    }
  }
  if (!(max_recipe_ulp >= 0)) throw py::value_error("max_recipe_ulp must be >= 0");
  if (in.problem.op.norm != Norm::layernorm && !mean.is_none())
    throw py::value_error("mean: " + op + " has no mean output (it takes the mean as 0); drop mean=");
  const py::array cand = contiguous(y, "y");
  if (!holds(cand, in.problem.dtype)) throw py::type_error("y holds " + dtype_text(cand) + " but x holds " + dtype_text(in.x));
  if (shape_of(cand) != in.shape)
    throw py::value_error("y has shape " + shape_text(shape_of(cand)) + " but x has shape " + shape_text(in.shape));
  // max_ulp None: the default budget (8), and with a recipe y against the exact answer is reported, not gated (the
  // recipe is), as `lnorm check --recipe` without --max-ulp.
  const double max_ulp = max_ulp_arg.is_none() ? 8.0 : max_ulp_arg.cast<double>();
  if (!(max_ulp >= 0) || !(max_ulp_per_kappa >= 0)) throw py::value_error("max_ulp and max_ulp_per_kappa must be >= 0");
  const double mean_limit = max_mean_ulp.is_none() ? -1 : max_mean_ulp.cast<double>();
  const double rstd_limit = max_rstd_ulp.is_none() ? -1 : max_rstd_ulp.cast<double>();
  if (!max_mean_ulp.is_none() && !(mean_limit >= 0)) throw py::value_error("max_mean_ulp must be >= 0");
  if (!max_rstd_ulp.is_none() && !(rstd_limit >= 0)) throw py::value_error("max_rstd_ulp must be >= 0");
  // h's budget as the CLI's: max_h_ulp, else 0.5 (the sum rounded once)
  const double h_limit = max_h_ulp.is_none() ? 0.5 : max_h_ulp.cast<double>();
  if (!(h_limit >= 0)) throw py::value_error("max_h_ulp must be >= 0");
  const void* hp = h_arr.is_none() ? nullptr : py::array(h_arr).data();
  py::object mean_arr = mean.is_none() ? py::object(py::none()) : py::object(stats_array(mean, in, "mean"));
  py::object rstd_arr = rstd.is_none() ? py::object(py::none()) : py::object(stats_array(rstd, in, "rstd"));
  const Budget budget{max_ulp, max_ulp_per_kappa};
  const void* mp = mean.is_none() ? nullptr : py::array(mean_arr).data();
  const void* rp = rstd.is_none() ? nullptr : py::array(rstd_arr).data();
  CheckSummary s;
  {
    py::gil_scoped_release release;
    s = measure_rows(in.problem, in.x.data(), in.gamma_ptr(), in.beta_ptr(), cand.data(), mp, rp, in.problem.rows, 0,
                     budget, in.problem.threads, AddInputs{in.residual_ptr(), hp, {h_limit, 0}},
                     RecipeInputs{recipe.empty() ? nullptr : &recipe, {max_recipe_ulp, 0}});
  }
  const bool mean_ok = !mp || s.mean.passes(mean_limit);
  const bool rstd_ok = !rp || s.rstd.passes(rstd_limit);
  const ErrorSummary& e = s.y;
  py::dict d;
  d["op"] = std::string(name(in.problem.op));
  d["shape"] = py::tuple(py::cast(in.shape));
  d["axis"] = in.axis;
  d["dtype"] = std::string(name(in.problem.dtype));
  d["param_dtype"] = std::string(name(in.problem.param_dtype));
  d["gamma_offset"] = in.problem.gamma_offset;
  d["eps"] = in.problem.eps;
  d["rows"] = in.problem.rows;
  d["cols"] = in.problem.cols;
  d["elements"] = e.elements;
  d["max_ulp"] = e.max_ulp;
  d["max_ulp_nonfinite"] = std::isinf(e.max_ulp);
  d["max_finite_ulp"] = e.max_finite_ulp;
  d["max_ulp_index"] = e.max_ulp_index >= 0 ? py::object(unravel(e.max_ulp_index, in.shape)) : py::object(py::none());
  d["max_ulp_kappa"] = e.max_ulp_kappa;
  d["max_ulp_got"] = e.max_ulp_got;
  d["max_ulp_exact"] = e.max_ulp_exact;
  d["correctly_rounded"] = e.correctly_rounded_fraction();
  d["nonfinite_mismatches"] = e.nonfinite_mismatches;
  d["first_nonfinite_mismatch_index"] = e.first_nonfinite_mismatch_index >= 0
                                            ? py::object(unravel(e.first_nonfinite_mismatch_index, in.shape))
                                            : py::object(py::none());
  d["over_budget"] = e.over_budget;
  // A recipe replaces the exact answer as what y is gated against (lnorm check --recipe): y is reported, and
  // gated too when max_ulp is given.
  const bool y_gated = recipe.empty() || !max_ulp_arg.is_none();
  add_error_fields(d, e, in.shape, y_gated);
  d["budget"] = py::dict(py::arg("a") = max_ulp, py::arg("b") = max_ulp_per_kappa);
  d["mean"] = mp ? py::object(stat_dict(s.mean, mean_limit, "ulps of max(|mean|, sqrt(var + eps))")) : py::object(py::none());
  d["rstd"] = rp ? py::object(stat_dict(s.rstd, rstd_limit, "ulps of rstd")) : py::object(py::none());
  py::object rec = py::none();
  if (!recipe.empty()) {
    const ErrorSummary& r = s.recipe;
    py::dict rd;
    rd["name"] = recipe.name;
    rd["metric"] = "scaled ulps against the recipe's answer (before its last rounding)";
    rd["max_ulp"] = r.max_ulp;
    rd["max_ulp_nonfinite"] = std::isinf(r.max_ulp);
    rd["max_finite_ulp"] = r.max_finite_ulp;
    rd["max_ulp_index"] = r.max_ulp_index >= 0 ? py::object(unravel(r.max_ulp_index, in.shape)) : py::object(py::none());
    rd["max_ulp_got"] = r.max_ulp_got;
    rd["max_ulp_recipe"] = r.max_ulp_exact;
    rd["correctly_rounded"] = r.correctly_rounded_fraction();
    rd["nonfinite_mismatches"] = r.nonfinite_mismatches;
    rd["over_budget"] = r.over_budget;
    rd["budget"] = max_recipe_ulp;
    rd["pass"] = r.within_budget();
    rec = rd;
  }
  d["recipe"] = rec;
  py::object hd = py::none();
  if (hp) {
    const ErrorSummary& hs = s.h;
    py::dict r;
    r["metric"] = "ulps of h's format at the exact sum x + residual";
    r["elements"] = hs.elements;
    r["max_ulp"] = hs.max_ulp;
    r["max_ulp_nonfinite"] = std::isinf(hs.max_ulp);
    r["max_finite_ulp"] = hs.max_finite_ulp;
    r["max_ulp_index"] = hs.max_ulp_index >= 0 ? py::object(unravel(hs.max_ulp_index, in.shape)) : py::object(py::none());
    r["max_ulp_got"] = hs.max_ulp_got;
    r["max_ulp_exact"] = hs.max_ulp_exact;
    r["correctly_rounded"] = hs.correctly_rounded_fraction();
    r["nonfinite_mismatches"] = hs.nonfinite_mismatches;
    r["over_budget"] = hs.over_budget;
    r["budget"] = h_limit;
    r["pass"] = hs.within_budget();
    hd = r;
  }
  d["h"] = hd;
  d["residual_dtype"] = in.problem.op.prologue == Prologue::residual_add ? py::object(py::str(std::string(name(in.problem.residual_dtype)))) : py::object(py::none());
  d["y_pass"] = e.passes();
  d["y_gated"] = y_gated;
  d["pass"] = (!y_gated || e.passes()) && mean_ok && rstd_ok && (recipe.empty() || s.recipe.within_budget()) &&
              (!hp || s.h.within_budget());
  return d;
}

py::list kernels_py() {
  py::list out;
  for (const KernelInfo& k : registry()) {
    py::list dtypes;
    py::dict unavailable;
    for (DType d : kAllDTypes) {
      if (!k.takes.dtypes.contains(d)) continue;
      dtypes.append(std::string(name(d)));
      if (auto why = unavailable_reason(k, make_problem(1, 8, d, 1e-5, false, false))) unavailable[py::str(std::string(name(d)))] = *why;
    }
    py::dict e;
    e["name"] = std::string(k.name);
    e["summary"] = std::string(k.summary);
    e["dtypes"] = py::tuple(dtypes);
    e["unavailable"] = unavailable;
    e["cautionary"] = k.cautionary;
    py::list ops;
    for (Op o : kAllOps)
      if (k.implements(o)) ops.append(std::string(name(o)));
    e["ops"] = py::tuple(ops);
    out.append(e);
  }
  return out;
}

py::tuple run_py(const std::string& kernel, py::handle x, py::handle gamma, py::handle beta, int axis, double eps,
                 py::handle dtype, int threads, const std::string& op, double gamma_offset, py::handle residual) {
  const KernelInfo* k = find_kernel(kernel);
  if (!k) {
    std::string have;
    for (const KernelInfo& e : registry()) have += (have.empty() ? "" : ", ") + std::string(e.name);
    throw py::value_error("no kernel named '" + kernel + "' (have: " + have + ")");
  }
  const ProblemArrays in = problem_arrays(x, gamma, beta, axis, eps, dtype, threads, op, gamma_offset, residual);
  if (auto why = unavailable_reason(*k, in.problem)) {
    throw py::value_error("kernel '" + kernel + "' cannot run " + std::string(name(in.problem.op)) + " " +
                          std::string(name(in.problem.dtype)) + " here: " + *why);
  }
  const OperandArrays out(in, in.problem, {Operand::mean, Operand::rstd});
  const Tensors t = out.tensors();
  {
    py::gil_scoped_release release;
    if (in.problem.rows > 0) k->run(in.problem, t);
  }
  return out.outputs();
}

}  // namespace

void bind_reference(py::module_& m) {
  using namespace py::literals;
  m.def("reference", &reference_py, "x"_a, "gamma"_a = py::none(), "beta"_a = py::none(), py::kw_only(), "axis"_a = -1,
        "eps"_a = 1e-5, "dtype"_a = py::none(), "threads"_a = py::none(), "op"_a = "layernorm", "gamma_offset"_a = 0.0,
        "residual"_a = py::none());
  m.def("check", &check_py, "x"_a, "y"_a, "gamma"_a = py::none(), "beta"_a = py::none(), py::kw_only(), "axis"_a = -1,
        "eps"_a = 1e-5, "max_ulp"_a = py::none(), "max_ulp_per_kappa"_a = 1.0, "mean"_a = py::none(), "rstd"_a = py::none(),
        "max_mean_ulp"_a = py::none(), "max_rstd_ulp"_a = py::none(), "dtype"_a = py::none(), "threads"_a = py::none(),
        "op"_a = "layernorm", "gamma_offset"_a = 0.0, "recipe"_a = py::none(), "max_recipe_ulp"_a = 0.5,
        "residual"_a = py::none(), "h"_a = py::none(), "max_h_ulp"_a = py::none());
  m.def("kernels", &kernels_py);
  m.def("run", &run_py, "name"_a, "x"_a, "gamma"_a = py::none(), "beta"_a = py::none(), py::kw_only(), "axis"_a = -1,
        "eps"_a = 1e-5, "dtype"_a = py::none(), "threads"_a = 1, "op"_a = "layernorm", "gamma_offset"_a = 0.0,
        "residual"_a = py::none());
}

}  // namespace lnorm::python
