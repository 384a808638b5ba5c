// Shared skeleton of the scalar kernels, for both ops: per row, a statistics step (the part that differs
// between naive, onepass and welford; RMSNorm's takes the mean as 0 and var as mean(x²)), then the same
// normalize step
//     y = (x − mean) · rstd · w + β,   rstd = 1 / sqrt(var + eps),   w = C + γ (params.hpp)
// in the accumulation type (f32, or f64 for f64 data), rounded once to the storage type.
// Rows are split across threads; a row's result never depends on which thread computed it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/params.hpp"
#include "quant_epilogue.hpp"
#include "row_split.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu {

#include "epilogue_sink.hpp"  // at namespace scope here (the ISA units include it inside an anonymous namespace)

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The row's statistics. Kernels may work on v = x·scale − shift·scale (scale a power of two, so
// the product is exact unless it underflows), with mean_from_shift and var in that scaled domain:
//   rstd_scaled = 1/sqrt(var + eps·scale²),  y = (v − mean_from_shift)·rstd_scaled,  rstd = rstd_scaled·scale.
// The shift keeps the mean's rounding error relative to the spread, not to the offset; the scale keeps
// squares of the spread inside the accumulator's range (rows near overflow, subnormal rows).
// shift = 0, scale = 1 is the plain algorithm, bitwise.
template <class T>
struct RowStats {
  Acc<T> mean;             // reported mean (rounded once from shift + mean_from_shift/scale)
  Acc<T> var;              // population variance (divide by n) of v; may be negative for onepass
  Acc<T> shift_scaled = 0; // shift·scale
  Acc<T> mean_from_shift;  // mean of v
  Acc<T> scale = 1;
};

// y's value v (A) as the sink's element E: T's storage, or A itself (the quantizer's row; f64 y).
template <class E, class A>
E narrow(A v) {
  if constexpr (std::is_same_v<E, A>) return v;
  else return from_float<E>(v);
}

// StatsFn: RowStats<TIn> stats(const TIn* row, std::int64_t n, bool centred) (centred: LayerNorm;
// otherwise RMSNorm's mean(x²) as var, mean 0). Rows [begin, end) of t.x (TIn) into the sink (epilogue_sink.hpp):
// y's rows (T), or the quantizer's f32 row. TIn is T, or f32 for Add & Norm's f32 h beside 16-bit y (both
// accumulate in f32).
template <class T, class TIn, class StatsFn, class Sink>
void normalize_range(const Problem& p, const Tensors& t, StatsFn stats, const Acc<T>* gamma, const Acc<T>* beta,
                     std::int64_t begin, std::int64_t end, const Sink& sink) {
  using A = Acc<T>;
  using E = typename Sink::Elem;
  static_assert(std::is_same_v<A, Acc<TIn>> && (std::is_same_v<E, T> || std::is_same_v<E, A>));
  const TIn* x = static_cast<const TIn*>(t.x);
  const bool is_centred = p.op.norm == Norm::layernorm;
  A* mean_out = static_cast<A*>(t.mean);
  A* rstd_out = static_cast<A*>(t.rstd);
  const A eps = static_cast<A>(p.eps);
  const std::int64_t n = p.cols;
  for (std::int64_t r = begin; r < end; ++r) {
    const TIn* xr = x + r * n;
    E* out = sink.row(r);
    const RowStats<TIn> s = stats(xr, n, is_centred);
    const A eps_scaled = s.scale == A(1) ? eps : eps * s.scale * s.scale;
    // A NaN or Inf in the row reaches the mean or the variance; DESIGN says the whole row is NaN
    // (an Inf alone would leave mean = ±Inf and y = NaN, a half-poisoned row).
    const bool poisoned = !std::isfinite(s.mean) || std::isnan(s.var);
    const A rstd = poisoned ? std::numeric_limits<A>::quiet_NaN() : A(1) / std::sqrt(s.var + eps_scaled);
    // eps·scale² overflows to +Inf on rows of tiny values (|x| below ~2^-70 in f32 with eps 1e-5): eps dominates
    // there (var/scale² ≪ eps), and the answer (x − mean)/sqrt(eps) is small but not 0 — RMSNorm measures it
    // against itself. rstd is then taken unscaled, rstd_u = 1/sqrt(var/scale² + eps), and y = (d·rstd_u)/scale
    // with d = x·scale − mean·scale: 1/scale ≥ 2^-126 (2^-1022) is a normal power of two, so the product is exact
    // while y is normal; on every other row the factor is 1 and the bits are as before. (y = d·0 = β
    // before: a 4x256 f32 RMSNorm row of values ~1e-30 came out all 0 where y ≈ 3e-28.)
    const bool eps_overflows = std::isinf(eps_scaled) && !poisoned;
    const A rstd_unscaled = eps_overflows ? A(1) / std::sqrt(s.var / s.scale / s.scale + eps) : A(0);
    const A rstd_y = eps_overflows ? rstd_unscaled : rstd, unscale = eps_overflows ? A(1) / s.scale : A(1);
    if (mean_out) mean_out[r] = poisoned ? rstd : s.mean;
    if (rstd_out) rstd_out[r] = eps_overflows ? rstd_unscaled : rstd * s.scale;
    if (poisoned) {  // one NaN for the whole row: its bits do not depend on which operations met it
      for (std::int64_t i = 0; i < n; ++i) out[i] = narrow<E>(rstd);
      sink.done(r);
      continue;
    }
    const auto store = [&](std::int64_t i, A v) {
      if (gamma) v *= gamma[i];
      if (beta) v += beta[i];
      out[i] = narrow<E>(v);
    };
    // An RMSNorm row scaled down (values near overflow) puts its small elements' x·scale among A's subnormals,
    // where they lose bits that rstd_scaled·γ then amplifies: 6.6 ulps of a subnormal f32 output (9 in f64) on
    // verify's raw-bits rows, which RMSNorm's metric measures against themselves. There the element takes
    // (x·rstd_scaled)·scale: x is small, so the product cannot overflow, and the one rounding into the
    // subnormals is the last. (LayerNorm measures such outputs against 1: x − mean's absolute error.)
    if (!is_centred && s.scale < A(1)) {
      constexpr A kMinNormal = std::numeric_limits<A>::min();
      for (std::int64_t i = 0; i < n; ++i) {
        const A xv = static_cast<A>(to_float(xr[i])), xs = xv * s.scale;
        store(i, std::abs(xs) < kMinNormal ? (xv * rstd_y) * s.scale : xs * rstd_y);
      }
      sink.done(r);
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const A d = (static_cast<A>(to_float(xr[i])) * s.scale - s.shift_scaled) - s.mean_from_shift;
      store(i, (d * rstd_y) * unscale);
    }
    sink.done(r);
  }
}

// The forward of rows of TIn (x, or Add & Norm's h from the fused-add adaptor) into y of T.
template <class T, class TIn, class Stats>
void run_typed(const Problem& p, const Tensors& t, Stats stats) {
  using A = Acc<T>;
  const StagedParams<A> params = stage_params<A>(p, t);
  const std::int64_t n = p.cols;
  split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    const auto range = [&](const auto& sink) {
      normalize_range<T, TIn>(p, t, stats, params.gamma(), params.beta(), begin, end, sink);
    };
    // The quantized epilogue (f32 accumulation only: problem.cpp refuses f64 x): the row's f32 y, then
    // quantize_row (quant_epilogue.hpp); y is not written.
    if constexpr (std::is_same_v<A, float>) {
      if (p.op.epilogue == Epilogue::quantized) {
        thread_local std::vector<float> row_y;  // welford_row, the SIMD kernels' fallback, comes here a row at a time
        row_y.resize(static_cast<std::size_t>(n));
        return range(sinks::to_quantizer(row_y.data(), n, static_cast<float*>(t.quant_y), [&](const float* y, std::int64_t r, sinks::RowError) {
          quantize_row(p.quant, y, n, static_cast<std::uint8_t*>(t.q), t.scales, r);
        }));
      }
    }
    range(sinks::ToY<T>{static_cast<T*>(t.y), n});
  });
}

// Dispatches on p.dtype and the rows' storage (input_dtype: x's, or Add & Norm's f32 h beside 16-bit x)
// to run_typed with Stats::template of the input type.
template <template <class> class Stats>
void run_scalar(const Problem& p, const Tensors& t) {
  const bool f32_h = input_dtype(p) == DType::f32 && p.dtype != DType::f32;
  switch (p.dtype) {
    case DType::f32: return run_typed<float, float>(p, t, Stats<float>{});
    case DType::f64: return run_typed<double, double>(p, t, Stats<double>{});
    case DType::f16:
      return f32_h ? run_typed<f16, float>(p, t, Stats<float>{}) : run_typed<f16, f16>(p, t, Stats<f16>{});
    case DType::bf16:
      return f32_h ? run_typed<bf16, float>(p, t, Stats<float>{}) : run_typed<bf16, bf16>(p, t, Stats<bf16>{});
  }
}

template <class T>
Acc<T> load(const T& v) {
  return static_cast<Acc<T>>(to_float(v));
}

}  // namespace lnorm::cpu
