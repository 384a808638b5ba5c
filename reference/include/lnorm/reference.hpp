// The exact reference of LayerNorm and RMSNorm: the real-number answer for the inputs as stored, rounded once.
//
// How it stays exact (details in src/exact_row.cpp):
//   - Σx and Σx² are formed exactly in long fixed-point accumulators (src/superaccumulator.hpp);
//   - mean = S/n, n²·var = n·Q − S², and v·n² = W = n²·var + n²·eps are exact dyadic rationals;
//   - y* = β + (n·x − S)·γ / sqrt(W) is compared with any rounding boundary m exactly, by squaring;
//   - a double-double fast path with a proven error bound decides the rounding for almost every
//     element, and the exact comparison settles the rest (near-ties, exact ties, huge/tiny ranges).
// The reference includes only the problem description and the storage types, never a kernel.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "lnorm/format.hpp"
#include "lnorm/problem.hpp"

namespace lnorm {

// What the metrics need of the exact answer at one element.
struct ElementReference {
  double y_hi = 0, y_lo = 0;  // y* ≈ y_hi + y_lo, relative error < 2^-90 (NaN where y* is NaN)
  double z = 0;               // z* = (x − mean)·rstd (x·rstd for RMSNorm), to double precision (NaN where y* is NaN)
  double scale = 0;           // output_scale(...): the size the error is measured against
  // The size the budget's kappa term is measured against, where it differs from scale (< 0: the same). LayerNorm's
  // y on a row with var < eps/3: the mean's rounding costs z about u·kappa absolutely, so its term stays at the
  // floor of 1 (output_scale with floor 1) while the error's own scale floors at rho (below).
  double kappa_scale = -1;
};

// The size an output's error is measured against (docs/DESIGN.md "Measuring error"), w = C + γ:
//   s = |w|·max(floor, |z*|) + |β|
// LayerNorm: floor = rho_floor(rho). x − mean carries the mean's rounding as an absolute error in z: a careful
//   sum of the row errs by about u·(|mean| + spread), which is u·(kappa + rho) in z, rho = sqrt(var/(var + eps)) the
//   z-size of the row's spread. The kappa part is the budget's b·kappa; rho is the floor. It was 1 (rho's value
//   when eps ≪ var), and then on rows with var ≪ eps, where |z*| ≤ rho ≪ 1, y = −y*, y = 0 and eps off by 10x all
//   passed.
// RMSNorm: floor = 0. z = x·rstd is a product, relatively accurate, so a small output is measured against itself
//   (with a floor of 1 an all-zero row of outputs near 1e-27 read 9e-21 ulp and passed).
inline double output_scale(double floor, double abs_w, double abs_z, double abs_beta) {
  return abs_w * (abs_z < floor ? floor : abs_z) + abs_beta;
}

// LayerNorm's floor: rho = sqrt(var/(var + eps)) rounded up to a power of two (at most 1). The power of two keeps
// every row with var ≥ eps/3 (rho > 1/2) at exactly the floor of 1 that the budgets were measured on, where
// rho = 1 − eps/(2·var) would otherwise move an element's scale a binade down for nothing; below it the floor is
// within 2x of rho. A row with var = 0 (constant) has no spread to measure against and keeps the floor of 1 (with
// rho's 0 an output against its exact β = 0 read in ulps of 2^-149); check reports those rows at kappa 0 apart.
inline double rho_floor(double rho) {
  if (!(rho > 0) || rho >= 0.5) return 1;
  int e = 0;
  const double m = std::frexp(rho, &e);  // rho = m·2^e, m in [1/2, 1)
  return m == 0.5 ? rho : std::ldexp(1.0, e);
}

struct RowReference {
  double mean = 0;     // exact mean rounded once to the stats format (NaN for a non-finite row; 0 for RMSNorm)
  double rstd = 0;     // exact 1/sqrt(var + eps) rounded once to the stats format (+Inf if var+eps == 0);
                       // RMSNorm: 1/sqrt(mean(x²) + eps)
  double kappa = 0;    // |mean| / sqrt(var + eps), 0 when var + eps == 0 (NaN for a non-finite row; 0 for RMSNorm)
  double rho = 0;      // sqrt(var / (var + eps)): the z-size of the row's spread, whose rounding to a power of two
                       // is LayerNorm's scale floor (rho_floor); 0 where var + eps == 0 (RMSNorm: mean(x²) for var)
  bool nonfinite = false;          // the row held a NaN or an Inf
  std::int64_t exact_fallbacks = 0;  // elements the fast path could not certify (diagnostics)
};

// Computes reference rows one at a time, reusing its scratch memory. Not thread-safe: use one per
// thread. Problem: its op, dtype, param_dtype, eps and gamma_offset, each used exactly as given (a
// Problem's are already in kernel format); rows, cols and threads are ignored.
class RowReferencer {
 public:
  explicit RowReferencer(const Problem& problem);
  RowReferencer(DType dtype, double eps);  // LayerNorm, params in dtype, no offset
  ~RowReferencer();
  RowReferencer(RowReferencer&&) noexcept;
  RowReferencer& operator=(RowReferencer&&) noexcept;

  // x: n elements of dtype (for Add & Norm: h, n elements of residual_dtype, from add_row); gamma/beta: n elements of param_dtype or null. y_out: n elements of dtype
  // (rounded bits), may be null. elems: n entries, may be null.
  RowReference run(const void* x, const void* gamma, const void* beta, std::int64_t n, void* y_out,
                   ElementReference* elems);

  // sign(y*_i − m) for element i of the row run() last computed, exactly (m finite). Only for an element whose
  // y* is finite (elems' y_hi not NaN: a finite row, finite γ_i and β_i, var + eps > 0). What the quantized
  // outputs round y*/s with (quantize.cpp: m = a grid's midpoint times s).
  int compare(std::int64_t i, double m) const;
  // sign(k·y*_i − m), exactly (k > 0 finite): a threshold m/k that is no double (nvfp4's block scale decides
  // amax*·G/6 against E4M3's midpoints: G·amax* against 6·m).
  int compare_scaled(std::int64_t i, double k, double m) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whole problem, rows split over problem.threads. Writes y, mean, rstd (and h for Add & Norm, when
// tensors.h is given) like a kernel would;
// kappa (rows entries) if non-null.
void reference(const Problem& problem, const Tensors& tensors, double* kappa = nullptr);

}  // namespace lnorm
