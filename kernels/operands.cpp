// lnorm/operands.hpp: what each operand is for a problem, from the table's row and the op's parts.
#include "lnorm/operands.hpp"

namespace lnorm {

bool present(const OperandInfo& o, const Problem& p) {
  const bool fwd = p.op.direction == Direction::fwd, ln = p.op.norm == Norm::layernorm;
  const bool quantized = fwd && p.op.epilogue == Epilogue::quantized;
  switch (o.operand) {
    case Operand::x: return true;
    case Operand::gamma: return p.has_gamma;
    case Operand::beta: return p.has_beta && fwd;  // the backward does not read beta (dbeta needs none)
    case Operand::y: return fwd && !quantized;
    case Operand::mean: return fwd && ln;
    case Operand::rstd: return fwd;
    case Operand::residual:
    case Operand::h: return fwd && p.op.prologue == Prologue::residual_add;
    case Operand::q:
    case Operand::quant_y: return quantized;
    case Operand::scales: return quantized && p.quant.has_scales();
    case Operand::dy:
    case Operand::saved_rstd:
    case Operand::dx: return !fwd;
    case Operand::saved_mean: return !fwd && ln;
    case Operand::dgamma: return !fwd && p.has_gamma;
    case Operand::dbeta: return !fwd && p.has_beta;
  }
  return false;
}

std::int64_t element_count(const OperandInfo& o, const Problem& p) {
  switch (o.extent) {
    case Extent::elements: return p.rows * p.cols;
    case Extent::params: return p.cols;
    case Extent::per_row: return p.rows;
    case Extent::scales: return p.rows * p.quant.scales_per_row(p.cols);
  }
  return 0;
}

std::optional<DType> element_dtype(const OperandInfo& o, const Problem& p) {
  switch (o.storage) {
    case Storage::x: return p.dtype;
    case Storage::params: return p.param_dtype;
    case Storage::residual: return p.residual_dtype;
    case Storage::stats: return stats_dtype(p.dtype);
    case Storage::f32: return DType::f32;
    case Storage::q_code:
    case Storage::scale: return std::nullopt;
  }
  return std::nullopt;
}

std::size_t element_size(const OperandInfo& o, const Problem& p) {
  if (const auto d = element_dtype(o, p)) return size_of(*d);
  if (o.storage == Storage::q_code) return static_cast<std::size_t>(p.quant.format_info().bits) / 8;
  return p.quant.storage().bytes;
}

std::int64_t byte_count(const OperandInfo& o, const Problem& p) {
  if (o.storage == Storage::q_code) return p.quant.q_bytes(p.rows, p.cols);  // sub-byte codes pack
  return element_count(o, p) * static_cast<std::int64_t>(element_size(o, p));
}

std::vector<std::int64_t> q_shape(const Problem& p, const std::vector<std::int64_t>& x_shape, int axis) {
  if (!is_packed(p.quant.format)) return x_shape;
  std::vector<std::int64_t> s(x_shape.begin(), x_shape.begin() + axis);
  s.push_back(p.quant.q_bytes(1, p.cols));
  return s;
}

std::string_view npy_descr(const OperandInfo& o, const Problem& p) {
  if (const auto d = element_dtype(o, p)) return npy_descr(*d);
  if (o.storage == Storage::q_code) return p.quant.format_info().npy_descr;
  return p.quant.storage().npy_descr;
}

void set_slot(Tensors& t, const OperandInfo& o, void* data) {
  if (o.input) t.*o.input = data;
  else t.*o.output = data;
}

void* slot(const Tensors& t, const OperandInfo& o) { return o.input ? const_cast<void*>(t.*o.input) : t.*o.output; }

lnorm_tensors to_abi(const Tensors& t) {
  lnorm_tensors c{};
  for (const OperandInfo& o : kOperandTable) {
    if (o.abi_input) c.*o.abi_input = o.input ? t.*o.input : nullptr;
    else c.*o.abi_output = t.*o.output;
  }
  c.struct_size = sizeof(lnorm_tensors);
  return c;
}

OperandBuffers::OperandBuffers(const Problem& p, bool with_optional) {
  for (const OperandInfo& o : kOperandTable) {
    if (!present(o, p) || (o.optional && !with_optional)) continue;
    const std::size_t i = static_cast<std::size_t>(o.operand);
    bufs_[i].assign(static_cast<std::size_t>(byte_count(o, p)), std::byte{0});
    has_[i] = true;
  }
}

Tensors OperandBuffers::tensors() const {
  Tensors t;
  for (const OperandInfo& o : kOperandTable) {
    const std::size_t i = static_cast<std::size_t>(o.operand);
    // An operand with no bytes (scales of tensor scaling never get here; an empty problem) stays null.
    if (has_[i] && !bufs_[i].empty()) set_slot(t, o, const_cast<std::byte*>(bufs_[i].data()));
  }
  return t;
}

}  // namespace lnorm
