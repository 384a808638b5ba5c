// avx2's backward rows (layernorm_bwd, rmsnorm_bwd; f32), compiled for AVX2+FMA. Per row, from the
// forward's saved f32 mean and rstd (as PyTorch's and Apex's backward kernels take them), pass 2 of each row
// sharing its column loop with pass 1 of the next:
//   pass 1 (reads x, dy, w):  xhat = (x − mean)·rstd, g = dy·w;  Σg and Σg·xhat in f64 (4 lanes × 2)
//   pass 2 (x, dy, w again, from L1/L2: a 4096-wide row of x and dy is 32 KiB):
//                             dx = rstd·(g − mean(g) − xhat·mean(g·xhat)) in f32, stored; the block's
//                             dgamma += dy·xhat and dbeta += dy in f64.
// DRAM traffic is the copy's: x and dy read once, dx written once (the block partials are 2% more at
// 16384x4096). f64 sums: an 8-lane f32 sum of 4096 terms errs by up to 512 u of Σ|g| (tens of ulps of dx's
// scale typically); in f64 the sums are exact to 2^-40 of an f32 ulp, and what is left is xhat's rounding
// (f32 (x − mean)·rstd: ~1 ulp, plus the saved mean's kappa·u) and dx's own few roundings.
// Speed (bench --dir bwd, 16384x4096 f32, 1 thread, this AVX2 EPYC, 2026-12-02; GB/s and % of the copy in the
// same run, 3 runs each): rows one at a time, LayerNorm 6.7-7.0 GB/s (25-29%), RMSNorm 8.8-9.7 (33-40%);
// pipelined (pass 2 of row r with pass 1 of row r + 1, below) 7.4-8.9 (28-33%) and 11.5-12.7 (43-45%), the same
// bits. Tried and not kept: 4 rows per pass 2 with their dgamma/dbeta partials held in registers (the same
// bits; 21-23%: 16 broadcast constants spill on 16 ymm registers); prefetching the next row during pass 2
// (within noise); streaming stores for dx (within noise). Without the f64 partials at all (a measurement only)
// rows one at a time reached 32-33%: they are a fifth of the time.
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

// One row's statistics as the fast path uses them, and pass 1's f64 sums of g and g·xhat (4 lanes × 2 each).
struct Row {
  float mean = 0, rstd = 0;
  __m256d g_lo, g_hi, gx_lo, gx_hi;
  float mean_g = 0, mean_gx = 0;
};

// Whether row r's saved statistics can be used (else it is the careful row's). Not finite, or an rstd of 0,
// subnormal or +Inf (var + eps past f32's range: subnormal rows with eps = 0, rows near overflow): the careful
// scalar row recomputes them (and gives the NaN row a NaN or Inf in x asks for). A subnormal rstd (rows near
// f32's largest values) has lost bits to the rounding that saved it: xhat would err by its relative spacing
// (measured: dx 9.4 scaled ulp on a row of 3e38 values).
inline bool start_row(const BackwardRows& a, std::int64_t r, Row& row) {
  row.mean = a.centred ? a.mean[r] : 0.0f;
  row.rstd = a.rstd[r];
  row.g_lo = row.g_hi = row.gx_lo = row.gx_hi = _mm256_setzero_pd();
  return std::isfinite(row.mean) && std::isfinite(row.rstd) && row.rstd >= 0x1p-126f;
}

// Pass 1 on 8 lanes: xhat = (x − mean)·rstd, g = dy·w; Σg and Σg·xhat in f64.
inline void pass1(Row& row, __m256 vx, __m256 vdy, __m256 vw) {
  const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(vx, _mm256_set1_ps(row.mean)), _mm256_set1_ps(row.rstd));
  const __m256 g = _mm256_mul_ps(vdy, vw);
  add_f64(row.g_lo, row.g_hi, g);
  add_f64(row.gx_lo, row.gx_hi, _mm256_mul_ps(g, xhat));
}

// After pass 1: mean(g) and mean(g·xhat) for pass 2, or false when a sum is not finite (x − mean overflowed
// f32 on rows spanning ±max, or dy/gamma hold a NaN or Inf): the careful row decides it, before any partial
// of this row was added.
inline bool finish_row(const BackwardRows& a, Row& row) {
  const double sg = sum_f64(row.g_lo) + sum_f64(row.g_hi), sgx = sum_f64(row.gx_lo) + sum_f64(row.gx_hi);
  if (!std::isfinite(sg) || !std::isfinite(sgx)) return false;
  const double inv_n = 1.0 / static_cast<double>(a.cols);
  row.mean_g = a.centred ? static_cast<float>(sg * inv_n) : 0.0f;
  row.mean_gx = static_cast<float>(sgx * inv_n);
  return true;
}

}  // namespace

// Rows are pipelined: pass 2 of row r runs in the same column loop as pass 1 of row r + 1, so the DRAM reads of
// the next row overlap the arithmetic of this one (one row at a time left DRAM idle during pass 2). Each row's
// arithmetic and the order of its partials are what they were one row at a time: the same bits.
void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  const std::int64_t n = a.cols;
  const std::int64_t full = n / 8 * 8;
  const __m256 ones = _mm256_set1_ps(1.0f);
  const auto load = [](const float* p, std::int64_t k) { return k == 8 ? _mm256_loadu_ps(p) : load_tail(p, k); };
  // Pass 1 of row r alone (the first row of the range).
  const auto pass1_row = [&](std::int64_t r, Row& row) {
    if (!start_row(a, r, row)) return false;
    for (std::int64_t i = 0; i < n; i += 8) {
      const std::int64_t k = n - i < 8 ? n - i : 8;
      pass1(row, load(static_cast<const float*>(a.x) + r * n + i, k), load(static_cast<const float*>(a.dy) + r * n + i, k),
            a.w ? load(a.w + i, k) : ones);
    }
    return finish_row(a, row);
  };
  Row cur, next;
  bool cur_ok = pass1_row(r0, cur);
  for (std::int64_t r = r0; r < r1; ++r) {
    const bool has_next = r + 1 < r1;
    bool next_started = has_next && start_row(a, r + 1, next);
    if (!cur_ok) {
      a.careful_row(a, r, dg, db);
      if (has_next) cur_ok = pass1_row(r + 1, next), cur = next;
      continue;
    }
    const float* x = static_cast<const float*>(a.x) + r * n;
    const float* dy = static_cast<const float*>(a.dy) + r * n;
    float* dx = static_cast<float*>(a.dx) + r * n;
    const __m256 vmean = _mm256_set1_ps(cur.mean), vrstd = _mm256_set1_ps(cur.rstd);
    const __m256 vmg = _mm256_set1_ps(cur.mean_g), vmgx = _mm256_set1_ps(cur.mean_gx);
    // dx, and the block's dgamma += dy·xhat and dbeta += dy in f64, for lanes [at, at + k); with pass 1 of the
    // next row on the same lanes.
    const auto step = [&](std::int64_t at, std::int64_t k) {
      const __m256 vw = a.w ? load(a.w + at, k) : ones;
      if (next_started) pass1(next, load(x + n + at, k), load(dy + n + at, k), vw);
      const __m256 vx = load(x + at, k), vdy = load(dy + at, k);
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
    std::int64_t i = 0;
    for (; i < full; i += 8) step(i, 8);
    if (i < n) step(i, n - i);
    if (has_next) cur_ok = next_started && finish_row(a, next), cur = next;
  }
}

}  // namespace lnorm::cpu::avx2
