// Registers the flags every problem-taking subcommand shares (DESIGN.md CLI contract).
#pragma once

#include <CLI/CLI.hpp>

#include "inputs.hpp"

namespace lnorm::cli {

inline void add_problem_flags(CLI::App& cmd, ProblemFlags& f) {
  cmd.add_option("--x", f.x, "Input tensor (.npy: <f4, <f8, <f2, or <u2 holding bf16 bits)")->required();
  cmd.add_option("--gamma", f.gamma, "Scale, shaped like the normalized dims (absent: 1)");
  cmd.add_option("--beta", f.beta, "Shift, shaped like the normalized dims (absent: 0)");
  cmd.add_option("--axis", f.axis, "First normalized dim (ONNX axis; negative counts from the end)")
      ->default_val(-1);
  cmd.add_option("--eps", f.eps, "Added to the variance inside the sqrt (PyTorch 1e-5, TF 1e-3, BERT 1e-12)")
      ->default_val(1e-5);
  cmd.add_option("--dtype", f.dtype, "f32, f64, f16 or bf16 (default: from x.npy; bf16 must be given)");
}

}  // namespace lnorm::cli
