#include "lnorm/problem.hpp"

#include <stdexcept>

namespace lnorm {

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType d : kAllDTypes)
    if (name(d) == s) return d;
  return std::nullopt;
}

Problem make_problem(std::int64_t rows, std::int64_t cols, DType dtype, double eps, bool has_gamma,
                     bool has_beta, int threads) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = dtype;
  // DESIGN.md: kernels receive eps as f32 (f64 for f64 data); the reference uses exactly that value.
  p.eps = dtype == DType::f64 ? eps : static_cast<double>(static_cast<float>(eps));
  p.has_gamma = has_gamma;
  p.has_beta = has_beta;
  p.threads = threads;
  p.param_dtype = dtype;
  p.residual_dtype = dtype;
  return p;
}

std::optional<Op> parse_op(std::string_view s) {
  for (const OpEntry& e : kOpTable)
    if (e.name == s) return e.op;
  return std::nullopt;
}

std::optional<Op> op_of_code(unsigned code) {
  for (const OpEntry& e : kOpTable)
    if (e.code == code) return e.op;
  return std::nullopt;
}

Problem with_op(Problem p, Op op) {
  p.op = op;
  return p;
}

std::string param_dtype_problem(DType d, DType param_dtype) {
  if (param_dtype == d) return "";
  if (param_dtype == DType::f32 && (d == DType::f16 || d == DType::bf16)) return "";
  return "gamma/beta in " + std::string(name(param_dtype)) + " with " + std::string(name(d)) +
         " x: parameters are x's dtype, or f32 with f16/bf16 x";
}

Problem set_params(Problem p, DType param_dtype, double gamma_offset) {
  if (const std::string why = param_dtype_problem(p.dtype, param_dtype); !why.empty()) throw std::invalid_argument(why);
  if (gamma_offset != 0 && !p.has_gamma) throw std::invalid_argument("a gamma offset needs gamma");
  p.param_dtype = param_dtype;
  // As eps: the kernels receive the offset in f32 (f64 for f64 data), and the reference uses that value.
  p.gamma_offset = p.dtype == DType::f64 ? gamma_offset : static_cast<double>(static_cast<float>(gamma_offset));
  return p;
}

Problem set_residual(Problem p, DType residual_dtype) {
  if (p.op.prologue != Prologue::residual_add) throw std::invalid_argument(std::string(name(p.op)) + " has no residual (Add & Norm is add_" + std::string(name(p.op)) + ")");
  if (const std::string why = param_dtype_problem(p.dtype, residual_dtype); !why.empty())
    throw std::invalid_argument("residual in " + std::string(name(residual_dtype)) + " with " + std::string(name(p.dtype)) +
                                " x: the residual is x's dtype, or f32 with f16/bf16 x");
  p.residual_dtype = residual_dtype;
  return p;
}

Problem set_quant(Problem p, const QuantSpec& spec) {
  if (p.op.direction != Direction::fwd) throw std::invalid_argument("a quantized output is a forward's (the backward has none)");
  if (p.dtype == DType::f64) throw std::invalid_argument("quantized outputs take f32, f16 or bf16 x (their scales are f32)");
  if (const std::string why = quant_spec_error(spec, p.cols); !why.empty()) throw std::invalid_argument(why);
  p.op.epilogue = Epilogue::quantized;
  p.quant = spec;
  return p;
}

}  // namespace lnorm
