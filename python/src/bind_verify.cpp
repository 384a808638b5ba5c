// lnorm.verify with a Python callable as the kernel, and lnorm.cases: the suite's input classes.
//
// KernelInfo::run is a plain function pointer, so the callable sits in one process-wide slot while a
// verify runs (verify_mutex: one lnorm.verify at a time; a callable that calls lnorm.verify itself is
// refused). The property suite runs with the GIL released; the trampoline takes it back to call the
// callable on copies of the case's arrays, and copies the answer into the harness's guarded buffers.
// Whatever goes wrong in the callable (raises, wrong shape or dtype) is thrown as a C++ exception,
// which the suite records as that property's failure (verify.cpp) and the run goes on.
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>

#include "bindings.hpp"
#include "generators.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/reference.hpp"
#include "lnorm/verify.hpp"
#include "lnorm/verify_report.hpp"

namespace lnorm::python {
namespace {

struct Slot {
  py::object fn;
  bool interrupted = false;  // KeyboardInterrupt in the callable: stop calling it, re-raise at the end
  bool takes_offset = false;  // fn(x, gamma, beta, eps, gamma_offset=C): the params property's offsets
  bool f32_params = false;    // fn takes f32 gamma/beta beside f16/bf16 x
  bool takes_stats = false;   // backward: fn(..., mean=, rstd=) is given the forward's saved statistics
};
std::mutex verify_mutex;
Slot* slot = nullptr;
thread_local bool in_verify = false;

// "ValueError: message" on one line (error_already_set::what() may append a traceback).
std::string one_line(const py::error_already_set& e) {
  std::string type = py::str(e.type().attr("__name__")).cast<std::string>();
  std::string msg = py::str(e.value()).cast<std::string>();
  for (char& c : msg) c = c == '\n' ? ' ' : c;
  return msg.empty() ? type : type + ": " + msg;
}

py::array copy_in(DType d, const void* p, std::vector<py::ssize_t> shape) {
  py::array a(numpy_dtype(d), shape);
  std::memcpy(a.mutable_data(), p, static_cast<std::size_t>(a.nbytes()));
  return a;
}

void copy_stat(py::handle h, const char* what, DType sd, std::int64_t rows, void* dst) {
  if (!py::isinstance<py::array>(h)) throw std::runtime_error(std::string("fn returned ") + what + " that is not an array");
  const py::array a = contiguous(h, what);
  if (!holds(a, sd)) {
    throw std::runtime_error(std::string("fn returned ") + what + " of dtype " + dtype_text(a) + "; expected " +
                             py::str(numpy_dtype(sd)).cast<std::string>());
  }
  if (a.size() != rows) {
    throw std::runtime_error(std::string("fn returned ") + what + " with " + std::to_string(a.size()) + " values; expected " +
                             std::to_string(rows) + " (one per row)");
  }
  std::memcpy(dst, a.data(), static_cast<std::size_t>(a.nbytes()));
}

// Parameter conventions a Python kernel is offered only when it says it takes them.
std::optional<std::string> python_why_not(const Problem& p) {
  if (p.gamma_offset != 0 && !slot->takes_offset)
    return "fn takes no gamma_offset keyword (fn(x, gamma, beta, eps, gamma_offset=0.0) is offered the offset)";
  if (p.param_dtype != p.dtype && !slot->f32_params)
    return "fn is not offered f32 gamma/beta beside 16-bit x (lnorm.verify(..., f32_params=True) offers them)";
  return std::nullopt;
}

// Runs body (which calls the slot's fn) with the GIL held; what fn raises becomes one C++ exception with one
// line of text, which the suite records as the property's failure. KeyboardInterrupt also stops the run.
template <class Body>
void call_python(Body&& body) {
  py::gil_scoped_acquire gil;
  if (slot->interrupted) throw std::runtime_error("interrupted (KeyboardInterrupt)");
  std::string error;
  try {
    body();
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_KeyboardInterrupt)) slot->interrupted = true;
    error = "fn raised " + one_line(e);
  } catch (const py::builtin_exception& e) {
    error = e.what();
  }
  if (!error.empty()) throw std::runtime_error(error);
}

// The kernel the suite calls: fn(x, gamma, beta, eps[, gamma_offset=C]) -> y, or (y, mean, rstd) for
// LayerNorm, (y, rstd) for RMSNorm.
void python_kernel(const Problem& p, const Tensors& t) {
  call_python([&] {
    const DType d = p.dtype, sd = stats_dtype(d), pd = p.param_dtype;
    const bool has_mean = p.op.norm == Norm::layernorm;
    const py::object g = t.gamma ? py::object(copy_in(pd, t.gamma, {p.cols})) : py::object(py::none());
    const py::object b = t.beta ? py::object(copy_in(pd, t.beta, {p.cols})) : py::object(py::none());
    const py::object x = copy_in(d, t.x, {p.rows, p.cols});
    using namespace pybind11::literals;
    const py::object r = slot->takes_offset ? slot->fn(x, g, b, p.eps, "gamma_offset"_a = p.gamma_offset)
                                            : slot->fn(x, g, b, p.eps);
    py::object y = r, mean = py::none(), rstd = py::none();
    if (py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) {
      const py::sequence s = py::reinterpret_borrow<py::sequence>(r);
      const std::size_t want = has_mean ? 3 : 2;
      if (s.size() != want) {
        throw std::runtime_error("fn returned a sequence of " + std::to_string(s.size()) + "; expected y or " +
                                 (has_mean ? "(y, mean, rstd)" : "(y, rstd) for rmsnorm"));
      }
      y = s[0];
      if (has_mean) mean = s[1], rstd = s[2];
      else rstd = s[1];
    }
    if (!py::isinstance<py::array>(y)) {
      throw std::runtime_error("fn returned y of type " + py::str(py::type::handle_of(y).attr("__name__")).cast<std::string>() +
                               "; expected a NumPy array");
    }
    const py::array ya = contiguous(y, "y");
    if (!holds(ya, d)) {
      throw std::runtime_error("fn returned y of dtype " + dtype_text(ya) + "; expected " +
                               py::str(numpy_dtype(d)).cast<std::string>() + " for " + std::string(name(d)));
    }
    if (shape_of(ya) != std::vector<std::int64_t>{p.rows, p.cols}) {
      throw std::runtime_error("fn returned y of shape " + shape_text(shape_of(ya)) + "; expected " +
                               shape_text({p.rows, p.cols}));
    }
    std::memcpy(t.y, ya.data(), static_cast<std::size_t>(ya.nbytes()));
    if (!mean.is_none() || !rstd.is_none()) {
      if (has_mean) copy_stat(mean, "mean", sd, p.rows, t.mean);
      copy_stat(rstd, "rstd", sd, p.rows, t.rstd);
    } else {
      // y only: the statistics are not the callable's, so they come from the exact reference (they
      // then pass their budgets trivially; only y is judged). y itself is left as fn returned it.
      std::vector<std::byte> scratch(static_cast<std::size_t>(p.elements()) * size_of(d));
      Problem one = p;
      one.threads = 1;
      Tensors stats_only = t;
      stats_only.y = scratch.data();
      reference(one, stats_only);
    }
  });
}

// A gradient fn returned, copied into dst: an array of dtype d, of shape rows x cols (dx), or of cols values in any
// shape (dgamma/dbeta, shape {cols}).
void copy_gradient(py::handle h, const char* what, DType d, const std::vector<std::int64_t>& shape, void* dst) {
  if (h.is_none()) throw std::runtime_error(std::string("fn returned None for ") + what + ", which was asked for");
  if (!py::isinstance<py::array>(h)) {
    throw std::runtime_error(std::string("fn returned ") + what + " of type " +
                             py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>() + "; expected a NumPy array");
  }
  const py::array a = contiguous(h, what);
  if (!holds(a, d)) {
    throw std::runtime_error(std::string("fn returned ") + what + " of dtype " + dtype_text(a) + "; expected " +
                             py::str(numpy_dtype(d)).cast<std::string>() + " for " + std::string(name(d)));
  }
  std::int64_t count = 1;
  for (std::int64_t v : shape) count *= v;
  const bool ok = shape.size() == 1 ? a.size() == count : shape_of(a) == shape;
  if (!ok) {
    throw std::runtime_error(std::string("fn returned ") + what + " of shape " + shape_text(shape_of(a)) + "; expected " +
                             shape_text(shape));
  }
  std::memcpy(dst, a.data(), static_cast<std::size_t>(a.nbytes()));
}

// The backward kernel the suite calls: fn(x, dy, gamma, beta, eps[, gamma_offset=C][, mean=, rstd=]) ->
// (dx, dgamma, dbeta). beta is zeros when dbeta is asked for (its values enter no gradient), else None;
// dgamma/dbeta not asked for (None gamma/beta) may come back as anything and are ignored.
void python_backward_kernel(const Problem& p, const Tensors& t) {
  call_python([&] {
    const DType d = p.dtype, sd = stats_dtype(d), pd = p.param_dtype;
    const py::object x = copy_in(d, t.x, {p.rows, p.cols}), dy = copy_in(d, t.dy, {p.rows, p.cols});
    const py::object g = p.has_gamma ? py::object(copy_in(pd, t.gamma, {p.cols})) : py::object(py::none());
    py::object b = py::none();
    if (p.has_beta) {
      py::array zeros(numpy_dtype(pd), std::vector<py::ssize_t>{p.cols});
      std::memset(zeros.mutable_data(), 0, static_cast<std::size_t>(zeros.nbytes()));
      b = zeros;
    }
    py::dict kw;
    if (slot->takes_offset) kw["gamma_offset"] = p.gamma_offset;
    if (slot->takes_stats) {
      kw["mean"] = t.saved_mean ? py::object(copy_in(sd, t.saved_mean, {p.rows})) : py::object(py::none());
      kw["rstd"] = copy_in(sd, t.saved_rstd, {p.rows});
    }
    const py::object r = slot->fn(x, dy, g, b, p.eps, **kw);
    if (!(py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) || py::len(r) != 3) {
      throw std::runtime_error("fn returned " + py::str(py::type::handle_of(r).attr("__name__")).cast<std::string>() +
                               (py::isinstance<py::sequence>(r) ? " of " + std::to_string(py::len(r)) : std::string()) +
                               "; expected (dx, dgamma, dbeta), None for a gradient not asked for");
    }
    const py::sequence s = py::reinterpret_borrow<py::sequence>(r);
    copy_gradient(s[0], "dx", d, {p.rows, p.cols}, t.dx);
    if (t.dgamma) copy_gradient(s[1], "dgamma", pd, {p.cols}, t.dgamma);
    if (t.dbeta) copy_gradient(s[2], "dbeta", pd, {p.cols}, t.dbeta);
  });
}

py::dict case_dict(const verify::Case& c) {
  py::dict d;
  const std::vector<std::int64_t> row(c.spec.shape.begin() + c.spec.axis, c.spec.shape.end());
  d["x"] = encode(c.spec.dtype, c.x, c.spec.shape);
  d["gamma"] = c.gamma.empty() ? py::object(py::none()) : py::object(encode(c.spec.params(), c.gamma, row));
  d["beta"] = c.beta.empty() ? py::object(py::none()) : py::object(encode(c.spec.params(), c.beta, row));
  d["op"] = std::string(name(c.spec.op));
  d["gamma_offset"] = c.spec.gamma_offset;
  d["eps"] = c.spec.eps;
  d["axis"] = c.spec.axis;
  d["dtype"] = std::string(name(c.spec.dtype));
  d["description"] = c.spec.describe();
  if (!c.dy.empty()) d["dy"] = encode(c.spec.dtype, c.dy, c.spec.shape);
  return d;
}

std::string quoted_list(const std::vector<std::string>& v) {
  std::string s = "(";
  for (const std::string& e : v) s += "\"" + e + "\", ";
  return s + ")";
}

py::dict verify_py(py::object fn, const std::string& kernel_name, const std::vector<std::string>& dtypes,
                   const std::vector<std::string>& properties, int cases, bool quick, std::uint64_t seed,
                   py::object budgets_toml, const std::string& op_name, bool takes_offset, bool f32_params,
                   bool takes_stats) {
  using namespace lnorm::verify;
  const std::optional<Op> op = parse_op(op_name);
  if (op && (*op).prologue == Prologue::residual_add)  // a callable for Add & Norm would take the residual: not yet
    throw py::value_error("op='" + op_name + "': lnorm.verify takes 'layernorm' or 'rmsnorm' (Add & Norm: `lnorm verify "
                          "--op " + op_name + "` for a plugin, lnorm.check(..., residual=, h=) for outputs)");
  if (!op) throw py::value_error("op='" + op_name + "': expected 'layernorm', 'rmsnorm', 'layernorm_bwd' or 'rmsnorm_bwd'");
  if (!PyCallable_Check(fn.ptr())) {
    throw py::type_error((*op).direction == Direction::bwd ? "fn must be callable: fn(x, dy, gamma, beta, eps) -> (dx, dgamma, dbeta)"
                                       : "fn must be callable: fn(x, gamma, beta, eps) -> y or (y, mean, rstd)");
  }
  if (in_verify) throw std::runtime_error("lnorm.verify called from inside the callable it is verifying");
  if (cases < 0) throw py::value_error("cases must be >= 1");
  std::vector<DType> ds;
  for (const std::string& s : dtypes) {
    const auto d = parse_dtype(s);
    if (!d) throw py::value_error("dtypes: '" + s + "' is not one of 'f32', 'f64', 'f16', 'bf16'");
    ds.push_back(*d);
  }
  if (ds.empty()) throw py::value_error("dtypes: give at least one");
  Settings settings;
  settings.cases = cases;
  settings.seed = seed;
  settings.quick = quick;
  for (const std::string& s : properties) {
    const auto p = parse_property(s);
    if (!p) {
      std::string have;
      for (Property q : kAllProperties) have += (have.empty() ? "" : ", ") + std::string(name(q));
      throw py::value_error("properties: '" + s + "' is not a property (have: " + have + ")");
    }
    if (!applies(*p, *op)) throw py::value_error("properties: '" + s + "' is not a property of " + op_name);
    settings.properties.push_back(*p);
  }
  Budgets budgets;
  std::string lookup = "default";
  try {
    if (budgets_toml.is_none()) {
      budgets = Budgets::builtin();
    } else {
      budgets = Budgets::parse(budgets_toml.cast<std::string>(), "budget");
      lookup = kernel_name;
    }
  } catch (const BudgetError& e) {
    throw py::value_error(e.what());
  }
  std::vector<KernelBudget> per_dtype;
  for (DType d : ds) {
    try {
      per_dtype.push_back(budgets.for_kernel(*op, lookup, d));
    } catch (const BudgetError& e) {
      throw py::value_error(e.what());
    }
  }

  const std::string kname = kernel_name;
  // fn is the whole op as given (fuses_add), its one norm, direction and prologue.
  const bool bwd = op->direction == Direction::bwd;
  const Takes takes{.dtypes = {DType::f32, DType::f64, DType::f16, DType::bf16},
                    .forward_norms = bwd ? NormSet{} : NormSet{op->norm},
                    .backward_norms = bwd ? NormSet{op->norm} : NormSet{},
                    .prologues = PrologueSet{op->prologue},
                    .fuses_add = true,
                    .f32_residual = true};
  KernelInfo k{kname, "a Python callable", takes, &python_kernel, &python_backward_kernel, nullptr, &python_why_not};
  Slot s{fn, false, takes_offset, f32_params, takes_stats};
  std::vector<Outcome> outcomes;
  double seconds = 0;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(verify_mutex);
    slot = &s;
    in_verify = true;
    const auto start = std::chrono::steady_clock::now();
    try {
      for (std::size_t i = 0; i < ds.size() && !s.interrupted; ++i) {
        for (Outcome& o : verify_kernel(k, *op, ds[i], per_dtype[i], settings)) outcomes.push_back(std::move(o));
      }
    } catch (...) {
      slot = nullptr;
      in_verify = false;
      throw;
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slot = nullptr;
    in_verify = false;
  }
  if (s.interrupted) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  // As `lnorm verify`: a selection with no cell is refused, not a truthy result that verified nothing.
  if (outcomes.empty())
    throw py::value_error("nothing to verify: no chosen property runs on a callable for these dtypes (`quantized` needs a "
                          "kernel that writes quantized outputs; a callable returns y)");
  // The reproduction line is a Python call.
  for (Outcome& o : outcomes) {
    std::ostringstream r;
    const Op norm = plain((*op).norm);
    r << "lnorm.verify(" << kname << (norm == Op::layernorm ? "" : ", op=\"" + std::string(name(norm)) + "\"")
      << ((*op).direction == Direction::bwd ? ", dir=\"bwd\"" : "") << ", dtypes="
      << quoted_list({std::string(name(o.dtype))})
      << ", properties=" << quoted_list({std::string(name(o.property))}) << ", seed=" << seed
      << ", cases=" << settings.default_cases() << ")";
    o.reproduce = r.str();
  }
  RunInfo info;
  info.seed = seed;
  info.quick = quick;
  info.cases = settings.default_cases();
  info.budgets_source = budgets.source();
  info.seconds = seconds;
  py::list out;
  for (const Outcome& o : outcomes) {
    py::dict d;
    d["kernel"] = o.kernel;
    d["op"] = std::string(name(o.op));
    d["dtype"] = std::string(name(o.dtype));
    d["property"] = std::string(name(o.property));
    d["status"] = std::string(name(o.status));
    d["failed"] = is_failure(o.status);
    d["cases"] = o.cases;
    d["seconds"] = o.seconds;
    d["seed"] = o.seed;
    d["worst"] = o.worst;
    d["classes"] = o.classes;
    d["correctly_rounded"] = o.correctly_rounded < 0 ? py::object(py::none()) : py::object(py::float_(o.correctly_rounded));
    d["message"] = o.message;
    d["counterexample"] = o.counterexample;
    d["reproduce"] = o.reproduce;
    d["expected_reason"] = o.expected_reason;
    d["case"] = o.failing_case ? py::object(case_dict(*o.failing_case)) : py::object(py::none());
    out.append(d);
  }
  py::dict result;
  result["outcomes"] = out;
  result["table"] = table_text(outcomes, info);
  result["seconds"] = seconds;
  result["budgets"] = budgets.source();
  return result;
}

template <class E, int N>
E parse_name(const std::string& s, const char* what) {
  std::string have;
  for (int i = 0; i < N; ++i) {
    if (verify::name(static_cast<E>(i)) == s) return static_cast<E>(i);
    have += (have.empty() ? "" : ", ") + std::string(verify::name(static_cast<E>(i)));
  }
  throw py::value_error(std::string(what) + ": '" + s + "' is not one of " + have);
}

py::dict case_py(const std::string& dtype, const std::vector<std::string>& classes, const std::vector<std::int64_t>& shape,
                 int axis, double eps, const std::string& gamma, const std::string& beta, double log10_kappa,
                 std::uint64_t seed, const std::string& op_name) {
  using namespace lnorm::verify;
  const std::optional<Op> op = parse_op(op_name);
  if (!op || (*op).prologue == Prologue::residual_add || (*op).direction == Direction::bwd)  // Add & Norm: the CLI has it (--residual); the Python module does not yet
    throw py::value_error("op='" + op_name + "': expected 'layernorm' or 'rmsnorm'");
  const auto d = parse_dtype(dtype);
  if (!d) throw py::value_error("dtype='" + dtype + "': expected 'f32', 'f64', 'f16' or 'bf16'");
  if (classes.empty()) throw py::value_error("classes: give at least one row class");
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) throw py::value_error("shape: at least one dimension");
  if (axis < -rank || axis >= rank) throw py::value_error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  std::int64_t elements = 1;
  for (std::int64_t v : shape) {
    if (v < 1) throw py::value_error("shape: every dimension must be >= 1");
    elements *= v;
    if (elements > (std::int64_t{1} << 28)) throw py::value_error("shape: more than 2^28 elements");
  }
  if (!(eps >= 0) || !std::isfinite(eps)) throw py::value_error("eps must be finite and >= 0");
  CaseSpec spec;
  spec.dtype = *d;
  for (const std::string& c : classes) spec.row_classes.push_back(parse_name<RowClass, kRowClassCount>(c, "classes"));
  spec.shape = shape;
  spec.axis = axis < 0 ? axis + rank : axis;
  spec.eps = make_problem(1, 1, *d, eps, false, false).eps;  // the eps the kernels receive
  spec.gamma = parse_name<Affine, 4>(gamma, "gamma");
  spec.beta = parse_name<Affine, 4>(beta, "beta");
  spec.log10_kappa = log10_kappa;
  spec.data_seed = seed;
  spec.op = *op;
  Case c;
  {
    py::gil_scoped_release release;
    c = materialize(spec);
  }
  return case_dict(c);
}

py::dict budget_dict(const verify::KernelBudget& b) {
  py::dict d;
  if (b.op.direction == Direction::bwd) {
    d["dx"] = py::dict(py::arg("a") = b.dx.a, py::arg("b") = b.dx.b, py::arg("reason") = b.dx_reason);
    d["dgamma"] = py::dict(py::arg("a") = b.dgamma.a, py::arg("b") = b.dgamma.b, py::arg("reason") = b.dgamma_reason);
    d["dbeta"] = py::dict(py::arg("ulp") = b.dbeta_ulp, py::arg("reason") = b.dbeta_reason);
    py::dict xf;
    for (const auto& [p, why] : b.expected_failures) xf[py::str(std::string(verify::name(p)))] = why;
    d["expected_failures"] = xf;
    return d;
  }
  d["y"] = py::dict(py::arg("a") = b.y.a, py::arg("b") = b.y.b, py::arg("reason") = b.y_reason);
  if (b.op.norm == Norm::layernorm) d["mean"] = py::dict(py::arg("ulp") = b.mean_ulp, py::arg("reason") = b.mean_reason);
  d["rstd"] = py::dict(py::arg("ulp") = b.rstd_ulp, py::arg("reason") = b.rstd_reason);
  if (b.op.norm == Norm::layernorm) d["exact_mean"] = py::dict(py::arg("value") = b.exact_mean, py::arg("reason") = b.exact_mean_reason);
  else d["sign_symmetric"] = py::dict(py::arg("value") = b.sign_symmetric, py::arg("reason") = b.sign_symmetric_reason);
  if (!b.correctly_rounded_reason.empty())
    d["correctly_rounded"] = py::dict(py::arg("min") = b.min_correctly_rounded, py::arg("reason") = b.correctly_rounded_reason);
  py::dict xf;
  for (const auto& [p, why] : b.expected_failures) xf[py::str(std::string(verify::name(p)))] = why;
  d["expected_failures"] = xf;
  return d;
}

}  // namespace

void bind_verify(py::module_& m) {
  using namespace py::literals;
  m.def("_verify", &verify_py, "fn"_a, "name"_a, "dtypes"_a, "properties"_a, "cases"_a, "quick"_a, "seed"_a,
        "budgets_toml"_a, "op"_a = "layernorm", "takes_offset"_a = false, "f32_params"_a = false, "takes_stats"_a = false);
  m.def("_case", &case_py, "dtype"_a, "classes"_a, "shape"_a, "axis"_a, "eps"_a, "gamma"_a, "beta"_a,
        "log10_kappa"_a, "seed"_a, "op"_a = "layernorm");
  m.def("_builtin_budget", [](const std::string& kernel, const std::string& dtype, const std::string& op_name) {
    const auto d = parse_dtype(dtype);
    if (!d) throw py::value_error("dtype='" + dtype + "': expected 'f32', 'f64', 'f16' or 'bf16'");
    const auto op = parse_op(op_name);
    if (!op || (*op).prologue == Prologue::residual_add)  // Add & Norm: the CLI has it (--residual); the Python module does not yet
      throw py::value_error("op='" + op_name + "': expected 'layernorm', 'rmsnorm', 'layernorm_bwd' or 'rmsnorm_bwd'");
    try {
      return budget_dict(verify::Budgets::builtin().for_kernel(*op, kernel, *d));
    } catch (const verify::BudgetError& e) {
      throw py::value_error(e.what());
    }
  }, "kernel"_a, "dtype"_a, "op"_a = "layernorm");
  py::list classes, affine;
  for (int i = 0; i < verify::kRowClassCount; ++i) classes.append(std::string(verify::name(static_cast<verify::RowClass>(i))));
  // Every op of lnorm/op.hpp's table with its properties; the four per-op tuples are entries of it.
  py::list ops;
  py::dict properties_of;
  // `quantized` is a capability of lnorm's own kernels (the quantized epilogue): a Python callable writes y, so the
  // property is not among a callable's.
  for (const OpEntry& e : kOpTable) {
    py::list ps;
    for (verify::Property p : verify::properties_for(e.op))
      if (p != verify::Property::quantized) ps.append(std::string(verify::name(p)));
    ops.append(std::string(e.name));
    properties_of[py::str(std::string(e.name))] = py::tuple(ps);
  }
  m.attr("OPS") = py::tuple(ops);
  m.attr("PROPERTIES_OF") = properties_of;
  m.attr("PROPERTIES") = properties_of["layernorm"];
  m.attr("RMSNORM_PROPERTIES") = properties_of["rmsnorm"];
  m.attr("BACKWARD_PROPERTIES") = properties_of["layernorm_bwd"];
  m.attr("RMSNORM_BACKWARD_PROPERTIES") = properties_of["rmsnorm_bwd"];
  for (int i = 0; i < 4; ++i) affine.append(std::string(verify::name(static_cast<verify::Affine>(i))));
  m.attr("ROW_CLASSES") = py::tuple(classes);
  m.attr("AFFINE_KINDS") = py::tuple(affine);
  m.attr("EDGE_WIDTHS") = py::tuple(py::cast(std::vector<std::int64_t>(std::begin(verify::kEdgeWidths), std::end(verify::kEdgeWidths))));
  m.attr("EDGE_EPS") = py::tuple(py::cast(std::vector<double>(std::begin(verify::kEdgeEps), std::end(verify::kEdgeEps))));
}

}  // namespace lnorm::python
