// Row classes and the values a CaseSpec stands for. All values are drawn as doubles and rounded once
// to the storage format, so the reference sees exactly what the kernel sees.
#include "lnorm/cases.hpp"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace lnorm::verify {

std::string_view name(RowClass c) {
  switch (c) {
    case RowClass::normal: return "normal";
    case RowClass::uniform: return "uniform";
    case RowClass::offset: return "offset";
    case RowClass::constant: return "constant";
    case RowClass::tiny: return "tiny";
    case RowClass::huge: return "huge";
    case RowClass::subnormal: return "subnormal";
    case RowClass::sparse: return "sparse";
    case RowClass::exact_stats: return "exact_stats";
    case RowClass::bits: return "bits";
    case RowClass::nonfinite: return "nonfinite";
    case RowClass::small: return "small";
  }
  return "?";
}

std::string_view name(Affine a) {
  switch (a) {
    case Affine::absent: return "absent";
    case Affine::identity: return "identity";
    case Affine::random: return "random";
    case Affine::with_zeros: return "with_zeros";
  }
  return "?";
}

std::int64_t CaseSpec::rows() const {
  std::int64_t r = 1;
  for (int i = 0; i < axis; ++i) r *= shape[static_cast<std::size_t>(i)];
  return r;
}

std::int64_t CaseSpec::cols() const {
  std::int64_t c = 1;
  for (std::size_t i = static_cast<std::size_t>(axis); i < shape.size(); ++i) c *= shape[i];
  return c;
}

namespace {
// dy at the ends of the format's range in 2 backward cases of 16 (CaseSpec::dy_range_edges), drawn from a stream
// of their own so that the other cases draw the dy they drew before. A review of the SIMD backward kernels found
// f32 overflowing and underflowing there, where dy at 2^-3..2^3 never showed it.
enum class DyRange { usual, huge, tiny };
DyRange dy_range(const CaseSpec& s) {
  if (s.op.direction != Direction::bwd || !s.dy_range_edges) return DyRange::usual;
  std::mt19937_64 rng(s.data_seed ^ 0x9E3779B97F4A7C15ull);
  const auto pick = rng() % 16;
  return pick == 0 ? DyRange::huge : pick == 1 ? DyRange::tiny : DyRange::usual;
}
}  // namespace

std::string CaseSpec::describe() const {
  std::ostringstream s;
  s << name(dtype);
  for (std::size_t i = 0; i < row_classes.size(); ++i) s << (i ? "+" : " ") << name(row_classes[i]);
  if (std::find(row_classes.begin(), row_classes.end(), RowClass::offset) != row_classes.end()) {
    // Two digits where they are the value (the line stays short), all 17 where not: the line is the whole
    // case (the regression corpus, lnorm/corpus.hpp, reads it back).
    char k[48];
    std::snprintf(k, sizeof k, "%.2g", log10_kappa);
    if (std::strtod(k, nullptr) != log10_kappa) std::snprintf(k, sizeof k, "%.17g", log10_kappa);
    s << " kappa=1e" << k;
  }
  s << " shape=[";
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? "," : "") << shape[i];
  char e[32];
  std::snprintf(e, sizeof e, dtype == DType::f64 ? "%.17g" : "%.9g", eps);  // round-trips the kernel's eps
  s << "] axis=" << axis << " (" << rows() << "x" << cols() << ") eps=" << e << " gamma=" << name(gamma)
    << " beta=" << name(beta) << " misalign=" << misalign << " seed=" << data_seed;
  if (op != Op::layernorm) s << " op=" << name(op);
  if (param_dtype && *param_dtype != dtype) s << " params=" << name(*param_dtype);
  if (gamma_offset != 0) {
    char c[32];
    std::snprintf(c, sizeof c, "%.9g", gamma_offset);
    s << " gamma_offset=" << c;
  }
  if (residual_dtype && *residual_dtype != dtype) s << " residual=" << name(*residual_dtype);
  if (const DyRange e = dy_range(*this); e != DyRange::usual) s << (e == DyRange::huge ? " dy=huge" : " dy=tiny");
  return s.str();
}

Problem Case::problem(int threads) const {
  const Problem p = with_op(make_problem(spec.rows(), spec.cols(), spec.dtype, spec.eps, !gamma.empty(), !beta.empty(), threads), spec.op);
  const Problem q = set_params(p, spec.params(), gamma.empty() ? 0.0 : spec.gamma_offset);
  return spec.op.prologue == Prologue::residual_add ? set_residual(q, spec.residual()) : q;
}

double random_float_bits(std::mt19937_64& rng, const Format& f, int exp_lo, int exp_hi) {
  // Exponent e in [lsb_exponent - 1, emax]: e < emin means a subnormal binade, lsb_exponent - 1 means 0.
  const int lo = std::max(exp_lo, f.lsb_exponent() - 1), hi = std::min(exp_hi, f.emax);
  const int e = std::uniform_int_distribution<int>(lo, std::max(lo, hi))(rng);
  const double sign = (rng() & 1) ? -1.0 : 1.0;
  if (e < f.lsb_exponent()) return sign * 0.0;
  // Mantissa: p - 1 random bits below the leading one, at the binade's spacing (coarser below emin).
  const int frac_bits = std::min(f.precision - 1, e - f.lsb_exponent());
  const std::uint64_t m = frac_bits > 0 ? rng() >> (64 - frac_bits) : 0;
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -frac_bits), e);
}

namespace {

double max_finite(const Format& f) { return std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax); }

// Pairs around mean = 2^j: x = mean ± d·q with d ∈ [0, 15] and mean = M·q, M = 2^m a power of two.
// Every value is an integer multiple of q below 2^(m+1)·q, so it is exact in any format with p > m+1;
// every partial sum of n values is below n·2^(m+1)·q, exact in the f32 accumulator (p = 24) when
// n·2^(m+1) ≤ 2^24, and Σ(x − mean)² ≤ n·225·q² likewise (n ≤ 65537 keeps it under 2^24·q²).
// So mean = Σx/n = M·q exactly whatever the summation order, and var is one rounding of an exact sum.
std::vector<double> exact_stats_row(std::mt19937_64& rng, const Format& f, std::int64_t n) {
  const int log2n = static_cast<int>(std::ceil(std::log2(static_cast<double>(std::max<std::int64_t>(n, 2)))));
  const int m = std::clamp(std::min(24, f.precision) - 2 - log2n, 4, 10);  // 2^m ≥ 16 > max d
  const int j = std::uniform_int_distribution<int>(-6, 6)(rng);
  const double q = std::ldexp(1.0, j - m), mean = std::ldexp(1.0, j) * ((rng() & 1) ? -1 : 1);
  std::vector<double> x(static_cast<std::size_t>(n), mean);
  for (std::int64_t i = 0; i + 1 < n; i += 2) {
    const double d = static_cast<double>(std::uniform_int_distribution<int>(0, 15)(rng)) * q;
    x[static_cast<std::size_t>(i)] = mean + d;
    x[static_cast<std::size_t>(i + 1)] = mean - d;
  }
  return x;  // an odd n leaves the last element at the mean
}

}  // namespace

std::vector<double> make_row(std::mt19937_64& rng, DType d, RowClass c, std::int64_t n, double eps,
                             double log10_kappa, Op op) {
  const Format f = format_of(d);
  const auto un = static_cast<std::size_t>(n);
  std::vector<double> x(un);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  // Magnitudes stay well inside f16's range (max 65504) unless the class is about range.
  const auto binade = [&](int lo, int hi) { return std::ldexp(1.0, std::uniform_int_distribution<int>(lo, hi)(rng)); };
  switch (c) {
    case RowClass::normal: {
      const double s = binade(-6, 6);
      for (double& v : x) v = s * normal(rng);
      break;
    }
    case RowClass::uniform: {
      const double s = binade(-6, 6);
      for (double& v : x) v = s * unit(rng);
      break;
    }
    case RowClass::offset: {
      // mean 2^e·(1..2) with e up to a quarter of the way to overflow, std = |mean|/kappa.
      const double mean = binade(0, std::min(60, f.emax / 4)) * (1 + 0.5 * (unit(rng) + 1)) * ((rng() & 1) ? -1 : 1);
      // kappa is capped where the format still resolves the row: std ≥ 2^3 ulps of the mean, so
      // f16 (p = 11) reaches ~1e2 and bf16 ~1e1 instead of collapsing to a constant row.
      const double max_log10_kappa = 0.30103 * (f.precision - 4);
      const double std_dev = std::abs(mean) / std::pow(10.0, std::min(log10_kappa, max_log10_kappa));
      for (double& v : x) v = mean + std_dev * normal(rng);
      break;
    }
    case RowClass::constant: {
      const double v = random_float_bits(rng, f, f.lsb_exponent() - 1, f.emax);
      std::fill(x.begin(), x.end(), v);
      break;
    }
    case RowClass::tiny: {
      // std = sqrt(eps)·2^-12: var = eps·2^-24, far below eps, above the format's subnormals for
      // eps ≥ 1e-12 in f32 (and flushed towards a constant row in f16/bf16, which is still var ≪ eps).
      // A centre other than 0 would round the row to a constant in f16/bf16 (their ulp at 1 is far
      // above sqrt(eps)·2^-12): there the rows sit at 0, down among the subnormals.
      // RMSNorm's tiny rows are tiny about 0 (mean(x²) ≪ eps): the draw is made either way, so the
      // random stream is the same for both ops.
      const bool zero_centre = (rng() & 1) || f.precision < 12;
      const double centre = zero_centre || op.norm != Norm::layernorm ? 0.0 : binade(-2, 2);
      const double s = std::sqrt(eps > 0 ? eps : 1e-5) * 0x1p-12;
      for (double& v : x) v = centre + s * normal(rng);
      break;
    }
    case RowClass::huge: {
      const double top = max_finite(f);
      for (double& v : x) v = top * (0.625 + 0.375 * std::abs(unit(rng))) * ((rng() & 1) ? -1 : 1);
      break;
    }
    case RowClass::subnormal: {
      const double lsb = std::ldexp(1.0, f.lsb_exponent());
      const auto top = static_cast<std::int64_t>(std::ldexp(1.0, f.precision - 1)) - 1;
      std::uniform_int_distribution<std::int64_t> k(-top, top);
      for (double& v : x) v = static_cast<double>(k(rng)) * lsb;
      break;
    }
    case RowClass::sparse: {
      std::fill(x.begin(), x.end(), 0.0);
      const std::int64_t outliers = 1 + static_cast<std::int64_t>(rng() % 3);
      for (std::int64_t k = 0; k < outliers; ++k) {
        x[rng() % un] = binade(4, 12) * ((rng() & 1) ? -1 : 1) * (1 + 0.5 * (unit(rng) + 1));
      }
      break;
    }
    case RowClass::exact_stats: return exact_stats_row(rng, f, n);
    case RowClass::bits:
      for (double& v : x) v = random_float_bits(rng, f, f.lsb_exponent() - 1, f.emax);
      break;
    case RowClass::small: {
      // One binade for the row (a row's values within a few binades of each other, as real activations are), drawn
      // where squares leave the working format: f32 and bf16 2^-126..2^-50 (1.2e-38..8.9e-16, the subnormals below
      // reached by the normal tail), f64 2^-1022..2^-500, f16 (whose squares fit in f32) its lowest binades,
      // 2^-24..2^-12. With eps > 0 RMSNorm's outputs are then ~x/sqrt(eps): small, and measured against themselves.
      const int lo = f.precision == 11 ? f.lsb_exponent() : f.precision == 53 ? f.emin : -126;
      const int hi = f.precision == 11 ? f.emin + 2 : f.precision == 53 ? -500 : -50;
      const double s = binade(lo, hi);
      for (double& v : x) v = s * normal(rng);
      break;
    }
    case RowClass::nonfinite: {
      for (double& v : x) v = normal(rng);
      const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity()};
      const std::int64_t count = 1 + static_cast<std::int64_t>(rng() % 2);
      for (std::int64_t k = 0; k < count; ++k) x[rng() % un] = specials[rng() % 3];
      break;
    }
  }
  for (double& v : x) v = round_to_format(f, v);
  return x;
}

namespace {

// gamma ~ N(1, 0.5) (with an offset C: N(1 − C, 0.5), so that C + gamma ~ N(1, 0.5), zero-centred for
// Gemma's C = 1), beta ~ N(0, 1); identity: gamma = 1 − C, beta = 0.
std::vector<double> make_affine(std::mt19937_64& rng, const Format& f, Affine a, std::int64_t n, bool is_gamma,
                                double offset) {
  std::vector<double> v;
  if (a == Affine::absent) return v;
  const double centre = is_gamma ? 1.0 - offset : 0.0;
  v.assign(static_cast<std::size_t>(n), round_to_format(f, centre));
  if (a == Affine::identity) return v;
  std::normal_distribution<double> normal(centre, is_gamma ? 0.5 : 1.0);
  for (double& e : v) {
    e = round_to_format(f, normal(rng));
    if (a == Affine::with_zeros && rng() % 4 == 0) e = 0;
  }
  return v;
}

}  // namespace

Case materialize(const CaseSpec& spec) {
  Case c;
  c.spec = spec;
  const std::int64_t rows = spec.rows(), cols = spec.cols();
  std::mt19937_64 rng(spec.data_seed);
  c.x.reserve(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const RowClass rc = spec.row_classes[static_cast<std::size_t>(r) % spec.row_classes.size()];
    std::mt19937_64 row_rng(rng());
    const auto row = make_row(row_rng, spec.dtype, rc, cols, spec.eps, spec.log10_kappa, spec.op);
    c.x.insert(c.x.end(), row.begin(), row.end());
  }
  const Format pf = format_of(spec.params());
  c.gamma = make_affine(rng, pf, spec.gamma, cols, true, spec.gamma_offset);
  c.beta = make_affine(rng, pf, spec.beta, cols, false, 0.0);
  if (spec.op.direction == Direction::bwd) {
    const Format f = format_of(spec.dtype);
    double k = std::ldexp(1.0, static_cast<int>(rng() % 7) - 3);
    // huge: |dy·w| and the terms of dx near overflow where dx is finite; tiny: subnormal dy, dy·w under the normal range.
    if (const DyRange e = dy_range(spec); e == DyRange::huge) k = std::ldexp(1.0, f.emax - 6);
    else if (e == DyRange::tiny) k = std::ldexp(1.0, f.emin - 4);
    const bool zeros = rng() % 4 == 0;
    std::normal_distribution<double> normal(0.0, 1.0);
    c.dy.resize(c.x.size());
    for (double& v : c.dy) v = zeros && rng() % 3 == 0 ? 0.0 : round_to_format(f, k * normal(rng));
  }
  return c;
}

}  // namespace lnorm::verify
