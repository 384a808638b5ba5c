// welford — Welford's running update inside blocks, Chan's pairwise merge across blocks, on values
// shifted by the row's first element (Chan, Golub & LeVeque 1983, "Algorithms for computing the
// sample variance", §3: shifting by a sample value removes the offset before it costs precision).
//   x' = x − x[0]   (exact by Sterbenz's lemma whenever x is within a factor 2 of x[0], which is
//                    precisely the offset case where an unshifted mean would lose kappa·u)
//   in a block:  k += 1; d = x' − mean; mean += d/k; m2 += d·(x' − mean)
//   merge a,b:   n = na+nb; δ = mean_b − mean_a; mean = mean_a + δ·nb/n; m2 = m2a + m2b + δ²·na·nb/n
// Blocks of kBlock elements are merged as a binary counter (equal-sized partials merge first), so
// no value passes through more than kBlock + log2(n/kBlock) rounding steps: the error grows like
// log n, not n. On a constant row every d and δ is exactly 0, so mean = x and m2 = 0 exactly and
// y = β bit-exactly. Measured on `lnorm gen --dist offset --offset 1e4` (kappa ≈ 1e4, 64x1024 f32):
// without the shift the mean is 1 ulp off and y errs by 1.9·kappa scaled ulps; with it, by < 8.
// Failure modes (f32 range): d·(x − mean) overflows when the row's spread exceeds ~1.8e19 (x² near
// f32 max), and underflows to 0 for subnormal rows — with eps = 0 that gives var = 0, rstd = Inf.
#include <array>

#include "kernels.hpp"
#include "scalar_rows.hpp"

namespace lnorm::cpu {
namespace {

// 32 elements per block: long enough to amortize the merges (a merge costs a division), short
// enough that a block's sequential updates add at most ~32 roundings to the mean.
constexpr std::int64_t kBlock = 32;

template <class T>
struct WelfordStats {
  using A = Acc<T>;
  struct Partial {
    A count = 0, mean = 0, m2 = 0;
  };
  static Partial merge(const Partial& a, const Partial& b) {
    const A n = a.count + b.count;
    const A delta = b.mean - a.mean;
    const A wb = b.count / n;
    return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.count * wb};
  }
  RowStats<T> operator()(const T* x, std::int64_t n) const {
    const A shift = load(x[0]);
    // levels[k] holds a partial of 2^k blocks (or is empty): a binary counter of partials.
    std::array<Partial, 64> levels{};
    std::array<bool, 64> full{};
    Partial tail;
    for (std::int64_t start = 0; start < n; start += kBlock) {
      const std::int64_t end = std::min(n, start + kBlock);
      Partial p;
      for (std::int64_t i = start; i < end; ++i) {
        const A v = load(x[i]) - shift;
        p.count += 1;
        const A d = v - p.mean;
        p.mean += d / p.count;
        p.m2 += d * (v - p.mean);
      }
      if (end - start < kBlock) {  // the short last block merges at the end
        tail = p;
        break;
      }
      std::size_t level = 0;
      while (full[level]) {
        p = merge(levels[level], p);
        full[level] = false;
        ++level;
      }
      levels[level] = p;
      full[level] = true;
    }
    // Fold the counter from the smallest partial up, then the tail.
    Partial total;
    bool have = false;
    for (std::size_t level = 0; level < levels.size(); ++level) {
      if (!full[level]) continue;
      total = have ? merge(levels[level], total) : levels[level];
      have = true;
    }
    if (tail.count > 0) total = have ? merge(total, tail) : tail;
    return {shift + total.mean, total.m2 / static_cast<A>(n), shift, total.mean};
  }
};

}  // namespace

const KernelInfo kWelford{
    "welford", "scalar Welford updates in blocks of 32, Chan pairwise merge; f32 (f64 for f64)",
    DTypeSet{DType::f32, DType::f64, DType::f16, DType::bf16}, nullptr, &run_scalar<WelfordStats>};

}  // namespace lnorm::cpu
