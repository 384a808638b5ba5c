// avx2's backward rows (layernorm_bwd, rmsnorm_bwd; f32), compiled for AVX2+FMA. Per row, from the
// forward's saved f32 mean and rstd (as PyTorch's and Apex's backward kernels take them):
//   pass 1 (reads x, dy, w):  xhat = (x − mean)·rstd, g = dy·w;  Σg and Σg·xhat in f64 (4 lanes × 2)
//   pass 2 (x, dy, w again, from L1/L2: a 4096-wide row of x and dy is 32 KiB):
//                             dx = rstd·(g − mean(g) − xhat·mean(g·xhat)) in f32, stored; the block's
//                             dgamma += dy·xhat and dbeta += dy in f64.
// DRAM traffic is the copy's: x and dy read once, dx written once (the block partials are 2% more at
// 16384x4096). f64 sums: an 8-lane f32 sum of 4096 terms errs by up to 512 u of Σ|g| (tens of ulps of dx's
// scale typically); in f64 the sums are exact to 2^-40 of an f32 ulp, and what is left is xhat's rounding
// (f32 (x − mean)·rstd: ~1 ulp, plus the saved mean's kappa·u) and dx's own few roundings.
// Speed (bench --dir bwd, 16384x4096 f32, 1 thread, this AVX2 EPYC, 2026-12-02; % of the copy in the same run):
// 25-29% as written. Tried and not kept: 4 rows per pass 2 with their dgamma/dbeta partials held in registers
// (the same bits; 21-23%: 16 broadcast constants spill on 16 ymm registers); prefetching the next row's x and
// dy during pass 2 (27-34%, within this machine's noise); streaming stores for dx (24-28%). Without the f64
// partials at all it reaches 32-33%: they are a fifth of the time, and most of the rest is pass 1's wait on
// DRAM (perf: the loads of dy in pass 1 are the hottest instructions).
// Generic code (the block reduction, threads, staging w) is in avx2_kernel.cpp; this file holds no
// template or inline function shared with it (isa_objects_share_no_code).
#include <immintrin.h>

#include <cmath>

#include "isa.hpp"

namespace lnorm::cpu::avx2 {

namespace {

// Adds the 8 f32 lanes of v to the f64 accumulators lo (lanes 0-3) and hi (lanes 4-7).
inline void add_f64(__m256d& lo, __m256d& hi, __m256 v) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
inline double sum_f64(__m256d a) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
// Lanes [0, k) of a row, the rest 0 (the tail of a row whose width is not a multiple of 8).
inline __m256 load_tail(const float* p, std::int64_t k) {
  alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::int64_t i = 0; i < k; ++i) buf[i] = p[i];
  return _mm256_load_ps(buf);
}

}  // namespace

void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  const std::int64_t n = a.cols;
  const std::int64_t full = n / 8 * 8;
  const __m256 ones = _mm256_set1_ps(1.0f);
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* x = a.x + r * n;
    const float* dy = a.dy + r * n;
    float* dx = a.dx + r * n;
    const float mean = a.centred ? a.mean[r] : 0.0f, rstd = a.rstd[r];
    // Saved statistics that are not finite, or an rstd of 0, subnormal or +Inf (var + eps past f32's range:
    // subnormal rows with eps = 0, rows near overflow): the careful scalar row, which recomputes them (and
    // gives the NaN row a NaN or Inf in x asks for).
    // A subnormal rstd (rows near f32's largest values) has lost bits to the rounding that saved it: xhat
    // would err by its relative spacing (measured: dx 9.4 scaled ulp on a row of 3e38 values).
    if (!std::isfinite(mean) || !std::isfinite(rstd) || !(rstd >= 0x1p-126f)) {
      a.careful_row(a, r, dg, db);
      continue;
    }
    const __m256 vmean = _mm256_set1_ps(mean), vrstd = _mm256_set1_ps(rstd);
    __m256d g_lo = _mm256_setzero_pd(), g_hi = g_lo, gx_lo = g_lo, gx_hi = g_lo;
    const auto pass1 = [&](__m256 vx, __m256 vdy, __m256 vw) {
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(vx, vmean), vrstd);
      const __m256 g = _mm256_mul_ps(vdy, vw);
      add_f64(g_lo, g_hi, g);
      add_f64(gx_lo, gx_hi, _mm256_mul_ps(g, xhat));
    };
    std::int64_t i = 0;
    for (; i < full; i += 8) pass1(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i), a.w ? _mm256_loadu_ps(a.w + i) : ones);
    if (i < n) pass1(load_tail(x + i, n - i), load_tail(dy + i, n - i), a.w ? load_tail(a.w + i, n - i) : ones);
    const double sg = sum_f64(g_lo) + sum_f64(g_hi), sgx = sum_f64(gx_lo) + sum_f64(gx_hi);
    // A non-finite sum from finite statistics: x − mean overflowed f32 (rows spanning ±max), or dy/gamma hold
    // a NaN or Inf. The careful row decides it (before any partial of this row was added).
    if (!std::isfinite(sg) || !std::isfinite(sgx)) {
      a.careful_row(a, r, dg, db);
      continue;
    }
    const double inv_n = 1.0 / static_cast<double>(n);
    const __m256 vmg = _mm256_set1_ps(a.centred ? static_cast<float>(sg * inv_n) : 0.0f);
    const __m256 vmgx = _mm256_set1_ps(static_cast<float>(sgx * inv_n));
    // dx, and the block's dgamma += dy·xhat and dbeta += dy in f64, for lanes [i, i + k).
    const auto pass2 = [&](__m256 vx, __m256 vdy, __m256 vw, std::int64_t at, std::int64_t k) {
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(vx, vmean), vrstd);
      // g − mean(g) − xhat·mean(g·xhat): one FMA for the last two terms, then rstd.
      const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(vdy, vw), _mm256_fmadd_ps(xhat, vmgx, vmg)), vrstd);
      alignas(32) float out[8];
      alignas(32) double t[8];
      if (k == 8) {
        _mm256_storeu_ps(dx + at, v);
      } else {
        _mm256_store_ps(out, v);
        for (std::int64_t j = 0; j < k; ++j) dx[at + j] = out[j];
      }
      for (int which = 0; which < 2; ++which) {
        double* acc = which == 0 ? dg : db;
        if (!acc) continue;
        const __m256 p = which == 0 ? _mm256_mul_ps(vdy, xhat) : vdy;
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(p)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1));
        if (k == 8) {
          _mm256_storeu_pd(acc + at, _mm256_add_pd(_mm256_loadu_pd(acc + at), lo));
          _mm256_storeu_pd(acc + at + 4, _mm256_add_pd(_mm256_loadu_pd(acc + at + 4), hi));
        } else {
          _mm256_store_pd(t, lo);
          _mm256_store_pd(t + 4, hi);
          for (std::int64_t j = 0; j < k; ++j) acc[at + j] += t[j];
        }
      }
    };
    for (i = 0; i < full; i += 8) pass2(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i), a.w ? _mm256_loadu_ps(a.w + i) : ones, i, 8);
    if (i < n) pass2(load_tail(x + i, n - i), load_tail(dy + i, n - i), a.w ? load_tail(a.w + i, n - i) : ones, i, n - i);
  }
}

}  // namespace lnorm::cpu::avx2
