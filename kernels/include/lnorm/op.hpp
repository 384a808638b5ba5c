// An op is a composition of four independent choices (docs/DESIGN.md "Ops", "Adding an op"):
//
//   norm       layernorm  y = (x − mean)·rstd·(C + γ) + β,  rstd = 1/sqrt(var + eps),  var = Σ(x − mean)²/n
//              rmsnorm    y = x·rstd·(C + γ) (+ β when given), rstd = 1/sqrt(Σx²/n + eps) — no mean
//   prologue   none | residual_add: h = x + residual rounded once to the residual's dtype (x's, or f32
//              beside 16-bit x), written out; the norm then reads h as stored
//   epilogue   y_as_x: y in x's dtype | quantized: q = Q(y / s) in fp8/int8 with its scales instead of y
//              (lnorm/quant.hpp; the format and scaling are the Problem's `quant`, not part of the op's name:
//              a quantized forward is its table row's op with this epilogue)
//   direction  fwd | bwd: from x, γ and the upstream dy, the exact gradients dx, dγ = Σ_rows dy·xhat,
//              dβ = Σ_rows dy (lnorm/backward.hpp)
//
// Code reads the parts (op.norm, op.prologue, op.direction); nothing takes a name apart. The ops lnorm
// knows are the rows of kOpTable below: a composition that is not a row (the fused add's backward, for
// now) has no name, no reference and no kernel. A row's `code` is the number the plugin ABI (versions
// 1-4) and report's seeds have always used for it, so neither moves.
#pragma once

#include <cstdint>
#include <optional>
#include <iterator>
#include <string_view>

namespace lnorm {

enum class Norm : std::uint8_t { layernorm = 0, rmsnorm = 1 };
enum class Prologue : std::uint8_t { none = 0, residual_add = 1 };
enum class Epilogue : std::uint8_t { y_as_x = 0, quantized = 1 };
enum class Direction : std::uint8_t { fwd = 0, bwd = 1 };

constexpr std::string_view name(Norm n) { return n == Norm::layernorm ? "layernorm" : "rmsnorm"; }
constexpr std::string_view name(Direction d) { return d == Direction::fwd ? "fwd" : "bwd"; }

struct Op {
  Norm norm = Norm::layernorm;
  Prologue prologue = Prologue::none;
  Epilogue epilogue = Epilogue::y_as_x;
  Direction direction = Direction::fwd;

  // Written out, not defaulted: the CUDA translation units include this header as C++17.
  constexpr unsigned key() const {
    return static_cast<unsigned>(norm) | static_cast<unsigned>(prologue) << 8 | static_cast<unsigned>(epilogue) << 16 |
           static_cast<unsigned>(direction) << 24;
  }
  constexpr bool operator==(const Op& o) const { return key() == o.key(); }
  constexpr bool operator!=(const Op& o) const { return key() != o.key(); }
  constexpr bool operator<(const Op& o) const { return key() < o.key(); }  // for ordered containers

  // The six ops every layer has known by name, defined after the struct (names users type keep working).
  static const Op layernorm, rmsnorm, add_layernorm, add_rmsnorm, layernorm_bwd, rmsnorm_bwd;
};

inline constexpr Op Op::layernorm{Norm::layernorm};
inline constexpr Op Op::rmsnorm{Norm::rmsnorm};
inline constexpr Op Op::add_layernorm{Norm::layernorm, Prologue::residual_add};
inline constexpr Op Op::add_rmsnorm{Norm::rmsnorm, Prologue::residual_add};
inline constexpr Op Op::layernorm_bwd{Norm::layernorm, Prologue::none, Epilogue::y_as_x, Direction::bwd};
inline constexpr Op Op::rmsnorm_bwd{Norm::rmsnorm, Prologue::none, Epilogue::y_as_x, Direction::bwd};

// The forward op of a norm with no prologue: what a backward op differentiates, what Add & Norm applies to h.
constexpr Op plain(Norm n) { return Op{n}; }

// One row per op lnorm knows. Everything else about an op follows from its parts (operands: lnorm/operands.hpp).
struct OpEntry {
  Op op;
  std::string_view name;  // CLI (--op, with --dir bwd for the backward), JSON, Python, plugin names
  std::uint8_t code;      // the plugin ABI's LNORM_* number (versions 1-4) and report's seed salt
};
inline constexpr OpEntry kOpTable[] = {
    {Op::layernorm, "layernorm", 0},         {Op::rmsnorm, "rmsnorm", 1},
    {Op::add_layernorm, "add_layernorm", 2}, {Op::add_rmsnorm, "add_rmsnorm", 3},
    {Op::layernorm_bwd, "layernorm_bwd", 4}, {Op::rmsnorm_bwd, "rmsnorm_bwd", 5},
};

// The table row of an op: a forward with the quantized epilogue is its y_as_x row's op (same name and code);
// the backward has no quantized form.
constexpr const OpEntry* find_op(Op o) {
  if (o.epilogue == Epilogue::quantized) {
    if (o.direction != Direction::fwd) return nullptr;
    o.epilogue = Epilogue::y_as_x;
  }
  for (const OpEntry& e : kOpTable)
    if (e.op == o) return &e;
  return nullptr;
}
// The op with y quantized (Problem::quant says how).
constexpr Op quantized(Op o) {
  o.epilogue = Epilogue::quantized;
  return o;
}
constexpr std::string_view name(Op o) {
  const OpEntry* e = find_op(o);
  return e ? e->name : "?";
}
constexpr std::uint8_t code(Op o) {
  const OpEntry* e = find_op(o);
  return e ? e->code : 0xff;
}
// The op a name or a plugin ABI number (versions 1-4) stands for.
std::optional<Op> parse_op(std::string_view s);
std::optional<Op> op_of_code(unsigned code);

// The ops lnorm knows, in table order; the forward and backward ones; the plain norms.
inline constexpr Op kAllOps[] = {Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm, Op::layernorm_bwd, Op::rmsnorm_bwd};
inline constexpr Op kNormOps[] = {Op::layernorm, Op::rmsnorm};
inline constexpr Op kForwardOps[] = {Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm};
inline constexpr Op kBackwardOps[] = {Op::layernorm_bwd, Op::rmsnorm_bwd};
static_assert(std::size(kAllOps) == std::size(kOpTable), "kAllOps lists the table's ops");

}  // namespace lnorm
