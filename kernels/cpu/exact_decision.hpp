// The exact rounding decision of the correctly-rounded (_cr) CPU kernels: one output element of a
// LayerNorm or RMSNorm row rounded once, decided by exact integer arithmetic (no bound, no slack), for
// the rare elements the kernels' f64 and double-double paths cannot settle.
//
// Declarations only: the ISA translation units (-mavx2, -mavx512f) include this header, and code they
// define with external linkage (inline functions, templates) could be picked by the linker for generic
// code (ctest isa_objects_share_no_code). The code is exact_decision.cpp, a generic translation unit.
//
// The math, the reference's (reference/src/exact_row.cpp), all exact:
//   S1 = Σx (LayerNorm; 0 for RMSNorm, whose mean is 0), S2 = Σx², n the row's width,
//   W' = n·S2 − S1² + eps·n² = n²·(var + eps),  D = n·xi − S1,  A = D·w,  y* = A/sqrt(W') + β,
// rounded to nearest, ties to even, overflow to Inf as IEEE, and a zero result carries the sign of y*
// (+0 when y* is exactly 0).
#pragma once

#include <cstdint>

namespace lnorm {
// lnorm/problem.hpp's DType, declared (an opaque enum declaration; exact_decision.cpp includes both, so
// the compiler checks they agree): that header brings <string>, <optional> and inline functions into the
// ISA translation units, this one brings nothing.
enum class DType : std::uint8_t;
}  // namespace lnorm

namespace lnorm::cpu::exact {

// One row's exact sums (opaque; exact_decision.cpp).
struct Row;

// The exact sums of one row, computed now, in a thread_local object owned by exact_decision.cpp: valid
// until this thread's next call of row(). x: n values of `in` as stored (DType::f32, f16 or bf16 bits).
// eps: the f64 eps exactly as given. centred: LayerNorm (true) or RMSNorm (false).
// Preconditions: every x finite, 0 < n < 2^31, eps finite and ≥ 0, W' > 0.
const Row* row(const void* x, DType in, std::int64_t n, double eps, bool centred);

// y* = (n·xi − S1)·(w_hi + w_lo)/sqrt(W') + beta rounded once to `out` (DType::f32, f16 or bf16): the
// bit pattern (f32's in the low 32 bits, f16/bf16's in the low 16). xi, w_hi, w_lo and beta are finite
// and exact as given (w = w_hi + w_lo exactly, w_lo often 0). guess: a bit pattern of `out` near the
// answer, where the search starts (any pattern is correct; a far one costs up to ~2·log2(distance)
// more comparisons). Returns a quiet NaN if W' = 0.
std::uint32_t round_element(const Row* r, DType out, double xi, double w_hi, double w_lo, double beta,
                            std::uint32_t guess);

// sign(y* − m) (−1, 0 or +1) for the element (xi, w_hi + w_lo, beta) of row r, as round_element's
// comparisons: the quantized epilogue's exact decisions (quant_exact.hpp). m finite; precondition W' > 0.
int compare_element(const Row* r, double xi, double w_hi, double w_lo, double beta, double m);
// sign(k·y* − m), k > 0 finite: a threshold m/k that is no double (nvfp4's block scale: G·amax* against 6·midpoint).
int compare_element_scaled(const Row* r, double xi, double w_hi, double w_lo, double beta, double k, double m);

}  // namespace lnorm::cpu::exact
