// Shared pieces of the pybind11 layer: NumPy arrays <-> lnorm problems, with every check that turns
// bad input into a Python exception (TypeError for dtypes and types, ValueError for shapes and values).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "lnorm/metrics.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::python {

namespace py = pybind11;

// The NumPy dtype that stores d (uint16 for bf16 bit patterns).
py::dtype numpy_dtype(DType d);
// A C-contiguous, native-byte-order view of a: `a` itself when it already is one (zero-copy), a copy
// otherwise (non-contiguous or byte-swapped arrays). TypeError naming `what` when a is not an ndarray.
py::array contiguous(py::handle a, const std::string& what);
// dtype="f32"... or None (from x's NumPy dtype; uint16 needs dtype="bf16").
DType resolve_dtype(const py::array& x, py::handle dtype_arg);
// Whether a holds exactly d's NumPy dtype.
bool holds(const py::array& a, DType d);
std::string dtype_text(const py::array& a);
std::string shape_text(const std::vector<std::int64_t>& shape);
std::vector<std::int64_t> shape_of(const py::array& a);
// threads=None: every core the machine reports (at least 1); otherwise the given count.
int threads_or_default(py::handle threads);

// x with optional gamma/beta, normalized from `axis` on: everything run, reference and check share.
struct ProblemArrays {
  py::array x;
  py::object gamma, beta;  // contiguous arrays, or None
  py::object residual = py::none();  // Add & Norm's residual (x's shape; x's dtype or float32 beside 16-bit x), or None
  std::vector<std::int64_t> shape;
  int axis = 0;
  Problem problem;
  const void* gamma_ptr() const;
  const void* beta_ptr() const;
  const void* residual_ptr() const;
  std::vector<std::int64_t> stats_shape() const;  // x.shape[:axis] + (1,)*(rank-axis)
};
// op: "layernorm" or "rmsnorm" (or "add_layernorm"/"add_rmsnorm", which need a residual); gamma_offset: C of
// (C + gamma); residual (or None): Add & Norm, making op its add_ form, as the CLI's --residual does.
// ValueError/TypeError on bad input.
ProblemArrays problem_arrays(py::handle x, py::handle gamma, py::handle beta, int axis, double eps,
                             py::handle dtype, int threads, const std::string& op = "layernorm", double gamma_offset = 0,
                             py::handle residual = py::none());
// A candidate h for check: the residual's dtype and x's shape.
py::array h_array(py::handle a, const ProblemArrays& in);
// A candidate per-row statistic: stats dtype, and stats_shape, x.shape[:axis] or (rows,).
py::array stats_array(py::handle a, const ProblemArrays& in, const std::string& what);

// Doubles exactly representable in d, encoded into a new array of d's NumPy dtype.
py::array encode(DType d, const std::vector<double>& values, const std::vector<std::int64_t>& shape);
// A flat C-order index as a tuple of coordinates in shape.
py::tuple unravel(std::int64_t flat, const std::vector<std::int64_t>& shape);

// What every measured output adds to its dict beside its worst error (check --json's error_json): the element
// furthest over its own allowance ("worst_over_budget": index, error, allowed, kappa, got, exact; None without
// elements) and the bias gate ("bias": mean_signed_error, mean_allowed, mean_kappa_allowed, elements, units, bound,
// gated, pass). gated = false: reported, not part of the verdict (y with a recipe).
void add_error_fields(py::dict& d, const ErrorSummary& s, const std::vector<std::int64_t>& shape, bool gated = true);

void bind_reference(py::module_& m);
void bind_verify(py::module_& m);
void bind_backward(py::module_& m);
void bind_quant(py::module_& m);

}  // namespace lnorm::python
