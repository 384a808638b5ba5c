// The params property, for both ops (docs/DESIGN.md "Ops"): gamma/beta stored in f32 beside f16/bf16 x
// (Apex's mixed LayerNorm, FlashInfer, TE), and the gamma offset C of y = ...·(C + gamma) (Gemma's 1 + w).
//   a) the case as drawn is within budget of its exact answer (which uses C + gamma exactly);
//   b) storage is only storage: parameters holding values of x's dtype give the same bits whether they
//      are stored in x's dtype or in f32;
//   c) the offset is only a sum: (C, gamma') gives the same bits as (0, C + gamma') when every C + gamma'
//      is a value of the parameters' format (gamma' = w − C for w in [C/2, 2C], exact by Sterbenz).
#include <cmath>

#include "lnorm/format.hpp"
#include "properties.hpp"

namespace lnorm::verify {

namespace {

std::string same_bits(const Outputs& a, const Outputs& b, const char* what) {
  if (a.y != b.y) {
    for (std::size_t i = 0; i < a.y.size(); ++i)
      if (a.y[i] != b.y[i])
        return fmt("%s: y[%zu] differs (bits %llx vs %llx)", what, i, (unsigned long long)a.y[i], (unsigned long long)b.y[i]);
  }
  if (a.mean != b.mean || a.rstd != b.rstd) return fmt("%s: mean or rstd differs", what);
  return "";
}

}  // namespace

std::string check_params(const CheckContext& ctx, const Case& c) {
  {
    const Outputs got = run_guarded(ctx.kernel, c);
    if (!got.violation.empty()) return got.violation;
    const Exact exact = exact_answer(c);
    if (auto m = check_y_within_budget(ctx, c, got, exact); !m.empty()) return "as drawn: " + m;
    if (auto m = check_stats_within_budget(ctx, c, got, exact); !m.empty()) return "as drawn: " + m;
  }
  const DType d = c.spec.dtype;
  if (c.spec.params() != d) {
    // b) the parameters rounded to x's dtype, stored in f32 and in x's dtype.
    Case wide = c;
    const Format xf = format_of(d);
    for (double& v : wide.gamma) v = round_to_format(xf, v);
    for (double& v : wide.beta) v = round_to_format(xf, v);
    Case narrow = wide;
    narrow.spec.param_dtype = d;
    const Outputs a = run_guarded(ctx.kernel, wide), b = run_guarded(ctx.kernel, narrow);
    if (!a.violation.empty()) return "f32 storage: " + a.violation;
    if (!b.violation.empty()) return "x's dtype storage: " + b.violation;
    if (auto m = same_bits(a, b, "the same gamma/beta values in f32 and in x's dtype"); !m.empty()) return m;
  }
  const double offset = c.spec.gamma_offset;
  if (offset != 0 && !c.gamma.empty()) {
    // c) gamma' = w − C with w = C + gamma clamped into [C/2, 2C] (|C| ≥ 2^-3 here), so w − C is exact.
    const Format pf = format_of(c.spec.params());
    Case with_offset = c, folded = c;
    const double lo = std::min(offset / 2, 2 * offset), hi = std::max(offset / 2, 2 * offset);
    for (std::size_t i = 0; i < c.gamma.size(); ++i) {
      const double w = round_to_format(pf, std::clamp(offset + c.gamma[i], lo, hi));
      with_offset.gamma[i] = w - offset;  // exact: w and C within a factor 2 (Sterbenz)
      folded.gamma[i] = w;
      if (round_to_format(pf, with_offset.gamma[i]) != with_offset.gamma[i]) return "";  // not representable: skip
    }
    folded.spec.gamma_offset = 0;
    const Outputs a = run_guarded(ctx.kernel, with_offset), b = run_guarded(ctx.kernel, folded);
    if (!a.violation.empty()) return "with the offset: " + a.violation;
    if (!b.violation.empty()) return "offset folded into gamma: " + b.violation;
    if (auto m = same_bits(a, b, "(C, gamma) against (0, C + gamma)"); !m.empty()) return m;
  }
  return "";
}

}  // namespace lnorm::verify
