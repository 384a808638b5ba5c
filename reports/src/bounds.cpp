// Worst-case bounds, first order in the unit roundoff, for one row of width n and condition
// kappa = |mean|/sqrt(var + eps). Units: the scaled ulps of DESIGN.md "Measuring error", ulps of the output's
// compute format C (f32 for f32, f16 and bf16; f64 for f64). Because ulp_C(s) > u_C·s, an absolute error of
// E·u_w·s (u_w: the unit roundoff of the working precision) is at most E·u_w/u_C scaled ulps; the final rounding
// adds ½ where the output is C itself and the math is wider (f32 outputs of f64 math), and nothing for a 16-bit
// output (the metric measures it from the interval that rounds to it).
//
// Sums. A sum that passes each value through c roundings errs by at most c·u·Σ|x_i| (Higham 2002,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §4.2; c = n − 1 for a sequential sum,
// about log2 n for a pairwise one, §4.3). Σ|x_i|/n ≤ |mean| + σ (Cauchy–Schwarz), and every
// quantity below is relative to σ_eps = sqrt(var + eps) ≥ σ, so
//   mean error / σ_eps  ≤  (c + 1)·(kappa + 1)·u          (c roundings, then /n)       = E_mean·u
// Variance. Σ(x − m̂)² = n·var + n·(m̂ − mean)² exactly, and a sum of non-negative terms errs
// relatively by c·u, so the two-pass var + eps errs relatively by (c + 3)·u + E_mean²·u² (square,
// divide by n, add eps) — Chan, Golub & LeVeque 1983, "Algorithms for computing the sample variance:
// analysis and recommendations", Am. Statistician 37(3), Table 1 (two-pass: n·u + n²u²κ²). The
// textbook one-pass E[x²] − E[x]² errs by c·u·(var + mean²) before cancelling, relatively
// (c + 2)·(1 + kappa²)·u + 2·E_mean·kappa·u (ibid.: n·u·κ²); when that reaches 1 nothing is left.
// rstd = 1/sqrt(v) then errs by half v's relative error plus the sqrt and the division: E_rstd.
// Output. d = x − m̂, z = d·rstd, y = γ·z + β: four roundings, each of a value at most s in size, and
// rstd's error scaled by |z| ≤ s: E_y = E_mean + E_rstd + 4.
// These are bounds, not estimates: the typical error is ~sqrt(c) rather than c (Higham §4.2), so
// measurements sit far below them; the point of printing them is the shape in n and kappa.
#include "bounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"

namespace lnorm::report {
namespace {

double ceil_log2(double x) { return x <= 1 ? 0 : std::ceil(std::log2(x)); }

// E_rstd + output roundings, given the relative error of var + eps in units of u.
double from_variance(double e_mean, double var_rel, double extra_output_roundings = 0) {
  const double e_rstd = 0.5 * var_rel + 2;
  return e_mean + e_rstd + 4 + extra_output_roundings;
}

// E_y in units of the working precision's unit roundoff u_w.
double work_units(Algorithm a, std::int64_t n_int, double kappa, double u_w) {
  const double n = static_cast<double>(n_int);
  switch (a) {
    case Algorithm::two_pass: {  // naive.cpp: sequential sums, c = n − 1
      const double e_mean = n * (kappa + 1);
      return from_variance(e_mean, (n - 1) + 3 + e_mean * e_mean * u_w);
    }
    case Algorithm::one_pass: {  // onepass.cpp: sequential Σx and Σx²
      const double e_mean = n * (kappa + 1);
      const double var_rel = (n + 1) * (1 + kappa * kappa) + 2 * e_mean * kappa;
      if (var_rel * u_w >= 1) return std::numeric_limits<double>::infinity();
      return from_variance(e_mean, var_rel);
    }
    case Algorithm::shifted_welford: {
      // welford.cpp: blocks of 32 (kBlock), binary-counter merges: c = min(n, 32) − 1 + log2(n/32).
      // The shift is x[0], or the first pass's mean when |mean − x[0]| exceeds one standard deviation
      // (kRecentre = 1), so Σ|x − shift|/n ≤ 2σ_eps: the kappa term is the final rounding of the mean.
      const double c = std::min(n, 32.0) - 1 + ceil_log2(n / 32);
      const double e_mean = (c + 1) * 2 + kappa;
      // Welford updates on data of condition <= sqrt(2) (Chan, Golub & LeVeque: updating ≈ c·u·κ).
      return from_variance(e_mean, (c + 3) * std::sqrt(2.0) + e_mean * e_mean * u_w, 1);
    }
    case Algorithm::corrected_two_pass: {
      // simd_body.hpp on 8 lanes (avx2): per 256-element block each of 32 f32 lanes adds 8 values, then 2 + 3 reduction
      // levels; blocks fold in f64 (negligible). The correction c/n makes the centre m + mean_lo
      // accurate to the error of Σ(x − m) alone: no kappa term. One more output rounding for
      // (x − m) − mean_lo.
      const double c = std::ceil(std::min(n, 256.0) / 32) + 5;
      const double e_mean = c + 1;
      return from_variance(e_mean, c + 3 + e_mean * e_mean * u_w, 1);
    }
    case Algorithm::correctly_rounded: {
      // simd_body.hpp's cr:: (avx2_cr): TwoSum mean (error-free), Σ(x − m)² in blocked f64 lanes; c = n/4 + 2 (one
      // accumulation of 4 lanes) is above what the blocked sums go through (cr_exact.hpp's k): a safe curve.
      const double c = std::ceil(n / 4) + 2;
      return from_variance(2, c + 3 + 4 * u_w, 1);
    }
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

std::string_view name(Algorithm a) {
  switch (a) {
    case Algorithm::two_pass: return "two-pass, sequential sums";
    case Algorithm::one_pass: return "one-pass E[x^2]-E[x]^2";
    case Algorithm::shifted_welford: return "shifted Welford, pairwise merges";
    case Algorithm::corrected_two_pass: return "corrected two-pass, blocked sums";
    case Algorithm::correctly_rounded: return "f64 math, rounded once";
  }
  return "?";
}

std::string_view citation(Algorithm a) {
  switch (a) {
    case Algorithm::one_pass:
      return "Chan, Golub & LeVeque 1983 (textbook algorithm: n·u·κ²); Higham 2002 §4.2";
    case Algorithm::shifted_welford:
      return "Chan, Golub & LeVeque 1983 (updating, shifted data: c·u·κ); Higham 2002 §4.3";
    default:
      return "Chan, Golub & LeVeque 1983 (two-pass: n·u + n²u²κ²); Higham 2002 §4.2";
  }
}

std::optional<Algorithm> algorithm_of(std::string_view kernel) {
  if (kernel == "naive" || kernel == "cuda_naive") return Algorithm::two_pass;  // cuda_naive: the same sums, bit for bit
  if (kernel == "onepass") return Algorithm::one_pass;
  if (kernel == "welford") return Algorithm::shifted_welford;
  if (kernel == "avx2") return Algorithm::corrected_two_pass;
  if (kernel == "avx2_cr") return Algorithm::correctly_rounded;
  // avx512 (simd_body.hpp on 16 lanes): blocks of 512 on 4 x 16 lanes, ceil(min(n, 512)/64) + 2 f32 additions
  // per lane, never more than avx2's ceil(min(n, 256)/32) + 5: avx2's bound holds for it. avx512_cr:
  // avx2_cr's algorithm on 4 x 8 lanes (fewer additions per lane than the 4 lanes assumed above).
  if (kernel == "avx512") return Algorithm::corrected_two_pass;
  if (kernel == "avx512_cr") return Algorithm::correctly_rounded;
  return std::nullopt;
}

double error_bound(Algorithm a, std::int64_t n, double kappa, DType d) {
  if (!std::isfinite(kappa)) return std::numeric_limits<double>::infinity();
  const Format out = format_of(d), c = compute_format(out);
  const bool f64_math = d == DType::f64 || a == Algorithm::correctly_rounded;
  const double u_w = f64_math ? 0x1p-53 : 0x1p-24;
  const double e = work_units(a, n, kappa, u_w) * (u_w / c.unit_roundoff());
  return u_w < c.unit_roundoff() && out.dtype == c.dtype ? e + 0.5 : e;
}

bool bound_applies(Algorithm a, std::int64_t n, double max_abs_x, double var_plus_eps, DType d) {
  if (a != Algorithm::two_pass && a != Algorithm::one_pass) return true;
  const Format work = format_of(d == DType::f64 ? DType::f64 : DType::f32);
  const double max_finite = std::ldexp(2 - std::ldexp(1.0, 1 - work.precision), work.emax);
  // Squares below 2^(emin + p) sit where the subnormal spacing exceeds u relative: no relative bound.
  const double smallest_safe = std::ldexp(1.0, work.emin + work.precision);
  return static_cast<double>(n) * max_abs_x * max_abs_x < max_finite && var_plus_eps >= smallest_safe;
}

}  // namespace lnorm::report
