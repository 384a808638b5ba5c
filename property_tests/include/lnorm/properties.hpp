// The properties `lnorm verify` checks for every kernel × op × dtype (docs/DESIGN.md "Verification").
// Each op has its own list (properties_for): a law of one op is never applied to another; a property
// both ops have (shape, accuracy, determinism, ...) is checked against that op's exact answer.
#pragma once

#include <array>
#include <iterator>
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

// Stable names (budgets.toml, --property, JSON and JUnit use them), one row per Property in enum order. What each
// property checks, on which ops and inputs, is property_tests/src/property_table.cpp's table.
struct PropertyName {
  Property id;
  std::string_view name;
};
inline constexpr PropertyName kPropertyNames[] = {
    {Property::shape, "shape"}, {Property::normalized, "normalized"}, {Property::accuracy, "accuracy"},
    {Property::eps_edges, "eps_edges"}, {Property::row_independence, "row_independence"},
    {Property::batch_invariance, "batch_invariance"}, {Property::quantized, "quantized"}, {Property::determinism, "determinism"},
    {Property::affine_identity, "affine_identity"}, {Property::invariance, "invariance"}, {Property::permutation, "permutation"},
    {Property::nonfinite, "nonfinite"}, {Property::params, "params"}, {Property::scale_invariance, "scale_invariance"},
    {Property::oddness, "oddness"}, {Property::add_rounding, "add_rounding"}, {Property::add_h_then_norm, "add_h_then_norm"},
    {Property::add_commutes, "add_commutes"}, {Property::add_residual_zero, "add_residual_zero"},
    {Property::dx_sum_zero, "dx_sum_zero"}, {Property::dx_orthogonal, "dx_orthogonal"}, {Property::width_one, "width_one"},
    {Property::dy_zero, "dy_zero"}, {Property::dy_linearity, "dy_linearity"},
};
constexpr std::string_view name(Property p) { return kPropertyNames[static_cast<int>(p)].name; }
constexpr bool property_names_in_order() {
  for (unsigned i = 0; i < std::size(kPropertyNames); ++i)
    if (static_cast<unsigned>(kPropertyNames[i].id) != i) return false;
  return true;
}
static_assert(property_names_in_order(), "kPropertyNames is indexed by Property");

// Every property of some op, in enum order (the order of `lnorm verify --property`'s list).
inline constexpr auto kAllProperties = [] {
  std::array<Property, std::size(kPropertyNames)> all{};
  for (unsigned i = 0; i < all.size(); ++i) all[i] = kPropertyNames[i].id;
  return all;
}();

// The properties of an op, in the table's order (verify's cells).
std::vector<Property> properties_for(Op op);
bool applies(Property p, Op op);

// What the property demands of a kernel of this op.
std::string_view summary(Property p, Op op = Op::layernorm);
std::optional<Property> parse_property(std::string_view s);

}  // namespace lnorm::verify
