// The backward's harness (lnorm/harness.hpp): a backward kernel run inside guard bytes with the forward's saved
// statistics, and the exact gradients. Moved out of properties_backward.cpp so that `lnorm report --dir bwd`
// measures kernels exactly as `lnorm verify --dir bwd` runs them.
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
  Buffer dx(d, n, mis), dg(pd, p.has_gamma ? cols : 0, mis), db(pd, p.has_beta ? cols : 0, mis);
  dx.fill_bits(canary_bits(d));
  dg.fill_bits(canary_bits(pd));
  db.fill_bits(canary_bits(pd));
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
  out.dx.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.dx[i] = dx.bits(i);
  out.dgamma.resize(dg.count());
  for (std::size_t j = 0; j < dg.count(); ++j) out.dgamma[j] = dg.bits(j);
  out.dbeta.resize(db.count());
  for (std::size_t j = 0; j < db.count(); ++j) out.dbeta[j] = db.bits(j);
  const auto note = [&](const std::string& what) {
    if (out.violation.empty()) out.violation = "harness: " + what;
  };
  if (!dx.guards_intact()) note("wrote outside dx (guard region changed)");
  if (!dg.guards_intact()) note("wrote outside dgamma (guard region changed)");
  if (!db.guards_intact()) note("wrote outside dbeta (guard region changed)");
  if (!x.guards_intact() || !g.guards_intact() || !dy.guards_intact() || !sm.guards_intact() || !sr.guards_intact())
    note("wrote around an input buffer");
  const Format f = format_of(d), pf = format_of(pd), sf = format_of(sd);
  for (std::size_t i = 0; i < n; ++i) {
    if (x.bits(i) != double_to_bits(f, c.x[i]) || dy.bits(i) != double_to_bits(f, c.dy[i])) {
      note("modified x or dy at element " + std::to_string(i));
      break;
    }
  }
  for (std::size_t j = 0; j < g.count(); ++j) {
    if (g.bits(j) != double_to_bits(pf, c.gamma[j])) {
      note("modified gamma at column " + std::to_string(j));
      break;
    }
  }
  for (std::size_t r = 0; r < saved.rstd.size(); ++r) {
    if (sr.bits(r) != double_to_bits(sf, saved.rstd[r]) || (has_mean && sm.bits(r) != double_to_bits(sf, saved.mean[r]))) {
      note("modified the saved statistics of row " + std::to_string(r));
      break;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (out.dx[i] == canary_bits(d)) {
      note("never wrote dx element " + std::to_string(i) + " (row " + std::to_string(i / cols) + ")");
      break;
    }
  }
  for (const auto& [v, what] : {std::pair{&out.dgamma, "dgamma"}, std::pair{&out.dbeta, "dbeta"}}) {
    for (std::size_t j = 0; j < v->size(); ++j) {
      if ((*v)[j] == canary_bits(pd)) {
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
