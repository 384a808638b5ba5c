// welford — Welford's running update inside blocks, Chan's pairwise merge across blocks, on values
// shifted by the row's first element (Chan, Golub & LeVeque 1983, "Algorithms for computing the
// sample variance", §3: shifting by a sample value removes the offset before it costs precision).
//   x' = x − x[0]   (exact by Sterbenz's lemma whenever x is within a factor 2 of x[0], which is
//                    precisely the offset case where an unshifted mean would lose kappa·u)
//   in a block:  k += 1; d = x' − mean; sum += x'; mean = sum/k; m2 += d·(x' − mean)
//   merge a,b:   n = na+nb; δ = mean_b − mean_a; sum = sum_a + sum_b; mean = sum/n;
//                m2 = m2a + m2b + δ²·na·nb/n
// The mean is carried as a sum (divided once per step) rather than as Welford's running
// mean += d/k: the sum is a blocked pairwise sum, so when every partial sum is representable (the
// exact-statistics rows of property_tests/) the mean is exact, and otherwise it is as accurate as a
// pairwise sum — with the running form each d/k rounds and the mean drifts by ~1 ulp per block.
// Blocks of kBlock elements are merged as a binary counter (equal-sized partials merge first), so
// no value passes through more than kBlock + log2(n/kBlock) rounding steps: the error grows like
// log n, not n. On a constant row every d and δ is exactly 0, so mean = x and m2 = 0 exactly and
// y = β bit-exactly. Measured on `lnorm gen --dist offset --offset 1e4` (kappa ≈ 1e4, 64x1024 f32):
// without the shift the mean is 1 ulp off and y errs by 1.9·kappa scaled ulps; with it, by < 8.
// Range: when max |x − x[0]| leaves [2^-40, 2^40] (2^±400 for f64) — rows near overflow, whose
// squares overflow, and subnormal rows, whose squares underflow — the row is recomputed on values
// scaled by an exact power of two (RowStats::scale); this costs a second and third pass on those
// rows only.
// RMSNorm (the careful scalar one): mean(x²) on v = x·2^k (k = 0 unless max|x| leaves [2^-40, 2^40],
// then max|v| in [1, 2): squares neither overflow nor underflow), the squares summed with Neumaier's
// compensation: every square is ≥ 0, so the sum errs by at most 2u + n·u² relative (Higham, "Accuracy
// and Stability of Numerical Algorithms", §4.3), below 3u for n < 2^22 in f32; with the square, /n, +eps,
// sqrt and division the rstd is within ~3 ulp. (The blocked pairwise sum this replaced erred by up to
// (32 + log2 n)·u: rstd 5 ulp and y 8.78 scaled ulp on a 54-wide offset row Add & Norm's add_rounding drew,
// seed 2, over the 8-ulp budget; now rstd 1 and y 2.2 on that row.)
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "backward.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "scalar_rows.hpp"

namespace lnorm::cpu {
namespace {

// 32 elements per block: long enough to amortize the merges (a merge costs a division), short
// enough that a block's sequential updates add at most ~32 roundings to the mean.
constexpr std::int64_t kBlock = 32;
// Largest |v| whose square, summed over 2^31 elements, stays finite (and smallest whose square stays
// normal) in the accumulator: 2^40 → 2^80·2^31 < 2^127 for f32; f64 gets 2^400 by the same sum.
// (Element counts are kept in the accumulator type too: exact up to 2^24 elements per f32 row; wider
// rows round the merge weights by 2^-24 relative, which moves the result by about an ulp.)
// Recentre when |mean − shift| > 1 std. Measured with `lnorm verify --kernel welford --property
// accuracy --cases 400` (worst y error, f32 / f64 scaled ulps): threshold 4 → 14.3 / 6.9 (bits
// and sparse rows whose x[0] is an outlier), 2 → 7.7 / 5.5, 1 → 4.3 / 5.5. The price: a second pass
// on rows whose x[0] is more than 1 std from the mean, 32% of normally distributed rows.
constexpr double kRecentre = 1;
template <class A>
constexpr A kSafeMaxOf = std::is_same_v<A, double> ? 0x1p400 : 0x1p40f;
template <class A>
constexpr A kSafeMinOf = std::is_same_v<A, double> ? 0x1p-400 : 0x1p-40f;

template <class T>
struct WelfordStats {
  using A = Acc<T>;
  static constexpr A kSafeMax = kSafeMaxOf<A>, kSafeMin = kSafeMinOf<A>;
  struct Partial {
    A count = 0, sum = 0, mean = 0, m2 = 0;
  };
  static Partial merge(const Partial& a, const Partial& b) {
    const A n = a.count + b.count;
    const A delta = b.mean - a.mean;
    const A sum = a.sum + b.sum;
    return {n, sum, sum / n, a.m2 + b.m2 + delta * delta * a.count * (b.count / n)};
  }
  // One blocked Welford/Chan pass over v = x·scale − shift_scaled; also returns max |v|.
  static Partial pass(const T* x, std::int64_t n, A scale, A shift_scaled, A& max_abs) {
    // levels[k] holds a partial of 2^k blocks (or is empty): a binary counter of partials.
    std::array<Partial, 64> levels{};
    std::array<bool, 64> full{};
    Partial tail;
    max_abs = 0;
    for (std::int64_t start = 0; start < n; start += kBlock) {
      const std::int64_t end = std::min(n, start + kBlock);
      Partial p;
      for (std::int64_t i = start; i < end; ++i) {
        const A v = load(x[i]) * scale - shift_scaled;
        max_abs = std::max(max_abs, std::abs(v));
        p.count += 1;
        const A d = v - p.mean;
        p.sum += v;
        p.mean = p.sum / p.count;
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
    return total;
  }

  static RowStats<T> rms(const T* x, std::int64_t n) {
    A max_abs = 0;
    bool finite = true;
    for (std::int64_t i = 0; i < n; ++i) {
      const A v = std::abs(load(x[i]));
      finite = finite && std::isfinite(v);
      max_abs = std::max(max_abs, v);
    }
    if (!finite) return {std::numeric_limits<A>::quiet_NaN(), std::numeric_limits<A>::quiet_NaN(), 0, 0};
    A scale = 1;
    if (max_abs != 0 && !(max_abs >= kSafeMin && max_abs <= kSafeMax)) {
      const int max_exp = std::numeric_limits<A>::max_exponent - 2;
      scale = std::ldexp(A(1), std::clamp(-std::ilogb(max_abs), -max_exp, max_exp));
    }
    // Neumaier: c collects what each addition rounded away; the larger operand's low part is exact.
    A sum = 0, c = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const A v = load(x[i]) * scale;
      const A sq = v * v;
      const A t = sum + sq;
      c += sum >= sq ? (sum - t) + sq : (sq - t) + sum;
      sum = t;
    }
    return {0, (sum + c) / static_cast<A>(n), 0, 0, scale};
  }

  RowStats<T> operator()(const T* x, std::int64_t n, bool centred) const {
    if (!centred) return rms(x, n);
    A shift_scaled = load(x[0]), scale = 1, max_abs = 0;
    Partial total = pass(x, n, scale, shift_scaled, max_abs);
    // Squares of the spread must stay normal and finite in A: max |v| in [2^-kSafeExp, 2^kSafeExp].
    // Outside it (rows near overflow, where x − x[0] itself may overflow; subnormal rows, whose
    // squares underflow to 0) the row is redone on v·2^k with max |v| in [1, 2): exact scaling.
    // NaN/Inf rows fail both tests and stay NaN.
    if (max_abs != 0 && !(max_abs >= kSafeMin && max_abs <= kSafeMax)) {
      A raw_max = 0;
      for (std::int64_t i = 0; i < n; ++i) raw_max = std::max(raw_max, std::abs(load(x[i]) - shift_scaled));
      if (!std::isfinite(raw_max)) {  // x − x[0] overflows: scale before subtracting
        raw_max = 0;
        for (std::int64_t i = 0; i < n; ++i) raw_max = std::max(raw_max, std::abs(load(x[i])));
        raw_max *= 2;  // bounds |x − x[0]| ≤ 2·max|x|, in units where it is finite
        if (!std::isfinite(raw_max)) raw_max = std::numeric_limits<A>::max();
      }
      if (std::isfinite(raw_max) && raw_max > 0) {
        // Clamped so the scale itself stays a normal number of A (subnormal f32 rows need 2^149).
        const int max_exp = std::numeric_limits<A>::max_exponent - 2;
        scale = std::ldexp(A(1), std::clamp(-std::ilogb(raw_max), -max_exp, max_exp));
        shift_scaled = load(x[0]) * scale;
        total = pass(x, n, scale, shift_scaled, max_abs);
      }
    }
    // x[0] far from the mean (an outlier: sparse rows) costs what an offset costs — the sums carry
    // |mean − x[0]|, and the mean's rounding error grows with it (measured: 20 scaled ulps on f32
    // rows of zeros with x[0] an outlier, growing like sqrt(n)). Then the row is redone with the
    // mean just found as the shift.
    if (std::abs(total.mean) > kRecentre * std::sqrt(total.m2 / static_cast<A>(n))) {
      shift_scaled += total.mean;
      total = pass(x, n, scale, shift_scaled, max_abs);
    }
    // The mean is formed in the scaled domain: x̄ − x[0] alone may overflow (rows near ±max).
    return {(shift_scaled + total.mean) / scale, total.m2 / static_cast<A>(n), shift_scaled, total.mean, scale};
  }
};

}  // namespace

void welford_row(const Problem& p, const Tensors& t, std::int64_t row) {
  // x in input_dtype(p) (Add & Norm's f32 h beside 16-bit y), y in p.dtype.
  const std::size_t xs = size_of(input_dtype(p)), es = size_of(p.dtype), ss = size_of(stats_dtype(p.dtype));
  const auto at = static_cast<std::size_t>(row * p.cols);
  Problem one = p;
  one.rows = 1;
  one.threads = 1;
  // y is null with the quantized epilogue (no offset from a null pointer: UBSan's pointer-overflow check).
  Tensors t1{static_cast<const std::byte*>(t.x) + at * xs, t.gamma, t.beta, t.y ? static_cast<std::byte*>(t.y) + at * es : nullptr,
                   t.mean ? static_cast<std::byte*>(t.mean) + static_cast<std::size_t>(row) * ss : nullptr,
                   t.rstd ? static_cast<std::byte*>(t.rstd) + static_cast<std::size_t>(row) * ss : nullptr};
  if (p.op.epilogue == Epilogue::quantized) {  // the row's q and scales (y is not written)
    t1.q = static_cast<std::uint8_t*>(t.q) + p.quant.q_bytes(row, p.cols);
    if (t.quant_y) t1.quant_y = static_cast<float*>(t.quant_y) + at;
    const std::size_t scale_bytes = p.quant.storage().bytes;
    if (t.scales) t1.scales = static_cast<std::byte*>(t.scales) + static_cast<std::size_t>(row * p.quant.scales_per_row(p.cols)) * scale_bytes;
  }
  run_scalar<WelfordStats>(one, t1);
}

const KernelInfo kWelford{
    "welford", "scalar careful: Welford updates in blocks of 32, Chan pairwise merge (RMSNorm: Neumaier-compensated sum of squares, range-scaled); f32 (f64 for f64); backward recomputes the statistics, in f64 (long double for f64)",
    {.dtypes = kScalarDTypes, .forward_norms = kBothNorms, .backward_norms = kBothNorms, .prologues = kWithAdd,
     .epilogues = kWithQuant, .f32_residual = true},
    &run_scalar<WelfordStats>, &careful_backward};

}  // namespace lnorm::cpu
