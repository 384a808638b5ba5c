// The backward mutants (layernorm_bwd, rmsnorm_bwd): the control's backward with one defect each, every one
// a bug seen in real backward kernels. The control: statistics recomputed from x in long double (the
// saved ones ignored, except by saved_wrong_row), dx from the textbook formula in long double rounded once,
// dgamma and dbeta summed down the rows in row order in long double (so every thread count gives the same
// bits). Defects:
//   drops_mean_g       LayerNorm's dx without mean(g): the RMSNorm formula on a LayerNorm (dx no longer sums to 0)
//   drops_xhat_term    dx without xhat·mean(g·xhat): the gradient through the variance forgotten
//   dgamma_wrong_axis  dgamma_j summed along row j (mod rows) instead of down column j
//   var_unbiased       the statistics with var = Σ(x − mean)²/(n − 1), as a backward re-deriving torch.var's default
//   eps_outside_sqrt   rstd = 1/(sqrt(var) + eps)
//   dbeta_wrong_rows   dbeta summed over rows 1.. (the first row's dy left out: an off-by-one in the row loop)
//   drops_tail_block   dgamma and dbeta leave out the rows past the last full 64-row block (a cross-row
//                      reduction whose remainder block is never merged)
//   saved_wrong_row    the saved mean/rstd of row r + 1 (mod rows) used for row r (a stride or index bug)
// and two that live in 16-bit storage (registered for f16 and bf16 x only; the old gate that counted a
// 16-bit gradient's error in ulps of its own format passed both on 8192 rows):
//   dbeta_zero             dbeta written as zeros (a bias gradient never accumulated)
//   param_sums_in_x_dtype  dgamma and dbeta summed down the rows in x's 16-bit format, rounded after every add (an
//                          accumulator kept in the storage type)
#include <cmath>
#include <cstdint>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/params.hpp"
#include "lnorm/problem.hpp"
#include "backward_mutants.hpp"

namespace lnorm::mutants {
namespace {

using L = long double;

template <class T>
L load(const void* p, std::int64_t i) {
  return static_cast<L>(to_float(static_cast<const T*>(p)[i]));
}
template <class T>
void store(void* p, std::int64_t i, L v) {
  if constexpr (std::is_same_v<T, double>) static_cast<double*>(p)[i] = static_cast<double>(v);
  else static_cast<T*>(p)[i] = from_double<T>(static_cast<double>(v));
}
void store_param(DType d, void* p, std::int64_t j, L v) {
  switch (d) {
    case DType::f32: return store<float>(p, j, v);
    case DType::f64: return store<double>(p, j, v);
    case DType::f16: return store<f16>(p, j, v);
    case DType::bf16: return store<bf16>(p, j, v);
  }
}
L saved(const Problem& p, const void* s, std::int64_t r) {
  return stats_dtype(p.dtype) == DType::f64 ? static_cast<L>(static_cast<const double*>(s)[r])
                                            : static_cast<L>(static_cast<const float*>(s)[r]);
}

template <class T>
void run_typed(BackwardDefect defect, const Problem& p, const Tensors& t) {
  const std::int64_t n = p.cols, rows = p.rows;
  const bool is_centred = p.op.norm == Norm::layernorm;
  std::vector<L> w(static_cast<std::size_t>(n), 1);
  if (p.has_gamma && t.gamma)
    for (std::int64_t j = 0; j < n; ++j) w[static_cast<std::size_t>(j)] = static_cast<L>(p.gamma_offset) + static_cast<L>(cpu::param_value(p.param_dtype, t.gamma, j));
  std::vector<L> xhat(static_cast<std::size_t>(rows * n));
  std::vector<L> dg(static_cast<std::size_t>(n), 0), db(static_cast<std::size_t>(n), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    L mean = 0, rstd;
    if (defect == BackwardDefect::saved_wrong_row && t.saved_rstd) {
      const std::int64_t s = (r + 1) % rows;
      if (is_centred) mean = saved(p, t.saved_mean, s);
      rstd = saved(p, t.saved_rstd, s);
    } else {
      // Shifted by the row's first element (x − x0 exact in long double for f32-family data, and its error
      // relative to the spread, not the offset, for f64): a plain long double sum of 4096 f64 values
      // on an offset row erred by 2·kappa f64 ulps, past the default budget's 1·kappa.
      const L shift = is_centred ? load<T>(t.x, r * n) : L(0);
      L sum = 0;
      for (std::int64_t i = 0; i < n; ++i) sum += load<T>(t.x, r * n + i) - shift;
      mean = is_centred ? shift + sum / static_cast<L>(n) : L(0);
      L q = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const L d = load<T>(t.x, r * n + i) - mean;
        q += d * d;
      }
      const L var = q / static_cast<L>(defect == BackwardDefect::var_unbiased ? n - 1 : n);
      const bool poisoned = !std::isfinite(q) || !std::isfinite(sum);
      rstd = poisoned ? L(NAN)
             : defect == BackwardDefect::eps_outside_sqrt ? L(1) / (std::sqrt(var) + static_cast<L>(p.eps))
                                                          : L(1) / std::sqrt(var + static_cast<L>(p.eps));
    }
    // A sign row (eps = 0, a width-1 RMSNorm or width-2 LayerNorm row: y = ±1 whatever x is) has xhat = ±1
    // exactly, and RMSNorm's bracket g − xhat·(g·xhat) is then 0 exactly. x·(1/|x|) in long double is ±(1 ± 2^-64),
    // and on a row of one subnormal f64 (rstd ~2^1000) beside a huge dy, rstd·g·2^-64 overflowed to -Inf where dx
    // is 0 (ctest mutants_bwd on the `small` row class: rmsnorm_bwd f64 params, seed 1).
    const bool sign_row = p.eps == 0 && std::isfinite(rstd) && n == (is_centred ? 2 : 1);
    L sum_g = 0, sum_gx = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const L d = load<T>(t.x, r * n + i) - mean;
      const L xh = sign_row && d != 0 ? (d > 0 ? L(1) : L(-1)) : d * rstd;
      xhat[static_cast<std::size_t>(r * n + i)] = xh;
      const L g = load<T>(t.dy, r * n + i) * w[static_cast<std::size_t>(i)];
      sum_g += g;
      sum_gx += g * xh;
    }
    const L mean_g = is_centred && defect != BackwardDefect::drops_mean_g ? sum_g / static_cast<L>(n) : L(0);
    const L mean_gx = defect == BackwardDefect::drops_xhat_term ? L(0) : sum_gx / static_cast<L>(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const L dyi = load<T>(t.dy, r * n + i), xh = xhat[static_cast<std::size_t>(r * n + i)];
      store<T>(t.dx, r * n + i, rstd * (dyi * w[static_cast<std::size_t>(i)] - mean_g - xh * mean_gx));
    }
  }
  const std::int64_t full_blocks = rows / 64 * 64;
  // param_sums_in_x_dtype: each running sum rounded to T after every add.
  const auto acc = [&](L sum, L v) {
    if (defect != BackwardDefect::param_sums_in_x_dtype) return sum + v;
    return static_cast<L>(to_float(from_double<T>(static_cast<double>(sum + v))));
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    if (defect == BackwardDefect::drops_tail_block && full_blocks > 0 && r >= full_blocks) break;
    for (std::int64_t j = 0; j < n; ++j) {
      const L dyv = load<T>(t.dy, r * n + j);
      if (defect != BackwardDefect::dgamma_wrong_axis) dg[static_cast<std::size_t>(j)] = acc(dg[static_cast<std::size_t>(j)], dyv * xhat[static_cast<std::size_t>(r * n + j)]);
      if ((defect != BackwardDefect::dbeta_wrong_rows || r > 0) && defect != BackwardDefect::dbeta_zero)
        db[static_cast<std::size_t>(j)] = acc(db[static_cast<std::size_t>(j)], dyv);
    }
  }
  if (defect == BackwardDefect::dgamma_wrong_axis) {
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t r = j % rows;
      for (std::int64_t i = 0; i < n; ++i) dg[static_cast<std::size_t>(j)] += load<T>(t.dy, r * n + i) * xhat[static_cast<std::size_t>(r * n + i)];
    }
  }
  for (std::int64_t j = 0; j < n; ++j) {
    if (p.has_gamma && t.dgamma) store_param(p.param_dtype, t.dgamma, j, dg[static_cast<std::size_t>(j)]);
    if (p.has_beta && t.dbeta) store_param(p.param_dtype, t.dbeta, j, db[static_cast<std::size_t>(j)]);
  }
}

}  // namespace

void run_backward_mutant(BackwardDefect defect, const Problem& p, const Tensors& t) {
  switch (p.dtype) {
    case DType::f32: return run_typed<float>(defect, p, t);
    case DType::f64: return run_typed<double>(defect, p, t);
    case DType::f16: return run_typed<f16>(defect, p, t);
    case DType::bf16: return run_typed<bf16>(defect, p, t);
  }
}

}  // namespace lnorm::mutants
