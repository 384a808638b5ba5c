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
#include "crash_guard.hpp"
#include "plugins.hpp"
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
                {f.problem.x, f.problem.gamma, f.problem.beta, f.problem.residual});
  check_stat_flags(op_flag(f.problem.op), f.mean);
  if (!f.h.empty() && f.problem.residual.empty()) throw InputError("--h: needs --residual (h = x + residual)");
  ProblemInputs in = load_problem(f.problem);
  const Problem& p = in.problem;
  const bool fused = p.op.prologue == Prologue::residual_add;
  const std::size_t hs = size_of(p.residual_dtype);
  if (kernel) {
    if (const auto why = unavailable_reason(*kernel, p))
      throw InputError("--kernel " + f.kernel + ": cannot run here: " + *why);
  }
  const std::size_t es = size_of(p.dtype), ss = size_of(stats_dtype(p.dtype));
  const std::string stats_descr = descr_of(stats_dtype(p.dtype));
  io::NpyWriter y(f.y, in.x.header().descr, in.shape);
  std::optional<io::NpyWriter> mean, rstd;
  if (!f.mean.empty()) mean.emplace(f.mean, stats_descr, in.stats_shape());
  if (!f.rstd.empty()) rstd.emplace(f.rstd, stats_descr, in.stats_shape());
  std::optional<io::NpyWriter> h;
  if (!f.h.empty()) h.emplace(f.h, in.residual->header().descr, in.shape);

  // A plugin kernel that crashes must not leave the temporary outputs behind (crash_guard.hpp).
  std::vector<std::string> temps{y.temp_path()};
  if (mean) temps.push_back(mean->temp_path());
  if (rstd) temps.push_back(rstd->temp_path());
  if (h) temps.push_back(h->temp_path());
  const RemoveOnCrash remove_on_crash(temps);
  const std::int64_t chunk = rows_per_chunk(p.cols, es);
  std::vector<std::byte> xbuf, ybuf, mbuf, rbuf, resbuf, hbuf;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    xbuf.resize(static_cast<std::size_t>(nr * p.cols) * es);
    ybuf.resize(xbuf.size());
    mbuf.resize(static_cast<std::size_t>(nr) * ss);
    rbuf.resize(mbuf.size());
    in.x.read(r0 * p.cols, nr * p.cols, xbuf.data());
    if (fused) {
      resbuf.resize(static_cast<std::size_t>(nr * p.cols) * hs);
      hbuf.resize(resbuf.size());
      in.residual->read(r0 * p.cols, nr * p.cols, resbuf.data());
    }
    Problem part = p;
    part.rows = nr;
    // The mean only for an op that has one (rmsnorm's kernels get a null mean, and must not write one).
    Tensors t{xbuf.data(), in.gamma_data.empty() ? nullptr : in.gamma_data.data(),
              in.beta_data.empty() ? nullptr : in.beta_data.data(), ybuf.data(),
              p.op.norm == Norm::layernorm ? mbuf.data() : nullptr, rbuf.data()};
    if (fused) {
      t.residual = resbuf.data();
      t.h = hbuf.data();
    }
    if (kernel) kernel->run(part, t);
    else reference(part, t);
    y.write(ybuf.data(), ybuf.size());
    if (h) h->write(hbuf.data(), hbuf.size());
    if (mean) mean->write(mbuf.data(), mbuf.size());
    if (rstd) rstd->write(rbuf.data(), rbuf.size());
  }
  y.commit();
  if (mean) mean->commit();
  if (rstd) rstd->commit();
  if (h) h->commit();
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
