// The exact quantized answer and its metric (lnorm/quantize.hpp has the definitions).
#include "lnorm/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "dyadic.hpp"
#include "lnorm/add.hpp"
#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/reference.hpp"
#include "rounding.hpp"
#include "scale_value.hpp"
#include "special_values.hpp"

namespace lnorm {
namespace {

using detail::kNaN;
using detail::kInf;
// The default q budget's allowance for the f32 arithmetic after rounding y to x's dtype (quantize.hpp): f32(1/S)
// and the product, 2 roundings of 2^-24 relative each, on a value of at most 2^8 quanta (int8 at 128; fp8 values
// are under 2^4 quanta), with a factor 2 to spare: 2^-24 · 2 · 2^8 · 2 = 2^-14.
constexpr double kRecipeSlack = 0x1p-14;
// The default scale budget's allowance for the division amax_x/qmax in f32 (and a double rounding of it): 2 ulps.
constexpr double kScaleSlack = 2;
// Elements that may hold a group's amax: the double-double value's error is below 2^-90 of the element's
// metric scale times (1 + 2 kappa) (reference.hpp: the fast path's bound, in terms of |x| + |mean| ≤
// (|z| + 2 kappa)/rstd), so an element whose value is below half the largest by more than that cannot be it.
constexpr double kCandidateSlack = 0x1p-90;

double to_double(const detail::Dyadic& d) { return std::ldexp(d.m.convert_to<double>(), static_cast<int>(d.e)); }

// One row's exact answer, and what quantizing it needs.
class RowQuantizer {
 public:
  RowQuantizer(const Problem& p, const QuantSpec& spec)
      : p_(p), spec_(spec), ref_(p), xfmt_(format_of(p.dtype)), f32_(format_of(DType::f32)),
        elems_(static_cast<std::size_t>(p.cols)), yx_(static_cast<std::size_t>(p.cols) * size_of(p.dtype)),
        h_(p.op.prologue == Prologue::residual_add ? static_cast<std::size_t>(p.cols) * size_of(p.residual_dtype) : 0) {}

  // Computes row r's exact y* (x and residual point at the row).
  void run(const void* x, const void* residual, const void* gamma, const void* beta) {
    const void* in = x;
    if (p_.op.prologue == Prologue::residual_add) {  // the norm of the exact h, as `reference` computes it
      add_row(p_, x, residual, p_.cols, h_.data(), nullptr);
      in = h_.data();
    }
    row_ = ref_.run(in, gamma, beta, p_.cols, yx_.data(), elems_.data());
  }
  const void* y_x() const { return yx_.data(); }

  bool finite(std::int64_t i) const { return !std::isnan(e(i).y_hi); }
  double approx(std::int64_t i) const { return e(i).y_hi + e(i).y_lo; }
  double value_x(std::int64_t i) const { return value_at(p_.dtype, yx_.data(), i); }  // round_x(y*_i)

  // The exact ordinal of Q(y*_i / s) (s > 0 finite, or 0: ±Inf saturates, 0/0 is 0); neg_zero: fp8 −0.
  std::int64_t q_ordinal(std::int64_t i, double s, bool& neg_zero) const {
    const QuantFormat f = spec_.format;
    const std::int64_t top = max_ordinal(f), bottom = min_ordinal(f);
    neg_zero = false;
    if (std::isinf(s)) {  // nvfp4's block with code 0: every q ±0, y*'s sign
      neg_zero = has_negative_zero(f) && ref_.compare(i, 0.0) < 0;
      return 0;
    }
    if (s == 0) {
      const int c = ref_.compare(i, 0.0);
      return c > 0 ? top : c < 0 ? bottom : 0;
    }
    std::int64_t k = ordinal_of_code(f, encode(f, approx(i) / s));  // a guess: two comparisons when right
    const auto v = [&](std::int64_t o) { return value_of_ordinal(f, o); };
    const auto even = [](std::int64_t a, std::int64_t b) { return (a & 1) == 0 ? a : b; };
    for (;;) {
      if (k < top) {  // no boundary above the largest value: saturation
        const int c = ref_.compare(i, (v(k) + v(k + 1)) / 2 * s);  // exact: ≤ 9 bits times f32's 24
        if (c > 0) { ++k; continue; }
        if (c == 0) { k = even(k, k + 1); break; }
      }
      if (k > bottom) {
        const int c = ref_.compare(i, (v(k - 1) + v(k)) / 2 * s);
        if (c < 0) { --k; continue; }
        if (c == 0) { k = even(k - 1, k); break; }
      }
      break;
    }
    neg_zero = k == 0 && is_float(f) && ref_.compare(i, 0.0) < 0;
    return k;
  }

  // The exact scales of group g: f32 value (row, group) or E8M0 exponent X (mx, as a double). NaN where a y*
  // of the group is NaN. zero: the group's y* are all 0.
  double exact_scale(std::int64_t g, bool& zero) const {
    const std::int64_t G = spec_.group_size(p_.cols), b = g * G;
    zero = false;
    double amax = 0;
    for (std::int64_t i = b; i < b + G; ++i) {
      if (!finite(i)) return kNaN;
      amax = std::max(amax, std::fabs(approx(i)));
    }
    const double q = qmax(spec_.format);
    double best = -kInf;
    bool any = false;
    for (std::int64_t i = b; i < b + G; ++i) {
      if (std::fabs(approx(i)) + kCandidateSlack * outer_scale(i) * (1 + 2 * row_.kappa) < amax / 2) continue;
      const int sign = ref_.compare(i, 0.0);
      if (sign == 0) continue;
      any = true;
      const auto abs_cmp = [&](double m) { return sign > 0 ? ref_.compare(i, m) : -ref_.compare(i, -m); };  // sign(|y*| − m)
      if (spec_.scaling == Scaling::nvfp4) {
        best = std::max(best, static_cast<double>(nvfp4_code(i, sign)));
      } else if (spec_.pow2_scales()) {
        // The rule's level of |y*| (lnorm/quant.hpp: the largest j with |y*| ≥ B(j), or > for ceil and rceil), decided
        // against the dyadic breakpoints exactly, within the levels the clamp to [−127, 127] leaves apart.
        const int off = mx_offset(spec_), lo = -127 + off, hi = 127 + off;
        const bool strict = info(spec_.exponent_rule()).strict;
        const auto reaches = [&](int j) {
          const int c = abs_cmp(mx_breakpoint(spec_, j));
          return strict ? c > 0 : c >= 0;
        };
        int ex = std::clamp(mx_exponent(spec_, std::fabs(approx(i))) + off, lo, hi);  // a guess: two comparisons when right
        while (ex > lo && !reaches(ex)) --ex;
        while (ex < hi && reaches(ex + 1)) ++ex;
        best = std::max(best, static_cast<double>(ex));
      } else {  // f32(|y*|/qmax): one rounding, decided against midpoints times qmax (exact: 25 bits times ≤ 7)
        const std::uint64_t bits = detail::round_exactly(
            f32_, round_to_ordinal(f32_, std::fabs(approx(i)) / q),
            [&](const detail::Dyadic& m) { return abs_cmp(to_double(m) * q); });
        best = std::max(best, bits_to_double(f32_, bits));
      }
    }
    // No amax (every y* 0), or amax/qmax below f32's range (rounds to 0): scaled like a zero group (quant.hpp).
    // nvfp4: code 0 either way (a block of zeros, or one whose amax·G/6 rounds to 0: q ±0), a zero group only for the first.
    if (spec_.scaling == Scaling::nvfp4) {
      zero = !any;
      return any ? best : 0.0;
    }
    if (!any || (!spec_.pow2_scales() && best == 0)) {
      zero = true;
      return spec_.pow2_scales() ? -127.0 : 1.0;
    }
    if (spec_.pow2_scales()) return std::clamp(best - mx_offset(spec_), -127.0, 127.0);
    return best;
  }

  // What the scale would be from y rounded to x's dtype: f32(amax_x/qmax), or mx's X (default budgets).
  double scale_from_x(std::int64_t g) const {
    const std::int64_t G = spec_.group_size(p_.cols), b = g * G;
    double amax = 0;
    for (std::int64_t i = b; i < b + G; ++i) amax = std::max(amax, std::fabs(value_x(i)));
    if (spec_.scaling == Scaling::nvfp4) return std::isfinite(amax) ? encode(QuantFormat::fp8_e4m3, amax * spec_.global_scale / 6) : kNaN;
    if (spec_.pow2_scales()) return std::isfinite(amax) ? mx_exponent(spec_, amax) : -127.0;
    const auto s = static_cast<float>(amax / qmax(spec_.format));
    return s == 0 ? 1.0 : s;
  }

  // nvfp4: E4M3(|y*_i|·G/6) of a nonzero y*_i (sign: its sign), exactly: the double's code a guess, then G·|y*|
  // against 6·midpoint (≤ 5 significant bits times 3: exact) by compare_scaled, ties to even; saturating at 448.
  std::uint8_t nvfp4_code(std::int64_t i, int sign) const {
    constexpr QuantFormat e4m3 = QuantFormat::fp8_e4m3;
    const double G = spec_.global_scale;
    const auto above = [&](double m) { return sign > 0 ? ref_.compare_scaled(i, G, 6 * m) : -ref_.compare_scaled(i, G, -6 * m); };
    std::int64_t k = ordinal_of_code(e4m3, encode(e4m3, std::fabs(approx(i)) * G / 6));
    const auto v = [&](std::int64_t o) { return value_of_ordinal(e4m3, o); };
    for (;;) {
      if (k < max_ordinal(e4m3)) {
        const int c = above((v(k) + v(k + 1)) / 2);
        if (c > 0 || (c == 0 && (k & 1))) { ++k; continue; }
      }
      if (k > 0) {
        const int c = above((v(k - 1) + v(k)) / 2);
        if (c < 0 || (c == 0 && (k & 1))) { --k; continue; }
      }
      return static_cast<std::uint8_t>(k);
    }
  }

  const RowReference& row() const { return row_; }
  // The kernel's own f32 y error at element i, absolutely: its budget a + b·kappa in f32 ulps of the element's scale,
  // the kappa term at its kappa scale (lnorm/metrics.hpp allowed_ulps: on rows with var < eps/3 the scale floors at
  // rho, while the mean's rounding stays u·kappa·|w|).
  double y_error(std::int64_t i, const QuantBudget& budget) const {
    return allowed_ulps(f32_, Budget{budget.y_a, budget.y_b}, e(i), row_.kappa) * ulp_at(f32_, e(i).scale);
  }

  // Group g's amax (to double precision) and the largest y error in it (y_error: what the kernel's y error can
  // move the amax by).
  void group_extent(std::int64_t g, const QuantBudget& budget, double& amax, double& y_err) const {
    const std::int64_t G = spec_.group_size(p_.cols), b = g * G;
    amax = y_err = 0;
    for (std::int64_t i = b; i < b + G; ++i) {
      amax = std::max(amax, std::fabs(approx(i)));
      y_err = std::max(y_err, y_error(i, budget));
    }
  }

 private:
  const ElementReference& e(std::int64_t i) const { return elems_[static_cast<std::size_t>(i)]; }
  // The scale with LayerNorm's floor of 1 (its kappa scale where rho's floor is below it): what kCandidateSlack's
  // bound is stated against (|w|·(|z| + 2 kappa) and |β| are at most it times 1 + 2 kappa).
  double outer_scale(std::int64_t i) const { return std::max(e(i).scale, e(i).kappa_scale); }
  const Problem& p_;
  QuantSpec spec_;
  RowReferencer ref_;
  Format xfmt_, f32_;
  std::vector<ElementReference> elems_;
  std::vector<std::byte> yx_, h_;
  RowReference row_;
};

using detail::scale_value;  // scale_value.hpp

using detail::read_scale;  // scales as stored → value (f32), X (E8M0; NaN for 255) or the E4M3 code (NaN for its NaN)
using detail::write_scale;

template <class Fn>
void for_row_blocks(std::int64_t rows, int threads, Fn&& fn) {
  const int t = static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(rows, 1)));
  parallel_rows(t, t, [&](std::int64_t tb, std::int64_t te) {
    for (std::int64_t ti = tb; ti < te; ++ti) fn(ti, rows * ti / t, rows * (ti + 1) / t);
  });
}

}  // namespace

float tensor_amax_f32(const Problem& p, const void* x, const void* residual, const void* gamma, const void* beta, std::int64_t rows,
                      int threads) {
  const std::size_t es = size_of(p.dtype), rs = size_of(p.residual_dtype);
  const std::int64_t n = p.cols;
  const int t = static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(rows, 1)));
  std::vector<float> part(static_cast<std::size_t>(t), 0.0f);
  QuantSpec row_spec;  // any spec: RowQuantizer's y* does not depend on it
  row_spec.scaling = Scaling::row;
  for_row_blocks(rows, threads, [&](int ti, std::int64_t begin, std::int64_t end) {
    RowQuantizer rq(p, row_spec);
    float& a = part[static_cast<std::size_t>(ti)];
    for (std::int64_t r = begin; r < end; ++r) {
      rq.run(static_cast<const std::byte*>(x) + static_cast<std::size_t>(r * n) * es,
             residual ? static_cast<const std::byte*>(residual) + static_cast<std::size_t>(r * n) * rs : nullptr, gamma, beta);
      for (std::int64_t i = 0; i < n; ++i)
        if (rq.finite(i)) a = std::max(a, std::fabs(static_cast<float>(rq.approx(i))));
    }
  });
  return *std::max_element(part.begin(), part.end());
}

QuantSpec resolve_global_scale(const Problem& p, QuantSpec spec, const void* x, const void* residual, const void* gamma,
                               const void* beta, std::int64_t rows, int threads) {
  if (needs_global_scale(spec)) spec.global_scale = nvfp4_global_scale(tensor_amax_f32(p, x, residual, gamma, beta, rows, threads));
  return spec;
}

void quantize_reference(const Problem& p, const QuantSpec& spec, const void* x, const void* residual, const void* gamma,
                        const void* beta, std::int64_t rows, int threads, std::uint8_t* q, void* scales, void* y_out) {
  if (needs_global_scale(spec)) throw std::invalid_argument("nvfp4: the global scale is not resolved (resolve_global_scale)");
  const std::size_t es = size_of(p.dtype), rs = size_of(p.residual_dtype);
  const std::int64_t n = p.cols, per_row = spec.scales_per_row(n), G = spec.group_size(n);
  for_row_blocks(rows, threads, [&](int, std::int64_t begin, std::int64_t end) {
    RowQuantizer rq(p, spec);
    for (std::int64_t r = begin; r < end; ++r) {
      rq.run(static_cast<const std::byte*>(x) + static_cast<std::size_t>(r * n) * es,
             residual ? static_cast<const std::byte*>(residual) + static_cast<std::size_t>(r * n) * rs : nullptr, gamma, beta);
      if (y_out) std::copy_n(static_cast<const std::byte*>(rq.y_x()), static_cast<std::size_t>(n) * es,
                             static_cast<std::byte*>(y_out) + static_cast<std::size_t>(r * n) * es);
      for (std::int64_t g = 0; g < n / G; ++g) {
        bool zero = false;
        const double stored = spec.scaling == Scaling::tensor ? spec.scale : rq.exact_scale(g, zero);
        if (per_row) write_scale(spec, scales, r * per_row + g, stored);
        const double s = scale_value(spec, stored);
        for (std::int64_t i = g * G; i < (g + 1) * G; ++i) {
          bool neg_zero = false;
          std::uint8_t code = encode(spec.format, kNaN);  // a NaN y* (or NaN scale): the fp8 NaN, int8 0
          if (rq.finite(i) && !std::isnan(s)) {
            const std::int64_t k = rq.q_ordinal(i, s, neg_zero);  // first: it sets neg_zero
            code = code_of_ordinal(spec.format, k, neg_zero);
          }
          store_code(spec.format, q, r * n + i, code);
        }
      }
    }
  });
}

void QuantSummary::merge(const QuantSummary& o) {
  if (o.max_ulp > max_ulp || (max_ulp_index < 0 && o.max_ulp_index >= 0)) {
    max_ulp = o.max_ulp, max_ulp_index = o.max_ulp_index, max_ulp_got = o.max_ulp_got, max_ulp_target = o.max_ulp_target;
  }
  if (o.worst_excess > worst_excess)
    worst_excess = o.worst_excess, worst_excess_index = o.worst_excess_index, worst_excess_allowed = o.worst_excess_allowed;
  if (o.scale_max_ulp > scale_max_ulp || (scale_max_index < 0 && o.scale_max_index >= 0))
    scale_max_ulp = o.scale_max_ulp, scale_max_index = o.scale_max_index, scale_max_got = o.scale_max_got,
    scale_max_exact = o.scale_max_exact;
  max_finite_ulp = std::max(max_finite_ulp, o.max_finite_ulp);
  elements += o.elements, correctly_rounded += o.correctly_rounded, nonfinite_mismatches += o.nonfinite_mismatches;
  over_budget += o.over_budget, saturated += o.saturated;
  scales += o.scales, scales_over_budget += o.scales_over_budget, zero_groups += o.zero_groups;
  scale_nonfinite_mismatches += o.scale_nonfinite_mismatches;
}

QuantSummary measure_quantized(const Problem& p, const QuantSpec& spec, const void* x, const void* residual,
                               const void* gamma, const void* beta, const std::uint8_t* q, const void* scales,
                               std::int64_t rows, std::int64_t first_row, const QuantBudget& budget, int threads) {
  if (needs_global_scale(spec)) throw std::invalid_argument("nvfp4: the global scale is not resolved (resolve_global_scale)");
  const std::size_t es = size_of(p.dtype), rs = size_of(p.residual_dtype);
  const std::int64_t n = p.cols, per_row = spec.scales_per_row(n), G = spec.group_size(n);
  const QuantFormat f = spec.format;
  const double lo = value_of_ordinal(f, min_ordinal(f)), hi = value_of_ordinal(f, max_ordinal(f));
  const Format f32 = format_of(DType::f32);
  std::vector<QuantSummary> parts(static_cast<std::size_t>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(rows, 1))));
  for_row_blocks(rows, threads, [&](int ti, std::int64_t begin, std::int64_t end) {
    QuantSummary& part = parts[static_cast<std::size_t>(ti)];
    RowQuantizer rq(p, spec);
    for (std::int64_t r = begin; r < end; ++r) {
      rq.run(static_cast<const std::byte*>(x) + static_cast<std::size_t>(r * n) * es,
             residual ? static_cast<const std::byte*>(residual) + static_cast<std::size_t>(r * n) * rs : nullptr, gamma, beta);
      for (std::int64_t g = 0; g < n / G; ++g) {
        // The candidate's scale, and the exact one (measured; and the q budget's reference when the candidate's
        // is not a usable scale: its mismatch is the scale metric's).
        double s = spec.scale;
        // A candidate scale that is no scale (0, negative, NaN or Inf where y* has a finite one): every code of its
        // group fails q's gate too, as a non-finite mismatch. Judged against the exact scale instead, a q of ±max
        // under a zero scale read as exact, and a flat --max-scale-ulp let the whole check pass.
        bool invalid_scale = false;
        double s_exact = kNaN;  // the exact scale as stored, where the candidate's is invalid: the target's
        if (per_row) {
          bool zero = false;
          const double exact = rq.exact_scale(g, zero);
          const double got = read_scale(spec, scales, r * per_row + g);
          const std::int64_t at = (first_row + r) * per_row + g;
          double err = 0, allowed = budget.max_scale_ulp;
          const bool codes = spec.scales_are_codes();  // E8M0 or E4M3: steps between codes
          const bool nvfp4 = spec.scaling == Scaling::nvfp4;
          // E4M3 block scales: any code but NaN and the negative ones (sign bit: code ≥ 128)
          const bool usable = nvfp4 ? !std::isnan(got) && got < 128 : spec.pow2_scales() ? !std::isnan(got) : std::isfinite(got) && got >= 0;
          if (std::isnan(exact)) {
            err = std::isnan(got) || codes ? 0 : (std::isfinite(got) ? kInf : 0);  // NaN row
          } else if (!usable) {
            err = kInf;
          } else if (zero) {
            err = codes || got > 0 ? 0 : kInf;
          } else if (codes) {  // E8M0 exponents, or E4M3 codes of positive values: steps
            err = std::fabs(got - exact);
          } else {
            err = ulp_distance(f32, got, exact);
          }
          if (allowed < 0) {
            const double from_x = rq.scale_from_x(g);
            allowed = codes ? (std::isnan(exact) || std::isnan(from_x) ? 0 : std::fabs(from_x - exact))
                            : kScaleSlack + (std::isnan(exact) ? 0 : ulp_distance(f32, from_x, exact));
            const bool y_budget = budget.y_a > 0 || budget.y_b > 0;
            if ((y_budget || nvfp4) && !std::isnan(exact) && !zero) {
              // The kernel's own y error E moves its amax by at most E: s by E/qmax (in f32 ulps of s*), or mx's
              // exponent by one step where the amax lies within E of a power of two. (nvfp4 without a y budget, as
              // check: E = 0, its f32 steps alone.)
              double amax = 0, E = 0;
              rq.group_extent(g, budget, amax, E);
              if (!y_budget) E = 0;
              if (nvfp4) {
                // amax·G/6 within the y error (and 2^-21 of itself: a kernel's f32 steps, f32(G·f32(amax·f32(1/6))) as
                // FlashInfer computes it) of an E4M3 midpoint: one step either way.
                const double t = amax * spec.global_scale / 6, slack = E * spec.global_scale / 6 + t * 0x1p-21;
                const std::int64_t k = ordinal_of_code(QuantFormat::fp8_e4m3, encode(QuantFormat::fp8_e4m3, t));
                const auto mid = [&](std::int64_t o) {
                  return (value_of_ordinal(QuantFormat::fp8_e4m3, o) + value_of_ordinal(QuantFormat::fp8_e4m3, o + 1)) / 2;
                };
                const bool near = (k < max_ordinal(QuantFormat::fp8_e4m3) && std::fabs(mid(k) - t) <= slack) ||
                                  (k > 0 && std::fabs(mid(k - 1) - t) <= slack);
                allowed += near ? 1 : 0;
              } else if (spec.pow2_scales()) {
                // the rule's breakpoints on either side of amax (powers of two for floor)
                const int j = mx_exponent(spec, amax) + mx_offset(spec);
                allowed += (amax - mx_breakpoint(spec, j) <= E || mx_breakpoint(spec, j + 1) - amax <= E) ? 1 : 0;
              } else {
                allowed += E / qmax(f) / ulp_at(f32, exact);
              }
            }
          }
          part.scales++;
          part.zero_groups += zero;
          part.scale_nonfinite_mismatches += std::isinf(err);
          if (!(err <= allowed)) part.scales_over_budget++;
          if (err > part.scale_max_ulp || part.scale_max_index < 0)
            part.scale_max_ulp = err, part.scale_max_index = at, part.scale_max_got = got, part.scale_max_exact = exact;
          s = usable ? got : exact;
          invalid_scale = !std::isnan(exact) && (!usable || (!codes && !(got > 0)));
          s_exact = exact;
        }
        const double sv = scale_value(spec, s);
        for (std::int64_t i = g * G; i < (g + 1) * G; ++i) {
          const std::int64_t at = (first_row + r) * n + i;
          const std::uint8_t code = load_code(f, q, r * n + i);
          double err = 0, target = kNaN, allowed = budget.max_q_ulp;
          bool exact_code = false;
          if (invalid_scale) {  // reported against y*/s* (the exact scale's), which a valid scale would have met
            err = kInf;
            if (rq.finite(i)) target = std::clamp(rq.approx(i) / scale_value(spec, s_exact), lo, hi);
            if (allowed < 0) allowed = 0.5;
          } else if (!rq.finite(i) || std::isnan(sv)) {  // no real answer: the NaN code (int8, E2M1 have none: not gated)
            exact_code = !has_nan(f) || code_is_nan(f, code);
            err = exact_code ? 0 : kInf;
            if (allowed < 0) allowed = 0.5;
          } else {
            bool neg_zero = false;
            const std::int64_t k = rq.q_ordinal(i, sv, neg_zero);
            const double t = sv == 0 ? (rq.approx(i) > 0 ? kInf : rq.approx(i) < 0 ? -kInf : 0) : rq.approx(i) / sv;
            target = std::clamp(t, lo, hi);
            // Saturation decided it: y*/s at or past the midpoint beyond the largest value (where an unbounded
            // format would round past it); a dynamic scale's amax element sits at ±qmax and is not counted.
            part.saturated += t >= hi + quantum_at(f, hi) / 2 || t <= lo - quantum_at(f, lo) / 2;
            const double got = decode(f, code);
            const double quantum = quantum_at(f, target);
            if (!std::isfinite(got)) {
              err = kInf;
            } else {
              err = std::fabs(got - target) / quantum;
              exact_code = ordinal_of_code(f, code) == k;
            }
            if (allowed < 0) {
              const double xv = rq.value_x(i);
              // A zero scale sends every nonzero y to ±max whatever its error: the target itself, half a quantum
              // (with t = ±Inf here the allowance was infinite, and a q of anything read "max 14 quanta, over budget 0").
              const double tx = sv == 0 ? target : std::clamp(xv / sv, lo, hi);
              // Q(y_x/s) is within half a quantum *at y_x/s* of it, and y_x/s is |tx − target| from y*/s: the two
              // binades differ where rounding y to x's dtype moves it across a power of two (f16's subnormals).
              allowed = (std::isfinite(xv) ? (0.5 * quantum_at(f, tx) + std::fabs(tx - target)) / quantum : 0.5) + kRecipeSlack;
              if (budget.y_a > 0 || budget.y_b > 0) {  // the kernel's own f32 y error, in quanta at y*/s
                allowed += sv == 0 ? 0 : rq.y_error(i, budget) / sv / quantum;
              }
            }
          }
          part.elements++;
          part.correctly_rounded += exact_code;
          if (std::isinf(err)) part.nonfinite_mismatches++;
          else part.max_finite_ulp = std::max(part.max_finite_ulp, err);
          if (!(err <= allowed)) part.over_budget++;
          if (err > part.max_ulp || part.max_ulp_index < 0)
            part.max_ulp = err, part.max_ulp_index = at, part.max_ulp_got = decode(f, code), part.max_ulp_target = target;
          if (err - allowed > part.worst_excess)
            part.worst_excess = err - allowed, part.worst_excess_index = at, part.worst_excess_allowed = allowed;
        }
      }
    }
  });
  QuantSummary out;
  for (const QuantSummary& part : parts) out.merge(part);
  return out;
}

}  // namespace lnorm
