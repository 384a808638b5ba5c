// avx2 — LayerNorm with AVX2 + FMA (+ F16C for f16), 8 f32 lanes; f32, f16 and bf16 storage.
// Built with -mavx2 -mfma -mf16c; called only after cpu_has_avx2() (avx2_kernel.cpp).
//
// Per row, three passes over a row that stays in L1/L2 between them (DRAM sees one read, one write):
//   1. s = Σ (x − x[0])                      m = x[0] + s/n, rounded to f32 (sums: f32 in blocks, f64 across)
//   2. c = Σ (x − m),  q = Σ (x − m)²         mean_lo = c/n,  var = q/n − mean_lo²  (corrected two-pass,
//                                            Chan, Golub & LeVeque 1983: c/n is the rounding error of m)
//   3. y = ((x − m) − mean_lo) · rstd · γ + β,   rstd = 1/sqrt(var + eps)
// Why this and not vectorized Welford: the centre is m + mean_lo, a two-float mean, so x − m is exact
// on offset rows (Sterbenz) and the error has no kappa term; a constant row gives s = 0, m = x[0],
// c = q = 0 and y = β exactly; on exact-statistics rows m is exact. Welford costs a division per
// element per accumulator and its merge cannot use FMA-friendly sums.
// Four accumulators of 8 lanes hide the add latency (4 cycles, 2 ports): 32 elements per iteration.
// Sums are reduced in a fixed order, so a row's result is the same on any thread.
// Rows whose spread leaves [2^-40, 2^40] (squares would overflow or underflow f32), and NaN/Inf rows,
// go to the scalar welford row (exact scaling there); such rows are rare and never the fast case.
// Tails: masked loads/stores for f32; 16-bit types go through an 8-lane stack buffer. Nothing is read
// or written past the row.
// Speed (lnorm_gbench, single thread, medians of 5, GB/s of x read + y written; this 2-core AMD EPYC,
// 2026-11-30): f32 64x4096 17.1 (memcpy 62.4, oneDNN 25.7); 1024x768 22.7 (65.4, 37.6); 16384x4096
// 8.4 (21.2, 9.7): 0.27-0.39x memcpy, 0.56-0.87x oneDNN. bf16 16384x4096 5.4 GB/s is 1.29x f32's rows/s.
// Not yet tuned: three passes with a per-block f64 fold; the next step is fusing pass 1 into pass 2
// for rows that fit L1 and streaming stores at DRAM sizes.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "isa.hpp"

namespace lnorm::cpu::avx2 {
namespace {

constexpr float kSafeMax = 0x1p40f, kSafeMin = 0x1p-40f;  // as welford.cpp's kSafeMax/kSafeMin

struct F32 {
  using Bits = float;
};
struct F16 {
  using Bits = std::uint16_t;
};
struct BF16 {
  using Bits = std::uint16_t;
};

__m256i tail_mask(std::int64_t r) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r)), lane);
}

__m256 widen_bf16(__m128i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)); }

// bf16 round to nearest even from f32 bits; NaN stays a quiet NaN.
__m128i narrow_bf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40)), nan);
  const __m256i packed = _mm256_packus_epi32(r, r);  // per 128-bit lane: [a0..a3 a0..a3 | a4..a7 a4..a7]
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

template <class T>
__m256 load(const typename T::Bits* p) {
  if constexpr (std::is_same_v<T, F32>) return _mm256_loadu_ps(p);
  else if constexpr (std::is_same_v<T, F16>) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  else return widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The last r < 8 elements, zeros beyond them (callers mask the arithmetic too).
template <class T>
__m256 load_tail(const typename T::Bits* p, std::int64_t r) {
  if constexpr (std::is_same_v<T, F32>) {
    return _mm256_maskload_ps(p, tail_mask(r));
  } else {
    alignas(16) std::uint16_t buf[8] = {};
    std::memcpy(buf, p, static_cast<std::size_t>(r) * 2);
    return load<T>(buf);
  }
}

template <class T>
void store(typename T::Bits* p, __m256 v) {
  if constexpr (std::is_same_v<T, F32>) _mm256_storeu_ps(p, v);
  else if constexpr (std::is_same_v<T, F16>) _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow_bf16(v));
}

template <class T>
void store_tail(typename T::Bits* p, __m256 v, std::int64_t r) {
  if constexpr (std::is_same_v<T, F32>) {
    _mm256_maskstore_ps(p, tail_mask(r), v);
  } else {
    alignas(16) std::uint16_t buf[8];
    store<T>(buf, v);
    std::memcpy(p, buf, static_cast<std::size_t>(r) * 2);
  }
}

float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}


struct Stats {
  float m, mean_lo, rstd;
  bool safe;
};

// Folds four f32 accumulators into a pair of f64 ones, in a fixed order.
void fold(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256d& lo, __m256d& hi) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(s)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));
}

double hsum(__m256d lo, __m256d hi) {
  const __m256d v = _mm256_add_pd(lo, hi);
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// Sums run in f32 within blocks of kBlock elements (8 additions per lane per accumulator) and in f64
// across blocks: the error of a row's sums no longer grows with its length. Measured with one f32
// accumulation over the whole row (`lnorm verify --kernel avx2 --cases 1000 --seed 7`): rstd 62
// ulps and y 62 scaled ulps on 65537-wide rows; blocked, see budgets.toml.
constexpr std::int64_t kBlock = 256;

template <class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const std::int64_t full = n / 8 * 8, r = n - full;
  const __m256 shift = _mm256_set1_ps(_mm256_cvtss_f32(n >= 8 ? load<T>(x) : load_tail<T>(x, r)));
  const __m256 tail = _mm256_castsi256_ps(tail_mask(r));
  // Pass 1: Σ (x − x[0]).
  __m256d s_lo = _mm256_setzero_pd(), s_hi = s_lo;
  for (std::int64_t block = 0; block < n; block += kBlock) {
    const std::int64_t block_end = block + kBlock < full ? block + kBlock : full;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    std::int64_t i = block;
    for (; i + 32 <= block_end; i += 32) {
      a0 = _mm256_add_ps(a0, _mm256_sub_ps(load<T>(x + i), shift));
      a1 = _mm256_add_ps(a1, _mm256_sub_ps(load<T>(x + i + 8), shift));
      a2 = _mm256_add_ps(a2, _mm256_sub_ps(load<T>(x + i + 16), shift));
      a3 = _mm256_add_ps(a3, _mm256_sub_ps(load<T>(x + i + 24), shift));
    }
    for (; i < block_end; i += 8) a0 = _mm256_add_ps(a0, _mm256_sub_ps(load<T>(x + i), shift));
    if (r && block + kBlock >= n) a1 = _mm256_add_ps(a1, _mm256_and_ps(_mm256_sub_ps(load_tail<T>(x + full, r), shift), tail));
    fold(a0, a1, a2, a3, s_lo, s_hi);
  }
  const double nd = static_cast<double>(n);
  const float m = static_cast<float>(static_cast<double>(_mm256_cvtss_f32(shift)) + hsum(s_lo, s_hi) / nd);
  // Pass 2: Σ (x − m) and Σ (x − m)², and max |x − m| for the range check.
  const __m256 mv = _mm256_set1_ps(m);
  // A function-local constant: a namespace-scope __m256 would run AVX code at program start.
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256d c_lo = _mm256_setzero_pd(), c_hi = c_lo, q_lo = c_lo, q_hi = c_lo;
  __m256 big = _mm256_setzero_ps();
  for (std::int64_t block = 0; block < n; block += kBlock) {
    const std::int64_t block_end = block + kBlock < full ? block + kBlock : full;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, q0 = c0, q1 = c0;
    std::int64_t i = block;
    for (; i + 32 <= block_end; i += 32) {
      const __m256 d0 = _mm256_sub_ps(load<T>(x + i), mv), d1 = _mm256_sub_ps(load<T>(x + i + 8), mv);
      const __m256 d2 = _mm256_sub_ps(load<T>(x + i + 16), mv), d3 = _mm256_sub_ps(load<T>(x + i + 24), mv);
      c0 = _mm256_add_ps(c0, _mm256_add_ps(d0, d2));
      c1 = _mm256_add_ps(c1, _mm256_add_ps(d1, d3));
      q0 = _mm256_fmadd_ps(d0, d0, q0);
      q1 = _mm256_fmadd_ps(d1, d1, q1);
      q0 = _mm256_fmadd_ps(d2, d2, q0);
      q1 = _mm256_fmadd_ps(d3, d3, q1);
      big = _mm256_max_ps(big, _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(d0, abs_mask), _mm256_and_ps(d1, abs_mask)),
                                             _mm256_max_ps(_mm256_and_ps(d2, abs_mask), _mm256_and_ps(d3, abs_mask))));
    }
    for (; i < block_end; i += 8) {
      const __m256 d = _mm256_sub_ps(load<T>(x + i), mv);
      c0 = _mm256_add_ps(c0, d);
      q0 = _mm256_fmadd_ps(d, d, q0);
      big = _mm256_max_ps(big, _mm256_and_ps(d, abs_mask));
    }
    if (r && block + kBlock >= n) {
      const __m256 d = _mm256_and_ps(_mm256_sub_ps(load_tail<T>(x + full, r), mv), tail);
      c1 = _mm256_add_ps(c1, d);
      q1 = _mm256_fmadd_ps(d, d, q1);
      big = _mm256_max_ps(big, _mm256_and_ps(d, abs_mask));
    }
    const __m256 zero = _mm256_setzero_ps();
    fold(c0, c1, zero, zero, c_lo, c_hi);
    fold(q0, q1, zero, zero, q_lo, q_hi);
  }
  // max_ps drops NaN operands, so NaN is caught through the sums below.
  const double c = hsum(c_lo, c_hi), q = hsum(q_lo, q_hi);
  const float max_abs = hmax(big);
  const double mean_lo = c / nd;
  const double var = std::fmax(q / nd - mean_lo * mean_lo, 0.0);
  const bool finite = std::isfinite(m) && std::isfinite(c) && std::isfinite(q);
  const bool safe = finite && max_abs <= kSafeMax && (max_abs >= kSafeMin || max_abs == 0);
  // rstd from the f64 variance and the f32 eps, rounded once to f32.
  return {m, static_cast<float>(mean_lo), static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps))), safe};
}

template <class T>
void normalize_row(const typename T::Bits* x, const typename T::Bits* gamma, const typename T::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s) {
  const std::int64_t full = n / 8 * 8, r = n - full;
  const __m256 mv = _mm256_set1_ps(s.m), lo = _mm256_set1_ps(s.mean_lo), rstd = _mm256_set1_ps(s.rstd);
  const auto one = [&](__m256 xv, __m256 g, __m256 b) {
    const __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(xv, mv), lo), rstd);
    if (gamma && beta) return _mm256_fmadd_ps(t, g, b);
    if (gamma) return _mm256_mul_ps(t, g);
    if (beta) return _mm256_add_ps(t, b);
    return t;
  };
  const __m256 zero = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < full; i += 8) {
    store<T>(y + i, one(load<T>(x + i), gamma ? load<T>(gamma + i) : zero, beta ? load<T>(beta + i) : zero));
  }
  if (r) {
    store_tail<T>(y + full, one(load_tail<T>(x + full, r), gamma ? load_tail<T>(gamma + full, r) : zero,
                                beta ? load_tail<T>(beta + full, r) : zero), r);
  }
}

template <class T>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using B = typename T::Bits;
  const B* x = static_cast<const B*>(t.x);
  const B* gamma = p.has_gamma ? static_cast<const B*>(t.gamma) : nullptr;
  const B* beta = p.has_beta ? static_cast<const B*>(t.beta) : nullptr;
  B* y = static_cast<B*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const float eps = static_cast<float>(p.eps);
  for (std::int64_t row = begin; row < end; ++row) {
    const Stats s = row_stats<T>(x + row * n, n, eps);
    if (!s.safe) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = s.m + s.mean_lo;
    if (rstd) rstd[row] = s.rstd;
    normalize_row<T>(x + row * n, gamma, beta, y + row * n, n, s);
  }
}

}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return rows_typed<F32>(p, t, begin, end);
    case DType::f16: return rows_typed<F16>(p, t, begin, end);
    case DType::bf16: return rows_typed<BF16>(p, t, begin, end);
    case DType::f64: return;  // not offered: avx2_kernel.cpp declares f32, f16, bf16 only
  }
}

}  // namespace lnorm::cpu::avx2
