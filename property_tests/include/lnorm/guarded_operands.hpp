// Every operand of a problem in a guarded buffer, from the operand table (lnorm/operands.hpp): the one way the
// harness hands a kernel its tensors, forward, Add & Norm, quantized or backward. Inputs are encoded once and
// snapshotted; outputs are refilled before each run (a canary NaN in a dtype's outputs, a given byte in the raw
// ones: codes and scales, where every byte is a valid value); after a run, check() names the first thing the
// kernel broke, in the operand's own name: a guard region, an input's bytes, an output element left unwritten.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lnorm/guarded_buffer.hpp"
#include "lnorm/operands.hpp"

namespace lnorm::verify {

// The values of a case's inputs, by operand (x, gamma, beta, residual, dy, saved_mean, saved_rstd): each encoded in
// the operand's dtype. The vectors must outlive the GuardedOperands built from them.
class InputValues {
 public:
  InputValues& set(Operand o, const std::vector<double>& values) {
    by_operand_[static_cast<std::size_t>(o)] = &values;
    return *this;
  }
  const std::vector<double>* get(Operand o) const { return by_operand_[static_cast<std::size_t>(o)]; }

 private:
  std::array<const std::vector<double>*, std::size(kOperandTable)> by_operand_{};
};

class GuardedOperands {
 public:
  // A buffer for every operand p has (present()), but the optional outputs not in `optional` (mean, rstd,
  // quant_y): those the kernel gets as null. Element operands and parameters sit misalign elements off
  // 64-byte alignment (CaseSpec::misalign), per-row statistics aligned. An input's values come from `values`;
  // one not given there is encoded as zeros.
  GuardedOperands(const Problem& p, const InputValues& values, int misalign, OperandSet optional);
  // Refills every output: a dtype's outputs with canary_bits, the raw ones (q, scales) with raw_fill in each byte.
  void prefill(std::uint8_t raw_fill = 0);
  // Every buffer in its slot, the rest null.
  Tensors tensors() const;
  // After a run: "" or "harness: " + the first thing broken, in table order: an output's guards, an input's
  // guards, an input's bytes, an output element still holding the canary (not looked for in raw outputs).
  std::string check() const;
  // The operand's buffer; null when the kernel gets none.
  const Buffer* find(Operand o) const;
  // Its bits (all_bits()), or empty when absent.
  std::vector<std::uint64_t> bits(Operand o) const;

 private:
  Problem p_;
  std::array<std::optional<Buffer>, std::size(kOperandTable)> bufs_;
  std::array<std::vector<std::byte>, std::size(kOperandTable)> before_;  // the inputs' bytes as encoded
};

}  // namespace lnorm::verify
