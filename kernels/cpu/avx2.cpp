// avx2 — LayerNorm with AVX2 + FMA + F16C, 8 f32 lanes; f32, f16 and bf16 storage.
// Built with -mavx2 -mfma -mf16c; called only after avx2_why_not() (avx2_kernel.cpp) found all three.
//
// Algorithm, per row (the AVX-512 kernel mirrors it with 16 lanes):
//   0. shift = mean of the first 32 elements (f32 sum, times 1/32: exact on constant rows), or x[0]
//      when n < 32 or that sum overflows.
//   1. ONE read of the row (from DRAM or L2): d = x − shift,  S = Σ d,  Q = Σ d²  (f32 accumulators,
//      4 + 4 of 8 lanes, folded into f64 every kBlock elements).
//      mean = shift + S/n (f64),  var = Q/n − (S/n)²,  K = (Q/n)/var, the cancellation factor.
//      Accepted when K ≤ kMaxCancel, var > 0, the sums are finite and n·var ≥ kSafeMin²;
//      m = f32(mean), mean_lo = f32(mean − m): a two-float mean.
//   1b. Otherwise (x[0..31] far from the mean, constant rows, rows near the range limits; rare) the
//      corrected two-pass of Chan, Golub & LeVeque (1983) about m:  c = Σ(x − m), q = Σ(x − m)²,
//      mean_lo = c/n, var = q/n − mean_lo², and today's range rule on max|x − m| ∈ [2^-40, 2^40];
//      rows outside it (near overflow, subnormal spread) and NaN/Inf rows go to the scalar welford
//      row (exact scaling there).
//   2. ONE output pass, the row now in L1:  y = fma(x − m, rstd, −mean_lo·rstd) · γ + β,
//      rstd = 1/sqrt(var + eps) in f64 rounded once; the loop is a template on γ/β presence.
// Why no kappa term: x − shift and x − m are exact on offset rows (Sterbenz), and the centre is the
// two-float m + mean_lo, so the mean's error is relative to the spread, never to the offset. Why the
// fused pass is accurate: Q/n − (S/n)² loses K times Q's relative rounding error; K ≤ kMaxCancel
// bounds that loss (with the shift from 32 elements, K − 1 = ((shift − mean)/σ)² ~ χ²₁/32 on normal
// rows, so nearly every row is accepted and the exact pass 1b runs only on rows where K is large).
// Sums are reduced in a fixed order, so a row's result is the same on any thread.
//
// Stores: when the problem's x + y bytes exceed kStreamBytes, y is written with non-temporal stores
// (the values are identical, so results stay bitwise the same): an ordinary store reads each line of
// y before writing it (read-for-ownership), three DRAM streams against the copy's two. y is aligned
// to 32 bytes by a head of < 16 elements written with ordinary stores; sfence at the end of the call.
// Tails: f32 by vmaskmov; f16/bf16 by a masked load/store of whole 32-bit pairs plus one blended
// element for an odd count: nothing is read or written past the row, and no stack buffer.
// Conversions in registers: f16 by F16C (vcvtph2ps / vcvtps2ph, nearest even); bf16 widened by
// interleaving 16 elements with zeros (load16: lanes in a per-128-bit order that every operand of
// the loop shares and packus undoes), narrowed by the vectorized round-to-nearest-even
// bits + 0x7FFF + lsb (NaN lanes skip the increment when gamma/beta may hold NaN: an arithmetic NaN
// is quiet, so its top 16 bits stay a NaN), two vectors packed per 32-byte store.
//
// Tuning constants: each says below the number that chose it and the command that measures it. The
// versions' before/after measurements are in docs/performance.md; today's speed is `lnorm bench`.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "isa.hpp"

namespace lnorm::cpu::avx2 {
namespace {

constexpr float kSafeMax = 0x1p40f, kSafeMin = 0x1p-40f;  // as welford.cpp's kSafeMax/kSafeMin

// K = (Q/n)/var above which the fused statistics are recomputed by pass 1b. var's relative error is
// about K·e_Q + 2·sqrt(K(K−1))·e_S (e: the sums' relative rounding errors), so K ≤ 2 costs at most
// ~3.8x the corrected two-pass's e_Q. With it `lnorm verify --kernel avx2` gives worst f32 y 4.77 /
// 4.31 / 5.21 scaled ulps (seeds 1, 2, 7 with --cases 1000), no worse than the two-pass it replaced (5.36).
constexpr double kMaxCancel = 2.0;

// f32 sums within blocks of kBlock elements (8 additions per lane per accumulator), f64 across
// blocks: the error of a row's sums does not grow with its length. Measured with one f32
// accumulation over the whole row (`lnorm verify --kernel avx2 --cases 1000 --seed 7`): rstd 62 ulps
// and y 62 scaled ulps on 65537-wide rows. The fold is 14 vector ops per 256 elements (0.44 per
// 8-lane vector, against 3 per vector in the loop).
constexpr std::int64_t kBlock = 256;

// x + y bytes of the whole problem above which y is streamed: copies of the same bytes (vector vs
// streaming, medians of 7, one run) 52 vs 45 GB/s at 6 MiB, 54 vs 48 at 16 MiB, 35 vs 44 at 32 MiB.
constexpr std::int64_t kStreamBytes = std::int64_t{16} << 20;

// Streaming mode only: during row r's output pass, prefetch row r + kAhead into L2 (one prefetcht1
// per 16 elements), so DRAM keeps reading while the pass runs from L1/L2. And the statistics of row
// r + 1 are computed before row r's output pass (kPipeline; in every mode), so the scalar tail of one
// row's statistics (f64 divisions and sqrt, ~80 cycles of latency) overlaps the other row's output
// loop. Measured at 8192x4096 f32 (scratch driver, best of 25, against a streaming copy in the same
// run, two runs): pipeline + prefetch 0.71, 0.72 of the copy; prefetch alone 0.64, 0.63; pipeline
// alone 0.58, 0.58. Hints T0/T2/NTA and kAhead = 3 were not distinguishable from T1, 2 on this
// loaded machine.
constexpr bool kPrefetch = true, kPipeline = true;
constexpr std::int64_t kAhead = 2;

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

__m128i tail_mask128(std::int64_t r) {
  return _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(r)), _mm_setr_epi32(0, 1, 2, 3));
}

__m256 widen_bf16(__m128i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)); }

// f32 → bf16 bits in the low 16 of each 32-bit lane, round to nearest even. With kNaN, NaN lanes keep
// their top 16 bits (v comes from arithmetic, so a NaN is quiet and stays one); without it the
// caller guarantees no NaN (±Inf rounds correctly either way: 0x7F800000 + 0x7FFF keeps its top half).
template <bool kNaN>
__m256i round_bf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i inc = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF));
  if constexpr (kNaN) inc = _mm256_and_si256(inc, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_ORD_Q)));
  return _mm256_srli_epi32(_mm256_add_epi32(bits, inc), 16);
}

// Eight values to eight 16-bit elements.
template <class T>
__m128i narrow8(__m256 v) {
  if constexpr (std::is_same_v<T, F16>) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
  } else {
    const __m256i r = round_bf16<true>(v);
    const __m256i packed = _mm256_packus_epi32(r, r);  // per 128-bit lane: [a0..a3 a0..a3 | a4..a7 a4..a7]
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
  }
}

// Sixteen values to sixteen 16-bit elements, one 32-byte vector. For bf16, v0 and v1 are in the order
// load16 gives (see there), which packus restores.
template <class T, bool kNaN>
__m256i narrow16(__m256 v0, __m256 v1) {
  if constexpr (std::is_same_v<T, F16>) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT)),
                                   _mm256_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT), 1);
  } else {
    return _mm256_packus_epi32(round_bf16<kNaN>(v0), round_bf16<kNaN>(v1));
  }
}

template <class T>
__m256 widen8(__m128i v) {
  if constexpr (std::is_same_v<T, F16>) return _mm256_cvtph_ps(v);
  else return widen_bf16(v);
}

template <class T>
__m256 load(const typename T::Bits* p) {
  if constexpr (std::is_same_v<T, F32>) return _mm256_loadu_ps(p);
  else return widen8<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Sixteen elements at p as two vectors. bf16 is widened by interleaving with zeros in each 128-bit
// half (one op per vector, against zero-extend + shift): v0 holds elements 0-3 and 8-11, v1 holds 4-7
// and 12-15. Every operand of the output loop comes through load16, so the lanes stay matched, and
// narrow16's per-half packus puts the elements back in order; the sums do not care about the order.
template <class T>
void load16(const typename T::Bits* p, __m256& v0, __m256& v1) {
  if constexpr (std::is_same_v<T, BF16>) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), zero = _mm256_setzero_si256();
    v0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v));
    v1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v));
  } else {
    v0 = load<T>(p);
    v1 = load<T>(p + 8);
  }
}

// Sixteen parameters stored as G in the lane order load16<T> gives x: the same as load16<G>, except f32
// parameters beside bf16 x, which are permuted to bf16's order (0-3 8-11 | 4-7 12-15): two vperm2f128.
template <class T, class G>
void load16_for(const typename G::Bits* p, __m256& v0, __m256& v1) {
  if constexpr (std::is_same_v<T, BF16> && std::is_same_v<G, F32>) {
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    v0 = _mm256_permute2f128_ps(a, b, 0x20);
    v1 = _mm256_permute2f128_ps(a, b, 0x31);
  } else {
    load16<G>(p, v0, v1);
  }
}

// The first r < 8 elements at p, zeros beyond them; nothing past p + r is read.
template <class T>
__m256 load_tail(const typename T::Bits* p, std::int64_t r) {
  if constexpr (std::is_same_v<T, F32>) {
    return _mm256_maskload_ps(p, tail_mask(r));
  } else {
    const std::int64_t pairs = r / 2;
    __m128i v = _mm_maskload_epi32(reinterpret_cast<const int*>(p), tail_mask128(pairs));
    if (r & 1) {  // the odd last element goes into the low half of 32-bit lane `pairs`
      const __m128i at = _mm_cmpeq_epi32(_mm_set1_epi32(static_cast<int>(pairs)), _mm_setr_epi32(0, 1, 2, 3));
      v = _mm_blendv_epi8(v, _mm_set1_epi32(p[r - 1]), at);
    }
    return widen8<T>(v);
  }
}

template <class T>
void store_tail(typename T::Bits* p, __m256 v, std::int64_t r) {
  if constexpr (std::is_same_v<T, F32>) {
    _mm256_maskstore_ps(p, tail_mask(r), v);
  } else {
    const std::int64_t pairs = r / 2;
    const __m128i h = narrow8<T>(v);
    _mm_maskstore_epi32(reinterpret_cast<int*>(p), tail_mask128(pairs), h);
    if (r & 1) {
      const __m256i lane = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(h), _mm256_set1_epi32(static_cast<int>(pairs)));
      p[r - 1] = static_cast<std::uint16_t>(_mm256_cvtsi256_si32(lane));
    }
  }
}

template <class T>
void store8(typename T::Bits* p, __m256 v) {
  if constexpr (std::is_same_v<T, F32>) _mm256_storeu_ps(p, v);
  else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow8<T>(v));
}

// Sixteen elements at p; kStream: p is 32-byte aligned and the stores are non-temporal; kNaN: as
// round_bf16.
template <class T, bool kStream, bool kNaN>
void store16(typename T::Bits* p, __m256 v0, __m256 v1) {
  if constexpr (std::is_same_v<T, F32>) {
    if constexpr (kStream) {
      _mm256_stream_ps(p, v0);
      _mm256_stream_ps(p + 8, v1);
    } else {
      _mm256_storeu_ps(p, v0);
      _mm256_storeu_ps(p + 8, v1);
    }
  } else {
    const __m256i h = narrow16<T, kNaN>(v0, v1);
    if constexpr (kStream) _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  }
}

float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Adds four f32 accumulators, in a fixed order, into a pair of f64 ones.
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

struct Stats {
  float m, mean_lo, rstd;
  bool safe;
};

// Σ (x − c) and Σ (x − c)² over the row, blocked as kBlock says; with kMax also max |x − c|.
template <class T, bool kMax>
void centred_sums(const typename T::Bits* x, std::int64_t n, float c, double& s_out, double& q_out, float& max_out) {
  const std::int64_t full = n / 8 * 8, r = n - full;
  const __m256 cv = _mm256_set1_ps(c);
  // A function-local constant: a namespace-scope __m256 would run AVX code at program start.
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 tail = _mm256_castsi256_ps(tail_mask(r));
  __m256d s_lo = _mm256_setzero_pd(), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
  __m256 big = _mm256_setzero_ps();
  for (std::int64_t block = 0; block < n; block += kBlock) {
    const std::int64_t block_end = block + kBlock < full ? block + kBlock : full;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    std::int64_t i = block;
    for (; i + 32 <= block_end; i += 32) {
      __m256 d0, d1, d2, d3;
      load16<T>(x + i, d0, d1);
      load16<T>(x + i + 16, d2, d3);
      d0 = _mm256_sub_ps(d0, cv);
      d1 = _mm256_sub_ps(d1, cv);
      d2 = _mm256_sub_ps(d2, cv);
      d3 = _mm256_sub_ps(d3, cv);
      s0 = _mm256_add_ps(s0, d0);
      s1 = _mm256_add_ps(s1, d1);
      s2 = _mm256_add_ps(s2, d2);
      s3 = _mm256_add_ps(s3, d3);
      q0 = _mm256_fmadd_ps(d0, d0, q0);
      q1 = _mm256_fmadd_ps(d1, d1, q1);
      q2 = _mm256_fmadd_ps(d2, d2, q2);
      q3 = _mm256_fmadd_ps(d3, d3, q3);
      if constexpr (kMax) {
        big = _mm256_max_ps(big, _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(d0, abs_mask), _mm256_and_ps(d1, abs_mask)),
                                               _mm256_max_ps(_mm256_and_ps(d2, abs_mask), _mm256_and_ps(d3, abs_mask))));
      }
    }
    for (; i < block_end; i += 8) {
      const __m256 d = _mm256_sub_ps(load<T>(x + i), cv);
      s0 = _mm256_add_ps(s0, d);
      q0 = _mm256_fmadd_ps(d, d, q0);
      if constexpr (kMax) big = _mm256_max_ps(big, _mm256_and_ps(d, abs_mask));
    }
    if (r && block + kBlock >= n) {
      const __m256 d = _mm256_and_ps(_mm256_sub_ps(load_tail<T>(x + full, r), cv), tail);
      s1 = _mm256_add_ps(s1, d);
      q1 = _mm256_fmadd_ps(d, d, q1);
      if constexpr (kMax) big = _mm256_max_ps(big, _mm256_and_ps(d, abs_mask));
    }
    fold(s0, s1, s2, s3, s_lo, s_hi);
    fold(q0, q1, q2, q3, q_lo, q_hi);
  }
  s_out = hsum(s_lo, s_hi);
  q_out = hsum(q_lo, q_hi);
  max_out = hmax(big);  // max_ps drops NaN operands, so NaN is caught through the sums
}

template <class T>
float row_shift(const typename T::Bits* x, std::int64_t n) {
  const float x0 = _mm256_cvtss_f32(n >= 8 ? load<T>(x) : load_tail<T>(x, n));
  if (n < 32) return x0;
  const __m256 s = _mm256_add_ps(_mm256_add_ps(load<T>(x), load<T>(x + 8)), _mm256_add_ps(load<T>(x + 16), load<T>(x + 24)));
  const float shift = hsum_ps(s) * (1.0f / 32);  // exact on a constant row unless the sum overflows
  return std::isfinite(shift) ? shift : x0;
}

template <class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const double nd = static_cast<double>(n), epsd = static_cast<double>(eps);
  const float shift = row_shift<T>(x, n);
  double s = 0, q = 0;
  float unused = 0;
  centred_sums<T, false>(x, n, shift, s, q, unused);
  const double mean = static_cast<double>(shift) + s / nd;
  const double var = q / nd - (s / nd) * (s / nd);
  if (std::isfinite(s) && std::isfinite(q) && var > 0 && q / nd <= kMaxCancel * var &&
      q >= static_cast<double>(kSafeMin) * kSafeMin) {
    const float m = static_cast<float>(mean);
    return {m, static_cast<float>(mean - static_cast<double>(m)), static_cast<float>(1.0 / std::sqrt(var + epsd)), true};
  }
  // Pass 1b: corrected two-pass about m, with the range rule on max |x − m|.
  const float m = static_cast<float>(mean);
  float max_abs = 0;
  double c = 0;
  centred_sums<T, true>(x, n, m, c, q, max_abs);
  const double mean_lo = c / nd;
  const double var2 = std::fmax(q / nd - mean_lo * mean_lo, 0.0);
  const bool finite = std::isfinite(m) && std::isfinite(c) && std::isfinite(q);
  const bool safe = finite && max_abs <= kSafeMax && (max_abs >= kSafeMin || max_abs == 0);
  const float rstd = static_cast<float>(1.0 / std::sqrt(var2 + epsd));
  // var + eps = 0 (a constant row with eps = 0): rstd = +Inf and y = NaN, from the welford row.
  return {m, static_cast<float>(mean_lo), rstd, safe && std::isfinite(rstd)};
}

// RMSNorm's statistics: the same fused read with the shift 0 (Q = Σ x²), mean 0, rstd = 1/sqrt(Q/n + eps).
// Safe when Q is finite (no x² overflowed f32: rows past |x| ≈ 1.8e19 take the welford row, which scales)
// and Q ≥ kSafeMin² or eps ≥ kRmsEpsMin: a square below f32's normal range is off by at most 2^-150, so
// n ≤ 2^31 of them move Q/n by 2^-150 at most, which is 2^-39 of Q/n when Q ≥ 2^-80 and 2^-50 of
// Q/n + eps when eps ≥ 2^-100. NaN/Inf rows make the sums non-finite; eps = 0 on a zero row makes
// rstd +Inf: both take the welford row.
constexpr double kRmsEpsMin = 0x1p-100;

template <class T>
Stats rms_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const double epsd = static_cast<double>(eps);
  double s = 0, q = 0;
  float unused = 0;
  centred_sums<T, false>(x, n, 0.0f, s, q, unused);
  const float rstd = static_cast<float>(1.0 / std::sqrt(q / static_cast<double>(n) + epsd));
  const bool safe = std::isfinite(s) && std::isfinite(q) &&
                    (q >= static_cast<double>(kSafeMin) * kSafeMin || epsd >= kRmsEpsMin) && std::isfinite(rstd);
  return {0.0f, 0.0f, rstd, safe};
}

template <class T>
Stats stats_of(const typename T::Bits* x, std::int64_t n, float eps, bool centred) {
  return centred ? row_stats<T>(x, n, eps) : rms_stats<T>(x, n, eps);
}

// The output pass. kNaN: y may hold NaN (only bf16's narrowing cares; see rows_typed).
// G: how gamma and beta are stored (T, or F32 once widened; see rows_affine).
template <class T, class G, bool kGamma, bool kBeta, bool kNaN>
struct Normalizer {
  using B = typename T::Bits;
  const typename G::Bits* gamma;
  const typename G::Bits* beta;
  __m256 mv, lo_rstd, rstd;

  __m256 one(__m256 xv, __m256 g, __m256 b) const {
    const __m256 t = _mm256_fmadd_ps(_mm256_sub_ps(xv, mv), rstd, lo_rstd);
    if constexpr (kGamma && kBeta) return _mm256_fmadd_ps(t, g, b);
    else if constexpr (kGamma) return _mm256_mul_ps(t, g);
    else if constexpr (kBeta) return _mm256_add_ps(t, b);
    else return t;
  }

  // Elements [i, i + count), count < 16, with ordinary stores.
  void span(const B* x, B* y, std::int64_t i, std::int64_t count) const {
    const __m256 zero = _mm256_setzero_ps();
    if (count >= 8) {
      store8<T>(y + i, one(load<T>(x + i), kGamma ? load<G>(gamma + i) : zero, kBeta ? load<G>(beta + i) : zero));
      i += 8;
      count -= 8;
    }
    if (count > 0) {
      store_tail<T>(y + i,
                    one(load_tail<T>(x + i, count), kGamma ? load_tail<G>(gamma + i, count) : zero,
                        kBeta ? load_tail<G>(beta + i, count) : zero),
                    count);
    }
  }

  // kStream: y + head is 32-byte aligned, y is streamed, and the next row's x (next) is prefetched
  // into L2 meanwhile, so DRAM keeps reading while this pass runs from L1 (kPrefetch).
  template <bool kStream>
  void row(const B* x, B* y, std::int64_t n, std::int64_t head, const B* next) const {
    span(x, y, 0, head);
    std::int64_t i = head;
    __m256 g0 = _mm256_setzero_ps(), g1 = g0, b0 = g0, b1 = g0;
    for (; i + 16 <= n; i += 16) {
      if constexpr (kStream && kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(next + i), _MM_HINT_T1);
      __m256 x0, x1;
      load16<T>(x + i, x0, x1);
      if constexpr (kGamma) load16_for<T, G>(gamma + i, g0, g1);
      if constexpr (kBeta) load16_for<T, G>(beta + i, b0, b1);
      store16<T, kStream, kNaN>(y + i, one(x0, g0, b0), one(x1, g1, b1));
    }
    span(x, y, i, n - i);
  }
};

template <class T, class G, bool kGamma, bool kBeta, bool kNaN>
void rows_loop(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end,
               const typename G::Bits* gamma, const typename G::Bits* beta) {
  using B = typename T::Bits;
  const B* x = static_cast<const B*>(t.x);
  B* y = static_cast<B*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const float eps = static_cast<float>(p.eps);
  const bool stream = 2 * p.rows * p.cols * static_cast<std::int64_t>(sizeof(B)) > kStreamBytes;
  Normalizer<T, G, kGamma, kBeta, kNaN> norm{gamma, beta, {}, {}, {}};
  const bool is_centred = p.op.norm == Norm::layernorm;  // one row driver for both ops: only the statistics differ
  // Row + 1's statistics before row's output pass: see kPipeline.
  Stats next = begin < end ? stats_of<T>(x + begin * n, n, eps, is_centred) : Stats{};
  for (std::int64_t row = begin; row < end; ++row) {
    const B* xr = x + row * n;
    B* yr = y + row * n;
    const Stats s = next;
    if (kPipeline && row + 1 < end) next = stats_of<T>(xr + n, n, eps, is_centred);
    if (!s.safe) {
      welford_row(p, t, row);
    } else {
      if (mean) mean[row] = s.m + s.mean_lo;
      if (rstd) rstd[row] = s.rstd;
      norm.mv = _mm256_set1_ps(s.m);
      norm.rstd = _mm256_set1_ps(s.rstd);
      norm.lo_rstd = _mm256_set1_ps(-s.mean_lo * s.rstd);
      const auto addr = reinterpret_cast<std::uintptr_t>(yr);
      const std::int64_t head = static_cast<std::int64_t>(((32 - addr % 32) % 32) / sizeof(B));
      if (stream && addr % sizeof(B) == 0 && head < n) {
        norm.template row<true>(xr, yr, n, head, row + kAhead < end ? xr + kAhead * n : xr);
      } else {
        norm.template row<false>(xr, yr, n, 0, xr);
      }
    }
    if (!kPipeline && row + 1 < end) next = stats_of<T>(xr + n, n, eps, is_centred);
  }
  if (stream) _mm_sfence();  // the streamed lines are visible before the caller reads y
}

// f16 rows up to kWideMax long get gamma and beta widened to f32 once per call, on the stack (2 x 16
// KiB): the output loop then converts only x, 1 vcvtph2ps per vector instead of 3: f16 64x768 20.3 ->
// 21.8 GB/s, 64x4096 24.3 -> 27.0 (scratch driver, best of 200, one run). Not for bf16: its unpack
// order would need a vpermq per 16 elements on x and on y, for one op saved per vector.
constexpr std::int64_t kWideMax = 4096;

template <class T, bool kGamma, bool kBeta, bool kNaN>
void rows_affine(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  using B = typename T::Bits;
  if (staged.gamma || staged.beta) return rows_loop<T, F32, kGamma, kBeta, kNaN>(p, t, begin, end, staged.gamma, staged.beta);
  const B* gamma = static_cast<const B*>(t.gamma);
  const B* beta = static_cast<const B*>(t.beta);
  const std::int64_t n = p.cols;
  if constexpr (std::is_same_v<T, F16> && (kGamma || kBeta)) {
    if (n <= kWideMax) {
      alignas(32) float g32[kWideMax], b32[kWideMax];
      const auto widen = [n](const B* src, float* dst) {
        std::int64_t i = 0;
        for (; i + 8 <= n; i += 8) _mm256_store_ps(dst + i, load<T>(src + i));
        if (i < n) _mm256_maskstore_ps(dst + i, tail_mask(n - i), load_tail<T>(src + i, n - i));
      };
      if (kGamma) widen(gamma, g32);
      if (kBeta) widen(beta, b32);
      return rows_loop<T, F32, kGamma, kBeta, kNaN>(p, t, begin, end, g32, b32);
    }
  }
  rows_loop<T, T, kGamma, kBeta, kNaN>(p, t, begin, end, gamma, beta);
}

// True when every f32 element of v[0, n) is finite.
bool all_finite_f32(const float* v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

// True when every bf16 element of v[0, n) is finite (exponent field not all ones).
bool all_finite_bf16(const std::uint16_t* v, std::int64_t n) {
  const __m256i exp = _mm256_set1_epi16(0x7F80);
  __m256i bad = _mm256_setzero_si256();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i e = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)), exp);
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(e, exp));
  }
  bool ok = _mm256_testz_si256(bad, bad) != 0;
  for (; i < n; ++i) ok = ok && (v[i] & 0x7F80) != 0x7F80;
  return ok;
}

// y of a fast-path row is finite or ±Inf when gamma and beta are finite: x − m, rstd (finite: rows
// with var + eps = 0 take the welford row) and −mean_lo·rstd are finite, and an fma of finite
// operands never gives NaN. Then bf16's narrowing skips its NaN test (2 of ~15 ops per vector).
template <class T, bool kNaN>
void rows_nan(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, bool g, bool b, const Staged& s) {
  if (g && b) rows_affine<T, true, true, kNaN>(p, t, begin, end, s);
  else if (g) rows_affine<T, true, false, kNaN>(p, t, begin, end, s);
  else if (b) rows_affine<T, false, true, kNaN>(p, t, begin, end, s);
  else rows_affine<T, false, false, kNaN>(p, t, begin, end, s);
}

template <class T>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& s) {
  const bool g = p.has_gamma && t.gamma, b = p.has_beta && t.beta;
  if constexpr (std::is_same_v<T, BF16>) {
    const bool staged = s.gamma || s.beta;
    const bool finite =
        staged ? (!g || all_finite_f32(s.gamma, p.cols)) && (!b || all_finite_f32(s.beta, p.cols))
               : (!g || all_finite_bf16(static_cast<const std::uint16_t*>(t.gamma), p.cols)) &&
                     (!b || all_finite_bf16(static_cast<const std::uint16_t*>(t.beta), p.cols));
    if (finite) return rows_nan<T, false>(p, t, begin, end, g, b, s);
  }
  rows_nan<T, true>(p, t, begin, end, g, b, s);
}

// h = x + residual for n elements of T: the f32 sum rounded once to T. Correctly rounded: f32's sum is
// IEEE's, and f16/bf16 values are exact in f32, whose 24 bits are at least 2p + 2 of theirs (p = 11, 8),
// so rounding the f32 sum to T is the once-rounded sum (Figueroa, "When is double rounding innocuous?",
// 1995); tests/test_add_reference.cpp and verify's h check compare every h with the exact sum.
template <class T>
void add_row(const typename T::Bits* x, const typename T::Bits* r, typename T::Bits* h, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 s = _mm256_add_ps(load<T>(x + i), load<T>(r + i));
    if constexpr (std::is_same_v<T, F32>) _mm256_storeu_ps(h + i, s);
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), narrow8<T>(s));
  }
  if (i == n) return;
  // The tail through an 8-element buffer (no library calls in an ISA translation unit, isa.hpp).
  typename T::Bits xb[8] = {}, rb[8] = {}, hb[8];
  for (std::int64_t k = 0; k < n - i; ++k) xb[k] = x[i + k], rb[k] = r[i + k];
  const __m256 s = _mm256_add_ps(load<T>(xb), load<T>(rb));
  if constexpr (std::is_same_v<T, F32>) _mm256_storeu_ps(hb, s);
  else _mm_storeu_si128(reinterpret_cast<__m128i*>(hb), narrow8<T>(s));
  for (std::int64_t k = 0; k < n - i; ++k) h[i + k] = hb[k];
}

template <class T>
void add_rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using B = typename T::Bits;
  const auto* x = static_cast<const B*>(t.x);
  const auto* r = static_cast<const B*>(t.residual);
  auto* h = static_cast<B*>(t.h);
  for (std::int64_t row = begin; row < end; ++row) add_row<T>(x + row * p.cols, r + row * p.cols, h + row * p.cols, p.cols);
}

}  // namespace

void add_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return add_rows_typed<F32>(p, t, begin, end);
    case DType::f16: return add_rows_typed<F16>(p, t, begin, end);
    case DType::bf16: return add_rows_typed<BF16>(p, t, begin, end);
    case DType::f64: return;  // not offered (as rows)
  }
}

void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const Staged& staged) {
  switch (p.dtype) {
    case DType::f32: return rows_typed<F32>(p, t, begin, end, staged);
    case DType::f16: return rows_typed<F16>(p, t, begin, end, staged);
    case DType::bf16: return rows_typed<BF16>(p, t, begin, end, staged);
    case DType::f64: return;  // not offered: avx2_kernel.cpp declares f32, f16, bf16 only
  }
}

}  // namespace lnorm::cpu::avx2
