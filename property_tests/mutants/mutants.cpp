// mutants — LayerNorm kernels that are WRONG ON PURPOSE, one defect each, so a test can check that
// the property-based suite catches every one. Apart from its defect each mutant is the control
// kernel (`control()`): a two-pass LayerNorm computed in double (long double for f64 data) and
// rounded once to the storage type, accurate enough to pass every property — the mutants test
// checks that — so a failure can only come from the defect. Each imitates a real-world bug:
//   var_unbiased      var = Σ(x−mean)²/(n−1); NaN at n = 1. Hand-written LayerNorms built on
//                     torch's x.std(-1) / x.var(-1), unbiased by default (Annotated Transformer).
//   eps_outside_sqrt  rstd = 1/(sqrt(var) + eps): the same Annotated Transformer line,
//                     (x − mean) / (std + eps). Differs only when var is within ~eps of 0.
//   eps_missing       rstd = 1/sqrt(var): a constant row (padding tokens) gives rstd = Inf and
//                     y = 0·Inf = NaN.
//   f16_accumulation  Σx and Σ(x−mean)² rounded to f16 after every add: the llm.c / fp16
//                     "accumulate in half" bug; a sum of unit values stalls at 2048.
//   drops_last        statistics over x[0..n−2] and / (n−1): an off-by-one loop bound.
//   counts_padding    row padded with zeros to a multiple of 8 and the padding counted in mean and
//                     var: Triton's LayerNorm at non-power-of-two widths (BLOCK_SIZE = next_pow2(n)
//                     with the mask forgotten on the statistics).
//   wrong_axis        statistics down each column instead of along each row: normalizing the batch
//                     axis, BatchNorm-style (an axis / normalized_shape mix-up).
//   approx_rsqrt      rstd from an rsqrtps-like estimate (12 significant bits) without the Newton
//                     step that SIMD code must follow it with; relative error up to ~2^-12.
//   skips_tail        an 8-wide "vector loop" with no remainder loop: the last n mod 8 elements are
//                     missing from the statistics (sums still / n) and their y is never written.
//   bf16_accumulation the running sums rounded to bf16 after every add (a bf16 kernel that keeps its
//                     accumulator in the storage type).
//   ignores_offset    y uses gamma where it should use (C + gamma): Gemma's (1 + w) forgotten.
//   subtracts_mean    (RMSNorm only) the mean subtracted: a LayerNorm shipped as an RMSNorm.
//   offset_16bit      (f16 and bf16 only) every output 2^-8 too high (beta added twice where beta is small, a
//                     bias folded in twice): half a bf16 ulp at 1, so each bf16 output is within 1 ulp of its
//                     own answer; the old gate that counted errors in ulps of the 16-bit output passed it.
//   batch_dependent   batches of 256 rows or more take a "large batch" path whose running sums are rounded
//                     to f32 after every add (the small-batch path, the control's, sums in double): a row's
//                     bits depend on how many rows share its batch. vLLM #48271 (its block size chosen by the
//                     number of tokens, 1024 below 256 and 256 above). Below 256 rows it is the control, so
//                     only batch_invariance (batches of up to 4097 rows) can see it; row_independence's
//                     batches (at most 48 rows) cannot.
// The add_* mutants (Add & Norm's defects) are described at AddDefect below, the quant_* ones (the quantized
// epilogue's) in quant_mutants.cpp: their y is the control's, so only verify's `quantized` property can see them.
// Every mutant but subtracts_mean and the add_* ones implements both norms (RMSNorm: the mean taken as 0, the sums of x²), and
// reads f32 gamma/beta and the gamma offset as lnorm's kernels do (lnorm/params.hpp).
#include "mutants.hpp"
#include "backward_mutants.hpp"
#include "quant_mutants.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/params.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::mutants {
namespace {

enum class Defect {
  none,  // the control
  var_unbiased,
  eps_outside_sqrt,
  eps_missing,
  f16_accumulation,
  drops_last,
  counts_padding,
  wrong_axis,
  approx_rsqrt,
  skips_tail,
  bf16_accumulation,
  ignores_offset,
  subtracts_mean,
  batch_dependent,
  offset_16bit,
};

// offset_16bit's shift: half a bf16 ulp at 1 (2^-7), 4 f16 ulps at 1 (2^-10).
constexpr double kOffset16 = 0x1p-8;

// batch_dependent: the row count from which its "large batch" path is taken (vLLM's threshold).
constexpr std::int64_t kLargeBatchRows = 256;

// 8 = the AVX2 f32 vector width: padding width for counts_padding, loop width for skips_tail.
constexpr std::int64_t kPad = 8;

// Wider than any kernel's accumulator: the control's own rounding errors stay far below the
// budgets (f32 data summed in double: 2^-29 of an f32 ulp per addition).
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, long double, double>;
// The stats format mean/rstd are written in (DESIGN: f32, or f64 for f64 data).
template <class T>
using Stat = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
Acc<T> load(const T& v) {
  return static_cast<Acc<T>>(to_float(v));
}

// One running-sum step. f16_accumulation keeps the sum in f16 (rounded after every add).
template <Defect D, class A>
A add(A sum, A v, bool large_batch = false) {
  if constexpr (D == Defect::batch_dependent)
    return large_batch ? static_cast<A>(static_cast<float>(sum + v)) : sum + v;
  else if constexpr (D == Defect::f16_accumulation)
    return static_cast<A>(to_float(f16_from_float(static_cast<float>(sum + v))));
  else if constexpr (D == Defect::bf16_accumulation)
    return static_cast<A>(to_float(bf16_from_float(static_cast<float>(sum + v))));
  else
    return sum + v;
}

// What the output loop needs: the centre and the scale.
template <class A>
struct RowNorm {
  A mean;
  A rstd;
};

// Keeps the top 12 significant mantissa bits (truncating), like rsqrtps's 1.5·2^-12 estimate.
template <class A>
A truncate_to_12_bits(A r) {
  const double d = static_cast<double>(r);
  return static_cast<A>(std::bit_cast<double>(std::bit_cast<std::uint64_t>(d) & ~((std::uint64_t{1} << 40) - 1)));
}

template <Defect D, class A>
A rstd_of(A var, A eps) {
  if constexpr (D == Defect::eps_outside_sqrt) return A(1) / (std::sqrt(var) + eps);
  else if constexpr (D == Defect::eps_missing) return A(1) / std::sqrt(var);
  else if constexpr (D == Defect::approx_rsqrt)
    return truncate_to_12_bits(A(1) / std::sqrt(var + eps));
  else return A(1) / std::sqrt(var + eps);
}

// Two-pass statistics of the n values x[0], x[stride], ..., x[(n−1)·stride] (stride ≠ 1 only for
// wrong_axis's columns). Which elements are summed, and what by, is decided here; rstd_of holds
// the eps and rsqrt defects.
// centred: LayerNorm; RMSNorm takes the mean as 0 (subtracts_mean does not).
// large_batch: the row is in a batch of kLargeBatchRows rows or more (batch_dependent's defect).
template <class T, Defect D>
RowNorm<Acc<T>> stats(const T* x, std::int64_t n, std::int64_t stride, Acc<T> eps, bool centred, bool large_batch = false) {
  using A = Acc<T>;
  std::int64_t m = n;  // elements that enter the sums
  A mean_div = static_cast<A>(n), var_div = static_cast<A>(n);
  if constexpr (D == Defect::drops_last) {
    m = n - 1;
    mean_div = var_div = static_cast<A>(n > 1 ? n - 1 : 1);
  } else if constexpr (D == Defect::skips_tail) {
    m = n / kPad * kPad;
  } else if constexpr (D == Defect::counts_padding) {
    mean_div = var_div = static_cast<A>((n + kPad - 1) / kPad * kPad);
  } else if constexpr (D == Defect::var_unbiased) {
    var_div = static_cast<A>(n - 1);
  }
  // Sums of x − x[0]: a constant row then gives mean = x[0] exactly whatever n (a plain sum of
  // 4097 equal doubles is not exact even in long double).
  const A shift = n > 0 ? load(x[0]) : A(0);
  A sum = 0;
  for (std::int64_t i = 0; i < m; ++i) sum = add<D>(sum, load(x[i * stride]) - shift, large_batch);
  if constexpr (D == Defect::counts_padding) {
    for (std::int64_t i = n; i < (n + kPad - 1) / kPad * kPad; ++i) sum = add<D>(sum, A(0) - shift);
  }
  const bool has_mean = centred || D == Defect::subtracts_mean;
  const A mean = has_mean ? shift + sum / mean_div : A(0);
  // Deviations about the shift, then the mean's part of them: x − shift is exact (Sterbenz) where the row
  // sits near its first value, so a spread down at the data's own ulp (Add & Norm's h = c ± an ulp, kappa
  // 2^50) keeps its bits; x − mean would lose them to the rounding of mean.
  const A mean_from_shift = has_mean ? sum / mean_div : A(0);
  const A base = has_mean ? shift : A(0);
  A sq = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const A d = (load(x[i * stride]) - base) - mean_from_shift;
    sq = add<D>(sq, d * d, large_batch);
  }
  if constexpr (D == Defect::counts_padding) {
    for (std::int64_t i = n; i < (n + kPad - 1) / kPad * kPad; ++i) {
      const A d = A(0) - mean;  // a zero padding lane, counted as data
      sq = add<D>(sq, d * d);
    }
  }
  return {mean, rstd_of<D>(sq / var_div, eps)};
}

template <class T, Defect D>
void run_typed(const Problem& p, const Tensors& t) {
  using A = Acc<T>;
  const T* x = static_cast<const T*>(t.x);
  // gamma/beta as lnorm's kernels read them (f32 storage, w = C + gamma), in double; ignores_offset drops C.
  Problem params = p;
  if constexpr (D == Defect::ignores_offset) params.gamma_offset = 0;
  const cpu::StagedParams<double> staged = cpu::stage_params<double>(params, t);
  const double* gamma = staged.gamma();
  const double* beta = staged.beta();
  const bool centred = p.op.norm == lnorm::Norm::layernorm;
  T* y = static_cast<T*>(t.y);
  Stat<T>* mean_out = static_cast<Stat<T>*>(t.mean);
  Stat<T>* rstd_out = static_cast<Stat<T>*>(t.rstd);
  const A eps = static_cast<A>(p.eps);
  const std::int64_t n = p.cols;
  // skips_tail writes only the vector-loop part of each row.
  const std::int64_t written = D == Defect::skips_tail ? n / kPad * kPad : n;

  // wrong_axis: column statistics first, on this thread, so the threads only read them.
  std::vector<RowNorm<A>> cols;
  if constexpr (D == Defect::wrong_axis) {
    if (n == 0) return;  // no columns: nothing to report (and r % 0 below would be undefined)
    cols.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) cols.push_back(stats<T, D>(x + i, p.rows, n, eps, centred));
  }

  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      RowNorm<A> row;
      if constexpr (D == Defect::wrong_axis) row = cols[static_cast<std::size_t>(r % n)];
      else row = stats<T, D>(xr, n, 1, eps, centred, p.rows >= kLargeBatchRows);
      // A NaN/Inf in the row makes the whole row NaN (DESIGN), mean and rstd included (RMSNorm's mean is 0
      // whatever the row holds: the elements are looked at).
      bool finite_row = true;
      for (std::int64_t i = 0; i < n; ++i) finite_row = finite_row && std::isfinite(load(xr[i]));
      if (!finite_row || !std::isfinite(row.mean) || std::isnan(row.rstd)) row.mean = row.rstd = std::numeric_limits<A>::quiet_NaN();
      if (mean_out) mean_out[r] = static_cast<Stat<T>>(row.mean);
      if (rstd_out) rstd_out[r] = static_cast<Stat<T>>(row.rstd);
      for (std::int64_t i = 0; i < written; ++i) {
        RowNorm<A> s = row;
        if constexpr (D == Defect::wrong_axis) s = cols[static_cast<std::size_t>(i)];
        A v = (load(xr[i]) - s.mean) * s.rstd;
        if (gamma) v *= static_cast<A>(gamma[i]);
        if (beta) v += static_cast<A>(beta[i]);
        if constexpr (D == Defect::offset_16bit) v += static_cast<A>(kOffset16);
        if constexpr (std::is_same_v<T, double>) yr[i] = static_cast<double>(v);
        else if constexpr (std::is_same_v<T, float>) yr[i] = static_cast<float>(v);
        else yr[i] = from_float<T>(static_cast<float>(v));  // two roundings: ≤ 0.5 ulp + 2^-13 ulp
      }
    }
  });
}

template <Defect D>
void run(const Problem& p, const Tensors& t) {
  switch (p.dtype) {
    case DType::f32: return run_typed<float, D>(p, t);
    case DType::f64: return run_typed<double, D>(p, t);
    case DType::f16: return run_typed<f16, D>(p, t);
    case DType::bf16: return run_typed<bf16, D>(p, t);
  }
}

// Add & Norm's defects (the fused ops only; the norm is the control's, in long double):
//   unrounded_h       h written correctly rounded, but the statistics and y use x + residual unrounded
//                     (kept in the accumulator): what some fused kernels do on purpose, a declared
//                     variant there and a bug in a kernel that claims the norm of h as stored
//   residual_ignored  the statistics from x alone (y from h): the residual forgotten in the reduction
//   h_in_x_dtype      h rounded to x's dtype, then stored in the residual's (f32 beside 16-bit x)
//   h_truncated       h rounded toward zero instead of to nearest
enum class AddDefect { none, unrounded_h, residual_ignored, h_in_x_dtype, h_truncated };

// One stored value of H (float, double, f16, bf16) from a long double v: to nearest, or toward zero.
template <class H>
H store_as(long double v, bool toward_zero) {
  H h;
  if constexpr (std::is_same_v<H, double> || std::is_same_v<H, float>) h = static_cast<H>(v);
  else h = from_float<H>(static_cast<float>(static_cast<double>(v)));  // double: exact for our sums; float: as lnorm's kernels
  if (toward_zero && std::isfinite(static_cast<double>(v))) {
    const long double got = static_cast<long double>(to_float(h));
    if (std::fabs(got) > std::fabs(v)) {
      if constexpr (std::is_same_v<H, double> || std::is_same_v<H, float>) h = std::nextafter(h, H(0));
      else h.bits = static_cast<std::uint16_t>(h.bits - 1);  // sign-magnitude: one step toward zero
    }
  }
  return h;
}

template <Defect D>
void run(const Problem& p, const Tensors& t);

// h = x + r rounded once to H (as every kernel rounds it: IEEE's sum in f32/f64, and f32's sum of 16-bit
// values rounded again, innocuous by Figueroa), or toward zero (h_truncated): one step toward zero where
// the nearest value lies farther from zero than the exact sum (x + r = s + e exactly, by TwoSum in double).
template <class H>
H sum_as(double x, double r, bool toward_zero) {
  H h;
  if constexpr (std::is_same_v<H, double>) h = x + r;
  else if constexpr (std::is_same_v<H, float>) h = static_cast<float>(x) + static_cast<float>(r);
  else h = from_float<H>(static_cast<float>(x) + static_cast<float>(r));
  if (toward_zero) {
    const double s = x + r, bb = s - x, e = (x - (s - bb)) + (r - bb);  // TwoSum
    const double hv = static_cast<double>(to_float(h));
    const double diff = (s - hv) + e;  // exact sum − h (s − hv exact: they are close)
    if (std::isfinite(hv) && diff != 0 && (diff < 0) == (hv > 0)) {
      if constexpr (std::is_same_v<H, double> || std::is_same_v<H, float>) h = std::nextafter(h, H(0));
      else h.bits = static_cast<std::uint16_t>(h.bits - 1);  // sign-magnitude: one step toward zero
    }
  }
  return h;
}

template <class T, class H, AddDefect D>
void run_add_typed(const Problem& p, const Tensors& t) {
  using L = long double;
  const T* x = static_cast<const T*>(t.x);
  const H* res = static_cast<const H*>(t.residual);
  H* h = static_cast<H*>(t.h);
  if constexpr (std::is_same_v<T, H> && D != AddDefect::unrounded_h && D != AddDefect::residual_ignored) {
    // h (as the defect rounds it), then the control's plain norm on h as stored: bit for bit the plain
    // control's answer on h, as add_h_then_norm asks of every kernel.
    parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t k = begin * p.cols; k < end * p.cols; ++k) {
        const double xv = static_cast<double>(to_float(x[k])), rv = static_cast<double>(to_float(res[k]));
        h[k] = D == AddDefect::h_in_x_dtype ? store_as<H>(static_cast<L>(to_float(sum_as<T>(xv, rv, false))), false)
                                            : sum_as<H>(xv, rv, D == AddDefect::h_truncated);
      }
    });
    Tensors nt = t;
    nt.x = t.h;
    nt.residual = nullptr;
    nt.h = nullptr;
    return run<Defect::none>(with_op(p, plain(p.op.norm)), nt);
  }
  const cpu::StagedParams<double> staged = cpu::stage_params<double>(p, t);
  const double* gamma = staged.gamma();
  const double* beta = staged.beta();
  const bool centred = p.op.norm == lnorm::Norm::layernorm;
  T* y = static_cast<T*>(t.y);
  Stat<T>* mean_out = static_cast<Stat<T>*>(t.mean);
  Stat<T>* rstd_out = static_cast<Stat<T>*>(t.rstd);
  const std::int64_t n = p.cols;
  // The control's arithmetic (stats() and run_typed() above, in Acc<T>), on the values the defect feeds it:
  // with residual = 0 every defect here gives the control's bits, so only the defect can be caught.
  using A = Acc<T>;
  const A eps = static_cast<A>(p.eps);
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> stat_in(static_cast<std::size_t>(n)), out_in(static_cast<std::size_t>(n));
    for (std::int64_t r = begin; r < end; ++r) {
      bool finite = true;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t k = r * n + i;
        const double xd = static_cast<double>(to_float(x[k])), rd = static_cast<double>(to_float(res[k]));
        H hv = sum_as<H>(xd, rd, D == AddDefect::h_truncated);
        if constexpr (D == AddDefect::h_in_x_dtype) hv = store_as<H>(static_cast<L>(to_float(sum_as<T>(xd, rd, false))), false);
        h[k] = hv;
        const A used = D == AddDefect::unrounded_h ? static_cast<A>(xd) + static_cast<A>(rd) : static_cast<A>(to_float(hv));
        stat_in[static_cast<std::size_t>(i)] = D == AddDefect::residual_ignored ? static_cast<A>(xd) : used;
        out_in[static_cast<std::size_t>(i)] = used;
        finite = finite && std::isfinite(static_cast<double>(used)) && std::isfinite(static_cast<double>(stat_in[static_cast<std::size_t>(i)]));
      }
      const A shift = n > 0 ? stat_in[0] : A(0);
      A sum = 0;
      for (A v : stat_in) sum += v - shift;
      const A from_shift = centred ? sum / static_cast<A>(n) : A(0), base = centred ? shift : A(0);
      A mean = base + from_shift, sq = 0;
      for (A v : stat_in) {
        const A d = (v - base) - from_shift;
        sq += d * d;
      }
      A rstd = A(1) / std::sqrt(sq / static_cast<A>(n) + eps);
      if (!finite || !std::isfinite(static_cast<double>(mean)) || std::isnan(static_cast<double>(rstd)))
        mean = rstd = std::numeric_limits<A>::quiet_NaN();
      if (mean_out) mean_out[r] = static_cast<Stat<T>>(mean);
      if (rstd_out) rstd_out[r] = static_cast<Stat<T>>(rstd);
      for (std::int64_t i = 0; i < n; ++i) {
        A v = (out_in[static_cast<std::size_t>(i)] - mean) * rstd;
        if (gamma) v *= static_cast<A>(gamma[i]);
        if (beta) v += static_cast<A>(beta[i]);
        if constexpr (std::is_same_v<T, double>) y[r * n + i] = static_cast<double>(v);
        else if constexpr (std::is_same_v<T, float>) y[r * n + i] = static_cast<float>(v);
        else y[r * n + i] = from_float<T>(static_cast<float>(v));
      }
    }
  });
}

template <AddDefect D>
void run_add(const Problem& p, const Tensors& t);

// An Add & Norm mutant: the defect in the fused ops, the control in the plain norms.
template <AddDefect D>
void run_add_defect(const Problem& p, const Tensors& t) {
  if (p.op.prologue == Prologue::residual_add) return run_add<D>(p, t);
  run<Defect::none>(p, t);
}

template <AddDefect D>
void run_add(const Problem& p, const Tensors& t) {
  const bool f32_h = p.residual_dtype == DType::f32 && p.dtype != DType::f32;
  switch (p.dtype) {
    case DType::f32: return run_add_typed<float, float, D>(p, t);
    case DType::f64: return run_add_typed<double, double, D>(p, t);
    case DType::f16: return f32_h ? run_add_typed<f16, float, D>(p, t) : run_add_typed<f16, f16, D>(p, t);
    case DType::bf16: return f32_h ? run_add_typed<bf16, float, D>(p, t) : run_add_typed<bf16, bf16, D>(p, t);
  }
}

// The control's forward: the plain norm's two-pass, or Add & Norm's (fuses_add); with the quantized epilogue, that y
// in x's dtype quantized (quant_mutants.cpp, no defect).
void control_y(const Problem& p, const Tensors& t) { run_add_defect<AddDefect::none>(p, t); }
void control_forward(const Problem& p, const Tensors& t) {
  if (p.op.epilogue == Epilogue::quantized) return run_quant_defect(QuantDefect::none, &control_y, p, t);
  control_y(p, t);
}

// A quant_* mutant's forward: the control's y, quantized with defect D.
template <QuantDefect D>
void run_quant(const Problem& p, const Tensors& t) {
  if (p.op.epilogue == Epilogue::quantized) return run_quant_defect(D, &control_y, p, t);
  control_y(p, t);
}

constexpr DTypeSet kAll{DType::f32, DType::f64, DType::f16, DType::bf16};
// The mutants whose defect lives in 16-bit storage alone run there only, so that what catches them is seen there.
constexpr DTypeSet k16Bit{DType::f16, DType::bf16};

template <BackwardDefect D>
void run_bwd(const Problem& p, const Tensors& t) {
  run_backward_mutant(D, p, t);
}

// A defect in the forward of the plain norms.
constexpr KernelInfo mutant(std::string_view id, std::string_view summary, ForwardFn fn, NormSet norms = kBothNorms,
                            DTypeSet dtypes = kAll) {
  return KernelInfo{id, summary, {.dtypes = dtypes, .forward_norms = norms}, fn};
}
// A defect in Add & Norm's fusion (the plain norms are the control's): the forward takes the whole problem.
constexpr KernelInfo add_mutant(std::string_view id, std::string_view summary, ForwardFn fn) {
  return KernelInfo{id, summary, {.dtypes = kAll, .forward_norms = kBothNorms, .prologues = kWithAdd, .fuses_add = true, .f32_residual = true}, fn};
}
// A defect in the quantized epilogue (q and scales; y is the control's): every forward op, f32/f16/bf16.
constexpr KernelInfo quant_mutant(std::string_view id, std::string_view summary, ForwardFn fn) {
  return KernelInfo{id, summary, {.dtypes = kAll, .forward_norms = kBothNorms, .prologues = kWithAdd, .epilogues = kWithQuant,
                                  .fuses_add = true, .f32_residual = true, .quant_input = QuantInput::x_dtype_y}, fn};
}
// Every row of kQuantMutants as a kernel (the defect a template argument: a plain function pointer each).
template <std::size_t... I>
std::array<KernelInfo, sizeof...(I)> quant_mutants(std::index_sequence<I...>) {
  return {quant_mutant(kQuantMutants[I].name, kQuantMutants[I].summary, &run_quant<kQuantMutants[I].defect>)...};
}
// A defect in the backward.
constexpr KernelInfo bwd_mutant(std::string_view id, std::string_view summary, BackwardFn fn, NormSet norms = kBothNorms,
                                DTypeSet dtypes = kAll) {
  return KernelInfo{id, summary, {.dtypes = dtypes, .backward_norms = norms}, nullptr, fn};
}

}  // namespace

bool defect_in(const KernelInfo& mutant, Op op) {
  if (mutant.name.substr(0, 13) == "mutant_quant_") return op.direction == Direction::fwd;
  return mutant.name.substr(0, 11) != "mutant_add_" || op.prologue == Prologue::residual_add;
}

const KernelInfo& control() {
  static const KernelInfo kControl{
      "mutant_control", "no defect: two-pass in double (long double for f64), rounded once; Add & Norm: h rounded once, then the same in long double",
      {.dtypes = kAll, .forward_norms = kBothNorms, .backward_norms = kBothNorms, .prologues = kWithAdd, .epilogues = kWithQuant,
       .fuses_add = true, .f32_residual = true, .quant_input = QuantInput::x_dtype_y},
      &control_forward, &run_bwd<BackwardDefect::none>};
  return kControl;
}

std::span<const KernelInfo> all() {
  // Counted by the compiler: a new plain or Add & Norm mutant is one line here, a quantized one a row of
  // kQuantMutants (quant_mutants.hpp), a backward one a line of backward_mutants().
  static const auto kPlainAndAdd = std::to_array<KernelInfo>({
      mutant("mutant_var_unbiased", "variance divided by n-1 instead of n (NaN at n = 1)",
             &run<Defect::var_unbiased>),
      mutant("mutant_eps_outside_sqrt", "rstd = 1/(sqrt(var) + eps) instead of 1/sqrt(var + eps)",
             &run<Defect::eps_outside_sqrt>),
      mutant("mutant_eps_missing", "rstd = 1/sqrt(var): no eps, NaN/Inf on constant rows",
             &run<Defect::eps_missing>),
      mutant("mutant_f16_accumulation", "both running sums rounded to f16 after every addition",
             &run<Defect::f16_accumulation>),
      mutant("mutant_drops_last", "statistics leave out the last element and divide by n-1",
             &run<Defect::drops_last>),
      mutant("mutant_counts_padding",
             "row zero-padded to a multiple of 8, the padding counted in mean and var",
             &run<Defect::counts_padding>),
      mutant("mutant_wrong_axis", "statistics taken down each column instead of along each row",
             &run<Defect::wrong_axis>),
      mutant("mutant_approx_rsqrt",
             "rstd truncated to 12 significant bits (rsqrtps, no Newton step)",
             &run<Defect::approx_rsqrt>),
      mutant("mutant_skips_tail",
             "8-wide loop without remainder: last n mod 8 elements ignored, their y unwritten",
             &run<Defect::skips_tail>),
      mutant("mutant_bf16_accumulation", "both running sums rounded to bf16 after every addition",
             &run<Defect::bf16_accumulation>),
      mutant("mutant_ignores_offset", "y uses gamma instead of (gamma_offset + gamma)", &run<Defect::ignores_offset>),
      mutant("mutant_subtracts_mean", "RMSNorm that subtracts the row's mean (a LayerNorm)", &run<Defect::subtracts_mean>,
             NormSet{lnorm::Norm::rmsnorm}),
      mutant("mutant_batch_dependent",
             "batches of 256 rows or more sum in f32, smaller ones in double: a row's bits depend on its batch's size",
             &run<Defect::batch_dependent>),
      mutant("mutant_offset_16bit", "16-bit outputs 2^-8 too high (half a bf16 ulp at 1): a constant bias", &run<Defect::offset_16bit>,
             kBothNorms, k16Bit),
      add_mutant("mutant_add_unrounded_h", "Add & Norm: statistics and y from x + residual unrounded (h written rounded)",
             &run_add_defect<AddDefect::unrounded_h>),
      add_mutant("mutant_add_residual_ignored", "Add & Norm: statistics from x alone, y from h", &run_add_defect<AddDefect::residual_ignored>),
      add_mutant("mutant_add_h_in_x_dtype", "Add & Norm: h rounded to x's dtype, then stored in the residual's",
             &run_add_defect<AddDefect::h_in_x_dtype>),
      add_mutant("mutant_add_h_truncated", "Add & Norm: h rounded toward zero", &run_add_defect<AddDefect::h_truncated>),
  });
  static const auto kBackward = std::to_array<KernelInfo>({  // the backward's (backward_mutants.cpp)
      bwd_mutant("mutant_bwd_drops_mean_g", "backward: LayerNorm's dx without mean(g)", &run_bwd<BackwardDefect::drops_mean_g>,
             NormSet{lnorm::Norm::layernorm}),
      bwd_mutant("mutant_bwd_drops_xhat_term", "backward: dx without xhat*mean(g*xhat)", &run_bwd<BackwardDefect::drops_xhat_term>),
      bwd_mutant("mutant_bwd_dgamma_wrong_axis", "backward: dgamma summed along a row instead of down the column",
             &run_bwd<BackwardDefect::dgamma_wrong_axis>),
      bwd_mutant("mutant_bwd_var_unbiased", "backward: statistics with var divided by n-1", &run_bwd<BackwardDefect::var_unbiased>),
      bwd_mutant("mutant_bwd_eps_outside_sqrt", "backward: rstd = 1/(sqrt(var) + eps)", &run_bwd<BackwardDefect::eps_outside_sqrt>),
      bwd_mutant("mutant_bwd_dbeta_wrong_rows", "backward: dbeta leaves out the first row", &run_bwd<BackwardDefect::dbeta_wrong_rows>),
      bwd_mutant("mutant_bwd_drops_tail_block", "backward: dgamma/dbeta leave out the rows past the last full 64-row block",
             &run_bwd<BackwardDefect::drops_tail_block>),
      bwd_mutant("mutant_bwd_saved_wrong_row", "backward: row r uses the saved mean/rstd of row r+1",
             &run_bwd<BackwardDefect::saved_wrong_row>),
      bwd_mutant("mutant_bwd_dbeta_zero_16bit", "backward, 16-bit x: dbeta written as zeros",
             &run_bwd<BackwardDefect::dbeta_zero>, kBothNorms, k16Bit),
      bwd_mutant("mutant_bwd_param_sums_16bit", "backward, 16-bit x: dgamma and dbeta summed in x's 16-bit format",
             &run_bwd<BackwardDefect::param_sums_in_x_dtype>, kBothNorms, k16Bit),
  });
  static const std::vector<KernelInfo> kMutants = [] {
    std::vector<KernelInfo> v(kPlainAndAdd.begin(), kPlainAndAdd.end());
    for (const KernelInfo& k : quant_mutants(std::make_index_sequence<std::size(kQuantMutants)>{})) v.push_back(k);
    v.insert(v.end(), kBackward.begin(), kBackward.end());
    return v;
  }();
  return kMutants;
}

}  // namespace lnorm::mutants
