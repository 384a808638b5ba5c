// The problem a LayerNorm kernel solves, and the buffers it reads and writes.
//
// A tensor normalized from `axis` on is, in C order, a rows x cols matrix: rows = prod(shape[:axis]),
// cols = prod(shape[axis:]). Kernels see only that matrix; shapes and axes live in the CLI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

  std::int64_t elements() const { return rows * cols; }
};

// Builds a Problem with eps rounded to the format the kernels receive it in (f32, or f64 for f64
// data), so the reference and every kernel use exactly the same eps.
Problem make_problem(std::int64_t rows, std::int64_t cols, DType dtype, double eps,
                     bool has_gamma, bool has_beta, int threads = 1);

// Host buffers, C order. x, y: rows*cols elements of problem.dtype. gamma, beta: cols elements of
// problem.dtype, or null when absent. mean, rstd: rows elements of stats_dtype(problem.dtype).
struct Tensors {
  const void* x = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  void* y = nullptr;
  void* mean = nullptr;
  void* rstd = nullptr;
};

}  // namespace lnorm
