// A run's operands as NumPy arrays, from the operand table (lnorm/operands.hpp): the inputs ProblemArrays holds, and a
// new array for every output the op has (its NumPy dtype from the row's storage, its shape from its extent) but the
// optional ones not asked for. lnorm.reference, lnorm.run and lnorm.quant_run hand their kernels Tensors this way, and
// their results are these arrays, so an output a new op adds is a row of the table, not a thread through each binding.
#pragma once

#include <array>

#include "bindings.hpp"
#include "lnorm/operands.hpp"

namespace lnorm::python {

class OperandArrays {
 public:
  // in's x, gamma, beta and residual are the inputs; p is the problem the kernel runs (in.problem, or its quantized op).
  OperandArrays(const ProblemArrays& in, const Problem& p, OperandSet optional);
  // Every array in its slot; an input of the op that in does not hold is a std::logic_error.
  Tensors tensors() const;
  // The operand's array, or None when the op has none.
  py::object get(Operand o) const {
    const py::object& a = arrays_[static_cast<std::size_t>(o)];
    return a ? a : py::none();
  }
  // The outputs in table order: lnorm.reference's and lnorm.run's result, (y, mean, rstd[, h]) or (y, rstd[, h]).
  py::tuple outputs() const;

 private:
  Problem p_;
  std::array<py::object, std::size(kOperandTable)> arrays_;
};

}  // namespace lnorm::python
