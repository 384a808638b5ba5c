// `--dir bwd` for `lnorm reference` and `lnorm check` (cmd_backward.cpp): the exact gradients of the norm.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "inputs.hpp"
#include "lnorm/kernel.hpp"

namespace lnorm::cli {

struct BackwardFlags {
  std::string dir = "fwd";
  std::string dy, dx, dgamma, dbeta;
  double max_dx_ulp = -1, max_dgamma_ulp = -1, max_dbeta_ulp = -1;  // < 0: check's --max-ulp
};

// --dir, --dy, --dx, --dgamma, --dbeta (check: the per-output budgets too).
void add_backward_flags(CLI::App& cmd, BackwardFlags& f, bool check);
// Whether --dir bwd was asked; InputError for a bad --dir or a backward flag without it.
bool backward_asked(const BackwardFlags& f);
// reference --dir bwd: writes the outputs asked (exit 0).
int run_backward_reference(const ProblemFlags& problem, const BackwardFlags& f);
// run --dir bwd --kernel K: the kernel's backward (given the forward's exact statistics rounded once, as a
// framework saves them); writes the outputs asked (exit 0).
int run_backward_kernel(const ProblemFlags& problem, const BackwardFlags& f, const KernelInfo& kernel);
// check --dir bwd: gates each candidate given at its budget a + per_kappa·kappa scaled ulps (a: its own flag,
// else max_ulp; kappa: dx's row's, dgamma's column's largest, none for dbeta); exit 0 within budget, 1 over.
int run_backward_check(const ProblemFlags& problem, const BackwardFlags& f, double max_ulp, double per_kappa,
                       const std::string& json);

}  // namespace lnorm::cli
