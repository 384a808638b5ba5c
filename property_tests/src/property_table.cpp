// The properties as a table (docs/DESIGN.md "Parts as data"): one row per property and the ops it covers — its
// check, the inputs it draws (a Profile) and what it demands, in words. properties_for(op) is the rows that cover
// the op, in table order (verify's cells); definition(p, dtype, op) is the first row of p that covers it. A new
// property is a row here (and its name in lnorm/properties.hpp); a property of a new op is a row with its scope.
#include <algorithm>
#include <vector>

#include "properties.hpp"

namespace lnorm::verify {
namespace {

// The ops a row covers: a direction, the norms, and (add) only the ops with the residual add in front.
struct Scope {
  Direction direction;
  NormSet norms;
  bool add_only = false;
  bool covers(Op op) const {
    return op.direction == direction && norms.contains(op.norm) && (!add_only || op.prologue == Prologue::residual_add);
  }
};
const Scope kFwd{Direction::fwd, kBothNorms}, kLnFwd{Direction::fwd, {Norm::layernorm}}, kRmsFwd{Direction::fwd, {Norm::rmsnorm}};
const Scope kAdd{Direction::fwd, kBothNorms, true};
const Scope kBwd{Direction::bwd, kBothNorms}, kLnBwd{Direction::bwd, {Norm::layernorm}};

// The row classes a row draws, resolved by the op's norm and direction where the norms differ:
//   all       every class the norm's metric covers: LayerNorm's exact-statistics rows (an exact mean), RMSNorm's
//             small rows (it has no mean; its metric measures a small output against itself; an all-zero row of
//             them once passed); nonfinite rows too
//   finite    the same without nonfinite rows
//   tame      finite without the bit-pattern rows (params: its storage and offset draws on top)
//   add       Add & Norm: finite without exact-statistics rows, whose pairs about a power of two a residual breaks
//             while the budgets still claimed their exact mean
//   bwd       the backward: finite with exact-statistics rows for both norms (their laws differ in the checks)
//   listed    the row's own list
enum class Classes { all, finite, tame, add, bwd, listed };

using C = RowClass;
std::vector<RowClass> resolve(Classes k, Op op, const std::vector<RowClass>& listed, bool plus_nonfinite) {
  const bool rms = op.norm == Norm::rmsnorm;
  std::vector<RowClass> out;
  switch (k) {
    case Classes::listed: out = listed; break;
    case Classes::add:
      out = {C::normal, C::uniform, C::offset, C::constant, C::tiny, C::huge, C::subnormal, C::sparse, C::bits};
      if (rms) out.push_back(C::small);
      break;
    case Classes::bwd:
      out = {C::normal, C::uniform, C::offset, C::constant, C::tiny, C::huge, C::subnormal, C::sparse, C::exact_stats, C::bits};
      if (rms) out.push_back(C::small);
      break;
    case Classes::tame:
      out = {C::normal, C::uniform, C::offset, C::constant, C::tiny, C::huge, C::subnormal, C::sparse};
      out.push_back(rms ? C::small : C::exact_stats);
      break;
    case Classes::all:
    case Classes::finite:
      out = {C::normal, C::uniform, C::offset, C::constant, C::tiny, C::huge, C::subnormal, C::sparse};
      if (!rms) out.push_back(C::exact_stats);
      out.push_back(C::bits);
      if (k == Classes::all) out.push_back(C::nonfinite);
      if (rms) out.push_back(C::small);
      break;
  }
  if (plus_nonfinite) out.push_back(C::nonfinite);
  return out;
}

// A row's Profile beyond its classes: generators.hpp's defaults unless the row says otherwise.
struct Draws {
  int max_rows = 48;
  std::int64_t max_elements = 1 << 17;
  bool allow_affine = true, allow_eps_zero = true, eps_zero_only = false, params = false, dy_range_edges = true;
  bool plus_nonfinite = false;  // nonfinite rows after the resolved classes
};
// The backward's cases reach 160 rows (more than two of the kernels' 64-row reduction blocks, so a dropped block
// shows) with at most 2^12 elements: the exact dx costs a 160-bit evaluation per element and dgamma a 192-bit sum per
// column (2^14 made the quick suite 4x slower: 63 s per kernel on the 2-core machine).
Draws bwd(Draws d = {}, int max_rows = 160) {
  d.max_rows = max_rows;
  d.max_elements = 1 << 12;
  return d;
}

struct PropertyRow {
  Property id;
  Scope scope;
  CheckFn check;
  Classes classes;
  std::vector<RowClass> listed;
  Draws draws;
  std::string_view summary;
  std::string_view rms_summary = {};  // RMSNorm's words where they differ
};

const std::vector<PropertyRow>& table() {
  using P = Property;
  using K = Classes;
  static const std::vector<PropertyRow> rows = {
      // The forward: the norm's laws, then Add & Norm's own (the norm's laws run through the harness's exact split
      // of each value for Add & Norm too).
      {P::shape, kFwd, &check_shape, K::all, {}, {}, "y has x's shape; every output written, nothing outside it; inputs untouched"},
      {P::normalized, kLnFwd, &check_normalized, K::finite, {}, {.allow_affine = false},
       "gamma = 1, beta = 0: row mean ~ 0, row variance ~ var/(var + eps)"},
      {P::normalized, kRmsFwd, &check_normalized_rms, K::finite, {}, {.allow_affine = false},
       "gamma = 1, beta = 0: mean of y^2 ~ ms/(ms + eps), ms = mean(x^2)"},
      {P::accuracy, kFwd, &check_accuracy, K::all, {}, {}, "y within a + b*kappa scaled ulps; mean and rstd within budget",
       "y within its budget (scaled ulps); rstd within budget"},
      // eps_edges derives the eps = 0 variant of every case itself.
      {P::eps_edges, kLnFwd, &check_eps_edges, K::listed, {C::constant, C::tiny, C::normal, C::exact_stats}, {.allow_eps_zero = false},
       "constant row -> beta; var << eps; eps = 0 constant -> NaN; width 1 -> beta"},
      {P::eps_edges, kRmsFwd, &check_eps_edges_rms, K::listed, {C::constant, C::tiny, C::normal, C::sparse, C::small},
       {.allow_eps_zero = false}, "zero row -> 0 (eps > 0) or NaN (eps = 0); var << eps and width-1 rows within budget"},
      {P::row_independence, kFwd, &check_row_independence, K::all, {}, {},
       "a row's output is bitwise the same alone, in any batch, at any position"},
      {P::batch_invariance, kFwd, &check_batch_invariance, K::all, {}, {.max_rows = 3},
       "a row's output is bitwise the same in batches of 1, 7, 255, 256, 300, 1024, 4097 rows, on 1 and 2 threads"},
      {P::quantized, kFwd, &check_quantized, K::all, {}, {.max_rows = 8},
       "q = Q(y/s) (every format x tensor, row, group:G (f32 or UE8M0), mx (each rule), nvfp4 where it takes it) within "
       "0.5 quantum + y's error, scales within budget, amax at +-max (mx floor: in the top binade; nvfp4: under a normal "
       "E4M3 block scale); and bit for bit the contract applied to the y the kernel hands its quantizer, on cases dense "
       "in ties, scale roundings and exponent breakpoints"},
      {P::determinism, kFwd, &check_determinism, K::all, {}, {.max_rows = 64}, "bitwise identical over repeated runs and 1, 2, 3, 8 threads"},
      {P::affine_identity, kFwd, &check_affine_identity, K::all, {}, {.allow_affine = false},
       "gamma = 1, beta = 0 given equals no affine, bitwise"},
      // Rows that a shift and scale keep meaningful: constant rows have no LN with eps = 0, tiny rows are about
      // eps, and range-edge rows overflow or underflow under a·x + c.
      {P::invariance, kLnFwd, &check_invariance, K::listed, {C::normal, C::uniform, C::offset, C::sparse, C::exact_stats},
       {.allow_affine = false, .eps_zero_only = true}, "LN(a*x + c) ~ LN(x) for a > 0, eps = 0, within the budget's kappa term"},
      // Rows a scaling by 2^±9 keeps in range (not huge, not subnormal; constant rows that leave it are skipped by
      // the check).
      {P::scale_invariance, kRmsFwd, &check_scale_invariance, K::listed, {C::normal, C::uniform, C::offset, C::sparse, C::constant},
       {.allow_affine = false, .eps_zero_only = true}, "RMS(a*x) ~ RMS(x) for any a != 0 that keeps x in range, eps = 0"},
      {P::oddness, kRmsFwd, &check_oddness, K::all, {}, {},
       "RMS(-x) = -RMS(x): bitwise for a sign-symmetric kernel (budgets.toml), else within budget"},
      {P::permutation, kFwd, &check_permutation, K::all, {}, {}, "permuting a row permutes its output, within budget"},
      {P::nonfinite, kLnFwd, &check_nonfinite, K::listed,
       {C::nonfinite, C::normal, C::nonfinite, C::offset, C::nonfinite, C::constant, C::exact_stats}, {},
       "NaN/Inf makes its row NaN (y, mean, rstd) and no other row changes"},
      {P::nonfinite, kRmsFwd, &check_nonfinite, K::listed,
       {C::nonfinite, C::normal, C::nonfinite, C::offset, C::nonfinite, C::constant, C::sparse}, {},
       "NaN/Inf makes its row NaN (y, rstd) and no other row changes"},
      {P::params, kFwd, &check_params, K::tame, {}, {.params = true},
       "f32 gamma/beta with 16-bit x and y = (C + gamma)*...: within budget; the same values stored in f32, "
       "or C folded into gamma, give the same bits"},
      {P::add_rounding, kAdd, &check_add_rounding, K::add, {}, {.plus_nonfinite = true},
       "h = x + residual rounded once, bitwise (cancelling, tie and overflowing sums; f32 residual); y, stats of h within budget"},
      {P::add_h_then_norm, kAdd, &check_add_h_then_norm, K::add, {}, {},
       "y, mean, rstd bitwise the plain norm's of h as stored (h rounded before the statistics)"},
      {P::add_commutes, kAdd, &check_add_commutes, K::add, {}, {.plus_nonfinite = true}, "x and residual swapped: the same bits (h, y, mean, rstd)"},
      {P::add_residual_zero, kAdd, &check_add_residual_zero, K::add, {}, {}, "residual = +-0: the plain norm's answer for x"},
      // The backward (dx, dgamma, dbeta): both norms draw the same inputs, RMSNorm its small rows besides.
      {P::shape, kBwd, &check_bwd_shape, K::bwd, {}, bwd({.plus_nonfinite = true}),
       "dx has x's shape, dgamma/dbeta gamma's; every output written, nothing outside; inputs untouched"},
      {P::accuracy, kBwd, &check_bwd_accuracy, K::bwd, {}, bwd(),
       "dx and dgamma within a + b*kappa scaled ulps (dx: its row's kappa, dgamma: its column's largest), dbeta within its budget"},
      {P::row_independence, kBwd, &check_bwd_row_independence, K::bwd, {}, bwd({}, 48),
       "a row's dx is bitwise the same alone, in any batch, at any position"},
      {P::determinism, kBwd, &check_bwd_determinism, K::bwd, {}, bwd({.plus_nonfinite = true}),
       "dx, dgamma, dbeta bitwise identical over repeated runs and 1, 2, 3, 8 threads"},
      {P::nonfinite, kBwd, &check_bwd_nonfinite, K::listed, {C::nonfinite, C::normal, C::offset}, bwd(),
       "NaN/Inf in x makes its dx row and every dgamma NaN; in dy, its dx row and its column's dgamma/dbeta; nothing else"},
      {P::params, kBwd, &check_bwd_accuracy, K::bwd, {}, bwd({.params = true}),
       "f32 gamma with 16-bit x (dgamma/dbeta in f32) and the weight C + gamma: within budget"},
      // The mean's gradient: RMSNorm's dx does not sum to 0.
      {P::dx_sum_zero, kLnBwd, &check_dx_sum_zero, K::bwd, {}, bwd(), "sum_i dx_i = 0 (any eps), within the sum of dx's budgets"},
      // eps = 0: rows with a spread (a constant row has no xhat; tiny rows are about eps).
      {P::dx_orthogonal, kBwd, &check_dx_orthogonal, K::listed,
       {C::normal, C::uniform, C::offset, C::sparse, C::exact_stats, C::huge, C::subnormal}, bwd({.eps_zero_only = true}),
       "eps = 0: sum_i dx_i*(x_i - mean) = 0, within budget", "eps = 0: sum_i dx_i*x_i = 0, within budget"},
      // A width-1 LayerNorm row has dx = 0 (every xhat is 0); RMSNorm's does not. eps = 0 at width 1: no xhat.
      {P::width_one, kLnBwd, &check_width_one, K::bwd, {}, bwd({.allow_eps_zero = false}), "width-1 rows: dx = 0 and dgamma = 0 exactly"},
      {P::dy_zero, kBwd, &check_dy_zero, K::bwd, {}, bwd({.allow_eps_zero = false}), "dy = 0: dx = dgamma = dbeta = 0 exactly"},
      // Rows whose xhat, products and sums stay in the normal range (subnormal and range-edge rows would scale
      // inexactly inside a kernel, where the check cannot see; RMSNorm's constant rows have xhat = x·rstd as small
      // as x), and dy away from the range's edges (the kernels hand such rows to another path at a threshold).
      {P::dy_linearity, kBwd, &check_dy_linearity, K::listed, {C::normal, C::uniform, C::offset, C::sparse, C::exact_stats},
       bwd({.allow_eps_zero = false, .dy_range_edges = false}),
       "dy times +-2^k (k = -1, 0, 1): dx, dgamma, dbeta times the same, bitwise"},
  };
  return rows;
}

const PropertyRow* row_of(Property p, Op op) {
  for (const PropertyRow& r : table())
    if (r.id == p && r.scope.covers(op)) return &r;
  return nullptr;
}

}  // namespace

std::vector<Property> properties_for(Op op) {
  std::vector<Property> ps;
  for (const PropertyRow& r : table())
    if (r.scope.covers(op) && std::find(ps.begin(), ps.end(), r.id) == ps.end()) ps.push_back(r.id);
  return ps;
}

bool applies(Property p, Op op) { return row_of(p, op) != nullptr; }

PropertyDef definition(Property p, DType dtype, Op op) {
  (void)dtype;  // no property draws differently by dtype (the generators do)
  const PropertyRow* r = row_of(p, op);
  if (!r) return {p, Profile{}, nullptr};
  Profile prof;
  prof.classes = resolve(r->classes, op, r->listed, r->draws.plus_nonfinite);
  prof.max_rows = r->draws.max_rows;
  prof.max_elements = r->draws.max_elements;
  prof.allow_affine = r->draws.allow_affine;
  prof.allow_eps_zero = r->draws.allow_eps_zero;
  prof.eps_zero_only = r->draws.eps_zero_only;
  prof.params = r->draws.params;
  prof.dy_range_edges = r->draws.dy_range_edges;
  return {p, prof, r->check};
}

std::string_view summary(Property p, Op op) {
  const PropertyRow* r = row_of(p, op);
  if (!r) return "?";
  return op.norm == Norm::rmsnorm && !r->rms_summary.empty() ? r->rms_summary : r->summary;
}

}  // namespace lnorm::verify
