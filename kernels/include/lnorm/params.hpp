// The affine parameters as the CPU kernels' row code reads them (docs/DESIGN.md "Ops"): gamma and beta may
// be stored in x's dtype or in f32 (with f16/bf16 x), and y uses w = C + gamma (the gamma offset). Staged
// once per call into the kernel's working format A — w_i = C + gamma_i rounded once, beta_i widened
// (exact) — so the rows need to know neither the storage nor the offset. Generic code (it allocates).
#pragma once

#include <cstdint>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu {

// Element i of a parameter buffer of dtype d, exactly (every format's values are doubles).
inline double param_value(DType d, const void* p, std::int64_t i) {
  switch (d) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return to_float(static_cast<const f16*>(p)[i]);
    case DType::bf16: return to_float(static_cast<const bf16*>(p)[i]);
  }
  return 0;
}

// True when the parameters can be read in place as x's dtype: no offset, same storage.
inline bool params_in_place(const Problem& p) { return p.param_dtype == p.dtype && p.gamma_offset == 0; }

template <class A>
struct StagedParams {
  std::vector<A> w, b;  // cols each, or empty when absent
  const A* gamma() const { return w.empty() ? nullptr : w.data(); }
  const A* beta() const { return b.empty() ? nullptr : b.data(); }
};

// w = C + gamma, added in A (rounded once to A; exact for f32-family gamma in double, and for f64 gamma in long
// double unless their exponents are more than 11 apart), and beta, in A. Added in double and then converted,
// an f64 gamma's C + gamma was rounded to double first: welford's f64 backward lost 6.6 ulps of dx to it
// (verify --dir bwd, params, seed 1: C = 1, gamma 0.0092, a row whose g's cancel to 1/27 of g).
template <class A>
StagedParams<A> stage_params(const Problem& p, const Tensors& t) {
  StagedParams<A> s;
  const auto n = static_cast<std::size_t>(p.cols);
  if (p.has_gamma && t.gamma) {
    s.w.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      s.w[i] = static_cast<A>(p.gamma_offset) + static_cast<A>(param_value(p.param_dtype, t.gamma, static_cast<std::int64_t>(i)));
  }
  if (p.has_beta && t.beta) {
    s.b.resize(n);
    for (std::size_t i = 0; i < n; ++i) s.b[i] = static_cast<A>(param_value(p.param_dtype, t.beta, static_cast<std::int64_t>(i)));
  }
  return s;
}

// The correctly rounded kernels' parameters in f64, staged once per call: w = C + gamma exactly, as w_hi + w_lo
// (TwoSum; w_lo left empty when every w fits one f64, as always without an offset), beta widened (exact).
struct StagedExact {
  std::vector<double> w, w_lo, b;
  const double* gamma() const { return w.empty() ? nullptr : w.data(); }
  const double* gamma_lo() const { return w_lo.empty() ? nullptr : w_lo.data(); }
  const double* beta() const { return b.empty() ? nullptr : b.data(); }
};
inline StagedExact stage_params_exact(const Problem& p, const Tensors& t) {
  StagedExact s;
  const auto n = static_cast<std::size_t>(p.cols);
  if (p.has_gamma && t.gamma) {
    s.w.resize(n);
    bool inexact = false;
    std::vector<double> lo(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double c = p.gamma_offset, g = param_value(p.param_dtype, t.gamma, static_cast<std::int64_t>(i));
      const double hi = c + g, bb = hi - c;  // Knuth's TwoSum: c + g = hi + lo exactly
      lo[i] = (c - (hi - bb)) + (g - bb);
      s.w[i] = hi;
      inexact |= lo[i] != 0;
    }
    if (inexact) s.w_lo = std::move(lo);
  }
  if (p.has_beta && t.beta) {
    s.b.resize(n);
    for (std::size_t i = 0; i < n; ++i) s.b[i] = param_value(p.param_dtype, t.beta, static_cast<std::int64_t>(i));
  }
  return s;
}

}  // namespace lnorm::cpu
