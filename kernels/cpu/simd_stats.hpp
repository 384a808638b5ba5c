// Part of simd_body.hpp (its header has the algorithms, and why these files are included inside an anonymous
// namespace after the layer's header): the fast kernels' per-row statistics: the shift, the fused
// sums, the corrected two-pass, RMSNorm's sums, and the constants they are tuned by.
#pragma once

namespace fast {

// Elements per block of the f32 sums: 8 additions per lane per accumulator (4 accumulators of L lanes: 512 on
// AVX-512, 256 on AVX2), folded into f64 across blocks, so a row's error does not grow with its length
// (avx2's first version, one f32 accumulation over the row, read rstd 62 ulps on 65537-wide rows).
template <class V>
constexpr std::int64_t kBlock = 32 * V::kLanes;
constexpr double kQMin = 0x1p-80;
// Bytes of y above which it is written with non-temporal stores: 8 MiB, i.e. x + y > 16 MiB. Copies of the same
// bytes (vector vs streaming, medians of 7, one run, on AVX2) 52 vs 45 GB/s at 6 MiB, 54 vs 48 at 16 MiB, 35 vs
// 44 at 32 MiB. lnorm_gbench (medians of 5, two runs): with 32 MiB f32 4096x1024 (16 MiB of y) ran at
// 20.5, 20.1 GB/s, with 8 MiB at 37.8, 31.7 (streaming copy 64-68); bf16 4096x2048 unchanged.
constexpr std::int64_t kStreamBytes = std::int64_t{8} << 20;
// The fused pass's acceptance bound on K = (Q/n)/var. var's relative error is about K·e_Q + 2·sqrt(K(K−1))·e_S
// (e: the sums' relative rounding errors), so K ≤ 2 costs at most ~3.8x the corrected two-pass's e_Q. With it
// `lnorm verify --kernel avx2` gave worst f32 y 4.77 / 4.31 / 5.21 scaled ulps (seeds 1, 2, 7 with --cases
// 1000), no worse than the two-pass it replaced (5.36).
constexpr double kMaxCancel = 2.0;
// Streaming mode: prefetch the row kAhead on into L2 during the output pass. AVX2, 8192x4096 f32 (best of 25
// against a streaming copy in the same run, two runs): with the next row's statistics first and the prefetch
// 0.71, 0.72 of the copy; prefetch alone 0.64, 0.63; neither 0.58. AVX-512, 16384x4096 f32 0.62 of the streaming copy with it, 0.55 without; bf16 0.61 vs 0.43; row + 1
// and row + 4 were no better (lnorm_gbench, medians of 5, one run).
constexpr bool kPrefetch = true;
constexpr std::int64_t kAhead = 2;

struct Stats {
  float m, mean_lo, rstd;
  bool safe;
};

// Whether rows_typed takes row r + 1's statistics before row r's output pass (ahead) or row r's own just before
// it (in order); the same bits either way. Ahead hides the statistics' scalar tail (f64 divisions, sqrt) behind
// the other row's output loop, which pays on short rows in cache; but it reads the next row between a row's
// statistics and its output pass, and on long rows (two rows of x beside gamma and beta are more than L1) or at
// DRAM sizes the row's x has left L1 by then. Measured in one process per setting pair, the two settings and a
// streaming copy interleaved in 9 rounds, median of the per-round ratios in order / ahead (AMD EPYC Zen 5,
// docs/performance.md): f32 64x768 0.93-1.01, 256x1024 0.97-1.07; 128x2048 1.02-1.19, 64x4096
// 1.09-1.14, 32x8192 1.00-1.05; bf16 (gamma and beta widened to f32) 768-2048 wide 0.90-1.01, 64x4096 1.00-1.06;
// at DRAM sizes (16384x1024, 8192x2048, 16384x4096) f32 0.96-1.17, bf16 0.98-1.16. So rows of x from
// kInOrderRowBytes up, and every streamed call, go in order.
constexpr std::int64_t kInOrderRowBytes = 8192;
template <class X, bool NT>
bool stats_ahead(std::int64_t n) {
  return !NT && n * static_cast<std::int64_t>(sizeof(typename X::Bits)) < kInOrderRowBytes;
}

template <class V>
void fold(typename V::F a, typename V::F b, typename V::D& lo, typename V::D& hi) {
  const typename V::F s = V::add(a, b);
  lo = V::add_pd(lo, V::lo_pd(s));
  hi = V::add_pd(hi, V::hi_pd(s));
}

// Σ d and Σ d² for d = x − c over the row, blocked as kBlock says (f32 within a block, f64 across). WithS = false
// (RMSNorm, c = 0): Σ d² alone (s_out = 0), the same bits for it; the sketches of RMSNorm this kernel is held
// against do no more.
template <class V, class T, bool WithS = true>
void centred_sums(const typename T::Bits* x, std::int64_t n, float c, double& s_out, double& q_out) {
  using F = typename V::F;
  using D = typename V::D;
  constexpr int L = V::kLanes;
  constexpr std::int64_t kB = kBlock<V>;
  const std::int64_t full = n / L * L, r = n - full;
  const auto tail = static_cast<typename V::M>((1u << r) - 1);
  const F cv = V::set1(c);
  D s_lo = V::zero_pd(), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
  for (std::int64_t block = 0; block < n; block += kB) {
    const std::int64_t block_end = block + kB < full ? block + kB : full;
    F s0 = V::zero(), s1 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    std::int64_t i = block;
    for (; i + 4 * L <= block_end; i += 4 * L) {
      const F d0 = V::sub(V::template load<T>(x + i), cv), d1 = V::sub(V::template load<T>(x + i + L), cv);
      const F d2 = V::sub(V::template load<T>(x + i + 2 * L), cv), d3 = V::sub(V::template load<T>(x + i + 3 * L), cv);
      if constexpr (WithS) {
        s0 = V::add(s0, V::add(d0, d2));
        s1 = V::add(s1, V::add(d1, d3));
      }
      q0 = V::fmadd(d0, d0, q0);
      q1 = V::fmadd(d1, d1, q1);
      q2 = V::fmadd(d2, d2, q2);
      q3 = V::fmadd(d3, d3, q3);
    }
    for (; i < block_end; i += L) {
      const F d = V::sub(V::template load<T>(x + i), cv);
      if constexpr (WithS) s0 = V::add(s0, d);
      q0 = V::fmadd(d, d, q0);
    }
    if (r && block + kB >= n) {
      const F d = V::maskz_sub(tail, V::template maskz_load<T>(tail, x + full), cv);
      if constexpr (WithS) s1 = V::add(s1, d);
      q1 = V::fmadd(d, d, q1);
    }
    if constexpr (WithS) fold<V>(s0, s1, s_lo, s_hi);
    fold<V>(V::add(q0, q1), V::add(q2, q3), q_lo, q_hi);
  }
  s_out = hsum_pd<V>(V::add_pd(s_lo, s_hi));
  q_out = hsum_pd<V>(V::add_pd(q_lo, q_hi));
}

// The fused pass's centre: the mean of the first 32 elements (x[0] for shorter rows, or when their f32
// pair sums overflow). Summed as 16 f32 pair sums (x[i] + x[i + L] for each group of 2L), then in f64 in a
// fixed order: exact on a constant row (2c in f32, 32c in f64, / 32), the same bits in every layer of a width.
template <class V, class T>
float row_shift(const typename T::Bits* x, std::int64_t n) {
  constexpr int L = V::kLanes;
  const float x0 = V::first(V::template maskz_load<T>(1, x));
  if (n < 32) return x0;
  typename V::D acc{};
  for (int j = 0; j < 32; j += 2 * L) {
    const typename V::F pairs = V::add(V::template load<T>(x + j), V::template load<T>(x + j + L));
    const typename V::D both = V::add_pd(V::lo_pd(pairs), V::hi_pd(pairs));
    acc = j == 0 ? both : V::add_pd(acc, both);
  }
  const float shift = static_cast<float>(hsum_pd<V>(acc) * (1.0 / 32));
  return std::isfinite(shift) ? shift : x0;
}

// shift: row_shift<V, T>(x, n), taken by the caller (rows_typed takes it a row ahead).
template <class V, class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, float eps, float shift) {
  const double nd = static_cast<double>(n), epsd = static_cast<double>(eps);
  // Pass 1, fused: S = Σ (x − shift), Q = Σ (x − shift)² in one read; accepted when the
  // cancellation factor K = (Q/n)/var is at most kMaxCancel and the range is safe.
  double s1 = 0, q1 = 0;
  centred_sums<V, T>(x, n, shift, s1, q1);
  const double mean = static_cast<double>(shift) + s1 / nd;
  const double var1 = q1 / nd - (s1 / nd) * (s1 / nd);
  if (std::isfinite(s1) && std::isfinite(q1) && var1 > 0 && q1 / nd <= kMaxCancel * var1 && q1 >= kQMin) {
    const float m1 = static_cast<float>(mean);
    return {m1, static_cast<float>(mean - static_cast<double>(m1)), static_cast<float>(1.0 / std::sqrt(var1 + epsd)), true};
  }
  // Otherwise (x[0..31] far from the mean, constant rows, rows near the range limits; rare) the
  // corrected two-pass about m = f32(mean).
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const std::int64_t full = n / L * L, r = n - full;
  const auto tail = static_cast<typename V::M>((1u << r) - 1);
  const float m = static_cast<float>(mean);
  // Pass 2: c = Σ (x − m), q = Σ (x − m)².
  const F mv = V::set1(m);
  double c = 0, q = 0;
  centred_sums<V, T>(x, n, m, c, q);
  const double mean_lo = c / nd;
  const double var = std::fmax(q / nd - mean_lo * mean_lo, 0.0);
  const bool finite = std::isfinite(m) && std::isfinite(c) && std::isfinite(q);
  bool safe = finite && q >= kQMin;
  if (finite && q == 0) {  // constant (exactly beta below), or a spread too small to square in f32
    typename V::M differs = 0;
    for (std::int64_t i = 0; i < full; i += L) differs |= V::cmp_neq(V::template load<T>(x + i), mv);
    if (r) differs |= V::mask_cmp_neq(tail, V::template maskz_load<T>(tail, x + full), mv);
    safe = differs == 0;
  }
  // rstd from the f64 variance and the f32 eps, rounded once to f32.
  return {m, static_cast<float>(mean_lo), static_cast<float>(1.0 / std::sqrt(var + epsd)), safe};
}

// RMSNorm's statistics: the fused read with the shift 0, mean 0, rstd = 1/sqrt(Q/n + eps); safe when Q is
// finite and Q ≥ kQMin or eps ≥ kRmsEpsMin: each square below f32's normal range is off by at most 2^-150, and
// n ≤ 2^31 of them move Q/n by 2^-150 at most, which is 2^-39 of Q/n when Q ≥ 2^-80 and 2^-50 of Q/n + eps
// when eps ≥ 2^-100. NaN/Inf rows make the sums non-finite; eps = 0 on a zero row makes rstd +Inf: both take
// the welford row.
constexpr double kRmsEpsMin = 0x1p-100;

template <class V, class T>
Stats rms_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const double epsd = static_cast<double>(eps);
  double s = 0, q = 0;
  centred_sums<V, T, false>(x, n, 0.0f, s, q);  // s = 0: Σ x finite wherever Σ x² is
  const float rstd = static_cast<float>(1.0 / std::sqrt(q / static_cast<double>(n) + epsd));
  const bool safe = std::isfinite(q) && (q >= kQMin || epsd >= kRmsEpsMin) && std::isfinite(rstd);
  return {0.0f, 0.0f, rstd, safe};
}

// shift: LayerNorm's row_shift (RMSNorm: unused).
template <class V, class T>
Stats stats_of(const typename T::Bits* x, std::int64_t n, float eps, bool centred, float shift) {
  return centred ? row_stats<V, T>(x, n, eps, shift) : rms_stats<V, T>(x, n, eps);
}

}  // namespace fast
