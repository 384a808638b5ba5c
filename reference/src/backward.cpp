// The exact backward of LayerNorm and RMSNorm (lnorm/backward.hpp). Notation as exact_row.cpp, all exact:
//   S = Σx (RMSNorm: 0), Q = Σx², W = n·Q − S² + n²·eps = n²·(var + eps), D_i = n·x_i − S,
//   rstd = n/sqrt(W), xhat_i = D_i/sqrt(W), g_i = dy_i·w_i (w = C + γ, 1 without gamma),
//   G = Σ g_i, P = Σ g_i·D_i  (so mean(g) = G/n, mean(g·xhat) = P/(n·sqrt(W))).
// dx (LayerNorm): rstd·(g_i − G/n − xhat_i·P/(n·sqrt W)) = (n/sqrt W)·(g_i − G/n − D_i·P/(n·W))
//               = (W·(n·g_i − G) − D_i·P) / W^(3/2) = N_i / W^(3/2);   RMSNorm: N_i = W·n·g_i − D_i·P.
//   Exact decision: for a midpoint m, sign(N_i/W^(3/2) − m) is sign(N_i) when the signs differ, else the
//   sign of N_i² − m²·W³ (times sign(N_i)): dyadic integers, no rounding anywhere.
//   Fast path: v = N_i/(W·sqrt W) in 160-bit BigFloat; each of the five operations (two conversions, sqrt,
//   multiply, divide) errs by at most 2^-159 relative, so |v − dx*| ≤ 6·2^-159·|v| < 2^-150·|v|; when both
//   neighbouring midpoints lie farther than that from v the rounding is certified, otherwise the exact test
//   decides (near-ties and exact ties alike).
// dbeta_j = Σ_r dy_rj: a dyadic sum, compared exactly.
// dgamma_j = Σ_r dy_rj·D_rj/sqrt(W_r) = Σ_r t_r: Ziv's strategy at precision p (192, 384, ..., 6144 bits):
//   each t_r = a_r/sqrt(W_r) from a_r = dy_rj·D_rj and W_r converted (2 roundings), a sqrt and a division,
//   every operation of cpp_bin_float correctly rounded, so ≤ 4·2^-p relative, taken as 6·2^-p; the R − 1
//   additions each err by ≤ 2^-p of a partial sum, itself ≤ Σ|t_r|. So |v − dgamma*| ≤ (6 + R)·2^-p·Σ|t_r|,
//   and we use E = (8 + 2R)·2^(1-p)·A with A the computed Σ|t_r| (itself within (6 + R)·2^-p of the exact
//   one: the factor 2 covers it). The rounding is certified when v ± E round alike. The first attempt
//   (192 bits) accumulates per thread and merges: its value depends on the thread count, its certified
//   rounding does not; the later attempts recompute the column in row order.
//   Undecided at 6144 bits, the column's terms are grouped by square class K = m·2^(e mod 2) of W = m·2^e
//   (m odd): 1/sqrt(W) = 2^-floor(e/2)/sqrt(K), so rows whose W differ by a power of 4 share a class.
//   Classes whose K is a perfect square are rational; with no other class the sum is rational and compared
//   exactly; with one other class (A/sqrt(K) + q) it is compared by squaring as dx is. Two or more
//   irrational classes are rounded from the 6144-bit value and counted (dgamma_undecided): their square
//   roots could still be dependent (K ratio an odd square, e.g. rows x and 3x with eps = 0).
#include "lnorm/backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include "dyadic.hpp"
#include "lnorm/format.hpp"
#include "lnorm/parallel.hpp"
#include "rounding.hpp"
#include "special_values.hpp"

namespace lnorm {
namespace {

using detail::BigInt;
using detail::Dyadic;
namespace mp = boost::multiprecision;
template <unsigned kBits>
using Float = mp::number<mp::cpp_bin_float<kBits, mp::digit_base_2>, mp::et_off>;
using F160 = Float<160>;
using Rational = mp::cpp_rational;

using detail::kNaN;
using detail::kInf;

template <class F>
F to_float(const Dyadic& d) {
  F r(d.m);
  return ldexp(r, static_cast<int>(d.e));
}
// A starting ordinal for round_exactly from a double guess (±Inf: the infinities' ordinals, never a walk
// from 0).
std::int64_t start_ordinal(const Format& f, double guess) {
  if (std::isnan(guess)) return 0;
  if (std::isinf(guess)) return guess > 0 ? f.inf_ordinal() : -f.inf_ordinal();
  return round_to_ordinal(f, guess);
}

Rational to_rational(const Dyadic& d) {
  Rational r(d.m);
  const BigInt p = BigInt(1) << static_cast<unsigned>(d.e < 0 ? -d.e : d.e);
  return d.e >= 0 ? Rational(r * p) : Rational(r / p);
}
template <class F>
ElementReference element(const F& v, double scale) {
  const double hi = v.template convert_to<double>();
  const double lo = std::isfinite(hi) ? F(v - hi).template convert_to<double>() : 0.0;
  // A scale past double's range (f64 gradients near overflow) is measured at the largest double's ulp.
  return {hi, lo, 0.0, std::isinf(scale) ? std::numeric_limits<double>::max() : scale};
}

// Rounds a real value known as v ± err (err ≥ 0, both in F) to f when the interval clears every midpoint;
// nullopt when it does not (or would overflow: left to the exact path).
template <class F>
std::optional<std::uint64_t> certified(const Format& f, const F& v, const F& err) {
  const double d = v.template convert_to<double>();
  if (!std::isfinite(d)) return std::nullopt;
  std::int64_t k = round_to_ordinal(f, d);
  const std::int64_t inf = f.inf_ordinal();
  if (k >= inf - 1 || k <= -(inf - 1)) return std::nullopt;
  F lo = to_float<F>(detail::midpoint(f, k - 1)), hi = to_float<F>(detail::midpoint(f, k));
  // d is v rounded to 53 bits: when v lies within 2^-53 of a midpoint, d can be the midpoint itself (or fall on
  // its other side), and round(d) is then the wrong neighbour. One step towards v puts it between lo and hi.
  // (Found by test_backward_reference_suite: Σ dy·xhat = m − 1.1e-30 at a bf16 midpoint m; without the step no
  // precision certified it, and the column was rounded from d, ties to even, the wrong way.)
  if (v <= lo || v >= hi) {
    k += v <= lo ? -1 : 1;
    if (k >= inf - 1 || k <= -(inf - 1)) return std::nullopt;
    lo = to_float<F>(detail::midpoint(f, k - 1)), hi = to_float<F>(detail::midpoint(f, k));
  }
  if (!(v - err > lo && v + err < hi)) return std::nullopt;
  if (k == 0) {  // the sign of a zero result is the sign of the value
    if (!(abs(v) > err)) return std::nullopt;
    return bits_of_ordinal(f, 0) | (v < 0 ? std::uint64_t{1} << (f.bits - 1) : 0);
  }
  return bits_of_ordinal(f, k);
}

// Per-row exact statistics shared by dx and dgamma.
struct RowStats {
  bool poisoned = true;   // a non-finite x, or W = 0: no xhat — dx is NaN, and so is every dgamma column
  bool dx_nan = true;     // poisoned, or a non-finite dy or gamma in the row (mean(g) reaches every dx)
  Dyadic S, W;
  F160 sqrtW;
};

struct Inputs {  // what the passes read, with the weights w = C + γ loaded once
  const Problem& p;
  const void* x;
  const void* gamma;
  const void* dy;
  Format fmt, pfmt;
  std::vector<Dyadic> w;  // C + γ (or 1) per column
  bool gamma_finite = true;
};

RowStats row_stats(const Inputs& q, std::int64_t r, std::vector<Dyadic>& xs) {
  const Problem& p = q.p;
  const std::int64_t n = p.cols;
  RowStats s;
  xs.resize(static_cast<std::size_t>(n));
  Dyadic Q;
  bool dy_finite = true;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = value_at(p.dtype, q.x, r * n + i);
    dy_finite = dy_finite && std::isfinite(value_at(p.dtype, q.dy, r * n + i));
    if (!std::isfinite(v)) return s;
    xs[static_cast<std::size_t>(i)] = Dyadic::from_double(v);
    if (p.op.norm == Norm::layernorm) s.S = s.S + xs[static_cast<std::size_t>(i)];
    Q = Q + xs[static_cast<std::size_t>(i)] * xs[static_cast<std::size_t>(i)];
  }
  const BigInt nb = n;
  detail::normalize(s.S);
  detail::normalize(Q);
  s.W = Q * nb - s.S * s.S + Dyadic::from_double(p.eps) * (nb * nb);
  detail::normalize(s.W);
  if (s.W.sign() <= 0) return s;
  s.poisoned = false;
  s.dx_nan = !dy_finite || !q.gamma_finite;
  s.sqrtW = sqrt(to_float<F160>(s.W));
  return s;
}

// dx of one row (stats not poisoned), written as bits; elems (n entries) may be null.
void row_dx(const Inputs& q, std::int64_t r, const RowStats& s, const std::vector<Dyadic>& xs, void* dx_out,
            ElementReference* elems) {
  const Problem& p = q.p;
  const std::int64_t n = p.cols;
  const BigInt nb = n;
  const bool centred_op = p.op.norm == Norm::layernorm;
  std::vector<Dyadic> g(static_cast<std::size_t>(n)), D(static_cast<std::size_t>(n));
  Dyadic G, P;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    g[ui] = Dyadic::from_double(value_at(p.dtype, q.dy, r * n + i)) * q.w[ui];
    D[ui] = xs[ui] * nb - s.S;
    G = G + g[ui];
    P = P + g[ui] * D[ui];
  }
  detail::normalize(G);
  detail::normalize(P);
  const Dyadic W3 = s.W * s.W * s.W;
  const F160 Wf = to_float<F160>(s.W), denom = Wf * s.sqrtW;
  // The scale's pieces (docs/DESIGN.md "Backward"): mean|g| and mean(|g|·xs(|xhat|)), to double precision.
  // LayerNorm's xs(t) = max(1, t), as the forward's max(1, |z|): a kernel's xhat errs by ~u absolutely (its mean
  // and rstd are rounded), so an xhat near 0 is measured against 1. RMSNorm's xs(t) = t: xhat = x·rstd is a
  // product, relatively accurate, so a small xhat is measured against itself (as the forward's output_scale).
  const auto xscale = [&](const F160& t) { return centred_op && t < 1 ? F160(1) : t; };
  F160 abs_g = 0, abs_gx = 0;
  if (elems) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      const F160 ag = abs(to_float<F160>(g[i]));
      abs_g += ag;
      abs_gx += ag * xscale(abs(to_float<F160>(D[i])) / s.sqrtW);
    }
    abs_g /= n;
    abs_gx /= n;
  }
  const F160 rstd = F160(n) / s.sqrtW;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    Dyadic N = s.W * (centred_op ? g[ui] * nb - G : g[ui] * nb) - D[ui] * P;
    detail::normalize(N);
    const F160 v = to_float<F160>(N) / denom;
    const F160 err = abs(v) * F160(0x1p-150);
    std::uint64_t bits;
    if (const auto c = certified(q.fmt, v, err)) {
      bits = *c;
    } else {
      const std::int64_t k0 = start_ordinal(q.fmt, v.convert_to<double>());
      const int sn = N.sign();
      bits = detail::round_exactly(q.fmt, k0, [&](const Dyadic& m) {
        const int sm = m.sign();
        if (sn == 0) return -sm;
        if (sn != sm) return sn;
        const int c = detail::compare(N * N, m * m * W3);
        return sn > 0 ? c : -c;
      });
    }
    set_bits_at(p.dtype, dx_out, r * n + i, bits);
    if (elems) {
      const F160 xhat = xscale(abs(to_float<F160>(D[ui])) / s.sqrtW);
      const F160 scale = rstd * (abs(to_float<F160>(g[ui])) + (centred_op ? abs_g : F160(0)) + xhat * abs_gx);
      elems[i] = element(v, scale.convert_to<double>());
      elems[i].z = (to_float<F160>(D[ui]) / s.sqrtW).convert_to<double>();
    }
  }
}

// dgamma_j's terms from scratch, in row order, at precision kBits: returns v and the bound E.
template <unsigned kBits>
std::pair<Float<kBits>, Float<kBits>> dgamma_at(const Inputs& q, const std::vector<RowStats>& rows, std::int64_t j) {
  using F = Float<kBits>;
  const std::int64_t n = q.p.cols;
  F v = 0, a = 0;
  std::int64_t terms = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double d = value_at(q.p.dtype, q.dy, static_cast<std::int64_t>(r) * n + j);
    if (d == 0) continue;
    const Dyadic D = Dyadic::from_double(value_at(q.p.dtype, q.x, static_cast<std::int64_t>(r) * n + j)) * BigInt(n) - rows[r].S;
    if (D.sign() == 0) continue;
    const F t = to_float<F>(Dyadic::from_double(d) * D) / sqrt(to_float<F>(rows[r].W));
    v += t;
    a += abs(t);
    ++terms;
  }
  const F err = a * F(8 + 2 * terms) * ldexp(F(1), 1 - static_cast<int>(kBits));
  return {v, err};
}

template <unsigned kBits>
bool try_dgamma(const Inputs& q, const std::vector<RowStats>& rows, std::int64_t j, std::uint64_t& bits, double& top) {
  const auto [v, err] = dgamma_at<kBits>(q, rows, j);
  top = v.template convert_to<double>();
  if (const auto c = certified(q.pfmt, v, err)) {
    bits = *c;
    return true;
  }
  return false;
}

bool is_square(const BigInt& k) {
  if (k < 0) return false;
  const BigInt s = mp::sqrt(k);
  return s * s == k;
}

// The exact fallback (see the header comment): nullopt when two or more irrational classes remain.
std::optional<std::uint64_t> dgamma_exact(const Inputs& q, const std::vector<RowStats>& rows, std::int64_t j, double guess) {
  const std::int64_t n = q.p.cols;
  std::map<BigInt, Dyadic> classes;  // K -> Σ a_r·2^-floor(e/2)
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double d = value_at(q.p.dtype, q.dy, static_cast<std::int64_t>(r) * n + j);
    if (d == 0) continue;
    Dyadic a = Dyadic::from_double(d) *
               (Dyadic::from_double(value_at(q.p.dtype, q.x, static_cast<std::int64_t>(r) * n + j)) * BigInt(n) - rows[r].S);
    if (a.sign() == 0) continue;
    Dyadic W = rows[r].W;  // normalized: m odd
    const std::int64_t e_half = W.e >= 0 ? W.e / 2 : -((-W.e + 1) / 2);  // floor(e/2)
    const BigInt K = W.e - 2 * e_half == 1 ? BigInt(W.m * 2) : W.m;
    a.e -= e_half;
    auto it = classes.find(K);
    if (it == classes.end()) classes.emplace(K, a);
    else it->second = it->second + a;
  }
  Rational rational_part = 0;
  std::optional<std::pair<Rational, BigInt>> irrational;  // A / sqrt(K)
  for (const auto& [K, A] : classes) {
    if (A.sign() == 0) continue;
    if (is_square(K)) {
      rational_part += to_rational(A) / Rational(mp::sqrt(K));
    } else {
      if (irrational) return std::nullopt;
      irrational = std::make_pair(to_rational(A), K);
    }
  }
  return detail::round_exactly(q.pfmt, start_ordinal(q.pfmt, guess), [&](const Dyadic& m) {
    const Rational t = to_rational(m) - rational_part;  // sign(A/sqrt(K) − t)
    if (!irrational) return t < 0 ? 1 : t > 0 ? -1 : 0;
    const Rational& A = irrational->first;
    const int sa = A.sign(), st = t.sign();
    if (sa == 0) return -st;
    if (sa != st) return sa;
    const Rational lhs = A * A, rhs = t * t * Rational(irrational->second);
    const int c = lhs < rhs ? -1 : lhs > rhs ? 1 : 0;
    return sa > 0 ? c : -c;
  });
}

}  // namespace

void reference_backward(const Problem& p, const void* x, const void* gamma, const void* dy, void* dx, void* dgamma,
                        void* dbeta, BackwardReference* out) {
  Inputs q{p, x, p.has_gamma ? gamma : nullptr, dy, format_of(p.dtype), format_of(p.param_dtype), {}, true};
  const std::int64_t n = p.cols, rows = p.rows;
  q.w.resize(static_cast<std::size_t>(n), Dyadic::from_double(1.0));
  if (q.gamma) {
    for (std::int64_t i = 0; i < n; ++i) {
      const double g = value_at(p.param_dtype, q.gamma, i);
      if (!std::isfinite(g)) q.gamma_finite = false;
      else q.w[static_cast<std::size_t>(i)] = Dyadic::from_double(p.gamma_offset) + Dyadic::from_double(g);
    }
  }
  if (out) {
    out->dx.assign(dx ? static_cast<std::size_t>(rows * n) : 0, ElementReference{});
    out->dgamma.assign(static_cast<std::size_t>(n), ElementReference{});
    out->dbeta.assign(static_cast<std::size_t>(n), ElementReference{});
    out->dgamma_undecided = 0;
    out->row_kappa.assign(static_cast<std::size_t>(rows), kNaN);
    out->dgamma_kappa.assign(static_cast<std::size_t>(n), 0.0);
  }
  const std::uint64_t nan_x = double_to_bits(q.fmt, kNaN), nan_p = double_to_bits(q.pfmt, kNaN);
  std::vector<RowStats> stats(static_cast<std::size_t>(rows));
  const bool centred_op = p.op.norm == Norm::layernorm;
  // Pass 1, rows in parallel: the statistics and dx; dgamma's 192-bit partial sums per thread.
  const int threads = static_cast<int>(std::clamp<std::int64_t>(p.threads, 1, std::max<std::int64_t>(rows, 1)));
  struct Partial {
    std::vector<Float<192>> v, a;
    std::vector<double> scale;  // Σ |dy|·xs(|xhat|): the metric's scale (a is the bound's Σ|t|)
    std::vector<std::int64_t> terms;
  };
  std::vector<Partial> partial(static_cast<std::size_t>(threads));
  parallel_rows(threads, threads, [&](std::int64_t tb, std::int64_t te) {
    for (std::int64_t ti = tb; ti < te; ++ti) {
      Partial& part = partial[static_cast<std::size_t>(ti)];
      part.v.assign(static_cast<std::size_t>(n), 0);
      part.a.assign(static_cast<std::size_t>(n), 0);
      part.scale.assign(static_cast<std::size_t>(n), 0);
      part.terms.assign(static_cast<std::size_t>(n), 0);
      std::vector<Dyadic> xs;
      for (std::int64_t r = rows * ti / threads; r < rows * (ti + 1) / threads; ++r) {
        RowStats& s = stats[static_cast<std::size_t>(r)];
        s = row_stats(q, r, xs);
        if (s.dx_nan) {
          for (std::int64_t i = 0; dx && i < n; ++i) set_bits_at(p.dtype, dx, r * n + i, nan_x);
          if (out && dx)
            for (std::int64_t i = 0; i < n; ++i) out->dx[static_cast<std::size_t>(r * n + i)] = {kNaN, kNaN, kNaN, kNaN};
        } else if (dx) {
          row_dx(q, r, s, xs, dx, out ? out->dx.data() + r * n : nullptr);
        }
        if (s.poisoned) continue;
        if (out) out->row_kappa[static_cast<std::size_t>(r)] = (abs(to_float<F160>(s.S)) / s.sqrtW).convert_to<double>();
        const Float<192> sq = to_float<Float<192>>(s.W);
        const Float<192> root = sqrt(sq);
        for (std::int64_t j = 0; j < n; ++j) {
          const double d = value_at(p.dtype, dy, r * n + j);
          if (d == 0 || !std::isfinite(d)) continue;  // a non-finite dy: its column is NaN (pass 2)
          const auto uj = static_cast<std::size_t>(j);
          const Dyadic term = Dyadic::from_double(d) * (xs[uj] * BigInt(n) - s.S);
          if (term.sign() == 0) {  // xhat = 0 exactly (a width-1 LayerNorm row, x = mean; RMSNorm's x = 0)
            if (centred_op) part.scale[uj] += std::fabs(d);
            continue;
          }
          const Float<192> t = to_float<Float<192>>(term) / root;
          part.v[uj] += t;
          part.a[uj] += abs(t);
          // LayerNorm: |dy|·max(1, |xhat|) = max(|dy|, |dy·xhat|); RMSNorm: |dy·xhat| (as row_dx's xs).
          part.scale[uj] += centred_op ? std::max(std::fabs(d), abs(t).convert_to<double>()) : abs(t).convert_to<double>();
          ++part.terms[uj];
        }
      }
    }
  });
  // Pass 2, columns in parallel: dbeta exactly, dgamma by Ziv.
  std::mutex undecided_lock;
  parallel_rows(n, threads, [&](std::int64_t cb, std::int64_t ce) {
    for (std::int64_t j = cb; j < ce; ++j) {
      const auto uj = static_cast<std::size_t>(j);
      bool dy_finite = true, any_poisoned = false;
      Dyadic sum;
      Float<192> abs_dy = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double d = value_at(p.dtype, dy, r * n + j);
        if (!std::isfinite(d)) {
          dy_finite = false;
          break;
        }
        sum = sum + Dyadic::from_double(d);
        abs_dy += std::fabs(d);
        any_poisoned = any_poisoned || stats[static_cast<std::size_t>(r)].poisoned;
      }
      // A non-finite dy in the column: IEEE's answer, as an IEEE sum gives it whatever its order. A sum with
      // infinite terms is ±Inf when they all have one sign, NaN with both signs or a NaN term; dgamma's terms
      // dy·xhat are ±Inf by the signs of dy and xhat, NaN where xhat = 0 (Inf·0) or the row has no xhat.
      if (!dy_finite) {
        int signs = 0, gsigns = 0;  // bit 0: a +Inf term, bit 1: a −Inf term
        bool nan = false, gnan = false;
        for (std::int64_t r = 0; r < rows; ++r) {
          const double d = value_at(p.dtype, dy, r * n + j);
          const RowStats& s = stats[static_cast<std::size_t>(r)];
          if (s.poisoned) gnan = true;
          if (std::isnan(d)) nan = gnan = true;
          if (!std::isinf(d)) continue;
          signs |= d > 0 ? 1 : 2;  // dbeta does not read x: a poisoned row still adds its dy
          if (s.poisoned) continue;
          const int xs = (Dyadic::from_double(value_at(p.dtype, x, r * n + j)) * BigInt(n) - s.S).sign();
          if (xs == 0) gnan = true;
          else gsigns |= (d > 0) == (xs > 0) ? 1 : 2;
        }
        const auto ieee = [&](bool is_nan, int sg) { return is_nan || sg == 3 ? kNaN : sg == 1 ? kInf : -kInf; };
        const double b = ieee(nan, signs), g = ieee(gnan, gsigns);
        if (dbeta) set_bits_at(p.param_dtype, dbeta, j, double_to_bits(q.pfmt, b));
        if (dgamma) set_bits_at(p.param_dtype, dgamma, j, double_to_bits(q.pfmt, g));
        if (out) out->dbeta[uj] = {b, 0, kNaN, kInf}, out->dgamma[uj] = {g, 0, kNaN, kInf};
        continue;
      }
      detail::normalize(sum);
      if (dbeta || out) {
        const double guess = to_float<F160>(sum).convert_to<double>();
        const std::uint64_t b = detail::round_exactly(q.pfmt, start_ordinal(q.pfmt, guess),
                                                      [&](const Dyadic& m) { return detail::compare(sum, m); });
        if (dbeta) set_bits_at(p.param_dtype, dbeta, j, b);
        if (out) out->dbeta[uj] = element(to_float<F160>(sum), abs_dy.convert_to<double>());
      }
      // dgamma: NaN where a row of the column has no statistics (non-finite x, W = 0), as dx.
      if (any_poisoned) {
        if (dgamma) set_bits_at(p.param_dtype, dgamma, j, nan_p);
        if (out) out->dgamma[uj] = {kNaN, kNaN, kNaN, kNaN};
        continue;
      }
      Float<192> v = 0, a = 0;
      std::int64_t terms = 0;
      double scale = 0;
      for (const Partial& part : partial) v += part.v[uj], a += part.a[uj], scale += part.scale[uj], terms += part.terms[uj];
      // (6 + R) roundings' worth inside each partial plus `threads` merges: threads ≤ R + 1 covers them.
      const Float<192> err = a * Float<192>(8 + 2 * (terms + threads)) * ldexp(Float<192>(1), 1 - 192);
      std::uint64_t bits = bits_of_ordinal(q.pfmt, 0);  // no nonzero term: exactly +0
      double top = v.convert_to<double>();
      bool done = terms == 0;
      if (const auto c = done ? std::nullopt : certified(q.pfmt, v, err)) bits = *c, done = true;
      done = done || try_dgamma<384>(q, stats, j, bits, top) || try_dgamma<768>(q, stats, j, bits, top) ||
             try_dgamma<1536>(q, stats, j, bits, top) || try_dgamma<3072>(q, stats, j, bits, top) ||
             try_dgamma<6144>(q, stats, j, bits, top);
      if (!done) {
        if (const auto e = dgamma_exact(q, stats, j, top)) {
          bits = *e;
        } else {
          bits = bits_of_ordinal(q.pfmt, round_to_ordinal(q.pfmt, top));
          if (out) {
            const std::lock_guard<std::mutex> hold(undecided_lock);
            ++out->dgamma_undecided;
          }
        }
      }
      if (dgamma) set_bits_at(p.param_dtype, dgamma, j, bits);
      if (out) {
        out->dgamma[uj] = element(v, scale);
        for (std::int64_t r = 0; r < rows; ++r) {
          const double k = out->row_kappa[static_cast<std::size_t>(r)];
          if (value_at(p.dtype, dy, r * n + j) != 0 && k > out->dgamma_kappa[uj]) out->dgamma_kappa[uj] = k;
        }
      }
    }
  });
}

}  // namespace lnorm
