// The recipes' exact answers, built from the op's exact reference (RowReferencer) and exact sums:
//   llama:       v = RowReferencer with w = 1 (no gamma, no beta) into x's dtype — z* rounded once;
//                then w·v = p + e exactly (two_prod: w and v are doubles) rounded once (round_sum_bits).
//   gemma:       RowReferencer with gamma' = round_f32(C + γ) as an f32 weight and offset 0.
//   unrounded_h: RowReferencer reading the sums x + residual as f64 values (exact whenever the sum is a
//                double; otherwise the nearest double, counted).
#include "lnorm/recipe.hpp"

#include <cmath>
#include <stdexcept>

#include "double_double.hpp"
#include "lnorm/add.hpp"
#include "lnorm/format.hpp"

namespace lnorm {

const std::vector<RecipeInfo>& known_recipes() {
  static const std::vector<RecipeInfo> all = {
      {"llama", "rmsnorm, add_rmsnorm", "the normalized value x*rstd rounded to x's dtype, then times the weight, rounded (LlamaRMSNorm)"},
      {"gemma", "every op", "weight 1 + gamma rounded to f32, one rounding at the end (GemmaRMSNorm)"},
      {"unrounded_h", "add_layernorm, add_rmsnorm", "statistics of x + residual before h is rounded (h still stored rounded)"},
      {"vllm", "every forward op, with --quant", "y rounded to x's dtype, dynamic scales f32(amax/qmax) of it, q = Q(f32(y * f32(1/s))) (vLLM's fused norm + quant)"},
  };
  return all;
}

namespace {

std::string known_names() {
  std::string s;
  for (const RecipeInfo& r : known_recipes()) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

}  // namespace

Recipe parse_recipe(std::string_view s) {
  Recipe r;
  r.name = std::string(s);
  if (s.empty()) throw std::invalid_argument("empty recipe name (known: " + known_names() + ")");
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t plus = s.find('+', start);
    const std::string_view part = s.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start);
    bool* flag = part == "llama" ? &r.round_normalized : part == "gemma" ? &r.weight_in_f32
               : part == "unrounded_h" ? &r.unrounded_sum : part == "vllm" ? &r.quant_vllm : nullptr;
    if (!flag) throw std::invalid_argument("unknown recipe '" + std::string(part) + "' in '" + r.name + "' (known: " +
                                           known_names() + "; combine with '+')");
    if (*flag) throw std::invalid_argument("recipe '" + r.name + "' names '" + std::string(part) + "' twice");
    *flag = true;
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  if (r.round_normalized && r.weight_in_f32)
    throw std::invalid_argument("recipe '" + r.name + "': llama and gemma exclude each other (llama rounds the normalized "
                                "value before the weight multiply, gemma rounds once at the end)");
  return r;
}

Problem recipe_problem(const Problem& p, const Recipe& r) {
  const std::string who = "recipe '" + r.name + "': ";
  if (p.dtype == DType::f64) throw std::invalid_argument(who + "recipes model f32, f16 and bf16 kernels (the data is f64)");
  if (r.round_normalized && p.op.norm != Norm::rmsnorm)
    throw std::invalid_argument(who + "llama is an RMSNorm recipe (op rmsnorm or add_rmsnorm; this is " + std::string(name(p.op)) + ")");
  if (r.round_normalized && p.has_beta)
    throw std::invalid_argument(who + "llama has no beta (y = weight * round(x*rstd))");
  if (r.unrounded_sum && p.op.prologue != Prologue::residual_add)
    throw std::invalid_argument(who + "unrounded_h is an Add & Norm recipe (give --residual)");
  Problem q = p;
  if (r.weight_in_f32) {
    if (!p.has_gamma) throw std::invalid_argument(who + "gemma's weight is 1 + gamma: give --gamma");
    if (p.gamma_offset != 0 && p.gamma_offset != 1)
      throw std::invalid_argument(who + "gemma's weight is 1 + gamma, not " + std::to_string(p.gamma_offset) + " + gamma");
    q.gamma_offset = 1;
  }
  return q;
}

struct RecipeReferencer::Impl {
  Problem p;
  Recipe r;
  Format yfmt;
  RowReferencer norm;             // the recipe's norm: reads x, h, or the f64 sums
  std::vector<double> sums;       // unrounded_h: x + residual as doubles
  std::vector<std::byte> h;       // otherwise, Add & Norm: h rounded once
  std::vector<float> weight, shift;  // gemma: round_f32(C + γ), and β as f32 (exact)
  std::vector<std::byte> v;       // llama: z* rounded to x's dtype
  std::vector<ElementReference> v_elems;

  static Problem norm_problem(Problem q, const Recipe& r) {
    if (r.unrounded_sum) q.residual_dtype = DType::f64;  // RowReferencer reads the input in the residual's dtype
    if (r.weight_in_f32) q.param_dtype = DType::f32, q.gamma_offset = 0;
    return q;
  }
  Impl(const Problem& q, const Recipe& rec) : p(q), r(rec), yfmt(format_of(q.dtype)), norm(norm_problem(q, rec)) {}

  std::int64_t run(const void* x, const void* residual, const void* gamma, const void* beta, std::int64_t n,
                   void* y_out, ElementReference* elems) {
    std::int64_t inexact = 0;
    const void* in = x;
    if (p.op.prologue == Prologue::residual_add) {
      if (r.unrounded_sum) {
        sums.resize(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) {
          const ExactSum s = exact_sum(value_at(p.dtype, x, i), value_at(p.residual_dtype, residual, i));
          sums[static_cast<std::size_t>(i)] = s.hi;
          if (s.lo != 0) ++inexact;
        }
        in = sums.data();
      } else {
        h.resize(static_cast<std::size_t>(n) * size_of(p.residual_dtype));
        add_row(p, x, residual, n, h.data(), nullptr);
        in = h.data();
      }
    }
    if (r.weight_in_f32) {
      weight.resize(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i)  // C + γ is exact in double (C = 1, γ of f32 or narrower)
        weight[static_cast<std::size_t>(i)] = static_cast<float>(p.gamma_offset + value_at(p.param_dtype, gamma, i));
      if (beta) {  // the norm reads its params as f32 now; every f16/bf16 value is an f32 value
        shift.resize(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) shift[static_cast<std::size_t>(i)] = static_cast<float>(value_at(p.param_dtype, beta, i));
      }
      norm.run(in, weight.data(), beta ? shift.data() : nullptr, n, y_out, elems);
      return inexact;
    }
    if (!r.round_normalized) {
      norm.run(in, gamma, beta, n, y_out, elems);
      return inexact;
    }
    // llama: v = z* rounded to x's dtype, then y = w·v rounded once.
    v.resize(static_cast<std::size_t>(n) * size_of(p.dtype));
    v_elems.resize(static_cast<std::size_t>(n));
    norm.run(in, nullptr, nullptr, n, v.data(), v_elems.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      const double vi = value_at(p.dtype, v.data(), i);
      // w = C + γ: exact in double for γ of f32 or narrower and an offset of f32 (set_params rounds it).
      const double w = gamma ? p.gamma_offset + value_at(p.param_dtype, gamma, i) : 1.0;
      const detail::DD prod = std::isfinite(w * vi) ? detail::two_prod(w, vi) : detail::DD{w * vi, 0};
      if (y_out) set_bits_at(p.dtype, y_out, i, round_sum_bits(yfmt, prod.hi, prod.lo));
      // The scale of the recipe's last step, round(w·v): s with the recipe's normalized value v for z*
      // (with z*, a w·z* just under a binade whose w·v is over it read a correct rounding as 0.88 ulp).
      if (elems) elems[i] = {prod.hi, prod.lo, v_elems[ui].z, output_scale(0.0, std::fabs(w), std::fabs(vi), 0.0)};
    }
    return inexact;
  }
};

RecipeReferencer::RecipeReferencer(const Problem& problem, const Recipe& recipe)
    : impl_(std::make_unique<Impl>(problem, recipe)) {}
RecipeReferencer::~RecipeReferencer() = default;
RecipeReferencer::RecipeReferencer(RecipeReferencer&&) noexcept = default;
RecipeReferencer& RecipeReferencer::operator=(RecipeReferencer&&) noexcept = default;

std::int64_t RecipeReferencer::run(const void* x, const void* residual, const void* gamma, const void* beta,
                                   std::int64_t n, void* y_out, ElementReference* elems) {
  return impl_->run(x, residual, gamma, beta, n, y_out, elems);
}

}  // namespace lnorm
