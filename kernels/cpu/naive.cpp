// naive — the textbook two-pass LayerNorm, straight from the definition.
//   pass 1: mean = (Σ x) / n           sequential sum in f32 (f64 for f64 data)
//   pass 2: var  = (Σ (x − mean)²) / n  centred, so no cancellation on offset rows
// Its weakness is the sequential sum: error grows like n·u in the worst case (≈ sqrt(n)·u typical).
// RMSNorm, the textbook way too: ms = (Σ x²) / n, one sequential sum in f32, no range scaling (x²
// overflows f32 near |x| = 1.8e19 and underflows on subnormal rows).
#include "backward.hpp"
#include "kernels.hpp"
#include "scalar_rows.hpp"

namespace lnorm::cpu {
namespace {

template <class T>
struct TwoPassStats {
  RowStats<T> operator()(const T* x, std::int64_t n, bool centred) const {
    if (!centred) {
      Acc<T> sq = 0;
      for (std::int64_t i = 0; i < n; ++i) sq += load(x[i]) * load(x[i]);
      return {0, sq / static_cast<Acc<T>>(n), 0, 0};
    }
    Acc<T> sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += load(x[i]);
    const Acc<T> mean = sum / static_cast<Acc<T>>(n);
    Acc<T> sq = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const Acc<T> d = load(x[i]) - mean;
      sq += d * d;
    }
    return {mean, sq / static_cast<Acc<T>>(n), 0, mean};
  }
};

}  // namespace

const KernelInfo kNaive{
    "naive", "scalar textbook: two-pass mean and centred variance (RMSNorm: sum of squares); sequential f32 sums (f64 for f64); backward from the saved statistics",
    {.dtypes = kScalarDTypes, .forward_norms = kBothNorms, .backward_norms = kBothNorms, .prologues = kWithAdd,
     .epilogues = kWithQuant, .f32_residual = true},
    &run_scalar<TwoPassStats>, &naive_backward};

}  // namespace lnorm::cpu
