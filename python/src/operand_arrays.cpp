// operand_arrays.hpp: a run's NumPy operands from the operand table.
#include "operand_arrays.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace lnorm::python {

namespace {

py::dtype dtype_of(const OperandInfo& o, const Problem& p) {
  if (const auto d = element_dtype(o, p)) return numpy_dtype(*d);
  if (o.storage == Storage::q_code) return py::dtype(std::string(p.quant.format_info().numpy_dtype));
  return py::dtype(std::string(p.quant.storage().numpy_dtype));
}

std::vector<py::ssize_t> shape_of(const OperandInfo& o, const Problem& p, const ProblemArrays& in) {
  const auto lead = in.shape.begin() + in.axis;
  switch (o.extent) {
    case Extent::elements: {
      if (o.storage != Storage::q_code) return {in.shape.begin(), in.shape.end()};
      const std::vector<std::int64_t> s = q_shape(p, {in.shape.begin(), in.shape.end()}, in.axis);  // packed: cols/2
      return {s.begin(), s.end()};
    }
    case Extent::params: return {lead, in.shape.end()};
    case Extent::per_row: {
      const std::vector<std::int64_t> s = in.stats_shape();
      return {s.begin(), s.end()};
    }
    case Extent::scales: {
      std::vector<py::ssize_t> s(in.shape.begin(), lead);
      s.push_back(static_cast<py::ssize_t>(p.quant.scales_per_row(p.cols)));
      return s;
    }
  }
  return {};
}

// The input in holds for the operand, or None.
py::object input_of(Operand o, const ProblemArrays& in) {
  switch (o) {
    case Operand::x: return in.x;
    case Operand::gamma: return in.gamma;
    case Operand::beta: return in.beta;
    case Operand::residual: return in.residual;
    default: return py::none();
  }
}

}  // namespace

OperandArrays::OperandArrays(const ProblemArrays& in, const Problem& p, OperandSet optional) : p_(p) {
  for (const OperandInfo& o : kOperandTable) {
    if (!present(o, p) || (o.optional && !optional.has(o.operand))) continue;
    py::object& a = arrays_[static_cast<std::size_t>(o.operand)];
    if (o.role == Role::input) a = input_of(o.operand, in);
    else a = py::array(dtype_of(o, p), shape_of(o, p, in));
  }
}

Tensors OperandArrays::tensors() const {
  Tensors t;
  for (const OperandInfo& o : kOperandTable) {
    if (!present(o, p_)) continue;
    const py::object& a = arrays_[static_cast<std::size_t>(o.operand)];
    if (!a || a.is_none()) {
      if (o.role == Role::input) throw std::logic_error("OperandArrays: the op reads " + std::string(o.name) + ", and nothing gives it");
      continue;  // an optional output not asked for
    }
    py::array arr(a);
    set_slot(t, o, o.role == Role::output ? arr.mutable_data() : const_cast<void*>(arr.data()));
  }
  return t;
}

py::tuple OperandArrays::outputs() const {
  py::list out;
  for (const OperandInfo& o : kOperandTable) {
    const py::object& a = arrays_[static_cast<std::size_t>(o.operand)];
    if (o.role == Role::output && a && !a.is_none()) out.append(a);
  }
  return py::tuple(out);
}

}  // namespace lnorm::python
