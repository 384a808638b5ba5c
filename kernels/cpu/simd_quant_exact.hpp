// The correctly rounded kernels' settled-code test (quant_exact.hpp: Q(t − e) = Q(t + e) settles Q(y*/s)) on V's f64
// lanes: quantize_row_exact's codes loop, which ran it one element at a time (4-6 ns an element, 1/30-1/60 of the
// same kernel's y: docs/performance.md), hands each group's span here first (ExactQuantRow::settle) and takes the
// exact path only for the lanes this leaves unsettled. The same arithmetic as quant_exact.cpp's settled_code and
// settled_int_code, in lanes, but for two steps:
//   t = y · f64(1/s), not y / s: two roundings, |t − y/s| ≤ 2^-52·(1 + 2^-51)·|t|, covered by the |t|·2^-51 term
//   of e (the scalar test adds 2^-52 for its one rounding); e's quotient err/s likewise as err·f64(1/s)·(1 + 2^-50).
//   The lane's verdict, margin > 0 with margin = min(quantum/2 − |t − r| − e, |t| − e), is taken on the margin
//   rounded to f32 (the layer has no f64 comparison): rounding keeps a sign or makes it 0, which reads unsettled:
//   never a wrong verdict, at most an exact decision more. NaN lanes read unsettled (the scalar path's NaN codes).
// The settled r is a grid value (≤ 4 significant bits, |r| ≤ max after saturation): exact in f32, whose code the fast
// epilogue's grid_code forms (simd_quant.hpp), the sign from t's (y*'s, since |t| > e).
// Included in simd_body.hpp after simd_quant.hpp, inside the anonymous namespace of the ISA translation unit.
#pragma once

namespace exact_lanes {

// Lanes of one vector: the codes of y[0, L) and the mask of the lanes they settle (1 bit each).
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::M settle_vector(const double* y, typename V::D inv, double e_abs, double e_rel,
                                                       typename V::I& code) {
  using D = typename V::D;
  using F = typename V::F;
  constexpr int DL = V::kDLanes;
  D t_half[2], r_half[2], margin_half[2];
  for (int h = 0; h < 2; ++h) {
    const D yv = V::load_pd(y + h * DL);
    const D t = V::mul_pd(yv, inv), a = V::abs_pd(t);
    // quant_exact.cpp's err(i) = (e_abs + e_rel·|y|)·(1 + 2^-50) + 2^-1074, moved to t (above).
    const D err_y = V::add_pd(V::mul_pd(V::add_pd(V::mul_pd(V::abs_pd(yv), V::set1_pd(e_rel)), V::set1_pd(e_abs)), V::set1_pd(1 + 0x1p-50)),
                              V::set1_pd(0x1p-1074));
    const D e = V::fmadd_pd(a, V::set1_pd(0x1p-51), V::mul_pd(V::mul_pd(err_y, inv), V::set1_pd(1 + 0x1p-50)));
    D r, half_gap;  // t's magnitude rounded (before saturation), and its distance to the nearest midpoint
    if constexpr (is_float(Fmt)) {
      constexpr double kTop = qmax(Fmt);
      const D ac = V::min_pd(a, V::set1_pd(2 * kTop));
      const D c = grid_step_pd<V, Fmt>(ac);
      r = V::sub_pd(V::add_pd(ac, c), c);
      half_gap = V::sub_pd(V::mul_pd(c, V::set1_pd(0x1p-53)), V::abs_pd(V::sub_pd(ac, r)));
    } else {
      constexpr double lo = info(Fmt).qmin, hi = qmax(Fmt);
      const D tc = V::min_pd(V::max_pd(t, V::set1_pd(lo)), V::set1_pd(hi));
      r = V::sub_pd(V::add_pd(tc, V::set1_pd(0x1.8p52)), V::set1_pd(0x1.8p52));
      half_gap = V::sub_pd(V::set1_pd(0.5), V::abs_pd(V::sub_pd(tc, r)));
    }
    t_half[h] = t;
    r_half[h] = r;
    margin_half[h] = V::min_pd(V::sub_pd(half_gap, e), V::sub_pd(a, e));  // NaN where t is (min_pd: the second)
  }
  const typename V::M settled = V::cmp_lt(V::zero(), V::join_ps(margin_half[0], margin_half[1]));
  const F r32 = V::join_ps(r_half[0], r_half[1]);
  if constexpr (is_float(Fmt)) {
    code = grid_code<V, Fmt>(r32, V::join_ps(t_half[0], t_half[1]), typename V::M{0});
  } else {
    code = V::cvt_i(r32);  // the rounded integer, its low byte the code (store_u8 truncates)
  }
  return settled;
}

// codes[0, n) and the bitmap settled (bit i of word i/64: 1 where code i is Q(y*/s), 0 where the exact path must
// decide; n ≤ 64·words) for y[0, n) of one scale s (finite, > 0) and the bound |y_i − y*_i| ≤ e_abs + e_rel·|y_i|.
// The tail past whole vectors reads unsettled. A bitmap, not a byte per element: the caller copies a word's 64 codes
// at once where every bit is set (bytes cost a scalar store and a test per element, a third of the epilogue).
template <class V>
void settle_codes(QuantFormat f, const double* y, std::int64_t n, double s, double e_abs, double e_rel, std::uint8_t* codes,
                  std::uint64_t* settled) {
  constexpr int L = V::kLanes;
  static_assert(64 % L == 0);
  const typename V::D inv = V::set1_pd(1.0 / s);
  for (std::int64_t w = 0; w < (n + 63) / 64; ++w) settled[w] = 0;
  std::int64_t i = 0;
  with_format(f, [&](auto fmt) LNORM_ALWAYS_INLINE {
    constexpr QuantFormat kF = decltype(fmt)::value;
    for (; i + L <= n; i += L) {
      typename V::I code;
      const std::uint64_t ok = static_cast<std::uint64_t>(settle_vector<V, kF>(y + i, inv, e_abs, e_rel, code));
      V::store_u8(codes + i, code);
      settled[i / 64] |= ok << (i % 64);
    }
  });
}

// out = {lo, hi, amax} over y[0, n): the largest |y_i| − err_i, |y_i| + err_i and |y_i|, err_i = (e_abs + e_rel·|y_i|)·
// (1 + 2^-50) + 2^-1074 (quant_exact.cpp's Decider::err, the same operations in the same order, no contraction:
// the same bits), each a max, exact in any order. Zero where n is 0. No NaN among y (the caller's groups with one
// take the NaN path first). In scalar f64 this pass was the _cr epilogue's largest cost after the codes.
template <class V>
void amax_bounds(const double* y, std::int64_t n, double e_abs, double e_rel, double* out) {
  using D = typename V::D;
  constexpr int DL = V::kDLanes;
  D lo = V::zero_pd(), hi = V::zero_pd(), am = V::zero_pd();
  std::int64_t i = 0;
  for (; i + DL <= n; i += DL) {
    const D a = V::abs_pd(V::load_pd(y + i));
    const D d = V::add_pd(V::mul_pd(V::add_pd(V::set1_pd(e_abs), V::mul_pd(V::set1_pd(e_rel), a)), V::set1_pd(1 + 0x1p-50)),
                          V::set1_pd(0x1p-1074));
    lo = V::max_pd(V::sub_pd(a, d), lo);
    hi = V::max_pd(V::add_pd(a, d), hi);
    am = V::max_pd(a, am);
  }
  double l[DL], h[DL], m[DL];
  V::store_pd(l, lo);
  V::store_pd(h, hi);
  V::store_pd(m, am);
  for (int k = 1; k < DL; ++k) {
    l[0] = l[k] > l[0] ? l[k] : l[0];
    h[0] = h[k] > h[0] ? h[k] : h[0];
    m[0] = m[k] > m[0] ? m[k] : m[0];
  }
  for (; i < n; ++i) {
    const double a = y[i] < 0 ? -y[i] : y[i], d = (e_abs + e_rel * a) * (1 + 0x1p-50) + 0x1p-1074;
    l[0] = a - d > l[0] ? a - d : l[0];
    h[0] = a + d > h[0] ? a + d : h[0];
    m[0] = a > m[0] ? a : m[0];
  }
  out[0] = l[0], out[1] = h[0], out[2] = m[0];
}

}  // namespace exact_lanes
