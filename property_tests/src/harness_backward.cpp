// The backward's harness (lnorm/harness.hpp): a backward kernel run inside guard bytes with the forward's saved
// statistics, and the exact gradients. Moved out of properties_backward.cpp so that `lnorm report --dir bwd`
// measures kernels exactly as `lnorm verify --dir bwd` runs them.
#include <algorithm>
#include <string>
#include <vector>

#include "lnorm/backward.hpp"
#include "lnorm/format.hpp"
#include "lnorm/harness.hpp"
#include "lnorm/reference.hpp"

namespace lnorm::verify {

SavedStats saved_stats(const Case& c) {
  Problem p = c.problem();
  p.op = plain(c.spec.op.norm);
  const DType d = c.spec.dtype;
  const auto n = static_cast<std::size_t>(p.cols);
  const Buffer x(d, c.x, 0);
  RowReferencer ref(p);
  SavedStats s;
  for (std::int64_t r = 0; r < p.rows; ++r) {
    const RowReference rr = ref.run(static_cast<const std::byte*>(x.data()) + static_cast<std::size_t>(r) * n * size_of(d),
                                    nullptr, nullptr, p.cols, nullptr, nullptr);
    s.mean.push_back(rr.mean);
    s.rstd.push_back(rr.rstd);
  }
  return s;
}

namespace {
std::size_t param_count(const Problem& p, bool present) { return present ? static_cast<std::size_t>(p.cols) : 0; }
}  // namespace

GuardedBackward::GuardedBackward(const KernelInfo& k, const Case& c, const SavedStats& saved)
    : k_(k),
      c_(c),
      has_mean_(c.spec.op.norm == Norm::layernorm),
      x_(c.spec.dtype, c.x, c.spec.misalign),
      g_(c.spec.params(), c.gamma, c.spec.misalign),
      dy_(c.spec.dtype, c.dy, c.spec.misalign),
      sm_(stats_dtype(c.spec.dtype), has_mean_ ? saved.mean : std::vector<double>{}, 0),
      sr_(stats_dtype(c.spec.dtype), saved.rstd, 0),
      dx_(c.spec.dtype, static_cast<std::size_t>(c.problem().elements()), c.spec.misalign),
      dg_(c.spec.params(), param_count(c.problem(), c.problem().has_gamma), c.spec.misalign),
      db_(c.spec.params(), param_count(c.problem(), c.problem().has_beta), c.spec.misalign),
      // The inputs' bytes before the first run: a kernel must leave them as it got them.
      x_before_(x_.snapshot()),
      g_before_(g_.snapshot()),
      dy_before_(dy_.snapshot()),
      sm_before_(sm_.snapshot()),
      sr_before_(sr_.snapshot()),
      dx_canary_(canary_bits(c.spec.dtype)),
      param_canary_(canary_bits(c.spec.params())) {}

std::string GuardedBackward::run(int threads) {
  const Problem p = c_.problem(threads);
  if (const auto why = unavailable_reason(k_, p)) return "harness: the kernel declines this case: " + *why;
  const auto n = static_cast<std::size_t>(p.elements()), cols = static_cast<std::size_t>(p.cols);
  dx_.fill_bits(dx_canary_);
  dg_.fill_bits(param_canary_);
  db_.fill_bits(param_canary_);
  Tensors t;
  t.x = x_.data();
  t.gamma = p.has_gamma ? g_.data() : nullptr;
  t.dy = dy_.data();
  t.saved_mean = has_mean_ ? sm_.data() : nullptr;
  t.saved_rstd = sr_.data();
  t.dx = dx_.data();
  t.dgamma = p.has_gamma ? dg_.data() : nullptr;
  t.dbeta = p.has_beta ? db_.data() : nullptr;
  k_.run(p, t);
  std::string violation;
  const auto note = [&](const std::string& what) {
    if (violation.empty()) violation = "harness: " + what;
  };
  if (!dx_.guards_intact()) note("wrote outside dx (guard region changed)");
  if (!dg_.guards_intact()) note("wrote outside dgamma (guard region changed)");
  if (!db_.guards_intact()) note("wrote outside dbeta (guard region changed)");
  if (!x_.guards_intact() || !g_.guards_intact() || !dy_.guards_intact() || !sm_.guards_intact() || !sr_.guards_intact())
    note("wrote around an input buffer");
  if (const std::size_t i = std::min(x_.first_change(x_before_), dy_.first_change(dy_before_)); i < n)
    note("modified x or dy at element " + std::to_string(i));
  if (const std::size_t j = g_.first_change(g_before_); j < g_.count()) note("modified gamma at column " + std::to_string(j));
  if (const std::size_t r = std::min(sr_.first_change(sr_before_), has_mean_ ? sm_.first_change(sm_before_) : sr_.count());
      r < sr_.count())
    note("modified the saved statistics of row " + std::to_string(r));
  if (const std::size_t i = dx_.find_bits(dx_canary_); i < n)
    note("never wrote dx element " + std::to_string(i) + " (row " + std::to_string(i / cols) + ")");
  if (const std::size_t j = dg_.find_bits(param_canary_); j < dg_.count()) note("never wrote dgamma column " + std::to_string(j));
  if (const std::size_t j = db_.find_bits(param_canary_); j < db_.count()) note("never wrote dbeta column " + std::to_string(j));
  return violation;
}

BackwardOutputs GuardedBackward::outputs() const { return {dx_.all_bits(), dg_.all_bits(), db_.all_bits(), ""}; }

GuardedBackward::Bytes GuardedBackward::output_bytes() const { return {dx_.snapshot(), dg_.snapshot(), db_.snapshot()}; }

BackwardOutputs run_guarded_backward(const KernelInfo& k, const Case& c, const SavedStats& saved, int threads) {
  if (const auto why = unavailable_reason(k, c.problem(threads))) {
    BackwardOutputs out;
    out.violation = "harness: the kernel declines this case: " + *why;
    return out;
  }
  GuardedBackward runs(k, c, saved);
  std::string violation = runs.run(threads);
  BackwardOutputs out = runs.outputs();
  out.violation = std::move(violation);
  return out;
}

BackwardOutputs run_guarded_backward(const KernelInfo& k, const Case& c, int threads) {
  return run_guarded_backward(k, c, saved_stats(c), threads);
}

ExactBackward exact_backward(const Case& c) {
  const Problem p = c.problem();
  const DType d = c.spec.dtype, pd = c.spec.params();
  const auto n = static_cast<std::size_t>(p.elements()), cols = static_cast<std::size_t>(p.cols);
  const Buffer x(d, c.x, 0), g(pd, c.gamma, 0), dy(d, c.dy, 0);
  Buffer dx(d, n, 0), dg(pd, p.has_gamma ? cols : 0, 0), db(pd, p.has_beta ? cols : 0, 0);
  ExactBackward e;
  reference_backward(p, x.data(), p.has_gamma ? g.data() : nullptr, dy.data(), dx.data(), p.has_gamma ? dg.data() : nullptr,
                     p.has_beta ? db.data() : nullptr, &e.ref);
  e.dx.resize(n);
  for (std::size_t i = 0; i < n; ++i) e.dx[i] = dx.bits(i);
  for (std::size_t j = 0; j < dg.count(); ++j) e.dgamma.push_back(dg.bits(j));
  for (std::size_t j = 0; j < db.count(); ++j) e.dbeta.push_back(db.bits(j));
  return e;
}

}  // namespace lnorm::verify
