// Sweep sizes (RMSNorm's sweeps reuse LayerNorm's sizes). Reference cost is ~3 M elements/s per core here (`lnorm reference` on 1024x1024 f32:
// 0.34 s), kernels are faster, so a report's time is the element count × implementations. Quick: about
// 0.2 M elements per dtype and op; full: about 2 M. Measured on this 2-core machine (AVX2) with every CPU
// kernel, both ops, while another job held one core: quick 2.4 s of measuring (10 s with rendering),
// full 44 s (53 s with rendering); LayerNorm alone was 4 s / 50 s before RMSNorm's sweeps existed.
#include "sweeps.hpp"

#include <cmath>
#include <random>

#include "lnorm/format.hpp"

namespace lnorm::report {
namespace {

using verify::Affine;
using verify::Case;
using verify::CaseSpec;
using verify::RowClass;

CaseSpec base_spec(DType d, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  CaseSpec s;
  s.dtype = d;
  s.shape = {rows, cols};
  s.axis = 1;
  s.eps = make_problem(1, 1, d, 1e-5, false, false).eps;  // PyTorch's default, rounded as kernels get it
  s.gamma = Affine::absent;
  s.beta = Affine::absent;
  s.data_seed = seed;
  return s;
}

std::string power_label(const char* what, int exponent) {
  return std::string(what) + "≈1e" + std::to_string(exponent);
}

// Rows of N(0, 1) values (variance ≈ 1), so eps alone sets eps/var.
Case unit_normal_rows(CaseSpec spec) {
  Case c;
  c.spec = spec;
  const Format f = format_of(spec.dtype);
  std::mt19937_64 rng(spec.data_seed);
  std::normal_distribution<double> normal;
  c.x.resize(static_cast<std::size_t>(spec.rows() * spec.cols()));
  for (double& v : c.x) v = round_to_format(f, normal(rng));
  return c;
}

// The decimal exponents of the row magnitudes RMSNorm's magnitude sweep visits: from where the
// format's squares underflow (and its smallest values are subnormal) to where they overflow (f32's
// x² at |x| ≈ 1.8e19, f16's at 256), staying a factor ~10 inside the largest finite value so that
// N(0,1)·10^e draws (|N| < 6.5 in practice) stay finite.
std::vector<int> magnitude_exponents(DType d) {
  std::vector<int> e;
  switch (d) {
    case DType::f64: for (int k = -300; k <= 300; k += 50) e.push_back(k); break;
    case DType::f16: for (int k = -6; k <= 3; ++k) e.push_back(k); break;
    default: for (int k = -36; k <= 36; k += 6) e.push_back(k); break;  // f32, bf16
  }
  return e;
}

// The verify suite's classes at an odd width, so every row ends in a vector tail.
constexpr RowClass kClasses[] = {RowClass::normal,    RowClass::uniform,     RowClass::constant,
                                 RowClass::tiny,      RowClass::huge,        RowClass::subnormal,
                                 RowClass::sparse,    RowClass::exact_stats, RowClass::bits,
                                 RowClass::nonfinite};

// dy = N(0, 1)·scale rounded to the case's dtype (the backward's sweeps that set dy's scale themselves).
void fill_dy(Case& c, double scale, std::uint64_t seed) {
  const Format f = format_of(c.spec.dtype);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  c.dy.resize(c.x.size());
  for (double& v : c.dy) v = round_to_format(f, normal(rng) * scale);
}

// The powers of two dy's scale sweep visits: from where dy is subnormal to where |dy·w| and dx's terms near
// overflow (the range checks of the SIMD backward kernels, and where a textbook overflows).
std::vector<int> dy_scale_exponents(DType d) {
  const Format f = format_of(d);
  std::vector<int> e;
  const int lo = f.emin - 8, hi = f.emax - 6, steps = 10;
  for (int k = 0; k <= steps; ++k) e.push_back(lo + (hi - lo) * k / steps);
  return e;
}

// The backward's sweeps: the forward's conditions that matter to dx (LayerNorm: kappa, width, classes; RMSNorm:
// width, magnitude, classes) and dy's scale. gamma and beta are drawn (so dgamma and dbeta are measured), and dy
// at 2^-3..2^3 except in the dy-scale sweep (cases.hpp's range edges are that sweep's business).
template <class Spec, class Add>
void backward_points(Op op, DType d, bool quick, Spec spec, Add add) {
  const bool ln = op == Op::layernorm_bwd;
  const std::string pre = ln ? "bwd_" : "rmsnorm_bwd_";
  const auto grad_spec = [&](std::int64_t rows, std::int64_t cols) {
    CaseSpec s = spec(rows, cols);
    s.gamma = Affine::random;
    s.beta = Affine::random;
    s.dy_range_edges = false;
    return s;
  };
  if (ln) {
    const std::int64_t kappa_rows = quick ? 32 : 256, kappa_cols = quick ? 256 : 1024;
    for (int e = 0; e <= 7; ++e) {
      CaseSpec s = grad_spec(kappa_rows, kappa_cols);
      s.row_classes = {RowClass::offset};
      s.log10_kappa = e;
      add(pre + "kappa", e, power_label("kappa", e), std::pow(10.0, e), XAxis::kappa, verify::materialize(s));
    }
  }
  const std::int64_t width_elements = quick ? (1 << 15) : (1 << 19);
  int index = 0;
  for (std::int64_t n = 16; n <= 65536; n *= 4, ++index) {
    CaseSpec s = grad_spec(std::max<std::int64_t>(2, width_elements / n), n);
    s.row_classes = {RowClass::normal};
    add(pre + "width", index, "n=" + std::to_string(n), static_cast<double>(n), XAxis::nominal, verify::materialize(s));
  }
  const std::int64_t rows = quick ? 16 : 128, cols = quick ? 256 : 1024;
  if (!ln) {
    index = 0;
    for (int e : magnitude_exponents(d)) {
      CaseSpec s = grad_spec(rows, cols);
      s.row_classes = {RowClass::normal};
      s.eps = 0;
      Case c = verify::materialize(s);  // gamma and beta; x and dy are set below
      c.x = unit_normal_rows(s).x;
      const Format f = format_of(d);
      const double scale = std::pow(10.0, e);
      for (double& v : c.x) v = round_to_format(f, v * scale);
      fill_dy(c, 1.0, s.data_seed ^ 0xD7u);
      add(pre + "magnitude", index++, power_label("rms", e), scale, XAxis::rms, std::move(c));
    }
  }
  index = 0;
  for (int e : dy_scale_exponents(d)) {
    CaseSpec s = grad_spec(rows, cols);
    s.row_classes = {RowClass::normal};
    Case c = verify::materialize(s);  // gamma and beta; x and dy are set below
    c.x = unit_normal_rows(s).x;
    fill_dy(c, std::ldexp(1.0, e), s.data_seed ^ 0xD7u);
    add(pre + "dy_scale", index++, "dy≈2^" + std::to_string(e), std::ldexp(1.0, e), XAxis::nominal, std::move(c));
  }
  const std::int64_t class_rows = quick ? 16 : 128, class_cols = quick ? 255 : 1023;
  index = 0;
  for (RowClass rc : kClasses) {
    CaseSpec s = grad_spec(class_rows, class_cols);
    s.row_classes = {rc};
    add(pre + "class", index++, std::string(verify::name(rc)) + " rows", std::nan(""), XAxis::nominal, verify::materialize(s));
  }
}

}  // namespace

std::vector<SweepInfo> sweep_infos() {
  return {
      {"kappa", "Error against conditioning (offset rows)", "kappa = |mean| / sqrt(var + eps)", true, Op::layernorm},
      {"width", "Error against row width (N(0,1)·2^k rows)", "row width n", true, Op::layernorm},
      {"eps_over_var", "Error against eps / var (N(0,1) rows)", "eps / var", true, Op::layernorm},
      {"class", "Error per input class (the verify suite's rows, odd width)", "input class", false, Op::layernorm},
      {"rmsnorm_width", "RMSNorm: error against row width (N(0,1)·2^k rows)", "row width n", true, Op::rmsnorm},
      {"rmsnorm_eps_over_ms", "RMSNorm: error against eps / mean(x²) (N(0,1) rows)", "eps / mean(x²)", true,
       Op::rmsnorm},
      {"rmsnorm_magnitude", "RMSNorm: error against the row's magnitude (N(0,1)·10^k rows, eps = 0)",
       "row rms = sqrt(mean(x²))", true, Op::rmsnorm},
      {"rmsnorm_class", "RMSNorm: error per input class (the verify suite's rows, odd width)", "input class", false,
       Op::rmsnorm},
      {"bwd_kappa", "LayerNorm backward: dx's error against conditioning (offset rows)", "kappa = |mean| / sqrt(var + eps)", true,
       Op::layernorm_bwd},
      {"bwd_width", "LayerNorm backward: dx's error against row width (N(0,1)·2^k rows)", "row width n", true, Op::layernorm_bwd},
      {"bwd_dy_scale", "LayerNorm backward: dx's error against dy's scale (N(0,1) rows, dy = N(0,1)·2^k)", "dy's scale 2^k", true,
       Op::layernorm_bwd},
      {"bwd_class", "LayerNorm backward: dx's error per input class (the verify suite's rows, odd width)", "input class", false,
       Op::layernorm_bwd},
      {"rmsnorm_bwd_width", "RMSNorm backward: dx's error against row width (N(0,1)·2^k rows)", "row width n", true,
       Op::rmsnorm_bwd},
      {"rmsnorm_bwd_magnitude", "RMSNorm backward: dx's error against the row's magnitude (N(0,1)·10^k rows, eps = 0)",
       "row rms = sqrt(mean(x²))", true, Op::rmsnorm_bwd},
      {"rmsnorm_bwd_dy_scale", "RMSNorm backward: dx's error against dy's scale (N(0,1) rows, dy = N(0,1)·2^k)", "dy's scale 2^k",
       true, Op::rmsnorm_bwd},
      {"rmsnorm_bwd_class", "RMSNorm backward: dx's error per input class (the verify suite's rows, odd width)", "input class",
       false, Op::rmsnorm_bwd},
  };
}

std::vector<SweepPoint> sweep_points(Op op, DType d, bool quick, std::uint64_t seed) {
  std::vector<SweepPoint> points;
  // LayerNorm's seeds are those of the reports before ops existed, so its numbers are unchanged.
  std::uint64_t point_seed = seed * 1000003 + static_cast<std::uint64_t>(d) * 7919 +
                             static_cast<std::uint64_t>(code(op)) * 0x9e3779b97f4a7c15ull;
  const auto add = [&](std::string sweep, int index, std::string label, double nominal, XAxis x, Case c) {
    points.push_back({std::move(sweep), index, std::move(label), nominal, x, std::move(c)});
  };
  const auto spec = [&](std::int64_t rows, std::int64_t cols) {
    CaseSpec s = base_spec(d, rows, cols, ++point_seed);
    s.op = op;
    return s;
  };
  if (op.direction == Direction::bwd) {
    backward_points(op, d, quick, spec, add);
    return points;
  }
  if (op == Op::rmsnorm) {
    // The same widths, eps ratios and classes as LayerNorm's (the sizes below say why), plus the
    // magnitude sweep; offset rows join the classes (a large mean is just a large row to RMSNorm).
    const std::int64_t width_elements = quick ? (1 << 15) : (1 << 19);
    int index = 0;
    for (std::int64_t n = 16; n <= 65536; n *= 4, ++index) {
      CaseSpec s = spec(std::max<std::int64_t>(2, width_elements / n), n);
      s.row_classes = {RowClass::normal};
      add("rmsnorm_width", index, "n=" + std::to_string(n), static_cast<double>(n), XAxis::nominal,
          verify::materialize(s));
    }
    const std::int64_t eps_rows = quick ? 16 : 128, eps_cols = quick ? 256 : 1024;
    index = 0;
    for (int e = -8; e <= 4; e += 2, ++index) {
      CaseSpec s = spec(eps_rows, eps_cols);
      s.row_classes = {RowClass::normal};
      s.eps = make_problem(1, 1, d, std::pow(10.0, e), false, false).eps;
      add("rmsnorm_eps_over_ms", index, power_label("eps/ms", e), std::pow(10.0, e), XAxis::eps_over_ms,
          unit_normal_rows(s));
    }
    index = 0;
    for (int e : magnitude_exponents(d)) {
      CaseSpec s = spec(eps_rows, eps_cols);
      s.row_classes = {RowClass::normal};
      s.eps = 0;
      Case c = unit_normal_rows(s);
      const Format f = format_of(d);
      const double scale = std::pow(10.0, e);
      for (double& v : c.x) v = round_to_format(f, v * scale);
      add("rmsnorm_magnitude", index++, power_label("rms", e), scale, XAxis::rms, std::move(c));
    }
    const std::int64_t class_rows = quick ? 16 : 128, class_cols = quick ? 255 : 1023;
    index = 0;
    for (RowClass rc : kClasses) {
      CaseSpec s = spec(class_rows, class_cols);
      s.row_classes = {rc};
      add("rmsnorm_class", index++, std::string(verify::name(rc)) + " rows", std::nan(""), XAxis::nominal,
          verify::materialize(s));
    }
    CaseSpec s = spec(class_rows, class_cols);
    s.row_classes = {RowClass::offset};
    s.log10_kappa = 4;
    add("rmsnorm_class", index++, "offset rows", std::nan(""), XAxis::nominal, verify::materialize(s));
    return points;
  }

  // kappa 1 .. 1e7 on offset rows. f16/bf16 rows are capped where the format can still hold a
  // spread (cases.cpp), so the report plots the measured kappa, not this nominal one.
  const std::int64_t kappa_rows = quick ? 32 : 256, kappa_cols = quick ? 256 : 1024;
  for (int e = 0; e <= 7; ++e) {
    CaseSpec s = base_spec(d, kappa_rows, kappa_cols, ++point_seed);
    s.row_classes = {RowClass::offset};
    s.log10_kappa = e;
    add("kappa", e, power_label("kappa", e), std::pow(10.0, e), XAxis::kappa, verify::materialize(s));
  }

  // Widths 16 .. 65536, about the same number of elements each.
  const std::int64_t width_elements = quick ? (1 << 15) : (1 << 19);
  int index = 0;
  for (std::int64_t n = 16; n <= 65536; n *= 4, ++index) {
    CaseSpec s = base_spec(d, std::max<std::int64_t>(2, width_elements / n), n, ++point_seed);
    s.row_classes = {RowClass::normal};
    add("width", index, "n=" + std::to_string(n), static_cast<double>(n), XAxis::nominal, verify::materialize(s));
  }

  // eps / var from 1e-8 (eps irrelevant) to 1e4 (eps dominates: y → (x − mean)/sqrt(eps)).
  const std::int64_t eps_rows = quick ? 16 : 128, eps_cols = quick ? 256 : 1024;
  index = 0;
  for (int e = -8; e <= 4; e += 2, ++index) {
    CaseSpec s = base_spec(d, eps_rows, eps_cols, ++point_seed);
    s.row_classes = {RowClass::normal};
    s.eps = make_problem(1, 1, d, std::pow(10.0, e), false, false).eps;
    add("eps_over_var", index, power_label("eps/var", e), std::pow(10.0, e), XAxis::eps_over_var, unit_normal_rows(s));
  }

  // The verify suite's classes (offset has its own sweep), at an odd width so every row ends in a
  // vector tail.
  const std::int64_t class_rows = quick ? 16 : 128, class_cols = quick ? 255 : 1023;
  index = 0;
  for (RowClass rc : kClasses) {
    CaseSpec s = base_spec(d, class_rows, class_cols, ++point_seed);
    s.row_classes = {rc};
    add("class", index++, std::string(verify::name(rc)) + " rows", std::nan(""), XAxis::nominal, verify::materialize(s));
  }
  return points;
}

}  // namespace lnorm::report
