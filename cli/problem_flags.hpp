// Registers the flags every problem-taking subcommand shares (DESIGN.md CLI contract).
#pragma once

#include <CLI/CLI.hpp>

#include "inputs.hpp"

namespace lnorm::cli {

inline void add_problem_flags(CLI::App& cmd, ProblemFlags& f) {
  cmd.add_option("--x", f.x, "Input tensor (.npy: <f4, <f8, <f2, or <u2 holding bf16 bits)")->required();
  cmd.add_option("--op", f.op, "layernorm (y = (x - mean)*rstd*gamma + beta) or rmsnorm (y = x*rstd*gamma, "
                               "rstd = 1/sqrt(mean(x^2) + eps); no mean); add_layernorm/add_rmsnorm with --residual")
      ->default_val("layernorm");
  cmd.add_option("--residual", f.residual,
                 "Add & Norm: h = x + residual rounded once to the residual's dtype (x's, or <f4 with f16/bf16 x), "
                 "then the norm of h (the op becomes add_<op>)");
  cmd.add_option("--gamma", f.gamma,
                 "Scale, shaped like the normalized dims (absent: 1); x's dtype, or <f4 (f32) with f16/bf16 x");
  cmd.add_option("--beta", f.beta, "Shift, shaped like the normalized dims (absent: 0); gamma's dtype");
  cmd.add_option("--gamma-offset", f.gamma_offset,
                 "y uses (C + gamma): 1 for Gemma's (1 + w) and zero-centred gamma (default 0; needs --gamma)")
      ->default_val(0.0);
  cmd.add_option("--axis", f.axis, "First normalized dim (ONNX axis; negative counts from the end)")
      ->default_val(-1);
  cmd.add_option("--eps", f.eps, "Added to the variance inside the sqrt (PyTorch 1e-5, TF 1e-3, BERT 1e-12)")
      ->default_val(1e-5);
  cmd.add_option("--dtype", f.dtype, "f32, f64, f16 or bf16 (default: from x.npy; bf16 must be given)");
}

}  // namespace lnorm::cli
