// avx2's backward rows (layernorm_bwd, rmsnorm_bwd; f32, f16 and bf16 storage, f32 math), compiled for
// AVX2+FMA+F16C: avx512_backward_body.hpp's algorithm on 8 lanes (its header has the derivations), from the
// forward's saved f32 mean m and rstd with the mean made exact:
//   pass 1 (reads x, dy, w):  d = x − m, g = dy·w, u = d·rstd in f32;  Σd, Σg (LayerNorm) and Σg·u in f64;
//                             max|g|, max|dy| and whether a dy is subnormal (the range checks)
//                             mean_lo = Σd/n, mean(g·xhat) = (Σg·u − mean_lo·rstd·Σg)/n
//   pass 2 (x, dy, w again, from L1/L2):  xhat = fma(d, rstd, −mean_lo·rstd),
//                             dx = rstd·(g − mean(g) − xhat·mean(g·xhat)) in f32 (RMSNorm: rstd·g −
//                             xhat·(rstd·mean(g·xhat))), rounded once to x's dtype
//                             (f16 by vcvtps2ph, bf16 by integer round-to-nearest-even) and stored
//                             (non-temporal past 8 MiB);
//                             the block's dgamma += dy·xhat and dbeta += dy in f64.
// Pass 2 of row r shares its column loop with pass 1 of row r + 1 (the next row's DRAM reads overlap this row's
// arithmetic), whose loads are prefetched kAheadBytes ahead. No kappa term: x − m is exact in f32 on offset rows
// and the f64 Σd gives the rest of the mean (the version before this one, from the saved f32 mean alone, read
// 2.4e5 scaled ulp on dx at kappa ~2e5). Rows the fast path declines go to a.careful_row (welford's careful
// scalar row) in their turn: saved statistics not finite or rstd 0, subnormal or +Inf; sums not finite;
// (2 + sqrt(n))·max(max|g|·max(1, rstd), max|dy|) ≥ 2^126 (f32 would overflow where dx is finite); 0 < max|g| < 2^-90 or a
// subnormal dy (f32 would round g and dy·xhat on the 2^-149 grid); max|dy| ≥ 2^64; RMSNorm rows with a subnormal x
// or rstd < 2^-60 — avx512_backward_body.hpp says why each.
// Speed history and what limits it: docs/performance.md "Backward".
// Generic code (the block reduction, threads, staging w) is in backward_simd.cpp; this file holds no template or
// inline function shared with it (isa_objects_share_no_code).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "isa.hpp"
#include "storage_tags.hpp"

namespace lnorm::cpu::avx2 {

namespace {

// Bytes ahead of the next row's loads that its lines are prefetched: avx512's kAheadBytes (measured there).
constexpr std::int64_t kAheadBytes = 8192;

inline void add_f64(__m256d& lo, __m256d& hi, __m256 v) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
inline double sum_f64(__m256d a) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
inline float max_lane(__m256 a) {
  alignas(32) float l[8];
  _mm256_store_ps(l, a);
  float m = l[0];
  for (int i = 1; i < 8; ++i) m = l[i] > m ? l[i] : m;
  return m;
}
inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }
// Lanes [0, k) of a row, the rest +0 (the tail of a row whose width is not a multiple of 8).
inline __m256 load_tail(const float* p, std::int64_t k) {
  alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::int64_t i = 0; i < k; ++i) buf[i] = p[i];
  return _mm256_load_ps(buf);
}
inline __m256 load(const float* p, std::int64_t k) { return k == 8 ? _mm256_loadu_ps(p) : load_tail(p, k); }

using storage::BF16;
using storage::F16;
using storage::F32;

inline __m256 widen16(F16, __m128i h) { return _mm256_cvtph_ps(h); }
inline __m256 widen16(BF16, __m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
// Lanes [0, k) of a row of T as f32, the rest +0 (k = 8: a whole vector).
template <class T>
inline __m256 load_as_f32(const typename T::Bits* p, std::int64_t k) {
  if constexpr (std::is_same_v<T, F32>) {
    return load(p, k);
  } else {
    if (k == 8) return widen16(T{}, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    alignas(16) std::uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::int64_t i = 0; i < k; ++i) buf[i] = p[i];
    return widen16(T{}, _mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  }
}
// Eight f32 values rounded once to eight 16-bit elements, nearest even (bf16: a NaN keeps its top half, quiet).
inline __m128i narrow16(F16, __m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
inline __m128i narrow16(BF16, __m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i inc = _mm256_and_si256(_mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_ORD_Q)));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, inc), 16);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}
// dx's lanes [0, k) stored as T (stream: non-temporal, p aligned to a whole vector).
template <class T>
inline void store_from_f32(typename T::Bits* p, __m256 v, std::int64_t k, bool stream) {
  if constexpr (std::is_same_v<T, F32>) {
    if (k == 8) {
      if (stream) _mm256_stream_ps(p, v);
      else _mm256_storeu_ps(p, v);
      return;
    }
    alignas(32) float out[8];
    _mm256_store_ps(out, v);
    for (std::int64_t j = 0; j < k; ++j) p[j] = out[j];
  } else {
    const __m128i h = narrow16(T{}, v);
    if (k == 8) {
      if (stream) _mm_stream_si128(reinterpret_cast<__m128i*>(p), h);
      else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
      return;
    }
    alignas(16) std::uint16_t out[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), h);
    for (std::int64_t j = 0; j < k; ++j) p[j] = out[j];
  }
}
inline const void* ahead(const void* p) { return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + kAheadBytes); }

// One row's pass-1 sums (locals of the column loop: registers).
struct Sums {
  __m256d d_lo, d_hi, g_lo, g_hi, gu_lo, gu_hi;
  __m256 max_g, max_dy, sub_dy;  // sub_dy: lanes that saw a subnormal dy, or (RMSNorm) x (all ones)
};
inline Sums zero_sums() {
  const __m256d z = _mm256_setzero_pd();
  const __m256 zf = _mm256_setzero_ps();
  return {z, z, z, z, z, z, zf, zf, zf};
}

// A row's statistics for pass 2.
struct Row {
  float m = 0, rstd = 0, shift = 0, mean_g = 0, mean_gx = 0;
  float rstd_mean_gx = 0;  // rstd·mean(g·xhat), rounded once from f64: RMSNorm's dx = rstd·g − xhat·(rstd·mean(g·xhat))
};

inline bool start_row(const BackwardRows& a, std::int64_t r, Row& row) {
  row.m = a.centred ? a.mean[r] : 0.0f;
  row.rstd = a.rstd[r];
  return std::isfinite(row.m) && std::isfinite(row.rstd) && row.rstd >= 0x1p-126f;
}

// Pass 1 on 8 lanes (+0 past the row in every operand: d is +0 there since x and m are masked by the caller).
inline void pass1(Sums& s, bool centred, __m256 d, __m256 vdy, __m256 vw, __m256 vrstd) {
  const __m256 g = _mm256_mul_ps(vdy, vw);
  const __m256 ady = abs_ps(vdy);
  s.max_g = _mm256_max_ps(s.max_g, abs_ps(g));
  s.max_dy = _mm256_max_ps(s.max_dy, ady);
  // Subnormal: 0 < |dy| < 2^-126.
  s.sub_dy = _mm256_or_ps(s.sub_dy, _mm256_and_ps(_mm256_cmp_ps(ady, _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ),
                                                   _mm256_cmp_ps(ady, _mm256_setzero_ps(), _CMP_GT_OQ)));
  if (centred) {
    add_f64(s.d_lo, s.d_hi, d);
    add_f64(s.g_lo, s.g_hi, g);
  } else {  // RMSNorm: a subnormal x too (d = x): avx512_backward_body.hpp says why
    const __m256 ax = abs_ps(d);
    s.sub_dy = _mm256_or_ps(s.sub_dy, _mm256_and_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ),
                                                     _mm256_cmp_ps(ax, _mm256_setzero_ps(), _CMP_GT_OQ)));
  }
  add_f64(s.gu_lo, s.gu_hi, _mm256_mul_ps(g, _mm256_mul_ps(d, vrstd)));
}

// After pass 1: mean(g), mean(g·xhat) and xhat's shift, or false for the careful row.
inline bool finish_row(const BackwardRows& a, const Sums& s, Row& row) {
  const double sd = a.centred ? sum_f64(s.d_lo) + sum_f64(s.d_hi) : 0.0;
  const double sg = a.centred ? sum_f64(s.g_lo) + sum_f64(s.g_hi) : 0.0, sgu = sum_f64(s.gu_lo) + sum_f64(s.gu_hi);
  if (!std::isfinite(sd) || !std::isfinite(sg) || !std::isfinite(sgu)) return false;
  const float max_g = max_lane(s.max_g), max_dy = max_lane(s.max_dy);
  const double nd = static_cast<double>(a.cols);
  const double rs = static_cast<double>(row.rstd), g_terms = static_cast<double>(max_g) * (rs > 1 ? rs : 1.0);
  if (!((2.0 + std::sqrt(nd)) * (g_terms > max_dy ? g_terms : static_cast<double>(max_dy)) < 0x1p126)) return false;
  if ((max_g != 0.0f && max_g < 0x1p-90f) || _mm256_movemask_ps(s.sub_dy) != 0) return false;
  // Huge dy: dy·xhat (dgamma) and xhat·mean(g·xhat) multiply xhat's rounding on f32's subnormal grid by |dy|, and
  // an xhat below 2^-149 is lost where dy·xhat is not (RMSNorm's metric measures such a dgamma against itself).
  if (max_dy >= 0x1p64f) return false;
  const double inv_n = 1.0 / nd, rstd = static_cast<double>(row.rstd);
  const double mean_lo = sd * inv_n;
  const double mean_gx = (sgu - mean_lo * rstd * sg) * inv_n;
  row.mean_gx = static_cast<float>(mean_gx);
  row.rstd_mean_gx = static_cast<float>(rstd * mean_gx);
  // RMSNorm rows with rstd < 2^-60 (values past 2^60: verify's raw-bits rows): their small elements' xhat = x·rstd
  // falls on the subnormal grid, and dgamma's dy·xhat of such a column (measured against itself) lost 4.9 ulps.
  if (!a.centred && rs < 0x1p-60) return false;
  row.mean_g = a.centred ? static_cast<float>(sg * inv_n) : 0.0f;
  row.shift = static_cast<float>(-mean_lo * rstd);
  return std::isfinite(row.mean_gx) && std::isfinite(row.shift);
}

template <class T>
void rows_of(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  using B = typename T::Bits;
  if (r0 >= r1) return;
  const std::int64_t n = a.cols;
  const B* xs = static_cast<const B*>(a.x);
  const B* dys = static_cast<const B*>(a.dy);
  B* dxs = static_cast<B*>(a.dx);
  const float* w = a.w;  // ones without gamma (backward_simd.cpp)
  const bool centred = a.centred;
  // d = x − m (RMSNorm: x) on lanes [0, k), +0 past the row (where the tail's x was loaded as +0).
  const auto diff = [centred](__m256 vx, __m256 vm, std::int64_t k) {
    if (!centred) return vx;
    const __m256 d = _mm256_sub_ps(vx, vm);
    if (k == 8) return d;
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_and_ps(d, _mm256_castsi256_ps(lanes));
  };
  const auto pass1_row = [&](std::int64_t r, Row& row) {
    if (!start_row(a, r, row)) return false;
    Sums s = zero_sums();
    const __m256 vr = _mm256_set1_ps(row.rstd), vm = _mm256_set1_ps(row.m);
    for (std::int64_t i = 0; i < n; i += 8) {
      const std::int64_t k = n - i < 8 ? n - i : 8;
      pass1(s, centred, diff(load_as_f32<T>(xs + r * n + i, k), vm, k), load_as_f32<T>(dys + r * n + i, k), load(w + i, k), vr);
    }
    return finish_row(a, s, row);
  };
  Row cur, next;
  bool cur_ok = pass1_row(r0, cur);
  for (std::int64_t r = r0; r < r1; ++r) {
    const bool has_next = r + 1 < r1;
    if (!cur_ok) {
      a.careful_row(a, r, dg, db);
      if (has_next) cur_ok = pass1_row(r + 1, next), cur = next;
      continue;
    }
    const bool next_started = has_next && start_row(a, r + 1, next);
    const B* x = xs + r * n;
    const B* dy = dys + r * n;
    B* dx = dxs + r * n;
    const bool stream = a.stream_dx && reinterpret_cast<std::uintptr_t>(dx) % (8 * sizeof(B)) == 0;
    const __m256 vrstd = _mm256_set1_ps(cur.rstd), vshift = _mm256_set1_ps(cur.shift);
    const __m256 vmg = _mm256_set1_ps(cur.mean_g), vmgx = _mm256_set1_ps(cur.mean_gx), vrmgx = _mm256_set1_ps(cur.rstd_mean_gx);
    const __m256 vrstd_next = _mm256_set1_ps(next.rstd), vm_next = _mm256_set1_ps(next.m), vm = _mm256_set1_ps(cur.m);
    Sums s = zero_sums();
    // dx, and the block's dgamma += dy·xhat and dbeta += dy in f64, for lanes [at, at + k); with pass 1 of the
    // next row on the same lanes.
    const auto step = [&](std::int64_t at, std::int64_t k, bool with_next) {
      const __m256 vw = load(w + at, k);
      if (with_next) {
        pass1(s, centred, diff(load_as_f32<T>(x + n + at, k), vm_next, k), load_as_f32<T>(dy + n + at, k), vw, vrstd_next);
        _mm_prefetch(static_cast<const char*>(ahead(x + n + at)), _MM_HINT_T0);
        _mm_prefetch(static_cast<const char*>(ahead(dy + n + at)), _MM_HINT_T0);
      }
      const __m256 vx = load_as_f32<T>(x + at, k), vdy = load_as_f32<T>(dy + at, k);
      const __m256 xhat = centred ? _mm256_fmadd_ps(diff(vx, vm, k), vrstd, vshift) : _mm256_mul_ps(vx, vrstd);
      // LayerNorm: g − mean(g) − xhat·mean(g·xhat), one FMA for the last two terms, then rstd. RMSNorm: rstd·g −
      // xhat·(rstd·mean(g·xhat)), each term of dx's own size, so where dx is small only its own rounding falls
      // on the subnormal grid (rstd·(g − xhat·mean(g·xhat)) rounded xhat·mean(g·xhat) there first and rstd
      // multiplied that: 30 scaled ulp on a dx of 2.9e-40 whose g is 0, 7471 on a 2-wide row beside a subnormal
      // x, measured against dx's own terms as RMSNorm's metric does).
      const __m256 v = centred ? _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(vdy, vw), _mm256_fmadd_ps(xhat, vmgx, vmg)), vrstd)
                               : _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(vdy, vw), vrstd), _mm256_mul_ps(xhat, vrmgx));
      store_from_f32<T>(dx + at, v, k, stream);
      alignas(32) double t[8];
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
    const std::int64_t full = n / 8 * 8;
    if (next_started) {
      for (std::int64_t at = 0; at < full; at += 8) step(at, 8, true);
      if (full < n) step(full, n - full, true);
      cur_ok = finish_row(a, s, next);
      cur = next;
    } else {
      for (std::int64_t at = 0; at < full; at += 8) step(at, 8, false);
      if (full < n) step(full, n - full, false);
      cur_ok = false;  // the next row (if any) has unusable statistics: the careful row takes it
    }
  }
  if (a.stream_dx) _mm_sfence();  // the non-temporal stores are visible before the caller reads dx
}

}  // namespace

void backward_rows(const BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  switch (a.dtype) {
    case DType::f16: return rows_of<F16>(a, r0, r1, dg, db);
    case DType::bf16: return rows_of<BF16>(a, r0, r1, dg, db);
    default: return rows_of<F32>(a, r0, r1, dg, db);
  }
}

}  // namespace lnorm::cpu::avx2
