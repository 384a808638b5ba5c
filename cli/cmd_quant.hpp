// Quantized outputs on the command line (docs/cli.md "Quantized outputs"): the flags `reference` and `check`
// share, and what each does with them. `--quant` switches the forward's output from y in x's dtype to q.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "inputs.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/quantize.hpp"
#include "side_outputs.hpp"

namespace lnorm::cli {

struct QuantFlags {
  std::string quant;               // fp8_e4m3 | fp8_e5m2 | int8; empty: y in x's dtype
  std::string scaling = "tensor";  // tensor | row | group:G | mx
  double scale = 0;                // tensor scaling's S (stored as f32: must be one exactly)
  double global_scale = 0;         // nvfp4's G (f32 exactly); not given: the tensor's own (resolve_global_scale)
  std::string mx_rule;             // mx's exponent rule (floor | ceil | even | rceil); empty: floor
  std::string scale_format;        // row/group scales: f32 | ue8m0; empty: f32
  std::string scale_layout;        // the scales file's layout: row | col | swizzled; empty: row
  std::string q, scales;           // reference writes them; check reads the candidate's
  QuantBudget budget;              // check: --max-q-ulp, --max-scale-ulp (< 0: the defaults of quantize.hpp)
  CLI::Option* scale_opt = nullptr;
  CLI::Option* scaling_opt = nullptr;
  CLI::Option* global_scale_opt = nullptr;
};

// The inputs of a quantized command: the problem's, the parsed spec and the scales' shape.
struct QuantSetup {
  ProblemInputs in;
  QuantSpec spec;
  std::vector<std::int64_t> scales_shape;  // the scales file's, in --scale-layout's layout (row: x.shape[:axis] + (groups,))
  std::int64_t rows = 0;                   // x.shape[:axis]'s product: the rows the layouts count
  std::vector<std::int64_t> q_shape;       // x's shape; a packed format's x.shape[:axis] + (cols/2,)
};
// Loads the problem and parses --quant/--scaling/--scale/--global-scale (parse_quant_spec's refusals as InputError).
QuantSetup setup(const ProblemFlags& problem, const QuantFlags& f);
// nvfp4 without --global-scale: the tensor's own G from y* (lnorm/quantize.hpp resolve_global_scale), one pass over
// x's rows by chunks, before any is quantized or checked; printed to stderr, as it decides every block scale.
void resolve_global_scale(QuantSetup& s);
// .npy descrs and bytes of q and its scales (the part tables' rows).
std::string q_descr(const QuantSpec& s);
std::string scales_descr(const QuantSpec& s);
std::size_t scale_size(const QuantSpec& s);
// Rows [r0, r0 + nr) of x (and the residual, for Add & Norm) into the chunk buffers.
void read_chunk(QuantSetup& s, std::int64_t r0, std::int64_t nr, std::vector<std::byte>& xbuf, std::vector<std::byte>& resbuf);

// check = true adds --max-q-ulp and --max-scale-ulp.
void add_quant_flags(CLI::App& cmd, QuantFlags& f, bool check);
bool quant_asked(const QuantFlags& f);
// Refuses quantization flags given without --quant (each names itself).
void refuse_quant_flags_without_quant(const QuantFlags& f);

// `reference --quant`: the exact q (and scales; y too when y_path is given); `run --kernel K --quant` (kernel
// given): the kernel's q and scales (its op with the quantized epilogue: lnorm/problem.hpp set_quant). side: h from
// the same run (the exact sum rounded once, for reference); the statistics from the op with y (reference: the exact
// ones; a kernel: its own run of that op, whose statistics do not depend on the epilogue).
int run_quant_reference(const ProblemFlags& problem, const QuantFlags& f, const std::string& y_path,
                        const KernelInfo* kernel = nullptr, const SideOutputs& side = {});
// `check --quant`: the candidate's q (and scales) against the exact answer; JSON to json_path when given.
// recipe: empty, or a recipe naming vllm (lnorm/recipe.hpp): q is also measured against the recipe's and gated by
// max_recipe_ulp quanta, the scales against its scales exactly.
// y_path (may be empty): the candidate's own y, the values its quantizer was handed (f32, or x's dtype): q and the
// scales are then also gated against the quantizer's rule applied to that y, bit for bit (lnorm/quant_contract.hpp;
// with the vllm recipe, the recipe's rounding points): "consistency".
// side: the candidate's h (gated, default 0.5 ulp: one rounding of the sum), mean and rstd (gated when their budgets
// are given), measured as check measures them beside y; the top-level pass ANDs them.
int run_quant_check(const ProblemFlags& problem, const QuantFlags& f, const std::string& json_path,
                    const std::string& recipe = "", double max_recipe_ulp = 0.5, const std::string& y_path = "",
                    const SideOutputs& side = {});

}  // namespace lnorm::cli
