// lnorm/operands.hpp: the operand table is the specification every layer iterates, so it must name each Tensors
// and lnorm_tensors slot exactly once, say which ops have which operand as the ops define them, and size each.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "lnorm/operands.hpp"

using namespace lnorm;

namespace {
void* tag(unsigned i) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(0x1000 + 16 * i)); }

std::set<std::string> present_names(const Problem& p) {
  std::set<std::string> out;
  for (const OperandInfo& o : kOperandTable)
    if (present(o, p)) out.insert(std::string(o.name));
  return out;
}
}  // namespace

TEST_CASE("operands: every Tensors slot once, and the plugin ABI's slot of the same name", "[operands]") {
  static_assert(sizeof(Tensors) == std::size(kOperandTable) * sizeof(void*), "a Tensors slot without a table row");
  Tensors t;
  for (unsigned i = 0; i < std::size(kOperandTable); ++i) set_slot(t, kOperandTable[i], tag(i));
  std::set<void*> seen;
  for (unsigned i = 0; i < std::size(kOperandTable); ++i) {
    CHECK(slot(t, kOperandTable[i]) == tag(i));  // no row writes another's slot
    seen.insert(slot(t, kOperandTable[i]));
  }
  CHECK(seen.size() == std::size(kOperandTable));
  const lnorm_tensors c = to_abi(t);
  CHECK(c.struct_size == sizeof(lnorm_tensors));
  CHECK(c.x == t.x);
  CHECK(c.saved_rstd == t.saved_rstd);
  CHECK(c.q == t.q);
  CHECK(c.quant_y == t.quant_y);
  for (const OperandInfo& o : kOperandTable) {
    const void* abi = o.abi_input ? c.*o.abi_input : c.*o.abi_output;
    CHECK(abi == slot(t, o));
    CHECK((o.role == Role::input) == (o.input != nullptr));
  }
}

TEST_CASE("operands: which ops have which operands, from their parts", "[operands]") {
  const Problem ln = make_problem(4, 64, DType::bf16, 1e-5, true, true);
  using S = std::set<std::string>;
  CHECK(present_names(ln) == S{"x", "gamma", "beta", "y", "mean", "rstd"});
  CHECK(present_names(with_op(ln, Op::rmsnorm)) == S{"x", "gamma", "beta", "y", "rstd"});
  CHECK(present_names(with_op(ln, Op::add_rmsnorm)) == S{"x", "gamma", "beta", "y", "rstd", "residual", "h"});
  CHECK(present_names(with_op(ln, Op::layernorm_bwd)) == S{"x", "gamma", "dy", "saved_mean", "saved_rstd", "dx", "dgamma", "dbeta"});
  CHECK(present_names(with_op(make_problem(4, 64, DType::f32, 1e-5, false, false), Op::rmsnorm_bwd)) == S{"x", "dy", "saved_rstd", "dx"});
  const Problem row = set_quant(with_op(ln, Op::add_layernorm), parse_quant_spec("int8", "row", std::nullopt));
  CHECK(present_names(row) == S{"x", "gamma", "beta", "mean", "rstd", "residual", "h", "q", "scales", "quant_y"});
  const Problem tensor = set_quant(ln, parse_quant_spec("fp8_e4m3", "tensor", 0.5));
  CHECK(present_names(tensor) == S{"x", "gamma", "beta", "mean", "rstd", "q", "quant_y"});  // a given scale: no scales
}

TEST_CASE("operands: sizes and .npy descrs follow the problem's storage", "[operands]") {
  Problem p = set_params(make_problem(8, 256, DType::bf16, 1e-5, true, true), DType::f32, 0);
  p = set_quant(p, parse_quant_spec("fp8_e4m3", "mx", std::nullopt));
  CHECK(byte_count(info(Operand::x), p) == 8 * 256 * 2);
  CHECK(npy_descr(info(Operand::x), p) == "<u2");
  CHECK(byte_count(info(Operand::gamma), p) == 256 * 4);
  CHECK(byte_count(info(Operand::mean), p) == 8 * 4);
  CHECK(byte_count(info(Operand::q), p) == 8 * 256);
  CHECK(npy_descr(info(Operand::q), p) == "|u1");
  CHECK(byte_count(info(Operand::scales), p) == 8 * (256 / 32));  // one E8M0 byte per 32
  CHECK(npy_descr(info(Operand::scales), p) == "|u1");
  CHECK(byte_count(info(Operand::quant_y), p) == 8 * 256 * 4);
  // OperandBuffers: exactly the present operands, the optional outputs only when asked.
  const OperandBuffers all(p), needed(p, false);
  const Tensors t = all.tensors(), n = needed.tensors();
  CHECK(t.q != nullptr);
  CHECK(t.scales != nullptr);
  CHECK(t.mean != nullptr);
  CHECK(t.quant_y != nullptr);
  CHECK(t.y == nullptr);
  CHECK(t.dx == nullptr);
  CHECK(n.mean == nullptr);
  CHECK(n.quant_y == nullptr);
  CHECK(needed[Operand::scales].size() == 64);
}
