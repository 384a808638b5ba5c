// onepass — var = E[x²] − E[x]² in one pass. WRONG ON PURPOSE.
//   s1 = Σ x, s2 = Σ x² (sequential, f32), mean = s1/n, var = s2/n − mean²
// The two terms cancel on offset rows: their difference loses about 2·log2(kappa) bits, and can go
// negative, so sqrt(var + eps) is NaN (ONNX Runtime returned NaN for [40000, 40001, 40002, 40003];
// llm.c's kernels 4-5 pass their tests only because the test data has mean ≈ 0). No clamp to 0:
// the kernel shows the bug as shipped. The harness must flag it on offset data.
#include "kernels.hpp"
#include "scalar_rows.hpp"

namespace lnorm::cpu {
namespace {

template <class T>
struct OnePassStats {
  RowStats<T> operator()(const T* x, std::int64_t n, bool /*centred: layernorm only*/) const {
    Acc<T> s1 = 0, s2 = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const Acc<T> v = load(x[i]);
      s1 += v;
      s2 += v * v;
    }
    const Acc<T> mean = s1 / static_cast<Acc<T>>(n);
    return {mean, s2 / static_cast<Acc<T>>(n) - mean * mean, 0, mean};
  }
};

}  // namespace

const KernelInfo kOnePass{
    "onepass", "CAUTIONARY one-pass var = E[x^2] - E[x]^2 in f32; cancels on offset rows",
    {.dtypes = kScalarDTypes, .forward_norms = {Norm::layernorm}}, &run_scalar<OnePassStats>, nullptr, nullptr, nullptr,
    /*cautionary=*/true};

}  // namespace lnorm::cpu
