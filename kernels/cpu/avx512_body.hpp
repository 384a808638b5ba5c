// The AVX-512 kernels' algorithms, written once against an operations layer V: NativeOps<>
// (avx512_native_ops.hpp, intrinsics, in the ISA translation units avx512.cpp, avx512_cr.cpp,
// avx512_bf16.cpp) or EmulatedOps (avx512_emulated_ops.hpp, lane loops, in the generic test kernels
// avx512_emu and avx512_cr_emu). The same source, so the emulation verified by the suite on every
// machine is the code that runs natively; tests/test_avx512_emulation.cpp checks the bits agree.
//
// Included inside an anonymous namespace after the layer's header: every function here has internal
// linkage in each TU, so no AVX-512 instantiation can be picked by the linker for generic code
// (ctest isa_objects_share_no_code). Scalar code here (per-row statistics) is compiled with
// -ffp-contract=off in both kinds of TU, so it too gives the same bits.
//
// fast (avx512): avx2.cpp's algorithm on 16 lanes. Per row, one read of x for the statistics and one
// output pass with the row in L1 (DRAM sees one read of x and one write of y):
//   1. shift = mean of x[0..31] (x[0] for shorter rows);  S = Σ (x − shift),  Q = Σ (x − shift)²;
//      mean = shift + S/n,  var = Q/n − (S/n)²;  accepted when K = (Q/n)/var ≤ kMaxCancel (= 2, as
//      avx2), var > 0, S and Q finite and Q ≥ kQMin;  m = f32(mean),  mean_lo = f32(mean − m).
//   1b. Otherwise (x[0..31] far from the mean, constant rows, rows near the range limits; rare) the
//      corrected two-pass about m:  c = Σ (x − m),  q = Σ (x − m)²,  mean_lo = c/n,  var = q/n − mean_lo².
//   2. y = fma(x − m, rstd, −mean_lo·rstd) · γ + β;  16-bit γ, β widened to f32 once per call (kWideMax).
// The two-float mean m + mean_lo makes x − m exact on offset rows: no kappa term. Sums: 4 accumulators
// x 16 lanes, 64 elements per iteration, blocks of 512 elements summed in f32 (8 additions per lane per
// accumulator, as avx2's 256-element blocks on 8 lanes x 4) and folded into f64 across blocks. The
// statistics of row r + 1 are computed before row r's output pass, and in streaming mode row r + 2 is
// prefetched into L2 during it (avx2's kPipeline, kPrefetch). The range check needs no max|x − m| per
// element (avx2's pass 1b computes one):
//   - overflow of any x − shift, x − m, square or block sum makes S, Q, m, c or q non-finite;
//   - Q, q ≥ 2^-80 (kQMin) bounds the error of squares that fall below f32's normal range: each is off
//     by at most 2^-150, n ≤ 2^31 of them are 2^-119 absolute, 2^-39 of q;
//   - q = 0 is a constant row (checked: one more pass, only then) or all |x − m| < 2^-75 (not constant:
//     welford).
// Rows failing it (and NaN/Inf rows) take cpu::welford_row, the scalar kernel with exact scaling.
// Output: gamma/beta presence hoisted into template parameters; non-temporal stores (aligned main
// loop after a masked head) when the whole y exceeds kStreamBytes; masked head and tail, nothing read
// or written past a row.
//
// cr (avx512_cr): avx2_cr.cpp's algorithm (Ziv's rounding test; its header has the algorithm and the
// proven error bound) on 8 f64 lanes, 4 accumulators (32 lanes of sums):
//   1. s = Σ (x − x[0]) in blocks of 32·ceil(sqrt(n/32)) (plain adds), m + m_lo = x[0] + s/n (TwoSum);
//   2. q2 = Σ (x − m)² (one FMA each, blocked the same) and max |x − m|; rstd = 1/sqrt(q2/n + eps);
//   3. y = ((x − m)·rstd)·γ + β in f64, tested against one E per row: f32 by rounding y ± E
//      (cvt_differ_f32), f16/bf16 by y's f32 rounding's distance from T's midpoint patterns (near_mid16);
//      certified lanes stored rounded once, the rest settled by avx2_cr_exact.hpp's scalar medium test
//      and, where that fails, its double-double path (the same code as avx2_cr's).
// The bound is avx2_cr's with k = block/32 + ceil(n32/block) + 12 (≤ 4 roundings in the tail loop, 5 in
// the folds, 3 spare; cr::fast_stats). Differences from avx2_cr: x is re-read and converted from storage
// in each pass (no f64 scratch row: rows(), the registry's signature, has no scratch), and γ, β are
// converted per element; path counts are not kept.
// Speed of both: `lnorm bench --kernel avx512 --kernel avx512_cr --quick`; the versions' measurements
// are in docs/performance.md.
#ifndef LNORM_AVX512_BODY_INCLUDED
#define LNORM_AVX512_BODY_INCLUDED

inline double sum8(const double* v) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }

template <class V>
double hsum_pd(typename V::D a) {
  double l[8];
  V::store_pd(l, a);
  return sum8(l);
}

// Elements from p to the next multiple of `align` bytes (p a multiple of sizeof(B); -1 if not).
template <class B>
std::int64_t head_to_align(const B* p, std::int64_t align) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % sizeof(B) != 0) return -1;
  return static_cast<std::int64_t>((static_cast<std::uintptr_t>(align) - a % static_cast<std::uintptr_t>(align)) %
                                   static_cast<std::uintptr_t>(align) / sizeof(B));
}

namespace fast {

constexpr std::int64_t kBlock = 512;
constexpr double kQMin = 0x1p-80;
// Bytes of y above which it is written with non-temporal stores: 8 MiB, i.e. x + y > 16 MiB, avx2.cpp's
// kStreamBytes. lnorm_gbench (medians of 5, two runs): with 32 MiB f32 4096x1024 (16 MiB of y) ran at
// 20.5, 20.1 GB/s, with 8 MiB at 37.8, 31.7 (streaming copy 64-68); bf16 4096x2048 unchanged.
constexpr std::int64_t kStreamBytes = std::int64_t{8} << 20;
// The fused pass's acceptance bound on K = (Q/n)/var: avx2.cpp's kMaxCancel (its header derives it and
// gives the errors it measured), so the two kernels accept the same rows.
constexpr double kMaxCancel = 2.0;
// Streaming mode: prefetch the row kAhead on into L2 during the output pass (avx2.cpp's kPrefetch and
// kAhead): 16384x4096 f32 0.62 of the streaming copy with it, 0.55 without; bf16 0.61 vs 0.43; row + 1
// and row + 4 were no better (lnorm_gbench, medians of 5, one run).
constexpr bool kPrefetch = true;
constexpr std::int64_t kAhead = 2;

struct Stats {
  float m, mean_lo, rstd;
  bool safe;
};

template <class V>
void fold(typename V::F a, typename V::F b, typename V::D& lo, typename V::D& hi) {
  const typename V::F s = V::add(a, b);
  lo = V::add_pd(lo, V::lo_pd(s));
  hi = V::add_pd(hi, V::hi_pd(s));
}

// Σ d and Σ d² for d = x − c over the row, blocked as kBlock says (f32 within a block, f64 across).
template <class V, class T>
void centred_sums(const typename T::Bits* x, std::int64_t n, float c, double& s_out, double& q_out) {
  using F = typename V::F;
  using D = typename V::D;
  const std::int64_t full = n / 16 * 16, r = n - full;
  const auto tail = static_cast<typename V::M16>((1u << r) - 1);
  const F cv = V::set1(c);
  D s_lo = V::zero_pd(), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
  for (std::int64_t block = 0; block < n; block += kBlock) {
    const std::int64_t block_end = block + kBlock < full ? block + kBlock : full;
    F s0 = V::zero(), s1 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    std::int64_t i = block;
    for (; i + 64 <= block_end; i += 64) {
      const F d0 = V::sub(V::template load<T>(x + i), cv), d1 = V::sub(V::template load<T>(x + i + 16), cv);
      const F d2 = V::sub(V::template load<T>(x + i + 32), cv), d3 = V::sub(V::template load<T>(x + i + 48), cv);
      s0 = V::add(s0, V::add(d0, d2));
      s1 = V::add(s1, V::add(d1, d3));
      q0 = V::fmadd(d0, d0, q0);
      q1 = V::fmadd(d1, d1, q1);
      q2 = V::fmadd(d2, d2, q2);
      q3 = V::fmadd(d3, d3, q3);
    }
    for (; i < block_end; i += 16) {
      const F d = V::sub(V::template load<T>(x + i), cv);
      s0 = V::add(s0, d);
      q0 = V::fmadd(d, d, q0);
    }
    if (r && block + kBlock >= n) {
      const F d = V::maskz_sub(tail, V::template maskz_load<T>(tail, x + full), cv);
      s1 = V::add(s1, d);
      q1 = V::fmadd(d, d, q1);
    }
    fold<V>(s0, s1, s_lo, s_hi);
    fold<V>(V::add(q0, q1), V::add(q2, q3), q_lo, q_hi);
  }
  s_out = hsum_pd<V>(V::add_pd(s_lo, s_hi));
  q_out = hsum_pd<V>(V::add_pd(q_lo, q_hi));
}

// The fused pass's centre: the mean of the first 32 elements (x[0] for shorter rows, or when their f32
// pair sums overflow), as avx2.cpp's row_shift. Summed as 16 f32 pair sums, then in f64 in a fixed
// order: exact on a constant row (2c in f32, 32c in f64, / 32), the same bits in both layers.
template <class V, class T>
float row_shift(const typename T::Bits* x, std::int64_t n) {
  const float x0 = V::first(V::template maskz_load<T>(1, x));
  if (n < 32) return x0;
  const typename V::F pairs = V::add(V::template load<T>(x), V::template load<T>(x + 16));
  const float shift = static_cast<float>(hsum_pd<V>(V::add_pd(V::lo_pd(pairs), V::hi_pd(pairs))) * (1.0 / 32));
  return std::isfinite(shift) ? shift : x0;
}

template <class V, class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const double nd = static_cast<double>(n), epsd = static_cast<double>(eps);
  // Pass 1, fused (avx2.cpp's): S = Σ (x − shift), Q = Σ (x − shift)² in one read; accepted when the
  // cancellation factor K = (Q/n)/var is at most kMaxCancel and the range is safe.
  const float shift = row_shift<V, T>(x, n);
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
  const std::int64_t full = n / 16 * 16, r = n - full;
  const auto tail = static_cast<typename V::M16>((1u << r) - 1);
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
    typename V::M16 differs = 0;
    for (std::int64_t i = 0; i < full; i += 16) differs |= V::cmp_neq(V::template load<T>(x + i), mv);
    if (r) differs |= V::mask_cmp_neq(tail, V::template maskz_load<T>(tail, x + full), mv);
    safe = differs == 0;
  }
  // rstd from the f64 variance and the f32 eps, rounded once to f32.
  return {m, static_cast<float>(mean_lo), static_cast<float>(1.0 / std::sqrt(var + epsd)), safe};
}

// RMSNorm's statistics (avx2.cpp's rms_stats): the fused read with the shift 0, mean 0,
// rstd = 1/sqrt(Q/n + eps); safe when Q is finite and Q ≥ kQMin or eps ≥ kRmsEpsMin (the squares below
// f32's normal range then cost at most 2^-39 of mean(x²) + eps; avx2.cpp derives it).
constexpr double kRmsEpsMin = 0x1p-100;

template <class V, class T>
Stats rms_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  const double epsd = static_cast<double>(eps);
  double s = 0, q = 0;
  centred_sums<V, T>(x, n, 0.0f, s, q);
  const float rstd = static_cast<float>(1.0 / std::sqrt(q / static_cast<double>(n) + epsd));
  const bool safe = std::isfinite(s) && std::isfinite(q) && (q >= kQMin || epsd >= kRmsEpsMin) && std::isfinite(rstd);
  return {0.0f, 0.0f, rstd, safe};
}

template <class V, class T>
Stats stats_of(const typename T::Bits* x, std::int64_t n, float eps, bool centred) {
  return centred ? row_stats<V, T>(x, n, eps) : rms_stats<V, T>(x, n, eps);
}

// y = fma(x − m, rstd, −mean_lo·rstd) · γ + β (avx2.cpp's form: the two-float centre in one FMA). NT: y
// is streamed, and next (the row kAhead rows on) is prefetched into L2 meanwhile, so DRAM keeps
// reading while this pass runs from L1 (avx2.cpp's kPrefetch).
// Gs: how gamma and beta are stored (T, or F32 once widened: rows_wide).
template <class V, class T, class Gs, bool G, bool B, bool NT>
void normalize_row(const typename T::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s, const typename T::Bits* next) {
  using F = typename V::F;
  const F mv = V::set1(s.m), lo_rstd = V::set1(-s.mean_lo * s.rstd), rstd = V::set1(s.rstd);
  const auto one = [&](std::int64_t i, typename V::M16 k, bool masked) {
    const auto ld = [&](const typename Gs::Bits* p) { return masked ? V::template maskz_load<Gs>(k, p) : V::template load<Gs>(p); };
    const F xv = masked ? V::template maskz_load<T>(k, x + i) : V::template load<T>(x + i);
    const F t = V::fmadd(V::sub(xv, mv), rstd, lo_rstd);
    if constexpr (G && B) return V::fmadd(t, ld(gamma + i), ld(beta + i));
    else if constexpr (G) return V::mul(t, ld(gamma + i));
    else if constexpr (B) return V::add(t, ld(beta + i));
    else return t;
  };
  const auto masked_at = [&](std::int64_t i, std::int64_t count) {
    const auto k = static_cast<typename V::M16>((1u << count) - 1);
    V::template mask_store<T>(k, y + i, one(i, k, true));
  };
  std::int64_t i = 0;
  if constexpr (NT) {
    const std::int64_t head = head_to_align(y, 16 * static_cast<std::int64_t>(sizeof(typename T::Bits)));
    const std::int64_t h = head < n ? head : n;
    if (h > 0) masked_at(0, h);
    for (i = h; i + 16 <= n; i += 16) {
      if (kPrefetch) V::prefetch_l2(next + i);
      V::template stream<T>(y + i, one(i, 0, false));
    }
  } else {
    for (; i + 16 <= n; i += 16) V::template store<T>(y + i, one(i, 0, false));
  }
  if (i < n) masked_at(i, n - i);
}

template <class V, class T, class Gs, bool G, bool B, bool NT>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end,
                const typename Gs::Bits* gamma, const typename Gs::Bits* beta) {
  using Bits = typename T::Bits;
  const Bits* x = static_cast<const Bits*>(t.x);
  Bits* y = static_cast<Bits*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const float eps = static_cast<float>(p.eps);
  const bool is_centred = p.op.norm == Norm::layernorm;  // one row driver for both ops: only the statistics differ
  // Row + 1's statistics before row's output pass (avx2.cpp's kPipeline): the scalar tail of one row's
  // statistics (f64 divisions and sqrt) overlaps the other row's output loop.
  Stats next = begin < end ? stats_of<V, T>(x + begin * n, n, eps, is_centred) : Stats{};
  for (std::int64_t row = begin; row < end; ++row) {
    const Bits* xr = x + row * n;
    const Stats s = next;
    if (row + 1 < end) next = stats_of<V, T>(xr + n, n, eps, is_centred);
    if (!s.safe) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = s.m + s.mean_lo;
    if (rstd) rstd[row] = s.rstd;
    const Bits* ahead = row + kAhead < end ? xr + kAhead * n : xr;
    if (NT && head_to_align(y + row * n, 64) >= 0) normalize_row<V, T, Gs, G, B, NT>(xr, gamma, beta, y + row * n, n, s, ahead);
    else normalize_row<V, T, Gs, G, B, false>(xr, gamma, beta, y + row * n, n, s, ahead);
  }
  if (NT) V::sfence();
}

template <class V, class T, class Gs, bool NT>
void rows_nt(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const typename Gs::Bits* gamma,
             const typename Gs::Bits* beta) {
  if (p.has_gamma && p.has_beta) rows_typed<V, T, Gs, true, true, NT>(p, t, begin, end, gamma, beta);
  else if (p.has_gamma) rows_typed<V, T, Gs, true, false, NT>(p, t, begin, end, gamma, beta);
  else if (p.has_beta) rows_typed<V, T, Gs, false, true, NT>(p, t, begin, end, gamma, beta);
  else rows_typed<V, T, Gs, false, false, NT>(p, t, begin, end, gamma, beta);
}

// 16-bit rows up to kWideMax long get gamma and beta widened to f32 once per call, on the stack (2 x 16
// KiB; avx2.cpp's kWideMax, there for f16 only): the output loop then converts x alone, not 3 vectors
// per 16 elements. Widening is exact, so y's bits are the same (docs/performance.md has the speed-up).
constexpr std::int64_t kWideMax = 4096;

template <class V, class T, bool NT>
void rows_wide(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  using Bits = typename T::Bits;
  // Staged by the generic driver (f32 gamma/beta beside 16-bit x, or an offset: w = C + gamma in f32).
  if (staged.gamma || staged.beta) return rows_nt<V, T, F32, NT>(p, t, begin, end, staged.gamma, staged.beta);
  const Bits* gamma = static_cast<const Bits*>(t.gamma);
  const Bits* beta = static_cast<const Bits*>(t.beta);
  const std::int64_t n = p.cols;
  if constexpr (!std::is_same_v<T, F32>) {
    if ((p.has_gamma || p.has_beta) && n <= kWideMax) {
      alignas(64) float g32[kWideMax], b32[kWideMax];
      const auto widen = [n](const Bits* src, float* dst) {
        std::int64_t i = 0;
        for (; i + 16 <= n; i += 16) V::template store<F32>(dst + i, V::template load<T>(src + i));
        if (i < n) {
          const auto k = static_cast<typename V::M16>((1u << (n - i)) - 1);
          V::template mask_store<F32>(k, dst + i, V::template maskz_load<T>(k, src + i));
        }
      };
      if (p.has_gamma) widen(gamma, g32);
      if (p.has_beta) widen(beta, b32);
      return rows_nt<V, T, F32, NT>(p, t, begin, end, g32, b32);
    }
  }
  rows_nt<V, T, T, NT>(p, t, begin, end, gamma, beta);
}

// Rows [begin, end) of p, for storage type T.
template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if (nt) rows_wide<V, T, true>(p, t, begin, end, staged);
  else rows_wide<V, T, false>(p, t, begin, end, staged);
}

}  // namespace fast

namespace cr {

// avx2_cr's scalar slow paths (avx2_cr_exact.hpp, included by every TU that includes this file, before
// it): the medium test (decided) and the double-double path (exact_stats, exact_element).
namespace ex = ::lnorm::cpu::avx2_cr;  // its tags are ours (storage_tags.hpp)

// Bytes of y above which it is streamed: larger than this machine's L3 (AMD EPYC Zen 5: 32 MiB per
// CCD). Not fast::'s 8 MiB: this compute-bound kernel lost with it (lnorm_gbench, medians of 5, two
// runs, 2026-12-01: f32 4096x2048 13.9, 13.9 -> 10.8, 10.5 GB/s; bf16 5.9, 5.9 -> 5.3, 5.3; f32
// 4096x1024 13.0, 14.3 -> 15.1, 14.8).
constexpr std::int64_t kStreamBytes = std::int64_t{32} << 20;
constexpr std::int64_t kLanes = 32;  // 4 accumulators x 8 f64 lanes

// Elements per block of the statistics' sums: each lane adds block/32 terms afresh, then the block's
// sum into its accumulator, so a term goes through block/32 + n/block roundings instead of n/32;
// smallest for block = 32·sqrt(n/32) (avx2_cr.cpp's sum_block with 32 lanes for its 16).
inline std::int64_t sum_block(std::int64_t n) {
  const auto b = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n) / kLanes)));
  return kLanes * (b > 1 ? b : 1);
}

// The fast statistics and the row's error bound (avx2_cr.cpp's FastStats, same fields and meaning).
struct FastStats {
  double m, m_lo, rstd;
  double b, a;      // E = b·(|t| + |β|) + a·|γ| bounds |y − y*| plus the rounding of y ± E
  double dmax;      // ≥ max |x − m| over the row
  bool finite, degenerate, certified;
};

// avx2_cr.cpp's fast_stats on 8 f64 lanes, x re-read from storage (converted exactly) in each pass
// instead of kept in an f64 scratch row. Pass 1: s = Σ (x − x[0]) in blocks (plain adds),
// m + m_lo = x[0] + s/n (TwoSum). Pass 2: q2 = Σ (x − m)² (one FMA each, blocked) and max |x − m|.
// centred = false (RMSNorm): no pass 1, the mean is exactly 0 (m = m_lo = q = 0): pass 2 sums x² and the
// bound has no mean error. w_rel: the weights' relative error (avx2_cr_exact.hpp's row_bound).
template <class V, class T>
FastStats fast_stats(const typename T::Bits* x, std::int64_t n, double eps, bool centred, double w_rel) {
  using D = typename V::D;
  const double nd = static_cast<double>(n);
  const std::int64_t n32 = n / kLanes * kLanes, block = sum_block(n);
  const double c = V::first_pd(V::template maskz_load8<T>(1, x));
  const D cv = V::set1_pd(c);
  D s0 = V::zero_pd(), s1 = s0, s2 = s0, s3 = s0;
  std::int64_t i = centred ? 0 : n;  // RMSNorm skips pass 1
  while (i < n32) {
    const std::int64_t block_end = i + block < n32 ? i + block : n32;
    D t0 = V::zero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += kLanes) {
      t0 = V::add_pd(t0, V::sub_pd(V::template load8<T>(x + i), cv));
      t1 = V::add_pd(t1, V::sub_pd(V::template load8<T>(x + i + 8), cv));
      t2 = V::add_pd(t2, V::sub_pd(V::template load8<T>(x + i + 16), cv));
      t3 = V::add_pd(t3, V::sub_pd(V::template load8<T>(x + i + 24), cv));
    }
    s0 = V::add_pd(s0, t0), s1 = V::add_pd(s1, t1), s2 = V::add_pd(s2, t2), s3 = V::add_pd(s3, t3);
  }
  for (; i < n; i += 8) {  // ≤ 3 full groups of 8, then a masked tail (lanes outside: +0)
    if (n - i >= 8) {
      s0 = V::add_pd(s0, V::sub_pd(V::template load8<T>(x + i), cv));
    } else {
      const auto k = static_cast<typename V::M8>((1u << (n - i)) - 1);
      s0 = V::add_pd(s0, V::maskz_sub_pd(k, V::template maskz_load8<T>(k, x + i), cv));
    }
  }
  const double s = hsum_pd<V>(V::add_pd(V::add_pd(s0, s1), V::add_pd(s2, s3)));
  const double q = centred ? s / nd : 0.0;
  double m = 0, m_lo = 0;
  if (centred) ex::two_sum(c, q, m, m_lo);  // m + m_lo == c + q exactly
  const D mv = V::set1_pd(m);
  D p0 = V::zero_pd(), p1 = p0, p2 = p0, p3 = p0, mx = p0;
  for (i = 0; i < n32;) {  // blocked as pass 1
    const std::int64_t block_end = i + block < n32 ? i + block : n32;
    D t0 = V::zero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += kLanes) {
      const D d0 = V::sub_pd(V::template load8<T>(x + i), mv), d1 = V::sub_pd(V::template load8<T>(x + i + 8), mv);
      const D d2 = V::sub_pd(V::template load8<T>(x + i + 16), mv), d3 = V::sub_pd(V::template load8<T>(x + i + 24), mv);
      t0 = V::fmadd_pd(d0, d0, t0), t1 = V::fmadd_pd(d1, d1, t1), t2 = V::fmadd_pd(d2, d2, t2), t3 = V::fmadd_pd(d3, d3, t3);
      mx = V::max_pd(V::max_pd(V::max_pd(V::abs_pd(d0), V::abs_pd(d1)), V::max_pd(V::abs_pd(d2), V::abs_pd(d3))), mx);
    }
    p0 = V::add_pd(p0, t0), p1 = V::add_pd(p1, t1), p2 = V::add_pd(p2, t2), p3 = V::add_pd(p3, t3);
  }
  for (; i < n; i += 8) {
    D d;
    if (n - i >= 8) {
      d = V::sub_pd(V::template load8<T>(x + i), mv);
    } else {
      const auto k = static_cast<typename V::M8>((1u << (n - i)) - 1);
      d = V::maskz_sub_pd(k, V::template maskz_load8<T>(k, x + i), mv);
    }
    p0 = V::fmadd_pd(d, d, p0);
    mx = V::max_pd(V::abs_pd(d), mx);
  }
  const double q2 = hsum_pd<V>(V::add_pd(V::add_pd(p0, p1), V::add_pd(p2, p3)));
  const double v = q2 / nd + eps, rstd = 1.0 / std::sqrt(v);
  double ml[8];
  V::store_pd(ml, mx);
  double dmax = ml[0];
  for (int l = 1; l < 8; ++l) dmax = ml[l] > dmax ? ml[l] : dmax;

  FastStats st{};
  st.m = m, st.m_lo = m_lo, st.rstd = rstd;
  st.dmax = dmax * (1 + 0x1p-50);  // each |x − m| was rounded to nearest
  st.finite = std::isfinite(s) && std::isfinite(q2);
  st.degenerate = v == 0;
  // avx2_cr.cpp's "Error bound" with this file's sums: a term's partial sums round ≤ block/32 times in
  // its block, ≤ ceil(n32/block) in s0..s3 (p0..p3), ≤ 4 in the tail loop (3 full groups and the masked
  // one, all into s0), 2 in the accumulator folds and 3 in hsum_pd's pairwise sum of 8 lanes, 3 spare.
  const double k = static_cast<double>(block / kLanes + (n32 + block - 1) / block) + 12;
  const ex::RowBound bound = ex::row_bound(k, nd, q, m_lo, q2, v, rstd, centred, w_rel);
  st.b = bound.b, st.a = bound.a, st.certified = bound.certified;
  return st;
}

// max |v| over n storage values (NaN lanes drop out: vmaxpd returns its second operand, the running
// maximum, where the first is NaN; their elements fail the test or give NaN either way).
template <class V, class T>
double max_abs(const typename T::Bits* p, std::int64_t n) {
  using D = typename V::D;
  D mx = V::zero_pd();
  for (std::int64_t i = 0; i < n; i += 8) {
    const auto k = static_cast<typename V::M8>(n - i >= 8 ? 0xFFu : (1u << (n - i)) - 1);
    mx = V::max_pd(V::abs_pd(n - i >= 8 ? V::template load8<T>(p + i) : V::template maskz_load8<T>(k, p + i)), mx);
  }
  double l[8];
  V::store_pd(l, mx);
  double r = l[0];
  for (int j = 1; j < 8; ++j) r = l[j] > r ? l[j] : r;
  return r;
}

// How a row sees its parameters: gamma/beta stored as Gs (T, or f32 beside 16-bit x), w = C + gamma.
struct Params {
  double offset = 0;  // C (0: w = gamma exactly)
  bool centred = true;
};

// Element i that the vector test could not settle: avx2_cr.cpp's settle (the scalar test with the
// element's own E, then the double-double path, its statistics computed once per row on first need).
template <class T, class Gs, bool G, bool B>
typename T::Bits settle(const typename T::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta, std::int64_t n,
                        double eps, std::int64_t i, const FastStats& s, ex::ExactStats& es, bool& have_exact, const Params& pr) {
  using E = T;
  const double xv = ex::to_double<E>(x[i]);
  double g = 1.0, g_lo = 0.0;
  if (G) ex::two_sum(pr.offset, ex::to_double<Gs>(gamma[i]), g, g_lo);  // w = C + γ, exactly as hi + lo
  const double b = B ? ex::to_double<Gs>(beta[i]) : 0.0;
  double t = (xv - s.m) * s.rstd;
  if (G) t = t * g;
  const double y = B ? t + b : t;
  const double e = s.b * (std::abs(t) + std::abs(b)) + (s.a * std::abs(g) + 0x1p-1000);
  typename T::Bits out;
  if (ex::decided<E>(y, e, out)) return out;
  if (!have_exact) {
    es = ex::exact_stats<E>(x, n, eps, pr.centred);
    have_exact = true;
  }
  return ex::exact_element<E>(xv, g, b, es, g_lo);
}

// The output pass: y = ((x − m)·rstd)·γ + β in f64 on 8 lanes, Ziv's test against one E for the row
// (avx2_cr.cpp's normalize_row): f32 by rounding y ± E (cvt_differ_f32); f16/bf16 by y's f32 rounding's
// distance from T's midpoint patterns (near_mid16, avx2_cr.cpp's round8_single). Certified lanes are
// stored rounded once (f16/bf16 through round-to-odd f32); the others settled one by one.
template <class V, class T, class Gs, bool G, bool B, bool NT>
void normalize_row(const typename T::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta,
                   typename T::Bits* y, std::int64_t n, double eps, const FastStats& s, double gmax, double bmax,
                   const Params& pr) {
  using D = typename V::D;
  using M8 = typename V::M8;
  const double t_max = s.dmax * s.rstd * gmax * (1 + 0x1p-40);
  double e_row = (s.b * (t_max + bmax) + s.a * gmax + 0x1p-1000) * (1 + 0x1p-40);
  if (!(e_row == e_row)) e_row = INFINITY;  // a NaN bound would let lo and hi agree
  const double y_min = std::fmax(e_row * 0x1p25, std::is_same_v<T, F16> ? 0x1p-14 : 0x1p-126) * (1 + 0x1p-20);
  const float y_min_f = static_cast<float>(std::fmin(y_min, 0x1p127));
  const D mv = V::set1_pd(s.m), rv = V::set1_pd(s.rstd), ev = V::set1_pd(e_row), cv = V::set1_pd(pr.offset);
  ex::ExactStats es{};
  bool have_exact = false;
  const auto group = [&](std::int64_t i, std::int64_t count, bool stream) {
    const bool full = count == 8;
    const auto k = static_cast<M8>(full ? 0xFFu : (1u << count) - 1);
    const auto ld = [&](const typename T::Bits* p) { return full ? V::template load8<T>(p) : V::template maskz_load8<T>(k, p); };
    const auto ldp = [&](const typename Gs::Bits* p) { return full ? V::template load8<Gs>(p) : V::template maskz_load8<Gs>(k, p); };
    D v = V::mul_pd(V::sub_pd(ld(x + i), mv), rv);
    if constexpr (G) v = V::mul_pd(v, pr.offset == 0 ? ldp(gamma + i) : V::add_pd(cv, ldp(gamma + i)));  // w = C + γ (w_rel)
    if constexpr (B) v = V::add_pd(v, ldp(beta + i));
    M8 fail;
    if constexpr (std::is_same_v<T, F32>) {
      const D lo = V::sub_pd(v, ev);
      fail = V::cvt_differ_f32(lo, V::add_pd(v, ev));
      v = lo;  // rounds as y where certified; its f32 conversion is the test's (one vcvtpd2ps fewer)
    } else {
      fail = V::template near_mid16<T>(v, y_min_f);
    }
    fail = static_cast<M8>(fail & k);
    if (fail == 0 && full) {
      if constexpr (std::is_same_v<T, F32>) {
        if (stream) V::template stream8<T>(y + i, v);
        else V::template store8<T>(y + i, v);
      } else {  // y's f32 rounding's rounding: y*'s where near_mid16 passed (one conversion fewer)
        if (stream) V::template stream8_near<T>(y + i, v);
        else V::template store8_near<T>(y + i, v);
      }
      return;
    }
    V::template mask_store8<T>(static_cast<M8>(k & ~fail), y + i, v);
    for (unsigned f = fail; f != 0; f &= f - 1) {
      const std::int64_t j = i + __builtin_ctz(f);
      y[j] = settle<T, Gs, G, B>(x, gamma, beta, n, eps, j, s, es, have_exact, pr);
    }
  };
  std::int64_t i = 0;
  if constexpr (NT) {
    const std::int64_t head = head_to_align(y, 8 * static_cast<std::int64_t>(sizeof(typename T::Bits)));
    const std::int64_t h = head < n ? head : n;
    if (h > 0) group(0, h, false);
    for (i = h; i + 8 <= n; i += 8) group(i, 8, true);
  } else {
    for (; i + 8 <= n; i += 8) group(i, 8, false);
  }
  if (i < n) group(i, n - i, false);
}

template <class V, class T, class Gs, bool G, bool B, bool NT>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using Bits = typename T::Bits;
  using E = T;
  const Bits* x = static_cast<const Bits*>(t.x);
  const typename Gs::Bits* gamma = static_cast<const typename Gs::Bits*>(t.gamma);
  const typename Gs::Bits* beta = static_cast<const typename Gs::Bits*>(t.beta);
  Bits* y = static_cast<Bits*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const Params pr{G ? p.gamma_offset : 0.0, p.op.norm == Norm::layernorm};
  // max |w| ≤ |C| + max |γ|; w_rel = u when some C + γ does not fit one f64 (its rounding, in the bound).
  double w_rel = 0;
  if (G && pr.offset != 0) {
    for (std::int64_t i = 0; i < n && w_rel == 0; ++i) {
      double hi, lo;
      ex::two_sum(pr.offset, ex::to_double<Gs>(gamma[i]), hi, lo);
      if (lo != 0) w_rel = ex::kU;
    }
  }
  const double gmax = G ? std::abs(pr.offset) + max_abs<V, Gs>(gamma, n) : 1.0, bmax = B ? max_abs<V, Gs>(beta, n) : 0.0;
  for (std::int64_t row = begin; row < end; ++row) {
    const Bits* xr = x + row * n;
    Bits* yr = y + row * n;
    const FastStats s = fast_stats<V, T>(xr, n, p.eps, pr.centred, w_rel);
    if (!s.finite || s.degenerate) {  // NaN/Inf in the row, or var + eps == 0: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    if (s.certified) {
      if (mean) mean[row] = static_cast<float>(s.m + s.m_lo);
      if (rstd) rstd[row] = static_cast<float>(s.rstd);
      if (NT && head_to_align(yr, 64) >= 0) normalize_row<V, T, Gs, G, B, NT>(xr, gamma, beta, yr, n, p.eps, s, gmax, bmax, pr);
      else normalize_row<V, T, Gs, G, B, false>(xr, gamma, beta, yr, n, p.eps, s, gmax, bmax, pr);
      continue;
    }
    // The bound is not small (not seen outside constructed rows): every element by double-double.
    const ex::ExactStats es = ex::exact_stats<E>(xr, n, p.eps, pr.centred);
    if (!es.finite) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = static_cast<float>(es.m_hi + es.m_lo);
    if (rstd) rstd[row] = static_cast<float>(es.r_hi + es.r_lo);
    for (std::int64_t i = 0; i < n; ++i) {
      double g = 1.0, g_lo = 0.0;
      if (G) ex::two_sum(pr.offset, ex::to_double<Gs>(gamma[i]), g, g_lo);
      const double b = B ? ex::to_double<Gs>(beta[i]) : 0.0;
      yr[i] = ex::exact_element<E>(ex::to_double<E>(xr[i]), g, b, es, g_lo);
    }
  }
  if (NT) V::sfence();
}

template <class V, class T, class Gs, bool NT>
void rows_affine(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  if (p.has_gamma && p.has_beta) rows_typed<V, T, Gs, true, true, NT>(p, t, begin, end);
  else if (p.has_gamma) rows_typed<V, T, Gs, true, false, NT>(p, t, begin, end);
  else if (p.has_beta) rows_typed<V, T, Gs, false, true, NT>(p, t, begin, end);
  else rows_typed<V, T, Gs, false, false, NT>(p, t, begin, end);
}

template <class V, class T, bool NT>
void rows_nt(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  if constexpr (!std::is_same_v<T, F32>) {
    if (p.param_dtype == DType::f32) return rows_affine<V, T, F32, NT>(p, t, begin, end);  // f32 gamma/beta
  }
  rows_affine<V, T, T, NT>(p, t, begin, end);
}

template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if (nt) rows_nt<V, T, true>(p, t, begin, end);
  else rows_nt<V, T, false>(p, t, begin, end);
}

}  // namespace cr

// Add & Norm's sum (kernels/cpu/add_norm.hpp), for both kernels: h = x + residual in f32 lanes, rounded
// once to T by the layer's store (round to nearest even) — correctly rounded, since f16/bf16 values are exact
// in f32 and 24 ≥ 2p + 2 (docs/DESIGN.md "Ops"). 16 lanes, masked tail; residual and h in x's dtype.
namespace add {

template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using B = typename T::Bits;
  const std::int64_t n = p.cols;
  for (std::int64_t row = begin; row < end; ++row) {
    const B* x = static_cast<const B*>(t.x) + row * n;
    const B* r = static_cast<const B*>(t.residual) + row * n;
    B* h = static_cast<B*>(t.h) + row * n;
    std::int64_t i = 0;
    for (; i + 16 <= n; i += 16) V::template store<T>(h + i, V::add(V::template load<T>(x + i), V::template load<T>(r + i)));
    if (i < n) {
      const auto k = static_cast<typename V::M16>((1u << (n - i)) - 1);
      V::template mask_store<T>(k, h + i, V::add(V::template maskz_load<T>(k, x + i), V::template maskz_load<T>(k, r + i)));
    }
  }
}

}  // namespace add

// Dispatch on p.dtype (f32, f16, bf16; the glue offers nothing else).
template <class V>
void sum_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return add::rows<V, F32>(p, t, begin, end);
    case DType::f16: return add::rows<V, F16>(p, t, begin, end);
    case DType::bf16: return add::rows<V, BF16>(p, t, begin, end);
    case DType::f64: return;
  }
}
template <class V>
void fast_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  switch (p.dtype) {
    case DType::f32: return fast::rows<V, F32>(p, t, begin, end, staged);
    case DType::f16: return fast::rows<V, F16>(p, t, begin, end, staged);
    case DType::bf16: return fast::rows<V, BF16>(p, t, begin, end, staged);
    case DType::f64: return;
  }
}
template <class V>
void cr_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return cr::rows<V, F32>(p, t, begin, end);
    case DType::f16: return cr::rows<V, F16>(p, t, begin, end);
    case DType::bf16: return cr::rows<V, BF16>(p, t, begin, end);
    case DType::f64: return;
  }
}

#endif
