// Recipes: the op's exact arithmetic with roundings at declared points (docs/DESIGN.md "Recipes").
//
// A kernel that follows a model's reference code is not meant to compute the op's exact answer: Llama's
// RMSNorm casts the normalized value to x's dtype before the weight multiply, so against the exact RMSNorm
// it is ~1 ulp off by construction. What its author needs to know is whether it computes *the recipe's*
// answer. A recipe's answer is exact everywhere except at its declared rounding points, each one
// rounding (nearest, ties to even) of the exact value; `check --recipe` measures a candidate against it
// with the same scaled-ulp metric (and the same scale s) as against the op's exact answer.
//
// The rounding points, combined with '+' ("llama+unrounded_h"):
//   llama        RMSNorm: v = round_x(x·rstd*) (the normalized value in x's dtype), y = round_y(w·v),
//                w = C + γ — Hugging Face's LlamaRMSNorm: weight * hidden.to(input_dtype).
//   gemma        the weight w = round_f32(1 + γ), y = round_y(z*·w (+ β)): one rounding at the end —
//                GemmaRMSNorm: (x·rstd) * (1.0 + weight.float()), then .type_as(x). Sets the offset C
//                to 1 (the weight is stored zero-centred); an explicit other offset is refused.
//   unrounded_h  Add & Norm: the statistics and z* are those of x + residual *before* h is rounded
//                (h is still stored rounded). Some stacks do this on purpose; budgets.toml says what it
//                costs against the op (mutant unrounded_h).
//   vllm         a quantized output's (lnorm/quant.hpp, check --quant): y rounded to x's dtype (after the other
//                parts' roundings), dynamic scales s = f32(f32(amax|y|) / qmax) of that y (mx: 2^(floor(log2
//                amax) − emax_elem)), then q = Q(f32(y · f32(1/s))): one rounding to the format of an f32
//                product — vLLM's fused RMSNorm + quant kernels (rms_norm_static_fp8_quant, the dynamic
//                per-token and per-block ones). lnorm/quantize.hpp measure_quantized_recipe.
// llama and gemma exclude each other (gemma has one rounding where llama has two).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lnorm/problem.hpp"
#include "lnorm/reference.hpp"

namespace lnorm {

struct Recipe {
  std::string name;            // as given, e.g. "llama+unrounded_h"; "" for no recipe
  bool round_normalized = false;  // llama
  bool weight_in_f32 = false;     // gemma
  bool unrounded_sum = false;     // unrounded_h
  bool quant_vllm = false;        // vllm: q's rounding points (a quantized output's recipe)
  bool empty() const { return name.empty(); }
};

struct RecipeInfo {
  const char* name;
  const char* ops;          // the ops it applies to, for help and `list`
  const char* description;  // one line
};
const std::vector<RecipeInfo>& known_recipes();

// Parses "llama", "gemma+unrounded_h", ...; throws std::invalid_argument naming the known recipes.
Recipe parse_recipe(std::string_view s);

// The problem the recipe is measured on: p itself, or with gamma_offset 1 for gemma. Throws
// std::invalid_argument where the recipe does not apply (llama on LayerNorm, unrounded_h without a
// residual, gemma with another offset or without gamma, f64 data).
Problem recipe_problem(const Problem& p, const Recipe& r);

// Rows of the recipe's answer, like RowReferencer for the op (not thread-safe: one per thread).
class RecipeReferencer {
 public:
  RecipeReferencer(const Problem& problem, const Recipe& recipe);  // problem: from recipe_problem
  ~RecipeReferencer();
  RecipeReferencer(RecipeReferencer&&) noexcept;
  RecipeReferencer& operator=(RecipeReferencer&&) noexcept;

  // x (problem.dtype), residual (problem.residual_dtype; Add & Norm only, else null), gamma/beta (cols
  // elements of problem.param_dtype or null): one row of n elements. y_out: the recipe's answer as bits of
  // y's dtype; elems: y_hi + y_lo = the recipe's value before its last rounding, z = z*, and the scale of
  // that last step: output_scale with the recipe's own w and normalized value (llama, an RMSNorm: |w|·|v|, so a
  // candidate that is the recipe's answer reads at most 0.5). Returns the number of elements whose unrounded sum x +
  // residual was not a double (unrounded_h only; the statistics then use the double nearest it, a relative
  // error below 2^-53 — only when |x| and |residual| are more than 2^29 apart in f32).
  std::int64_t run(const void* x, const void* residual, const void* gamma, const void* beta, std::int64_t n,
                   void* y_out, ElementReference* elems);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lnorm
