#include "lnorm/kernel.hpp"
#include "lnorm/problem.hpp"

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
  return p;
}

std::optional<std::string> unavailable_reason(const KernelInfo& k, const Problem& p) {
  if (!k.dtypes.contains(p.dtype))
    return std::string(k.name) + " does not support dtype " + std::string(name(p.dtype));
  return k.why_not ? k.why_not(p) : std::nullopt;
}

}  // namespace lnorm
