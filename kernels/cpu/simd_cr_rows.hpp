// Part of simd_body.hpp (its header has the algorithms, and why these files are included inside an anonymous
// namespace after the layer's header): the correctly rounded kernels' rows (avx2_cr, avx512_cr):
// statistics, the decided output, the exact fallbacks (cr_exact.hpp), the row drivers and their dispatch.
#pragma once

namespace cr {

// The scalar slow paths (cr_exact.hpp, included by every TU that includes this file, before
// it): the medium test (decided) and the double-double path (exact_stats, exact_element).
namespace ex = ::lnorm::cpu::cr_exact;  // its tags are ours (storage_tags.hpp)

// Bytes of y above which it is streamed: larger than this machine's L3 (AMD EPYC Zen 5: 32 MiB per
// CCD). Not fast::'s 8 MiB: this compute-bound kernel lost with it (lnorm_gbench, medians of 5, two
// runs, 2026-12-01: f32 4096x2048 13.9, 13.9 -> 10.8, 10.5 GB/s; bf16 5.9, 5.9 -> 5.3, 5.3; f32
// 4096x1024 13.0, 14.3 -> 15.1, 14.8).
constexpr std::int64_t kStreamBytes = std::int64_t{32} << 20;
// Lanes of the statistics' sums: 4 accumulators of the layer's f64 lanes (32 on AVX-512, 16 on AVX2).
template <class V>
constexpr std::int64_t kSumLanes = 4 * V::kDLanes;

// Elements per block of the statistics' sums: each lane adds block/S terms afresh (S = kSumLanes), then the
// block's sum into its accumulator, so a term goes through block/S + n/block roundings instead of n/S;
// smallest for block = S·sqrt(n/S) (n = 4096 on 16 lanes: 41 roundings instead of 264, 6x fewer rows needing
// the exact statistics).
template <class V>
std::int64_t sum_block(std::int64_t n) {
  constexpr std::int64_t S = kSumLanes<V>;
  const auto b = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n) / S)));
  return S * (b > 1 ? b : 1);
}

// The fast statistics and the row's error bound (cr_exact.hpp's header, "Error bound").
struct FastStats {
  double m, m_lo, rstd;
  double b, a;      // E = b·(|t| + |β|) + a·|γ| bounds |y − y*| plus the rounding of y ± E
  double dmax;      // ≥ max |x − m| over the row
  bool finite, degenerate, certified;
};

// On the layer's f64 lanes, x re-read from storage (converted exactly) in each pass
// instead of kept in an f64 scratch row. Pass 1: s = Σ (x − x[0]) in blocks (plain adds),
// m + m_lo = x[0] + s/n (TwoSum). Pass 2: q2 = Σ (x − m)² (one FMA each, blocked) and max |x − m|.
// centred = false (RMSNorm): no pass 1, the mean is exactly 0 (m = m_lo = q = 0): pass 2 sums x² and the
// bound has no mean error. w_rel: the weights' relative error (cr_exact.hpp's row_bound).
template <class V, class T>
FastStats fast_stats(const typename T::Bits* x, std::int64_t n, double eps, bool centred, double w_rel) {
  using D = typename V::D;
  constexpr int DL = V::kDLanes;
  constexpr std::int64_t kLanes = kSumLanes<V>;
  const double nd = static_cast<double>(n);
  const std::int64_t n32 = n / kLanes * kLanes, block = sum_block<V>(n);
  const double c = V::first_pd(V::template maskz_load_d<T>(1, x));
  const D cv = V::set1_pd(c);
  D s0 = V::zero_pd(), s1 = s0, s2 = s0, s3 = s0;
  std::int64_t i = centred ? 0 : n;  // RMSNorm skips pass 1
  while (i < n32) {
    const std::int64_t block_end = i + block < n32 ? i + block : n32;
    D t0 = V::zero_pd(), t1 = t0, t2 = t0, t3 = t0;
    for (; i < block_end; i += kLanes) {
      t0 = V::add_pd(t0, V::sub_pd(V::template load_d<T>(x + i), cv));
      t1 = V::add_pd(t1, V::sub_pd(V::template load_d<T>(x + i + DL), cv));
      t2 = V::add_pd(t2, V::sub_pd(V::template load_d<T>(x + i + 2 * DL), cv));
      t3 = V::add_pd(t3, V::sub_pd(V::template load_d<T>(x + i + 3 * DL), cv));
    }
    s0 = V::add_pd(s0, t0), s1 = V::add_pd(s1, t1), s2 = V::add_pd(s2, t2), s3 = V::add_pd(s3, t3);
  }
  for (; i < n; i += DL) {  // ≤ 3 full groups of DL, then a masked tail (lanes outside: +0)
    if (n - i >= DL) {
      s0 = V::add_pd(s0, V::sub_pd(V::template load_d<T>(x + i), cv));
    } else {
      const auto k = static_cast<typename V::MD>((1u << (n - i)) - 1);
      s0 = V::add_pd(s0, V::maskz_sub_pd(k, V::template maskz_load_d<T>(k, x + i), cv));
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
      const D d0 = V::sub_pd(V::template load_d<T>(x + i), mv), d1 = V::sub_pd(V::template load_d<T>(x + i + DL), mv);
      const D d2 = V::sub_pd(V::template load_d<T>(x + i + 2 * DL), mv), d3 = V::sub_pd(V::template load_d<T>(x + i + 3 * DL), mv);
      t0 = V::fmadd_pd(d0, d0, t0), t1 = V::fmadd_pd(d1, d1, t1), t2 = V::fmadd_pd(d2, d2, t2), t3 = V::fmadd_pd(d3, d3, t3);
      mx = V::max_pd(V::max_pd(V::max_pd(V::abs_pd(d0), V::abs_pd(d1)), V::max_pd(V::abs_pd(d2), V::abs_pd(d3))), mx);
    }
    p0 = V::add_pd(p0, t0), p1 = V::add_pd(p1, t1), p2 = V::add_pd(p2, t2), p3 = V::add_pd(p3, t3);
  }
  for (; i < n; i += DL) {
    D d;
    if (n - i >= DL) {
      d = V::sub_pd(V::template load_d<T>(x + i), mv);
    } else {
      const auto k = static_cast<typename V::MD>((1u << (n - i)) - 1);
      d = V::maskz_sub_pd(k, V::template maskz_load_d<T>(k, x + i), mv);
    }
    p0 = V::fmadd_pd(d, d, p0);
    mx = V::max_pd(V::abs_pd(d), mx);
  }
  const double q2 = hsum_pd<V>(V::add_pd(V::add_pd(p0, p1), V::add_pd(p2, p3)));
  const double v = q2 / nd + eps, rstd = 1.0 / std::sqrt(v);
  double ml[DL];
  V::store_pd(ml, mx);
  double dmax = ml[0];
  for (int l = 1; l < DL; ++l) dmax = ml[l] > dmax ? ml[l] : dmax;

  FastStats st{};
  st.m = m, st.m_lo = m_lo, st.rstd = rstd;
  st.dmax = dmax * (1 + 0x1p-50);  // each |x − m| was rounded to nearest
  st.finite = std::isfinite(s) && std::isfinite(q2);
  st.degenerate = v == 0;
  // cr_exact.hpp's "Error bound" with this file's sums: a term's partial sums round ≤ block/kLanes times in
  // its block, ≤ ceil(n32/block) in s0..s3 (p0..p3), ≤ 4 in the tail loop (3 full groups and the masked
  // one, all into s0), 2 in the accumulator folds and ≤ 3 in hsum_pd's pairwise sum of ≤ 8 lanes, 3 spare.
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
  constexpr int DL = V::kDLanes;
  for (std::int64_t i = 0; i < n; i += DL) {
    const auto k = static_cast<typename V::MD>(n - i >= DL ? (1u << DL) - 1 : (1u << (n - i)) - 1);
    mx = V::max_pd(V::abs_pd(n - i >= DL ? V::template load_d<T>(p + i) : V::template maskz_load_d<T>(k, p + i)), mx);
  }
  double l[DL];
  V::store_pd(l, mx);
  double r = l[0];
  for (int j = 1; j < DL; ++j) r = l[j] > r ? l[j] : r;
  return r;
}

// max |y| of each group of G in y[0, n) (n a multiple of G) into amax[n / G], a NaN dropped: one call for a row's
// groups (ExactQuantRow::max_abs), as settle_codes is (simd_quant_exact.hpp).
template <class V>
void group_max_abs(const double* y, std::int64_t n, std::int64_t G, double* amax) {
  for (std::int64_t b = 0, g = 0; b < n; b += G, ++g) amax[g] = max_abs<V, F64>(y + b, G);
}

// How a row sees its parameters: staged in f64 once per call (isa.hpp Staged64): w = C + gamma as gamma (w_hi)
// + w_lo (null when every w fits one f64), beta.
struct Params {
  const double* w_lo = nullptr;
  bool centred = true;
};

// Element i that the vector test could not settle (the scalar test with the
// element's own E, then the double-double path, its statistics computed once per row on first need).
template <class X, class T, class Gs, bool G, bool B>
typename T::Bits settle(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta, std::int64_t n,
                        double eps, std::int64_t i, const FastStats& s, ex::ExactStats& es, bool& have_exact, const Params& pr,
                        ::lnorm::cpu::CrPaths& paths) {
  using E = T;
  const double xv = ex::to_double<X>(x[i]);
  const double g = G ? ex::to_double<Gs>(gamma[i]) : 1.0, g_lo = G && pr.w_lo ? pr.w_lo[i] : 0.0;  // w = g + g_lo exactly
  const double b = B ? ex::to_double<Gs>(beta[i]) : 0.0;
  double t = (xv - s.m) * s.rstd;
  if (G) t = t * g;
  const double y = B ? t + b : t;
  const double e = s.b * (std::abs(t) + std::abs(b)) + (s.a * std::abs(g) + 0x1p-1000);
  typename T::Bits out;
  if (ex::decided<E>(y, e, out)) {
    ++paths.medium;
    return out;
  }
  ++paths.exact;
  if (!have_exact) {
    es = ex::exact_stats<X>(x, n, eps, pr.centred);
    have_exact = true;
    ++paths.exact_rows;
  }
  return ex::exact_element<E>(xv, g, b, es, g_lo);
}

// One E for the whole row: E at the row's largest |t| and |β| (FastStats' b and a; gmax, bmax: the row's largest
// |γ| and |β|), bounding |y − y*| plus the rounding of y ± E for every element of the row.
inline double row_error(const FastStats& s, double gmax, double bmax) {
  const double t_max = s.dmax * s.rstd * gmax * (1 + 0x1p-40);
  const double e_row = (s.b * (t_max + bmax) + s.a * gmax + 0x1p-1000) * (1 + 0x1p-40);
  return e_row == e_row ? e_row : INFINITY;  // a NaN bound would let lo and hi agree
}

// The output pass: y = ((x − m)·rstd)·γ + β in f64 on two vectors of the layer's f64 lanes at a time (L elements),
// Ziv's test against one E for the row (cr_exact.hpp's header, step 3) on the L f32 lanes they round to: f32 by
// rounding y ± E (differ_bits); f16/bf16 by y's f32 rounding's distance from T's midpoint patterns (near_mid16_f).
// A whole certified vector is stored from those f32 lanes (f16/bf16: y32's rounding, y*'s where the test passed);
// otherwise the certified lanes are stored rounded once from f64 (f16/bf16 through round-to-odd f32) and the
// others settled one by one. Testing and narrowing L lanes at once, not L/2: on AVX2 the f64-lane form took 45
// instructions per 4 bf16 elements, GCC re-materializing the test's constants and the mask branch each time.
template <class V, class X, class T, class Gs, bool G, bool B, bool NT>
void normalize_row(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta,
                   typename T::Bits* y, std::int64_t n, double eps, const FastStats& s, double gmax, double bmax,
                   const Params& pr, ::lnorm::cpu::CrPaths& paths) {
  using D = typename V::D;
  using MD = typename V::MD;
  constexpr int DL = V::kDLanes;
  const double e_row = row_error(s, gmax, bmax);
  const double y_min = std::fmax(e_row * 0x1p25, std::is_same_v<T, F16> ? 0x1p-14 : 0x1p-126) * (1 + 0x1p-20);
  const float y_min_f = static_cast<float>(std::fmin(y_min, 0x1p127));
  const D mv = V::set1_pd(s.m), rv = V::set1_pd(s.rstd), ev = V::set1_pd(e_row);
  ex::ExactStats es{};
  bool have_exact = false;
  constexpr int L = V::kLanes;
  using F = typename V::F;
  using M = typename V::M;
  // y (and, for f32, its lower end y − E) on lanes [at, at + count) of one f64 vector; +0 past count.
  const auto value = [&](std::int64_t at, std::int64_t count) LNORM_ALWAYS_INLINE {
    const bool whole = count == DL;
    const auto k = static_cast<MD>((1u << count) - 1);
    const auto ld = [&](const typename X::Bits* p) LNORM_ALWAYS_INLINE { return whole ? V::template load_d<X>(p) : V::template maskz_load_d<X>(k, p); };
    const auto ldp = [&](const typename Gs::Bits* p) LNORM_ALWAYS_INLINE { return whole ? V::template load_d<Gs>(p) : V::template maskz_load_d<Gs>(k, p); };
    D v = V::mul_pd(V::sub_pd(ld(x + at), mv), rv);
    if constexpr (G) v = V::mul_pd(v, ldp(gamma + at));  // w_hi: C + γ rounded to f64 where it does not fit (w_rel)
    if constexpr (B) v = V::add_pd(v, ldp(beta + at));
    return v;
  };
  const auto group = [&](std::int64_t i, std::int64_t count, bool stream) LNORM_ALWAYS_INLINE {
    const std::int64_t c0 = count < DL ? count : DL, c1 = count - c0;
    D v0 = value(i, c0), v1 = c1 > 0 ? value(i + DL, c1) : V::zero_pd();
    F out;  // the L lanes' f32 roundings: of y − E (f32), of y (f16/bf16)
    M fail;
    if constexpr (std::is_same_v<T, F32>) {
      const D hi0 = V::add_pd(v0, ev), hi1 = V::add_pd(v1, ev);
      v0 = V::sub_pd(v0, ev), v1 = V::sub_pd(v1, ev);  // rounds as y where certified
      out = V::join_ps(v0, v1);
      fail = V::differ_bits(out, V::join_ps(hi0, hi1));
    } else {
      out = V::join_ps(v0, v1);
      fail = V::template near_mid16_f<T>(out, y_min_f);
    }
    fail = static_cast<M>(fail & ((1u << count) - 1));
    if (fail == 0 && count == L) {
      if (stream) V::template stream<T>(y + i, out);
      else V::template store<T>(y + i, out);
      return;
    }
    const auto f0 = static_cast<MD>(fail & ((1u << DL) - 1)), f1 = static_cast<MD>(fail >> DL);
    V::template mask_store_d<T>(static_cast<MD>(((1u << c0) - 1) & ~f0), y + i, v0);
    if (c1 > 0) V::template mask_store_d<T>(static_cast<MD>(((1u << c1) - 1) & ~f1), y + i + DL, v1);
    for (unsigned f = fail; f != 0; f &= f - 1) {
      const std::int64_t j = i + __builtin_ctz(f);
      y[j] = settle<X, T, Gs, G, B>(x, gamma, beta, n, eps, j, s, es, have_exact, pr, paths);
    }
  };
  std::int64_t i = 0;
  if constexpr (NT) {
    const std::int64_t head = head_to_align(y, L * static_cast<std::int64_t>(sizeof(typename T::Bits)));
    const std::int64_t h = head < n ? head : n;
    for (; i < h; i += L) group(i, h - i < L ? h - i : L, false);
    for (i = h; i + L <= n; i += L) group(i, L, true);
  } else {
    for (; i + L <= n; i += L) group(i, L, false);
  }
  if (i < n) group(i, n - i, false);
}

// What every row of a call shares: the parameters' view (Params), the weights' relative error w_rel = u where some
// C + γ did not fit one f64 (w_hi's rounding, in the bound; |w| ≤ |w_hi|·(1 + 2^-53)), the largest |γ| and |β|.
template <class V, class Gs, bool G, bool B>
struct RowParams {
  Params pr;
  double w_rel, gmax, bmax;
  RowParams(const Problem& p, const ::lnorm::cpu::Staged64& staged)
      : pr{G ? staged.gamma_lo : nullptr, p.op.norm == Norm::layernorm},
        w_rel(pr.w_lo ? ex::kU : 0.0),
        gmax(G ? max_abs<V, Gs>(staged.gamma, p.cols) * (1 + 0x1p-52) : 1.0),
        bmax(B ? max_abs<V, Gs>(staged.beta, p.cols) : 0.0) {}
};

// A row whose bound is not small (not seen outside constructed rows): its statistics by double-double, mean and rstd
// written, every element y* rounded once to T and handed to store(i, bits). false (nothing written) where they are
// not finite: the caller hands the row to welford_row.
template <class X, class T, bool G, bool B, class Store>
bool exact_row(const typename X::Bits* xr, const double* gamma, const double* beta, std::int64_t n, double eps, const Params& pr,
               float* mean, float* rstd, std::int64_t row, ::lnorm::cpu::CrPaths& paths, Store store) {
  ex::ExactStats es = ex::exact_stats<X>(xr, n, eps, pr.centred);
  if (!es.finite) return false;
  if (mean) mean[row] = static_cast<float>(es.m_hi + es.m_lo);
  if (rstd) rstd[row] = static_cast<float>(es.r_hi + es.r_lo);
  paths.exact += n;
  ++paths.exact_rows;
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = G ? gamma[i] : 1.0, g_lo = G && pr.w_lo ? pr.w_lo[i] : 0.0;
    store(i, ex::exact_element<T>(ex::to_double<X>(xr[i]), g, B ? beta[i] : 0.0, es, g_lo));
  }
  return true;
}

// Rows [begin, end) into the sink (epilogue_sink.hpp), whose rows are either T's bits, each y* rounded once (y), or
// f64 values within the row's bound of y* (the quantized epilogue: quantize_row_exact, quant_exact.hpp, decides q and
// the scales from them exactly). A certified row's f64 values are normalize_row's arithmetic, bounded by the same E;
// a row whose bound is not small takes y* rounded by double-double, to T, or to f32 for the f64 row
// (|y − y*| ≤ 2^-24|y| + 2^-150).
// A certified row's y in f64, unrounded, for the quantizer: normalize_row's arithmetic (bounded by row_error's E),
// the tail one lane at a time with the same operations. Returns max |y| (a NaN dropped, as max_abs does): a
// row-scaled quantizer's amax without its own pass over the row (two operations a vector here, three there).
template <class V, class X, class Gs, bool G, bool B>
double unrounded_row(const typename X::Bits* xr, const typename Gs::Bits* gamma, const typename Gs::Bits* beta, double* y,
                     std::int64_t n, const FastStats& s) {
  using D = typename V::D;
  constexpr int DL = V::kDLanes;
  const D mv = V::set1_pd(s.m), rv = V::set1_pd(s.rstd);
  D mx = V::zero_pd();
  std::int64_t i = 0;
  for (; i + DL <= n; i += DL) {
    D v = V::mul_pd(V::sub_pd(V::template load_d<X>(xr + i), mv), rv);
    if constexpr (G) v = V::mul_pd(v, V::template load_d<Gs>(gamma + i));
    if constexpr (B) v = V::add_pd(v, V::template load_d<Gs>(beta + i));
    V::store_pd(y + i, v);
    mx = V::max_pd(V::abs_pd(v), mx);
  }
  double l[DL];
  V::store_pd(l, mx);
  double amax = 0;
  for (int k = 0; k < DL; ++k) amax = l[k] > amax ? l[k] : amax;
  for (; i < n; ++i) {
    double v = (ex::to_double<X>(xr[i]) - s.m) * s.rstd;
    if constexpr (G) v = v * gamma[i];
    if constexpr (B) v = v + beta[i];
    y[i] = v;
    amax = std::fabs(v) > amax ? std::fabs(v) : amax;
  }
  return amax;
}

template <class V, class X, class T, class Gs, bool G, bool B, bool NT, class Sink>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& staged,
                const Sink& sink) {
  using E = typename Sink::Elem;
  constexpr bool kUnrounded = std::is_same_v<E, double>;  // the quantizer's f64 row, not y's bits
  static_assert((kUnrounded || std::is_same_v<E, typename T::Bits>) && (!NT || Sink::kMayStream));
  using Exact = std::conditional_t<kUnrounded, F32, T>;  // what exact_row rounds y* to
  using XBits = typename X::Bits;
  const XBits* x = static_cast<const XBits*>(t.x);
  const typename Gs::Bits* gamma = staged.gamma;
  const typename Gs::Bits* beta = staged.beta;
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const RowParams<V, Gs, G, B> rp(p, staged);
  const Params& pr = rp.pr;
  const double w_rel = rp.w_rel, gmax = rp.gmax, bmax = rp.bmax;
  ::lnorm::cpu::CrPaths paths;
  paths.elements = (end - begin) * n;
  for (std::int64_t row = begin; row < end; ++row) {
    const XBits* xr = x + row * n;
    E* out = sink.row(row);
    const FastStats s = fast_stats<V, X>(xr, n, p.eps, pr.centred, w_rel);
    if (!s.finite || s.degenerate) {  // NaN/Inf in the row, or var + eps == 0: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    if (s.certified) {
      if (mean) mean[row] = static_cast<float>(s.m + s.m_lo);
      if (rstd) rstd[row] = static_cast<float>(s.rstd);
      if constexpr (kUnrounded) {
        const double amax = unrounded_row<V, X, Gs, G, B>(xr, gamma, beta, out, n, s);
        sink.done(row, {row_error(s, gmax, bmax), 0.0, amax});
      } else {
        if (NT && head_to_align(out, 64) >= 0) normalize_row<V, X, T, Gs, G, B, NT>(xr, gamma, beta, out, n, p.eps, s, gmax, bmax, pr, paths);
        else normalize_row<V, X, T, Gs, G, B, false>(xr, gamma, beta, out, n, p.eps, s, gmax, bmax, pr, paths);
        sink.done(row);
      }
      continue;
    }
    // The bound is not small (not seen outside constructed rows): every element by double-double.
    if (!exact_row<X, Exact, G, B>(xr, gamma, beta, n, p.eps, pr, mean, rstd, row, paths,
                                   [&](std::int64_t i, typename Exact::Bits b) { out[i] = b; })) {
      welford_row(p, t, row);
      continue;
    }
    sink.done(row, kUnrounded ? sinks::RowError{0x1p-150, 0x1p-24} : sinks::RowError{});
  }
  if (NT) V::sfence();
  ::lnorm::cpu::cr_paths_add(paths);
}

template <class V, class X, class T, bool NT, class Sink>
void rows_affine(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& st,
                 const Sink& sink) {
  if (p.has_gamma && p.has_beta) rows_typed<V, X, T, F64, true, true, NT>(p, t, begin, end, st, sink);
  else if (p.has_gamma) rows_typed<V, X, T, F64, true, false, NT>(p, t, begin, end, st, sink);
  else if (p.has_beta) rows_typed<V, X, T, F64, false, true, NT>(p, t, begin, end, st, sink);
  else rows_typed<V, X, T, F64, false, false, NT>(p, t, begin, end, st, sink);
}

// The quantized epilogue's sink: the generic driver's f64 row (Staged64::y_row) handed to quantize_row_exact with
// the row of x (in X) its statistics read, the staged parameters, the row's bound and V's settled-code test.
// Finite parameters keep every row's y free of NaN: a row reaches the quantizer only with finite x and statistics
// (others take welford_row), and ((x − m)·rstd)·w + β can then overflow to ±Inf but never form Inf − Inf or 0·Inf.
template <class V, class X>
auto exact_quantizer(const Problem& p, const Tensors& t, const ::lnorm::cpu::Staged64& st) {
  const std::int64_t n = p.cols;
  const auto finite = [n](const double* v) {
    if (!v) return true;
    double acc = 0;
    for (std::int64_t i = 0; i < n; ++i) acc += v[i] * 0;  // NaN where some v[i] is NaN or ±Inf
    return acc == 0;
  };
  const bool no_nan = finite(p.has_gamma ? st.gamma : nullptr) && finite(p.has_beta ? st.beta : nullptr);
  return sinks::to_quantizer(st.y_row, n, nullptr, [&p, &t, &st, n, no_nan](const double* y, std::int64_t row, sinks::RowError e) {
    ::lnorm::cpu::ExactQuantRow er;
    er.y = y, er.n = n, er.x = static_cast<const typename X::Bits*>(t.x) + row * n, er.x_dtype = input_dtype(p);
    er.eps = p.eps, er.centred = p.op.norm == Norm::layernorm;
    er.w_hi = p.has_gamma ? st.gamma : nullptr, er.w_lo = p.has_gamma ? st.gamma_lo : nullptr;
    er.beta = p.has_beta ? st.beta : nullptr;
    er.e_abs = e.abs, er.e_rel = e.rel, er.row_amax = e.amax;
    er.settle = &exact_lanes::settle_codes<V>;  // the settled-code test on V's lanes (simd_quant_exact.hpp)
    er.max_abs = &group_max_abs<V>;              // and the groups' largest |y| (a NaN dropped)
    er.no_nan = no_nan;
    ::lnorm::cpu::quantize_row_exact(p.quant, er, static_cast<std::uint8_t*>(t.q), t.scales, row);
  });
}

// Rows [begin, end) of p, y in storage type T; x in T, or f32 where the rows are Add & Norm's f32 h beside
// 16-bit y (input_dtype(p)); gamma and beta as staged (Staged64). The sink: y's rows, or the exact quantizer's.
template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged64& st) {
  const std::int64_t n = p.cols;
  if (p.op.epilogue == Epilogue::quantized) {
    // T is y's storage, which the f64 row does not have: x's storage stands in (one instantiation per x storage).
    if constexpr (!std::is_same_v<T, F32>) {
      if (input_dtype(p) == DType::f32) return rows_affine<V, F32, F32, false>(p, t, begin, end, st, exact_quantizer<V, F32>(p, t, st));
    }
    return rows_affine<V, T, T, false>(p, t, begin, end, st, exact_quantizer<V, T>(p, t, st));
  }
  const sinks::ToY<typename T::Bits> to_y{static_cast<typename T::Bits*>(t.y), n};
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if constexpr (!std::is_same_v<T, F32>) {
    if (input_dtype(p) == DType::f32) {
      if (nt) return rows_affine<V, F32, T, true>(p, t, begin, end, st, to_y);
      return rows_affine<V, F32, T, false>(p, t, begin, end, st, to_y);
    }
  }
  if (nt) rows_affine<V, T, T, true>(p, t, begin, end, st, to_y);
  else rows_affine<V, T, T, false>(p, t, begin, end, st, to_y);
}

}  // namespace cr
