// The ten properties as checks on one generated case. A check returns "" when the property holds
// and otherwise one line saying what broke (element, row, got, expected, allowed).
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "lnorm/cases.hpp"
#include "generators.hpp"
#include "lnorm/harness.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/properties.hpp"

namespace lnorm::verify {

// The worst value of each named measure seen over a run (scaled ulps, ratios to budget, ...).
struct Worst {
  std::map<std::string, double> values;
  std::map<std::string, double> totals;  // running sums (elements checked, correctly rounded, ...)
  void add(const std::string& counter, double v) { totals[counter] += v; }
  void note(const std::string& measure, double v) {
    auto [it, fresh] = values.emplace(measure, v);
    if (!fresh && (v > it->second || v != v)) it->second = v;
  }
};

struct CheckContext {
  const KernelInfo& kernel;
  const KernelBudget& budget;
  Worst& worst;
  // A check that runs the kernel on a case derived from the generated one (the add_* properties' explicit
  // residuals) stores it here, so a failure dumps and reproduces the case that failed.
  Case* ran = nullptr;
};

using CheckFn = std::string (*)(const CheckContext&, const Case&);

struct PropertyDef {
  Property id;
  Profile profile;
  CheckFn check;
};

// The profile and check of a property for a dtype and op (properties_for(op) lists which exist): the row of
// property_table.cpp's table that covers the op.
PropertyDef definition(Property p, DType dtype, Op op);

// printf-style one-line messages for the checks.
template <class... Args>
std::string fmt(const char* f, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Shared by the checks (properties_accuracy.cpp).
// Scaled-ulp error of every y element against the exact answer; "" or the first element over budget.
std::string check_y_within_budget(const CheckContext& ctx, const Case& c, const Outputs& got, const Exact& exact,
                                  const char* measure = "y_ulp");
// mean and rstd against their budgets; exact mean on exact-statistics rows when the budget says so.
std::string check_stats_within_budget(const CheckContext& ctx, const Case& c, const Outputs& got, const Exact& exact);
bool row_has_nonfinite(const Case& c, std::int64_t row);

std::string check_shape(const CheckContext&, const Case&);
std::string check_normalized(const CheckContext&, const Case&);
std::string check_accuracy(const CheckContext&, const Case&);
std::string check_eps_edges(const CheckContext&, const Case&);
std::string check_row_independence(const CheckContext&, const Case&);
std::string check_batch_invariance(const CheckContext&, const Case&);
std::string check_quantized(const CheckContext&, const Case&);  // properties_quant.cpp
// A case run with the quantized epilogue: q (rows*cols codes) and scales (bytes), or the violation (properties_quant.cpp).
struct QuantOutputs {
  std::vector<std::uint8_t> q;
  std::vector<std::byte> scales;
  std::vector<float> handed_y;  // with hand_y: the y the kernel's quantizer read (Tensors::quant_y)
  std::string violation;
};
// hand_y: ask the kernel for the y its quantizer read (only a kernel whose Takes::quant_input is f32_y or x_dtype_y).
QuantOutputs run_quantized(const KernelInfo& kernel, const Case& c, const QuantSpec& spec, int threads, int prefill = 0,
                           bool hand_y = false);
std::string check_determinism(const CheckContext&, const Case&);
std::string check_affine_identity(const CheckContext&, const Case&);
std::string check_invariance(const CheckContext&, const Case&);
std::string check_permutation(const CheckContext&, const Case&);
std::string check_nonfinite(const CheckContext&, const Case&);
std::string check_params(const CheckContext&, const Case&);  // properties_params.cpp, both ops
// RMSNorm's own (properties_rmsnorm.cpp)
std::string check_normalized_rms(const CheckContext&, const Case&);
std::string check_eps_edges_rms(const CheckContext&, const Case&);
std::string check_scale_invariance(const CheckContext&, const Case&);
std::string check_oddness(const CheckContext&, const Case&);
// Add & Norm's (properties_add.cpp)
std::string check_add_rounding(const CheckContext&, const Case&);
std::string check_add_h_then_norm(const CheckContext&, const Case&);
std::string check_add_commutes(const CheckContext&, const Case&);
std::string check_add_residual_zero(const CheckContext&, const Case&);
// The backward's (properties_backward.cpp)
std::string check_bwd_shape(const CheckContext&, const Case&);
std::string check_bwd_accuracy(const CheckContext&, const Case&);
std::string check_bwd_nonfinite(const CheckContext&, const Case&);
std::string check_bwd_row_independence(const CheckContext&, const Case&);
std::string check_bwd_determinism(const CheckContext&, const Case&);
std::string check_dx_sum_zero(const CheckContext&, const Case&);
std::string check_dx_orthogonal(const CheckContext&, const Case&);
std::string check_width_one(const CheckContext&, const Case&);
std::string check_dy_zero(const CheckContext&, const Case&);
std::string check_dy_linearity(const CheckContext&, const Case&);

}  // namespace lnorm::verify
