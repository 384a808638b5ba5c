// The case set the foundation issue names — offsets up to 1e15, constant rows, widths 1..65537,
// values near overflow, subnormals, NaN rows — and a helper that measures a kernel on one case
// against the exact reference with the metrics of DESIGN.md.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lnorm/format.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/metrics.hpp"
#include "lnorm/reference.hpp"

namespace lnorm::testing {

struct Case {
  std::string label;
  std::vector<double> x;  // one row, values of the format
  double eps;
};

inline std::vector<double> rounded(DType d, std::vector<double> v) {
  const Format f = format_of(d);
  for (double& e : v) e = round_to_format(f, e);
  return v;
}

inline std::vector<double> normal(DType d, std::size_t n, double offset, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (double& e : v) e = offset + scale * nd(rng);
  return rounded(d, v);
}

inline std::vector<Case> foundation_cases(DType d) {
  const Format f = format_of(d);
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  const double min_sub = std::ldexp(1.0, f.lsb_exponent());
  std::vector<Case> cases;
  for (double eps : {0.0, 1e-12, 1e-5, 1.0}) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " eps=%g", eps);
    const std::string e = buf;
    for (std::size_t n : {1u, 3u, 17u, 4097u, 65537u}) cases.push_back({"normal n=" + std::to_string(n) + e, normal(d, n, 0, 1, n), eps});
    for (double offset : {1e4, 1e7, 1e15}) {
      if (offset >= max_finite) continue;
      // Spread 2^-(p-4) of the offset keeps kappa ≈ 2^(p-4) — as far as the format can resolve.
      const double scale = std::max(1.0, offset * std::ldexp(1.0, -f.precision + 4));
      std::snprintf(buf, sizeof buf, "offset %g", offset);
      cases.push_back({buf + e, normal(d, 1024, offset, scale, 7), eps});
    }
    cases.push_back({"constant" + e, std::vector<double>(33, round_to_format(f, 3.14159)), eps});
    cases.push_back({"near overflow" + e, rounded(d, {max_finite, -max_finite, max_finite / 2, max_finite / 3}), eps});
    cases.push_back({"large (x^2 overflows f32)" + e, normal(d, 64, 0, 1e20, 3), eps});
    cases.push_back({"subnormal" + e, {min_sub, 3 * min_sub, 0, -min_sub, 17 * min_sub, 2 * min_sub}, eps});
    cases.push_back({"nan row" + e, {1, NAN, 2}, eps});
  }
  return cases;
}

struct Measured {
  ErrorSummary y;
  StatSummary mean, rstd;
  std::vector<std::byte> y_bits;
};

inline std::vector<std::byte> encode(DType d, const std::vector<double>& v) {
  const Format f = format_of(d);
  std::vector<std::byte> out(v.size() * size_of(d));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t b = double_to_bits(f, v[i]);
    std::memcpy(out.data() + i * size_of(d), &b, size_of(d));
  }
  return out;
}

inline std::uint64_t bits_at(const std::vector<std::byte>& v, std::size_t es, std::size_t i) {
  std::uint64_t b = 0;
  std::memcpy(&b, v.data() + i * es, es);
  return b;
}

// x's values rounded to the format (the tests' spelling of rounded()).
inline std::vector<double> in_format(DType d, std::vector<double> v) { return rounded(d, std::move(v)); }

// Bitwise as values: NaN == NaN, and the sign of zero matters.
inline bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// One reference row in double values (y rounded, as a double): x in d, gamma and beta (may be null) in pd.
struct ReferenceRowValues {
  std::vector<double> y;
  RowReference row;
};

inline ReferenceRowValues reference_row(RowReferencer& ref, DType d, DType pd, const std::vector<double>& x,
                                        const std::vector<double>* g, const std::vector<double>* b) {
  const auto xb = encode(d, x);
  const auto gb = g ? encode(pd, *g) : std::vector<std::byte>{};
  const auto bb = b ? encode(pd, *b) : std::vector<std::byte>{};
  std::vector<std::byte> y(xb.size());
  ReferenceRowValues out;
  out.row = ref.run(xb.data(), g ? gb.data() : nullptr, b ? bb.data() : nullptr, static_cast<std::int64_t>(x.size()),
                    y.data(), nullptr);
  const Format f = format_of(d);
  for (std::size_t i = 0; i < x.size(); ++i) out.y.push_back(bits_to_double(f, bits_at(y, size_of(d), i)));
  return out;
}

// Runs kernel k on `rows` copies of case x (one row each) and measures it.
inline Measured measure(const KernelInfo& k, DType d, const std::vector<double>& x, double eps, Budget budget,
                        int threads = 1, Op op = Op::layernorm) {
  const Format f = format_of(d), sf = format_of(stats_dtype(d));
  const std::size_t es = size_of(d), ss = size_of(sf.dtype);
  const auto n = static_cast<std::int64_t>(x.size());
  const Problem p = with_op(make_problem(1, n, d, eps, false, false, threads), op);
  const auto xb = encode(d, x);
  Measured m;
  m.y_bits.resize(xb.size());
  std::vector<std::byte> mean(ss), rstd(ss), exact(xb.size());
  k.run(p, Tensors{xb.data(), nullptr, nullptr, m.y_bits.data(), mean.data(), rstd.data()});
  RowReferencer ref(p);
  std::vector<ElementReference> elems(x.size());
  const RowReference row = ref.run(xb.data(), nullptr, nullptr, n, exact.data(), elems.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint64_t got = bits_at(m.y_bits, es, i);
    m.y.add(f, static_cast<std::int64_t>(i), bits_to_double(f, got), got, bits_at(exact, es, i), elems[i], row.kappa, budget);
  }
  m.mean.add(Stat::mean, sf, 0, bits_to_double(sf, bits_at(mean, ss, 0)), row);
  m.rstd.add(Stat::rstd, sf, 0, bits_to_double(sf, bits_at(rstd, ss, 0)), row);
  return m;
}

// A width-2 RMSNorm row (eps = 0, no gamma) whose second element dominates Σx²: x = (2^-140, 2^-70), the first a
// subnormal, dy = (1, 2^100). rstd = sqrt(2/q) ~ 2^70.5 and rstd·dy ~ 2^170, but the exact dx is
// (−2^100.5, 2^30.5) roughly: written as rstd·(g − xhat·mean(g·xhat)), dx_1 cancels to 2^-180 of its terms, and an
// f64 evaluation's residue (~2^118) is all that is left (verify --dir bwd found it as +Inf in bf16, welford,
// seed 2). expected: the exact dx in long double, dx_i = rstd·(g_i·x_j² − x_i·g_j·x_j)/q for the other j.
struct DominantRow {
  float x[2] = {0x1p-140f, 0x1p-70f}, dy[2] = {1.0f, 0x1p100f};
  long double expected[2];
  DominantRow() {
    const long double x0 = x[0], x1 = x[1], g0 = dy[0], g1 = dy[1], q = x0 * x0 + x1 * x1, rstd = std::sqrt(2.0L / q);
    expected[0] = rstd * (g0 * x1 * x1 - x0 * g1 * x1) / q;
    expected[1] = rstd * (g1 * x0 * x0 - x1 * g0 * x0) / q;
  }
  // Within 2^-22 of the exact value, relative to itself (an f32 result rounded once errs by at most 2^-24).
  bool close(int i, float got) const { return std::fabs(static_cast<long double>(got) - expected[i]) <= std::fabs(expected[i]) * 0x1p-22L; }
};

}  // namespace lnorm::testing
