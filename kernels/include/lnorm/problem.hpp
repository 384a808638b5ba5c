// The problem a normalization kernel solves, and the buffers it reads and writes (docs/DESIGN.md "Ops").
//
// A tensor normalized from `axis` on is, in C order, a rows x cols matrix: rows = prod(shape[:axis]),
// cols = prod(shape[axis:]). Kernels see only that matrix; shapes and axes live in the CLI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lnorm/op.hpp"
#include "lnorm/quant.hpp"

namespace lnorm {

enum class DType : std::uint8_t { f32 = 0, f64 = 1, f16 = 2, bf16 = 3 };
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

constexpr std::string_view name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}
std::optional<DType> parse_dtype(std::string_view s);

// The .npy descr that stores a dtype ('<u2' holds bf16 bit patterns).
constexpr std::string_view npy_descr(DType d) {
  switch (d) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::bf16: return "<u2";
  }
  return "?";
}

constexpr std::size_t size_of(DType d) {
  return d == DType::f64 ? 8 : d == DType::f32 ? 4 : 2;
}
// mean and rstd are f32, except for f64 data (DESIGN.md "What LayerNorm means here").
constexpr DType stats_dtype(DType d) { return d == DType::f64 ? DType::f64 : DType::f32; }

// A set of dtypes as a bit mask, for KernelInfo::dtypes.
struct DTypeSet {
  std::uint8_t bits = 0;
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> ds) {
    for (DType d : ds) bits |= static_cast<std::uint8_t>(1u << static_cast<unsigned>(d));
  }
  constexpr bool contains(DType d) const { return (bits >> static_cast<unsigned>(d)) & 1u; }
};

struct Problem {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DType dtype = DType::f32;
  // eps as the kernel receives it: already rounded to f32 unless dtype is f64 (see make_problem).
  double eps = 1e-5;
  bool has_gamma = false;
  bool has_beta = false;
  int threads = 1;  // rows may be split across this many threads; results must not depend on it
  Op op = Op::layernorm;  // lnorm/op.hpp: norm, prologue, epilogue, direction
  // Storage of gamma and beta: dtype, or f32 with f16/bf16 x (Apex's mixed LayerNorm, FlashInfer and
  // TE keep weights in f32). y keeps x's dtype.
  DType param_dtype = DType::f32;
  // y uses (gamma_offset + gamma): 1 for Gemma's (1 + w). As the kernel receives it: rounded to f32
  // unless dtype is f64 (set_params); only with gamma given.
  double gamma_offset = 0;
  // Add & Norm only: the storage of residual and h, x's dtype or f32 with f16/bf16 x (flash-attn's
  // residual_in_fp32). The norm reads h in this dtype; y keeps x's.
  DType residual_dtype = DType::f32;
  // The quantized epilogue (op.epilogue == Epilogue::quantized) only: q's format and scaling (lnorm/quant.hpp).
  QuantSpec quant{};

  std::int64_t elements() const { return rows * cols; }
};

// Builds a LayerNorm Problem with eps rounded to the format the kernels receive it in (f32, or f64 for
// f64 data), so the reference and every kernel use exactly the same eps; params in x's dtype, no offset.
Problem make_problem(std::int64_t rows, std::int64_t cols, DType dtype, double eps,
                     bool has_gamma, bool has_beta, int threads = 1);
// The same problem for another op / parameter convention. set_params rounds the offset as eps is
// rounded and throws std::invalid_argument for a parameter dtype that is neither x's nor f32 (with
// f16/bf16 x), and for an offset without gamma.
Problem with_op(Problem p, Op op);
Problem set_params(Problem p, DType param_dtype, double gamma_offset);
// Add & Norm's residual/h storage; throws std::invalid_argument as set_params does (and for an op
// without the fused add).
Problem set_residual(Problem p, DType residual_dtype);
// The forward with y quantized (op.epilogue = quantized, quant = spec); throws std::invalid_argument for a
// backward, f64 x, or a spec that does not fit the row (quant_spec_error).
Problem set_quant(Problem p, const QuantSpec& spec);
// "" when param_dtype may hold gamma/beta for x of dtype d; otherwise why not.
std::string param_dtype_problem(DType d, DType param_dtype);
// The storage of the rows the norm reads: h in residual_dtype when the op adds a residual first, else x in
// dtype. (The fused-add adaptor hands a kernel's forward the rows of h as its x: kernels/dispatch.cpp.)
constexpr DType input_dtype(const Problem& p) {
  return p.op.prologue == Prologue::residual_add ? p.residual_dtype : p.dtype;
}

// Host buffers, C order: named, optional operands (docs/DESIGN.md "Ops"); a kernel reads and writes
// exactly the ones its op has, and every other pointer is null.
//   x, y: rows*cols elements of problem.dtype. gamma, beta: cols elements of problem.param_dtype, or
//   null when absent. mean, rstd: rows elements of stats_dtype(problem.dtype), or null when not wanted
//   (rmsnorm has no mean).
//   residual (input) and h (output): Add & Norm only, rows*cols elements of problem.residual_dtype.
//   q, scales: the quantized epilogue's outputs in place of y (y null): rows*cols codes (fp8 bit patterns or
//   int8), and rows*quant.scales_per_row(cols) scales (f32, or E8M0 codes for mx; null for tensor scaling).
//   quant_y: the quantized epilogue only, optional (null unless the caller asks): rows*cols f32, the y the kernel
//   handed its quantizer, written beside q (KernelInfo's Takes::quant_input says which y that is). verify checks q
//   and the scales against the quantizer's contract applied to it, bit for bit.
//   dy, dx, dgamma, dbeta (backward) are for the op that follows.
struct Tensors {
  const void* x = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  void* y = nullptr;
  void* mean = nullptr;
  void* rstd = nullptr;
  const void* residual = nullptr;
  void* h = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dgamma = nullptr;
  void* dbeta = nullptr;
  const void* saved_mean = nullptr;
  const void* saved_rstd = nullptr;
  void* q = nullptr;
  void* scales = nullptr;
  void* quant_y = nullptr;
};

}  // namespace lnorm
