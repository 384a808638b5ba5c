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
// fast (avx512): per row, three passes over a row that stays in L1 between them (DRAM sees one read
// of x and one write of y):
//   1. s = Σ (x − x[0])                    m = x[0] + s/n rounded to f32
//   2. c = Σ (x − m),  q = Σ (x − m)²       mean_lo = c/n,  var = q/n − mean_lo²  (corrected two-pass)
//   3. y = ((x − m) − mean_lo) · rstd · γ + β
// the algorithm of avx2.cpp (two-float mean m + mean_lo: x − m is exact on offset rows, no kappa term)
// on 16 lanes: 4 accumulators x 16 lanes, 64 elements per iteration, blocks of 512 elements summed
// in f32 (8 additions per lane per accumulator, as avx2's 256-element blocks on 8 lanes x 4) and
// folded into f64 across blocks. The range check needs no max|x − m| per element (avx2 computes one):
//   - overflow of any x − x[0], x − m, square or block sum makes m, c or q non-finite;
//   - q ≥ 2^-80 (kQMin) bounds the error of squares that fall below f32's normal range: each is off by
//     at most 2^-150, n ≤ 2^31 of them are 2^-119 absolute, 2^-39 of q;
//   - q = 0 is a constant row (checked: one more pass, only then) or all |x − m| < 2^-75 (not constant:
//     welford).
// Rows failing it (and NaN/Inf rows) take cpu::welford_row, the scalar kernel with exact scaling.
// Output: gamma/beta presence hoisted into template parameters; non-temporal stores (aligned main
// loop after a masked head) when the whole y exceeds kStreamBytes; masked head and tail, nothing read
// or written past a row.
//
// cr (avx512_cr): avx2_cr.cpp's algorithm before Ziv's test (main 5b51695) on 8 f64 lanes: TwoSum mean (double-double m_hi + m_lo),
// Dot2 variance Σ((x − m_hi) − m_lo)², f64 output math rounded once (f16/bf16 by round-to-odd to f32
// first), ties snapped. 4 accumulators x 8 lanes.
#ifndef LNORM_AVX512_BODY_INCLUDED
#define LNORM_AVX512_BODY_INCLUDED

// Output bytes above which y is written with non-temporal stores: larger than this machine's L3
// (AMD EPYC Zen 5: 32 MiB per CCD), so y would be evicted before anyone reads it. Measured
// (lnorm_gbench, 2026-12-01): see avx512.cpp's header.
constexpr std::int64_t kStreamBytes = std::int64_t{32} << 20;

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

template <class V, class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, float eps) {
  using F = typename V::F;
  using D = typename V::D;
  const std::int64_t full = n / 16 * 16, r = n - full;
  const auto tail = static_cast<typename V::M16>((1u << r) - 1);
  const float x0 = V::first(V::template maskz_load<T>(1, x));
  const F shift = V::set1(x0);
  // Pass 1: Σ (x − x[0]).
  D s_lo = V::zero_pd(), s_hi = s_lo;
  for (std::int64_t block = 0; block < n; block += kBlock) {
    const std::int64_t block_end = block + kBlock < full ? block + kBlock : full;
    F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
    std::int64_t i = block;
    for (; i + 64 <= block_end; i += 64) {
      a0 = V::add(a0, V::sub(V::template load<T>(x + i), shift));
      a1 = V::add(a1, V::sub(V::template load<T>(x + i + 16), shift));
      a2 = V::add(a2, V::sub(V::template load<T>(x + i + 32), shift));
      a3 = V::add(a3, V::sub(V::template load<T>(x + i + 48), shift));
    }
    for (; i < block_end; i += 16) a0 = V::add(a0, V::sub(V::template load<T>(x + i), shift));
    if (r && block + kBlock >= n) a1 = V::add(a1, V::maskz_sub(tail, V::template maskz_load<T>(tail, x + full), shift));
    fold<V>(V::add(a0, a1), V::add(a2, a3), s_lo, s_hi);
  }
  const double nd = static_cast<double>(n);
  const float m = static_cast<float>(static_cast<double>(x0) + hsum_pd<V>(V::add_pd(s_lo, s_hi)) / nd);
  // Pass 2: Σ (x − m) and Σ (x − m)².
  const F mv = V::set1(m);
  D c_lo = V::zero_pd(), c_hi = c_lo, q_lo = c_lo, q_hi = c_lo;
  for (std::int64_t block = 0; block < n; block += kBlock) {
    const std::int64_t block_end = block + kBlock < full ? block + kBlock : full;
    F c0 = V::zero(), c1 = c0, q0 = c0, q1 = c0, q2 = c0, q3 = c0;
    std::int64_t i = block;
    for (; i + 64 <= block_end; i += 64) {
      const F d0 = V::sub(V::template load<T>(x + i), mv), d1 = V::sub(V::template load<T>(x + i + 16), mv);
      const F d2 = V::sub(V::template load<T>(x + i + 32), mv), d3 = V::sub(V::template load<T>(x + i + 48), mv);
      c0 = V::add(c0, V::add(d0, d2));
      c1 = V::add(c1, V::add(d1, d3));
      q0 = V::fmadd(d0, d0, q0);
      q1 = V::fmadd(d1, d1, q1);
      q2 = V::fmadd(d2, d2, q2);
      q3 = V::fmadd(d3, d3, q3);
    }
    for (; i < block_end; i += 16) {
      const F d = V::sub(V::template load<T>(x + i), mv);
      c0 = V::add(c0, d);
      q0 = V::fmadd(d, d, q0);
    }
    if (r && block + kBlock >= n) {
      const F d = V::maskz_sub(tail, V::template maskz_load<T>(tail, x + full), mv);
      c1 = V::add(c1, d);
      q1 = V::fmadd(d, d, q1);
    }
    fold<V>(c0, c1, c_lo, c_hi);
    fold<V>(V::add(q0, q1), V::add(q2, q3), q_lo, q_hi);
  }
  const double c = hsum_pd<V>(V::add_pd(c_lo, c_hi)), q = hsum_pd<V>(V::add_pd(q_lo, q_hi));
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
  return {m, static_cast<float>(mean_lo), static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps))), safe};
}

template <class V, class T, bool G, bool B, bool NT>
void normalize_row(const typename T::Bits* x, const typename T::Bits* gamma, const typename T::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s) {
  using F = typename V::F;
  const F mv = V::set1(s.m), lo = V::set1(s.mean_lo), rstd = V::set1(s.rstd);
  const auto one = [&](std::int64_t i, typename V::M16 k, bool masked) {
    const auto ld = [&](const typename T::Bits* p) { return masked ? V::template maskz_load<T>(k, p) : V::template load<T>(p); };
    const F t = V::mul(V::sub(V::sub(ld(x + i), mv), lo), rstd);
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
    for (i = h; i + 16 <= n; i += 16) V::template stream<T>(y + i, one(i, 0, false));
  } else {
    for (; i + 16 <= n; i += 16) V::template store<T>(y + i, one(i, 0, false));
  }
  if (i < n) masked_at(i, n - i);
}

template <class V, class T, bool G, bool B, bool NT>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using Bits = typename T::Bits;
  const Bits* x = static_cast<const Bits*>(t.x);
  const Bits* gamma = static_cast<const Bits*>(t.gamma);
  const Bits* beta = static_cast<const Bits*>(t.beta);
  Bits* y = static_cast<Bits*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const float eps = static_cast<float>(p.eps);
  for (std::int64_t row = begin; row < end; ++row) {
    const Stats s = row_stats<V, T>(x + row * n, n, eps);
    if (!s.safe) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = s.m + s.mean_lo;
    if (rstd) rstd[row] = s.rstd;
    if (NT && head_to_align(y + row * n, 64) >= 0) normalize_row<V, T, G, B, NT>(x + row * n, gamma, beta, y + row * n, n, s);
    else normalize_row<V, T, G, B, false>(x + row * n, gamma, beta, y + row * n, n, s);
  }
  if (NT) V::sfence();
}

template <class V, class T, bool NT>
void rows_nt(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  if (p.has_gamma && p.has_beta) rows_typed<V, T, true, true, NT>(p, t, begin, end);
  else if (p.has_gamma) rows_typed<V, T, true, false, NT>(p, t, begin, end);
  else if (p.has_beta) rows_typed<V, T, false, true, NT>(p, t, begin, end);
  else rows_typed<V, T, false, false, NT>(p, t, begin, end);
}

// Rows [begin, end) of p, for storage type T.
template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if (nt) rows_nt<V, T, true>(p, t, begin, end);
  else rows_nt<V, T, false>(p, t, begin, end);
}

}  // namespace fast

namespace cr {

struct Stats {
  double m, mean_lo, rstd;
  bool finite;
};

// Knuth's TwoSum: s + e == a + b exactly.
template <class V>
void two_sum(typename V::D a, typename V::D b, typename V::D& s, typename V::D& e) {
  s = V::add_pd(a, b);
  const typename V::D bb = V::sub_pd(s, a);
  e = V::add_pd(V::sub_pd(a, V::sub_pd(s, bb)), V::sub_pd(b, bb));
}

inline void two_sum1(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// A double-double hi + lo from 8 lanes of sums and 8 lanes of errors, in a fixed order.
template <class V>
void fold_lanes(typename V::D sv, typename V::D ev, double& hi, double& lo) {
  double sl[8], el[8];
  V::store_pd(sl, sv);
  V::store_pd(el, ev);
  hi = sl[0];
  lo = sum8(el);
  for (int k = 1; k < 8; ++k) {
    double t, e;
    two_sum1(hi, sl[k], t, e);
    hi = t;
    lo += e;
  }
}

template <class V, class T>
Stats row_stats(const typename T::Bits* x, std::int64_t n, double eps) {
  using D = typename V::D;
  const std::int64_t full = n / 8 * 8, r = n - full;
  const auto tail = static_cast<typename V::M8>((1u << r) - 1);
  const double x0 = V::first_pd(V::template maskz_load8<T>(1, x));
  const D shift = V::set1_pd(x0);
  // Pass 1: Σ (x − x[0]) with TwoSum (error-free); 4 accumulators, 32 elements per iteration.
  D s[4], e[4];
  for (int k = 0; k < 4; ++k) s[k] = e[k] = V::zero_pd();
  std::int64_t i = 0;
  for (; i + 32 <= full; i += 32) {
    for (int k = 0; k < 4; ++k) {
      D t, err;
      two_sum<V>(s[k], V::sub_pd(V::template load8<T>(x + i + 8 * k), shift), t, err);
      s[k] = t;
      e[k] = V::add_pd(e[k], err);
    }
  }
  const auto add_one = [&](D v) {
    D t, err;
    two_sum<V>(s[0], v, t, err);
    s[0] = t;
    e[0] = V::add_pd(e[0], err);
  };
  for (; i < full; i += 8) add_one(V::sub_pd(V::template load8<T>(x + i), shift));
  if (r) add_one(V::maskz_sub_pd(tail, V::template maskz_load8<T>(tail, x + full), shift));
  D s01, e01, s23, e23, sv, ev;
  two_sum<V>(s[0], s[1], s01, e01);
  two_sum<V>(s[2], s[3], s23, e23);
  two_sum<V>(s01, s23, sv, ev);
  ev = V::add_pd(ev, V::add_pd(V::add_pd(e01, e23), V::add_pd(V::add_pd(e[0], e[1]), V::add_pd(e[2], e[3]))));
  double hi, lo;
  fold_lanes<V>(sv, ev, hi, lo);
  // (hi + lo)/n as a double-double, then + x[0].
  const double nd = static_cast<double>(n);
  const double q_hi = hi / nd;
  const double q_lo = (std::fma(-q_hi, nd, hi) + lo) / nd;
  double m_hi, m_err;
  two_sum1(x0, q_hi, m_hi, m_err);
  const double m_lo = m_err + q_lo;
  const D mv = V::set1_pd(m_hi), mlo = V::set1_pd(m_lo);
  // Pass 2: Σ d², d = (x − m_hi) − m_lo, compensated (Dot2: the square's error by FMA, sums by TwoSum).
  D p[4], f[4];
  for (int k = 0; k < 4; ++k) p[k] = f[k] = V::zero_pd();
  const auto add_square = [&](D d, int k) {
    const D sq = V::mul_pd(d, d);
    const D sq_err = V::fmsub_pd(d, d, sq);
    D t, err;
    two_sum<V>(p[k], sq, t, err);
    p[k] = t;
    f[k] = V::add_pd(f[k], V::add_pd(err, sq_err));
  };
  const auto dev = [&](D v) { return V::sub_pd(V::sub_pd(v, mv), mlo); };
  for (i = 0; i + 32 <= full; i += 32)
    for (int k = 0; k < 4; ++k) add_square(dev(V::template load8<T>(x + i + 8 * k)), k);
  for (; i < full; i += 8) add_square(dev(V::template load8<T>(x + i)), 0);
  if (r) add_square(V::maskz_mov_pd(tail, dev(V::template maskz_load8<T>(tail, x + full))), 0);
  D p01, f01, p23, f23, pv, fv;
  two_sum<V>(p[0], p[1], p01, f01);
  two_sum<V>(p[2], p[3], p23, f23);
  two_sum<V>(p01, p23, pv, fv);
  fv = V::add_pd(fv, V::add_pd(V::add_pd(f01, f23), V::add_pd(V::add_pd(f[0], f[1]), V::add_pd(f[2], f[3]))));
  double q_sum, q_err;
  fold_lanes<V>(pv, fv, q_sum, q_err);
  const double q = q_sum + q_err;
  const double var = q / nd;
  return {m_hi, m_lo, 1.0 / std::sqrt(var + eps), std::isfinite(m_hi) && std::isfinite(m_lo) && std::isfinite(q)};
}

// Exact ties, as avx2_cr.cpp's snap_ties before Ziv's test (main 5b51695, where the measurements that
// chose kTieTolerance are): a value
// within kTieTolerance of the terms' size of a midpoint of T, or of 0, is taken to be exactly that.
constexpr double kTieTolerance = 0x1p-50;

template <class V, class T>
typename V::D snap_ties(typename V::D v, typename V::D size) {
  using D = typename V::D;
  constexpr int kDropped = 52 - T::kPrecision;  // f64 bits below the midpoint's last bit (p + 1 bits kept)
  const D grid = V::bits_and(V::bits_add(v, std::int64_t{1} << (kDropped - 1)), ~((std::int64_t{1} << kDropped) - 1));
  const typename V::M8 is_mid = V::bits_test(grid, std::int64_t{1} << kDropped);
  const D tol = V::mul_pd(size, V::set1_pd(kTieTolerance));
  const typename V::M8 close = V::cmp_le_pd(V::abs_pd(V::sub_pd(v, grid)), tol);
  const typename V::M8 tiny = V::cmp_le_pd(V::abs_pd(v), tol);
  return V::maskz_mov_pd(static_cast<typename V::M8>(~tiny), V::blend_pd(static_cast<typename V::M8>(is_mid & close), v, grid));
}

template <class V, class T, bool G, bool B, bool NT>
void normalize_row(const typename T::Bits* x, const typename T::Bits* gamma, const typename T::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s) {
  using D = typename V::D;
  const D mv = V::set1_pd(s.m), lo = V::set1_pd(s.mean_lo), rstd = V::set1_pd(s.rstd);
  const auto one = [&](std::int64_t i, typename V::M8 k, bool masked) {
    const auto ld = [&](const typename T::Bits* p) { return masked ? V::template maskz_load8<T>(k, p) : V::template load8<T>(p); };
    D t = V::mul_pd(V::sub_pd(V::sub_pd(ld(x + i), mv), lo), rstd);
    if constexpr (G) t = V::mul_pd(t, ld(gamma + i));
    D size = V::abs_pd(t);
    if constexpr (B) {
      const D b = ld(beta + i);
      size = V::add_pd(size, V::abs_pd(b));
      t = V::add_pd(t, b);
    }
    return snap_ties<V, T>(t, size);
  };
  const auto masked_at = [&](std::int64_t i, std::int64_t count) {
    const auto k = static_cast<typename V::M8>((1u << count) - 1);
    V::template mask_store8<T>(k, y + i, one(i, k, true));
  };
  std::int64_t i = 0;
  if constexpr (NT) {
    const std::int64_t head = head_to_align(y, 8 * static_cast<std::int64_t>(sizeof(typename T::Bits)));
    const std::int64_t h = head < n ? head : n;
    if (h > 0) masked_at(0, h);
    for (i = h; i + 8 <= n; i += 8) V::template stream8<T>(y + i, one(i, 0, false));
  } else {
    for (; i + 8 <= n; i += 8) V::template store8<T>(y + i, one(i, 0, false));
  }
  if (i < n) masked_at(i, n - i);
}

template <class V, class T, bool G, bool B, bool NT>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using Bits = typename T::Bits;
  const Bits* x = static_cast<const Bits*>(t.x);
  const Bits* gamma = static_cast<const Bits*>(t.gamma);
  const Bits* beta = static_cast<const Bits*>(t.beta);
  Bits* y = static_cast<Bits*>(t.y);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  for (std::int64_t row = begin; row < end; ++row) {
    const Stats s = row_stats<V, T>(x + row * n, n, p.eps);
    if (!s.finite) {  // NaN/Inf in the row: the scalar kernel's NaN rules
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = static_cast<float>(s.m + s.mean_lo);
    if (rstd) rstd[row] = static_cast<float>(s.rstd);
    if (NT && head_to_align(y + row * n, 64) >= 0) normalize_row<V, T, G, B, NT>(x + row * n, gamma, beta, y + row * n, n, s);
    else normalize_row<V, T, G, B, false>(x + row * n, gamma, beta, y + row * n, n, s);
  }
  if (NT) V::sfence();
}

template <class V, class T, bool NT>
void rows_nt(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  if (p.has_gamma && p.has_beta) rows_typed<V, T, true, true, NT>(p, t, begin, end);
  else if (p.has_gamma) rows_typed<V, T, true, false, NT>(p, t, begin, end);
  else if (p.has_beta) rows_typed<V, T, false, true, NT>(p, t, begin, end);
  else rows_typed<V, T, false, false, NT>(p, t, begin, end);
}

template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if (nt) rows_nt<V, T, true>(p, t, begin, end);
  else rows_nt<V, T, false>(p, t, begin, end);
}

}  // namespace cr

// Dispatch on p.dtype (f32, f16, bf16; the glue offers nothing else).
template <class V>
void fast_rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  switch (p.dtype) {
    case DType::f32: return fast::rows<V, F32>(p, t, begin, end);
    case DType::f16: return fast::rows<V, F16>(p, t, begin, end);
    case DType::bf16: return fast::rows<V, BF16>(p, t, begin, end);
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
