#include "generators.hpp"

#include <algorithm>
#include <cmath>

namespace lnorm::verify {

namespace {

// Splits rows × cols into an N-d shape whose normalized dims start at `axis`: rows into up to two
// outer dims and cols into up to two inner dims, where they factor. So every axis position of a
// rank-1..4 tensor is exercised, and rows/cols stay what the generator chose.
std::vector<std::int64_t> split_shape(std::int64_t rows, std::int64_t cols, int outer_split, int inner_split,
                                      int& axis) {
  std::vector<std::int64_t> shape;
  auto split = [](std::int64_t v, int how) -> std::vector<std::int64_t> {
    if (how == 0) return {v};
    for (std::int64_t f : {2, 3, 4, 8}) {
      if (v % f == 0 && v > f) return how == 1 ? std::vector<std::int64_t>{f, v / f} : std::vector<std::int64_t>{v / f, f};
    }
    return {v};
  };
  if (rows > 1 || outer_split > 0) {
    for (std::int64_t d : split(rows, outer_split)) shape.push_back(d);
  }
  axis = static_cast<int>(shape.size());
  for (std::int64_t d : split(cols, inner_split)) shape.push_back(d);
  return shape;
}

}  // namespace

// Uniform over [lo, hi) whatever RapidCheck's current size: its inRange only reaches the top of the
// range at full size, which would keep 4097- and 65537-wide rows out of all but the last cases.
// Shrinking still goes towards lo.
rc::Gen<int> pick(int lo, int hi) { return rc::gen::resize(rc::kNominalSize, rc::gen::inRange(lo, hi)); }

rc::Gen<CaseSpec> gen_case(DType dtype, const Profile& profile, std::shared_ptr<int> counter) {
  const Profile prof = profile;
  const int nclasses = static_cast<int>(prof.classes.size());
  // The primary class comes from the counter, not from the random stream: coverage is guaranteed.
  rc::Gen<int> primary([counter, nclasses](const rc::Random&, int) {
    return rc::shrinkable::just((*counter)++ % nclasses);
  });
  constexpr int kEdgeWidthCount = static_cast<int>(std::size(kEdgeWidths));
  constexpr int kEdgeEpsCount = static_cast<int>(std::size(kEdgeEps));
  return rc::gen::apply(
      [prof, dtype, nclasses](int cls, int width_pick, int random_width, int rows_pick, int outer_split, int inner_split,
                              int eps_pick, int eps_exp_x10, int gamma, int beta, int kappa_x4, int mixed,
                              int misalign, int seed) {
        CaseSpec s;
        s.dtype = dtype;
        const RowClass primary_class = prof.classes[static_cast<std::size_t>(cls)];
        s.row_classes = {primary_class};
        if (prof.mixed_batches && mixed > 0 && nclasses > 1) {
          s.row_classes.push_back(prof.classes[static_cast<std::size_t>((cls + mixed) % nclasses)]);
        }
        // Width: an edge width (shrinks towards 1) or a random one.
        std::int64_t cols = width_pick < kEdgeWidthCount ? kEdgeWidths[width_pick] : random_width;
        cols = std::min<std::int64_t>(cols, prof.max_elements);
        std::int64_t rows = std::max<std::int64_t>(1, std::min<std::int64_t>(rows_pick, prof.max_elements / cols));
        rows = std::min<std::int64_t>(rows, prof.max_rows);
        if (rows < static_cast<std::int64_t>(s.row_classes.size())) s.row_classes.resize(1);
        s.shape = split_shape(rows, cols, outer_split, inner_split, s.axis);
        // eps: an edge value or 10^U(-15, 0.5); eps = 0 only where the profile allows it.
        double eps = eps_pick < kEdgeEpsCount ? kEdgeEps[eps_pick] : std::pow(10.0, -eps_exp_x10 / 10.0);
        if (prof.eps_zero_only) eps = 0;
        const bool has_tiny = std::find(s.row_classes.begin(), s.row_classes.end(), RowClass::tiny) != s.row_classes.end();
        if (eps == 0 && (!prof.allow_eps_zero || has_tiny)) eps = 1e-5;  // tiny means var << eps > 0
        s.eps = make_problem(1, 1, dtype, eps, false, false).eps;
        s.gamma = prof.allow_affine ? static_cast<Affine>(gamma) : Affine::absent;
        s.beta = prof.allow_affine ? static_cast<Affine>(beta) : Affine::absent;
        s.log10_kappa = kappa_x4 / 4.0;
        s.misalign = misalign;
        s.data_seed = static_cast<std::uint64_t>(seed);
        s.dy_range_edges = prof.dy_range_edges;
        return s;
      },
      primary, pick(0, kEdgeWidthCount + 3), pick(1, 300), pick(1, prof.max_rows + 1), pick(0, 3), pick(0, 3),
      pick(0, kEdgeEpsCount + 2), pick(0, 156), pick(0, 4), pick(0, 4), pick(0, 29), pick(0, 3), pick(0, 8),
      pick(0, 1 << 30));
}

// The params property: gamma always given (random, some zeros), its storage f32 for half of the 16-bit
// cases, and an offset C: none (only with f32 storage), 1 (Gemma's 1 + w) or k/8 in [-2, 2].
rc::Gen<CaseSpec> gen_case_for(DType dtype, Op op, const Profile& profile, std::shared_ptr<int> counter) {
  const rc::Gen<CaseSpec> base = gen_case(dtype, profile, counter);
  if (!profile.params) {
    return rc::gen::map(base, [op](CaseSpec s) {
      s.op = op;
      return s;
    });
  }
  return rc::gen::apply(
      [dtype, op](CaseSpec s, int storage, int offset_kind, int eighths, int zeros) {
        s.op = op;
        s.gamma = zeros ? Affine::with_zeros : Affine::random;
        const bool sixteen = dtype == DType::f16 || dtype == DType::bf16;
        if (sixteen && storage) s.param_dtype = DType::f32;
        if (offset_kind == 0 && !s.param_dtype) offset_kind = 1;  // a params case changes something
        const double c = offset_kind == 0 ? 0.0 : offset_kind == 1 ? 1.0 : eighths / 8.0;
        s.gamma_offset = make_problem(1, 1, dtype, c, false, false).eps;  // rounded as the kernel receives it
        return s;
      },
      base, pick(0, 2), pick(0, 3), pick(-16, 17), pick(0, 2));
}

}  // namespace lnorm::verify
