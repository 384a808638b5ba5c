// The correctly rounded kernels' quantized epilogue: q = Q(y*/s) and the scales of the exact y* (lnorm/quant.hpp's
// contract, the reference's answer bit for bit), from the kernel's f64 approximations of y* and their proven bound,
// an exact decision (exact_decision.hpp compare_element) where the bound cannot settle one:
//   row, group:G   s = f32(amax*/qmax): the candidate from the approximations' amax, moved one f32 step while amax*
//                  lies beyond the midpoint to its neighbour (ties to even); amax* against a threshold T is decided
//                  per element by the bound, and exactly for the elements within it of T. 0 (below f32's range)
//                  and amax* = 0 give 1 (lnorm/quant.hpp).
//   mx             X = floor(log2 amax*) − emax_elem, clamped to [−127, 127]: the same walk over powers of two.
//   q              t = y/s in f64 with the bound moved to it: Q(t − e) = Q(t + e) settles the code (Q is monotone and
//                  rounds an interval of values to each code, so both ends agreeing settles everything between);
//                  otherwise the grid's midpoints between them times s — exact products, ≤ 9 significant bits
//                  times an f32 — against y* exactly, ties to even; a zero code takes y*'s sign (+0 for y* = 0).
// Declared here, defined in quant_exact.cpp (generic code: the ISA TUs call it; ctest isa_objects_share_no_code).
#pragma once

#include <cstdint>

#include "lnorm/problem.hpp"

namespace lnorm::cpu {

// One row as the exact decision needs it.
struct ExactQuantRow {
  const double* y = nullptr;  // n approximations of y*, |y_i − y*_i| ≤ e_abs + e_rel·|y_i|
  double e_abs = 0, e_rel = 0;
  std::int64_t n = 0;
  const void* x = nullptr;  // the row's x as the statistics read it (x, or Add & Norm's h), in x_dtype
  DType x_dtype = DType::f32;
  double eps = 0;
  bool centred = true;  // LayerNorm; false: RMSNorm
  const double* w_hi = nullptr;  // w = w_hi + w_lo (C + gamma), beta: n each, staged in f64; null: 1, 0, 0
  const double* w_lo = nullptr;
  const double* beta = nullptr;
  // Optional, from an ISA kernel (simd_quant_exact.hpp settle_codes): codes[0, n) of y[0, n) in groups of G, group g
  // over the scale s[g] (G = n, or a multiple of 16: no vector of the ISA's lanes holds two groups), and bit i of
  // settled[i / 64] set where the bound settles code i; the others take the exact path. Null: all element by element.
  using SettleCodes = void (*)(QuantFormat f, const double* y, std::int64_t n, std::int64_t G, const double* s,
                               double e_abs, double e_rel, std::uint8_t* codes, std::uint64_t* settled);
  SettleCodes settle = nullptr;
  // Optional, from an ISA kernel (simd_cr_rows.hpp group_max_abs): max |y_i| of each group of G in y[0, n) into
  // amax[n / G], a NaN dropped. Null: a scalar pass. The amax* bounds are formed from it (quant_exact.cpp
  // Decider::bounds_of).
  using MaxAbsFn = void (*)(const double* y, std::int64_t n, std::int64_t G, double* amax);
  MaxAbsFn max_abs = nullptr;
  // max |y_i| over the whole row (a NaN dropped) where the caller took it while forming y; −1: not taken. A group
  // that is the whole row (row scaling) uses it.
  double row_amax = -1;
  // True where the caller knows y holds no NaN (finite statistics and parameters: the _cr rows): the groups' NaN
  // scan, a scalar pass over the row (a quarter of the epilogue), is skipped.
  bool no_nan = false;
};

// Row `row`'s q and scales (q and scales the whole tensor's, indexed as quantize_row's).
void quantize_row_exact(const QuantSpec& spec, const ExactQuantRow& r, std::uint8_t* q, void* scales, std::int64_t row);

}  // namespace lnorm::cpu
