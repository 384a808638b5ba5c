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

BackwardOutputs run_guarded_backward(const KernelInfo& k, const Case& c, const SavedStats& saved, int threads) {
  const DType d = c.spec.dtype, pd = c.spec.params(), sd = stats_dtype(d);
  const Problem p = c.problem(threads);
  const auto n = static_cast<std::size_t>(p.elements()), cols = static_cast<std::size_t>(p.cols);
  const int mis = c.spec.misalign;
  const bool has_mean = c.spec.op.norm == Norm::layernorm;
  BackwardOutputs out;
  if (const auto why = unavailable_reason(k, p)) {
    out.violation = "harness: the kernel declines this case: " + *why;
    return out;
  }
  const Buffer x(d, c.x, mis), g(pd, c.gamma, mis), dy(d, c.dy, mis);
  const Buffer sm(sd, has_mean ? saved.mean : std::vector<double>{}, 0), sr(sd, saved.rstd, 0);
  // The inputs' bytes before the run: a kernel must leave them as it got them.
  const std::vector<std::byte> x_before = x.snapshot(), g_before = g.snapshot(), dy_before = dy.snapshot();
  const std::vector<std::byte> sm_before = sm.snapshot(), sr_before = sr.snapshot();
  Buffer dx(d, n, mis), dg(pd, p.has_gamma ? cols : 0, mis), db(pd, p.has_beta ? cols : 0, mis);
  const std::uint64_t dx_canary = canary_bits(d), param_canary = canary_bits(pd);
  dx.fill_bits(dx_canary);
  dg.fill_bits(param_canary);
  db.fill_bits(param_canary);
  Tensors t;
  t.x = x.data();
  t.gamma = p.has_gamma ? g.data() : nullptr;
  t.dy = dy.data();
  t.saved_mean = has_mean ? sm.data() : nullptr;
  t.saved_rstd = sr.data();
  t.dx = dx.data();
  t.dgamma = p.has_gamma ? dg.data() : nullptr;
  t.dbeta = p.has_beta ? db.data() : nullptr;
  k.run(p, t);
  out.dx = dx.all_bits();
  out.dgamma = dg.all_bits();
  out.dbeta = db.all_bits();
  const auto note = [&](const std::string& what) {
    if (out.violation.empty()) out.violation = "harness: " + what;
  };
  if (!dx.guards_intact()) note("wrote outside dx (guard region changed)");
  if (!dg.guards_intact()) note("wrote outside dgamma (guard region changed)");
  if (!db.guards_intact()) note("wrote outside dbeta (guard region changed)");
  if (!x.guards_intact() || !g.guards_intact() || !dy.guards_intact() || !sm.guards_intact() || !sr.guards_intact())
    note("wrote around an input buffer");
  if (const std::size_t i = std::min(x.first_change(x_before), dy.first_change(dy_before)); i < n)
    note("modified x or dy at element " + std::to_string(i));
  if (const std::size_t j = g.first_change(g_before); j < g.count()) note("modified gamma at column " + std::to_string(j));
  if (const std::size_t r = std::min(sr.first_change(sr_before), has_mean ? sm.first_change(sm_before) : sr.count()); r < sr.count())
    note("modified the saved statistics of row " + std::to_string(r));
  for (std::size_t i = 0; i < n; ++i) {
    if (out.dx[i] == dx_canary) {
      note("never wrote dx element " + std::to_string(i) + " (row " + std::to_string(i / cols) + ")");
      break;
    }
  }
  for (const auto& [v, what] : {std::pair{&out.dgamma, "dgamma"}, std::pair{&out.dbeta, "dbeta"}}) {
    for (std::size_t j = 0; j < v->size(); ++j) {
      if ((*v)[j] == param_canary) {
        note(std::string("never wrote ") + what + " column " + std::to_string(j));
        break;
      }
    }
  }
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
