// The exact gradients of LayerNorm and RMSNorm at the given x, gamma and upstream dy, each rounded once
// (reference/src/backward.cpp has the derivations and the proofs). With w = C + γ, g = dy·w,
// xhat = (x − mean)·rstd (RMSNorm: x·rstd) and means over the row:
//   LayerNorm  dx = rstd·(g − mean(g) − xhat·mean(g·xhat))
//   RMSNorm    dx = rstd·(g − xhat·mean(g·xhat))
//   dgamma_j = Σ over rows of dy·xhat,   dbeta_j = Σ over rows of dy
// How each is exact:
//   dx_i = N_i / W^(3/2) with N_i a dyadic rational and W = n²·(var + eps) (the forward's W): rounded by
//        comparing with every candidate midpoint m exactly, N_i² against m²·W³ (signs apart);
//   dbeta_j is a dyadic sum: exact, rounded once;
//   dgamma_j = Σ_r a_r / sqrt(W_r) has one square root per row: Ziv's strategy — a BigFloat evaluation
//        with a proven error bound, the precision doubled until the bound clears every midpoint — with
//        the exactly decidable cases decided exactly (one distinct W among the nonzero terms; every W a
//        perfect square; one irrational class beside perfect squares). What is left undecided at the top
//        precision is rounded from it and counted (BackwardSummary::dgamma_undecided): that needs terms of
//        distinct irrational square roots cancelling to within 2^-5000 of a midpoint.
// The reference includes only the problem description and the storage types, never a kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "lnorm/problem.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {

// What the metrics need of each exact gradient: y_hi + y_lo ≈ the exact value (2^-100 relative; NaN where it
// is NaN) and the scale its error is measured against (docs/DESIGN.md "Backward"):
//   dx_i:     rstd·(|g_i| + mean|g| + xs(|xhat_i|)·mean(|g|·xs(|xhat|)))   (RMSNorm: without mean|g|) —
//             the sizes of the terms that cancel in dx_i's formula, whose rounding errors a kernel cannot avoid;
//   dgamma_j: Σ_r |dy_rj|·xs(|xhat_rj|);   dbeta_j: Σ_r |dy_rj|   (the terms summed).
// xs is the forward's output_scale rule: LayerNorm's xs(t) = max(1, t), since a kernel's xhat errs by ~u
// absolutely (its mean and rstd are rounded), so an xhat near 0 is measured against 1 (with |xhat| alone, the
// mutants' long double control read 49 ulps on a dgamma column whose only xhat was 1e-4); RMSNorm's xs(t) = t,
// since xhat = x·rstd is a product, relatively accurate (with the floor, a dx off by 2 ulps of its own terms
// read 0.975 on a row of outputs near 1e-27).
// A correctly rounded gradient reads at most 0.5 scaled ulp (|value| ≤ scale by the triangle inequality).
// Budgets may have a kappa term, as the forward's (a kernel that rounds the mean loses about kappa ulps in
// xhat, hence in dx and dgamma): row_kappa is each row's |mean|/sqrt(var + eps) (0 for RMSNorm, NaN for a
// row without statistics), dgamma_kappa each column's largest over the rows (dbeta has none).
struct BackwardReference {
  std::vector<ElementReference> dx;  // rows*cols, when asked
  std::vector<ElementReference> dgamma, dbeta;  // cols each
  std::vector<double> row_kappa, dgamma_kappa;  // rows, cols
  std::int64_t dgamma_undecided = 0;  // columns rounded from the top precision (see above); 0 in every test
};

// The backward of problem.op (layernorm or rmsnorm; plain(op.norm) for an Add & Norm problem is not asked):
// x and dy rows*cols of problem.dtype, gamma cols of problem.param_dtype or null (weight 1; the offset applies
// only with gamma, as forward). Writes dx (x's dtype), dgamma and dbeta (param_dtype) where non-null; `out`
// (may be null) receives the per-element references. Rows are split over problem.threads; the answer does
// not depend on it.
void reference_backward(const Problem& problem, const void* x, const void* gamma, const void* dy, void* dx,
                        void* dgamma, void* dbeta, BackwardReference* out = nullptr);

}  // namespace lnorm
