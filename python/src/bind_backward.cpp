// lnorm.reference_backward and lnorm.check_backward: the exact gradients of the norm (lnorm/backward.hpp) and
// the gate of `lnorm check --dir bwd`, on NumPy arrays. The GIL is released while C++ works.
#include <cmath>
#include <cstring>

#include "bindings.hpp"
#include "lnorm/backward.hpp"
#include "lnorm/check.hpp"
#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"

namespace lnorm::python {
namespace {

struct BackwardArrays {
  ProblemArrays in;
  py::array dy;
  std::vector<py::ssize_t> param_shape;  // the normalized dims
};

BackwardArrays backward_arrays(py::handle x, py::handle dy, py::handle gamma, int axis, double eps, py::handle dtype,
                               py::object threads, const std::string& op, double gamma_offset) {
  BackwardArrays b{problem_arrays(x, gamma, py::none(), axis, eps, dtype, threads_or_default(threads),
                                  op, gamma_offset),
                   py::array(), {}};
  if (b.in.problem.op.prologue == Prologue::residual_add) throw py::value_error("op='" + op + "': Add & Norm's backward is not built");
  b.dy = contiguous(dy, "dy");
  if (!holds(b.dy, b.in.problem.dtype)) throw py::type_error("dy holds " + dtype_text(b.dy) + " but x holds " + dtype_text(b.in.x));
  if (shape_of(b.dy) != b.in.shape)
    throw py::value_error("dy has shape " + shape_text(shape_of(b.dy)) + " but x has shape " + shape_text(b.in.shape));
  b.param_shape.assign(b.in.shape.begin() + b.in.axis, b.in.shape.end());
  return b;
}

py::tuple reference_backward_py(py::handle x, py::handle dy, py::handle gamma, int axis, double eps, py::handle dtype,
                                py::object threads, const std::string& op, double gamma_offset) {
  const BackwardArrays b = backward_arrays(x, dy, gamma, axis, eps, dtype, threads, op, gamma_offset);
  const Problem& p = b.in.problem;
  py::array dx(numpy_dtype(p.dtype), std::vector<py::ssize_t>(b.in.shape.begin(), b.in.shape.end()));
  py::array dg(numpy_dtype(p.param_dtype), b.param_shape), db(numpy_dtype(p.param_dtype), b.param_shape);
  {
    py::gil_scoped_release release;
    reference_backward(p, b.in.x.data(), b.in.gamma_ptr(), b.dy.data(), dx.mutable_data(), dg.mutable_data(), db.mutable_data());
  }
  return py::make_tuple(dx, dg, db);
}

py::dict summary(const ErrorSummary& s, double budget, const std::vector<std::int64_t>& shape) {
  py::dict d;
  d["max_ulp"] = s.max_ulp;
  d["max_ulp_nonfinite"] = std::isinf(s.max_ulp);
  d["max_finite_ulp"] = s.max_finite_ulp;
  d["max_ulp_index"] = s.max_ulp_index >= 0 ? py::object(unravel(s.max_ulp_index, shape)) : py::object(py::none());
  d["max_ulp_got"] = s.max_ulp_got;
  d["max_ulp_exact"] = s.max_ulp_exact;
  d["correctly_rounded"] = s.correctly_rounded_fraction();
  d["nonfinite_mismatches"] = s.nonfinite_mismatches;
  d["over_budget"] = s.over_budget;
  d["elements"] = s.elements;
  d["budget"] = budget;
  d["max_ulp_kappa"] = s.max_ulp_kappa;
  add_error_fields(d, s, shape);
  d["pass"] = s.passes();
  return d;
}

py::dict check_backward_py(py::handle x, py::handle dy, py::handle gamma, py::handle dx, py::handle dgamma, py::handle dbeta,
                           int axis, double eps, py::handle dtype, py::object threads, const std::string& op, double gamma_offset,
                           double max_ulp, double max_ulp_per_kappa, py::object max_dx_ulp, py::object max_dgamma_ulp,
                           py::object max_dbeta_ulp) {
  const BackwardArrays b = backward_arrays(x, dy, gamma, axis, eps, dtype, threads, op, gamma_offset);
  const Problem& p = b.in.problem;
  if (dx.is_none() && dgamma.is_none() && dbeta.is_none()) throw py::value_error("give at least one of dx=, dgamma=, dbeta=");
  if (!(max_ulp >= 0) || !(max_ulp_per_kappa >= 0)) throw py::value_error("max_ulp and max_ulp_per_kappa must be >= 0");
  struct Candidate {
    const char* name;
    py::object array;
    double budget;
    DType dtype;
    std::vector<std::int64_t> shape;
  };
  const std::vector<std::int64_t> pshape(b.param_shape.begin(), b.param_shape.end());
  std::vector<Candidate> cands;
  const auto add = [&](const char* nm, py::handle a, py::object own, DType d, const std::vector<std::int64_t>& shape) {
    if (a.is_none()) {
      if (!own.is_none()) throw py::value_error(std::string("max_") + nm + "_ulp: needs " + nm + "= (the candidate it gates)");
      return;
    }
    py::array arr = contiguous(a, nm);
    if (!holds(arr, d))
      throw py::type_error(std::string(nm) + " holds " + dtype_text(arr) + " but the gradient is stored as " +
                           py::str(numpy_dtype(d)).cast<std::string>());
    if (shape_of(arr) != shape)
      throw py::value_error(std::string(nm) + " has shape " + shape_text(shape_of(arr)) + "; expected " + shape_text(shape));
    const double budget = own.is_none() ? max_ulp : own.cast<double>();
    if (!(budget >= 0)) throw py::value_error(std::string("max_") + nm + "_ulp must be >= 0");
    cands.push_back({nm, arr, budget, d, shape});
  };
  add("dx", dx, max_dx_ulp, p.dtype, b.in.shape);
  add("dgamma", dgamma, max_dgamma_ulp, p.param_dtype, pshape);
  add("dbeta", dbeta, max_dbeta_ulp, p.param_dtype, pshape);
  std::vector<std::byte> edx(static_cast<std::size_t>(p.elements()) * size_of(p.dtype));
  std::vector<std::byte> edg(static_cast<std::size_t>(p.cols) * size_of(p.param_dtype)), edb(edg.size());
  BackwardReference ref;
  std::vector<ErrorSummary> sums(cands.size());
  std::vector<const void*> data;  // taken with the GIL held (a py::array touches reference counts)
  for (const Candidate& k : cands) data.push_back(py::array(k.array).data());
  {
    py::gil_scoped_release release;
    reference_backward(p, b.in.x.data(), b.in.gamma_ptr(), b.dy.data(), edx.data(), edg.data(), edb.data(), &ref);
    for (std::size_t c = 0; c < cands.size(); ++c) {
      const Candidate& k = cands[c];
      const Gradient which = std::strcmp(k.name, "dx") == 0 ? Gradient::dx : std::strcmp(k.name, "dgamma") == 0 ? Gradient::dgamma : Gradient::dbeta;
      const std::vector<std::byte>& exact = which == Gradient::dx ? edx : which == Gradient::dgamma ? edg : edb;
      // As check --dir bwd (lnorm/check.hpp measure_gradient).
      sums[c] = measure_gradient(which, p, b.in.x.data(), b.dy.data(), data[c], exact.data(), ref,
                                 Budget{k.budget, max_ulp_per_kappa});
    }
  }
  py::dict d;
  bool pass = true;
  d["op"] = std::string(name(p.op));
  d["shape"] = py::tuple(py::cast(b.in.shape));
  d["axis"] = b.in.axis;
  d["dtype"] = std::string(name(p.dtype));
  d["param_dtype"] = std::string(name(p.param_dtype));
  d["eps"] = p.eps;
  d["gamma_offset"] = p.gamma_offset;
  d["dgamma_undecided"] = ref.dgamma_undecided;
  for (const char* nm : {"dx", "dgamma", "dbeta"}) d[nm] = py::none();
  for (std::size_t c = 0; c < cands.size(); ++c) {
    d[cands[c].name] = summary(sums[c], cands[c].budget, cands[c].shape);
    pass = pass && sums[c].passes();
  }
  d["pass"] = pass;
  return d;
}

}  // namespace

void bind_backward(py::module_& m) {
  using namespace py::literals;
  m.def("reference_backward", &reference_backward_py, "x"_a, "dy"_a, "gamma"_a = py::none(), py::kw_only(), "axis"_a = -1,
        "eps"_a = 1e-5, "dtype"_a = py::none(), "threads"_a = py::none(), "op"_a = "layernorm", "gamma_offset"_a = 0.0);
  m.def("check_backward", &check_backward_py, "x"_a, "dy"_a, "gamma"_a = py::none(), py::kw_only(), "dx"_a = py::none(),
        "dgamma"_a = py::none(), "dbeta"_a = py::none(), "axis"_a = -1, "eps"_a = 1e-5, "dtype"_a = py::none(),
        "threads"_a = py::none(), "op"_a = "layernorm", "gamma_offset"_a = 0.0, "max_ulp"_a = 8.0, "max_ulp_per_kappa"_a = 1.0, "max_dx_ulp"_a = py::none(),
        "max_dgamma_ulp"_a = py::none(), "max_dbeta_ulp"_a = py::none());
}

}  // namespace lnorm::python
