// Cases dense in a quantizer's decisions: see quant_decisions.hpp.
#include "quant_decisions.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "lnorm/format.hpp"

namespace lnorm::verify {
namespace {

constexpr std::int64_t kRows = 4, kCols = 256;
// eps, in one case of two: y* = gamma·(1 − 2^-54 + ...), within 2^-54 of gamma where an f32 ulp is at least 2^-24 of
// it (so every accurate f32 y is gamma) and where f64 rounds 1 + eps to 1 (so a kernel's f64 y is gamma too: only an
// exact decision sees y* below the tie). One case in four has 2^-40 (BERT's 1e-12 order), one in four 0 (y* = gamma).
constexpr double kTinyEps = 0x1p-53, kSmallEps = 0x1p-40;

struct Layout {
  std::mt19937_64& rng;
  QuantFormat f;
  Format params;
  double rp(double v) const { return round_to_format(params, v); }
  double sign() { return (rng() & 1) ? -1.0 : 1.0; }
  // A grid point's magnitude for an element: a midpoint between adjacent codes (three in four) or a code, up to `top`
  // (the ordinals' values increase with k).
  double grid_point(double top) {
    std::int64_t hi = max_ordinal(f);
    while (hi > 1 && value_of_ordinal(f, hi) > top) --hi;
    const std::int64_t k = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi));
    if (rng() % 4 != 0) return (value_of_ordinal(f, k) + value_of_ordinal(f, k + 1)) / 2;
    return value_of_ordinal(f, k + 1);
  }
  // v·s rounded to the params dtype (exact in double: v has at most 9 significant bits, s 24).
  double at(double v, double s) { return rp(sign() * v * s); }
  // A random params value with magnitude in [2^k, 2^(k+1)).
  double random_magnitude(int k) {
    std::uniform_real_distribution<double> u(1.0, 2.0);
    return std::fmin(rp(std::ldexp(u(rng), k)), std::ldexp(2.0 - std::ldexp(1.0, 1 - params.precision), k));
  }
};

// A scale exponent k for the format: qmax·2^k between 2^3 and 2^10, so that every element (down to a subnormal
// code's midpoint times 2^k) and every y stays inside f16's and bf16's range (e5m2's smallest midpoints flush in f16).
int draw_k(std::mt19937_64& rng, QuantFormat f) {
  const int hi = 10 - (std::ilogb(qmax(f)) + 1);
  return hi - static_cast<int>(rng() % 8);
}

// The scale the contract gives a group of amax (row, group: f32(amax/qmax); mx: 2^(floor(log2 amax) − emax); nvfp4:
// f32(E4M3value(c)/G), c = E4M3(amax·G/6), 1 where c is 0: no scale, the group's q all ±0 whatever its elements).
double scale_for(const QuantSpec& spec, double amax) {
  if (spec.scaling == Scaling::nvfp4) {
    const float s = nvfp4_element_scale(encode(QuantFormat::fp8_e4m3, amax * spec.global_scale / 6), spec.global_scale);
    return std::isfinite(s) ? s : 1.0;
  }
  if (spec.pow2_scales()) return std::ldexp(1.0, mx_exponent(spec, amax));
  return static_cast<double>(static_cast<float>(amax / qmax(spec.format)));
}

// One group's gamma (G values at g) for row, group or mx scaling.
void lay_group(Layout& l, const QuantSpec& spec, double* g, std::int64_t G) {
  const double Q = qmax(spec.format);
  const bool groups = spec.scaling == Scaling::group || spec.scaling == Scaling::mx || spec.scaling == Scaling::nvfp4;
  const unsigned kind = static_cast<unsigned>(l.rng() % 20);
  if (groups && kind >= 18) {  // a zero group (±0), or (one in two of those) a NaN group
    for (std::int64_t i = 0; i < G; ++i) g[i] = l.sign() * 0.0;
    if (kind == 19) {
      for (std::int64_t i = 0; i < G; ++i) g[i] = l.at(l.grid_point(Q), 1.0);
      g[l.rng() % static_cast<std::uint64_t>(G)] = std::numeric_limits<double>::quiet_NaN();
    }
    return;
  }
  const int k = draw_k(l.rng, spec.format), top_exponent = std::ilogb(Q) + k;
  double amax, s;
  // A rule other than floor is decided at its breakpoints: most groups there (kinds 5-17), fewer on the anchor.
  const bool breakpoints = spec.pow2_scales() && spec.exponent_rule() != MxRule::floor;
  if (kind < (breakpoints ? 3 : 7)) {  // a power-of-two scale: the anchor at qmax·2^k (mx: 2^(floor(log2 qmax) − emax) = 1, times 2^k)
    amax = Q * std::ldexp(1.0, k);
  } else if (kind < (breakpoints ? 5 : 12)) {  // a rounded scale from a random amax
    amax = l.random_magnitude(top_exponent);
  } else if (breakpoints) {
    // amax on a breakpoint of the rule (a few bits: exact in params; rceil's at qmax·2^k), or one params ulp to the
    // side where a rounding of amax would carry it across (below for ≥, above for the strict rules)
    const double B = mx_breakpoint(spec, spec.exponent_rule() == MxRule::rceil ? k + 1 : top_exponent);
    const double ulp = std::ldexp(1.0, std::ilogb(B) - (l.params.precision - 1));
    amax = kind >= 16 ? B : info(spec.exponent_rule()).strict ? B + ulp : B - ulp;
  } else {  // amax just below a power of two
    amax = std::ldexp(2.0 - std::ldexp(1.0, 1 - l.params.precision), top_exponent);
  }
  amax = l.rp(amax);
  s = scale_for(spec, amax);
  const double top = std::fmin(Q, amax / s) * 0.999;  // elements stay below the anchor
  for (std::int64_t i = 0; i < G; ++i) g[i] = l.at(l.grid_point(top), s);
  g[l.rng() % static_cast<std::uint64_t>(G)] = l.sign() * amax;
}

}  // namespace

DecisionCase decision_case(const Case& from, const QuantSpec& spec, int salt) {
  std::mt19937_64 rng(from.spec.data_seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(salt) * 7919u + 0x5eedu);
  DecisionCase out;
  CaseSpec& cs = out.c.spec;
  cs = from.spec;
  cs.row_classes = {RowClass::exact_stats};
  cs.shape = {kRows, kCols};
  cs.axis = 1;
  const unsigned e = static_cast<unsigned>(rng() % 4);
  cs.eps = e == 0 ? 0.0 : e == 1 ? kSmallEps : kTinyEps;
  cs.gamma = Affine::random;
  cs.beta = Affine::absent;
  cs.gamma_offset = 0;
  cs.log10_kappa = 0;
  Case& c = out.c;
  c.x.assign(static_cast<std::size_t>(kRows * kCols), 1.0);
  for (std::int64_t r = 0; r < kRows; ++r) {  // half of each sign, in a random order
    double* row = c.x.data() + r * kCols;
    std::fill(row, row + kCols / 2, -1.0);
    std::shuffle(row, row + kCols, rng);
  }
  c.residual.clear();
  c.beta.clear();
  c.dy.clear();
  c.gamma.assign(static_cast<std::size_t>(kCols), 0.0);
  Layout l{rng, spec.format, format_of(cs.params())};
  out.spec = spec;
  if (spec.scaling == Scaling::tensor) {
    const int k = draw_k(rng, spec.format);
    const double s = (rng() & 1) ? std::ldexp(1.0, k) : static_cast<double>(static_cast<float>(l.random_magnitude(k)));
    out.spec.scale = static_cast<float>(s);
    const double Q = qmax(spec.format);
    for (std::int64_t i = 0; i < kCols; ++i) {
      const unsigned pick = static_cast<unsigned>(rng() % 16);
      double v = l.grid_point(Q);
      if (pick == 0) v = Q + quantum_at(spec.format, Q) / 2;  // the tie past the largest code: saturates
      if (pick == 1) v = Q * 1.5;
      c.gamma[static_cast<std::size_t>(i)] = l.at(v, s);
    }
    return out;
  }
  const std::int64_t G = spec.group_size(kCols);
  for (std::int64_t grp = 0; grp < kCols / G; ++grp) lay_group(l, spec, c.gamma.data() + grp * G, G);
  return out;
}

}  // namespace lnorm::verify
