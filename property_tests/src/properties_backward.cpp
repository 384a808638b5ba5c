// The backward ops' properties (layernorm_bwd, rmsnorm_bwd; docs/DESIGN.md "Backward"): the harness that
// runs a backward kernel inside guard bytes, the exact gradients (lnorm/backward.hpp), the budget check of
// dx, dgamma and dbeta, and backward's own laws. The kernel gets x, gamma, dy and the forward's saved
// statistics (the exact mean and rstd rounded once to the stats format, as a framework saves them); it may
// use them or recompute its own.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>

#include "lnorm/backward.hpp"
#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"
#include "properties.hpp"

namespace lnorm::verify {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The harness of the backward (lnorm/harness.hpp): the kernel's gradients and the exact ones.
using Gradients = BackwardOutputs;
using ExactGradients = ExactBackward;
using Saved = SavedStats;
Gradients run_backward(const KernelInfo& k, const Case& c, int threads = 1) { return run_guarded_backward(k, c, threads); }
ExactGradients exact_gradients(const Case& c) { return exact_backward(c); }

RowClass class_of(const Case& c, std::int64_t row) {
  return c.spec.row_classes[static_cast<std::size_t>(row) % c.spec.row_classes.size()];
}

// One gradient against its budget: the worst error is noted as `<what>_ulp` (and for dx per row class),
// the first element over budget (or a non-finite mismatch) is the message.
std::string gradient_within(const CheckContext& ctx, const Case& c, const char* what, const Format& f,
                            const std::vector<std::uint64_t>& got, const std::vector<std::uint64_t>& exact,
                            const std::vector<ElementReference>& elems, Budget budget, const std::vector<double>* kappa,
                            std::int64_t kappa_stride) {
  const std::string m = std::string(what) + "_ulp";
  double worst = 0, rounded = 0;
  std::array<double, kRowClassCount> class_worst{};
  std::array<bool, kRowClassCount> seen{};
  const bool is_dx = std::string(what) == "dx";
  std::string failure;
  // The bias gate (lnorm/metrics.hpp): dx's rows, or the parameter gradient's columns, are its independent units,
  // one per distinct input (x's and dy's row; dy's column, and x's for dgamma), as check's measure_gradient.
  ErrorSummary bias;
  const auto cols = static_cast<std::size_t>(c.spec.cols());
  const auto unit_key = [&](std::size_t i) {
    UnitKey key;
    if (is_dx) {
      const std::size_t at = i / cols * cols;
      key.bytes(c.x.data() + at, cols * sizeof(double)).bytes(c.dy.data() + at, cols * sizeof(double));
    } else {
      for (std::size_t k = i; k < c.dy.size(); k += cols) {
        key.bytes(&c.dy[k], sizeof(double));
        if (std::string(what) == "dgamma") key.bytes(&c.x[k], sizeof(double));
      }
    }
    return key.value();
  };
  std::size_t last_unit = static_cast<std::size_t>(-1);
  std::size_t i = 0;
  for (; i < got.size(); ++i) {
    const double v = bits_to_double(f, got[i]);
    const double signed_e = signed_scaled_error(f, v, got[i], elems[i]);
    const double e = std::isnan(signed_e) ? scaled_ulp_error(f, v, got[i], exact[i], elems[i]) : std::fabs(signed_e);
    const double k = kappa ? (*kappa)[i / static_cast<std::size_t>(kappa_stride)] : 0.0;
    const double allowed = allowed_ulps(f, budget, elems[i], k);
    if (!std::isnan(signed_e)) {
      bias.add_signed(signed_e, budget.a, allowed - budget.a);
      const std::size_t unit = is_dx ? i / cols : i;  // once per unit that added a signed error
      if (unit != last_unit) bias.add_unit(unit_key(i)), last_unit = unit;
    }
    const char* idx = is_dx ? "dx[row %lld, col %lld]" : "%s[%lld]";
    char where[96];
    if (is_dx) std::snprintf(where, sizeof where, idx, (long long)(i / static_cast<std::size_t>(kappa_stride)), (long long)(i % static_cast<std::size_t>(kappa_stride)));
    else std::snprintf(where, sizeof where, idx, what, (long long)i);
    if (std::isinf(e)) {
      failure = fmt("%s = %.9g where the exact gradient is %.9g (non-finite mismatch)", where, v, bits_to_double(f, exact[i]));
      break;
    }
    worst = std::max(worst, e);
    rounded += correctly_rounded(f, got[i], exact[i]) ? 1 : 0;
    if (is_dx) {
      const auto cls = static_cast<std::size_t>(class_of(c, static_cast<std::int64_t>(i) / kappa_stride));
      class_worst[cls] = std::max(class_worst[cls], e);
      seen[cls] = true;
    }
    if (e > allowed) {
      failure = fmt("%s = %.9g, exact %.9g: %.6g scaled ulp > allowed %.6g (a %g + b %g x kappa %.4g)", where, v,
                    elems[i].y_hi + elems[i].y_lo, e, allowed, budget.a, budget.b, k);
      break;
    }
  }
  if (failure.empty() && !bias.bias_within())
    failure = fmt("%s's mean signed error %+.4g scaled ulp over %lld elements is past its bound %.4g (0.5 + 3 x mean "
                  "allowance %.4g / sqrt(%lld distinct %s) + kappa part %.4g): a systematic error, every element pushed "
                  "the same way", what, bias.mean_signed_error(), (long long)bias.signed_elements, bias.bias_bound(),
                  bias.mean_allowed() - bias.mean_kappa_allowed(), (long long)bias.units(), is_dx ? "rows" : "columns",
                  bias.mean_kappa_allowed());
  if (!got.empty()) {
    ctx.worst.note(m, worst);
    ctx.worst.add(m + ".elements", static_cast<double>(std::min(i + 1, got.size())));
    ctx.worst.add(m + ".correctly_rounded", rounded);
    for (int k = 0; k < kRowClassCount; ++k)
      if (seen[static_cast<std::size_t>(k)]) ctx.worst.note(m + "." + std::string(name(static_cast<RowClass>(k))), class_worst[static_cast<std::size_t>(k)]);
  }
  return failure;
}

std::string gradients_within(const CheckContext& ctx, const Case& c, const Gradients& got, const ExactGradients& e) {
  const Format f = format_of(c.spec.dtype), pf = format_of(c.spec.params());
  if (auto m = gradient_within(ctx, c, "dx", f, got.dx, e.dx, e.ref.dx, ctx.budget.dx, &e.ref.row_kappa, c.spec.cols()); !m.empty()) return m;
  if (auto m = gradient_within(ctx, c, "dgamma", pf, got.dgamma, e.dgamma, e.ref.dgamma, ctx.budget.dgamma, &e.ref.dgamma_kappa, 1); !m.empty())
    return m;
  return gradient_within(ctx, c, "dbeta", pf, got.dbeta, e.dbeta, e.ref.dbeta, Budget{ctx.budget.dbeta_ulp, 0}, nullptr, 1);
}

std::string run_and_gate(const CheckContext& ctx, const Case& c, const char* what = nullptr) {
  const Gradients got = run_backward(ctx.kernel, c);
  const std::string prefix = what ? std::string(what) + ": " : "";
  if (!got.violation.empty()) return prefix + got.violation;
  const std::string m = gradients_within(ctx, c, got, exact_gradients(c));
  return m.empty() ? m : prefix + m;
}

// The case with dy replaced (values of dy's dtype, as given).
Case with_dy(const Case& c, std::vector<double> dy) {
  Case out = c;
  out.dy = std::move(dy);
  return out;
}

bool row_finite(const Case& c, std::int64_t r) {
  const std::int64_t n = c.spec.cols();
  for (std::int64_t i = r * n; i < (r + 1) * n; ++i)
    if (!std::isfinite(c.x[static_cast<std::size_t>(i)]) || !std::isfinite(c.dy[static_cast<std::size_t>(i)])) return false;
  return true;
}

// The row's inputs and every element of its exact dx (rounded to the format) are finite: the laws are about
// such rows (a gradient that overflows the format is accuracy's business).
bool exact_row_finite(const Case& c, const ExactGradients& e, std::int64_t r) {
  if (!row_finite(c, r)) return false;
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols();
  for (std::int64_t i = r * n; i < (r + 1) * n; ++i)
    if (!std::isfinite(bits_to_double(f, e.dx[static_cast<std::size_t>(i)]))) return false;
  return true;
}

}  // namespace

// --- the checks ---------------------------------------------------------------------------------------

// shape: every output written, nothing around them, no input changed.
std::string check_bwd_shape(const CheckContext& ctx, const Case& c) {
  const Gradients got = run_backward(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  const std::int64_t want_dg = c.gamma.empty() ? 0 : c.spec.cols(), want_db = c.beta.empty() ? 0 : c.spec.cols();
  if (static_cast<std::int64_t>(got.dx.size()) != c.spec.rows() * c.spec.cols() || static_cast<std::int64_t>(got.dgamma.size()) != want_dg ||
      static_cast<std::int64_t>(got.dbeta.size()) != want_db)
    return "output sizes do not match x's and gamma's shapes";
  return "";
}

std::string check_bwd_accuracy(const CheckContext& ctx, const Case& c) { return run_and_gate(ctx, c); }

// nonfinite: NaN/Inf rows of x (the case's nonfinite class), and a NaN, then a ±Inf, put into dy: every output
// against the exact answer, whose NaNs are exactly where the poison reaches (DESIGN "Backward"). With an
// infinite dy the dx row has no value (IEEE gives NaN or ±Inf by the order of the operations): any non-finite
// values pass there, a finite one does not; dgamma and dbeta are IEEE's sums, the same in any order.
std::string check_bwd_nonfinite(const CheckContext& ctx, const Case& c) {
  if (auto m = run_and_gate(ctx, c, "x as generated"); !m.empty()) return m;
  std::mt19937_64 rng(c.spec.data_seed ^ 0xD1u);
  const std::size_t at = rng() % c.dy.size();
  std::vector<double> dy = c.dy;
  dy[at] = kNaN;
  if (auto m = run_and_gate(ctx, with_dy(c, dy), "a NaN in dy"); !m.empty()) return m;
  dy[at] = (rng() & 1) ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  const Case inf = with_dy(c, dy);
  Gradients got = run_backward(ctx.kernel, inf);
  if (!got.violation.empty()) return "an Inf in dy: " + got.violation;
  const ExactGradients e = exact_gradients(inf);
  const Format f = format_of(c.spec.dtype);
  const auto n = static_cast<std::size_t>(c.spec.cols()), row = at / n;
  for (std::size_t i = row * n; i < (row + 1) * n; ++i) {
    if (std::isfinite(bits_to_double(f, got.dx[i])) && std::isnan(e.ref.dx[i].y_hi))
      return fmt("an Inf in dy[row %zu, col %zu]: dx[row %zu, col %zu] = %.9g, finite where the row has no gradient", row, at % n, row,
                 i % n, bits_to_double(f, got.dx[i]));
    if (std::isnan(e.ref.dx[i].y_hi)) got.dx[i] = e.dx[i];  // any non-finite value: the row is poisoned
  }
  const std::string m = gradients_within(ctx, inf, got, e);
  return m.empty() ? m : "an Inf in dy: " + m;
}

// row_independence: a row's dx alone, and in the reversed batch, is the same bits as in the batch.
std::string check_bwd_row_independence(const CheckContext& ctx, const Case& c) {
  const Gradients batch = run_backward(ctx.kernel, c);
  if (!batch.violation.empty()) return batch.violation;
  const std::int64_t rows = c.spec.rows(), n = c.spec.cols();
  const auto same = [&](const Gradients& g, std::int64_t r, std::int64_t at) {
    return std::equal(batch.dx.begin() + r * n, batch.dx.begin() + (r + 1) * n, g.dx.begin() + at * n);
  };
  std::vector<std::int64_t> reversed(static_cast<std::size_t>(rows));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const Gradients rev = run_backward(ctx.kernel, select_rows(c, reversed));
  if (!rev.violation.empty()) return "reversed batch: " + rev.violation;
  for (std::int64_t r = 0; r < rows; ++r)
    if (!same(rev, r, rows - 1 - r)) return fmt("dx of row %lld differs at position %lld of the reversed batch", (long long)r, (long long)(rows - 1 - r));
  for (std::int64_t r : {std::int64_t{0}, rows / 2, rows - 1}) {
    const Gradients alone = run_backward(ctx.kernel, select_rows(c, {r}));
    if (!alone.violation.empty()) return "row alone: " + alone.violation;
    if (!same(alone, r, 0)) return fmt("dx of row %lld of %lld differs computed alone", (long long)r, (long long)rows);
  }
  return "";
}

// determinism: the case tiled to enough rows that a kernel splits them (at least 129 rows, 3 blocks of 64,
// and 2^18 elements: parallel_rows' kMinElementsPerThread split threshold is 65536 per thread); two runs on
// one thread, then 2, 3 and 8 threads: dx, dgamma and dbeta the same bits.
std::string check_bwd_determinism(const CheckContext& ctx, const Case& c) {
  Case big = c;
  const std::int64_t rows = c.spec.rows(), n = c.spec.cols();
  const std::int64_t want = n > 8192 ? rows : std::max<std::int64_t>({rows, 129, ((std::int64_t{1} << 18) + n - 1) / n});
  std::vector<std::int64_t> order;
  for (std::int64_t r = 0; r < want; ++r) order.push_back(r % rows);
  if (want > rows) {
    big = select_rows(c, order);
    // Tiled rows repeat x; a different dy per copy keeps the partial sums from being copies of each other: uniform
    // in [-2, 2) from the position (std::normal_distribution's logarithms were a fifth of this property's time
    // under ASan).
    const Format f = format_of(c.spec.dtype);
    for (std::size_t i = static_cast<std::size_t>(rows * n); i < big.dy.size(); ++i)
      big.dy[i] = round_to_format(f, static_cast<double>(position_hash(c.spec.data_seed ^ 0x7Eu, i) >> 11) * 0x1p-51 - 2);
  }
  // The tiled rows' statistics are their originals' (computing them exactly for 2^18 elements would
  // cost more than the runs).
  const Saved base = saved_stats(c);
  Saved saved;
  for (std::int64_t r : order) {
    if (c.spec.op.norm == Norm::layernorm) saved.mean.push_back(base.mean[static_cast<std::size_t>(r)]);
    saved.rstd.push_back(base.rstd[static_cast<std::size_t>(r)]);
  }
  // One set of buffers for the five runs (GuardedBackward: fresh 2^18-element buffers per run were most of this
  // property's time under ASan).
  GuardedBackward runs(ctx.kernel, big, saved);
  if (std::string v = runs.run(1); !v.empty()) return v;
  const GuardedBackward::Bytes first = runs.output_bytes();
  if (std::string v = runs.run(1); !v.empty()) return "a second run on 1 thread: " + v;
  if (!runs.same_dx(first) || !runs.same_params(first)) return fmt("%lld rows: a second run on 1 thread gave different bits", (long long)want);
  for (int threads : {2, 3, 8}) {
    if (std::string v = runs.run(threads); !v.empty()) return fmt("%d threads: ", threads) + v;
    if (!runs.same_dx(first)) return fmt("%lld rows on %d threads: dx differs from 1 thread", (long long)want, threads);
    if (!runs.same_params(first))
      return fmt("%lld rows on %d threads: dgamma/dbeta differ from 1 thread (a reduction order that depends on the split)", (long long)want, threads);
  }
  return "";
}

// The per-element allowance of dx in the format's units: allowed_distance (the compute format's error and the
// storage rounding), the most a kernel within budget may be off; the sums below are bounded by the sum of these (times |x_i − mean| for orthogonality).
double dx_allowance(const CheckContext& ctx, const Format& f, const ExactGradients& e, std::size_t i, std::int64_t n) {
  const double k = e.ref.row_kappa[i / static_cast<std::size_t>(n)];
  return allowed_distance(f, e.ref.dx[i], allowed_ulps(f, ctx.budget.dx, e.ref.dx[i], k));
}

// Σ_i dx_i·d_i over row r, which is 0 exactly for the weights d the laws name, against the most a kernel within
// budget can make it: Σ |d_i|·allowance_i, plus the check's own rounding. In long double, with a compensated sum:
// f64 gradients near ±max, and x − mean on f64 rows near overflow, leave double's range; each product errs by
// 2^-64 relative (the 2^-60·Σ|dx·d| term covers it). "" or what broke.
std::string row_law_within(const CheckContext& ctx, const Case& c, const Gradients& got, const ExactGradients& e, std::int64_t r,
                           const std::vector<long double>& d, const char* measure, const char* what) {
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols();
  long double s = 0, comp = 0, abs = 0, bound = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = bits_to_double(f, got.dx[static_cast<std::size_t>(r * n + i)]);
    if (!std::isfinite(v)) return fmt("row %lld: dx[%lld] = %.9g where the exact gradient is finite", (long long)r, (long long)i, v);
    const long double t = static_cast<long double>(v) * d[static_cast<std::size_t>(i)], u = s + t;
    comp += std::fabs(s) >= std::fabs(t) ? (s - u) + t : (t - u) + s;
    s = u;
    abs += std::fabs(t);
    bound += std::fabs(d[static_cast<std::size_t>(i)]) * static_cast<long double>(dx_allowance(ctx, f, e, static_cast<std::size_t>(r * n + i), n));
  }
  const long double sum = s + comp;
  bound += 0x1p-60L * abs;
  ctx.worst.note(measure, bound > 0 ? static_cast<double>(std::fabs(sum) / bound) : 0);
  if (!(std::fabs(sum) <= bound * (1 + 1e-9L) + 1e-300L))
    return fmt("row %lld: %s = %.9Lg, allowed %.4Lg (the sum of its elements' budgets)", (long long)r, what, sum, bound);
  return "";
}

// dx_sum_zero (LayerNorm): Σ dx_i = 0 exactly (the forward is invariant under x → x + c·1, so dx ⟂ 1).
std::string check_dx_sum_zero(const CheckContext& ctx, const Case& c) {
  const Gradients got = run_backward(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  const ExactGradients e = exact_gradients(c);
  const std::vector<long double> ones(static_cast<std::size_t>(c.spec.cols()), 1.0L);
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    if (!exact_row_finite(c, e, r)) continue;
    if (auto m = row_law_within(ctx, c, got, e, r, ones, "dx_sum/allowed", "sum of dx"); !m.empty())
      return m + ": dx is not orthogonal to the ones vector";
  }
  return "";
}

// dx_orthogonal (eps = 0): LayerNorm Σ dx_i·(x_i − mean) = 0 (the forward is invariant under x → a·x, a > 0,
// and with the shift invariance dx ⟂ x − mean); RMSNorm Σ dx_i·x_i = 0. The mean's own error (n·2^-64 of Σ|x|)
// moves the sum by that times |Σ dx|, itself within Σ allowance: inside the bound's rounding term.
std::string check_dx_orthogonal(const CheckContext& ctx, const Case& c) {
  const Gradients got = run_backward(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  const ExactGradients e = exact_gradients(c);
  const std::int64_t n = c.spec.cols();
  std::vector<long double> d(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    if (!exact_row_finite(c, e, r)) continue;
    long double mean = 0;
    if (c.spec.op.norm == Norm::layernorm) {
      for (std::int64_t i = r * n; i < (r + 1) * n; ++i) mean += static_cast<long double>(c.x[static_cast<std::size_t>(i)]);
      mean /= static_cast<long double>(n);
    }
    for (std::int64_t i = 0; i < n; ++i) d[static_cast<std::size_t>(i)] = static_cast<long double>(c.x[static_cast<std::size_t>(r * n + i)]) - mean;
    if (auto m = row_law_within(ctx, c, got, e, r, d, "dx_orthogonal/allowed", "sum of dx*(x - mean)"); !m.empty())
      return m + ": dx is not orthogonal to x - mean (eps = 0)";
  }
  return "";
}

bool is_zero(const Format& f, std::uint64_t bits) { return bits_to_double(f, bits) == 0; }

// width_one (LayerNorm): each row's only element is its mean, so xhat = 0: dx = 0 and dgamma = 0 exactly
// (PyTorch once returned a nonzero weight gradient for normalized_shape=(1,)); dbeta within budget.
std::string check_width_one(const CheckContext& ctx, const Case& c) {
  Case one = c;
  const std::int64_t n = c.spec.cols();
  one.spec.shape = {c.spec.rows(), 1};
  one.spec.axis = 1;
  one.x.clear();
  one.dy.clear();
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    one.x.push_back(c.x[static_cast<std::size_t>(r * n)]);
    one.dy.push_back(c.dy[static_cast<std::size_t>(r * n)]);
  }
  if (!c.gamma.empty()) one.gamma = std::vector<double>{c.gamma.front()};
  if (!c.beta.empty()) one.beta = std::vector<double>{c.beta.front()};
  const Gradients got = run_backward(ctx.kernel, one);
  if (!got.violation.empty()) return got.violation;
  const Format f = format_of(c.spec.dtype), pf = format_of(c.spec.params());
  for (std::size_t r = 0; r < got.dx.size(); ++r) {
    if (!row_finite(one, static_cast<std::int64_t>(r))) continue;
    if (!is_zero(f, got.dx[r])) return fmt("width 1, row %zu: dx = %.9g, must be 0 (xhat is 0)", r, bits_to_double(f, got.dx[r]));
  }
  bool all_finite = true;
  for (std::int64_t r = 0; r < one.spec.rows(); ++r) all_finite = all_finite && row_finite(one, r);
  if (all_finite && !got.dgamma.empty() && !is_zero(pf, got.dgamma[0]))
    return fmt("width 1: dgamma = %.9g, must be 0 (every xhat is 0)", bits_to_double(pf, got.dgamma[0]));
  return gradients_within(ctx, one, got, exact_gradients(one));
}

// dy_zero: no upstream gradient, no gradient: dx, dgamma, dbeta all zero (either sign) on finite rows.
std::string check_dy_zero(const CheckContext& ctx, const Case& c) {
  std::vector<double> dy(c.dy.size(), 0.0);
  for (std::size_t i = 0; i < dy.size(); i += 3) dy[i] = -0.0;
  const Case z = with_dy(c, dy);
  const Gradients got = run_backward(ctx.kernel, z);
  if (!got.violation.empty()) return got.violation;
  const Format f = format_of(c.spec.dtype), pf = format_of(c.spec.params());
  for (std::size_t i = 0; i < got.dx.size(); ++i)
    if (!is_zero(f, got.dx[i])) return fmt("dy = 0: dx[%zu] = %.9g, must be 0", i, bits_to_double(f, got.dx[i]));
  for (const auto& [v, what] : {std::pair{&got.dgamma, "dgamma"}, std::pair{&got.dbeta, "dbeta"}})
    for (std::size_t j = 0; j < v->size(); ++j)
      if (!is_zero(pf, (*v)[j])) return fmt("dy = 0: %s[%zu] = %.9g, must be 0", what, j, bits_to_double(pf, (*v)[j]));
  return "";
}

// dy_linearity: the gradients are linear in dy, and scaling by ±2^k is exact in binary floating point, so
// a kernel's dy → s·dy must scale every output bitwise — wherever no value leaves the normal range: only
// outputs normal in both runs are compared (a subnormal or overflowing one scales inexactly).
std::string check_dy_linearity(const CheckContext& ctx, const Case& c) {
  const Gradients base = run_backward(ctx.kernel, c);
  if (!base.violation.empty()) return base.violation;
  const Format f = format_of(c.spec.dtype), pf = format_of(c.spec.params());
  const double min_normal_x = std::ldexp(1.0, f.emin), min_normal_p = std::ldexp(1.0, pf.emin);
  for (double s : {-1.0, 2.0, -0.5}) {
    std::vector<double> dy = c.dy;
    bool representable = true;
    for (double& v : dy) {
      v *= s;
      representable = representable && (v == 0 || std::isnan(v) || (std::fabs(v) >= min_normal_x && round_to_format(f, v) == v));
    }
    if (!representable) continue;  // dy itself would round: not the same dy scaled
    const Gradients got = run_backward(ctx.kernel, with_dy(c, dy));
    if (!got.violation.empty()) return fmt("dy x %g: ", s) + got.violation;
    const auto compare = [&](const char* what, const Format& ff, double min_normal, const std::vector<std::uint64_t>& a,
                             const std::vector<std::uint64_t>& b) -> std::string {
      for (std::size_t i = 0; i < a.size(); ++i) {
        const double va = bits_to_double(ff, a[i]), vb = bits_to_double(ff, b[i]);
        // Both values strictly inside the normal range, away from the top binade: a value at the smallest
        // normal may be a rounded subnormal, one in the top binade may round to Inf when scaled.
        const double top = std::ldexp(1.0, ff.emax - 1);
        if (!std::isfinite(va) || std::fabs(va) <= min_normal || std::fabs(va * s) <= min_normal || std::fabs(va) >= top ||
            std::fabs(va * s) >= top)
          continue;
        if (vb != va * s)
          return fmt("dy x %g: %s[%zu] = %.9g, but %g x %.9g (dy as given) = %.9g: not linear in dy", s, what, i, vb, s, va, va * s);
      }
      return "";
    };
    if (auto m = compare("dx", f, min_normal_x, base.dx, got.dx); !m.empty()) return m;
    if (auto m = compare("dgamma", pf, min_normal_p, base.dgamma, got.dgamma); !m.empty()) return m;
    if (auto m = compare("dbeta", pf, min_normal_p, base.dbeta, got.dbeta); !m.empty()) return m;
  }
  return "";
}

}  // namespace lnorm::verify
