// Shared skeleton of the scalar kernels: per row, a statistics step (the part that differs between
// naive, onepass and welford), then the same normalize step
//     y = (x − mean) · rstd · γ + β,   rstd = 1 / sqrt(var + eps)
// in the accumulation type (f32, or f64 for f64 data), rounded once to the storage type.
// Rows are split across threads; a row's result never depends on which thread computed it.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "lnorm/half.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu {

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The row's statistics. The centre is shift + mean_from_shift: kernels that accumulate shifted
// values (x − shift) normalize with (x − shift) − mean_from_shift, which keeps the mean's rounding
// error relative to the spread, not to the offset. shift = 0 is the plain algorithm, bitwise.
template <class T>
struct RowStats {
  Acc<T> mean;             // reported mean (rounded once from shift + mean_from_shift)
  Acc<T> var;              // population variance (divide by n); may be negative for onepass
  Acc<T> shift = 0;
  Acc<T> mean_from_shift;  // mean of (x − shift)
};

// StatsFn: RowStats<T> stats(const T* row, std::int64_t n).
template <class T, class StatsFn>
void normalize_rows(const Problem& p, const Tensors& t, StatsFn stats) {
  using A = Acc<T>;
  const T* x = static_cast<const T*>(t.x);
  const T* gamma = p.has_gamma ? static_cast<const T*>(t.gamma) : nullptr;
  const T* beta = p.has_beta ? static_cast<const T*>(t.beta) : nullptr;
  T* y = static_cast<T*>(t.y);
  A* mean_out = static_cast<A*>(t.mean);
  A* rstd_out = static_cast<A*>(t.rstd);
  const A eps = static_cast<A>(p.eps);
  const std::int64_t n = p.cols;
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const RowStats<T> s = stats(xr, n);
      const A rstd = A(1) / std::sqrt(s.var + eps);
      if (mean_out) mean_out[r] = s.mean;
      if (rstd_out) rstd_out[r] = rstd;
      for (std::int64_t i = 0; i < n; ++i) {
        A v = ((static_cast<A>(to_float(xr[i])) - s.shift) - s.mean_from_shift) * rstd;
        if (gamma) v *= static_cast<A>(to_float(gamma[i]));
        if (beta) v += static_cast<A>(to_float(beta[i]));
        if constexpr (std::is_same_v<T, double>) yr[i] = v;
        else yr[i] = from_float<T>(v);
      }
    }
  });
}

// Dispatches on p.dtype to normalize_rows<T>(p, t, Stats::template of<T>).
template <template <class> class Stats>
void run_scalar(const Problem& p, const Tensors& t) {
  switch (p.dtype) {
    case DType::f32: return normalize_rows<float>(p, t, Stats<float>{});
    case DType::f64: return normalize_rows<double>(p, t, Stats<double>{});
    case DType::f16: return normalize_rows<f16>(p, t, Stats<f16>{});
    case DType::bf16: return normalize_rows<bf16>(p, t, Stats<bf16>{});
  }
}

template <class T>
Acc<T> load(const T& v) {
  return static_cast<Acc<T>>(to_float(v));
}

}  // namespace lnorm::cpu
