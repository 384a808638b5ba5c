// The row statistics of cuda_warp and cuda_block, written once for the device and the host: the
// kernels (group.cu, block.cu) run it per thread on the GPU, and tests/cuda_emulation.hpp runs the very
// same code on the CPU with every lane emulated, so the algorithm is verified (`lnorm verify`'s
// properties, the exact reference) on machines without a GPU. Plain C++ when not compiled by nvcc.
//
// A shifted, corrected three-pass scheme on a row that stays on chip (registers or shared memory),
// so the extra passes cost arithmetic, not DRAM traffic:
//   A: s = Σ (x − x0)            centre = x0 + s/n      (f64, rounded once to f32)
//   B: c = Σ (x − centre)        lo = c/n               (centre's rounding error: Chan, Golub & LeVeque)
//   C: q = Σ ((x − centre) − lo)²                       var = q/n
//   y = ((x − centre) − lo) · rstd · γ + β,   rstd = 1/sqrt(var + eps) in f64, rounded once
// x − centre is exact on offset rows (Sterbenz), so no kappa term; a constant row gives s = 0,
// centre = x0, every difference 0 and y = β exactly; on exact-statistics rows (every partial sum
// representable) centre is the mean and c = 0, so the mean is exact. This is kernels/cpu/simd_body.hpp's
// scheme with a third pass instead of var = q/n − lo² (no cancellation when x0 is an outlier).
// Range, NaN and Inf follow kernels/cpu/welford.cpp and scalar_rows.hpp:
//   - a NaN or Inf anywhere in the row makes y, mean and rstd NaN for that row;
//   - when max |x − x0| leaves [2^-40, 2^40] (squares would overflow or underflow f32) the row is
//     redone on x·2^k (exact), the power chosen from max |x − x0| (or 2·max |x| when that overflows),
//     and rstd = 1/sqrt(var·2^-2k + eps) is reported in the row's own units.
// RMSNorm (centred = false): the same passes with the mean taken as 0: x0 = 0, no pass B (lo = 0), q = Σ x²
// (scaled by the same exact 2^k when max |x| leaves the safe range), rstd = 1/sqrt(q/n + eps); mean 0.
// Every multiply-add that nvcc could contract is written as fmaf (or has an exact product), so the
// host emulation computes the device's bits.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LNORM_HD __host__ __device__ __forceinline__
#else
#define LNORM_HD inline
#endif

namespace lnorm::cuda::rowstats {

// As welford.cpp's kSafeMax/kSafeMin for f32: squares of the spread summed over 2^31 elements stay
// finite and normal.
inline constexpr float kSafeMax = 0x1p40f, kSafeMin = 0x1p-40f;
inline constexpr float kFloatMax = 3.40282347e38f;

struct RowResult {
  float centre, lo;  // the two-float centre, in the scaled domain
  float scale;       // x is used as x·scale
  float rstd_y;      // multiplies (x·scale − centre) − lo
  float mean, rstd;  // what is reported, in the row's own units
  // RMSNorm rows scaled down (near overflow): an element whose x·scale falls among the subnormals takes
  // (x·rstd_y)·scale instead (normalize), as kernels/cpu/scalar_rows.hpp does.
  bool product_first = false;
};

// False for NaN and ±Inf (no isfinite: its host and device spellings differ).
LNORM_HD bool finite(float x) { return fabsf(x) <= kFloatMax; }

// The exact power of two that brings a spread of raw_max into [1, 2), kept a normal f32
// (as welford.cpp: subnormal rows need up to 2^149, clamped to 2^126).
LNORM_HD float range_scale(float raw_max) {
  const int e = ilogbf(raw_max);
  return ldexpf(1.0f, e > 126 ? -126 : e < -126 ? 126 : -e);
}

LNORM_HD bool out_of_range(float max_abs) { return max_abs != 0.0f && !(max_abs >= kSafeMin && max_abs <= kSafeMax); }

LNORM_HD RowResult poisoned_row() {
  const float nan = NAN;
  return RowResult{0.0f, 0.0f, 1.0f, nan, nan, nan};
}

// One output element: ((x·scale − centre) − lo)·rstd·γ + β, γ/β applied when present. On an RMSNorm row scaled
// down, an x·scale below f32's normal range has lost bits that rstd·γ would amplify (6.6 ulps of a subnormal
// output, measured against itself by RMSNorm's metric): x·rstd_y first there (x is small: no overflow), so the
// rounding into the subnormals is the last one.
LNORM_HD float normalize(float x, const RowResult& r, bool has_gamma, float g, bool has_beta, float b) {
  const float xs = x * r.scale;
  const float t = r.product_first && fabsf(xs) < 0x1p-126f ? (x * r.rstd_y) * r.scale : ((xs - r.centre) - r.lo) * r.rstd_y;
  if (has_gamma && has_beta) return fmaf(t, g, b);
  if (has_gamma) return t * g;
  if (has_beta) return t + b;
  return t;
}

// Row: this thread's share of one row, and the reductions over all threads of the row.
//   Row::kSlots                      accumulator slots: 1 on the device (this thread), one per
//                                    emulated thread on the host
//   void each(F f)                   f(slot, x) for each of the thread's elements, in its order
//   double sum(const float* slots)   the row-wide sum (in f64) / max of the slots' values, in the
//   float max(const float* slots)    device's reduction order; every thread gets the same value
//   bool any(const bool* slots)
template <class Row>
LNORM_HD RowResult row_statistics(const Row& row, float x0, std::int64_t n, float eps, bool centred = true) {
  if (!centred) x0 = 0.0f;
  constexpr int kSlots = Row::kSlots;
  float s[kSlots], spread[kSlots], c[kSlots], q[kSlots];
  bool bad[kSlots];
  for (int i = 0; i < kSlots; ++i) {
    s[i] = spread[i] = c[i] = q[i] = 0.0f;
    bad[i] = false;
  }
  // Pass A: Σ (x − x0), max |x − x0|, and whether any element is NaN or Inf.
  row.each([&](int i, float e) {
    bad[i] = bad[i] || !finite(e);
    s[i] += e - x0;
    spread[i] = fmaxf(spread[i], fabsf(e - x0));
  });
  if (row.any(bad)) return poisoned_row();
  // Each thread sums its own elements in f32 (at most 64 of them in cuda_warp, ~8 vectors in
  // cuda_block); across threads the partials are added in f64. Measured on the CPU emulation
  // (tests/test_cuda_emulation.cpp, quick verify suite): with f32 across threads too, cuda_block's
  // rstd erred by 7 ulps (budget 6) on a 4097-wide sparse row: 1024 partials through 5 butterfly
  // levels and a 32-step fold.
  double sum_a = row.sum(s);
  float max_spread = row.max(spread);
  float scale = 1.0f, shift = x0;
  if (out_of_range(max_spread)) {  // rare: rows near overflow, subnormal spreads
    if (!finite(max_spread)) {     // x − x0 overflowed: bound it by 2·max |x|
      row.each([&](int i, float e) { c[i] = fmaxf(c[i], fabsf(e)); });
      max_spread = 2.0f * row.max(c);
      if (!finite(max_spread)) max_spread = kFloatMax;
      for (int i = 0; i < kSlots; ++i) c[i] = 0.0f;
    }
    scale = range_scale(max_spread);
    shift = x0 * scale;
    for (int i = 0; i < kSlots; ++i) s[i] = 0.0f;
    row.each([&](int i, float e) { s[i] += e * scale - shift; });  // e·scale is exact: no fma question
    sum_a = row.sum(s);
  }
  const double nd = static_cast<double>(n);
  const float centre = centred ? static_cast<float>(static_cast<double>(shift) + sum_a / nd) : 0.0f;
  // Pass B: the centre's rounding error (LayerNorm only).
  if (centred) row.each([&](int i, float e) { c[i] += e * scale - centre; });
  const float lo = centred ? static_cast<float>(row.sum(c) / nd) : 0.0f;
  // Pass C: Σ d² about the two-float centre.
  row.each([&](int i, float e) {
    const float d = (e * scale - centre) - lo;
    q[i] = fmaf(d, d, q[i]);
  });
  // eps·scale² and rstd in f64: no overflow for scales up to 2^126, and rstd is rounded once.
  const double var = row.sum(q) / nd;
  const double sc = scale;
  const double rs = 1.0 / sqrt(var + static_cast<double>(eps) * sc * sc);
  RowResult r;
  r.centre = centre;
  r.lo = lo;
  r.scale = scale;
  r.rstd_y = static_cast<float>(rs);
  r.rstd = static_cast<float>(rs * sc);
  r.mean = centred ? static_cast<float>((static_cast<double>(centre) + static_cast<double>(lo)) / sc) : 0.0f;
  r.product_first = !centred && scale < 1.0f;
  return r;
}

}  // namespace lnorm::cuda::rowstats
