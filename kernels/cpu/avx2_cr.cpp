// avx2_cr — correctly rounded LayerNorm for f32, f16 and bf16 storage, with AVX2 + FMA (+ F16C).
// Built with -mavx2 -mfma -mf16c; called only after the CPU check in avx2_kernel.cpp.
//
// Everything after the load is f64 (4 lanes): the statistics, rstd, and y = ((x − m) − mean_lo)·rstd·γ + β,
// rounded once at the end. The f64 result carries a relative error of a few 2^-53, so it rounds to
// the same f32 as the exact y* unless y* lies within ~2^-50 relative of a rounding boundary — about
// 2^-26 of f32 outputs (f16/bf16: far fewer). lnorm verify measures the correctly rounded fraction.
//   1. s = Σ (x − x[0])  (exact in f64 for f32 data whose binades span < 29)   m = x[0] + s/n
//   2. c = Σ (x − m), q = Σ (x − m)²                                     mean_lo = c/n, var = q/n − mean_lo²
//   3. y = ((x − m) − mean_lo) · rstd · γ + β  in f64,  rstd = 1/sqrt(var + eps)
// f64 has the range f32 lacks: x² of f32's largest values (1e77) and of its subnormals (1e-90) are
// normal f64 numbers, so no row needs rescaling; only NaN/Inf rows take the scalar welford path.
// f16/bf16 outputs: f64 → f32 by round-to-odd, then f32 → f16/bf16 to nearest even. Rounding to odd
// first (truncate, set the last bit if inexact) keeps the two roundings equal to one, because f32 has
// at least two bits more than f16 (11) and bf16 (8) (Boldo & Melquiond 2008).
// The normalize pass costs 2x the f32 lanes; at DRAM sizes the row is read from L1/L2 by then, so
// the kernel stays memory-bound (numbers in the avx2 bench notes).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "isa.hpp"

namespace lnorm::cpu::avx2_cr {
namespace {

struct F32 {
  using Bits = float;
};
struct F16 {
  using Bits = std::uint16_t;
};
struct BF16 {
  using Bits = std::uint16_t;
};

// 4 elements widened to f64; `count` < 4 reads only that many (zeros beyond).
template <class T>
__m256d load4(const typename T::Bits* p, std::int64_t count = 4) {
  if constexpr (std::is_same_v<T, F32>) {
    if (count == 4) return _mm256_cvtps_pd(_mm_loadu_ps(p));
    const __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count)), _mm_setr_epi32(0, 1, 2, 3));
    return _mm256_cvtps_pd(_mm_maskload_ps(p, mask));
  } else {
    std::uint64_t raw = 0;
    std::memcpy(&raw, p, static_cast<std::size_t>(count) * 2);
    const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(raw));
    __m128 f;
    if constexpr (std::is_same_v<T, F16>) f = _mm_cvtph_ps(v);
    else f = _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(v), 16));
    return _mm256_cvtps_pd(f);
  }
}

// A 4 x 64-bit lane mask as 4 x 32-bit lanes.
__m128i narrow_mask(__m256d m) {
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m), _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
}

// f64 → f32 rounding to odd: truncate toward zero, then set the last bit if anything was lost.
__m128 to_f32_odd(__m256d v) {
  const __m128 nearest = _mm256_cvtpd_ps(v);
  const __m256d back = _mm256_cvtps_pd(nearest);
  const __m128i inexact = narrow_mask(_mm256_cmp_pd(back, v, _CMP_NEQ_OQ));
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
  const __m128i away = narrow_mask(_mm256_cmp_pd(_mm256_and_pd(back, abs_mask), _mm256_and_pd(v, abs_mask), _CMP_GT_OQ));
  __m128i bits = _mm_castps_si128(nearest);
  // Rounded away from zero: step the magnitude back by one ulp (the bit pattern minus one).
  bits = _mm_sub_epi32(bits, _mm_and_si128(away, _mm_set1_epi32(1)));
  bits = _mm_or_si128(bits, _mm_and_si128(inexact, _mm_set1_epi32(1)));
  return _mm_castsi128_ps(bits);
}

template <class T>
void store4(typename T::Bits* p, __m256d v, std::int64_t count = 4) {
  if constexpr (std::is_same_v<T, F32>) {
    const __m128 f = _mm256_cvtpd_ps(v);  // one rounding, to nearest even
    if (count == 4) {
      _mm_storeu_ps(p, f);
    } else {
      const __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count)), _mm_setr_epi32(0, 1, 2, 3));
      _mm_maskstore_ps(p, mask, f);
    }
  } else {
    const __m128 odd = to_f32_odd(v);
    __m128i h;
    if constexpr (std::is_same_v<T, F16>) {
      h = _mm_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT);
    } else {
      const __m128i bits = _mm_castps_si128(odd);
      const __m128i lsb = _mm_and_si128(_mm_srli_epi32(bits, 16), _mm_set1_epi32(1));
      __m128i r = _mm_srli_epi32(_mm_add_epi32(bits, _mm_add_epi32(lsb, _mm_set1_epi32(0x7FFF))), 16);
      const __m128i nan = _mm_castps_si128(_mm_cmpunord_ps(odd, odd));
      r = _mm_blendv_epi8(r, _mm_or_si128(_mm_srli_epi32(bits, 16), _mm_set1_epi32(0x40)), nan);
      h = _mm_packus_epi32(r, r);
    }
    const std::uint64_t raw = static_cast<std::uint64_t>(_mm_cvtsi128_si64(h));
    std::memcpy(p, &raw, static_cast<std::size_t>(count) * 2);
  }
}

double hsum(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

struct Stats {
  double m, mean_lo, rstd;
  bool finite;
};

template <class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, double eps) {
  const std::int64_t full = n / 4 * 4, r = n - full, unrolled = n / 16 * 16;
  const __m256d shift = _mm256_set1_pd(_mm256_cvtsd_f64(load4<T>(x, n >= 4 ? 4 : r)));
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  for (; i < unrolled; i += 16) {
    a0 = _mm256_add_pd(a0, _mm256_sub_pd(load4<T>(x + i), shift));
    a1 = _mm256_add_pd(a1, _mm256_sub_pd(load4<T>(x + i + 4), shift));
    a2 = _mm256_add_pd(a2, _mm256_sub_pd(load4<T>(x + i + 8), shift));
    a3 = _mm256_add_pd(a3, _mm256_sub_pd(load4<T>(x + i + 12), shift));
  }
  for (; i < full; i += 4) a0 = _mm256_add_pd(a0, _mm256_sub_pd(load4<T>(x + i), shift));
  const __m256d lane = _mm256_setr_pd(0, 1, 2, 3);
  const __m256d tail = _mm256_cmp_pd(lane, _mm256_set1_pd(static_cast<double>(r)), _CMP_LT_OQ);
  if (r) a1 = _mm256_add_pd(a1, _mm256_and_pd(_mm256_sub_pd(load4<T>(x + full, r), shift), tail));
  const double nd = static_cast<double>(n);
  const double m = _mm256_cvtsd_f64(shift) + hsum(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3))) / nd;
  const __m256d mv = _mm256_set1_pd(m);
  __m256d c0 = _mm256_setzero_pd(), c1 = c0, q0 = c0, q1 = c0;
  i = 0;
  for (; i < unrolled; i += 16) {
    const __m256d d0 = _mm256_sub_pd(load4<T>(x + i), mv), d1 = _mm256_sub_pd(load4<T>(x + i + 4), mv);
    const __m256d d2 = _mm256_sub_pd(load4<T>(x + i + 8), mv), d3 = _mm256_sub_pd(load4<T>(x + i + 12), mv);
    c0 = _mm256_add_pd(c0, _mm256_add_pd(d0, d2));
    c1 = _mm256_add_pd(c1, _mm256_add_pd(d1, d3));
    q0 = _mm256_fmadd_pd(d0, d0, q0);
    q1 = _mm256_fmadd_pd(d1, d1, q1);
    q0 = _mm256_fmadd_pd(d2, d2, q0);
    q1 = _mm256_fmadd_pd(d3, d3, q1);
  }
  for (; i < full; i += 4) {
    const __m256d d = _mm256_sub_pd(load4<T>(x + i), mv);
    c0 = _mm256_add_pd(c0, d);
    q0 = _mm256_fmadd_pd(d, d, q0);
  }
  if (r) {
    const __m256d d = _mm256_and_pd(_mm256_sub_pd(load4<T>(x + full, r), mv), tail);
    c1 = _mm256_add_pd(c1, d);
    q1 = _mm256_fmadd_pd(d, d, q1);
  }
  const double c = hsum(_mm256_add_pd(c0, c1)), q = hsum(_mm256_add_pd(q0, q1));
  const double mean_lo = c / nd;
  const double var = std::fmax(q / nd - mean_lo * mean_lo, 0.0);
  return {m, mean_lo, 1.0 / std::sqrt(var + eps), std::isfinite(m) && std::isfinite(c) && std::isfinite(q)};
}

template <class T>
void normalize_row(const typename T::Bits* x, const typename T::Bits* gamma, const typename T::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s) {
  const __m256d mv = _mm256_set1_pd(s.m), lo = _mm256_set1_pd(s.mean_lo), rstd = _mm256_set1_pd(s.rstd);
  for (std::int64_t i = 0; i < n; i += 4) {
    const std::int64_t count = n - i < 4 ? n - i : 4;
    __m256d t = _mm256_mul_pd(_mm256_sub_pd(_mm256_sub_pd(load4<T>(x + i, count), mv), lo), rstd);
    if (gamma && beta) t = _mm256_fmadd_pd(t, load4<T>(gamma + i, count), load4<T>(beta + i, count));
    else if (gamma) t = _mm256_mul_pd(t, load4<T>(gamma + i, count));
    else if (beta) t = _mm256_add_pd(t, load4<T>(beta + i, count));
    store4<T>(y + i, t, count);
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
  for (std::int64_t row = begin; row < end; ++row) {
    const Stats s = row_stats<T>(x + row * n, n, p.eps);
    if (!s.finite) {  // NaN/Inf in the row: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = static_cast<float>(s.m + s.mean_lo);
    if (rstd) rstd[row] = static_cast<float>(s.rstd);
    normalize_row<T>(x + row * n, gamma, beta, y + row * n, n, s);
  }
}

}  // namespace

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return rows_typed<F32>(p, t, begin, end);
    case DType::f16: return rows_typed<F16>(p, t, begin, end);
    case DType::bf16: return rows_typed<BF16>(p, t, begin, end);
    case DType::f64: return;  // not offered (avx2_kernel.cpp)
  }
}

}  // namespace lnorm::cpu::avx2_cr
