// `lnorm run --kernel K` and `lnorm reference`: normalize x.npy, write y (and mean, rstd).
// Both stream row chunks (a few MiB at a time), so memory stays flat for any input size, and write
// through NpyWriter's temporary files: a failed run leaves no output file behind.
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "cmd_backward.hpp"
#include "cmd_quant.hpp"
#include "commands.hpp"
#include "output_files.hpp"
#include "plugins.hpp"
#include "lnorm/operand_streams.hpp"
#include "lnorm/reference.hpp"
#include "problem_flags.hpp"

namespace lnorm::cli {
namespace {

struct RunFlags {
  ProblemFlags problem;
  std::string kernel, y, mean, rstd, h;
  BackwardFlags bwd;
  QuantFlags quant;  // --quant: q (and scales) instead of y
};

// --dir fwd's outputs: --y is required there (CLI11 cannot say "required unless --dir bwd").
void require_forward_output(const RunFlags& f) {
  if (f.y.empty()) throw InputError("--y is required (--dir bwd writes --dx, --dgamma, --dbeta instead)");
}
// --dir bwd takes none of the forward's outputs.
void refuse_forward_outputs(const RunFlags& f) {
  for (const auto& [v, flag] : {std::pair{f.y, "--y"}, {f.mean, "--mean"}, {f.rstd, "--rstd"}, {f.h, "--h"}})
    if (!v.empty()) throw InputError(std::string(flag) + ": a forward output; --dir bwd writes --dx, --dgamma, --dbeta");
}

// kernel == nullptr: the exact reference.
int run_problem(const RunFlags& f, const KernelInfo* kernel) {
  check_outputs({{f.y, "--y"}, {f.mean, "--mean"}, {f.rstd, "--rstd"}, {f.h, "--h"}},
                with_plugin_paths({f.problem.x, f.problem.gamma, f.problem.beta, f.problem.residual}));
  check_stat_flags(op_flag(f.problem.op), f.mean);
  if (!f.h.empty() && f.problem.residual.empty()) throw InputError("--h: needs --residual (h = x + residual)");
  ProblemInputs in = load_problem(f.problem);
  const Problem& p = in.problem;
  if (kernel) {
    if (const auto why = unavailable_reason(*kernel, p))
      throw InputError("--kernel " + f.kernel + ": cannot run here: " + *why);
  }
  OutputFiles files(p, {in.shape, in.stats_shape(), {}, {}, {}});
  files.open(Operand::y, f.y);
  files.open(Operand::mean, f.mean);
  files.open(Operand::rstd, f.rstd);
  files.open(Operand::h, f.h);
  // A crash or a signal leaves no temporary output behind (lnorm/temp_files.hpp, crash_guard.hpp).
  // Every operand from the table (lnorm/operand_streams.hpp): the kernel gets rstd (and LayerNorm's mean) whether or
  // not a file takes them; rmsnorm's kernels get a null mean.
  OperandStreams ops;
  read_problem_inputs(ops, in);
  files.connect(ops);
  ops.run(p, rows_per_chunk(p.cols, size_of(p.dtype)), {Operand::mean, Operand::rstd}, [&](const Problem& part, const Tensors& t) {
    if (kernel) kernel->run(part, t);
    else reference(part, t);
  });
  files.commit();
  return 0;
}

void add_outputs(CLI::App& cmd, RunFlags& f) {
  cmd.add_option("--y", f.y, "Output tensor (.npy, x's shape and dtype; required unless --dir bwd)");
  cmd.add_option("--mean", f.mean, "Per-row mean (.npy, f32; f64 for f64 data; ONNX Mean shape; layernorm only)");
  cmd.add_option("--rstd", f.rstd,
                 "Per-row 1/sqrt(var+eps), rmsnorm 1/sqrt(mean(x^2)+eps) (.npy, f32; f64 for f64 data; ONNX InvStdDev shape)");
  cmd.add_option("--h", f.h, "Add & Norm: the sum h = x + residual (.npy, the residual's shape and dtype; needs --residual)");
}

}  // namespace

void add_run(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "Run one kernel on x.npy and write its outputs");
  cmd->add_option("--kernel", f->kernel, "Kernel name (see `lnorm list`)")->required();
  add_problem_flags(*cmd, f->problem);
  add_outputs(*cmd, *f);
  cmd->add_option("--threads", f->problem.threads, "Threads to split rows across (results are bitwise the same)")
      ->default_val(1);
  add_plugin_flag(cmd);
  add_backward_flags(*cmd, f->bwd, false);
  add_quant_flags(*cmd, f->quant, false);
  cmd->callback([f, &exit_code] {
    if (backward_asked(f->bwd)) {
      if (quant_asked(f->quant)) throw InputError("--quant: a forward output (--dir bwd writes --dx, --dgamma, --dbeta)");
      refuse_forward_outputs(*f);
      exit_code = run_backward_kernel(f->problem, f->bwd, kernel_flag(f->kernel));
      return;
    }
    if (quant_asked(f->quant)) {
      exit_code = run_quant_reference(f->problem, f->quant, f->y, &kernel_flag(f->kernel), SideOutputs{f->h, f->mean, f->rstd});
      return;
    }
    refuse_quant_flags_without_quant(f->quant);
    require_forward_output(*f);
    exit_code = run_problem(*f, &kernel_flag(f->kernel));
  });
}

void add_reference(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("reference", "Write the exact answer, rounded once (y, mean, rstd; or q and its scales with --quant)");
  add_problem_flags(*cmd, f->problem);
  add_outputs(*cmd, *f);
  cmd->add_option("--threads", f->problem.threads, "Threads (default: all cores; output is the same)")
      ->default_val(std::max(1u, std::thread::hardware_concurrency()));
  add_backward_flags(*cmd, f->bwd, false);
  add_quant_flags(*cmd, f->quant, false);
  cmd->callback([f, &exit_code] {
    if (backward_asked(f->bwd)) {
      if (quant_asked(f->quant)) throw InputError("--quant: a forward output (--dir bwd writes --dx, --dgamma, --dbeta)");
      refuse_forward_outputs(*f);
      exit_code = run_backward_reference(f->problem, f->bwd);
      return;
    }
    if (quant_asked(f->quant)) {
      exit_code = run_quant_reference(f->problem, f->quant, f->y, nullptr, SideOutputs{f->h, f->mean, f->rstd});
      return;
    }
    refuse_quant_flags_without_quant(f->quant);
    require_forward_output(*f);
    exit_code = run_problem(*f, nullptr);
  });
}

}  // namespace lnorm::cli
