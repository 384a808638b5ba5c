// The operands of every op, as data (docs/DESIGN.md "Parts as data"): one row per operand — its name (the CLI's
// --NAME, Python's keyword and result field, the JSON key), role, storage, extent, when an op has it, and its slot in
// Tensors and in the plugin ABI's lnorm_tensors. The layers that allocate, name, count or hand over operands iterate
// this table (OperandBuffers below, bench's byte count, verify's and report's quantized runs) instead of naming each
// one; a new operand is a row here, its slot in Tensors and lnorm_tensors (appended), and its kernels' code.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "lnorm/plugin.h"
#include "lnorm/problem.hpp"

namespace lnorm {

enum class Operand : std::uint8_t {
  x, gamma, beta, y, mean, rstd, residual, h, q, scales, quant_y, dy, saved_mean, saved_rstd, dx, dgamma, dbeta
};
enum class Role : std::uint8_t { input, output };
// What an element is stored as, from the problem: x's dtype, the parameters', the residual's, the statistics'
// (stats_dtype), the quantized format's code, the scaling's scale storage, or f32.
enum class Storage : std::uint8_t { x, params, residual, stats, q_code, scale, f32 };
// How many elements, from the problem: rows × cols, cols (a parameter vector), rows (a statistic), the scales.
enum class Extent : std::uint8_t { elements, params, per_row, scales };

struct OperandInfo {
  Operand operand;
  std::string_view name;  // --NAME, Python's keyword/field, the JSON key
  Role role;
  Storage storage;
  Extent extent;
  bool optional;  // an output the caller may leave null (the kernel then skips it): mean, rstd, quant_y
  const void* Tensors::*input;   // the slot of an input (null for an output)
  void* Tensors::*output;        // the slot of an output (null for an input)
  const void* lnorm_tensors::*abi_input;  // the same slot in the plugin ABI
  void* lnorm_tensors::*abi_output;
};

inline constexpr OperandInfo kOperandTable[] = {
    {Operand::x, "x", Role::input, Storage::x, Extent::elements, false, &Tensors::x, nullptr, &lnorm_tensors::x, nullptr},
    {Operand::gamma, "gamma", Role::input, Storage::params, Extent::params, false, &Tensors::gamma, nullptr, &lnorm_tensors::gamma, nullptr},
    {Operand::beta, "beta", Role::input, Storage::params, Extent::params, false, &Tensors::beta, nullptr, &lnorm_tensors::beta, nullptr},
    {Operand::y, "y", Role::output, Storage::x, Extent::elements, false, nullptr, &Tensors::y, nullptr, &lnorm_tensors::y},
    {Operand::mean, "mean", Role::output, Storage::stats, Extent::per_row, true, nullptr, &Tensors::mean, nullptr, &lnorm_tensors::mean},
    {Operand::rstd, "rstd", Role::output, Storage::stats, Extent::per_row, true, nullptr, &Tensors::rstd, nullptr, &lnorm_tensors::rstd},
    {Operand::residual, "residual", Role::input, Storage::residual, Extent::elements, false, &Tensors::residual, nullptr, &lnorm_tensors::residual, nullptr},
    {Operand::h, "h", Role::output, Storage::residual, Extent::elements, false, nullptr, &Tensors::h, nullptr, &lnorm_tensors::h},
    {Operand::q, "q", Role::output, Storage::q_code, Extent::elements, false, nullptr, &Tensors::q, nullptr, &lnorm_tensors::q},
    {Operand::scales, "scales", Role::output, Storage::scale, Extent::scales, false, nullptr, &Tensors::scales, nullptr, &lnorm_tensors::scales},
    {Operand::quant_y, "quant_y", Role::output, Storage::f32, Extent::elements, true, nullptr, &Tensors::quant_y, nullptr, &lnorm_tensors::quant_y},
    {Operand::dy, "dy", Role::input, Storage::x, Extent::elements, false, &Tensors::dy, nullptr, &lnorm_tensors::dy, nullptr},
    {Operand::saved_mean, "saved_mean", Role::input, Storage::stats, Extent::per_row, false, &Tensors::saved_mean, nullptr, &lnorm_tensors::saved_mean, nullptr},
    {Operand::saved_rstd, "saved_rstd", Role::input, Storage::stats, Extent::per_row, false, &Tensors::saved_rstd, nullptr, &lnorm_tensors::saved_rstd, nullptr},
    {Operand::dx, "dx", Role::output, Storage::x, Extent::elements, false, nullptr, &Tensors::dx, nullptr, &lnorm_tensors::dx},
    {Operand::dgamma, "dgamma", Role::output, Storage::params, Extent::params, false, nullptr, &Tensors::dgamma, nullptr, &lnorm_tensors::dgamma},
    {Operand::dbeta, "dbeta", Role::output, Storage::params, Extent::params, false, nullptr, &Tensors::dbeta, nullptr, &lnorm_tensors::dbeta},
};
constexpr const OperandInfo& info(Operand o) { return kOperandTable[static_cast<unsigned>(o)]; }
constexpr bool operand_rows_in_order() {
  for (unsigned i = 0; i < std::size(kOperandTable); ++i)
    if (static_cast<unsigned>(kOperandTable[i].operand) != i) return false;
  return true;
}
static_assert(operand_rows_in_order(), "kOperandTable is indexed by Operand");

// A subset of the operand table, by Operand.
class OperandSet {
 public:
  OperandSet() = default;
  OperandSet(std::initializer_list<Operand> os) {
    for (Operand o : os) add(o);
  }
  void add(Operand o) { bits_ |= 1u << static_cast<unsigned>(o); }
  bool has(Operand o) const { return (bits_ >> static_cast<unsigned>(o)) & 1u; }

 private:
  std::uint32_t bits_ = 0;
  static_assert(std::size(kOperandTable) <= 32);
};

// Whether a problem's op has the operand (from its parts: norm, prologue, epilogue, direction, and has_gamma/beta).
bool present(const OperandInfo& o, const Problem& p);
// Elements, bytes per element, bytes, and the .npy descr of the operand for a problem.
std::int64_t element_count(const OperandInfo& o, const Problem& p);
std::size_t element_size(const OperandInfo& o, const Problem& p);
// The floating-point dtype an element is stored in; none for a quantized code or a scale (their bytes are the
// format's and the scaling's: FormatInfo, ScaleStorage).
std::optional<DType> element_dtype(const OperandInfo& o, const Problem& p);
std::int64_t byte_count(const OperandInfo& o, const Problem& p);
// q's array shape for an x of x_shape normalized from `axis` (p.quant's format): x's shape, or, where the codes
// pack (fp4_e2m1: two a byte), x.shape[:axis] + (bytes per row,): the normalized dims as one, as FP4 tensors ship.
std::vector<std::int64_t> q_shape(const Problem& p, const std::vector<std::int64_t>& x_shape, int axis);
std::string_view npy_descr(const OperandInfo& o, const Problem& p);
// Points the operand's slot in t at data (an input's const slot, an output's mutable one).
void set_slot(Tensors& t, const OperandInfo& o, void* data);
void* slot(const Tensors& t, const OperandInfo& o);
// The plugin ABI's tensors: every slot of t, in lnorm_tensors's fields (struct_size set).
lnorm_tensors to_abi(const Tensors& t);

// Host buffers for every operand a problem has, zero-filled, in table order, and the Tensors that point at them.
// with_optional = false leaves the optional outputs (mean, rstd, quant_y) out.
class OperandBuffers {
 public:
  OperandBuffers() = default;
  explicit OperandBuffers(const Problem& p, bool with_optional = true);
  std::vector<std::byte>& operator[](Operand o) { return bufs_[static_cast<std::size_t>(o)]; }
  const std::vector<std::byte>& operator[](Operand o) const { return bufs_[static_cast<std::size_t>(o)]; }
  // Every allocated buffer in its slot; the rest null.
  Tensors tensors() const;

 private:
  std::array<std::vector<std::byte>, std::size(kOperandTable)> bufs_;
  std::array<bool, std::size(kOperandTable)> has_{};
};

}  // namespace lnorm
