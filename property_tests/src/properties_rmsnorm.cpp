// RMSNorm's own laws (docs/DESIGN.md "Ops"): normalized (mean of y² ≈ ms/(ms + eps)), eps edges (a zero
// row gives 0, or NaN with eps = 0), scale invariance and oddness; and which inputs each of RMSNorm's
// properties draws. The structural properties (shape, row independence, determinism, affine identity,
// permutation, NaN/Inf isolation) and accuracy are the shared checks, judged against RMSNorm's exact answer.
#include <cmath>
#include <random>

#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"
#include "properties.hpp"

namespace lnorm::verify {

namespace {

bool row_is_zero(const Case& c, std::int64_t r) {
  const std::int64_t n = c.spec.cols();
  for (std::int64_t i = r * n; i < (r + 1) * n; ++i)
    if (c.x[static_cast<std::size_t>(i)] != 0) return false;
  return true;
}

// Zero rows: y = beta exactly (sign of zero free) with eps > 0; all NaN and rstd = +Inf with eps = 0.
std::string check_zero_rows(const Case& c, const Outputs& got, const char* what) {
  const Format f = format_of(c.spec.dtype), sf = format_of(stats_dtype(c.spec.dtype));
  const std::int64_t n = c.spec.cols();
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    if (!row_is_zero(c, r)) continue;
    for (std::int64_t i = 0; i < n; ++i) {
      const double yv = bits_to_double(f, got.y[static_cast<std::size_t>(r * n + i)]);
      const double beta = c.beta.empty() ? 0.0 : c.beta[static_cast<std::size_t>(i)];
      if (c.spec.eps == 0) {
        if (!std::isnan(yv)) return fmt("%s: eps = 0, zero row %lld: y[%lld] = %.9g, IEEE says NaN (0/0)", what, (long long)r, (long long)i, yv);
      } else if (yv != beta) {
        return fmt("%s: zero row %lld: y[%lld] = %.9g, must be beta = %.9g exactly (0·rstd + beta)", what, (long long)r, (long long)i, yv, beta);
      }
    }
    if (c.spec.eps == 0 && !std::isinf(bits_to_double(sf, got.rstd[static_cast<std::size_t>(r)])))
      return fmt("%s: eps = 0, zero row %lld: rstd must be +Inf (1/sqrt(0))", what, (long long)r);
  }
  return "";
}

std::string within_budget(const CheckContext& ctx, const Case& c, const char* what) {
  const Outputs got = run_guarded(ctx.kernel, c);
  if (!got.violation.empty()) return std::string(what) + ": " + got.violation;
  if (auto m = check_zero_rows(c, got, what); !m.empty()) return m;
  const Exact exact = exact_answer(c);
  if (auto m = check_y_within_budget(ctx, c, got, exact); !m.empty()) return std::string(what) + ": " + m;
  if (auto m = check_stats_within_budget(ctx, c, got, exact); !m.empty()) return std::string(what) + ": " + m;
  return "";
}

}  // namespace

// 2 (RMSNorm). gamma = 1, beta = 0: mean(y²) ≈ v = ms/(ms + eps), ms = mean(x²). Write ŷ_i = z_i + d_i with
// z_i = x_i·rstd exact, so (1/n)Σz_i² = v exactly and |d_i| ≤ t_i = a·ulp(|z_i|) (the budget in RMSNorm's
// metric, whose scale is |z| here; no kappa term): |mean(ŷ²) − v| = |(2/n)Σz_i d_i + mean(d²)| ≤ 2·sqrt(v)·rms(t) + mean(t²) (Cauchy–Schwarz),
// plus the long double check's own n·2^-63 relative and z's 2^-52 from the reference, as LayerNorm's.
std::string check_normalized_rms(const CheckContext& ctx, const Case& c) {
  const Outputs got = run_guarded(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  const Exact exact = exact_answer(c);
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols();
  const long double check_eps = static_cast<long double>(n) * 0x1p-63L;
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    const RowReference& ref = exact.rows[static_cast<std::size_t>(r)];
    if (ref.nonfinite || std::isnan(exact.elems[static_cast<std::size_t>(r * n)].z)) continue;
    const double allowed = ctx.budget.y.allowed(0);
    long double sq = 0, v = 0, t_sq = 0;
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const double yv = bits_to_double(f, got.y[k]);
      if (!std::isfinite(yv)) return fmt("row %lld: y[%lld] = %g in a finite row", (long long)r, (long long)(i - r * n), yv);
      const double z = exact.elems[k].z;
      const long double t = allowed_distance(f, exact.elems[k], allowed);
      sq += static_cast<long double>(yv) * yv;
      v += static_cast<long double>(z) * z;
      t_sq += t * t;
    }
    const long double nn = static_cast<long double>(n);
    const long double ms_y = sq / nn, v_exact = v / nn;
    const long double tol = 2 * std::sqrt(v_exact) * std::sqrt(t_sq / nn) + t_sq / nn + 4 * 0x1p-52L * v_exact +
                            check_eps * (ms_y + v_exact);
    ctx.worst.note("ms_y_over_tolerance", static_cast<double>(std::abs(ms_y - v_exact) / tol));
    if (std::abs(ms_y - v_exact) > tol) {
      return fmt("row %lld: mean of y^2 = %.9Lg, expected ms/(ms+eps) = %.9Lg, tolerance %.3Lg", (long long)r, ms_y,
                 v_exact, tol);
    }
  }
  return "";
}

// 4 (RMSNorm). eps edges, each derived from the generated case, whose row 0 is replaced by zeros:
//   a) as generated: the zero row gives beta exactly (0·rstd + beta), var ≪ eps rows and the rest within budget;
//   b) eps = 0: the zero row gives NaN and rstd = +Inf (1/sqrt(0)); the other rows within budget;
//   c) the first column alone (width 1), eps as generated and 0: within budget (x/sqrt(x² + eps)·w + β),
//      a zero element NaN with eps = 0.
std::string check_eps_edges_rms(const CheckContext& ctx, const Case& c) {
  Case with_zero = c;
  const std::int64_t n = c.spec.cols();
  for (std::int64_t i = 0; i < n; ++i) with_zero.x[static_cast<std::size_t>(i)] = 0;
  if (auto m = within_budget(ctx, with_zero, "as generated"); !m.empty()) return m;
  Case zero_eps = with_zero;
  zero_eps.spec.eps = 0;
  if (auto m = within_budget(ctx, zero_eps, "eps = 0"); !m.empty()) return m;
  for (const double eps : {c.spec.eps, 0.0}) {
    Case one = c;
    one.spec.eps = eps;
    const std::int64_t rows = c.spec.rows();
    one.spec.shape = {rows, 1};
    one.spec.axis = 1;
    one.x.clear();
    for (std::int64_t r = 0; r < rows; ++r) one.x.push_back(r == 0 ? 0.0 : c.x[static_cast<std::size_t>(r * n)]);
    if (!one.gamma.empty()) one.gamma = {c.gamma[0]};
    if (!one.beta.empty()) one.beta = {c.beta[0]};
    if (auto m = within_budget(ctx, one, eps == 0 ? "width 1, eps = 0" : "width 1"); !m.empty()) return m;
  }
  return "";
}

// 8 (RMSNorm). With eps = 0, RMS(a·x) = RMS(x) exactly in real arithmetic for a > 0. The kernel sees
// x' = fl(a·x): each x'_i moves by δ_i, |δ_i| ≤ u·|x'_i|, which moves z_i = x_i/rms(x) by ≤ u·|z_i| directly
// and by ≤ u·|z_i| through rms(x) (|δrms|/rms ≤ max_i |δ_i/x'_i| ≤ u): together 2 ulps of x's format F at |z|
// (RMSNorm's scale), 2·2^(p_C − p_F) ulps of the compute format the metric counts in (the output's own rounding
// is free there). So
//   |RMS_kernel(x')_i − z_i(x)| ≤ a_budget·ulp(s')/ulp(s) + 2·2^(p_C − p_F) scaled ulps (s' the scaled row's scale).
// a = (1 + U[0, 1))·2^k, k ∈ [−8, 8]: not a power of two, so x' is rounded.
std::string check_scale_invariance(const CheckContext& ctx, const Case& c) {
  const Format f = format_of(c.spec.dtype);
  std::mt19937_64 rng(c.spec.data_seed ^ 0xA5A5A5A55A5A5A5Aull);
  const double a = std::ldexp(1.0 + std::uniform_real_distribution<double>(0, 1)(rng), std::uniform_int_distribution<int>(-8, 8)(rng));
  const std::int64_t n = c.spec.cols();
  const Exact base = exact_answer(c);
  Case scaled = c;
  for (double& v : scaled.x) v = round_to_format(f, a * v);
  const Outputs got = run_guarded(ctx.kernel, scaled);
  if (!got.violation.empty()) return got.violation;
  const Format cf = compute_format(f);
  const Exact moved = exact_answer(scaled);
  const double min_normal = std::ldexp(1.0, f.emin);
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    if (base.rows[static_cast<std::size_t>(r)].nonfinite) continue;
    // A row a·x pushed out of the format's normal range (a constant row near the top or bottom) is not
    // the same row scaled: skipped.
    bool in_range = true;
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      const double v = scaled.x[static_cast<std::size_t>(i)];
      in_range = in_range && std::isfinite(v) && (v == 0 || std::abs(v) >= min_normal) &&
                 (c.x[static_cast<std::size_t>(i)] == 0) == (v == 0);
    }
    if (!in_range) continue;
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const double z = base.elems[k].z, yv = bits_to_double(f, got.y[k]);
      if (std::isnan(z)) continue;  // a zero row with eps = 0
      // The kernel's budget holds at the scaled row's scale s', the error is read at x's s (as LayerNorm's invariance).
      const double s = base.elems[k].scale, s_moved = moved.elems[k].scale;
      const double allowed = ctx.budget.y.allowed(0) * (ulp_at(cf, s_moved) / ulp_at(cf, s)) + 2 * storage_ulp_in_compute_ulps(f);
      const double e = scaled_error_to(f, yv, z, s);
      if (!std::isfinite(e)) return fmt("row %lld: RMS(a·x)[%lld] = %g where RMS(x) = %.9g", (long long)r, (long long)(i - r * n), yv, z);
      ctx.worst.note("scale_invariance_ulp", e);
      if (e > allowed) {
        return fmt("row %lld (a = %.6g): RMS(a·x)[%lld] = %.9g, RMS(x) = %.9g: %.4g scaled ulp > %.4g", (long long)r, a,
                   (long long)(i - r * n), yv, z, e, allowed);
      }
    }
  }
  return "";
}

// 9 (RMSNorm). RMS(−x) = −RMS(x) (beta absent: it breaks the symmetry). A sign-symmetric kernel
// (budgets.toml sign_symmetric: its sums see x², its products round symmetrically) gives exactly the
// negated bits and the same rstd, zeros of either sign aside (a correctly rounded kernel may return +0
// for an exact 0); any other within twice its budget. NaN stays NaN.
std::string check_oddness(const CheckContext& ctx, const Case& c) {
  Case plain = c;
  plain.beta.clear();
  plain.spec.beta = Affine::absent;
  Case negated = plain;
  for (double& v : negated.x) v = -v;
  const Outputs got = run_guarded(ctx.kernel, plain), got_neg = run_guarded(ctx.kernel, negated);
  if (!got.violation.empty()) return got.violation;
  if (!got_neg.violation.empty()) return "negated: " + got_neg.violation;
  const Format f = format_of(c.spec.dtype);
  const std::uint64_t sign = std::uint64_t{1} << (f.bits - 1);
  const Exact exact = exact_answer(plain);
  for (std::size_t k = 0; k < got.y.size(); ++k) {
    const double y0 = bits_to_double(f, got.y[k]), y1 = bits_to_double(f, got_neg.y[k]);
    if (std::isnan(y0) || std::isnan(y1)) {
      if (std::isnan(y0) != std::isnan(y1)) return fmt("y[%zu] = %g but %g for -x", k, y0, y1);
      continue;
    }
    if (ctx.budget.sign_symmetric) {
      if (y0 == 0 && y1 == 0) continue;  // the sign of a zero result is no part of the real answer (as affine_identity)
      if (got_neg.y[k] != (got.y[k] ^ sign))
        return fmt("y[%zu] = %.9g for x but %.9g for -x: not its negation bit for bit (budgets.toml: sign_symmetric)", k, y0, y1);
      continue;
    }
    // Exactly odd, infinities included (y0 + y1 would be Inf − Inf = NaN: torch's x·rsqrt(mean(x²)) gives ±Inf on
    // subnormal constant rows with eps = 0, the same both ways; accuracy judges the Inf, not this law).
    // Both within budget of ±y*: |y0 + y1| at most twice the distance one may be (storage rounding included).
    const double unit = ulp_at(compute_format(f), exact.elems[k].scale);
    const double e = y0 == -y1 ? 0.0 : std::abs(y0 + y1) / unit;
    const double allowed = 2 * allowed_distance(f, exact.elems[k], ctx.budget.y.allowed(0)) / unit;
    ctx.worst.note("oddness_ulp", e);
    if (!(e <= allowed)) return fmt("y[%zu] = %.9g for x but %.9g for -x: %.4g scaled ulp from odd > %.4g", k, y0, y1, e, allowed);
  }
  if (ctx.budget.sign_symmetric && got.rstd != got_neg.rstd) return "rstd differs between x and -x (sign_symmetric)";
  return "";
}

}  // namespace lnorm::verify
