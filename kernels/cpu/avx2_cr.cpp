// avx2_cr — correctly rounded LayerNorm for f32, f16 and bf16 storage, with AVX2 + FMA (+ F16C).
// Built with -mavx2 -mfma -mf16c; called only after the CPU check in avx2_kernel.cpp.
//
// Everything after the load is f64 (4 lanes): the statistics, rstd, and y = ((x − m) − mean_lo)·rstd·γ + β,
// rounded once at the end. The f64 result carries a relative error of a few 2^-53, so it rounds to
// the same f32 as the exact y* unless y* lies within ~2^-50 relative of a rounding boundary — about
// 2^-26 of f32 outputs (f16/bf16: far fewer). lnorm verify measures the correctly rounded fraction.
//   1. s = Σ (x − x[0]) with TwoSum (error-free)       m = m_hi + m_lo = x[0] + s/n, a double-double
//   2. q = Σ ((x − m_hi) − m_lo)²                      var = q/n
//   3. y = ((x − m_hi) − m_lo) · rstd · γ + β  in f64,  rstd = 1/sqrt(var + eps)
// f64 has the range f32 lacks: x² of f32's largest values (1e77) and of its subnormals (1e-90) are
// normal f64 numbers, so no row needs rescaling; only NaN/Inf rows take the scalar welford path.
// f16/bf16 outputs: f64 → f32 by round-to-odd, then f32 → f16/bf16 to nearest even. Rounding to odd
// first (truncate, set the last bit if inexact) keeps the two roundings equal to one, because f32 has
// at least two bits more than f16 (11) and bf16 (8) (Boldo & Melquiond 2008).
// Speed (lnorm_gbench as in avx2.cpp): f32 64x4096 3.3 GB/s, 16384x4096 3.4 GB/s (avx2: 17.1, 8.4);
// f16/bf16 about 1 GB/s. Compute-bound, not memory-bound: TwoSum and Dot2 cost ~14 f64 flops per
// element on 4 lanes. Issue 4's "≥ 90% of the fast kernel at DRAM sizes" is far off; AVX-512's 8
// f64 lanes and cheaper compensation (one TwoSum per block of plain sums) are the way there.
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

// Exact ties. When y* is exactly halfway between two outputs (it happens: a row of zeros and one
// outlier at n = 17, 65 or 4097 has z = −1/sqrt(n − 1) exactly, and β + γ·z can land on a midpoint)
// or exactly 0 (β = −γ·z), the f64 value sits a few 2^-53 off and rounds to the nearer side instead
// of to even. A value within kTieTolerance of the terms' size (|γ·z| + |β|: the f64 error scales
// with the terms, not with a cancelled result) of a midpoint of the output format, or of 0, is taken
// to be exactly that. Measured, `lnorm verify --kernel avx2_cr --property accuracy --cases 1500
// --seed 24` (misrounded / all outputs, bf16): no snapping 1969 / 13.9M; 2^-46 after compensated
// sums 757 (near-ties from eps = 1e-12 snapped wrongly); 2^-50 with compensated sums 470 — what
// remains is mostly sparse rows, whose near-ties are closer than f64 can tell apart. Deciding those
// needs a double-double recomputation next to midpoints (as the reference does); not done.
constexpr double kTieTolerance = 0x1p-50;

template <class T>
__m256d snap_ties(__m256d v, __m256d size) {
  constexpr int kPrecision = std::is_same_v<T, F32> ? 24 : std::is_same_v<T, F16> ? 11 : 8;
  constexpr int kDropped = 52 - kPrecision;  // f64 bits below the midpoint's last bit (p + 1 bits kept)
  const __m256i bits = _mm256_castpd_si256(v);
  const __m256i half = _mm256_set1_epi64x(std::int64_t{1} << (kDropped - 1));
  const __m256i keep = _mm256_set1_epi64x(~((std::int64_t{1} << kDropped) - 1));
  const __m256i nearest = _mm256_and_si256(_mm256_add_epi64(bits, half), keep);  // v to p + 1 bits
  const __m256d grid = _mm256_castsi256_pd(nearest);
  // A midpoint has its last kept bit set: bit kDropped of the pattern.
  const __m256i last = _mm256_and_si256(nearest, _mm256_set1_epi64x(std::int64_t{1} << kDropped));
  const __m256d is_mid = _mm256_castsi256_pd(_mm256_cmpeq_epi64(last, _mm256_set1_epi64x(std::int64_t{1} << kDropped)));
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
  const __m256d close = _mm256_cmp_pd(_mm256_and_pd(_mm256_sub_pd(v, grid), abs_mask),
                                      _mm256_mul_pd(size, _mm256_set1_pd(kTieTolerance)), _CMP_LE_OQ);
  // An exact zero (β = −γ·z exactly) shows up as a few 2^-53 of the terms: take it to be 0.
  const __m256d tiny = _mm256_cmp_pd(_mm256_and_pd(v, abs_mask), _mm256_mul_pd(size, _mm256_set1_pd(kTieTolerance)), _CMP_LE_OQ);
  return _mm256_andnot_pd(tiny, _mm256_blendv_pd(v, grid, _mm256_and_pd(is_mid, close)));
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

// Knuth's TwoSum: s + e == a + b exactly.
inline void two_sum(__m256d a, __m256d b, __m256d& s, __m256d& e) {
  s = _mm256_add_pd(a, b);
  const __m256d bb = _mm256_sub_pd(s, a);
  e = _mm256_add_pd(_mm256_sub_pd(a, _mm256_sub_pd(s, bb)), _mm256_sub_pd(b, bb));
}

// Pass 1 sums x − x[0] with TwoSum, so the mean is a double-double m_hi + m_lo accurate to ~2^-100:
// the corrected two-pass's Σ(x − m) would lose ~sqrt(n)·n·2^-53·|m| on rows of many equal values
// (measured: z off by 2^-44 relative on a 4097-wide row of zeros and one outlier, which misrounded
// 757 of 13.9M bf16 outputs at exact ties). Pass 2 then needs only Σ d², d = (x − m_hi) − m_lo.
template <class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, double eps) {
  const std::int64_t full = n / 4 * 4, r = n - full, unrolled = n / 8 * 8;
  const __m256d shift = _mm256_set1_pd(_mm256_cvtsd_f64(load4<T>(x, n >= 4 ? 4 : r)));
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, e0 = s0, e1 = s0;
  std::int64_t i = 0;
  for (; i < unrolled; i += 8) {
    __m256d t0, t1, err0, err1;
    two_sum(s0, _mm256_sub_pd(load4<T>(x + i), shift), t0, err0);
    two_sum(s1, _mm256_sub_pd(load4<T>(x + i + 4), shift), t1, err1);
    s0 = t0, s1 = t1;
    e0 = _mm256_add_pd(e0, err0), e1 = _mm256_add_pd(e1, err1);
  }
  const __m256d lane = _mm256_setr_pd(0, 1, 2, 3);
  const __m256d tail = _mm256_cmp_pd(lane, _mm256_set1_pd(static_cast<double>(r)), _CMP_LT_OQ);
  for (; i < n; i += 4) {
    const __m256d v = i < full ? _mm256_sub_pd(load4<T>(x + i), shift)
                               : _mm256_and_pd(_mm256_sub_pd(load4<T>(x + full, r), shift), tail);
    __m256d t, err;
    two_sum(s0, v, t, err);
    s0 = t;
    e0 = _mm256_add_pd(e0, err);
  }
  // Lanes and accumulators folded with TwoSum too, in a fixed order.
  __m256d sv, ev;
  two_sum(s0, s1, sv, ev);
  ev = _mm256_add_pd(ev, _mm256_add_pd(e0, e1));
  alignas(32) double sl[4], el[4];
  _mm256_store_pd(sl, sv);
  _mm256_store_pd(el, ev);
  double hi = sl[0], lo = el[0] + el[1] + el[2] + el[3];
  for (int k = 1; k < 4; ++k) {
    const double t = hi + sl[k], bb = t - hi;
    lo += (hi - (t - bb)) + (sl[k] - bb);
    hi = t;
  }
  // (hi + lo)/n as a double-double, then + x[0].
  const double nd = static_cast<double>(n);
  const double q_hi = hi / nd;
  const double q_lo = (std::fma(-q_hi, nd, hi) + lo) / nd;
  const double x0 = _mm256_cvtsd_f64(shift);
  const double m_hi = x0 + q_hi, bb = m_hi - x0;
  const double m_lo = (x0 - (m_hi - bb)) + (q_hi - bb) + q_lo;
  const __m256d mv = _mm256_set1_pd(m_hi), mlo = _mm256_set1_pd(m_lo);
  // Σ d² compensated as well (Ogita, Rump & Oishi's Dot2: the exact square by FMA, the sum by
  // TwoSum): a plain f64 sum lost ~2^-47 of rstd on 65537-wide rows, too much to tell an exact tie
  // of the output from a near one.
  __m256d p0 = _mm256_setzero_pd(), p1 = p0, f0 = p0, f1 = p0;
  const auto add_square = [](__m256d d, __m256d& p, __m256d& f) {
    const __m256d sq = _mm256_mul_pd(d, d);
    const __m256d sq_err = _mm256_fmsub_pd(d, d, sq);
    __m256d t, e;
    two_sum(p, sq, t, e);
    p = t;
    f = _mm256_add_pd(f, _mm256_add_pd(e, sq_err));
  };
  i = 0;
  for (; i < unrolled; i += 8) {
    add_square(_mm256_sub_pd(_mm256_sub_pd(load4<T>(x + i), mv), mlo), p0, f0);
    add_square(_mm256_sub_pd(_mm256_sub_pd(load4<T>(x + i + 4), mv), mlo), p1, f1);
  }
  for (; i < n; i += 4) {
    const __m256d v = i < full ? load4<T>(x + i) : load4<T>(x + full, r);
    const __m256d d = _mm256_sub_pd(_mm256_sub_pd(v, mv), mlo);
    add_square(i < full ? d : _mm256_and_pd(d, tail), p0, f0);
  }
  const double q = hsum(_mm256_add_pd(p0, p1)) + hsum(_mm256_add_pd(f0, f1));
  const double var = q / nd;
  return {m_hi, m_lo, 1.0 / std::sqrt(var + eps), std::isfinite(m_hi) && std::isfinite(m_lo) && std::isfinite(q)};
}

template <class T>
void normalize_row(const typename T::Bits* x, const typename T::Bits* gamma, const typename T::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s) {
  const __m256d mv = _mm256_set1_pd(s.m), lo = _mm256_set1_pd(s.mean_lo), rstd = _mm256_set1_pd(s.rstd);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
  for (std::int64_t i = 0; i < n; i += 4) {
    const std::int64_t count = n - i < 4 ? n - i : 4;
    __m256d t = _mm256_mul_pd(_mm256_sub_pd(_mm256_sub_pd(load4<T>(x + i, count), mv), lo), rstd);
    if (gamma) t = _mm256_mul_pd(t, load4<T>(gamma + i, count));
    __m256d size = _mm256_and_pd(t, abs_mask);
    if (beta) {
      const __m256d b = load4<T>(beta + i, count);
      size = _mm256_add_pd(size, _mm256_and_pd(b, abs_mask));
      t = _mm256_add_pd(t, b);
    }
    store4<T>(y + i, snap_ties<T>(t, size), count);
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
