#include "lnorm/harness.hpp"

#include <cstring>

#include "lnorm/format.hpp"

namespace lnorm::verify {

namespace {

constexpr std::size_t kGuard = 64;
constexpr std::byte kGuardByte{0xA5};

// Output canaries: quiet NaNs with a payload no arithmetic produces (default NaNs have payload 0).
std::uint64_t canary_bits(DType d) {
  switch (d) {
    case DType::f32: return 0x7FA5A5A5u;
    case DType::f64: return 0x7FF5A5A5A5A5A5A5ull;
    case DType::f16: return 0x7E5Au;
    case DType::bf16: return 0x7FA5u;
  }
  return 0;
}

}  // namespace

Buffer::Buffer(DType d, std::size_t count, int misalign_elements)
    // Room for the leading guard, up to 63 bytes to reach alignment, up to 7 elements of misalignment,
    // the data, and a full trailing guard.
    : dtype_(d), count_(count), bytes_(2 * kGuard + 64 + (8 + count) * size_of(d), kGuardByte) {
  const auto base = reinterpret_cast<std::uintptr_t>(bytes_.data()) + kGuard;
  const std::size_t to_align = (64 - base % 64) % 64;
  offset_ = kGuard + to_align + static_cast<std::size_t>(misalign_elements) * size_of(d);
  std::memset(bytes_.data() + offset_, 0, count * size_of(d));
}

Buffer::Buffer(DType d, const std::vector<double>& values, int misalign_elements)
    : Buffer(d, values.size(), misalign_elements) {
  const Format f = format_of(d);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t b = double_to_bits(f, values[i]);
    std::memcpy(static_cast<std::byte*>(data()) + i * size_of(d), &b, size_of(d));
  }
}

std::uint64_t Buffer::bits(std::size_t i) const {
  std::uint64_t b = 0;
  std::memcpy(&b, static_cast<const std::byte*>(data()) + i * size_of(dtype_), size_of(dtype_));
  return b;
}

double Buffer::value(std::size_t i) const { return bits_to_double(format_of(dtype_), bits(i)); }

void Buffer::fill_bits(std::uint64_t pattern) {
  for (std::size_t i = 0; i < count_; ++i) std::memcpy(static_cast<std::byte*>(data()) + i * size_of(dtype_), &pattern, size_of(dtype_));
}

bool Buffer::guards_intact() const {
  const std::size_t end = offset_ + count_ * size_of(dtype_);
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    if ((i < offset_ || i >= end) && bytes_[i] != kGuardByte) return false;
  }
  return true;
}

Outputs run_guarded(const KernelInfo& k, const Case& c, int threads, bool explicit_identity) {
  const DType d = c.spec.dtype, sd = stats_dtype(d), pd = c.spec.params();
  const Problem p0 = c.problem(threads);
  const auto rows = static_cast<std::size_t>(p0.rows), n = static_cast<std::size_t>(p0.elements());
  const bool has_mean = centred(c.spec.op);  // rmsnorm has no mean: its kernels get a null mean
  const int mis = c.spec.misalign;
  const Buffer x(d, c.x, mis);
  std::vector<double> gamma = c.gamma, beta = c.beta;
  if (explicit_identity) {
    if (gamma.empty()) gamma.assign(static_cast<std::size_t>(p0.cols), 1.0);
    if (beta.empty()) beta.assign(static_cast<std::size_t>(p0.cols), 0.0);
  }
  const Buffer g(pd, gamma, mis), b(pd, beta, mis);
  Buffer y(d, n, mis), mean(sd, has_mean ? rows : 0, 0), rstd(sd, rows, 0);
  y.fill_bits(canary_bits(d));
  mean.fill_bits(canary_bits(sd));
  rstd.fill_bits(canary_bits(sd));
  Problem p = with_op(make_problem(p0.rows, p0.cols, d, p0.eps, !gamma.empty(), !beta.empty(), threads), c.spec.op);
  // The offset applies to a given gamma; the explicit identity (gamma = 1 where none was given) has none.
  p = set_params(p, pd, c.gamma.empty() ? 0.0 : c.spec.gamma_offset);
  if (const auto why = unavailable_reason(k, p)) {  // never hand a kernel a problem it declines
    Outputs declined;
    declined.violation = "harness: the kernel declines this case: " + *why;
    return declined;
  }
  k.run(p, Tensors{x.data(), gamma.empty() ? nullptr : g.data(), beta.empty() ? nullptr : b.data(), y.data(),
                   has_mean ? mean.data() : nullptr, rstd.data()});
  Outputs out;
  out.y.resize(n);
  out.mean.resize(has_mean ? rows : 0);
  out.rstd.resize(rows);
  for (std::size_t i = 0; i < n; ++i) out.y[i] = y.bits(i);
  for (std::size_t r = 0; r < rows; ++r) {
    if (has_mean) out.mean[r] = mean.bits(r);
    out.rstd[r] = rstd.bits(r);
  }
  // "harness:" marks a structural violation: budgets.toml's expected failures never excuse one.
  auto note = [&](const std::string& what) {
    if (out.violation.empty()) out.violation = "harness: " + what;
  };
  if (!y.guards_intact()) note("wrote outside y (guard region changed)");
  if (!mean.guards_intact()) note("wrote outside mean (guard region changed)");
  if (!rstd.guards_intact()) note("wrote outside rstd (guard region changed)");
  if (!x.guards_intact() || !g.guards_intact() || !b.guards_intact()) note("wrote around an input buffer");
  const Format f = format_of(d), pf = format_of(pd);
  for (std::size_t i = 0; i < n; ++i) {
    if (x.bits(i) != double_to_bits(f, c.x[i])) {
      note("modified x at element " + std::to_string(i));
      break;
    }
  }
  for (std::size_t i = 0; i < gamma.size(); ++i) {
    if (g.bits(i) != double_to_bits(pf, gamma[i]) || (!beta.empty() && b.bits(i) != double_to_bits(pf, beta[i]))) {
      note("modified gamma or beta at column " + std::to_string(i));
      break;
    }
  }
  for (std::size_t i = 0; gamma.empty() && i < beta.size(); ++i) {
    if (b.bits(i) != double_to_bits(pf, beta[i])) {
      note("modified beta at column " + std::to_string(i));
      break;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (out.y[i] == canary_bits(d)) {
      note("never wrote y element " + std::to_string(i) + " (row " + std::to_string(i / static_cast<std::size_t>(p.cols)) + ")");
      break;
    }
  }
  for (std::size_t r = 0; r < rows; ++r) {
    if ((has_mean && out.mean[r] == canary_bits(sd)) || out.rstd[r] == canary_bits(sd)) {
      note(std::string(has_mean ? "never wrote mean/rstd" : "never wrote rstd") + " of row " + std::to_string(r));
      break;
    }
  }
  return out;
}

Exact exact_answer(const Case& c) {
  const Problem p = c.problem();
  const DType d = c.spec.dtype, pd = c.spec.params();
  const auto n = static_cast<std::size_t>(p.cols);
  const Buffer x(d, c.x, 0), g(pd, c.gamma, 0), b(pd, c.beta, 0);
  Buffer y(d, static_cast<std::size_t>(p.elements()), 0);
  Exact e;
  e.y.resize(static_cast<std::size_t>(p.elements()));
  e.elems.resize(e.y.size());
  e.rows.resize(static_cast<std::size_t>(p.rows));
  RowReferencer ref(p);
  for (std::size_t r = 0; r < e.rows.size(); ++r) {
    e.rows[r] = ref.run(static_cast<const std::byte*>(x.data()) + r * n * size_of(d), c.gamma.empty() ? nullptr : g.data(),
                        c.beta.empty() ? nullptr : b.data(), p.cols,
                        static_cast<std::byte*>(y.data()) + r * n * size_of(d), e.elems.data() + r * n);
  }
  for (std::size_t i = 0; i < e.y.size(); ++i) e.y[i] = y.bits(i);
  return e;
}

Case select_rows(const Case& c, const std::vector<std::int64_t>& rows) {
  Case out = c;
  const std::int64_t n = c.spec.cols();
  out.spec.shape = {static_cast<std::int64_t>(rows.size()), n};
  out.spec.axis = 1;
  out.x.clear();
  for (std::int64_t r : rows) out.x.insert(out.x.end(), c.x.begin() + r * n, c.x.begin() + (r + 1) * n);
  return out;
}

}  // namespace lnorm::verify
