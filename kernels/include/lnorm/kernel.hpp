// The one interface every kernel implements (DESIGN.md "Kernels"): an entry per direction, and what it
// takes declared as data. The harness checks the declaration (unavailable_reason) and dispatches
// (KernelInfo::run, kernels/dispatch.cpp); a kernel's own why_not is left for what only the machine
// knows (an ISA, a device).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "lnorm/problem.hpp"

namespace lnorm {

struct NormSet {
  std::uint8_t bits = 0;
  constexpr NormSet() = default;
  constexpr NormSet(std::initializer_list<Norm> ns) {
    for (Norm n : ns) bits |= static_cast<std::uint8_t>(1u << static_cast<unsigned>(n));
  }
  constexpr bool contains(Norm n) const { return (bits >> static_cast<unsigned>(n)) & 1u; }
};
inline constexpr NormSet kBothNorms{Norm::layernorm, Norm::rmsnorm};

template <class E>
struct PartSet {  // a set of an op part's values (Prologue, Epilogue) as a bit mask
  std::uint8_t bits = 0;
  constexpr PartSet() = default;
  constexpr PartSet(std::initializer_list<E> es) {
    for (E e : es) bits |= static_cast<std::uint8_t>(1u << static_cast<unsigned>(e));
  }
  constexpr bool contains(E e) const { return (bits >> static_cast<unsigned>(e)) & 1u; }
};
using PrologueSet = PartSet<Prologue>;
using EpilogueSet = PartSet<Epilogue>;
inline constexpr PrologueSet kWithAdd{Prologue::none, Prologue::residual_add};
inline constexpr EpilogueSet kWithQuant{Epilogue::y_as_x, Epilogue::quantized};  // y, or q (lnorm/quant.hpp)

// The y a kernel's quantizer is handed (the quantized epilogue), which it writes to Tensors::quant_y when asked:
//   f32_y       its f32 y (lnorm's CPU kernels: y before any storage rounding, whatever x's dtype)
//   x_dtype_y   its y rounded to x's dtype first (vLLM's order: the norm writes bf16, the quant reads it)
//   exact_y     no y: q and the scales are decided from the exact y* (the _cr kernels); verify holds q and the scales
//               to the contract applied to y* itself
//   not_handed  a plugin that does not say: only q's budget against y* can be checked
enum class QuantInput : std::uint8_t { not_handed, f32_y, x_dtype_y, exact_y };
constexpr std::string_view name(QuantInput i) {
  switch (i) {
    case QuantInput::not_handed: return "not_handed";
    case QuantInput::f32_y: return "f32_y";
    case QuantInput::x_dtype_y: return "x_dtype_y";
    case QuantInput::exact_y: return "exact_y";
  }
  return "?";
}

// What a kernel takes, as data. Its forward computes every composition of forward_norms, prologues and
// epilogues; its backward each of backward_norms.
struct Takes {
  DTypeSet dtypes{};                             // storage of x (and y, dx)
  NormSet forward_norms{};                       // empty: no forward
  NormSet backward_norms{};                      // empty: no backward
  PrologueSet prologues{Prologue::none};         // kWithAdd: Add & Norm too
  EpilogueSet epilogues{Epilogue::y_as_x};
  // Add & Norm: false, the harness's adaptor forms h chunk by chunk (the kernel's add_rows, or a scalar add)
  // and hands the forward the rows of h as its x (dispatch.cpp); true, the forward is handed the whole
  // problem and fuses the add itself (a device kernel, where a host adaptor would launch per chunk).
  bool fuses_add = false;
  bool f32_residual = false;  // Add & Norm: an f32 residual and h beside 16-bit x (else x's dtype only)
  bool f32_params = true;     // gamma/beta stored in f32 beside 16-bit x (else x's dtype only)
  bool gamma_offset = true;   // y uses (C + gamma)
  QuantInput quant_input = QuantInput::f32_y;  // the quantized epilogue: which y its quantizer reads (above)
};

using ForwardFn = void (*)(const Problem&, const Tensors&);
using BackwardFn = void (*)(const Problem&, const Tensors&);
// h = x + residual rounded once, for rows [begin, end) of an Add & Norm problem.
using AddRowsFn = void (*)(const Problem&, const Tensors&, std::int64_t begin, std::int64_t end);

// The fused-add adaptor's hand-off to the row driver: KernelInfo::run sets it (on the calling thread) around
// a forward it hands h as x, and the forward's first cpu::split_rows takes it and, per chunk of rows that
// keeps h in cache, forms h before handing the chunk to the kernel's rows. The kernel sees one call on the
// whole problem: its parameters are staged once, its stores streamed by the whole problem's size.
struct PendingAdd {
  AddRowsFn add;            // h = x + residual for rows [begin, end) (the kernel's add_rows, or a scalar add)
  const Problem* problem;   // the Add & Norm problem as asked
  const Tensors* tensors;   //   and its operands (x, residual, h)
  std::int64_t chunk_rows;  // rows per chunk
};
// The pending add of this thread's current forward call, or null.
const PendingAdd*& pending_add();

struct KernelInfo {
  std::string_view name;     // "naive", "welford", ...
  std::string_view summary;  // one line: algorithm, accumulation type
  Takes takes;
  // Host pointers in, host pointers out; results must not depend on problem.threads bitwise.
  // forward: the norm of the rows of input_dtype(problem) at tensors.x, into y, mean, rstd. An Add & Norm
  //   problem arrives with x pointing at h, residual and h null, and h is formed chunk by chunk inside the
  //   forward's cpu::split_rows (PendingAdd); with fuses_add, as the op states it.
  // backward: dx, dgamma, dbeta from x, gamma, dy and the saved statistics.
  ForwardFn forward = nullptr;
  BackwardFn backward = nullptr;
  AddRowsFn add_rows = nullptr;  // the adaptor's add: the kernel's own; null: a scalar add (same bits)
  // nullopt if this machine can run the problem; otherwise the reason. Null: always.
  std::optional<std::string> (*why_not)(const Problem&) = nullptr;
  // Kernels that are wrong on purpose (the cautionary `onepass`) say so here; the harness reports
  // their failures as expected rather than hiding the kernel.
  bool cautionary = false;
  // More about why_not's reason for `lnorm list --verbose` (the CUDA runtime's error code); null or empty: nothing.
  std::string (*why_not_detail)() = nullptr;

  // Whether the declaration covers the op (dtypes and conventions aside).
  bool implements(Op op) const;
  // Runs the problem through the entry its op names (kernels/dispatch.cpp). Call only when
  // unavailable_reason is nullopt.
  void run(const Problem& p, const Tensors& t) const;
};

// The full availability check: the declaration (op, dtype, parameter and residual storage) first, then
// the kernel's own reason.
std::optional<std::string> unavailable_reason(const KernelInfo& k, const Problem& p);

}  // namespace lnorm
