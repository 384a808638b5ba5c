// The scalar backward kernels of naive and welford (layernorm_bwd, rmsnorm_bwd). With w = C + γ, g = dy·w,
// xhat = (x − mean)·rstd (RMSNorm: x·rstd), means over the row:
//   dx = rstd·(g − mean(g) − xhat·mean(g·xhat))   (RMSNorm: without mean(g))
//   dgamma_j = Σ_rows dy·xhat,  dbeta_j = Σ_rows dy
//
// naive_backward, the textbook (what framework CPU kernels do): the forward's saved mean and rstd as
// given (f32, f64 for f64 data), every sum sequential in f32 (f64), dgamma and dbeta one running sum per
// column down the rows, in row order on one thread (so the bits cannot depend on the thread count). Its
// weaknesses are the forward's: the saved mean is rounded to f32, so xhat loses ~kappa ulps on offset rows,
// and the sums err like n·u.
//
// careful_backward (welford's): ignores the saved statistics and recomputes them in double (long double
// for f64 data) on values shifted by the row's first element (exact in double for f32-family data, the
// shift of welford's forward), evaluates dx in that type and rounds it once; dgamma and dbeta accumulate
// in the same type over fixed blocks of rows (backward_blocks.hpp: the same bits at every thread count).
// For f32-family data every rounding before the last is ~2^-29 of an output ulp: dx and dgamma are
// correctly rounded but for ties closer than that.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backward.hpp"
#include "backward_blocks.hpp"
#include "isa.hpp"
#include "lnorm/half.hpp"
#include "lnorm/params.hpp"

namespace lnorm::cpu {
namespace {

template <class T>
using TextbookAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;
template <class T>
using CarefulAcc = std::conditional_t<std::is_same_v<T, double>, long double, double>;

template <class A>
A saved_stat(const Problem& p, const void* s, std::int64_t r) {
  return stats_dtype(p.dtype) == DType::f64 ? static_cast<A>(static_cast<const double*>(s)[r])
                                            : static_cast<A>(static_cast<const float*>(s)[r]);
}

template <class T>
void textbook(const Problem& p, const Tensors& t) {
  using A = TextbookAcc<T>;
  const T* x = static_cast<const T*>(t.x);
  const T* dy = static_cast<const T*>(t.dy);
  T* dx = static_cast<T*>(t.dx);
  const std::int64_t n = p.cols;
  const bool is_centred = p.op.norm == Norm::layernorm;
  // w = C + γ in A, as the forward reads it (params.hpp); null without gamma (weight 1).
  const StagedParams<A> staged = stage_params<A>(p, t);
  const A* w = staged.gamma();
  const bool want_g = p.has_gamma && t.dgamma, want_b = p.has_beta && t.dbeta;
  std::vector<A> dg(want_g ? static_cast<std::size_t>(n) : 0, A(0)), db(want_b ? static_cast<std::size_t>(n) : 0, A(0));
  for (std::int64_t r = 0; r < p.rows; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    A mean = 0, rstd;
    if (t.saved_rstd) {
      if (is_centred) mean = saved_stat<A>(p, t.saved_mean, r);
      rstd = saved_stat<A>(p, t.saved_rstd, r);
    } else {  // no saved statistics: the forward's two-pass
      A s = 0, q = 0;
      if (is_centred) {
        for (std::int64_t i = 0; i < n; ++i) s += static_cast<A>(to_float(xr[i]));
        mean = s / static_cast<A>(n);
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const A d = static_cast<A>(to_float(xr[i])) - mean;
        q += d * d;
      }
      // As the forward's: a NaN or Inf in the row poisons it whole (q would be +Inf and rstd 0 for RMSNorm).
      rstd = !std::isfinite(q) || !std::isfinite(mean) ? std::numeric_limits<A>::quiet_NaN()
                                                        : A(1) / std::sqrt(q / static_cast<A>(n) + static_cast<A>(p.eps));
    }
    A sum_g = 0, sum_gx = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const A xhat = (static_cast<A>(to_float(xr[i])) - mean) * rstd;
      const A g = static_cast<A>(to_float(dyr[i])) * (w ? w[i] : A(1));
      sum_g += g;
      sum_gx += g * xhat;
    }
    const A mean_g = is_centred ? sum_g / static_cast<A>(n) : A(0), mean_gx = sum_gx / static_cast<A>(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const A d = static_cast<A>(to_float(dyr[i]));
      const A xhat = (static_cast<A>(to_float(xr[i])) - mean) * rstd;
      const A v = rstd * (d * (w ? w[i] : A(1)) - mean_g - xhat * mean_gx);
      if constexpr (std::is_same_v<T, double>) dx[r * n + i] = v;
      else dx[r * n + i] = from_float<T>(v);
      if (want_g) dg[static_cast<std::size_t>(i)] += d * xhat;
      if (want_b) db[static_cast<std::size_t>(i)] += d;
    }
  }
  for (std::int64_t j = 0; j < n; ++j) {
    if (want_g) store_param(p.param_dtype, t.dgamma, j, dg[static_cast<std::size_t>(j)]);
    if (want_b) store_param(p.param_dtype, t.dbeta, j, db[static_cast<std::size_t>(j)]);
  }
}

template <class T>
T narrow(CarefulAcc<T> v) {
  if constexpr (std::is_same_v<T, double>) return static_cast<double>(v);
  else return from_double<T>(static_cast<double>(v));
}

// One row of careful_backward: dx of the row, its dy·xhat and dy added to dg and db (null: not wanted).
template <class T, class A>
void careful_row(const Problem& p, const T* xr, const T* dyr, const A* w, T* dxr, A* dg, A* db, std::vector<A>& d) {
  const std::int64_t n = p.cols;
  const bool is_centred = p.op.norm == Norm::layernorm;
  d.resize(static_cast<std::size_t>(n));
  // d_i = x_i − mean (RMSNorm: x_i) from the shifted two-pass: x_i − x_0 is exact in A unless their
  // exponents are more than 29 apart (then within 2^-53 of the larger).
  const A shift = is_centred ? static_cast<A>(to_float(xr[0])) : A(0);
  A s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<A>(to_float(xr[i])) - shift;
  const A m = is_centred ? s / static_cast<A>(n) : A(0);
  A q = 0, d2max = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    d[static_cast<std::size_t>(i)] = (static_cast<A>(to_float(xr[i])) - shift) - m;
    q += d[static_cast<std::size_t>(i)] * d[static_cast<std::size_t>(i)];
    d2max = std::max(d2max, d[static_cast<std::size_t>(i)] * d[static_cast<std::size_t>(i)]);
  }
  // A NaN or Inf in x leaves s or q non-finite (A's range holds every finite row's sums): the row has no
  // statistics and poisons dx and every dgamma column (DESIGN "Backward"), where IEEE alone would give
  // RMSNorm rstd = 0 and xhat = 0 beside the Inf.
  const bool poisoned = !std::isfinite(q) || !std::isfinite(s);
  const A rstd = poisoned ? std::numeric_limits<A>::quiet_NaN() : A(1) / std::sqrt(q / static_cast<A>(n) + static_cast<A>(p.eps));
  A sum_g = 0, sum_gx = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const A g = static_cast<A>(to_float(dyr[i])) * (w ? w[i] : A(1));
    sum_g += g;
    sum_gx += g * d[static_cast<std::size_t>(i)];
  }
  // mean(g·xhat) = rstd·Σ g·d / n: one multiplication by rstd instead of n.
  const A mean_g = is_centred ? sum_g / static_cast<A>(n) : A(0), mean_gx = rstd * sum_gx / static_cast<A>(n);
  // Rows whose output does not move with x, with eps = 0: a width-1 RMSNorm row (y = sign(x)) and a width-2
  // LayerNorm row (y = ±1): xhat = ±1 and dx = 0 exactly. As computed below, xhat = d·(1/|d|) is ±(1 ± u) and dx is
  // rstd·g·u, not 0; rstd is huge on subnormal rows, and with a large dy that overflowed to ±Inf (verify, dy at its
  // range's edge: RMSNorm dx_orthogonal at seed 1, the CUDA emulation's LayerNorm at seed 5).
  const bool sign_row = p.eps == 0 && !poisoned && q > 0 && n == (is_centred ? 2 : 1);
  // A dominant element k (d_k² > 3/4·q: at most one, even with q's rounding) gets its dx from the sums over the
  // other elements, Q = Σ_{j≠k} d_j² and T = Σ_{j≠k} (g_j − mean(g))·d_j, as
  //   dx_k = rstd·((g_k − mean(g))·(Q + n·eps) − d_k·T) / (q + n·eps)
  // (the formula below with rstd² = n/(q + n·eps), where g_k·d_k² − d_k·g_k·d_k cancels exactly, Σ d_j = 0 for
  // LayerNorm). Below, q and Σg·d hold d_k's terms, which swamp the others' when they are 2^-53 of them: dx_k
  // is then the rounding residue, ~u·rstd·|g_k|, where the exact one is far smaller. Within the metric's scale
  // either way, but on a row of subnormals beside one normal value with a large dy, rstd·|g_k|·u overflowed
  // bf16 to +Inf where dx is -1.67e37 (verify --dir bwd, welford RMSNorm bf16 params, seed 2). The error of
  // this form is bounded by the same scale (Q + n·eps ≤ q + n·eps; T errs by ~n·u·Σ|g_j − mean(g)|·|d_j|).
  const A dominant_q = A(0.75) * q, denom = q + static_cast<A>(n) * static_cast<A>(p.eps);
  bool has_dominant = false;
  A q_rest = 0, t_rest = 0;
  if (!poisoned && !sign_row && q > 0 && d2max > dominant_q) {  // one more pass, on such rows only
    for (std::int64_t i = 0; i < n; ++i) {
      const A di = d[static_cast<std::size_t>(i)];
      if (di * di > dominant_q) {
        has_dominant = true;
        continue;
      }
      q_rest += di * di;
      t_rest += (static_cast<A>(to_float(dyr[i])) * (w ? w[i] : A(1)) - mean_g) * di;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const A dyi = static_cast<A>(to_float(dyr[i]));
    if (sign_row) {  // dx = Σg − Σg: 0, or NaN where a dy (or gamma) of the row is NaN or Inf, as its gradient is then
      const A xhat = d[static_cast<std::size_t>(i)] > 0 ? A(1) : A(-1);
      dxr[i] = narrow<T>(sum_g - sum_g);
      if (dg) dg[i] += dyi * xhat;
      if (db) db[i] += dyi;
      continue;
    }
    const A di = d[static_cast<std::size_t>(i)], xhat = di * rstd, g = dyi * (w ? w[i] : A(1));
    if (has_dominant && di * di > dominant_q)
      dxr[i] = narrow<T>(rstd * ((g - mean_g) * (q_rest + static_cast<A>(n) * static_cast<A>(p.eps)) - di * t_rest) / denom);
    else
      dxr[i] = narrow<T>(rstd * (g - mean_g - xhat * mean_gx));
    if (dg) dg[i] += dyi * xhat;
    if (db) db[i] += dyi;
  }
}

template <class T>
void careful(const Problem& p, const Tensors& t) {
  using A = CarefulAcc<T>;
  const T* x = static_cast<const T*>(t.x);
  const T* dy = static_cast<const T*>(t.dy);
  T* dx = static_cast<T*>(t.dx);
  const std::int64_t n = p.cols;
  const StagedParams<A> staged = stage_params<A>(p, t);
  backward_blocks<A>(p, t, [&](std::int64_t r0, std::int64_t r1, A* dg, A* db) {
    std::vector<A> d;
    for (std::int64_t r = r0; r < r1; ++r) careful_row<T, A>(p, x + r * n, dy + r * n, staged.gamma(), dx + r * n, dg, db, d);
  });
}

template <template <class> class Fn>
void dispatch(const Problem& p, const Tensors& t) {
  switch (p.dtype) {
    case DType::f32: return Fn<float>{}(p, t);
    case DType::f64: return Fn<double>{}(p, t);
    case DType::f16: return Fn<f16>{}(p, t);
    case DType::bf16: return Fn<bf16>{}(p, t);
  }
}
template <class T>
struct Textbook {
  void operator()(const Problem& p, const Tensors& t) const { textbook<T>(p, t); }
};
template <class T>
struct Careful {
  void operator()(const Problem& p, const Tensors& t) const { careful<T>(p, t); }
};

template <class T>
void careful_simd_row(const BackwardRows& a, std::int64_t r, double* dg, double* db) {
  const Problem& p = *static_cast<const Problem*>(a.problem);
  thread_local std::vector<double> d, w;
  if (a.w) w.assign(a.w, a.w + a.cols);  // the f32 weights the fast rows use, widened (exact)
  const std::int64_t at = r * a.cols;
  careful_row<T, double>(p, static_cast<const T*>(a.x) + at, static_cast<const T*>(a.dy) + at, a.w ? w.data() : nullptr,
                         static_cast<T*>(a.dx) + at, dg, db, d);
}

}  // namespace

void naive_backward(const Problem& p, const Tensors& t) { dispatch<Textbook>(p, t); }

void careful_backward_row(const BackwardRows& a, std::int64_t r, double* dg, double* db) {
  switch (a.dtype) {
    case DType::f16: return careful_simd_row<f16>(a, r, dg, db);
    case DType::bf16: return careful_simd_row<bf16>(a, r, dg, db);
    default: return careful_simd_row<float>(a, r, dg, db);
  }
}

void careful_backward(const Problem& p, const Tensors& t) { dispatch<Careful>(p, t); }

}  // namespace lnorm::cpu
