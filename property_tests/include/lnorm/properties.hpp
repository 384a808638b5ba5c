// The properties `lnorm verify` checks for every kernel × op × dtype (docs/DESIGN.md "Verification").
// Each op has its own list (properties_for): a law of one op is never applied to another; a property
// both ops have (shape, accuracy, determinism, ...) is checked against that op's exact answer.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "lnorm/problem.hpp"

namespace lnorm::verify {

enum class Property : int {
  shape,             // 1. y has x's shape; nothing written outside y/mean/rstd; every output written
  normalized,        // 2. gamma = 1, beta = 0: row mean ≈ 0, row variance ≈ var/(var + eps)
  accuracy,          // 3. scaled ulp error ≤ a + b·kappa; mean and rstd within their budgets
  eps_edges,         // 4. constant row → beta; var ≪ eps; eps = 0 constant → NaN; width 1 → beta
  row_independence,  // 5. a row's output is bitwise the same alone, in any batch, at any position
  batch_invariance,  // a row's output is bitwise the same in batches of 1 to 4097 rows (1 and 2 threads)
  quantized,         // kernels with the quantized epilogue: q and scales within the metric's budget, the scalings' laws
  determinism,       // 6. bitwise identical over repeated runs and thread counts
  affine_identity,   // 7. gamma = 1, beta = 0 given explicitly equals no affine, bitwise
  invariance,        // 8. LN(a·x + c) ≈ LN(x), a > 0, eps = 0, within the budget's kappa term
  permutation,       // 9. permuting a row permutes its output (within budget)
  nonfinite,         // 10. a NaN or Inf makes its row NaN and no other
  params,            // both ops: f32 gamma/beta with 16-bit x and the gamma offset C (y uses C + gamma)
  scale_invariance,  // rmsnorm: RMS(a·x) ≈ RMS(x), eps = 0
  oddness,           // rmsnorm: RMS(−x) = −RMS(x), bitwise for a sign-symmetric kernel
  add_rounding,      // Add & Norm: h = x + residual rounded once, bitwise; y and stats of that h within budget
  add_h_then_norm,   // Add & Norm: y, mean, rstd bitwise the plain norm's of h as stored
  add_commutes,      // Add & Norm: x and residual swapped give the same bits
  add_residual_zero, // Add & Norm: residual = ±0 gives the plain norm's answer
  // Backward (layernorm_bwd, rmsnorm_bwd; shape, accuracy, row_independence, determinism, nonfinite and
  // params too, for dx, dgamma and dbeta):
  dx_sum_zero,       // LayerNorm: Σ_i dx_i = 0 for any eps (the forward is shift invariant), within budget
  dx_orthogonal,     // eps = 0: Σ_i dx_i·(x_i − mean) = 0 (RMSNorm: Σ_i dx_i·x_i = 0), within budget
  width_one,         // LayerNorm: width-1 rows give dx = 0 and dgamma = 0 exactly (every xhat is 0)
  dy_zero,           // dy = 0 gives dx = dgamma = dbeta = 0 exactly
  dy_linearity,      // dy scaled by ±2^k (k = -1, 0, 1): every gradient scaled by it, bitwise
};

// Every property of some op, LayerNorm's ten first, then Add & Norm's and the backward's (the order of
// `lnorm verify`'s table).
inline constexpr std::array kAllProperties = {
    Property::shape,      Property::normalized,  Property::accuracy,    Property::eps_edges,
    Property::row_independence, Property::batch_invariance, Property::quantized, Property::determinism, Property::affine_identity,
    Property::invariance, Property::permutation, Property::nonfinite, Property::params,
    Property::scale_invariance, Property::oddness, Property::add_rounding, Property::add_h_then_norm,
    Property::add_commutes, Property::add_residual_zero, Property::dx_sum_zero, Property::dx_orthogonal,
    Property::width_one, Property::dy_zero, Property::dy_linearity};

// The properties of an op, in table order.
std::vector<Property> properties_for(Op op);
bool applies(Property p, Op op);

// Stable names: budgets.toml, --property, JSON and JUnit use them.
constexpr std::string_view name(Property p) {
  switch (p) {
    case Property::shape: return "shape";
    case Property::normalized: return "normalized";
    case Property::accuracy: return "accuracy";
    case Property::eps_edges: return "eps_edges";
    case Property::row_independence: return "row_independence";
    case Property::batch_invariance: return "batch_invariance";
    case Property::quantized: return "quantized";
    case Property::determinism: return "determinism";
    case Property::affine_identity: return "affine_identity";
    case Property::invariance: return "invariance";
    case Property::permutation: return "permutation";
    case Property::nonfinite: return "nonfinite";
    case Property::params: return "params";
    case Property::scale_invariance: return "scale_invariance";
    case Property::oddness: return "oddness";
    case Property::add_rounding: return "add_rounding";
    case Property::add_h_then_norm: return "add_h_then_norm";
    case Property::add_commutes: return "add_commutes";
    case Property::add_residual_zero: return "add_residual_zero";
    case Property::dx_sum_zero: return "dx_sum_zero";
    case Property::dx_orthogonal: return "dx_orthogonal";
    case Property::width_one: return "width_one";
    case Property::dy_zero: return "dy_zero";
    case Property::dy_linearity: return "dy_linearity";
  }
  return "?";
}

// What the property demands of a kernel of this op.
std::string_view summary(Property p, Op op = Op::layernorm);
std::optional<Property> parse_property(std::string_view s);

}  // namespace lnorm::verify
