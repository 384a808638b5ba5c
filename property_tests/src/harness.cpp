#include "lnorm/harness.hpp"

#include <algorithm>
#include <cstring>

#include "lnorm/add.hpp"
#include "lnorm/format.hpp"
#include "lnorm/metrics.hpp"

namespace lnorm::verify {

namespace {

constexpr std::size_t kGuard = 64;
constexpr std::byte kGuardByte{0xA5};

// Calls fn with a zero of the unsigned type one element of d is stored in (2, 4 or 8 bytes), so that a loop over
// a buffer copies fixed-size elements (a memcpy of size_of(d) bytes per element compiled to a byte loop).
template <class Fn>
void with_bits_type(DType d, Fn&& fn) {
  switch (size_of(d)) {
    case 2: fn(std::uint16_t{}); return;
    case 4: fn(std::uint32_t{}); return;
    default: fn(std::uint64_t{}); return;
  }
}

}  // namespace

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
  std::byte* p = static_cast<std::byte*>(data());
  with_bits_type(d, [&]<class Bits>(Bits) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto b = static_cast<Bits>(double_to_bits(f, values[i]));
      std::memcpy(p + i * sizeof(Bits), &b, sizeof(Bits));
    }
  });
}

double Buffer::value(std::size_t i) const { return bits_to_double(format_of(dtype_), bits(i)); }

void Buffer::fill_bits(std::uint64_t pattern) {
  std::byte* p = static_cast<std::byte*>(data());
  with_bits_type(dtype_, [&]<class Bits>(Bits) {
    const auto b = static_cast<Bits>(pattern);
    for (std::size_t i = 0; i < count_; ++i) std::memcpy(p + i * sizeof(Bits), &b, sizeof(Bits));
  });
}

std::vector<std::uint64_t> Buffer::all_bits() const {
  std::vector<std::uint64_t> out(count_);
  const std::byte* p = static_cast<const std::byte*>(data());
  with_bits_type(dtype_, [&]<class Bits>(Bits) {
    for (std::size_t i = 0; i < count_; ++i) {
      Bits b;
      std::memcpy(&b, p + i * sizeof(Bits), sizeof(Bits));
      out[i] = b;
    }
  });
  return out;
}

std::size_t Buffer::find_bits(std::uint64_t pattern) const {
  const std::byte* p = static_cast<const std::byte*>(data());
  std::size_t at = count_;
  with_bits_type(dtype_, [&]<class Bits>(Bits) {
    const auto want = static_cast<Bits>(pattern);
    for (std::size_t i = 0; i < count_; ++i) {
      Bits b;
      std::memcpy(&b, p + i * sizeof(Bits), sizeof(Bits));
      if (b == want) {
        at = i;
        return;
      }
    }
  });
  return at;
}

std::vector<std::byte> Buffer::snapshot() const {
  const std::byte* p = static_cast<const std::byte*>(data());
  return std::vector<std::byte>(p, p + count_ * size_of(dtype_));
}

// before: this buffer's own snapshot (the same size).
std::size_t Buffer::first_change(const std::vector<std::byte>& before) const {
  const std::size_t size = size_of(dtype_);
  const std::byte* p = static_cast<const std::byte*>(data());
  // (An empty buffer's data may be null, which memcmp may not be handed even for 0 bytes: UBSan's nonnull.)
  if (count_ == 0 || std::memcmp(p, before.data(), before.size()) == 0) return count_;
  for (std::size_t i = 0; i < count_; ++i)
    if (std::memcmp(p + i * size, before.data() + i * size, size) != 0) return i;
  return count_;
}

bool Buffer::guards_intact() const {
  const std::size_t end = offset_ + count_ * size_of(dtype_);
  // The two guard ranges only (a loop over every byte with a test per byte was 5% of verify's time).
  const auto intact = [&](std::size_t from, std::size_t to) {
    unsigned bad = 0;
    for (std::size_t i = from; i < to; ++i) bad |= static_cast<unsigned>(bytes_[i] ^ kGuardByte);
    return bad == 0;
  };
  return intact(0, offset_) && intact(end, bytes_.size());
}

KernelInputs kernel_inputs(const Case& c) {
  KernelInputs in;
  if (c.spec.op.prologue != Prologue::residual_add) {
    in.x = c.x;
    return in;
  }
  if (!c.residual.empty()) {
    in.x = c.x;
    in.residual = c.residual;
    return in;
  }
  const Format xf = format_of(c.spec.dtype);
  in.x.resize(c.x.size());
  in.residual.resize(c.x.size());
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    const double v = c.x[i];
    if (!std::isfinite(v) || v == 0) {  // NaN/Inf pass through x; ±0 splits as ±0 + ±0
      in.x[i] = v;
      in.residual[i] = std::isnan(v) || std::isinf(v) ? 0.0 : v;
      continue;
    }
    // u = 1/2 + k/64, k from the position and the seed (a splitmix step): many different splits, no rng state.
    const double u = 0.5 + static_cast<double>(position_hash(c.spec.data_seed, i) % 33) / 64;
    const double xv = round_to_format(xf, v * u);  // in [v/2, v]: v − xv is exact in x's format
    in.x[i] = xv;
    in.residual[i] = v - xv == 0 ? std::copysign(0.0, v) : v - xv;
  }
  return in;
}

std::vector<double> norm_input(const Case& c) {
  // No residual given: the harness's split adds up to each value exactly (kernel_inputs), so h is c.x. Each value
  // is in x's dtype, and so in the residual's (x's, or f32 beside 16-bit x): rounding it to h changes nothing.
  if (c.spec.op.prologue != Prologue::residual_add || c.residual.empty()) return c.x;
  const KernelInputs in = kernel_inputs(c);
  const Format hf = format_of(c.spec.residual());
  std::vector<double> h(in.x.size());
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = bits_to_double(hf, round_sum_bits(hf, in.x[i], in.residual[i]));
  return h;
}

Outputs run_guarded(const KernelInfo& k, const Case& c, int threads, bool explicit_identity) {
  const DType d = c.spec.dtype, sd = stats_dtype(d), pd = c.spec.params();
  const Problem p0 = c.problem(threads);
  const auto rows = static_cast<std::size_t>(p0.rows), n = static_cast<std::size_t>(p0.elements());
  const bool has_mean = c.spec.op.norm == Norm::layernorm;  // rmsnorm has no mean: its kernels get a null mean
  const int mis = c.spec.misalign;
  const bool fused = c.spec.op.prologue == Prologue::residual_add;
  // The kernel's x and residual (kernel_inputs): the harness's split where Add & Norm has no residual given, else
  // c's own, read in place (a copy of c.x per run was one more buffer of every size to map under ASan).
  const bool split = fused && c.residual.empty();
  const KernelInputs split_in = split ? kernel_inputs(c) : KernelInputs{};
  struct {
    const std::vector<double>& x;
    const std::vector<double>& residual;
  } const in{split ? split_in.x : c.x, fused && !split ? c.residual : split_in.residual};
  const DType rd = c.spec.residual();
  const Buffer x(d, in.x, mis), res(rd, in.residual, mis);
  const std::vector<std::byte> x_before = x.snapshot(), res_before = res.snapshot();
  const std::uint64_t y_canary = canary_bits(d), stats_canary = canary_bits(sd), h_canary = canary_bits(rd);
  Buffer h(rd, fused ? n : 0, mis);
  h.fill_bits(h_canary);
  std::vector<double> gamma = c.gamma, beta = c.beta;
  if (explicit_identity) {
    if (gamma.empty()) gamma.assign(static_cast<std::size_t>(p0.cols), 1.0);
    if (beta.empty()) beta.assign(static_cast<std::size_t>(p0.cols), 0.0);
  }
  const Buffer g(pd, gamma, mis), b(pd, beta, mis);
  const std::vector<std::byte> g_before = g.snapshot(), b_before = b.snapshot();
  Buffer y(d, n, mis), mean(sd, has_mean ? rows : 0, 0), rstd(sd, rows, 0);
  y.fill_bits(y_canary);
  mean.fill_bits(stats_canary);
  rstd.fill_bits(stats_canary);
  Problem p = with_op(make_problem(p0.rows, p0.cols, d, p0.eps, !gamma.empty(), !beta.empty(), threads), c.spec.op);
  // The offset applies to a given gamma; the explicit identity (gamma = 1 where none was given) has none.
  p = set_params(p, pd, c.gamma.empty() ? 0.0 : c.spec.gamma_offset);
  if (fused) p = set_residual(p, rd);
  if (const auto why = unavailable_reason(k, p)) {  // never hand a kernel a problem it declines
    Outputs declined;
    declined.violation = "harness: the kernel declines this case: " + *why;
    return declined;
  }
  Tensors t{x.data(), gamma.empty() ? nullptr : g.data(), beta.empty() ? nullptr : b.data(), y.data(),
            has_mean ? mean.data() : nullptr, rstd.data()};
  if (fused) {
    t.residual = res.data();
    t.h = h.data();
  }
  k.run(p, t);
  Outputs out;
  out.h = h.all_bits();  // empty unless fused
  out.y = y.all_bits();
  out.mean = mean.all_bits();
  out.rstd = rstd.all_bits();
  // "harness:" marks a structural violation: budgets.toml's expected failures never excuse one.
  auto note = [&](const std::string& what) {
    if (out.violation.empty()) out.violation = "harness: " + what;
  };
  if (!y.guards_intact()) note("wrote outside y (guard region changed)");
  if (!mean.guards_intact()) note("wrote outside mean (guard region changed)");
  if (!rstd.guards_intact()) note("wrote outside rstd (guard region changed)");
  if (!h.guards_intact()) note("wrote outside h (guard region changed)");
  if (!x.guards_intact() || !g.guards_intact() || !b.guards_intact() || !res.guards_intact()) note("wrote around an input buffer");
  const Format rf = format_of(rd);
  // The inputs byte for byte as encoded (snapshots taken before the run).
  if (const std::size_t i = res.first_change(res_before); i < res.count()) note("modified the residual at element " + std::to_string(i));
  for (std::size_t i = 0; fused && i < n; ++i) {
    if (out.h[i] == h_canary) {
      note("never wrote h element " + std::to_string(i));
      break;
    }
  }
  if (const std::size_t i = x.first_change(x_before); i < x.count()) note("modified x at element " + std::to_string(i));
  const std::size_t g_at = g.first_change(g_before), b_at = b.first_change(b_before);
  const bool g_changed = g_at < g.count(), b_changed = b_at < b.count();
  if (g_changed || b_changed) {
    const std::size_t column = g_changed && b_changed ? std::min(g_at, b_at) : g_changed ? g_at : b_at;
    note(std::string(gamma.empty() ? "modified beta" : "modified gamma or beta") + " at column " + std::to_string(column));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (out.y[i] == y_canary) {
      note("never wrote y element " + std::to_string(i) + " (row " + std::to_string(i / static_cast<std::size_t>(p.cols)) + ")");
      break;
    }
  }
  for (std::size_t r = 0; r < rows; ++r) {
    if ((has_mean && out.mean[r] == stats_canary) || out.rstd[r] == stats_canary) {
      note(std::string(has_mean ? "never wrote mean/rstd" : "never wrote rstd") + " of row " + std::to_string(r));
      break;
    }
  }
  // h is x + residual rounded once, bit for bit (NaN for NaN, any payload); not a harness violation:
  // a kernel that declares another rounding of h lists the property among its expected failures.
  // Where the harness split the values (no residual given), x + residual is c.x exactly (norm_input says why):
  // its bits, without re-rounding every sum on every run (round_sum_bits was 7% of Add & Norm's verify time).
  for (std::size_t i = 0; fused && out.violation.empty() && i < n; ++i) {
    const std::uint64_t want = split ? double_to_bits(rf, c.x[i]) : round_sum_bits(rf, in.x[i], in.residual[i]);
    if (!correctly_rounded(rf, out.h[i], want) ||
        (bits_to_double(rf, out.h[i]) == 0 && out.h[i] != want)) {  // ±0 as IEEE's sum gives it
      char msg[200];
      std::snprintf(msg, sizeof msg, "h: element %zu (row %zu) is %.9g, but x + residual = %.9g + %.9g rounded once is %.9g",
                    i, i / static_cast<std::size_t>(p.cols), bits_to_double(rf, out.h[i]), in.x[i], in.residual[i],
                    bits_to_double(rf, want));
      out.violation = msg;
    }
  }
  return out;
}

Exact exact_answer(const Case& c) {
  const Problem p = c.problem();
  const DType d = c.spec.dtype, pd = c.spec.params();
  const auto n = static_cast<std::size_t>(p.cols);
  // The norm reads h (Add & Norm, in the residual's dtype) or x.
  const DType in_dtype = c.spec.op.prologue == Prologue::residual_add ? c.spec.residual() : d;
  const Buffer x(in_dtype, norm_input(c), 0), g(pd, c.gamma, 0), b(pd, c.beta, 0);
  Buffer y(d, static_cast<std::size_t>(p.elements()), 0);
  Exact e;
  e.y.resize(static_cast<std::size_t>(p.elements()));
  e.elems.resize(e.y.size());
  e.rows.resize(static_cast<std::size_t>(p.rows));
  RowReferencer ref(p);
  for (std::size_t r = 0; r < e.rows.size(); ++r) {
    e.rows[r] = ref.run(static_cast<const std::byte*>(x.data()) + r * n * size_of(in_dtype), c.gamma.empty() ? nullptr : g.data(),
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
  // Each array sized once, then filled: appended row by row it grew by doubling, and for a batch of 2^18 elements
  // the reallocations were a fifth of `verify --property batch_invariance`'s samples under ASan (page faults).
  const auto pick = [&](const std::vector<double>& from, std::vector<double>& to) {
    to = {};
    if (from.empty()) return;
    to.reserve(rows.size() * static_cast<std::size_t>(n));
    for (std::int64_t r : rows) to.insert(to.end(), from.begin() + r * n, from.begin() + (r + 1) * n);
  };
  pick(c.x, out.x);
  pick(c.residual, out.residual);
  pick(c.dy, out.dy);
  return out;
}

}  // namespace lnorm::verify
