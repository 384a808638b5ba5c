// Properties 5–10: row independence, determinism, the identity affine, invariance under a·x + c,
// permutation equivariance and NaN/Inf isolation; and which inputs each property draws.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"
#include "properties.hpp"

namespace lnorm::verify {

namespace {

// "" if row `a` of `x` equals row `b` of `y` bit for bit (y, mean and rstd). With zero_sign_free,
// y values +0 and −0 count as equal (see check_affine_identity).
std::string same_row(const Outputs& x, std::int64_t a, const Outputs& y, std::int64_t b, std::int64_t n,
                     DType d = DType::f32, bool zero_sign_free = false) {
  const std::uint64_t sign = std::uint64_t{1} << (8 * size_of(d) - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t u = x.y[static_cast<std::size_t>(a * n + i)], v = y.y[static_cast<std::size_t>(b * n + i)];
    if (zero_sign_free && (u | sign) == sign && (v | sign) == sign) u = v;
    if (u != v) return fmt("y[%lld] differs (bits %llx vs %llx)", (long long)i, (unsigned long long)u, (unsigned long long)v);
  }
  if (!x.mean.empty() && x.mean[static_cast<std::size_t>(a)] != y.mean[static_cast<std::size_t>(b)]) return "mean differs";
  if (x.rstd[static_cast<std::size_t>(a)] != y.rstd[static_cast<std::size_t>(b)]) return "rstd differs";
  return "";
}

}  // namespace

// 5. Row r of a batch equals the same row computed alone and at the mirrored position of the
// reversed batch, bitwise.
std::string check_row_independence(const CheckContext& ctx, const Case& c) {
  const Outputs batch = run_guarded(ctx.kernel, c);
  if (!batch.violation.empty()) return batch.violation;
  const std::int64_t rows = c.spec.rows(), n = c.spec.cols();
  std::vector<std::int64_t> reversed(static_cast<std::size_t>(rows));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const Outputs rev = run_guarded(ctx.kernel, select_rows(c, reversed));
  if (!rev.violation.empty()) return "reversed batch: " + rev.violation;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (auto m = same_row(batch, r, rev, rows - 1 - r, n); !m.empty()) {
      return fmt("row %lld of %lld: at position %lld of the reversed batch, ", (long long)r, (long long)rows,
                 (long long)(rows - 1 - r)) + m;
    }
  }
  // Alone: the first, the last and one in the middle (every row alone would cost rows runs).
  for (std::int64_t r : {std::int64_t{0}, rows / 2, rows - 1}) {
    const Outputs alone = run_guarded(ctx.kernel, select_rows(c, {r}));
    if (!alone.violation.empty()) return "row alone: " + alone.violation;
    if (auto m = same_row(batch, r, alone, 0, n); !m.empty()) {
      return fmt("row %lld of %lld computed alone: ", (long long)r, (long long)rows) + m;
    }
  }
  return "";
}

// batch_invariance: vLLM #48271 chose its block size by the number of tokens (1024 below 256, 256 above), so a
// row's bits depended on how many rows shared its batch; row_independence's batches (≤ 48 rows) cross no
// such threshold. Here the case's rows (1 to 3: the base rows) are each run alone, then repeated into a batch
// (row i is base row i mod k) run on 1 and on 2 threads: every row of it must be its base row's bits alone
// (y, mean, rstd, and Add & Norm's h). The batch has one of kBatchRows rows, drawn by the case (its seed), so
// that a run's cases cover the ladder (160 cases: each size about 20 times) at the cost of one size per case;
// the sizes cross 256 rows (vLLM's), a second thread (parallel_rows: 65536 elements per thread) and the
// kernels' blocks of rows. A batch holds at most kMaxBatchElements elements (wide rows take the largest size
// that fits). One case in kBigEvery is the big one: 4097 rows of big_width(dtype), on 2 threads, whose y
// passes 8 MiB in f32 and f64 (the SIMD kernels stream y with non-temporal stores past 8 MiB); 16-bit x keeps
// f32's width (4 MiB of y: the harness's 8-byte-per-element copies of 8 MiB of bf16 cost a second per case).
// A kernel that writes quantized outputs is held to the same with q and its per-row scales (fp8_e4m3, row
// scaling: each row's scale is its own amax's, so nothing but the batch could move it).
namespace {

constexpr std::int64_t kBatchRows[] = {1, 7, 255, 256, 300, 1024, 4097};
constexpr std::int64_t kMaxBatchElements = std::int64_t{1} << 18;
constexpr std::uint64_t kBigEvery = 32;

// The big case's width: 4097 rows of it hold more than 8 MiB of f32 (2^21 elements), or of f64.
std::int64_t big_width(DType d) { return d == DType::f64 ? 257 : 513; }

// "" if row a of x equals row b of y bit for bit: y, mean, rstd and h.
std::string same_row_all(const Outputs& x, std::int64_t a, const Outputs& y, std::int64_t b, std::int64_t n) {
  if (auto m = same_row(x, a, y, b, n); !m.empty()) return m;
  for (std::int64_t i = 0; i < n && !x.h.empty(); ++i) {
    const std::uint64_t u = x.h[static_cast<std::size_t>(a * n + i)], v = y.h[static_cast<std::size_t>(b * n + i)];
    if (u != v) return fmt("h[%lld] differs (bits %llx vs %llx)", (long long)i, (unsigned long long)u, (unsigned long long)v);
  }
  return "";
}

}  // namespace

std::string check_batch_invariance(const CheckContext& ctx, const Case& c0) {
  const bool big = c0.spec.data_seed % kBigEvery == 0;
  Case c = c0;
  if (big && c.spec.cols() != big_width(c.spec.dtype)) {  // the rows' recipe redrawn at the big width
    CaseSpec s = c.spec;
    s.shape = {c.spec.rows(), big_width(c.spec.dtype)};
    s.axis = 1;
    c = materialize(s);
  }
  if (c.spec.op.prologue == Prologue::residual_add && c.residual.empty()) {
    // The harness splits each value by its position (kernel_inputs): fix the base rows' split, so that every
    // copy of a row hands the kernel the same x and residual.
    KernelInputs in = kernel_inputs(c);
    c.x = std::move(in.x);
    c.residual = std::move(in.residual);
  }
  if (big && ctx.ran) *ctx.ran = c;
  const std::int64_t k = c.spec.rows(), n = c.spec.cols();
  std::vector<Outputs> alone;
  for (std::int64_t r = 0; r < k; ++r) {
    alone.push_back(run_guarded(ctx.kernel, select_rows(c, {r})));
    if (!alone.back().violation.empty()) return fmt("base row %lld alone: ", (long long)r) + alone.back().violation;
  }
  constexpr auto kSizes = static_cast<std::uint64_t>(std::size(kBatchRows));
  std::int64_t rows = big ? 4097 : kBatchRows[(c.spec.data_seed / kBigEvery) % kSizes];
  // Past kMaxBatchElements, the largest size of the ladder that fits (one row always does: rows ≤ 2^17 wide).
  for (std::size_t i = kSizes; !big && rows * n > kMaxBatchElements && i-- > 0;) rows = std::min(rows, kBatchRows[i]);
  std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) order[static_cast<std::size_t>(i)] = i % k;
  const Case batch = select_rows(c, order);
  for (int threads : {1, 2}) {
    if (big && threads == 1) continue;  // the split is the thread count's; streaming is the size's
    const Outputs got = run_guarded(ctx.kernel, batch, threads);
    if (!got.violation.empty()) return fmt("batch of %lld rows on %d thread(s): ", (long long)rows, threads) + got.violation;
    for (std::int64_t i = 0; i < rows; ++i) {
      if (auto m = same_row_all(got, i, alone[static_cast<std::size_t>(i % k)], 0, n); !m.empty()) {
        return fmt("batch of %lld rows of width %lld on %d thread(s): row %lld (base row %lld of %lld) differs from that row alone: ",
                   (long long)rows, (long long)n, threads, (long long)i, (long long)(i % k), (long long)k) + m;
      }
    }
  }
  if (!ctx.kernel.takes.epilogues.contains(Epilogue::quantized) || c.spec.dtype == DType::f64) return "";
  const QuantSpec spec = parse_quant_spec("fp8_e4m3", "row", std::nullopt);
  std::vector<QuantOutputs> alone_q;
  for (std::int64_t r = 0; r < k; ++r) {
    alone_q.push_back(run_quantized(ctx.kernel, select_rows(c, {r}), spec, 1));
    if (!alone_q.back().violation.empty()) return fmt("q: base row %lld alone: ", (long long)r) + alone_q.back().violation;
  }
  for (int threads : {1, 2}) {
    if (big && threads == 1) continue;
    const QuantOutputs got = run_quantized(ctx.kernel, batch, spec, threads);
    if (!got.violation.empty()) return fmt("q: batch of %lld rows on %d thread(s): ", (long long)rows, threads) + got.violation;
    for (std::int64_t i = 0; i < rows; ++i) {
      const QuantOutputs& one = alone_q[static_cast<std::size_t>(i % k)];
      const bool same_q = std::equal(one.q.begin(), one.q.end(), got.q.begin() + i * n);
      const bool same_s = std::equal(one.scales.begin(), one.scales.end(), got.scales.begin() + i * 4);
      if (!same_q || !same_s)
        return fmt("batch of %lld rows of width %lld on %d thread(s), q %s: row %lld (base row %lld) differs from that row alone (%s)",
                   (long long)rows, (long long)n, threads, describe(spec).c_str(), (long long)i, (long long)(i % k),
                   same_q ? "its scale" : "its codes");
    }
  }
  return "";
}

// 6. Two runs, and runs on 2, 3 and 8 threads, give the same bits.
std::string check_determinism(const CheckContext& ctx, const Case& c) {
  const Outputs first = run_guarded(ctx.kernel, c, 1);
  if (!first.violation.empty()) return first.violation;
  if (!run_guarded(ctx.kernel, c, 1).same_bits(first)) return "a second run on 1 thread gave different bits";
  for (int threads : {2, 3, 8}) {
    const Outputs again = run_guarded(ctx.kernel, c, threads);
    if (!again.violation.empty()) return fmt("%d threads: ", threads) + again.violation;
    if (!again.same_bits(first)) return fmt("%d threads gave different bits from 1 thread", threads);
  }
  return "";
}

// 7. gamma = 1 and beta = 0 passed as buffers give the same bits as no affine at all — except the
// sign of a zero: IEEE gives −0 + (+0) = +0, so adding an explicit beta = 0 legitimately turns a −0
// into +0 (the values are equal; no framework distinguishes them here).
std::string check_affine_identity(const CheckContext& ctx, const Case& c) {
  const Outputs plain = run_guarded(ctx.kernel, c);
  if (!plain.violation.empty()) return plain.violation;
  const Outputs identity = run_guarded(ctx.kernel, c, 1, /*explicit_identity=*/true);
  if (!identity.violation.empty()) return "gamma = 1, beta = 0 given: " + identity.violation;
  const std::int64_t n = c.spec.cols();
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    if (auto m = same_row(plain, r, identity, r, n, c.spec.dtype, /*zero_sign_free=*/true); !m.empty()) {
      return fmt("row %lld with gamma = 1, beta = 0 given: ", (long long)r) + m;
    }
  }
  return "";
}

// 8. With eps = 0, LN(a·x + c) = LN(x) exactly in real arithmetic for a > 0. The kernel sees
// x' = fl(a·x + c), whose rounding moves each x'_i by δ_i, |δ_i| ≤ u·|x'_i| ≤ u·σ'·(kappa' + |z_i|).
// In units of σ' that moves z_i three ways: directly by δ_i/σ' ≤ u·(kappa' + |z_i|); through the
// mean by mean(δ)/σ' ≤ u·(kappa' + 1) (mean|z| ≤ 1); through σ' by |z_i|·|δσ'|/σ' ≤ |z_i|·u·(kappa' + 1).
// Together ≤ 3·u·(kappa' + 1)·max(1, |z_i|), i.e. 3·(kappa' + 1) ulps of x's format F at max(1, |z|) (ulp(s) ≥
// u·s), which is 3·(kappa' + 1)·2^(p_C − p_F) ulps of the compute format C the metric counts in (lnorm/metrics.hpp;
// the output's own rounding to F is free there). So, in scaled ulps of C,
//   |LN_kernel(x')_i − z_i(x)| ≤ (a + b·kappa')·ulp(s')/ulp(s) + 3·(kappa' + 1)·2^(p_C − p_F),
// s' = max(1, |z'_i|) the moved row's scale, at which the kernel's own budget holds.
// The allowance grows with kappa', so a kernel that merely rounds its mean passes; one that loses
// 2·log2(kappa') bits (E[x²] − E[x]²) does not. Rows where x' collapses to a constant have no LN
// and are skipped.
std::string check_invariance(const CheckContext& ctx, const Case& c) {
  const Format f = format_of(c.spec.dtype);
  std::mt19937_64 rng(c.spec.data_seed ^ 0x9E3779B97F4A7C15ull);
  const double a = std::ldexp(1.0 + std::uniform_real_distribution<double>(0, 1)(rng), std::uniform_int_distribution<int>(-2, 2)(rng));
  // Shift by up to 10^(0.3·(p − 6)) standard deviations (10^4 at most): beyond that the format
  // cannot resolve the row after the shift.
  const double max_log_shift = std::min(4.0, 0.3 * (f.precision - 6));
  const double shift_in_stds = std::pow(10.0, std::uniform_real_distribution<double>(0, max_log_shift)(rng)) * ((rng() & 1) ? -1 : 1);
  const std::int64_t n = c.spec.cols();
  const Exact base = exact_answer(c);
  Case moved = c;
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    const RowReference& ref = base.rows[static_cast<std::size_t>(r)];
    const double sd = std::isinf(ref.rstd) || ref.rstd == 0 ? 0 : 1 / ref.rstd;
    // x' = a·(x − mean) + a·k·std: c = a·(k·std − mean) puts the row at kappa' ≈ |k|. Formed in
    // long double so that the storage rounding is the only one that matters (also for f64).
    const long double c_shift = static_cast<long double>(shift_in_stds) * sd - ref.mean;
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      double& v = moved.x[static_cast<std::size_t>(i)];
      v = round_to_format(f, static_cast<double>(static_cast<long double>(a) * (v + c_shift)));
    }
  }
  const Outputs got = run_guarded(ctx.kernel, moved);
  if (!got.violation.empty()) return got.violation;
  const Exact exact_moved = exact_answer(moved);
  for (std::int64_t r = 0; r < c.spec.rows(); ++r) {
    const RowReference& ref = exact_moved.rows[static_cast<std::size_t>(r)];
    if (ref.nonfinite || base.rows[static_cast<std::size_t>(r)].nonfinite ||
        std::isnan(exact_moved.elems[static_cast<std::size_t>(r * n)].z)) {
      continue;  // var' + eps == 0: x' collapsed to a constant row
    }
    const double kappa = ref.kappa;
    const Format cf = compute_format(f);
    for (std::int64_t i = r * n; i < (r + 1) * n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const double z = base.elems[k].z, yv = bits_to_double(f, got.y[k]);
      if (std::isnan(z)) continue;
      // The kernel's budget holds at the moved row's scale max(1, |z'|), the error is read at x's max(1, |z|): where
      // the two sit in different binades, the budget's ulps are the moved one's.
      const double s = std::max(1.0, std::abs(z)), s_moved = std::max(1.0, std::abs(exact_moved.elems[k].z));
      const double allowed = ctx.budget.y.allowed(kappa) * (ulp_at(cf, s_moved) / ulp_at(cf, s)) +
                             3 * (kappa + 1) * storage_ulp_in_compute_ulps(f);
      const double e = scaled_error_to(f, yv, z, s);
      if (!std::isfinite(e)) return fmt("row %lld: LN(a·x + c)[%lld] = %g where LN(x) = %.9g", (long long)r, (long long)(i - r * n), yv, z);
      ctx.worst.note("invariance_ulp", e);
      if (e > allowed) {
        return fmt("row %lld (a = %.6g, c = mean + %.3g std): LN(a·x + c)[%lld] = %.9g, LN(x) = %.9g: %.4g scaled ulp > %.4g (kappa' %.4g)",
                   (long long)r, a, shift_in_stds, (long long)(i - r * n), yv, z, e, allowed, kappa);
      }
    }
  }
  return "";
}

// 9. Permuting the columns of x, gamma and beta permutes y: both outputs are within the budget of
// the same exact values, so they differ by at most twice the budget (scaled ulps); NaN stays NaN.
std::string check_permutation(const CheckContext& ctx, const Case& c) {
  const Format f = format_of(c.spec.dtype);
  const std::int64_t n = c.spec.cols(), rows = c.spec.rows();
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(c.spec.data_seed + 1);
  std::shuffle(perm.begin(), perm.end(), rng);
  Case permuted = c;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < n; ++i) permuted.x[static_cast<std::size_t>(r * n + i)] = c.x[static_cast<std::size_t>(r * n + perm[static_cast<std::size_t>(i)])];
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (!c.gamma.empty()) permuted.gamma[static_cast<std::size_t>(i)] = c.gamma[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
    if (!c.beta.empty()) permuted.beta[static_cast<std::size_t>(i)] = c.beta[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
  }
  const Outputs got = run_guarded(ctx.kernel, c), got_perm = run_guarded(ctx.kernel, permuted);
  if (!got.violation.empty()) return got.violation;
  if (!got_perm.violation.empty()) return "permuted: " + got_perm.violation;
  const Exact exact = exact_answer(c);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double kappa = exact.rows[static_cast<std::size_t>(r)].kappa;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(r * n + perm[static_cast<std::size_t>(i)]);
      const double y0 = bits_to_double(f, got.y[k]), y1 = bits_to_double(f, got_perm.y[static_cast<std::size_t>(r * n + i)]);
      if (std::isnan(y0) != std::isnan(y1)) return fmt("row %lld: y[%lld] = %g but %g after permuting", (long long)r, (long long)perm[static_cast<std::size_t>(i)], y0, y1);
      if (std::isnan(y0) || y0 == y1) continue;
      // Both within budget of the same y*: apart by at most twice the distance one may be (storage rounding included).
      const double unit = ulp_at(compute_format(f), exact.elems[k].scale);
      const double allowed = 2 * allowed_distance(f, exact.elems[k], allowed_ulps(f, ctx.budget.y, exact.elems[k], kappa)) / unit;
      const double e = std::abs(y0 - y1) / unit;
      ctx.worst.note("permutation_ulp", e);
      if (!(e <= allowed)) {
        return fmt("row %lld: y[%lld] = %.9g but %.9g after permuting: %.4g scaled ulp apart > 2 x budget %.4g",
                   (long long)r, (long long)perm[static_cast<std::size_t>(i)], y0, y1, e, allowed);
      }
    }
  }
  return "";
}

// 10. Rows holding NaN or Inf give NaN y, mean and rstd; every other row is bitwise what it is
// without them in the batch.
std::string check_nonfinite(const CheckContext& ctx, const Case& c) {
  const Format f = format_of(c.spec.dtype), sf = format_of(stats_dtype(c.spec.dtype));
  const std::int64_t n = c.spec.cols(), rows = c.spec.rows();
  const Outputs got = run_guarded(ctx.kernel, c);
  if (!got.violation.empty()) return got.violation;
  std::vector<std::int64_t> finite_rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!row_has_nonfinite(c, r)) {
      finite_rows.push_back(r);
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const double yv = bits_to_double(f, got.y[static_cast<std::size_t>(r * n + i)]);
      if (!std::isnan(yv)) return fmt("row %lld holds NaN/Inf but y[%lld] = %.9g (must be NaN)", (long long)r, (long long)i, yv);
    }
    const bool mean_nan = got.mean.empty() || std::isnan(bits_to_double(sf, got.mean[static_cast<std::size_t>(r)]));
    if (!mean_nan || !std::isnan(bits_to_double(sf, got.rstd[static_cast<std::size_t>(r)]))) {
      return fmt("row %lld holds NaN/Inf but its %s is not NaN", (long long)r, got.mean.empty() ? "rstd" : "mean/rstd");
    }
  }
  if (finite_rows.empty() || static_cast<std::int64_t>(finite_rows.size()) == rows) return "";
  const Outputs clean = run_guarded(ctx.kernel, select_rows(c, finite_rows));
  if (!clean.violation.empty()) return "finite rows alone: " + clean.violation;
  for (std::size_t k = 0; k < finite_rows.size(); ++k) {
    if (auto m = same_row(got, finite_rows[k], clean, static_cast<std::int64_t>(k), n); !m.empty()) {
      return fmt("finite row %lld changed when NaN/Inf rows share its batch: ", (long long)finite_rows[k]) + m;
    }
  }
  return "";
}

}  // namespace lnorm::verify
