// Entry points of the ISA-specific translation units (avx2.cpp, avx512.cpp, ...), compiled with their own target
// flags. They take a row range and nothing from the C++ library: everything that allocates, spawns
// threads or is shared with generic code stays in the generic TUs, so no inline function compiled for
// AVX2 can be picked by the linker for generic code (ctest `isa_objects_share_no_code` checks this).
#pragma once

#include <cstdint>

#include "lnorm/problem.hpp"
#include "quant_epilogue.hpp"  // the body's quantized epilogue (declared only: defined in a generic TU)
#include "quant_exact.hpp"     // the correctly rounded kernels' (likewise)

namespace lnorm::cpu {

// Parameters staged by the generic driver (params.hpp) when they cannot be read in place: w = C + gamma
// and beta in f32 (f64 for the _cr kernels), cols each; both null when gamma/beta are read from t as x's dtype.
struct Staged {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* y_row = nullptr;  // the quantized epilogue's row of f32 y (cols floats; one per row range), else null
};
// The correctly rounded kernels' parameters (lnorm/params.hpp stage_params_exact): w = C + gamma as w_hi
// (gamma) + w_lo (gamma_lo, null when every w fits one f64) and beta, in f64, cols each; null when absent.
struct Staged64 {
  const double* gamma = nullptr;
  const double* gamma_lo = nullptr;
  const double* beta = nullptr;
  double* y_row = nullptr;  // the quantized epilogue's row of f64 y (cols doubles; one per row range), else null
};

// A backward row range as the ISA code reads it (f32-family data: x, dy and dx in `dtype`, f32 math; the
// generic driver, backward_simd.cpp, stages w = C + gamma in f32 and owns the block partials): saved f32
// statistics of the forward, and the careful scalar row for the rows the fast path declines (careful_row adds
// that row's dy·xhat and dy to dg/db as the fast path would).
struct BackwardRows {
  const void* x;
  const void* dy;
  const float* w;  // cols (ones without gamma)
  const float* mean;  // saved, rows (null for RMSNorm)
  const float* rstd;  // saved, rows
  void* dx;
  std::int64_t cols;
  bool centred;
  DType dtype;  // of x, dy and dx: f32, f16 or bf16
  bool stream_dx;  // dx exceeds the caches: written with non-temporal stores where a row allows it
  void (*careful_row)(const BackwardRows&, std::int64_t row, double* dg, double* db);
  const void* problem;  // the Problem, for careful_row
};
// The backward of rows [r0, r1): dx written, each row's dy·xhat and dy added to dg and db (cols doubles each,
// or null) in row order.
using BackwardRowsFn = void (*)(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db);

// The SIMD kernels: one body per algorithm (simd_body.hpp, simd_backward_body.hpp) instantiated per ISA on its
// operations layer (avx2_ops.hpp: 8 f32 lanes; avx512_ops.hpp: 16), each in its own translation unit.
// Forward rows: y in p.dtype (f32, f16 or bf16; layernorm or rmsnorm), x in input_dtype(p) (p.dtype, or f32:
// Add & Norm's f32 h beside 16-bit y). Rows whose statistics leave the fast path's safe range (near overflow,
// subnormal spread, NaN/Inf) are handed to welford_row.
namespace avx2 {
// AVX2 + FMA + F16C, 8 f32 lanes (avx2.cpp).
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged);
// The backward of rows [r0, r1) (f32, f16 or bf16).
void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db);
// Add & Norm's sum for rows [begin, end): t.h = t.x + t.residual rounded once (the residual and h in x's dtype,
// or f32 beside 16-bit x); avx2_cr's too (the sum is the same correctly rounded one).
void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end);
}  // namespace avx2

namespace avx2_cr {
// Correctly rounded, 4 f64 lanes (avx2_cr.cpp; simd_body.hpp's cr::). Same contract as avx2::rows.
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged);
}  // namespace avx2_cr

namespace avx512 {
// AVX-512 F/BW/VL/DQ, 16 f32 lanes (avx512.cpp). Same contracts as avx2's.
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged);
void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db);
void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end);
}  // namespace avx512

namespace avx512_cr {
// AVX-512, 8 f64 lanes, correctly rounded (avx512_cr.cpp). Same contract as avx2_cr.
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged);
}  // namespace avx512_cr

namespace avx512_bf16 {
// bf16 rows of avx512 / avx512_cr narrowed with AVX512-BF16 (avx512_bf16.cpp): the same bits.
void rows_fast(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged);
void rows_cr(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged);
}  // namespace avx512_bf16

// How often the correctly rounded kernels left their vector path: elements computed, elements settled by the
// scalar f64 test, elements and rows that needed the exact statistics. Each rows() call adds its counts once
// (cr_paths_add, generic code: simd_kernels.cpp); cr_paths() reads the sums over the process, all threads and
// both widths.
struct CrPaths {
  long long elements = 0, medium = 0, exact = 0, exact_rows = 0;
};
void cr_paths_add(const CrPaths& counts);
CrPaths cr_paths();

// The fast kernels' forward driver (simd_kernels.cpp, generic code): parameters staged (params.hpp) when they
// cannot be read in place, rows split over threads, each range given its own f32 row for the quantized epilogue
// (Staged::y_row), then `rows` on each range. The native kernels and their emulated twins
// (tests/simd_emulation.cpp) both go through it.
using FastRowsFn = void (*)(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged);
void staged_forward(const Problem& p, const Tensors& t, FastRowsFn rows);
// The correctly rounded kernels' (gamma/beta staged in f64 once per call, w = C + gamma as w_hi + w_lo; the
// quantized epilogue's row in f64).
using CrRowsFn = void (*)(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged64& staged);
void staged_cr_forward(const Problem& p, const Tensors& t, CrRowsFn rows);

// The scalar welford kernel on one row: the exact-range fallback of the SIMD kernels (welford.cpp).
void welford_row(const Problem& p, const Tensors& t, std::int64_t row);

}  // namespace lnorm::cpu
