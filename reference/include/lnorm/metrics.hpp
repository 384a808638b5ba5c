// The error metric of every output, in one place (docs/DESIGN.md "Measuring error", docs/verify.md "How error
// is measured"): `check`, `verify`, `report`, the Python module and the C++ library all measure through these.
//   y:    scaled ulp error against the exact element (scaled_ulp_error), in ulps of the *compute* format
//   mean: |mean − mean*| in ulps of max(|mean*|, sqrt(var + eps)) (stat_error, Stat::mean)
//   rstd: plain ulp distance to rstd* rounded once (stat_error, Stat::rstd)
// A non-finite mismatch — NaN or ±Inf where the exact answer is finite, a finite value where it is NaN,
// ±Inf where the exact answer does not round to that infinity — has error +Inf: it is never "0 ulp".
//
// The allowance model. A correct kernel computes an output in its compute format C (f32 for f16, bf16 and f32
// outputs; f64 for f64) with some error E, then rounds it once to the storage format F. So an output is judged
// in two parts, each where it arises:
//   - the one rounding to F is free: an output of a narrower F is measured from the *interval of reals that round
//     to it* (0 when it is correctly rounded), so it costs nothing relative to the value itself;
//   - what is left is the computation's own error, measured in ulps of C at the element's scale s (the size of
//     the terms it is formed from), and gated by a + b·kappa of those ulps.
// Before this model a 16-bit output's error was counted in ulps of F at s: an allowance 2^16 (bf16) or 2^13
// (f16) times wider than the computation makes, through which a bf16 dbeta of zeros, y + 0.006 and a dropped
// mean(g) all passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_set>

#include "lnorm/format.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {

// The format an output stored in f is computed in by a correct kernel: f32 for f16, bf16 and f32 (every kernel
// here, PyTorch's and ONNX Runtime's 16-bit norms accumulate and normalize in f32), f64 for f64.
inline Format compute_format(const Format& f) { return format_of(f.dtype == DType::f64 ? DType::f64 : DType::f32); }

// Allowed scaled-ulp error per element: a + b·kappa (kappa of the element's row), in ulps of the compute format.
struct Budget {
  double a = 8;
  double b = 1;
  // b = 0 means no kappa term even where kappa overflows double (0·Inf would be NaN, which no error exceeds).
  // The kappa term at an element whose scale is its kappa scale (every output but LayerNorm's y on rows with
  // var < eps/3: allowed_ulps has the general form).
  double allowed(double kappa) const { return b == 0 ? a : a + b * kappa; }
};

// Scaled ulp error of one output value `got` (a value of format f) against the exact element: |signed_error|.
// +Inf for a non-finite mismatch; 0 for NaN where the exact answer is NaN.
double scaled_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                        const ElementReference& exact);

// The signed error of a finite output against a finite exact value, in ulps of the compute format at the
// element's scale: (p − y*)/ulp_C(s), where p is got itself when f is its own compute format (f32, f64), and for
// a narrower f the point nearest y* of the interval of reals that round to got (so 0 when got is correctly
// rounded, and at most a kernel's own error E when got is its C value, off by E, rounded once). Positive when
// got lies above y*. NaN where either side is not finite (scaled_ulp_error has the non-finite rules).
double signed_scaled_error(const Format& f, double got, std::uint64_t got_bits, const ElementReference& exact);

// |got − y*| in ulps of f itself at the element's scale, the rounding to f included (the non-finite rules as
// scaled_ulp_error): for an output whose only error is its one rounding, h = x + residual (ErrorSummary::storage_units).
double storage_ulp_error(const Format& f, double got, std::uint64_t got_bits, std::uint64_t exact_bits,
                         const ElementReference& exact);

// The error of an output `got` against a real target (a metamorphic law's value rather than an exact reference)
// at scale s, measured as against y*: from got's rounding interval, in ulps of the compute format at s. +Inf
// where one side is not finite and they differ.
double scaled_error_to(const Format& f, double got, double target, double scale);

// One ulp of f in ulps of its compute format at the same scale, 2^(p_C − p_F): what an error that arises in f (x's
// own rounding, as a metamorphic law's input) costs in the metric's units. 1 for f32 and f64.
inline double storage_ulp_in_compute_ulps(const Format& f) {
  return static_cast<double>(std::int64_t{1} << (compute_format(f).precision - f.precision));
}

// The allowance at one element in scaled ulps: a + b·kappa, the kappa term measured at the element's kappa_scale
// (the mean's rounding, u·kappa·|w|, is an absolute error in z, whatever the scale's floor: reference.hpp).
double allowed_ulps(const Format& f, const Budget& budget, const ElementReference& exact, double kappa);

// The most |got − y*| an output within `ulps` scaled ulps can show: ulps·ulp_C(s), plus, for a storage format
// narrower than C, its one rounding (half an ulp of f at |y*| + that). Two outputs within budget of the same y*
// differ by at most the sum of theirs: what the metamorphic properties compare against.
double allowed_distance(const Format& f, const ElementReference& exact, double ulps);

// Bit-identical to the exact answer rounded once (+0 and -0 are the same value; NaN matches NaN).
bool correctly_rounded(const Format& f, std::uint64_t got_bits, std::uint64_t exact_bits);

// |ordinal(got) − ordinal(exact)|: plain ulp distance between two values of f. NaN/NaN gives 0; a NaN on
// one side only gives +Inf. Infinities are ordinals like any other (FLT_MAX and +Inf are 1 apart): use
// stat_error to measure a statistic, which names an infinity where none belongs a mismatch.
double ulp_distance(const Format& f, double got, double exact);

enum class Stat { mean, rstd };

// Error of a per-row statistic `got` (a value of the stats format f) against its row's exact value:
//   mean: |got − mean*| / ulp(max(|mean*|, sqrt(var + eps))): an error δ in the mean moves every z by
//         δ/sqrt(var + eps), so that is the size it is measured against (a plain ulp distance would read
//         a mean of 4.66e-10 against an exact 0 as 8e8 ulp, and pass only an exact 0);
//   rstd: ulp_distance(got, rstd*) (rstd* is never near 0: its plain ulp is its relative error).
// +Inf for a non-finite mismatch (as above; the exact mean and rstd of a row holding NaN/Inf are NaN,
// and rstd* is +Inf where var + eps == 0); 0 for NaN where the exact value is NaN.
double stat_error(Stat s, const Format& f, double got, const RowReference& exact);

struct ErrorSummary {
  std::int64_t elements = 0;
  std::int64_t correctly_rounded = 0;
  std::int64_t nonfinite_mismatches = 0;
  std::int64_t over_budget = 0;  // elements (non-finite mismatches included) over their allowance
  // The worst scaled ulp error: +Inf when there is any non-finite mismatch (then max_ulp_index is the
  // first one's). max_finite_ulp is the worst over the elements without one.
  double max_ulp = 0;
  std::int64_t max_ulp_index = -1;
  double max_ulp_kappa = 0, max_ulp_got = 0, max_ulp_exact = 0;
  double max_finite_ulp = 0;
  std::int64_t first_nonfinite_mismatch_index = -1;
  // The element furthest over (or least under) its own allowance: where a FAIL is, which need not be the element
  // of the largest error (an element of a large-kappa row may err more and still be within its budget).
  double worst_excess = -std::numeric_limits<double>::infinity();  // max of e − allowed
  std::int64_t worst_excess_index = -1;
  double worst_excess_error = 0, worst_excess_allowed = 0, worst_excess_kappa = 0, worst_excess_got = 0,
         worst_excess_exact = 0;

  // The bias gate (docs/verify.md "The mean signed error"): a per-element allowance cannot see an error spread
  // thinly over every element in one direction (beta added twice, y + 0.006, n − 1, a dropped mean(g)), so the
  // mean of the signed errors is gated too:
  //   |mean signed error| ≤ 0.5 + 3·mean(a)/sqrt(units) + mean(b·kappa part)
  // - 0.5: a correctly rounded output's mean lies within it (every element does);
  // - the flat part a of each allowance (the kernel's own roundings): what a unit shares (a row's mean and rstd
  //   rounding, within a) has no preferred sign and averages out over independent units; a uniform shift in ±a
  //   has sd a/sqrt(3), so 3·a/sqrt(units) is over 5 sd;
  // - the kappa part (a mean rounded to the working format): it may share its sign across rows (Σx·fl(1/n) on rows
  //   whose means have one sign), so it is allowed whole.
  // Units are the independent parts, counted once per distinct input (add_unit with unit_key): rows for y and dx,
  // columns for dgamma and dbeta. Identical rows (a broadcast input) or identical columns (a constant dy) share
  // their errors and count as one. No unit leaves the bias ungated (h, a recipe's y). Sums are exact in fixed
  // point (2^-20 scaled ulp, each term clamped to ±2^40), so the mean does not depend on how rows were split.
  static constexpr double kBiasFloor = 0.5;   // a correctly rounded output's largest mean signed error
  static constexpr double kBiasSpread = 3.0;  // sds of the units' shared errors kept as margin (above)
  std::unordered_set<std::uint64_t> unit_keys;  // the distinct units that added a signed element
  std::int64_t signed_elements = 0;             // elements with a finite signed error (both sides finite)
  __extension__ typedef __int128 Fixed;  // GCC's and Clang's 128-bit integer (no ISO C++ type is as wide)
  Fixed signed_fixed = 0, flat_fixed = 0, kappa_fixed = 0;
  // Measure in ulps of the output's own format (|got − y*|/ulp_f(s), the rounding included), not of its compute
  // format: h's, whose only error is its one rounding (a double-rounded 16-bit h must not read 0).
  bool storage_units = false;

  double correctly_rounded_fraction() const {
    return elements ? static_cast<double>(correctly_rounded) / static_cast<double>(elements) : 1.0;
  }
  std::int64_t units() const { return static_cast<std::int64_t>(unit_keys.size()); }
  void add_unit(std::uint64_t key) { unit_keys.insert(key); }
  double mean_signed_error() const;  // 0 without a finite element
  double mean_allowed() const;       // the mean per-element allowance (flat and kappa parts) over the same elements
  double mean_kappa_allowed() const;  // its kappa part
  // The bound above; +Inf when there is no unit (not gated).
  double bias_bound() const;
  bool bias_within() const;
  bool within_budget() const { return over_budget == 0; }  // every element within its allowance
  bool passes() const { return within_budget() && bias_within(); }
  // One element's part in the bias gate alone (add() calls it): its signed error and its allowance's flat and
  // kappa parts, in scaled ulps. For a caller that gates elements itself (verify) and needs only the bias.
  void add_signed(double signed_error, double flat_allowed, double kappa_allowed);
  // bias = false: measured and gated per element, left out of the bias (check's rows constant in storage, judged
  // apart at kappa 0).
  void add(const Format& f, std::int64_t index, double got, std::uint64_t got_bits,
           std::uint64_t exact_bits, const ElementReference& exact, double kappa, const Budget& budget, bool bias = true);
  void merge(const ErrorSummary& other);  // other's indices must already be global
};

// A summary that measures in ulps of the output's own format (ErrorSummary::storage_units): h's, whose only error
// is its one rounding.
inline ErrorSummary storage_summary() {
  ErrorSummary s;
  s.storage_units = true;
  return s;
}

// The key of a unit's inputs for ErrorSummary::add_unit: equal inputs give equal keys (splitmix64 over the bytes and
// the 8-byte words given; a collision merges two units, with odds ~units²/2^64).
class UnitKey {
 public:
  UnitKey& bytes(const void* p, std::size_t n);
  UnitKey& word(std::uint64_t w);
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0x9E3779B97F4A7C15ull;
};

// The same for a per-row statistic (mean or rstd), measured by stat_error.
struct StatSummary {
  std::int64_t rows = 0;
  std::int64_t nonfinite_mismatches = 0;
  double max_ulp = 0;  // +Inf when there is a non-finite mismatch (max_ulp_index: the first one)
  std::int64_t max_ulp_index = -1;
  double max_ulp_got = 0, max_ulp_exact = 0;
  void add(Stat s, const Format& f, std::int64_t row, double got, const RowReference& exact);
  void merge(const StatSummary& other);
  // No non-finite mismatch, and max_ulp ≤ limit when limit ≥ 0 (limit < 0: reported, not gated).
  bool passes(double limit) const { return nonfinite_mismatches == 0 && (limit < 0 || max_ulp <= limit); }
};

}  // namespace lnorm
