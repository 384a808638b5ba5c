#include "cells.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"

namespace lnorm::report {
namespace {

constexpr int kTopEdgeLog2 = 20;  // 2^20 scaled ulps: past it an f32 result has ~4 correct bits left

std::size_t bin_of(double e) {
  if (e == 0) return 0;
  if (e <= 0.5) return 1;
  const int k = static_cast<int>(std::ceil(std::log2(e)));  // e in (2^(k-1), 2^k]
  return static_cast<std::size_t>(std::min(k, kTopEdgeLog2 + 1) + 2);
}

nlohmann::json optional_number(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isinf(*v)) return "inf";
  return *v;
}

}  // namespace

std::vector<double> histogram_edges() {
  std::vector<double> edges{0, 0.5};
  for (int k = 0; k <= kTopEdgeLog2; ++k) edges.push_back(std::ldexp(1.0, k));
  return edges;
}

double quantile(std::vector<float>& values, double p) {
  if (values.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  const std::size_t k = std::min(values.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

void Measurement::merge(const Measurement& o) {
  elements += o.elements;
  correctly_rounded += o.correctly_rounded;
  nonfinite_mismatches += o.nonfinite_mismatches;
  errors.insert(errors.end(), o.errors.begin(), o.errors.end());
  if (histogram.size() < o.histogram.size()) histogram.resize(o.histogram.size());
  for (std::size_t i = 0; i < o.histogram.size(); ++i) histogram[i] += o.histogram[i];
  const auto max_of = [](std::optional<double> a, std::optional<double> b) -> std::optional<double> {
    if (!a) return b;
    if (!b) return a;
    return std::max(*a, *b);
  };
  mean_max_ulp = max_of(mean_max_ulp, o.mean_max_ulp);
  rstd_max_ulp = max_of(rstd_max_ulp, o.rstd_max_ulp);
  stat_nonfinite_mismatches += o.stat_nonfinite_mismatches;
}

nlohmann::json Measurement::summary() const {
  std::vector<float> e = errors;
  const double max = e.empty() ? 0 : *std::max_element(e.begin(), e.end());
  // max_ulp as lnorm check reports it: null (with max_ulp_nonfinite) when any output is a non-finite
  // mismatch; max_finite_ulp is the worst over the rest (what the plots draw, with a red x for the cell).
  // nan_mismatches and stat_nan_mismatches: deprecated aliases of the nonfinite counts, for one release.
  return {
      {"elements", elements},
      {"max_ulp", nonfinite_mismatches ? nlohmann::json(nullptr) : nlohmann::json(max)},
      {"max_ulp_nonfinite", nonfinite_mismatches > 0},
      {"max_finite_ulp", max},
      {"p999_ulp", quantile(e, 0.999)},
      {"correctly_rounded", elements ? static_cast<double>(correctly_rounded) / static_cast<double>(elements) : 1.0},
      {"nonfinite_mismatches", nonfinite_mismatches},
      {"nan_mismatches", nonfinite_mismatches},
      {"mean_max_ulp", optional_number(mean_max_ulp)},
      {"rstd_max_ulp", optional_number(rstd_max_ulp)},
      {"stat_nonfinite_mismatches", stat_nonfinite_mismatches},
      {"stat_nan_mismatches", stat_nonfinite_mismatches},
  };
}

Measurement measure(const verify::Case& input, const verify::Exact& exact, const std::vector<std::uint64_t>& y_bits,
                    const std::vector<std::uint64_t>& mean_bits, const std::vector<std::uint64_t>& rstd_bits) {
  const Format f = format_of(input.spec.dtype), fs = format_of(stats_dtype(input.spec.dtype));
  Measurement m;
  m.histogram.assign(histogram_edges().size() + 1, 0);
  m.elements = static_cast<std::int64_t>(y_bits.size());
  m.errors.reserve(y_bits.size());
  for (std::size_t i = 0; i < y_bits.size(); ++i) {
    const double got = bits_to_double(f, y_bits[i]);
    const double e = scaled_ulp_error(f, got, y_bits[i], exact.y[i], exact.elems[i]);
    if (correctly_rounded(f, y_bits[i], exact.y[i])) ++m.correctly_rounded;
    if (std::isinf(e)) {
      ++m.nonfinite_mismatches;
      continue;
    }
    m.errors.push_back(static_cast<float>(e));
    ++m.histogram[bin_of(e)];
  }
  // mean and rstd: the metric of lnorm/metrics.hpp, as check and verify measure them.
  const auto stat = [&](const std::vector<std::uint64_t>& bits, Stat which) -> std::optional<double> {
    if (bits.empty()) return std::nullopt;
    double worst = 0;
    for (std::size_t r = 0; r < bits.size(); ++r) {
      const double d = stat_error(which, fs, bits_to_double(fs, bits[r]), exact.rows[r]);
      if (std::isinf(d)) ++m.stat_nonfinite_mismatches;
      else worst = std::max(worst, d);
    }
    return worst;
  };
  m.mean_max_ulp = stat(mean_bits, Stat::mean);
  m.rstd_max_ulp = stat(rstd_bits, Stat::rstd);
  return m;
}

std::optional<double> bound_for(Algorithm a, const verify::Case& input, const verify::Exact& exact) {
  std::optional<double> bound;
  const std::int64_t n = input.spec.cols();
  for (std::size_t r = 0; r < exact.rows.size(); ++r) {
    const RowReference& row = exact.rows[r];
    if (row.nonfinite || !std::isfinite(row.kappa)) continue;
    double max_abs = 0;
    for (std::int64_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::abs(input.x[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)]));
    const double var_plus_eps = 1 / (row.rstd * row.rstd);  // from the rounded rstd: only a range test
    if (!bound_applies(a, n, max_abs, var_plus_eps, input.spec.dtype)) return std::nullopt;
    // error_bound is in scaled ulps at LayerNorm's old floor of 1; on a row with var < eps/3 the scale floors at
    // rho̅ (reference.hpp rho_floor), and every absolute error term reads 1/rho̅ times more there.
    const double floor = input.spec.op.norm == Norm::layernorm ? rho_floor(row.rho) : 1.0;
    const double b = error_bound(a, n, row.kappa, input.spec.dtype) / floor;
    bound = bound ? std::max(*bound, b) : b;
  }
  return bound;
}

KappaStats kappa_stats(const verify::Exact& exact) {
  std::vector<float> k;
  for (const RowReference& row : exact.rows)
    if (!row.nonfinite && std::isfinite(row.kappa)) k.push_back(static_cast<float>(row.kappa));
  if (k.empty()) return {std::nan(""), std::nan("")};
  const double max = *std::max_element(k.begin(), k.end());
  return {quantile(k, 0.5), max};
}

void GradientStats::merge(const GradientStats& o) {
  elements += o.elements;
  correctly_rounded += o.correctly_rounded;
  nonfinite_mismatches += o.nonfinite_mismatches;
  max_finite_ulp = std::max(max_finite_ulp, o.max_finite_ulp);
}

nlohmann::json GradientStats::summary(const char* prefix) const {
  const std::string p(prefix);
  return {{p + "_elements", elements},
          {p + "_max_ulp", nonfinite_mismatches ? nlohmann::json(nullptr) : nlohmann::json(max_finite_ulp)},
          {p + "_max_finite_ulp", max_finite_ulp},
          {p + "_correctly_rounded", elements ? static_cast<double>(correctly_rounded) / static_cast<double>(elements) : 1.0},
          {p + "_nonfinite_mismatches", nonfinite_mismatches}};
}

void BackwardMeasurement::merge(const BackwardMeasurement& o) {
  dx.merge(o.dx);
  dgamma.merge(o.dgamma);
  dbeta.merge(o.dbeta);
}

nlohmann::json BackwardMeasurement::summary() const {
  nlohmann::json j = dx.summary();
  j["output"] = "dx";
  j.update(dgamma.summary("dgamma"));
  j.update(dbeta.summary("dbeta"));
  return j;
}

BackwardMeasurement measure_backward(const verify::Case& input, const verify::ExactBackward& exact, const verify::BackwardOutputs& got) {
  const Format f = format_of(input.spec.dtype), pf = format_of(input.spec.params());
  BackwardMeasurement m;
  m.dx.histogram.assign(histogram_edges().size() + 1, 0);
  m.dx.elements = static_cast<std::int64_t>(got.dx.size());
  m.dx.errors.reserve(got.dx.size());
  for (std::size_t i = 0; i < got.dx.size(); ++i) {
    const double e = scaled_ulp_error(f, bits_to_double(f, got.dx[i]), got.dx[i], exact.dx[i], exact.ref.dx[i]);
    if (correctly_rounded(f, got.dx[i], exact.dx[i])) ++m.dx.correctly_rounded;
    if (std::isinf(e)) {
      ++m.dx.nonfinite_mismatches;
      continue;
    }
    m.dx.errors.push_back(static_cast<float>(e));
    ++m.dx.histogram[bin_of(e)];
  }
  const auto grad = [&](const std::vector<std::uint64_t>& bits, const std::vector<std::uint64_t>& want,
                        const std::vector<ElementReference>& refs, GradientStats& out) {
    out.elements = static_cast<std::int64_t>(bits.size());
    for (std::size_t j = 0; j < bits.size(); ++j) {
      const double e = scaled_ulp_error(pf, bits_to_double(pf, bits[j]), bits[j], want[j], refs[j]);
      if (correctly_rounded(pf, bits[j], want[j])) ++out.correctly_rounded;
      if (std::isinf(e)) ++out.nonfinite_mismatches;
      else out.max_finite_ulp = std::max(out.max_finite_ulp, e);
    }
  };
  grad(got.dgamma, exact.dgamma, exact.ref.dgamma, m.dgamma);
  grad(got.dbeta, exact.dbeta, exact.ref.dbeta, m.dbeta);
  return m;
}

KappaStats kappa_stats(const verify::ExactBackward& exact) {
  std::vector<float> k;
  for (double v : exact.ref.row_kappa)
    if (std::isfinite(v)) k.push_back(static_cast<float>(v));
  if (k.empty()) return {std::nan(""), std::nan("")};
  const double max = *std::max_element(k.begin(), k.end());
  return {quantile(k, 0.5), max};
}

}  // namespace lnorm::report
