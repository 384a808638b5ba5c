// The backward arithmetic of cuda_warp and cuda_block (layernorm_bwd, rmsnorm_bwd), written once for the
// device (backward.cu) and the host (tests/cuda_emulation.hpp runs it with every thread of a team emulated,
// in the device's element and reduction order). Plain C++ when not compiled by nvcc.
//
// welford's careful backward (kernels/cpu/backward_scalar.cpp) in f64 on the GPU, where f64 arithmetic is
// nearly free beside the memory traffic (an H200 does half as many f64 operations as f32, and a backward
// element costs ~15 of them against 12 bytes of DRAM): the forward's saved statistics are not used; per row
//   A: s = Σ (x − x0)                                   m = s/n    (x0 = x[0]; RMSNorm: x0 = 0, m = 0)
//   B: d = (x − x0) − m;  q = Σ d²,  Σg,  Σg·d           g = dy·w   (w = C + gamma in f64, 1 without gamma)
//      rstd = 1/sqrt(q/n + eps),  mean(g) = Σg/n (RMSNorm: 0),  mean(g·xhat) = rstd·Σg·d/n
//   B2 (rows with a dominant element k, d_k² > 3/4·q, only): Q = Σ_{j≠k} d_j², T = Σ_{j≠k} (g − mean(g))·d
//   C: xhat = d·rstd;  dx = rstd·((g − mean(g)) − xhat·mean(g·xhat)), rounded once to x's dtype
//      (the dominant element: dx_k = rstd·((g_k − mean(g))·(Q + n·eps) − d_k·T)/(q + n·eps), as welford's row
//      says why: its d_k² swamps the other terms of q and Σg·d);
//      dgamma's partial += dy·xhat, dbeta's += dy (f64, in row order: see backward.cu)
// x − x0 is exact in f64 for f32-family data unless their exponents are more than 29 apart (then within 2^-53
// of the larger), no square or sum overflows or underflows f64's range, and every rounding before the last is
// ~2^-29 of an output ulp: dx and dgamma are correctly rounded but for ties closer than that (welford's
// budgets). A NaN or Inf in x leaves s or q non-finite: the row's rstd is NaN, which poisons its dx and every
// dgamma column it touches (DESIGN "Backward"), as welford's row.
// backward.cu is compiled with --fmad=false: nvcc would otherwise contract the products below into FMAs the
// host does not compute. Each thread sums its own elements in f64 in its access order; the team's sums are
// xor butterflies (and, for a block, the per-warp results folded in warp order): the same on the host.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LNORM_BWD_HD __host__ __device__ __forceinline__
#else
#define LNORM_BWD_HD inline
#endif

namespace lnorm::cuda::bwdrow {

// False for NaN and ±Inf (no isfinite: its host and device spellings differ).
LNORM_BWD_HD bool finite(double v) { return fabs(v) <= 1.7976931348623157e308; }

// Pass A: one element's share of s = Σ (x − x0).
LNORM_BWD_HD void add_a(double& s, float x, double x0) { s += static_cast<double>(x) - x0; }

// Pass B: one element's share of q = Σ d², Σg and Σg·d (m: the row's mean less x0).
struct SumsB {
  double q = 0, g = 0, gd = 0;
  double d2max = 0;  // this thread's largest d² (not summed over the team: whether it dominates q)
};
LNORM_BWD_HD double centred_value(float x, double x0, double m) { return (static_cast<double>(x) - x0) - m; }
LNORM_BWD_HD void add_b(SumsB& s, float x, float dy, double w, double x0, double m) {
  const double d = centred_value(x, x0, m);
  const double g = static_cast<double>(dy) * w;
  s.q += d * d;
  if (d * d > s.d2max) s.d2max = d * d;
  s.g += g;
  s.gd += g * d;
}

// A row's coefficients for pass C.
struct Coefs {
  double x0, m, rstd, mean_g, mean_gx;
  // With eps = 0, a width-1 RMSNorm row (y = sign(x)) or a width-2 LayerNorm row (y = ±1): xhat = ±1 and dx = 0
  // exactly, as welford's careful row (backward_scalar.cpp says why the general formula is not 0 there).
  bool sign_row;
  double sign_row_dx;  // Σg − Σg: 0, or NaN where a dy (or w) of the row is NaN or Inf
  // The dominant element (d² > dominant_q; can_dominate false on sign rows, rows with q = 0 or not finite).
  bool can_dominate;
  double dominant_q, n_eps, denom;
  bool has_dominant = false;  // set with the team's pass B2 sums by with_rest
  double q_rest = 0, t_rest = 0;
};
// After pass A (s: the team's sum) and pass B (q, g, gd: the team's sums).
LNORM_BWD_HD double mean_less_x0(double s, std::int64_t n, bool centred) { return centred ? s / static_cast<double>(n) : 0.0; }
LNORM_BWD_HD Coefs coefs(double x0, double m, double s, const SumsB& b, std::int64_t n, float eps, bool centred) {
  const double nd = static_cast<double>(n);
  Coefs c;
  c.x0 = x0;
  c.m = m;
  c.rstd = finite(s) && finite(b.q) ? 1.0 / sqrt(b.q / nd + static_cast<double>(eps)) : NAN;
  c.mean_g = centred ? b.g / nd : 0.0;
  c.mean_gx = c.rstd * b.gd / nd;  // one multiplication by rstd instead of n
  c.sign_row = eps == 0.0f && finite(c.rstd) && b.q > 0 && n == (centred ? 2 : 1);
  c.sign_row_dx = b.g - b.g;
  c.can_dominate = !c.sign_row && finite(c.rstd) && b.q > 0;
  c.dominant_q = 0.75 * b.q;
  c.n_eps = nd * static_cast<double>(eps);
  c.denom = b.q + c.n_eps;
  return c;
}

// Whether a d² (an element's, or a thread's largest) is the row's dominant element.
LNORM_BWD_HD bool dominates(double d2, const Coefs& c) { return c.can_dominate && d2 > c.dominant_q; }

// Pass B2: one element's share of Q and T (nothing from the dominant element).
struct SumsRest {
  double q = 0, t = 0;
};
LNORM_BWD_HD void add_rest(SumsRest& r, float x, float dy, double w, const Coefs& c) {
  const double d = centred_value(x, c.x0, c.m);
  if (dominates(d * d, c)) return;
  r.q += d * d;
  r.t += (static_cast<double>(dy) * w - c.mean_g) * d;
}
// After pass B2 (q, t: the team's sums).
LNORM_BWD_HD void with_rest(Coefs& c, const SumsRest& r) {
  c.has_dominant = true;
  c.q_rest = r.q;
  c.t_rest = r.t;
}

// Pass C: one element's dx (before its rounding to x's dtype) and xhat.
LNORM_BWD_HD double dx_value(float x, float dy, double w, const Coefs& c, double& xhat) {
  if (c.sign_row) {
    xhat = centred_value(x, c.x0, c.m) > 0 ? 1.0 : -1.0;
    return c.sign_row_dx;
  }
  const double d = centred_value(x, c.x0, c.m);
  xhat = d * c.rstd;
  const double g = static_cast<double>(dy) * w;
  if (c.has_dominant && dominates(d * d, c)) return c.rstd * ((g - c.mean_g) * (c.q_rest + c.n_eps) - d * c.t_rest) / c.denom;
  return c.rstd * ((g - c.mean_g) - xhat * c.mean_gx);
}

}  // namespace lnorm::cuda::bwdrow
