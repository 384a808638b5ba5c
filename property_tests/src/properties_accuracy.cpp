// Properties 1–4: shape and guards, normalized output, accuracy against the exact reference, eps
// edge cases; and the budget checks the other properties share.
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"
#include "properties.hpp"

namespace lnorm::verify {

namespace {

RowClass class_of(const Case& c, std::int64_t row) {
  return c.spec.row_classes[static_cast<std::size_t>(row) % c.spec.row_classes.size()];
}

}  // namespace

bool row_has_nonfinite(const Case& c, std::int64_t row) {
  const std::int64_t n = c.spec.cols();
  for (std::int64_t i = row * n; i < (row + 1) * n; ++i) {
    if (!std::isfinite(c.x[static_cast<std::size_t>(i)])) return true;
  }
  return false;
}

namespace {

// check_y_within_budget's tallies, kept per call and written to ctx.worst once when the call ends (also on
// an early return): one map update per element and class string cost a third of verify's time
// (perf on `lnorm verify --op add_layernorm --kernel avx2 --dtype f16 --property eps_edges`).
struct YTally {
  const CheckContext& ctx;
  const char* measure;
  double elements = 0, rounded = 0, worst = 0, used = 0;
  bool any = false;
  std::array<double, kRowClassCount> class_worst{}, class_misrounded{};
  std::array<bool, kRowClassCount> class_seen{};
  static void keep_max(double& slot, double v) {
    if (v > slot || v != v) slot = v;  // NaN sticks, as Worst::note's does
  }
  void element(RowClass k, double e, double budget_used, bool cr) {
    const auto i = static_cast<std::size_t>(k);
    if (!any || !class_seen[i]) {
      if (!any) worst = e, used = budget_used;
      if (!class_seen[i]) class_worst[i] = e;
      any = class_seen[i] = true;
    }
    elements += 1;
    rounded += cr ? 1 : 0;
    class_misrounded[i] += cr ? 0 : 1;
    keep_max(worst, e);
    keep_max(class_worst[i], e);
    keep_max(used, budget_used);
  }
  ~YTally() {
    if (!any) return;
    const std::string m(measure);
    ctx.worst.add(m + ".elements", elements);
    ctx.worst.add(m + ".correctly_rounded", rounded);
    ctx.worst.note(m, worst);
    ctx.worst.note("y_budget_used", used);
    for (int k = 0; k < kRowClassCount; ++k) {
      if (!class_seen[static_cast<std::size_t>(k)]) continue;
      const std::string cls(name(static_cast<RowClass>(k)));
      if (class_misrounded[static_cast<std::size_t>(k)] > 0) {
        ctx.worst.add(m + ".not_correctly_rounded." + cls, class_misrounded[static_cast<std::size_t>(k)]);
      }
      ctx.worst.note(m + "." + cls, class_worst[static_cast<std::size_t>(k)]);
    }
  }
};

}  // namespace

std::string check_y_within_budget(const CheckContext& ctx, const Case& c, const Outputs& got, const Exact& exact,
                                  const char* measure) {
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols();
  YTally tally{ctx, measure};
  // The bias gate alone (lnorm/metrics.hpp): the case's distinct rows are its independent units.
  ErrorSummary bias;
  std::int64_t row_signed = 0;
  const auto end_row = [&](std::int64_t r) {
    if (bias.signed_elements == row_signed) return;
    row_signed = bias.signed_elements;
    const auto at = static_cast<std::size_t>(r * n), len = static_cast<std::size_t>(n) * sizeof(double);
    UnitKey key;
    key.bytes(c.x.data() + at, len);
    if (!c.residual.empty()) key.bytes(c.residual.data() + at, len);
    bias.add_unit(key.value());
  };
  for (std::size_t i = 0; i < got.y.size(); ++i) {
    const auto r = static_cast<std::int64_t>(i) / n;
    if (i > 0 && static_cast<std::int64_t>(i) % n == 0) end_row(r - 1);
    const double kappa = exact.rows[static_cast<std::size_t>(r)].kappa;
    const double value = bits_to_double(f, got.y[i]);
    const double signed_e = signed_scaled_error(f, value, got.y[i], exact.elems[i]);
    const double e = std::isnan(signed_e) ? scaled_ulp_error(f, value, got.y[i], exact.y[i], exact.elems[i]) : std::fabs(signed_e);
    if (std::isinf(e)) {
      return fmt("y[row %lld, col %lld] = %.9g where the exact answer is %.9g (non-finite mismatch)", (long long)r,
                 (long long)(static_cast<std::int64_t>(i) % n), value, bits_to_double(f, exact.y[i]));
    }
    const double allowed = allowed_ulps(f, ctx.budget.y, exact.elems[i], kappa);
    if (!std::isnan(signed_e)) bias.add_signed(signed_e, ctx.budget.y.a, allowed - ctx.budget.y.a);
    const bool cr = correctly_rounded(f, got.y[i], exact.y[i]);
    tally.element(class_of(c, r), e, e / allowed, cr);
    // A kernel whose budget demands every output correctly rounded fails on the first that is not, with
    // its case (shrunk), rather than only by the fraction at the end of the run.
    if (!cr && ctx.budget.min_correctly_rounded >= 1) {
      return fmt("y[row %lld, col %lld] = %.9g, exact %.9g rounds to %.9g: not correctly rounded (%s demands every output correctly rounded)",
                 (long long)r, (long long)(static_cast<std::int64_t>(i) % n), value, exact.elems[i].y_hi + exact.elems[i].y_lo,
                 bits_to_double(f, exact.y[i]), ctx.budget.section.c_str());
    }
    if (e > allowed) {
      return fmt("y[row %lld, col %lld] = %.9g, exact %.9g: %.6g scaled ulp > allowed %.6g (a %g + b %g x kappa %.4g)",
                 (long long)r, (long long)(static_cast<std::int64_t>(i) % n), value, exact.elems[i].y_hi + exact.elems[i].y_lo,
                 e, allowed, ctx.budget.y.a, ctx.budget.y.b, kappa);
    }
  }
  if (!got.y.empty()) end_row(static_cast<std::int64_t>(got.y.size() - 1) / n);
  ctx.worst.note("y_bias", std::fabs(bias.mean_signed_error()) / bias.bias_bound());
  if (!bias.bias_within())
    return fmt("y's mean signed error %+.4g scaled ulp over %lld elements in %lld distinct rows is past its bound %.4g "
               "(0.5 + 3 x mean allowance %.4g / sqrt(rows) + kappa part %.4g): a systematic error, every element pushed "
               "the same way", bias.mean_signed_error(), (long long)bias.signed_elements, (long long)bias.units(),
               bias.bias_bound(), bias.mean_allowed() - bias.mean_kappa_allowed(), bias.mean_kappa_allowed());
  return "";
}

// mean (LayerNorm's; RMSNorm has none: got.mean is empty) and rstd against their budgets.
std::string check_stats_within_budget(const CheckContext& ctx, const Case& c, const Outputs& got, const Exact& exact) {
  const Format sf = format_of(stats_dtype(c.spec.dtype));
  const bool has_mean = !got.mean.empty();
  for (std::size_t r = 0; r < exact.rows.size(); ++r) {
    const RowReference& ref = exact.rows[r];
    const double mean = has_mean ? bits_to_double(sf, got.mean[r]) : 0.0, rstd = bits_to_double(sf, got.rstd[r]);
    const auto row = static_cast<long long>(r);
    if (ref.nonfinite) {
      if ((has_mean && !std::isnan(mean)) || !std::isnan(rstd)) {
        if (!has_mean) return fmt("row %lld holds NaN/Inf but rstd = %.9g (must be NaN)", row, rstd);
        return fmt("row %lld holds NaN/Inf but mean = %.9g, rstd = %.9g (both must be NaN)", row, mean, rstd);
      }
      continue;
    }
    // The metric check, report and Python share (lnorm/metrics.hpp): +Inf for a non-finite mismatch.
    const double e_rstd = stat_error(Stat::rstd, sf, rstd, ref);
    if (has_mean) {
      const double e_mean = stat_error(Stat::mean, sf, mean, ref);
      if (std::isinf(e_mean)) return fmt("mean of row %lld is %.9g, exact %.9g (non-finite mismatch)", row, mean, ref.mean);
      ctx.worst.note("mean_ulp", e_mean);
      ctx.worst.note("mean_ulp." + std::string(name(class_of(c, static_cast<std::int64_t>(r)))), e_mean);
      if (ctx.budget.exact_mean && class_of(c, static_cast<std::int64_t>(r)) == RowClass::exact_stats &&
          mean != ref.mean) {
        return fmt("mean of exact-statistics row %lld is %.17g, exact %.17g (must be bit-exact)", row, mean, ref.mean);
      }
      if (e_mean > ctx.budget.mean_ulp) {
        return fmt("mean of row %lld = %.9g, exact %.9g: %.4g ulp of max(|mean|, sqrt(var+eps)) > allowed %g", row, mean,
                   ref.mean, e_mean, ctx.budget.mean_ulp);
      }
    }
    if (std::isinf(e_rstd)) return fmt("rstd of row %lld is %.9g, exact %.9g (non-finite mismatch)", row, rstd, ref.rstd);
    ctx.worst.note("rstd_ulp", e_rstd);
    if (e_rstd > ctx.budget.rstd_ulp) {
      return fmt("rstd of row %lld = %.9g, exact %.9g: %.4g ulp > allowed %g", row, rstd, ref.rstd, e_rstd,
                 ctx.budget.rstd_ulp);
    }
  }
  return "";
}

// 1. The kernel fills every element of y (rows x cols, the N-d x flattened at `axis`) and of mean and
// rstd (one per row, ONNX's x.shape[:axis] + 1s), writes nothing around them, and leaves x, gamma and
// beta alone. Kernels see only rows x cols, so the shapes themselves are the CLI's job (test_cli
// checks them for N-d inputs and every axis); here the N-d shape and axis only choose rows and cols.
std::string check_shape(const CheckContext& ctx, const Case& c) {
  const Outputs got = run_guarded(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  std::int64_t elements = 1;
  for (std::int64_t d : c.spec.shape) elements *= d;
  const bool mean_ok = c.spec.op.norm == Norm::layernorm ? static_cast<std::int64_t>(got.mean.size()) == c.spec.rows() : got.mean.empty();
  if (static_cast<std::int64_t>(got.y.size()) != elements || !mean_ok ||
      static_cast<std::int64_t>(got.rstd.size()) != c.spec.rows()) {
    return "output sizes do not match x's shape";
  }
  return "";
}

// 2. gamma = 1, beta = 0: each row of y has mean ≈ 0 and variance ≈ var/(var + eps).
// Derivation of the tolerance. Write ŷ_i = z_i + d_i with z_i = (x_i − mean)·rstd exact; the
// kernel's budget bounds |d_i| ≤ t_i = allowed_distance (lnorm/metrics.hpp: (a + b·kappa) ulps of the compute
// format at s = max(rho_floor, |z|) without affine, plus the one rounding to a 16-bit format). Σz_i = 0 and (1/n)Σz_i² = var/(var + eps) =: v exactly, so
//   |mean(ŷ)| = |mean(d)| ≤ mean(t)
//   |var(ŷ) − v| = |(2/n)Σz_i d_i + mean(d²) − mean(ŷ)²| ≤ 2·sqrt(v)·rms(t) + 2·mean(t²)   (Cauchy–Schwarz)
// The check itself runs in long double (64-bit significand) over n ≤ 2^17 terms: its own error is
// below n·2^-63·Σ|term|, added to both bounds; z comes from the reference to 2^-52 relative (4·2^-52·v).
std::string check_normalized(const CheckContext& ctx, const Case& c) {
  const Outputs got = run_guarded(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  const Exact exact = exact_answer(c);
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols();
  const long double check_eps = static_cast<long double>(n) * 0x1p-63L;
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    const RowReference& ref = exact.rows[static_cast<std::size_t>(r)];
    // No normalized row to speak of: NaN/Inf rows, and var + eps == 0 (exact y is NaN). Not "rstd
    // rounds to Inf": a subnormal row with eps = 0 has an rstd beyond f32 and a finite y.
    if (ref.nonfinite || std::isnan(exact.elems[static_cast<std::size_t>(r * n)].z)) continue;
    long double sum = 0, sum_abs = 0, v = 0, t_sum = 0, t_sq = 0;
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const double yv = bits_to_double(f, got.y[k]);
      if (!std::isfinite(yv)) return fmt("row %lld: y[%lld] = %g in a finite row", (long long)r, (long long)(i - r * n), yv);
      const double z = exact.elems[k].z;
      const long double t = allowed_distance(f, exact.elems[k], allowed_ulps(f, ctx.budget.y, exact.elems[k], ref.kappa));
      sum += yv;
      sum_abs += std::abs(yv);
      v += static_cast<long double>(z) * z;
      t_sum += t;
      t_sq += t * t;
    }
    const long double nn = static_cast<long double>(n);
    const long double mean_y = sum / nn, v_exact = v / nn;
    long double var_y = 0, var_abs = 0;
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      const long double d = bits_to_double(f, got.y[static_cast<std::size_t>(i)]) - mean_y;
      var_y += d * d;
      var_abs += d * d;
    }
    var_y /= nn;
    const long double mean_tol = t_sum / nn + check_eps * sum_abs / nn;
    const long double rms_t = std::sqrt(t_sq / nn);
    const long double var_tol = 2 * std::sqrt(v_exact) * rms_t + 2 * t_sq / nn + 4 * 0x1p-52L * v_exact +
                                check_eps * (var_abs / nn + v_exact);
    ctx.worst.note("mean_y_over_tolerance", static_cast<double>(std::abs(mean_y) / mean_tol));
    ctx.worst.note("var_y_over_tolerance", static_cast<double>(std::abs(var_y - v_exact) / var_tol));
    if (std::abs(mean_y) > mean_tol) {
      return fmt("row %lld: mean of y = %.6Lg, tolerance %.3Lg", (long long)r, mean_y, mean_tol);
    }
    if (std::abs(var_y - v_exact) > var_tol) {
      return fmt("row %lld: variance of y = %.9Lg, expected var/(var+eps) = %.9Lg, tolerance %.3Lg", (long long)r,
                 var_y, v_exact, var_tol);
    }
  }
  return "";
}

// 3. Every element within a + b·kappa scaled ulps; mean and rstd within their budgets.
std::string check_accuracy(const CheckContext& ctx, const Case& c) {
  const Outputs got = run_guarded(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  const Exact exact = exact_answer(c);
  std::string msg = check_y_within_budget(ctx, c, got, exact);
  if (msg.empty()) msg = check_stats_within_budget(ctx, c, got, exact);
  return msg;
}

namespace {

double beta_at(const Case& c, std::int64_t col) { return c.beta.empty() ? 0.0 : c.beta[static_cast<std::size_t>(col)]; }

// Rows that must come out as beta exactly (eps > 0) or all NaN (eps = 0): constant rows.
std::string check_constant_rows(const CheckContext& ctx, const Case& c, const Outputs& got, const char* what) {
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols();
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    bool constant = true;
    for (std::int64_t i = 1; i < n && constant; ++i) constant = c.x[static_cast<std::size_t>(r * n + i)] == c.x[static_cast<std::size_t>(r * n)];
    if (!constant || row_has_nonfinite(c, r)) continue;
    for (std::int64_t i = 0; i < n; ++i) {
      const double yv = bits_to_double(f, got.y[static_cast<std::size_t>(r * n + i)]);
      if (c.spec.eps == 0) {
        if (!std::isnan(yv)) return fmt("%s: eps = 0, constant row %lld: y[%lld] = %.9g, IEEE says NaN (0/0)", what, (long long)r, (long long)i, yv);
      } else if (yv != beta_at(c, i)) {
        ctx.worst.note("constant_row_mismatches", 1);
        return fmt("%s: constant row %lld: y[%lld] = %.9g, must be beta = %.9g exactly", what, (long long)r, (long long)i, yv, beta_at(c, i));
      }
    }
    if (c.spec.eps == 0 && !std::isinf(bits_to_double(format_of(stats_dtype(c.spec.dtype)), got.rstd[static_cast<std::size_t>(r)]))) {
      return fmt("%s: eps = 0, constant row %lld: rstd must be +Inf (1/sqrt(0))", what, (long long)r);
    }
  }
  return "";
}

}  // namespace

// 4. eps edge cases, each derived from the generated case:
//   a) as generated: constant rows give beta exactly, var ≪ eps rows are within budget of
//      (x − mean)/sqrt(var + eps) (the reference), mixed rows within budget;
//   b) the same rows with eps = 0: constant rows give NaN (and rstd = +Inf), no other row NaN;
//   c) the first column alone (width 1): y = beta exactly for eps > 0, NaN for eps = 0.
std::string check_eps_edges(const CheckContext& ctx, const Case& c) {
  {
    const Outputs got = run_guarded(ctx.kernel, c);
    if (!got.violation.empty()) return got.violation;
    if (auto m = check_constant_rows(ctx, c, got, "as generated"); !m.empty()) return m;
    const Exact exact = exact_answer(c);
    if (auto m = check_y_within_budget(ctx, c, got, exact); !m.empty()) return "as generated: " + m;
    if (auto m = check_stats_within_budget(ctx, c, got, exact); !m.empty()) return "as generated: " + m;
  }
  {
    Case zero = c;
    zero.spec.eps = 0;
    const Outputs got = run_guarded(ctx.kernel, zero);
    if (!got.violation.empty()) return "eps = 0: " + got.violation;
    if (auto m = check_constant_rows(ctx, zero, got, "eps = 0"); !m.empty()) return m;
    const Exact exact = exact_answer(zero);
    if (auto m = check_y_within_budget(ctx, zero, got, exact); !m.empty()) return "eps = 0: " + m;
    if (auto m = check_stats_within_budget(ctx, zero, got, exact); !m.empty()) return "eps = 0: " + m;
  }
  for (const double eps : {c.spec.eps, 0.0}) {  // width 1: beta with eps > 0, NaN with eps = 0
    Case one = c;
    one.spec.eps = eps;
    const std::int64_t n = c.spec.cols(), rows = c.spec.rows();
    one.spec.shape = {rows, 1};
    one.spec.axis = 1;
    one.x.clear();
    for (std::int64_t r = 0; r < rows; ++r) one.x.push_back(c.x[static_cast<std::size_t>(r * n)]);
    if (!one.gamma.empty()) one.gamma = {c.gamma[0]};
    if (!one.beta.empty()) one.beta = {c.beta[0]};
    const Outputs got = run_guarded(ctx.kernel, one);
    if (!got.violation.empty()) return "width 1: " + got.violation;
    if (auto m = check_constant_rows(ctx, one, got, "width 1"); !m.empty()) return m;
  }
  return "";
}

}  // namespace lnorm::verify
