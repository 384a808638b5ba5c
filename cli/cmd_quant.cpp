// `reference --quant` and `check --quant`: the exact quantized answer, and a candidate's q measured against it
// (lnorm/quantize.hpp has the definitions). Both stream row chunks like run and check.
#include "cmd_quant.hpp"
#include "flag_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_text.hpp"
#include "output_files.hpp"
#include "plugins.hpp"
#include "lnorm/check.hpp"
#include "lnorm/format.hpp"
#include "lnorm/npy.hpp"
#include "lnorm/quant_contract.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/recipe.hpp"
#include "lnorm/reference.hpp"
#include "lnorm/scale_layout.hpp"

namespace lnorm::cli {

QuantSetup setup(const ProblemFlags& problem, const QuantFlags& f) {
  QuantSetup s{load_problem(problem), {}, {}, 0, {}};
  const Problem& p = s.in.problem;
  if (p.dtype == DType::f64) throw InputError("--quant: x must be f32, f16 or bf16 (a quantized output's scales are f32)");
  if (p.op.direction != Direction::fwd) throw InputError("--quant: a forward output (--dir bwd has no quantized outputs)");
  try {
    const bool scale_given = f.scale_opt && f.scale_opt->count() > 0;
    const bool global_given = f.global_scale_opt && f.global_scale_opt->count() > 0;
    s.spec = parse_quant_spec(f.quant, f.scaling, scale_given ? std::optional<double>(f.scale) : std::nullopt, p.cols, {},
                              global_given ? std::optional<double>(f.global_scale) : std::nullopt, f.mx_rule, f.scale_format,
                              f.scale_layout);
  } catch (const QuantSpecError& e) {
    throw InputError(e.what());
  }
  const std::vector<std::int64_t> lead(s.in.shape.begin(), s.in.shape.begin() + s.in.axis);
  s.rows = p.rows;
  s.scales_shape = stored_scales_shape(s.spec.scale_layout, lead, s.spec.scales_per_row(p.cols));
  s.q_shape = q_shape(set_quant(p, s.spec), s.in.shape, s.in.axis);
  return s;
}

std::string q_descr(const QuantSpec& s) { return std::string(s.format_info().npy_descr); }
std::string scales_descr(const QuantSpec& s) { return std::string(s.storage().npy_descr); }
std::size_t scale_size(const QuantSpec& s) { return s.storage().bytes; }

// Rows [r0, r0 + nr) of x (and the residual, for Add & Norm) into the chunk buffers.
void read_chunk(QuantSetup& s, std::int64_t r0, std::int64_t nr, std::vector<std::byte>& xbuf, std::vector<std::byte>& resbuf) {
  const Problem& p = s.in.problem;
  xbuf.resize(static_cast<std::size_t>(nr * p.cols) * size_of(p.dtype));
  s.in.x.read(r0 * p.cols, nr * p.cols, xbuf.data());
  if (s.in.residual) {
    resbuf.resize(static_cast<std::size_t>(nr * p.cols) * size_of(p.residual_dtype));
    s.in.residual->read(r0 * p.cols, nr * p.cols, resbuf.data());
  }
}


void resolve_global_scale(QuantSetup& s) {
  if (!needs_global_scale(s.spec)) return;
  const Problem& p = s.in.problem;
  const std::int64_t chunk = rows_per_chunk(p.cols, size_of(p.dtype));
  std::vector<std::byte> xbuf, resbuf;
  const void* gamma = s.in.gamma_data.empty() ? nullptr : s.in.gamma_data.data();
  const void* beta = s.in.beta_data.empty() ? nullptr : s.in.beta_data.data();
  float amax = 0;
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const std::int64_t nr = std::min(chunk, p.rows - r0);
    read_chunk(s, r0, nr, xbuf, resbuf);
    amax = std::max(amax, tensor_amax_f32(p, xbuf.data(), s.in.residual ? resbuf.data() : nullptr, gamma, beta, nr, p.threads));
  }
  s.spec.global_scale = nvfp4_global_scale(amax);
  std::fprintf(stderr, "nvfp4: global scale %.9g = 2688 / %.9g (the tensor's amax|y*|; --global-scale to give one)\n",
               static_cast<double>(s.spec.global_scale), static_cast<double>(amax));
}

void add_quant_flags(CLI::App& cmd, QuantFlags& f, bool check) {
  cmd.add_option("--quant", f.quant,
                 "Quantized output instead of y: " + quant_format_names() +
                     " (lnorm/quant.hpp, docs/cli.md); q = Q(y / s), rounded once to nearest even, saturating (never "
                     "NaN/Inf for a finite y)");
  f.scaling_opt = cmd.add_option("--scaling", f.scaling,
                                 "With --quant: tensor (one --scale S), row (per-row f32 amax/qmax), group:G (per G "
                                 "elements), mx (OCP MX: groups of 32, E8M0 power-of-two scales) or nvfp4 (fp4_e2m1 in "
                                 "blocks of 16, E4M3 block scales, a global scale G)")
                      ->default_val("tensor");
  f.scale_opt = cmd.add_option("--scale", f.scale, "tensor scaling's scale S (an f32 > 0; required there, refused elsewhere)");
  f.global_scale_opt = cmd.add_option("--global-scale", f.global_scale,
                                      "nvfp4's global scale G (an f32 > 0): block scale c = E4M3(amax·G/6), element scale "
                                      "E4M3value(c)/G; default the tensor's own, 2688 / amax|y*|");
  cmd.add_option("--mx-rule", f.mx_rule,
                 "mx's exponent rule: floor (OCP MX v1.0, the default), ceil, even (amax's significand rounded half up to "
                 "the element's bits first) or rceil (ceil(log2(amax/qmax)), NVIDIA's UE8M0 recipe): torchao's modes");
  cmd.add_option("--scale-format", f.scale_format,
                 "row and group:G scales: f32 (default) or ue8m0, a power of two 2^ceil(log2(amax/qmax)) stored as its E8M0 "
                 "code (DeepSeek-style per-token-group FP8)");
  cmd.add_option("--scale-layout", f.scale_layout,
                 "the scales file's layout: row (default, x.shape[:axis] + (groups,)), col (column-major, (groups,) + "
                 "x.shape[:axis]) or swizzled (the 128x4 tiles block-scaled GEMMs read, one-byte scales: rows padded to 128, "
                 "groups to 4, padding 0, one dimension)");
  if (check) {
    cmd.add_option("--q", f.q, "The candidate's quantized output (.npy, x's shape: '|u1' fp8 bit patterns or '|i1' int8; fp4_e2m1: "
                               "'|u1' two codes a byte, element 2i in the low nibble, x.shape[:axis] + (cols/2,))");
    cmd.add_option("--scales", f.scales,
                   "The candidate's scales for row/group:G/mx/nvfp4 (.npy, x.shape[:axis] + (groups,) in the row layout: '<f4', or "
                   "'|u1' E8M0/E4M3 codes)");
    cmd.add_option("--max-q-ulp", f.budget.max_q_ulp,
                   "Budget for q in quanta at y/s, flat (default per element: 0.5 + what rounding y to x's dtype first "
                   "moves y/s, + 2^-14)")->check(budget_number());
    cmd.add_option("--max-scale-ulp", f.budget.max_scale_ulp,
                   "Budget for dynamic scales: f32 ulps (row, group) or E8M0 steps (mx), flat (default per group: 2 ulps + "
                   "what rounding y to x's dtype first moves the scale; mx: that move alone)")->check(budget_number());
  } else {
    cmd.add_option("--q", f.q, "With --quant: write the exact q here (.npy, x's shape: '|u1' fp8 bit patterns or '|i1' int8; "
                               "fp4_e2m1: two codes a byte, element 2i in the low nibble, x.shape[:axis] + (cols/2,))");
    cmd.add_option("--scales", f.scales,
                   "With --quant and row/group:G/mx/nvfp4 scaling: write the scales here (.npy, x.shape[:axis] + (groups,) in "
                   "the row layout: '<f4', or '|u1' E8M0/E4M3 codes)");
  }
}

bool quant_asked(const QuantFlags& f) { return !f.quant.empty(); }

void refuse_quant_flags_without_quant(const QuantFlags& f) {
  if (f.scale_opt && f.scale_opt->count() > 0) throw InputError("--scale: needs --quant (tensor scaling's scale)");
  if (f.scaling_opt && f.scaling_opt->count() > 0) throw InputError("--scaling: needs --quant");
  if (f.global_scale_opt && f.global_scale_opt->count() > 0)
    throw InputError("--global-scale: needs --quant fp4_e2m1 --scaling nvfp4");
  if (!f.mx_rule.empty()) throw InputError("--mx-rule: needs --quant and --scaling mx");
  if (!f.scale_format.empty()) throw InputError("--scale-format: needs --quant and --scaling row or group:G");
  if (!f.scale_layout.empty()) throw InputError("--scale-layout: needs --quant and a scaling that stores scales");
  if (!f.q.empty()) throw InputError("--q: needs --quant (the quantized output's format)");
  if (!f.scales.empty()) throw InputError("--scales: needs --quant");
  if (f.budget.max_q_ulp >= 0 || f.budget.max_scale_ulp >= 0) throw InputError("--max-q-ulp/--max-scale-ulp: need --quant");
}

int run_quant_reference(const ProblemFlags& problem, const QuantFlags& f, const std::string& y_path, const KernelInfo* kernel,
                        const SideOutputs& side) {
  if (f.q.empty()) throw InputError(std::string("--q is required with --quant (the ") + (kernel ? "kernel's" : "exact") + " quantized output's file)");
  if (kernel && !y_path.empty()) throw InputError("--y: a kernel with --quant writes q (and its scales), not y");
  const bool dynamic_scales = f.scaling != "tensor";
  if (!f.scales.empty() && !dynamic_scales) throw InputError("--scales: tensor scaling has one given scale (--scale), no file");
  check_outputs({{f.q, "--q"}, {f.scales, "--scales"}, {y_path, "--y"}, {side.h, "--h"}, {side.mean, "--mean"}, {side.rstd, "--rstd"}},
                with_plugin_paths({problem.x, problem.gamma, problem.beta, problem.residual}));
  if (!side.h.empty() && problem.residual.empty()) throw InputError("--h: needs --residual (h = x + residual)");
  check_stat_flags(op_flag(problem.op), side.mean);
  QuantSetup s = setup(problem, f);
  resolve_global_scale(s);
  const Problem& p = s.in.problem;
  const Problem qp = set_quant(p, s.spec);  // the op with the quantized epilogue
  const bool stats = !side.mean.empty() || !side.rstd.empty();
  if (kernel) {
    if (const auto why = unavailable_reason(*kernel, qp))
      throw InputError("--kernel " + std::string(kernel->name) + ": cannot run here: " + *why);
    if (stats)
      if (const auto why = unavailable_reason(*kernel, p))
        throw InputError("--mean/--rstd with --quant: the kernel's statistics come from its run of " + std::string(name(p.op)) +
                         " with y, which it cannot do here: " + *why);
  }
  // The quantized op's operands (q, its scales, h) and the y op's (mean, rstd, and h for the reference), from the
  // operand table; the reference's exact y beside q is no operand of the quantized op, so it has its own file.
  OutputFiles files(qp, {s.in.shape, s.in.stats_shape(), {}, s.scales_shape, s.q_shape});
  files.open(Operand::q, f.q);
  // --scale-layout col or swizzled: the scales come row-major from the run, are collected and written in the layout at
  // the end (its order is not the rows'); row: streamed like every other output.
  std::vector<std::byte> row_major_scales;
  std::optional<io::NpyWriter> laid_file;
  if (s.spec.scale_layout != ScaleLayout::row && !f.scales.empty()) laid_file.emplace(f.scales, scales_descr(s.spec), s.scales_shape);
  else files.open(Operand::scales, f.scales);
  files.open(Operand::h, side.h);
  files.open(Operand::mean, side.mean);
  files.open(Operand::rstd, side.rstd);
  std::optional<io::NpyWriter> y;
  if (!y_path.empty()) y.emplace(y_path, s.in.x.header().descr, s.in.shape);
  const std::int64_t chunk = rows_per_chunk(p.cols, size_of(p.dtype));
  // q and the scales (and, with a kernel, the h of its quantized run).
  OperandStreams quantized;
  read_problem_inputs(quantized, s.in);
  files.connect(quantized, kernel ? OperandSet{Operand::q, Operand::scales, Operand::h} : OperandSet{Operand::q, Operand::scales});
  if (laid_file) quantized.write(Operand::scales, append_to(row_major_scales));
  std::vector<std::byte> ybuf;
  quantized.run(qp, chunk, {}, [&](const Problem& part, const Tensors& t) {
    if (kernel) {
      kernel->run(part, t);
      return;
    }
    ybuf.resize(y ? static_cast<std::size_t>(part.rows * p.cols) * size_of(p.dtype) : 0);
    quantize_reference(p, s.spec, t.x, t.residual, t.gamma, t.beta, part.rows, p.threads, static_cast<std::uint8_t*>(t.q), t.scales,
                       y ? ybuf.data() : nullptr);
    if (y) y->write(ybuf.data(), ybuf.size());
  });
  // h and the statistics: the op with y (the exact answer rounded once, or the kernel's own run of it); with a
  // kernel, h is the quantized run's own (above).
  if (stats || (files.has(Operand::h) && !kernel)) {
    OperandStreams with_y;
    read_problem_inputs(with_y, s.in);
    files.connect(with_y, kernel ? OperandSet{Operand::mean, Operand::rstd} : OperandSet{Operand::mean, Operand::rstd, Operand::h});
    with_y.run(p, chunk, {Operand::mean, Operand::rstd}, [&](const Problem& part, const Tensors& t) {
      if (kernel) kernel->run(part, t);
      else reference(part, t);
    });
  }
  if (laid_file) {
    const std::int64_t per_row = s.spec.scales_per_row(p.cols);
    std::vector<std::byte> stored(static_cast<std::size_t>(stored_scale_count(s.spec.scale_layout, s.rows, per_row)) * scale_size(s.spec));
    scales_to_layout(s.spec.scale_layout, s.rows, per_row, scale_size(s.spec), row_major_scales.data(), stored.data());
    laid_file->write(stored.data(), stored.size());
  }
  files.commit({y ? &*y : nullptr, laid_file ? &*laid_file : nullptr});  // q, scales, the statistics and y: all or none
  return 0;
}

}  // namespace lnorm::cli
