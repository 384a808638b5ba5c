// One row of the exact reference, for LayerNorm and RMSNorm. Notation (all exact):
//   S = Σx (LayerNorm; RMSNorm takes the mean as 0: S = 0 below), Q = Σx², n = row width, mean = S/n,
//   M = n·Q − S² = n²·var  (the one-pass formula is exact here: S and Q are exact integers·2^k),
//   W = M + n²·eps = n²·(var + eps),  rstd = n / sqrt(W),
//   D_i = n·x_i − S = n·(x_i − mean),  z*_i = D_i / sqrt(W),  y*_i = β_i + w_i·D_i / sqrt(W),
//   w_i = C + γ_i (the gamma offset C, exact as a dyadic sum; w = 1 without gamma).
// n, mean's denominator, cancels from z and y, so they are quotients of dyadics by sqrt(W). For RMSNorm
// (S = 0): M = n·Q = n²·mean(x²), W = n²·(mean(x²) + eps), z*_i = x_i·rstd: the same machinery.
//
// Rounding y*_i once: a double-double evaluation with a proven absolute error bound ε_i decides
// the rounding whenever no rounding boundary lies within ε_i of it (almost always). Otherwise, the
// exact comparison with a boundary m is sign(γD/sqrt(W) − t), t = m − β: equal signs are compared
// by squaring, (γD)² vs t²·W, all integers times powers of two. No precision is ever "enough by
// luck": exact ties (rational rstd) are found and broken to even.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "double_double.hpp"
#include "dyadic.hpp"
#include "lnorm/half.hpp"
#include "lnorm/reference.hpp"
#include "rounding.hpp"
#include "superaccumulator.hpp"
#include "special_values.hpp"

namespace lnorm {
namespace {

using detail::BigInt;
using detail::DD;
using detail::Dyadic;
namespace mp = boost::multiprecision;
// 160 bits for row constants: their error (2^-159 relative) is far below the fast path's budget.
using BigFloat = mp::number<mp::cpp_bin_float<160, mp::digit_base_2>, mp::et_off>;

using detail::kNaN;
using detail::kInf;

// Relative error bound of the double-double evaluation of β + γ·(x − mean)·rstd, as a fraction of
// |β| + |γ|·rstd·(|x| + |mean|). The derivation (Joldes-Muller-Popescu bounds per operation, u = 2^-53):
// mean, rstd as double-double ≤ 2^-105 rel; d = x − mean ≤ 2^-102 (|x|+|mean|); d·rstd adds ≤ 2^-99;
// ·γ ≤ 2^-100; +β ≤ 2^-104 — in total < 2^-97. We use 2^-96 to leave a factor-2 margin.
constexpr double kFastRelBound = 0x1p-96;
// Absolute slack for underflow in the low words (a few 2^-1074 per operation, amplified by rstd·|γ|
// at most): 2^-1060·(1 + rstd·|γ|) covers it with room. Irrelevant except for outputs below ~2^-1000.
constexpr double kUnderflowSlack = 0x1p-1060;
// The fast path needs every intermediate below this (no overflow in double-double).
constexpr double kFastRangeLimit = 0x1p1000;
// ... and rstd at least this (its double-double normal to 2^-106 relative: 2^-960 - 106 > 2^-1074).
constexpr double kFastRstdMin = 0x1p-960;

BigFloat to_bigfloat(const Dyadic& d) {
  BigFloat r(d.m);
  return ldexp(r, static_cast<int>(d.e));
}
DD to_dd(const BigFloat& v) {
  const double hi = v.convert_to<double>();
  if (!std::isfinite(hi)) return {hi, 0};
  return {hi, BigFloat(v - hi).convert_to<double>()};
}

template <class T>
void load_row(const void* src, std::int64_t n, std::vector<double>& dst) {
  const T* p = static_cast<const T*>(src);
  dst.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) dst[static_cast<std::size_t>(i)] = to_float(p[i]);
}
void load(DType dt, const void* src, std::int64_t n, std::vector<double>& dst) {
  switch (dt) {
    case DType::f32: return load_row<float>(src, n, dst);
    case DType::f64: return load_row<double>(src, n, dst);
    case DType::f16: return load_row<f16>(src, n, dst);
    case DType::bf16: return load_row<bf16>(src, n, dst);
  }
}
void store_bits(const Format& f, void* dst, std::int64_t i, std::uint64_t bits) {
  switch (f.bits) {
    case 16: static_cast<std::uint16_t*>(dst)[i] = static_cast<std::uint16_t>(bits); return;
    case 32: static_cast<std::uint32_t*>(dst)[i] = static_cast<std::uint32_t>(bits); return;
    default: static_cast<std::uint64_t*>(dst)[i] = bits; return;
  }
}

}  // namespace

struct RowReferencer::Impl {
  DType dtype, param_dtype;
  DType in_dtype;     // what run() reads: x, or h (in the residual's dtype) for Add & Norm
  bool centred;       // LayerNorm subtracts the mean; RMSNorm takes it as 0
  double offset;      // C of w = C + γ, as the kernels receive it
  Format fmt, stats_fmt;
  Dyadic eps_dyadic;  // eps exactly as the kernels receive it
  Dyadic offset_dyadic;
  double top_gap;  // the top binade's ulp, Inf's distance from the largest finite value in the ordinal order
  std::vector<double> x, gamma, beta;

  // Per-row exact state.
  BigInt n_big;
  Dyadic S, M, W;
  BigFloat sqrtW;
  DD mean_dd, rstd_dd;
  double floor = 1;  // LayerNorm's scale floor for this row: rho_floor(sqrt(M/W)) (reference.hpp)
  bool fast_ok = false;

  explicit Impl(const Problem& p)
      : dtype(p.dtype), param_dtype(p.param_dtype), in_dtype(input_dtype(p)),
        centred(p.op.norm == Norm::layernorm), offset(p.gamma_offset),
        fmt(format_of(p.dtype)), stats_fmt(format_of(stats_dtype(p.dtype))), eps_dyadic(Dyadic::from_double(p.eps)),
        offset_dyadic(Dyadic::from_double(p.gamma_offset)), top_gap(std::ldexp(1.0, fmt.emax - fmt.precision + 1)) {}

  // w_i = C + γ_i as a double-double (two_sum: exact), 1 without gamma.
  detail::DD weight_dd(std::size_t i) const {
    if (gamma.empty()) return {1.0, 0.0};
    return detail::two_sum(offset, gamma[i]);
  }
  Dyadic weight(std::size_t i) const {
    if (gamma.empty()) return Dyadic::from_double(1.0);
    return offset_dyadic + Dyadic::from_double(gamma[i]);
  }

  void accumulate(std::int64_t n) {
    auto finish = [&](const auto& acc) {
      S = centred ? acc.sum() : Dyadic{};
      Dyadic Q = acc.sum_of_squares();
      detail::normalize(S);
      detail::normalize(Q);
      M = Q * n_big - S * S;
      detail::normalize(M);
      W = M + eps_dyadic * (n_big * n_big);
      detail::normalize(W);
    };
    if (in_dtype == DType::f64) {
      detail::WideRowAccumulator acc(format_of(DType::f64).lsb_exponent());
      for (std::int64_t i = 0; i < n; ++i) acc.add(x[static_cast<std::size_t>(i)]);
      finish(acc);
    } else {
      // f16 and bf16 values are f32 values: one accumulator geometry serves the f32 family.
      detail::NarrowRowAccumulator acc(format_of(DType::f32).lsb_exponent());
      for (std::int64_t i = 0; i < n; ++i) acc.add(x[static_cast<std::size_t>(i)]);
      finish(acc);
    }
  }

  // docs/DESIGN.md "Measuring error" (output_scale: LayerNorm's floors |z*| at the row's rho_floor, RMSNorm's
  // does not). The element's reference with its scale and, where the floor is below 1, its kappa scale.
  ElementReference element(std::size_t i, double hi, double lo, double z) const {
    const double w = std::fabs(weight_dd(i).hi), b = beta.empty() ? 0.0 : std::fabs(beta[i]), az = std::fabs(z);
    ElementReference e{hi, lo, z, output_scale(centred ? floor : 0.0, w, az, b)};
    if (centred && floor < 1) e.kappa_scale = output_scale(1.0, w, az, b);
    return e;
  }

  // sign(y* − m) for element i, exactly. D = n·x − S.
  int compare_y(const Dyadic& A /* γ·D */, std::size_t i, const Dyadic& m, const Dyadic& k = Dyadic::from_double(1.0)) const {
    // sign(k·y* − m) = sign(k·A/sqrt(W) − t), t = m − k·β (k = 1: y* against m)
    const Dyadic t = m - k * Dyadic::from_double(beta.empty() ? 0.0 : beta[i]);
    const int sa = A.sign(), st = t.sign();
    if (sa == 0) return -st;
    if (sa != st) return sa;  // covers st == 0 too
    // Same sign s: |A|/sqrt(W) vs |t|  <=>  A² vs t²·W.
    const int c = detail::compare(A * A, t * t * W);
    return sa > 0 ? c : -c;
  }

  std::uint64_t round_y_exactly(std::size_t i, std::int64_t guess, ElementReference* e) const {
    const Dyadic D = Dyadic::from_double(x[i]) * n_big - S;
    const Dyadic A = D * weight(i);
    if (e) {
      const BigFloat z = to_bigfloat(D) / sqrtW;
      const BigFloat y = to_bigfloat(A) / sqrtW + (beta.empty() ? 0.0 : beta[i]);
      const DD ydd = to_dd(y);
      *e = element(i, ydd.hi, ydd.lo, z.convert_to<double>());
    }
    return detail::round_exactly(fmt, guess, [&](const Dyadic& m) { return compare_y(A, i, m); });
  }

  // The double-double y*_i of the fast path and its proven absolute error bound (kFastRelBound's derivation).
  DD fast_y(std::size_t i, double& eps_i) const {
    const double xi = x[i];
    const DD w = weight_dd(i);  // exact
    const double g = w.hi;
    const double b = beta.empty() ? 0.0 : beta[i];
    const DD d = detail::sub(DD{xi, 0}, mean_dd);
    const DD p = detail::mul(d, rstd_dd);
    const DD q = w.lo == 0 ? detail::mul(p, g) : detail::mul(p, w);
    eps_i = kFastRelBound * (std::fabs(b) + std::fabs(g) * rstd_dd.hi * (std::fabs(xi) + std::fabs(mean_dd.hi))) +
            kUnderflowSlack * (1 + rstd_dd.hi * std::fabs(g));
    return detail::add(q, b);
  }

  // sign(y*_i − m), exactly: the double-double decides when m is clear of its error bound, else the squares.
  int compare(std::size_t i, double m) const {
    if (fast_ok) {
      double eps_i = 0;
      const DD y = fast_y(i, eps_i);
      const DD diff = detail::sub(y, DD{m, 0});
      const double margin = eps_i * (1 + 0x1p-40) + std::fabs(diff.hi) * 0x1p-100;
      if (diff.hi > margin) return 1;
      if (-diff.hi > margin) return -1;
    }
    const Dyadic D = Dyadic::from_double(x[i]) * n_big - S;
    return compare_y(D * weight(i), i, Dyadic::from_double(m));
  }

  // sign(k·y*_i − m): the double-double k·y, its bound times k, then the squares with A·k and m − k·β.
  int compare_scaled(std::size_t i, double k, double m) const {
    if (fast_ok) {
      double eps_i = 0;
      const DD y = detail::mul(fast_y(i, eps_i), k);  // the product's own rounding: < 2^-100 of it
      const DD diff = detail::sub(y, DD{m, 0});
      const double margin = eps_i * k * (1 + 0x1p-40) + (std::fabs(y.hi) + std::fabs(diff.hi)) * 0x1p-100;
      if (diff.hi > margin) return 1;
      if (-diff.hi > margin) return -1;
    }
    const Dyadic K = Dyadic::from_double(k);
    const Dyadic D = Dyadic::from_double(x[i]) * n_big - S;
    return compare_y(D * weight(i) * K, i, Dyadic::from_double(m), K);
  }

  // The fast path: returns true and sets bits if the double-double value certifies the rounding.
  bool round_y_fast(std::size_t i, std::uint64_t& bits, std::int64_t& guess,
                    ElementReference* e) const {
    const double xi = x[i];
    const DD w = weight_dd(i);  // exact
    const double g = w.hi;
    const double b = beta.empty() ? 0.0 : beta[i];
    const DD d = detail::sub(DD{xi, 0}, mean_dd);
    const DD p = detail::mul(d, rstd_dd);  // z*
    const DD q = w.lo == 0 ? detail::mul(p, g) : detail::mul(p, w);  // the same bound (< 2^-102 each)
    const DD y = detail::add(q, b);
    if (e) *e = element(i, y.hi, y.lo, p.hi);
    const double eps_i = kFastRelBound * (std::fabs(b) + std::fabs(g) * rstd_dd.hi * (std::fabs(xi) + std::fabs(mean_dd.hi))) +
                         kUnderflowSlack * (1 + rstd_dd.hi * std::fabs(g));
    const std::int64_t k = round_to_ordinal(fmt, y.hi);
    guess = k;
    const std::int64_t inf = fmt.inf_ordinal();
    if (k >= inf || k <= -inf) return false;
    // Certified if both neighbouring midpoints are farther than eps_i from y.
    auto clear_of = [&](std::int64_t lo_ordinal, int side) {
      // The midpoint between ordinals lo and lo+1 as an exact double-double (a, ±gap/2). Next to
      // ±Inf the gap is the top binade's ulp (Inf stands for 2^(emax+1) in the ordinal order).
      DD mid;
      if (lo_ordinal <= -inf) {
        mid = {bits_to_double(fmt, bits_of_ordinal(fmt, lo_ordinal + 1)), -top_gap / 2};
      } else {
        const double a = bits_to_double(fmt, bits_of_ordinal(fmt, lo_ordinal));
        const double gap = lo_ordinal + 1 >= inf
                               ? top_gap
                               : bits_to_double(fmt, bits_of_ordinal(fmt, lo_ordinal + 1)) - a;
        if ((gap / 2) * 2 != gap) return false;  // f64 subnormal spacing: not a double-double
        mid = {a, gap / 2};
      }
      const DD diff = detail::sub(y, mid);  // y − midpoint
      const double margin = eps_i * (1 + 0x1p-40) + std::fabs(diff.hi) * 0x1p-100;
      return side > 0 ? diff.hi > margin : -diff.hi > margin;
    };
    if (!clear_of(k, -1) || !clear_of(k - 1, +1)) return false;
    if (k == 0) {  // the sign of a zero result is the sign of y*
      if (std::fabs(y.hi) <= eps_i * 2) return false;
      bits = bits_of_ordinal(fmt, 0) | (y.hi < 0 ? std::uint64_t{1} << (fmt.bits - 1) : 0);
      return true;
    }
    bits = bits_of_ordinal(fmt, k);
    return true;
  }

  RowReference run(const void* xp, const void* gp, const void* bp, std::int64_t n, void* y_out,
                   ElementReference* elems) {
    RowReference out;
    load(in_dtype, xp, n, x);
    if (gp) load(param_dtype, gp, n, gamma); else gamma.clear();
    if (bp) load(param_dtype, bp, n, beta); else beta.clear();
    const std::uint64_t nan_bits = double_to_bits(fmt, kNaN);
    auto fill_nan = [&](std::int64_t i) {
      if (y_out) store_bits(fmt, y_out, i, nan_bits);
      if (elems) elems[i] = {kNaN, kNaN, kNaN, kNaN};
    };
    const bool finite = std::all_of(x.begin(), x.end(), [](double v) { return std::isfinite(v); });
    if (!finite || n == 0) {
      out.nonfinite = !finite;
      out.mean = out.rstd = out.kappa = kNaN;
      for (std::int64_t i = 0; i < n; ++i) fill_nan(i);
      return out;
    }
    n_big = n;
    accumulate(n);

    // mean = S/n: compare S with m·n.
    const BigFloat mean_bf = to_bigfloat(S) / n;
    out.mean = bits_to_double(
        stats_fmt, detail::round_exactly(stats_fmt, round_to_ordinal(stats_fmt, mean_bf.convert_to<double>()),
                                         [&](const Dyadic& m) { return detail::compare(S, m * n_big); }));
    mean_dd = to_dd(mean_bf);
    // kappa = |mean| / sqrt(var + eps) = |S| / sqrt(W): what a mean error δ costs z is δ·rstd, so eps
    // belongs in it (with sqrt(var) alone, rows with var << eps got a kappa thousands of times too big
    // and a budget a + b·kappa that let anything through).
    out.kappa = W.sign() == 0 ? 0.0 : BigFloat(abs(to_bigfloat(S)) / sqrt(to_bigfloat(W))).convert_to<double>();

    if (W.sign() == 0) {  // constant row with eps = 0: rstd = +Inf, y = 0·Inf = NaN (IEEE)
      out.rstd = kInf;
      for (std::int64_t i = 0; i < n; ++i) fill_nan(i);
      return out;
    }
    sqrtW = sqrt(to_bigfloat(W));
    out.rho = BigFloat(sqrt(to_bigfloat(M)) / sqrtW).convert_to<double>();  // M ≥ 0: n²·var
    floor = rho_floor(out.rho);
    const BigFloat rstd_bf = BigFloat(n) / sqrtW;
    // rstd = n/sqrt(W) > m > 0  <=>  n² > m²·W.
    const Dyadic n2{n_big * n_big, 0};
    out.rstd = bits_to_double(
        stats_fmt, detail::round_exactly(stats_fmt, round_to_ordinal(stats_fmt, rstd_bf.convert_to<double>()),
                                         [&](const Dyadic& m) {
                                           if (m.sign() <= 0) return 1;
                                           return detail::compare(n2, m * m * W);
                                         }));
    rstd_dd = to_dd(rstd_bf);

    // The fast path is valid when no double-double intermediate can overflow (f32/f16/bf16 rows
    // always qualify: every intermediate is below 2^450).
    double xmax = 0, gmax = 0, bmax = 0;
    for (double v : x) xmax = std::max(xmax, std::fabs(v));
    for (std::size_t i = 0; i < gamma.size(); ++i) gmax = std::max(gmax, std::fabs(weight_dd(i).hi));
    for (double v : beta) bmax = std::max(bmax, std::fabs(v));
    if (gamma.empty()) gmax = 1;
    const double span = (xmax + std::fabs(mean_dd.hi)) * rstd_dd.hi;
    // rstd must also be a normal double-double: below 2^-960 its low word (and, below 2^-1022, its high
    // word) loses bits to underflow, far more than the 2^-96 bound (f64 rows near overflow, whose
    // rstd ~ 1/max is subnormal in f64; found by RMSNorm's rows of ±max in tests/test_reference_ops.cpp).
    fast_ok = std::isfinite(rstd_dd.hi) && rstd_dd.hi >= kFastRstdMin && std::isfinite(mean_dd.hi) &&
              span < kFastRangeLimit && std::isfinite(gmax) && std::isfinite(bmax) && gmax * span + bmax < kFastRangeLimit;

    for (std::int64_t i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      if ((!gamma.empty() && !std::isfinite(gamma[ui])) || (!beta.empty() && !std::isfinite(beta[ui]))) {
        fill_nan(i);  // a non-finite γ or β has no real-number answer; any NaN output matches
        continue;
      }
      std::uint64_t bits = 0;
      std::int64_t guess = 0;
      ElementReference* e = elems ? elems + i : nullptr;
      if (!(fast_ok && round_y_fast(ui, bits, guess, e))) {
        ++out.exact_fallbacks;
        if (!fast_ok) {
          // No double-double guess: start from the big-float value.
          const BigFloat y = to_bigfloat((Dyadic::from_double(x[ui]) * n_big - S) * weight(ui)) / sqrtW +
                             (beta.empty() ? 0.0 : beta[ui]);
          const double yd = y.convert_to<double>();
          guess = std::isnan(yd) ? 0 : round_to_ordinal(fmt, yd);
        }
        bits = round_y_exactly(ui, guess, e);
      }
      if (y_out) store_bits(fmt, y_out, i, bits);
    }
    return out;
  }
};

namespace {
Problem layernorm_problem(DType dtype, double eps) {
  Problem p;
  p.dtype = p.param_dtype = dtype;
  p.eps = eps;  // exactly as given, as before there were ops
  return p;
}
}  // namespace

RowReferencer::RowReferencer(DType dtype, double eps) : impl_(std::make_unique<Impl>(layernorm_problem(dtype, eps))) {}
RowReferencer::RowReferencer(const Problem& p) : impl_(std::make_unique<Impl>(p)) {}
RowReferencer::~RowReferencer() = default;
RowReferencer::RowReferencer(RowReferencer&&) noexcept = default;
RowReferencer& RowReferencer::operator=(RowReferencer&&) noexcept = default;

int RowReferencer::compare(std::int64_t i, double m) const { return impl_->compare(static_cast<std::size_t>(i), m); }
int RowReferencer::compare_scaled(std::int64_t i, double k, double m) const {
  return impl_->compare_scaled(static_cast<std::size_t>(i), k, m);
}

RowReference RowReferencer::run(const void* x, const void* gamma, const void* beta, std::int64_t n,
                                void* y_out, ElementReference* elems) {
  return impl_->run(x, gamma, beta, n, y_out, elems);
}

}  // namespace lnorm
