// Add & Norm's own properties (docs/DESIGN.md "Ops"). The norm's laws run on the fused op through the
// harness's exact split (harness.hpp, kernel_inputs); these four give the kernel inputs whose sum rounds:
//   add_rounding       h is x + residual rounded once, bit for bit (every case checks it: harness), and y,
//                      mean, rstd are within budget of the norm of that h; residuals of four kinds: another
//                      element at a scale 2^k, cancellation (|x| ≈ |residual| ≈ 1e4, the sum ≈ 1), addends
//                      at x's rounding position (ties, carries), any value within 2p + 4 binades below to 8
//                      above x's (overflow to ±Inf, subnormals); for 16-bit x, an f32 residual (residual_in_fp32) when the kernel takes one
//   add_h_then_norm    y, mean and rstd are bit for bit the plain norm's of h as stored: the statistics see the
//                      rounded h, and the residual is in them (a kernel that skips the rounding on purpose
//                      declares this an expected failure, with what it costs)
//   add_commutes       x and residual swapped give the same bits (h, y, mean, rstd)
//   add_residual_zero  residual = ±0 gives the plain norm's answer for x (±0 outputs alike)
#include <cmath>
#include <random>

#include "lnorm/add.hpp"
#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"
#include "properties.hpp"

namespace lnorm::verify {
namespace {

enum class ResidualKind { scaled_other, cancel, at_rounding, any_value };

// The case with an explicit residual of the kind its seed picks (rd: the residual's dtype).
Case with_residual(const Case& c, DType rd, std::uint64_t salt) {
  Case out = c;
  out.spec.residual_dtype = rd;
  std::mt19937_64 rng(c.spec.data_seed ^ (0xADD0ADD0ull + salt));
  const auto kind = static_cast<ResidualKind>(rng() % 4);
  const Format xf = format_of(c.spec.dtype), rf = format_of(rd);
  const std::size_t n = c.x.size();
  out.residual.resize(n);
  const int k = static_cast<int>(rng() % 25) - 12;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = c.x[i];
    double r = 0;
    switch (kind) {
      case ResidualKind::scaled_other: {
        const double o = c.x[(i * 7 + 3) % n];
        r = std::isfinite(o) ? std::ldexp(o, k) : o;
        break;
      }
      case ResidualKind::cancel: {
        // x = K + v (rounded to x's dtype), residual = −K: the sum ≈ v, the stored x and residual ≈ ±1e4.
        const double K = 1e4 * (1 + unit(rng)) * ((rng() & 1) ? -1 : 1);
        if (std::isfinite(v)) out.x[i] = round_to_format(xf, K + std::clamp(v, -8.0, 8.0));
        r = -K;
        break;
      }
      case ResidualKind::at_rounding: {
        // 2^(e − p + j), j in [−2, 1]: half an ulp of x and its neighbours, ties and carries.
        const int e = std::isfinite(v) && v != 0 ? std::ilogb(v) : 0;
        r = std::ldexp((rng() & 1) ? 1.0 : -1.5, e - xf.precision + static_cast<int>(rng() % 4) - 2);
        break;
      }
      case ResidualKind::any_value: {
        // Any value from 2p + 4 binades below v's to 8 above (clamped to the format): absorbed addends,
        // carries, overflow to ±Inf beside huge rows, subnormal sums beside tiny ones; not a row whose
        // dynamic range no kernel's working format was asked to hold.
        const int e = std::isfinite(v) && v != 0 ? std::ilogb(v) : 0;
        r = random_float_bits(rng, rf, e - 2 * rf.precision - 4, e + 8);
        break;
      }
    }
    const double rr = round_to_format(rf, r);
    out.residual[i] = std::isinf(rr) && kind != ResidualKind::any_value ? std::copysign(std::ldexp(1.0, rf.emax), rr) : rr;
  }
  return out;
}

// The residual's dtype for add_rounding: f32 beside 16-bit x on half the cases, where the kernel takes it.
DType residual_dtype_for(const CheckContext& ctx, const Case& c) {
  const DType d = c.spec.dtype;
  if ((d != DType::f16 && d != DType::bf16) || (c.spec.data_seed >> 9) % 2 == 0) return d;
  Case probe = c;
  probe.spec.residual_dtype = DType::f32;
  return unavailable_reason(ctx.kernel, probe.problem()) ? d : DType::f32;
}

std::string differ(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b, const Format& f,
                   const char* what, bool zeros_alike) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const bool same = a[i] == b[i] || (zeros_alike && correctly_rounded(f, a[i], b[i]));
    if (!same) return fmt("%s[%zu] differs: %.9g vs %.9g", what, i, bits_to_double(f, a[i]), bits_to_double(f, b[i]));
  }
  if (a.size() != b.size()) return fmt("%s: %zu vs %zu elements", what, a.size(), b.size());
  return "";
}

std::string compare_norm_outputs(const Outputs& fused, const Outputs& plain, const Case& c, const char* against,
                                 bool zeros_alike) {
  const Format f = format_of(c.spec.dtype), sf = format_of(stats_dtype(c.spec.dtype));
  if (auto m = differ(fused.y, plain.y, f, "y", zeros_alike); !m.empty()) return m + std::string(" (fused vs ") + against + ")";
  if (auto m = differ(fused.mean, plain.mean, sf, "mean", zeros_alike); !m.empty()) return m + std::string(" (fused vs ") + against + ")";
  if (auto m = differ(fused.rstd, plain.rstd, sf, "rstd", zeros_alike); !m.empty()) return m + std::string(" (fused vs ") + against + ")";
  return "";
}

// The same case as a plain norm of `x` (values of x's dtype).
Case plain_case(const Case& c, std::vector<double> x) {
  Case p = c;
  p.spec.op = plain(c.spec.op.norm);
  p.spec.residual_dtype.reset();
  p.residual.clear();
  p.x = std::move(x);
  return p;
}

}  // namespace

std::string check_add_rounding(const CheckContext& ctx, const Case& c) {
  const Case cr = with_residual(c, residual_dtype_for(ctx, c), 1);
  if (ctx.ran) *ctx.ran = cr;
  const Outputs got = run_guarded(ctx.kernel, cr);
  if (!got.violation.empty()) return got.violation;
  const Exact exact = exact_answer(cr);
  if (auto m = check_y_within_budget(ctx, cr, got, exact); !m.empty()) return m;
  return check_stats_within_budget(ctx, cr, got, exact);
}

std::string check_add_h_then_norm(const CheckContext& ctx, const Case& c) {
  const Case cr = with_residual(c, c.spec.dtype, 2);
  if (ctx.ran) *ctx.ran = cr;
  const Outputs fused = run_guarded(ctx.kernel, cr);
  if (!fused.violation.empty()) return fused.violation;
  const Format f = format_of(c.spec.dtype);
  std::vector<double> h(fused.h.size());
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = bits_to_double(f, fused.h[i]);
  const Outputs plain = run_guarded(ctx.kernel, plain_case(cr, std::move(h)));
  if (!plain.violation.empty()) return "the plain norm of h: " + plain.violation;
  return compare_norm_outputs(fused, plain, cr, "the plain norm of h as stored", false);
}

std::string check_add_commutes(const CheckContext& ctx, const Case& c) {
  const Case cr = with_residual(c, c.spec.dtype, 3);
  if (ctx.ran) *ctx.ran = cr;
  Case swapped = cr;
  swapped.x = cr.residual;
  swapped.residual = cr.x;
  const Outputs a = run_guarded(ctx.kernel, cr), b = run_guarded(ctx.kernel, swapped);
  if (!a.violation.empty()) return a.violation;
  if (!b.violation.empty()) return "swapped: " + b.violation;
  if (auto m = differ(a.h, b.h, format_of(c.spec.dtype), "h", false); !m.empty()) return m + " (x + residual vs residual + x)";
  return compare_norm_outputs(a, b, cr, "x and residual swapped", false);
}

std::string check_add_residual_zero(const CheckContext& ctx, const Case& c) {
  Case cz = c;
  cz.spec.residual_dtype = c.spec.dtype;
  cz.residual.assign(c.x.size(), 0.0);
  std::mt19937_64 rng(c.spec.data_seed ^ 0x2E50ull);
  for (double& r : cz.residual) r = (rng() & 1) ? -0.0 : 0.0;
  if (ctx.ran) *ctx.ran = cz;
  const Outputs fused = run_guarded(ctx.kernel, cz);
  if (!fused.violation.empty()) return fused.violation;
  const Outputs plain = run_guarded(ctx.kernel, plain_case(cz, c.x));
  if (!plain.violation.empty()) return "the plain norm: " + plain.violation;
  return compare_norm_outputs(fused, plain, cz, "the plain norm of x", true);
}

}  // namespace lnorm::verify
