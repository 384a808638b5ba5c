// NumPy arrays <-> lnorm problems (bindings.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

#include "bindings.hpp"
#include "lnorm/format.hpp"

namespace lnorm::python {

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::f32: return py::dtype("float32");
    case DType::f64: return py::dtype("float64");
    case DType::f16: return py::dtype("float16");
    case DType::bf16: return py::dtype("uint16");
  }
  throw py::value_error("unknown dtype");
}

std::string dtype_text(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::vector<std::int64_t> shape_of(const py::array& a) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(a.ndim()));
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s[static_cast<std::size_t>(i)] = a.shape(i);
  return s;
}

py::array contiguous(py::handle a, const std::string& what) {
  if (!py::isinstance<py::array>(a)) {
    throw py::type_error(what + ": expected a NumPy array (or a CPU torch tensor), got " +
                         py::str(py::type::handle_of(a).attr("__name__")).cast<std::string>());
  }
  py::array arr = py::reinterpret_borrow<py::array>(a);
  const py::module_ np = py::module_::import("numpy");
  if (!arr.dtype().attr("isnative").cast<bool>()) arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
  if (!(arr.flags() & py::array::c_style)) arr = np.attr("ascontiguousarray")(arr);
  return arr;
}

bool holds(const py::array& a, DType d) {
  return a.dtype().attr("__eq__")(numpy_dtype(d)).cast<bool>() && a.dtype().attr("isnative").cast<bool>();
}

DType resolve_dtype(const py::array& x, py::handle dtype_arg) {
  if (!dtype_arg.is_none()) {
    if (!py::isinstance<py::str>(dtype_arg)) throw py::type_error("dtype: expected 'f32', 'f64', 'f16', 'bf16' or None");
    const std::string s = dtype_arg.cast<std::string>();
    const std::optional<DType> d = parse_dtype(s);
    if (!d) throw py::value_error("dtype='" + s + "': expected 'f32', 'f64', 'f16' or 'bf16'");
    if (!holds(x, *d)) {
      throw py::type_error("x holds " + dtype_text(x) + " but dtype='" + s + "' needs " +
                           py::str(numpy_dtype(*d)).cast<std::string>() +
                           (*d == DType::bf16 ? " (bf16 bit patterns; a torch bf16 tensor: t.view(torch.int16).numpy().view(numpy.uint16))" : ""));
    }
    return *d;
  }
  for (DType d : {DType::f32, DType::f64, DType::f16}) {
    if (holds(x, d)) return d;
  }
  if (holds(x, DType::bf16)) throw py::type_error("x holds uint16; pass dtype='bf16' if these are bfloat16 bit patterns");
  throw py::type_error("x holds " + dtype_text(x) + "; lnorm takes float32, float64, float16, or uint16 with dtype='bf16'");
}

const void* ProblemArrays::gamma_ptr() const { return gamma.is_none() ? nullptr : py::array(gamma).data(); }
const void* ProblemArrays::beta_ptr() const { return beta.is_none() ? nullptr : py::array(beta).data(); }
const void* ProblemArrays::residual_ptr() const { return residual.is_none() ? nullptr : py::array(residual).data(); }

std::vector<std::int64_t> ProblemArrays::stats_shape() const {
  std::vector<std::int64_t> s(shape.begin(), shape.begin() + axis);
  s.resize(shape.size(), 1);
  return s;
}

namespace {

// gamma/beta: x's dtype, or float32 beside float16/bf16 x (the parameters' storage, Problem::param_dtype).
py::object affine(py::handle a, const char* what, const ProblemArrays& in, std::optional<DType>& param_dtype) {
  if (a.is_none()) return py::none();
  py::array arr = contiguous(a, what);
  const DType d = in.problem.dtype;
  const bool sixteen = d == DType::f16 || d == DType::bf16;
  DType held;
  if (holds(arr, d)) held = d;
  else if (sixteen && holds(arr, DType::f32)) held = DType::f32;
  else
    throw py::type_error(std::string(what) + " holds " + dtype_text(arr) + " but x holds " + dtype_text(in.x) +
                         (sixteen ? " (gamma/beta are x's dtype, or float32 beside 16-bit x)" : ""));
  if (param_dtype && *param_dtype != held)
    throw py::type_error(std::string(what) + " holds " + dtype_text(arr) + " but gamma holds " +
                         py::str(numpy_dtype(*param_dtype)).cast<std::string>() + ": gamma and beta share one dtype");
  param_dtype = held;
  const std::vector<std::int64_t> s = shape_of(arr), row(in.shape.begin() + in.axis, in.shape.end());
  if (s != row && !(s.size() == 1 && s[0] == in.problem.cols)) {
    throw py::value_error(std::string(what) + " has shape " + shape_text(s) + " but the normalized dims of x (axis " +
                          std::to_string(in.axis) + " on) are " + shape_text(row));
  }
  return arr;
}

}  // namespace

int threads_or_default(py::handle threads) {
  return threads.is_none() ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) : threads.cast<int>();
}

ProblemArrays problem_arrays(py::handle x, py::handle gamma, py::handle beta, int axis, double eps, py::handle dtype,
                             int threads, const std::string& op_name, double gamma_offset, py::handle residual) {
  ProblemArrays in;
  in.x = contiguous(x, "x");
  const DType d = resolve_dtype(in.x, dtype);
  in.shape = shape_of(in.x);
  const int rank = static_cast<int>(in.shape.size());
  if (rank == 0) throw py::value_error("x is a 0-d scalar; LayerNorm needs at least one dimension");
  if (axis < -rank || axis >= rank) {
    throw py::value_error("axis " + std::to_string(axis) + " is out of range for x of rank " + std::to_string(rank) +
                          " (valid: " + std::to_string(-rank) + " .. " + std::to_string(rank - 1) + ")");
  }
  in.axis = axis < 0 ? axis + rank : axis;
  if (!std::isfinite(eps) || eps < 0) throw py::value_error("eps must be finite and >= 0 (got " + std::to_string(eps) + ")");
  if (threads < 1) throw py::value_error("threads must be >= 1");
  std::int64_t rows = 1, cols = 1;
  for (int i = 0; i < rank; ++i) (i < in.axis ? rows : cols) *= in.shape[static_cast<std::size_t>(i)];
  if (cols == 0) throw py::value_error("x's normalized dims (axis " + std::to_string(in.axis) + " on) have zero width");
  std::optional<Op> op = parse_op(op_name);
  if (!op || (*op).direction == Direction::bwd)
    throw py::value_error("op='" + op_name + "': expected 'layernorm', 'rmsnorm', 'add_layernorm' or 'add_rmsnorm' "
                          "(the backward: lnorm.reference_backward, lnorm.check_backward)");
  if ((*op).prologue == Prologue::residual_add && residual.is_none())
    throw py::value_error("op='" + op_name + "' is Add & Norm: give residual= (h = x + residual, then the norm of h)");
  if (!residual.is_none()) op = Op{.norm = (*op).norm, .prologue = Prologue::residual_add};
  if (!std::isfinite(gamma_offset)) throw py::value_error("gamma_offset must be finite");
  if (gamma_offset != 0 && gamma.is_none())
    throw py::value_error("gamma_offset needs gamma (y uses gamma_offset + gamma; without gamma the weight is 1)");
  in.problem = with_op(make_problem(rows, cols, d, eps, !gamma.is_none(), !beta.is_none(), threads), *op);
  std::optional<DType> param_dtype;
  in.gamma = affine(gamma, "gamma", in, param_dtype);
  in.beta = affine(beta, "beta", in, param_dtype);
  in.problem = set_params(in.problem, param_dtype.value_or(d), gamma_offset);
  if (!residual.is_none()) {
    py::array r = contiguous(residual, "residual");
    const bool sixteen = d == DType::f16 || d == DType::bf16;
    DType held;
    if (holds(r, d)) held = d;
    else if (sixteen && holds(r, DType::f32)) held = DType::f32;
    else
      throw py::type_error("residual holds " + dtype_text(r) + " but x holds " + dtype_text(in.x) +
                           (sixteen ? " (the residual is x's dtype, or float32 beside 16-bit x: residual_in_fp32)" : ""));
    if (shape_of(r) != in.shape)
      throw py::value_error("residual has shape " + shape_text(shape_of(r)) + " but x has shape " + shape_text(in.shape));
    in.residual = r;
    in.problem = set_residual(in.problem, held);
  }
  return in;
}

py::array h_array(py::handle a, const ProblemArrays& in) {
  py::array arr = contiguous(a, "h");
  if (!holds(arr, in.problem.residual_dtype))
    throw py::type_error("h holds " + dtype_text(arr) + " but the residual holds " + dtype_text(py::array(in.residual)) +
                         " (h is stored in the residual's dtype)");
  if (shape_of(arr) != in.shape)
    throw py::value_error("h has shape " + shape_text(shape_of(arr)) + " but x has shape " + shape_text(in.shape));
  return arr;
}

py::array stats_array(py::handle a, const ProblemArrays& in, const std::string& what) {
  py::array arr = contiguous(a, what);
  const DType sd = stats_dtype(in.problem.dtype);
  if (!holds(arr, sd)) {
    throw py::type_error(what + " holds " + dtype_text(arr) + " but the statistics of " +
                         std::string(name(in.problem.dtype)) + " data are " + py::str(numpy_dtype(sd)).cast<std::string>());
  }
  const std::vector<std::int64_t> s = shape_of(arr), lead(in.shape.begin(), in.shape.begin() + in.axis);
  if (s != in.stats_shape() && s != lead && s != std::vector<std::int64_t>{in.problem.rows}) {
    throw py::value_error(what + " has shape " + shape_text(s) + "; expected " + shape_text(in.stats_shape()) +
                          " (one value per row)");
  }
  return arr;
}

py::array encode(DType d, const std::vector<double>& values, const std::vector<std::int64_t>& shape) {
  py::array out(numpy_dtype(d), std::vector<py::ssize_t>(shape.begin(), shape.end()));
  const Format f = format_of(d);
  auto* p = static_cast<std::byte*>(out.mutable_data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t b = double_to_bits(f, values[i]);
    std::memcpy(p + i * size_of(d), &b, size_of(d));  // little-endian: the low bytes
  }
  return out;
}

void add_error_fields(py::dict& d, const ErrorSummary& s, const std::vector<std::int64_t>& shape, bool gated) {
  if (s.worst_excess_index >= 0) {
    py::dict w;
    w["index"] = unravel(s.worst_excess_index, shape);
    w["error"] = s.worst_excess_error;
    w["allowed"] = s.worst_excess_allowed;
    w["kappa"] = s.worst_excess_kappa;
    w["got"] = s.worst_excess_got;
    w["exact"] = s.worst_excess_exact;
    d["worst_over_budget"] = w;
  } else {
    d["worst_over_budget"] = py::none();
  }
  py::dict b;
  b["metric"] = "mean signed error in scaled ulps (positive: above the exact answer)";
  b["mean_signed_error"] = s.mean_signed_error();
  b["mean_allowed"] = s.mean_allowed();
  b["mean_kappa_allowed"] = s.mean_kappa_allowed();
  b["elements"] = s.signed_elements;
  b["units"] = s.units();
  b["bound"] = s.units() > 0 ? py::object(py::float_(s.bias_bound())) : py::object(py::none());
  b["gated"] = gated && s.units() > 0;
  b["pass"] = !(gated && s.units() > 0) || s.bias_within();
  d["bias"] = b;
}

py::tuple unravel(std::int64_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    c[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  py::tuple t(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) t[i] = c[i];
  return t;
}

}  // namespace lnorm::python
