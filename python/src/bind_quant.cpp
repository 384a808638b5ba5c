// Quantized outputs from Python (docs/python.md "Quantized outputs"): the exact q and scales, a kernel's, and the
// metric of `lnorm check --quant`, on NumPy arrays. q is uint8 (fp8 bit patterns) or int8; row/group scales
// float32, mx scales uint8 E8M0 codes, shaped x.shape[:axis] + (groups,).
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "bindings.hpp"
#include "operand_arrays.hpp"
#include "lnorm/format.hpp"
#include "lnorm/quant_contract.hpp"
#include "lnorm/quantize.hpp"
#include "lnorm/recipe.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/scale_layout.hpp"

namespace lnorm::python {
namespace {

// scale=: None, or a real number (a Python or NumPy scalar; not a string, not a bool): TypeError otherwise, in the
// CLI's words, not pybind11's "Unable to cast Python instance".
std::optional<double> scale_arg(py::handle scale) {
  if (scale.is_none()) return std::nullopt;
  if (PyBool_Check(scale.ptr()) || !PyNumber_Check(scale.ptr()) || PyComplex_Check(scale.ptr()) ||
      py::isinstance<py::array>(scale) || py::isinstance<py::str>(scale))
    throw py::type_error("scale=: expected a number (the tensor scale S, a finite f32 greater than 0), got " +
                         std::string(py::str(py::type::of(scale).attr("__name__"))));
  return py::float_(py::reinterpret_borrow<py::object>(scale)).cast<double>();
}

// The spec, nvfp4's global scale resolved (given, or the tensor's own from y*: lnorm/quantize.hpp).
QuantSpec spec_of(const std::string& quant, const std::string& scaling, py::handle scale, const ProblemArrays& in,
                  py::handle global_scale, py::handle mx_rule, py::handle scale_format, py::handle scale_layout) {
  if (in.problem.dtype == DType::f64) throw py::value_error("quant: x must be float32, float16 or bf16 (the scales are float32)");
  QuantSpec s;
  try {
    const std::optional<double> g = global_scale.is_none() ? std::nullopt : std::optional<double>(global_scale.cast<double>());
    const std::string rule = mx_rule.is_none() ? std::string() : mx_rule.cast<std::string>();
    const std::string sf = scale_format.is_none() ? std::string() : scale_format.cast<std::string>();
    const std::string sl = scale_layout.is_none() ? std::string() : scale_layout.cast<std::string>();
    s = parse_quant_spec(quant, scaling, scale_arg(scale), in.problem.cols,
                         QuantSpecNames{"quant=", "scaling=", "scale=", "global_scale=", "mx_rule=", "scale_format=", "scale_layout="},
                         g, rule, sf, sl);
  } catch (const QuantSpecError& e) {
    throw py::value_error(e.what());
  }
  py::gil_scoped_release release;
  return resolve_global_scale(in.problem, s, in.x.data(), in.residual_ptr(), in.gamma_ptr(), in.beta_ptr(), in.problem.rows,
                              in.problem.threads);
}

std::vector<py::ssize_t> scales_shape(const ProblemArrays& in, const QuantSpec& s) {
  std::vector<py::ssize_t> shape(in.shape.begin(), in.shape.begin() + in.axis);
  shape.push_back(static_cast<py::ssize_t>(s.scales_per_row(in.problem.cols)));
  return shape;
}

// q's shape: x's, or a packed format's x.shape[:axis] + (cols/2,) (two codes a byte, element 2i in the low nibble).
std::vector<std::int64_t> q_shape(const ProblemArrays& in, const QuantSpec& s) {
  return lnorm::q_shape(set_quant(in.problem, s), {in.shape.begin(), in.shape.end()}, in.axis);
}

py::array new_q(const ProblemArrays& in, const QuantSpec& s) {
  const std::vector<std::int64_t> qs = q_shape(in, s);
  return py::array(py::dtype(std::string(s.format_info().numpy_dtype)), std::vector<py::ssize_t>(qs.begin(), qs.end()));
}
py::object new_scales(const ProblemArrays& in, const QuantSpec& s) {
  if (!s.has_scales()) return py::none();
  return py::array(py::dtype(std::string(s.storage().numpy_dtype)), scales_shape(in, s));
}
// Row-major scales (as kernels write them) in scale_layout= (lnorm/scale_layout.hpp); row: as they are.
py::object laid_out(py::object row_major, const ProblemArrays& in, const QuantSpec& s) {
  if (row_major.is_none() || s.scale_layout == ScaleLayout::row) return row_major;
  const std::int64_t per_row = s.scales_per_row(in.problem.cols);
  const std::vector<std::int64_t> shape =
      stored_scales_shape(s.scale_layout, {in.shape.begin(), in.shape.begin() + in.axis}, per_row);
  py::array out(py::dtype(std::string(s.storage().numpy_dtype)), std::vector<py::ssize_t>(shape.begin(), shape.end()));
  scales_to_layout(s.scale_layout, in.problem.rows, per_row, s.storage().bytes, py::array(row_major).data(), out.mutable_data());
  return out;
}

py::tuple quant_reference_py(py::handle x, py::handle gamma, py::handle beta, const std::string& quant,
                             const std::string& scaling, py::handle scale, int axis, double eps, py::handle dtype,
                             py::object threads, const std::string& op, double gamma_offset, py::handle residual,
                             py::handle global_scale, py::handle mx_rule, py::handle scale_format, py::handle scale_layout) {
  const ProblemArrays in = problem_arrays(x, gamma, beta, axis, eps, dtype,
                                          threads_or_default(threads), op, gamma_offset,
                                          residual);
  const QuantSpec s = spec_of(quant, scaling, scale, in, global_scale, mx_rule, scale_format, scale_layout);
  py::array q = new_q(in, s);
  py::object scales = new_scales(in, s);
  auto* qp = static_cast<std::uint8_t*>(q.mutable_data());
  void* sp = scales.is_none() ? nullptr : py::array(scales).mutable_data();
  {
    py::gil_scoped_release release;
    quantize_reference(in.problem, s, in.x.data(), in.residual_ptr(), in.gamma_ptr(), in.beta_ptr(), in.problem.rows,
                       in.problem.threads, qp, sp);
  }
  return py::make_tuple(q, laid_out(scales, in, s));
}

py::tuple quant_run_py(const std::string& kernel, py::handle x, py::handle gamma, py::handle beta, const std::string& quant,
                       const std::string& scaling, py::handle scale, int axis, double eps, py::handle dtype, int threads,
                       const std::string& op, double gamma_offset, py::handle residual, py::handle global_scale,
                       py::handle mx_rule, py::handle scale_format, py::handle scale_layout) {
  const KernelInfo* k = find_kernel(kernel);
  if (!k) throw py::value_error("no kernel named '" + kernel + "'");
  const ProblemArrays in = problem_arrays(x, gamma, beta, axis, eps, dtype, threads, op, gamma_offset, residual);
  const QuantSpec s = spec_of(quant, scaling, scale, in, global_scale, mx_rule, scale_format, scale_layout);
  const Problem p = set_quant(in.problem, s);
  if (auto why = unavailable_reason(*k, p))
    throw py::value_error("kernel '" + kernel + "' cannot write " + describe(s) + " here: " + *why);
  // q and its scales (and h, for Add & Norm) from the operand table; h is computed but, as before, not returned.
  const OperandArrays out(in, p, {});
  const Tensors t = out.tensors();
  {
    py::gil_scoped_release release;
    if (p.rows > 0) k->run(p, t);
  }
  py::object q = out.get(Operand::q), scales = out.get(Operand::scales);
  return py::make_tuple(q, laid_out(scales, in, s));
}

// q as the format stores it, x's shape.
py::array q_array(py::handle q, const QuantSpec& s, const ProblemArrays& in) {
  const py::array qa = contiguous(q, "q");
  const std::string q_dtype(s.format_info().numpy_dtype);
  if (!qa.dtype().equal(py::dtype(q_dtype)))
    throw py::type_error(std::string("q: ") + std::string(name(s.format)) + " is stored as " + q_dtype +
                         (is_float(s.format) ? " bit patterns" : "") + ", not " + dtype_text(qa));
  if (const auto want = q_shape(in, s); shape_of(qa) != want)
    throw py::value_error("q has shape " + shape_text(shape_of(qa)) + " but " + std::string(name(s.format)) + " codes of x " +
                          shape_text(in.shape) + " are " + shape_text(want) + (is_packed(s.format) ? " (two a byte)" : ""));
  return qa;
}

// The candidate's scales (none for a given scale), as the scale storage's row says they are stored, row-major (a
// scale_layout= col or swizzled array converted back; padding_nonzero: swizzled's padding that is not 0).
py::object scales_array(py::handle scales, const QuantSpec& s, const std::string& scaling, const ProblemArrays& in,
                        std::int64_t& padding_nonzero) {
  if (!s.has_scales()) {
    if (!scales.is_none()) throw py::value_error("scales: " + scaling + " scaling has one given scale (scale=), no array");
    return py::none();
  }
  if (scales.is_none()) throw py::value_error("scales= is required with " + scaling + " scaling (the candidate's scales)");
  const py::array a = contiguous(scales, "scales");
  const ScaleStorageInfo& st = s.storage();
  if (!a.dtype().equal(py::dtype(std::string(st.numpy_dtype))))  // equal, not is: a byte-swapped copy has its own dtype object
    throw py::type_error("scales: " + scaling + " scales are " + std::string(st.numpy_dtype) +
                         (st.values_are.empty() ? "" : " " + std::string(st.values_are)) + ", not " + dtype_text(a));
  const std::int64_t per_row = s.scales_per_row(in.problem.cols);
  const std::int64_t stored = stored_scale_count(s.scale_layout, in.problem.rows, per_row);
  if (a.size() != stored)
    throw py::value_error("scales has " + std::to_string(a.size()) + " elements; expected " + std::to_string(stored) + " (" +
                          std::to_string(per_row) + " per row, scale_layout=" + std::string(info(s.scale_layout).name) + ")");
  if (s.scale_layout == ScaleLayout::row) return a;
  padding_nonzero = nonzero_padding(s.scale_layout, in.problem.rows, per_row, st.bytes, a.data());
  py::array row_major(a.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(in.problem.rows * per_row)});
  scales_from_layout(s.scale_layout, in.problem.rows, per_row, st.bytes, a.data(), row_major.mutable_data());
  return row_major;
}

// quant_y: the y the candidate's quantizer was handed (float32, or float16 x's values; a bf16 y as float32,
// exactly), widened to f32; empty when not given.
std::vector<float> handed_y(py::handle quant_y, const ProblemArrays& in) {
  std::vector<float> handed;
  if (quant_y.is_none()) return handed;
  const py::array ya = contiguous(quant_y, "quant_y");
  if (shape_of(ya) != in.shape)
    throw py::value_error("quant_y has shape " + shape_text(shape_of(ya)) + " but x has shape " + shape_text(in.shape));
  handed.resize(static_cast<std::size_t>(ya.size()));
  if (ya.dtype().equal(py::dtype("float32"))) {
    std::memcpy(handed.data(), ya.data(), handed.size() * 4);
  } else if (ya.dtype().equal(py::dtype("float16"))) {
    for (std::size_t i = 0; i < handed.size(); ++i)
      handed[i] = static_cast<float>(value_at(DType::f16, ya.data(), static_cast<std::int64_t>(i)));
  } else {
    throw py::type_error("quant_y: the y a quantizer is handed is float32 (a bf16 y as float32, exactly) or float16, not " +
                         dtype_text(ya));
  }
  return handed;
}

// recipe: q's rounding points as lnorm check --quant --recipe (must name vllm), and the problem its y solves.
struct QuantRecipe {
  std::optional<Recipe> recipe;
  Problem problem;
};
QuantRecipe quant_recipe(py::object recipe_name, const Problem& p) {
  QuantRecipe r{std::nullopt, p};
  if (recipe_name.is_none()) return r;
  try {
    r.recipe = parse_recipe(recipe_name.cast<std::string>());
    if (!r.recipe->quant_vllm) throw std::invalid_argument("with quant= the recipe must say how q is rounded: name vllm");
    r.problem = recipe_problem(p, *r.recipe);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(std::string("recipe: ") + e.what());
  }
  return r;
}

py::object budget_of(const py::object& given) { return given.is_none() ? py::object(py::str("default")) : given; }

py::dict q_dict(const QuantSummary& m, const ProblemArrays& in, const py::object& max_q_ulp) {
  py::dict qd;
  qd["metric"] = "quanta of the format at y*/s (clamped to its range), s the candidate's scale";
  qd["elements"] = m.elements;
  qd["max_ulp"] = m.max_ulp;
  qd["max_finite_ulp"] = m.max_finite_ulp;
  qd["max_ulp_index"] = m.max_ulp_index >= 0 ? py::object(unravel(m.max_ulp_index, in.shape)) : py::object(py::none());
  qd["max_ulp_got"] = m.max_ulp_got;
  qd["max_ulp_target"] = m.max_ulp_target;
  qd["correctly_rounded"] = m.correctly_rounded_fraction();
  qd["nonfinite_mismatches"] = m.nonfinite_mismatches;
  qd["saturated"] = m.saturated;
  qd["over_budget"] = m.over_budget;
  qd["budget"] = budget_of(max_q_ulp);
  qd["pass"] = m.q_pass();
  return qd;
}

py::object scales_dict(const QuantSummary& m, const QuantSpec& s, const py::object& max_scale_ulp, std::int64_t padding_nonzero) {
  if (!s.has_scales()) return py::none();
  py::dict d;
  d["metric"] = std::string(s.storage().metric);
  d["count"] = m.scales;
  d["max_ulp"] = m.scale_max_ulp;
  d["max_ulp_got"] = m.scale_max_got;
  d["max_ulp_exact"] = m.scale_max_exact;
  d["nonfinite_mismatches"] = m.scale_nonfinite_mismatches;
  d["zero_groups"] = m.zero_groups;
  d["over_budget"] = m.scales_over_budget;
  d["budget"] = budget_of(max_scale_ulp);
  d["layout"] = std::string(info(s.scale_layout).name);
  d["padding_nonzero"] = padding_nonzero;
  d["pass"] = m.scales_pass() && padding_nonzero == 0;
  return d;
}

py::dict recipe_dict(const QuantRecipeSummary& rm, const Recipe& recipe, const ProblemArrays& in, double max_recipe_ulp) {
  py::dict d;
  d["name"] = recipe.name;
  d["metric"] = "quanta of the format at the recipe's value f32(y * f32(1/s)) (clamped to its range), y the recipe's in x's dtype";
  d["elements"] = rm.elements;
  d["max_ulp"] = rm.max_quanta;
  d["max_ulp_index"] = rm.max_index >= 0 ? py::object(unravel(rm.max_index, in.shape)) : py::object(py::none());
  d["matching"] = rm.matching_fraction();
  d["nonfinite_mismatches"] = rm.nonfinite_mismatches;
  d["scales_differ"] = rm.scales_differ;
  d["budget"] = max_recipe_ulp;
  d["pass"] = rm.pass(max_recipe_ulp);
  return d;
}

py::dict consistency_dict(const ConsistencySummary& cm, bool vllm, const ProblemArrays& in) {
  py::list first;
  for (const ConsistencyMismatch& mm : cm.first) {
    py::dict e;
    if (mm.scale) e["scale"] = mm.index, e["amax"] = mm.y;
    else e["element"] = unravel(mm.index, in.shape), e["y"] = mm.y, e["got_code"] = mm.got_code, e["expected_code"] = mm.expected_code;
    e["got"] = mm.got, e["expected"] = mm.expected;
    first.append(e);
  }
  py::dict d;
  d["rule"] = vllm ? "vllm" : "contract";
  d["codes"] = cm.codes, d["codes_differ"] = cm.codes_differ, d["scales"] = cm.scales, d["scales_differ"] = cm.scales_differ;
  d["first"] = first;
  d["pass"] = cm.pass();
  return d;
}

py::dict quant_check_py(py::handle x, py::handle q, py::handle gamma, py::handle beta, const std::string& quant,
                        const std::string& scaling, py::handle scale, py::handle scales, py::object max_q_ulp,
                        py::object max_scale_ulp, int axis, double eps, py::handle dtype, py::object threads,
                        const std::string& op, double gamma_offset, py::handle residual, py::object recipe_name,
                        double max_recipe_ulp, py::handle quant_y, py::handle global_scale, py::handle mx_rule, py::handle scale_format,
                        py::handle scale_layout) {
  const ProblemArrays in = problem_arrays(x, gamma, beta, axis, eps, dtype,
                                          threads_or_default(threads), op, gamma_offset,
                                          residual);
  const QuantSpec s = spec_of(quant, scaling, scale, in, global_scale, mx_rule, scale_format, scale_layout);
  const py::array qa = q_array(q, s, in);
  std::int64_t padding_nonzero = 0;
  const py::object sa = scales_array(scales, s, scaling, in, padding_nonzero);
  QuantBudget budget;
  if (!max_q_ulp.is_none()) budget.max_q_ulp = max_q_ulp.cast<double>();
  if (!max_scale_ulp.is_none()) budget.max_scale_ulp = max_scale_ulp.cast<double>();
  const void* sp = sa.is_none() ? nullptr : py::array(sa).data();
  const auto* qp = static_cast<const std::uint8_t*>(qa.data());
  const QuantRecipe qr = quant_recipe(recipe_name, in.problem);
  const std::optional<Recipe>& recipe = qr.recipe;
  const Problem& recipe_p = qr.problem;
  const std::vector<float> handed = handed_y(quant_y, in);
  QuantSummary m;
  QuantRecipeSummary rm;
  ConsistencySummary cm;
  {
    py::gil_scoped_release release;
    if (!handed.empty())
      cm = measure_consistency(s, recipe ? ConsistencyRule::vllm : ConsistencyRule::contract, handed.data(), in.problem.rows,
                               in.problem.cols, qp, sp);
    m = measure_quantized(in.problem, s, in.x.data(), in.residual_ptr(), in.gamma_ptr(), in.beta_ptr(), qp, sp, in.problem.rows,
                          0, budget, in.problem.threads);
    if (recipe)
      rm = measure_quantized_recipe(recipe_p, s, *recipe, in.x.data(), in.residual_ptr(), in.gamma_ptr(), in.beta_ptr(), qp, sp,
                                    in.problem.rows, 0);
  }
  py::dict out;
  out["op"] = std::string(name(in.problem.op));
  out["dtype"] = std::string(name(in.problem.dtype));
  out["shape"] = py::tuple(py::cast(in.shape));
  out["quant"] = std::string(name(s.format));
  out["scaling"] = describe(s).substr(describe(s).find('/') + 1);
  out["q"] = q_dict(m, in, max_q_ulp);
  out["scales"] = scales_dict(m, s, max_scale_ulp, padding_nonzero);
  out["recipe"] = recipe ? py::object(recipe_dict(rm, *recipe, in, max_recipe_ulp)) : py::object(py::none());
  out["consistency"] = handed.empty() ? py::object(py::none()) : py::object(consistency_dict(cm, recipe.has_value(), in));
  out["pass"] = m.q_pass() && m.scales_pass() && padding_nonzero == 0 && (!recipe || rm.pass(max_recipe_ulp)) && (handed.empty() || cm.pass());
  return out;
}

// The values of q's codes (float64; NaN for the NaN codes, ±inf for E5M2's), or of E8M0 codes.
py::array decode_py(py::handle q, const std::string& quant) {
  const auto f = parse_quant_format(quant);
  if (!f) throw py::value_error("format=" + quant + ": expected " + quant_format_names());
  const py::array a = contiguous(q, "q");
  if (a.itemsize() != 1) throw py::type_error("q holds " + dtype_text(a) + "; expected uint8 (fp8, fp4) or int8");
  // A packed format's bytes unpack: the last dim doubles, element 2i from byte i's low nibble.
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  const int per_byte = is_packed(*f) ? 2 : 1;
  if (per_byte == 2) {
    if (shape.empty()) throw py::value_error("q: packed " + quant + " codes need at least one dimension");
    shape.back() *= 2;
  }
  py::array out(py::dtype("float64"), shape);
  const auto* in = static_cast<const std::uint8_t*>(a.data());
  auto* o = static_cast<double*>(out.mutable_data());
  for (py::ssize_t i = 0; i < a.size() * per_byte; ++i) o[i] = decode(*f, load_code(*f, in, i));
  return out;
}

py::array decode_e8m0_py(py::handle codes) {
  const py::array a = contiguous(codes, "codes");
  if (!a.dtype().equal(py::dtype("uint8"))) throw py::type_error("E8M0 codes are uint8, not " + dtype_text(a));
  py::array out(py::dtype("float64"), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  const auto* in = static_cast<const std::uint8_t*>(a.data());
  auto* o = static_cast<double*>(out.mutable_data());
  for (py::ssize_t i = 0; i < a.size(); ++i) o[i] = decode_e8m0(in[i]);
  return out;
}

}  // namespace

void bind_quant(py::module_& m) {
  using namespace py::literals;
  m.def("quant_reference", &quant_reference_py, "x"_a, "gamma"_a = py::none(), "beta"_a = py::none(), py::kw_only(),
        "quant"_a, "scaling"_a = "tensor", "scale"_a = py::none(), "axis"_a = -1, "eps"_a = 1e-5, "dtype"_a = py::none(),
        "threads"_a = py::none(), "op"_a = "layernorm", "gamma_offset"_a = 0.0, "residual"_a = py::none(),
        "global_scale"_a = py::none(), "mx_rule"_a = py::none(), "scale_format"_a = py::none(),
        "scale_layout"_a = py::none());
  m.def("quant_run", &quant_run_py, "name"_a, "x"_a, "gamma"_a = py::none(), "beta"_a = py::none(), py::kw_only(),
        "quant"_a, "scaling"_a = "tensor", "scale"_a = py::none(), "axis"_a = -1, "eps"_a = 1e-5, "dtype"_a = py::none(),
        "threads"_a = 1, "op"_a = "layernorm", "gamma_offset"_a = 0.0, "residual"_a = py::none(), "global_scale"_a = py::none(), "mx_rule"_a = py::none(), "scale_format"_a = py::none(),
        "scale_layout"_a = py::none());
  m.def("quant_check", &quant_check_py, "x"_a, "q"_a, "gamma"_a = py::none(), "beta"_a = py::none(), py::kw_only(),
        "quant"_a, "scaling"_a = "tensor", "scale"_a = py::none(), "scales"_a = py::none(), "max_q_ulp"_a = py::none(),
        "max_scale_ulp"_a = py::none(), "axis"_a = -1, "eps"_a = 1e-5, "dtype"_a = py::none(), "threads"_a = py::none(),
        "op"_a = "layernorm", "gamma_offset"_a = 0.0, "residual"_a = py::none(), "recipe"_a = py::none(),
        "max_recipe_ulp"_a = 0.5, "quant_y"_a = py::none(), "global_scale"_a = py::none(), "mx_rule"_a = py::none(), "scale_format"_a = py::none(),
        "scale_layout"_a = py::none());
  // The part tables' names (lnorm/quant.hpp), for callers that iterate the formats and scalings.
  py::list formats, scalings;
  for (const FormatInfo& f : kFormatTable) formats.append(std::string(f.name));
  for (const ScalingInfo& s : kScalingTable) scalings.append(std::string(s.syntax));
  m.attr("QUANT_FORMATS") = py::tuple(formats);
  m.attr("SCALINGS") = py::tuple(scalings);
  m.def("decode", &decode_py, "q"_a, "format"_a);
  m.def("decode_e8m0", &decode_e8m0_py, "codes"_a);
}

}  // namespace lnorm::python
