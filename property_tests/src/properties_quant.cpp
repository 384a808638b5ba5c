// The quantized outputs' property (docs/DESIGN.md "Quantized outputs"), for every kernel that declares the
// quantized epilogue, on every forward op:
//   quantized   on each case, two format × scaling specs drawn from its seed (every pair of lnorm/quant.hpp's
//               tables that exists over a run: mx takes the OCP fp8 formats only), the kernel's q and scales:
//     - written, every element and scale, and deterministic (two runs over different prefills agree);
//     - accurate: within the metric's budget (lnorm/quantize.hpp: 0.5 quantum + what rounding y to x's dtype can
//       add + the kernel's own f32 y error, its f32 y budget moved into quanta), scales likewise;
//     - exact laws of the scaling, on q itself: a row or group scale is its amax over qmax, so the amax element
//       quantizes to ±max (the largest code) in every finite, nonzero group; an mx exponent is floor(log2 amax) −
//       emax_elem, so the group's largest |q| lies in [2^emax_elem, max] (a ceil, or the wrong emax, leaves it a
//       binade low).
// Tensor scales are drawn around the rows' exact amax/qmax (× 2^k, k in [−2, 2], and × 1.375): some cases
// saturate, some use a fraction of the range.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "lnorm/guarded_operands.hpp"
#include "lnorm/quant_contract.hpp"
#include "lnorm/quantize.hpp"
#include "quant_decisions.hpp"
#include "properties.hpp"

namespace lnorm::verify {
namespace {

struct Drawn {
  QuantSpec spec;
  std::string text;
};

// A spec from the part tables' rows (lnorm/quant.hpp), through the one parser: group:G's G and tensor's scale as given;
// a global scale (nvfp4) given, or 0: the tensor's own from y_exact.
QuantSpec spec_of(const FormatInfo& f, const ScalingInfo& sc, std::int64_t group, float scale, const std::vector<double>& y_exact,
                  float global_scale = 0, MxRule rule = MxRule::floor, ScaleFormat sf = ScaleFormat::f32) {
  std::string syntax(sc.syntax);
  if (sc.group_given) syntax = syntax.substr(0, syntax.find(':') + 1) + std::to_string(group);
  QuantSpec s = parse_quant_spec(f.name, syntax, sc.scale_given ? std::optional<double>(scale) : std::nullopt, 0, {},
                                 sc.global_scale && global_scale > 0 ? std::optional<double>(global_scale) : std::nullopt,
                                 sc.scaling == Scaling::mx ? info(rule).name : std::string_view(),
                                 sc.storage == ScaleStorage::f32 ? info(sf).name : std::string_view());
  if (needs_global_scale(s)) {
    // resolve_global_scale's answer (lnorm/quantize.hpp): 2688 over the largest |y*| rounded to f32, from y*'s double
    float amax = 0;
    for (double v : y_exact)
      if (!std::isnan(v)) amax = std::max(amax, std::fabs(static_cast<float>(v)));
    s.global_scale = nvfp4_global_scale(amax);
  }
  return s;
}

// Whether a scaling's fixed groups fit the row (mx: 32 | cols) and it takes the format (a packed format: an even row).
bool fits(const FormatInfo& f, const ScalingInfo& sc, std::int64_t cols) {
  return takes(sc.scaling, f.format) && (sc.fixed_group == 0 || cols % sc.fixed_group == 0) && (!is_packed(f.format) || cols % 2 == 0);
}

// The i-th spec of a case (i = 0, 1): the seed picks a scaling, then a format it takes (scaling first: each scaling
// is drawn as often however many formats take it, mx as often as row); group:G takes a divisor of the row
// (8·2^k up to 128), else row; mx where 32 does not divide the row gives row.
Drawn draw_spec(const Case& c, const std::vector<double>& y_exact, std::int64_t cols, int i) {
  std::mt19937_64 rng(c.spec.data_seed * 2 + static_cast<std::uint64_t>(i) + 0x9a4717u);
  const ScalingInfo& row = info(Scaling::row);
  const ScalingInfo* sc = &kScalingTable[rng() % std::size(kScalingTable)];
  std::vector<const FormatInfo*> taken;
  const auto formats_of = [&](const ScalingInfo& s) {
    for (const FormatInfo& fi : kFormatTable)
      if (takes(s.scaling, fi.format) && (!is_packed(fi.format) || cols % 2 == 0)) taken.push_back(&fi);
  };
  formats_of(*sc);
  if (taken.empty()) formats_of(*(sc = &row));  // none fits (nvfp4's fp4 on an odd row): row's
  const FormatInfo& f = *taken[rng() % taken.size()];
  if (!fits(f, *sc, cols)) sc = &row;
  std::int64_t group = 0;
  if (sc->group_given) {
    std::int64_t g = 8 << (rng() % 5);
    while (g > 1 && cols % g != 0) g /= 2;
    if (g <= 1 || g == cols) sc = &row;
    else group = g;
  }
  float sf = 0;
  if (sc->scale_given) {
    double amax = 0;
    for (double v : y_exact)
      if (std::isfinite(v)) amax = std::fmax(amax, std::fabs(v));
    const double base = amax > 0 && std::isfinite(amax) ? amax / f.qmax : 1.0;
    const double scale = std::ldexp(base, static_cast<int>(rng() % 5) - 2) * ((rng() & 1) ? 1.375 : 1.0);
    sf = static_cast<float>(scale);
    if (!(std::isfinite(sf) && sf > 0)) sf = 1.0f;
  }
  // nvfp4: the tensor's own G half the time, else one given: a power of two or a 24-bit one, far enough up that block
  // scales saturate at 448 in some draws
  float gs = 0;
  if (sc->global_scale && rng() % 2) gs = static_cast<float>(std::ldexp(rng() % 2 ? 1.0 : 1.2999999523162842, static_cast<int>(rng() % 24) - 6));
  // mx: a rule of the table (floor, OCP's, as often as the other three together)
  const MxRule rule = rng() % 2 ? MxRule::floor : kMxRuleTable[rng() % std::size(kMxRuleTable)].rule;
  // row and group: UE8M0 power-of-two scales one time in three
  const ScaleFormat scale_format = rng() % 3 == 0 ? ScaleFormat::ue8m0 : ScaleFormat::f32;
  const QuantSpec s = spec_of(f, *sc, group, sf, y_exact, gs, rule, scale_format);
  return {s, describe(s)};
}

// The specs a case tries, in order: eight draws, then every format × scaling (tensor at the rows' amax/qmax, group
// at the largest divisor of the row up to 128), so that a kernel that writes only some of them (a plugin's static
// FP8 kernel) is checked on those every case. The first two the kernel takes are checked.
std::vector<Drawn> candidate_specs(const Case& c, const std::vector<double>& y_exact, std::int64_t cols) {
  std::vector<Drawn> out;
  for (int i = 0; i < 8; ++i) out.push_back(draw_spec(c, y_exact, cols, i));
  double amax = 0;
  for (double v : y_exact)
    if (std::isfinite(v)) amax = std::fmax(amax, std::fabs(v));
  std::int64_t g = 128;
  while (g > 1 && cols % g != 0) g /= 2;
  for (const FormatInfo& f : kFormatTable)
    for (const ScalingInfo& sc : kScalingTable) {
      if (sc.group_given && (g <= 1 || g == cols)) continue;
      if (!fits(f, sc, cols)) continue;
      float sf = static_cast<float>(amax > 0 && std::isfinite(amax) ? amax / f.qmax : 1.0);
      if (!(std::isfinite(sf) && sf > 0)) sf = 1.0f;
      const QuantSpec s = spec_of(f, sc, g, sf, y_exact);
      out.push_back({s, describe(s)});
    }
  return out;
}

// Every format × scaling once: tensor (scale 1: decision_case sets its own), row, group:32, mx (fp8 only).
std::vector<QuantSpec> every_spec() {
  std::vector<QuantSpec> out;
  for (const FormatInfo& f : kFormatTable)
    for (const ScalingInfo& sc : kScalingTable)
      if (takes(sc.scaling, f.format)) {
        if (sc.scaling == Scaling::mx)  // every rule
          for (const MxRuleInfo& r : kMxRuleTable) out.push_back(spec_of(f, sc, 32, 1.0f, {}, 1.0f, r.rule));
        else if (sc.storage == ScaleStorage::f32)  // both scale formats
          for (const ScaleFormatInfo& sf : kScaleFormatTable) out.push_back(spec_of(f, sc, 32, 1.0f, {}, 1.0f, MxRule::floor, sf.format));
        else
          out.push_back(spec_of(f, sc, 32, 1.0f, {}, 1.0f));
      }
  return out;
}

// The kernel's f32 y budget: the CPU kernels quantize their f32 y, whatever x's dtype (QuantBudget::y_a/y_b).
Budget f32_y_budget(const CheckContext& ctx, Op op) {
  static const Budgets builtin = Budgets::builtin();
  Op base = op;
  base.epilogue = Epilogue::y_as_x;
  try {
    return builtin.for_kernel(base, ctx.kernel.name, DType::f32).y;
  } catch (const BudgetError&) {
    return ctx.budget.y;
  }
}

}  // namespace

QuantOutputs run_quantized(const KernelInfo& kernel, const Case& c, const QuantSpec& spec, int threads, int prefill,
                           bool hand_y) {
  QuantOutputs out;
  Problem p;
  try {
    p = set_quant(c.problem(threads), spec);
  } catch (const std::invalid_argument& e) {
    out.violation = "harness: " + describe(spec) + ": " + e.what();
    return out;
  }
  if (const auto why = unavailable_reason(kernel, p)) {
    out.violation = "harness: the kernel declines " + describe(spec) + ": " + *why;
    return out;
  }
  const KernelInputs in = kernel_inputs(c);
  // The operands as run_guarded hands them (guards, the inputs' bytes, h written), but mean and rstd: the quantized
  // property reads q and the scales, and quant_y only where asked for.
  OperandSet optional;
  if (hand_y) optional.add(Operand::quant_y);
  GuardedOperands ops(p,
                      InputValues{}.set(Operand::x, in.x).set(Operand::residual, in.residual).set(Operand::gamma, c.gamma).set(Operand::beta, c.beta),
                      c.spec.misalign, optional);
  ops.prefill(static_cast<std::uint8_t>(prefill));  // q and the scales: an element left unwritten differs between two prefills
  kernel.run(p, ops.tensors());
  if (std::string v = ops.check(); !v.empty()) {
    out.violation = "harness: " + describe(spec) + ": " + v.substr(std::string_view("harness: ").size());
    return out;
  }
  const auto bytes_of = [&](Operand o) { return ops.find(o) ? ops.find(o)->snapshot() : std::vector<std::byte>{}; };
  const std::vector<std::byte> q = bytes_of(Operand::q);
  out.q.resize(q.size());
  std::memcpy(out.q.data(), q.data(), q.size());
  out.scales = bytes_of(Operand::scales);
  if (hand_y) {
    const std::vector<std::byte> y = bytes_of(Operand::quant_y);
    out.handed_y.resize(y.size() / sizeof(float));
    std::memcpy(out.handed_y.data(), y.data(), y.size());
  }
  return out;
}

namespace {

bool hands_y(const KernelInfo& k) { return k.takes.quant_input == QuantInput::f32_y || k.takes.quant_input == QuantInput::x_dtype_y; }

// Part (2) of the gate on the y the kernel handed out: every code and scale the contract applied to that y, bit for
// bit (lnorm/quant_contract.hpp). An x_dtype_y kernel's y must be values of x's dtype.
std::string check_consistency(const CheckContext& ctx, const Case& c, const Drawn& drawn, const QuantOutputs& r) {
  const std::int64_t rows = c.spec.rows(), cols = c.spec.cols(), n = rows * cols;
  if (ctx.kernel.takes.quant_input == QuantInput::x_dtype_y) {
    const Format xf = format_of(c.spec.dtype);
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = r.handed_y[static_cast<std::size_t>(i)];
      if (!std::isnan(v) && round_to_format(xf, v) != v)
        return fmt("%s: the kernel declares it quantizes its y in %s, but handed y[%lld] = %.9g is not a %s value", drawn.text.c_str(),
                   std::string(name(c.spec.dtype)).c_str(), static_cast<long long>(i), v, std::string(name(c.spec.dtype)).c_str());
    }
  }
  const ConsistencySummary cs = measure_consistency(drawn.spec, ConsistencyRule::contract, r.handed_y.data(), rows, cols, r.q.data(),
                                                    r.scales.empty() ? nullptr : r.scales.data());
  ctx.worst.add("q_consistency_codes", static_cast<double>(cs.codes));
  ctx.worst.add("q_consistency_scales", static_cast<double>(cs.scales));
  if (cs.pass()) return "";
  return drawn.text + ": the quantizer is not the contract applied to the y it was handed (" + std::string(name(ctx.kernel.takes.quant_input)) +
         "): " + describe(cs, drawn.spec);
}

// The exact y* of a case, element by element (y_hi).
std::vector<double> exact_y(const Case& c) {
  const Exact exact = exact_answer(c);
  std::vector<double> y(exact.elems.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = exact.elems[i].y_hi;
  return y;
}

// One case, one spec: q and the scales written and deterministic; (1) q against y* within its budget, and the scaling's
// laws; (2) the quantizer against the contract on the y it was handed (or, exact_y and the _cr kernels, on y*).
// y_exact: exact_y(c), computed once per case by the caller.
std::string check_spec(const CheckContext& ctx, const Case& c, const Drawn& drawn, const Budget& yb,
                       const std::vector<double>& y_exact) {
  const QuantSpec& spec = drawn.spec;
  const DType d = c.spec.dtype, pd = c.spec.params(), rd = c.spec.residual();
  const bool fused = c.spec.op.prologue == Prologue::residual_add;
  const int mis = c.spec.misalign;
  const Problem p = set_quant(c.problem(1), spec);
  const KernelInputs in = kernel_inputs(c);
  const Buffer x(d, in.x, mis), res(rd, in.residual, mis), g(pd, c.gamma, mis), b(pd, c.beta, mis);  // for the metric
  const std::int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  const std::int64_t per_row = spec.scales_per_row(cols);
  const bool hand = hands_y(ctx.kernel);
  // Two runs over different prefills: an element either run left alone differs between them.
  const QuantOutputs runs[2] = {run_quantized(ctx.kernel, c, spec, 1, 0x00, hand), run_quantized(ctx.kernel, c, spec, 1, 0xff, hand)};
  for (const QuantOutputs& r : runs)
    if (!r.violation.empty()) return r.violation;
  for (std::int64_t i = 0; i < n; ++i)
    if (const int a = load_code(spec.format, runs[0].q.data(), i), b = load_code(spec.format, runs[1].q.data(), i); a != b)
      return fmt("harness: %s: q element %lld unwritten or not deterministic (0x%02x vs 0x%02x)", drawn.text.c_str(),
                 static_cast<long long>(i), a, b);
  if (runs[0].scales != runs[1].scales) return "harness: " + drawn.text + ": a scale unwritten or not deterministic";
  if (hand && std::memcmp(runs[0].handed_y.data(), runs[1].handed_y.data(), runs[0].handed_y.size() * sizeof(float)) != 0)
    return "harness: " + drawn.text + ": an element of the handed y (Tensors::quant_y) not deterministic";
  const QuantOutputs& r = runs[0];
  QuantBudget qb;
  qb.y_a = yb.a, qb.y_b = yb.b;
  const QuantSummary m = measure_quantized(p, spec, x.data(), fused ? res.data() : nullptr,
                                           c.gamma.empty() ? nullptr : g.data(), c.beta.empty() ? nullptr : b.data(),
                                           r.q.data(), per_row ? r.scales.data() : nullptr, rows, 0, qb, 1);
  ctx.worst.note("q_quanta", m.max_ulp);
  ctx.worst.add("q_elements", static_cast<double>(m.elements));
  ctx.worst.add("q_correctly_rounded", static_cast<double>(m.correctly_rounded));
  if (!m.q_pass())
    return fmt("%s: q element %lld is %.4g quanta from y*/s (allowed %.4g; worst %.4g at %lld: got %.9g, y*/s %.9g)",
               drawn.text.c_str(), static_cast<long long>(m.worst_excess_index), m.worst_excess + m.worst_excess_allowed,
               m.worst_excess_allowed, m.max_ulp, static_cast<long long>(m.max_ulp_index), m.max_ulp_got, m.max_ulp_target);
  if (!m.scales_pass())
    return fmt("%s: scale %lld is %.4g %s from the exact one (got %.9g, exact %.9g)", drawn.text.c_str(),
               static_cast<long long>(m.scale_max_index), m.scale_max_ulp,
               std::string(spec.storage().unit).c_str(), m.scale_max_got, m.scale_max_exact);
  if (hand) {
    if (auto msg = check_consistency(ctx, c, drawn, r); !msg.empty()) return msg;
  } else if (ctx.kernel.takes.quant_input == QuantInput::not_handed) {
    ctx.worst.add("q_consistency_unchecked", static_cast<double>(n));
  }
  // A kernel that decides from y* (exact_y) or claims y correctly rounded (budgets.toml correctly_rounded = 1: the _cr
  // kernels) claims q and the scales exact too: the contract applied to y* itself, the exact y* divided by the exact
  // scale and rounded once (kernels/cpu/quant_exact.hpp).
  if (ctx.kernel.takes.quant_input == QuantInput::exact_y || ctx.budget.min_correctly_rounded >= 1.0) {
    if (m.correctly_rounded != m.elements)
      return fmt("%s: %lld of %lld q elements not the exact y*/s rounded once (worst %.4g quanta at %lld: got %.9g, y*/s %.9g)",
                 drawn.text.c_str(), static_cast<long long>(m.elements - m.correctly_rounded), static_cast<long long>(m.elements),
                 m.max_ulp, static_cast<long long>(m.max_ulp_index), m.max_ulp_got, m.max_ulp_target);
    if (m.scale_max_ulp != 0)
      return fmt("%s: scale %lld is %.4g %s from the exact one (got %.9g, exact %.9g)", drawn.text.c_str(),
                 static_cast<long long>(m.scale_max_index), m.scale_max_ulp, std::string(spec.storage().unit).c_str(),
                 m.scale_max_got, m.scale_max_exact);
  }
  if (!spec.has_scales()) return "";
  // The scaling's laws on q: per finite nonzero group, the amax element at ±max (row, group) or the largest |q|
  // in [2^emax_elem, max] (mx).
  const std::int64_t G = spec.group_size(cols);
  const double top = qmax(spec.format);
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t grp = 0; grp < cols / G; ++grp) {
      bool finite = true, nonzero = false;
      double largest = 0;
      for (std::int64_t i = row * cols + grp * G; i < row * cols + (grp + 1) * G; ++i) {
        const double v = y_exact[static_cast<std::size_t>(i)];
        finite &= std::isfinite(v);
        nonzero |= v != 0;
        largest = std::fmax(largest, std::fabs(decode(spec.format, load_code(spec.format, r.q.data(), i))));
      }
      if (!finite || !nonzero || std::isnan(largest)) continue;
      // The laws hold where the scale is a normal f32 (a subnormal s has too few bits to make amax/s qmax) and the
      // mx exponent is not clamped at ±127; and, as the metric, not for a group the kernel saw as zeros.
      const std::int64_t at = row * per_row + grp;
      if (spec.pow2_scales()) {
        const int code = static_cast<int>(r.scales[static_cast<std::size_t>(at)]);
        // the law below is mx floor's; the other rules' exponents (UE8M0's rceil) are gated exactly by the scale metric alone
        if (code == 0 || code == 254 || spec.exponent_rule() != MxRule::floor) continue;
      } else if (spec.scaling == Scaling::nvfp4) {
        // A normal E4M3 code is within 1/16 of amax·G/6, so amax/s lies in [5.65, 6.4] and rounds to 6; a subnormal
        // one (c < 8) may be a third off, and 0 has no scale.
        if ((static_cast<int>(r.scales[static_cast<std::size_t>(at)]) & 0x7f) < 8) continue;
      } else {
        float sv;
        std::memcpy(&sv, r.scales.data() + at * 4, 4);
        if (!(sv >= std::numeric_limits<float>::min()) || sv == 1.0f) continue;
      }
      if (spec.scaling == Scaling::mx) {
        if (largest != 0 && largest < std::ldexp(1.0, emax_elem(spec.format)))
          return fmt("%s: row %lld group %lld's largest |q| is %g, below 2^%d: its E8M0 exponent is too large",
                     drawn.text.c_str(), static_cast<long long>(row), static_cast<long long>(grp), largest,
                     emax_elem(spec.format));
      } else if (largest != 0 && largest != top) {
        return fmt("%s: row %lld group %lld's largest |q| is %g, not %g: its scale is not its amax over qmax",
                   drawn.text.c_str(), static_cast<long long>(row), static_cast<long long>(grp), largest, top);
      }
    }
  return "";
}

}  // namespace

std::string check_quantized(const CheckContext& ctx, const Case& c) {
  if (!ctx.kernel.takes.epilogues.contains(Epilogue::quantized) || c.spec.dtype == DType::f64) return "";
  const Problem base = c.problem(1);
  const std::int64_t cols = base.cols;
  const std::vector<double> y_exact = exact_y(c);
  const Budget yb = f32_y_budget(ctx, c.spec.op);
  int checked = 0;
  std::string declined;
  for (const Drawn& drawn : candidate_specs(c, y_exact, cols)) {
    if (checked == 2) break;
    Problem p;
    try {
      p = set_quant(base, drawn.spec);
    } catch (const std::invalid_argument& e) {
      return "harness: " + drawn.text + ": " + e.what();
    }
    if (const auto why = unavailable_reason(ctx.kernel, p)) {  // a format or scaling it does not write
      if (declined.empty()) declined = drawn.text + " (" + *why + ")";
      continue;
    }
    if (auto msg = check_spec(ctx, c, drawn, yb, y_exact); !msg.empty()) return msg;
    // The same spec on a case dense in its decisions (quant_decisions.hpp): exact ties in the y handed over, scales
    // one rounding from another, amax just below a power of two, zero and NaN groups. A kernel that declines the
    // case's conventions (its gamma without offset, no beta, eps 0) is checked on the generated case alone.
    const DecisionCase dc = decision_case(c, drawn.spec, checked);
    ++checked;
    if (unavailable_reason(ctx.kernel, set_quant(dc.c.problem(1), dc.spec))) continue;
    if (auto msg = check_spec(ctx, dc.c, {dc.spec, describe(dc.spec)}, yb, exact_y(dc.c)); !msg.empty()) {
      if (ctx.ran) *ctx.ran = dc.c;
      return msg + " [on the decision-dense case]";
    }
  }
  if (checked == 0) return "harness: the kernel declines every format and scaling, e.g. " + declined;
  // And one more decision-dense case, its format × scaling picked by the case's seed among every_spec() (every
  // combination of the part tables), so that each one (mx's exponent rule above all, which the draws above reach in
  // one case of six) is decided many times a run.
  // Among the ones the kernel takes, a scaling first, then one of its specs (formats, rules, scale formats), so that
  // each scaling is decided as often however many variants it has, and a kernel that declines some still gets one.
  std::vector<std::vector<QuantSpec>> by_scaling(std::size(kScalingTable));
  for (const QuantSpec& s : every_spec())
    if (!unavailable_reason(ctx.kernel, set_quant(decision_case(c, s, 2).c.problem(1), s)))
      by_scaling[static_cast<std::size_t>(s.scaling)].push_back(s);
  std::erase_if(by_scaling, [](const std::vector<QuantSpec>& v) { return v.empty(); });
  if (by_scaling.empty()) return "";
  const std::vector<QuantSpec>& pick = by_scaling[c.spec.data_seed % by_scaling.size()];
  const QuantSpec& extra = pick[(c.spec.data_seed / by_scaling.size()) % pick.size()];
  const DecisionCase dc = decision_case(c, extra, 2);
  const Problem dp = set_quant(dc.c.problem(1), dc.spec);
  if (unavailable_reason(ctx.kernel, dp)) return "";
  if (auto msg = check_spec(ctx, dc.c, {dc.spec, describe(dc.spec)}, yb, exact_y(dc.c)); !msg.empty()) {
    if (ctx.ran) *ctx.ran = dc.c;
    return msg + " [on the decision-dense case]";
  }
  return "";
}

}  // namespace lnorm::verify
