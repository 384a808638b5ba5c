// The backward's harness (lnorm/harness.hpp): a backward kernel run inside guard bytes with the forward's saved
// statistics, and the exact gradients. Moved out of properties_backward.cpp so that `lnorm report --dir bwd`
// measures kernels exactly as `lnorm verify --dir bwd` runs them.
#include <algorithm>
#include <string>
#include <vector>

#include "lnorm/backward.hpp"
#include "lnorm/format.hpp"
#include "lnorm/guarded_operands.hpp"
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

GuardedBackward::GuardedBackward(const KernelInfo& k, const Case& c, const SavedStats& saved)
    : k_(k),
      c_(c),
      saved_(saved),
      ops_(c.problem(),
           InputValues{}
               .set(Operand::x, c.x)
               .set(Operand::gamma, c.gamma)
               .set(Operand::dy, c.dy)
               .set(Operand::saved_mean, saved_.mean)
               .set(Operand::saved_rstd, saved_.rstd),
           c.spec.misalign, {}) {}

std::string GuardedBackward::run(int threads) {
  const Problem p = c_.problem(threads);
  if (const auto why = unavailable_reason(k_, p)) return "harness: the kernel declines this case: " + *why;
  ops_.prefill();
  k_.run(p, ops_.tensors());
  return ops_.check();
}

BackwardOutputs GuardedBackward::outputs() const {
  return {ops_.bits(Operand::dx), ops_.bits(Operand::dgamma), ops_.bits(Operand::dbeta), ""};
}

namespace {
std::vector<std::byte> snapshot_of(const Buffer* b) { return b ? b->snapshot() : std::vector<std::byte>{}; }
bool same_as(const Buffer* b, const std::vector<std::byte>& before) { return !b || b->first_change(before) == b->count(); }
}  // namespace

GuardedBackward::Bytes GuardedBackward::output_bytes() const {
  return {snapshot_of(ops_.find(Operand::dx)), snapshot_of(ops_.find(Operand::dgamma)), snapshot_of(ops_.find(Operand::dbeta))};
}

bool GuardedBackward::same_dx(const Bytes& b) const { return same_as(ops_.find(Operand::dx), b.dx); }

bool GuardedBackward::same_params(const Bytes& b) const {
  return same_as(ops_.find(Operand::dgamma), b.dgamma) && same_as(ops_.find(Operand::dbeta), b.dbeta);
}

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
