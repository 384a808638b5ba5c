// cli/side_outputs.hpp: h, mean and rstd beside y or q, opened, read and reported one way.
#include "side_outputs.hpp"

#include <cmath>
#include <cstdio>

#include "error_text.hpp"

namespace lnorm::cli {

std::string coords(std::int64_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    c[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  std::string s = "[";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "]";
}

namespace {


OutputCheck h_check(const ErrorSummary& eh, const SideOutputs& paths, const std::vector<std::int64_t>& shape) {
  OutputCheck c{"h", eh.within_budget(), "", "", {}};
  const double budget = paths.h_budget;
  c.summary = text("  h max %.3g ulp (budget %g) correctly rounded %.2f%%", eh.max_ulp, budget, 100 * eh.correctly_rounded_fraction());
  if (eh.max_ulp_index >= 0)
    c.detail = text("  h         %s  max %s ulp of h's format at the exact sum (budget %g), correctly rounded %s%%; %lld of %lld "
                    "over budget, non-finite mismatches %lld (worst %s: got %.17g, exact sum %.17g%s)\n",
                    c.pass ? "PASS" : "FAIL", number_text(eh.max_ulp, budget).c_str(), budget,
                    percent_text(eh.correctly_rounded_fraction()).c_str(), static_cast<long long>(eh.over_budget),
                    static_cast<long long>(eh.elements), static_cast<long long>(eh.nonfinite_mismatches),
                    coords(eh.max_ulp_index, shape).c_str(), eh.max_ulp_got, eh.max_ulp_exact,
                    std::isinf(eh.max_ulp) ? ", a non-finite mismatch" : "");
  c.json = {{"candidate", paths.h}, {"metric", "ulps of h's format at the exact sum x + residual"},
            {"elements", eh.elements}, {"max_ulp", ulp_json(eh.max_ulp)}, {"max_ulp_nonfinite", std::isinf(eh.max_ulp)},
            {"max_finite_ulp", eh.max_finite_ulp}, {"max_ulp_index", eh.max_ulp_index}, {"max_ulp_got", eh.max_ulp_got},
            {"max_ulp_exact", eh.max_ulp_exact}, {"correctly_rounded", eh.correctly_rounded_fraction()},
            {"nonfinite_mismatches", eh.nonfinite_mismatches}, {"over_budget", eh.over_budget},
            {"budget", budget}, {"pass", c.pass}};
  return c;
}

// mean and rstd: gated when their budget is given (>= 0), else reported.
OutputCheck stat_check(const char* key, const StatSummary& s, double limit, const char* text_metric, const char* json_metric) {
  OutputCheck c{key, s.passes(limit), text("  %s %g ulp", key, s.max_ulp), "", {}};
  if (s.max_ulp_index >= 0)
    c.detail = text("  %-9s %s  max %s %s at row %lld (got %.9g, exact %.9g), non-finite mismatches %lld%s\n", key,
                    limit < 0 ? "(reported)" : c.pass ? "PASS" : "FAIL", number_text(s.max_ulp, limit < 0 ? 0 : limit).c_str(),
                    text_metric, static_cast<long long>(s.max_ulp_index), s.max_ulp_got, s.max_ulp_exact,
                    static_cast<long long>(s.nonfinite_mismatches), limit < 0 ? "" : (" (budget " + number_text(limit, limit) + ")").c_str());
  c.json = {{"max_ulp", ulp_json(s.max_ulp)}, {"max_ulp_nonfinite", std::isinf(s.max_ulp)}, {"metric", json_metric},
            {"max_ulp_row", s.max_ulp_index}, {"got", s.max_ulp_got}, {"exact", s.max_ulp_exact},
            {"nonfinite_mismatches", s.nonfinite_mismatches}, {"nan_mismatches", s.nonfinite_mismatches},
            {"budget", limit < 0 ? nlohmann::json(nullptr) : nlohmann::json(limit)}, {"pass", c.pass}};
  return c;
}

}  // namespace

SideCandidates::SideCandidates(const SideOutputs& paths, const ProblemInputs& in)
    : paths_(paths), shape_(in.shape), cols_(in.problem.cols), h_size_(size_of(in.problem.residual_dtype)),
      stat_size_(size_of(stats_dtype(in.problem.dtype))) {
  if (!paths.h.empty()) {
    if (!in.residual) throw InputError("--h: needs --residual (the candidate h is x + residual)");
    h_.emplace(paths.h);
    if (h_->header().descr != in.residual->header().descr)
      throw InputError(paths.h + ": --h holds '" + h_->header().descr + "' but the residual holds '" +
                       in.residual->header().descr + "' (h is stored in the residual's dtype)");
    if (h_->header().shape != in.shape)
      throw InputError(paths.h + ": has shape " + shape_text(h_->header().shape) + " but x has shape " + shape_text(in.shape));
  }
  if (!paths.mean.empty()) mean_.emplace(open_stats_input(paths.mean, "--mean", in));
  if (!paths.rstd.empty()) rstd_.emplace(open_stats_input(paths.rstd, "--rstd", in));
}

void SideCandidates::read(std::int64_t r0, std::int64_t nr) {
  if (h_) {
    hbuf_.resize(static_cast<std::size_t>(nr * cols_) * h_size_);
    h_->read(r0 * cols_, nr * cols_, hbuf_.data());
  }
  if (mean_) {
    mbuf_.resize(static_cast<std::size_t>(nr) * stat_size_);
    mean_->read(r0, nr, mbuf_.data());
  }
  if (rstd_) {
    rbuf_.resize(static_cast<std::size_t>(nr) * stat_size_);
    rstd_->read(r0, nr, rbuf_.data());
  }
}

std::vector<OutputCheck> SideCandidates::checks(const ErrorSummary& h, const StatSummary& mean, const StatSummary& rstd) const {
  std::vector<OutputCheck> out;
  if (h_) out.push_back(h_check(h, paths_, shape_));
  if (mean_)
    out.push_back(stat_check("mean", mean, paths_.max_mean_ulp, "ulp of max(|mean|, sqrt(var+eps))", "ulps of max(|mean|, sqrt(var + eps))"));
  if (rstd_) out.push_back(stat_check("rstd", rstd, paths_.max_rstd_ulp, "ulp", "ulps of rstd"));
  return out;
}

}  // namespace lnorm::cli
