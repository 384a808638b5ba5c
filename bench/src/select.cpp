// `lnorm select`'s rules (lnorm/select.hpp): qualify on verified accuracy, then rank by measured speed.
#include "lnorm/select.hpp"

#include <cstdio>

namespace lnorm::bench {

std::vector<Candidate> qualify(std::span<const KernelInfo> kernels, const SelectRequest& request,
                               const std::function<Accuracy(const KernelInfo&)>& accuracy) {
  std::vector<Candidate> out;
  for (const KernelInfo& k : kernels) {
    if (!k.takes.dtypes.contains(request.dtype) || !k.implements(request.timed_op())) continue;
    const Accuracy acc = accuracy(k);
    Candidate c{&k, acc.a, acc.b, "", "", 0};
    Problem p = with_op(make_problem(request.shape.rows, request.shape.cols, request.dtype, 1e-5, true, request.op.norm == Norm::layernorm),
                        request.op);
    if (request.op.prologue == Prologue::residual_add) p = set_residual(p, request.dtype);  // as bench times it: the residual in x's dtype
    if (request.quant) p = set_quant(p, *request.quant);
    const auto why = unavailable_reason(k, p);
    if (why) {
      c.status = "unavailable", c.reason = *why;
    } else if (k.cautionary) {
      c.status = "excluded", c.reason = "cautionary (wrong on purpose)";
    } else if (acc.accuracy_failure) {
      c.status = "over budget", c.reason = "fails its own accuracy property: " + *acc.accuracy_failure;
    } else if (request.max_ulp >= 0 && (acc.a > request.max_ulp || acc.b > 0)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "budget %g + %g*kappa scaled ulps is over --max-ulp %g", acc.a, acc.b, request.max_ulp);
      c.status = "over budget", c.reason = buf;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Entry> entries_to_time(const std::vector<Candidate>& candidates, const SelectRequest& request) {
  std::vector<Entry> entries;
  for (const Candidate& c : candidates)
    if (c.status.empty())
      entries.push_back({std::string(c.kernel->name), c.kernel, request.dtype, request.shape, request.timed_op(),
                         request.quant.value_or(QuantSpec{})});
  // The copies of the op's streams (x to y; with Add & Norm also residual to h).
  const Op copy_op = request.op.prologue == Prologue::residual_add ? Op::add_layernorm : Op::layernorm;
  for (const std::string& copy : copy_names()) entries.push_back({copy, nullptr, request.dtype, request.shape, copy_op});
  return entries;
}

const Candidate* rank(std::vector<Candidate>& candidates, const std::vector<Result>& results, const SelectRequest& request) {
  Candidate* best = nullptr;
  for (Candidate& c : candidates) {
    if (!c.status.empty()) continue;
    const Result* r = nullptr;
    for (const Result& x : results)
      if (x.entry.kernel == c.kernel && x.entry.dtype == request.dtype && x.entry.shape.rows == request.shape.rows &&
          x.entry.shape.cols == request.shape.cols && x.entry.op == request.timed_op())
        r = &x;
    if (!r || !r->skipped.empty() || !(r->bytes_per_second > 0)) {
      c.status = "unavailable", c.reason = r ? (r->skipped.empty() ? "no time measured" : r->skipped) : "not measured";
      continue;
    }
    c.gb_per_second = r->bytes_per_second / 1e9;
    if (!best || c.gb_per_second > best->gb_per_second) best = &c;
  }
  for (Candidate& c : candidates) {
    if (!c.status.empty()) continue;
    if (&c == best) {
      c.status = "chosen";
    } else {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.2fx slower than %s", best->gb_per_second / c.gb_per_second,
                    std::string(best->kernel->name).c_str());
      c.status = "slower", c.reason = buf;
    }
  }
  return best;
}

}  // namespace lnorm::bench
