// The points a precision report measures: one Case per point, per op and dtype. Each sweep varies
// one condition and holds the rest. LayerNorm: kappa (offset rows), row width, eps/var, the verify
// suite's input classes. RMSNorm has no kappa (nothing cancels: mean(x²) is a sum of non-negative
// terms), so its sweeps are what does decide its accuracy: row width, eps/mean(x²), the row's
// magnitude (x² overflows or underflows the working format long before x does) and the input classes.
// Sizes are chosen so the quick report runs in minutes on two cores (see sweeps.cpp).
#pragma once

#include <string>
#include <vector>

#include "lnorm/cases.hpp"

namespace lnorm::report {

// What a point's position on the plot's x axis is, measured from its data (the nominal value is
// only what the sweep aimed at).
enum class XAxis { nominal, kappa, eps_over_var, eps_over_ms, rms };

struct SweepPoint {
  std::string sweep;  // a SweepInfo name: "kappa", ..., "rmsnorm_magnitude"
  int index = 0;      // position within its sweep
  std::string label;  // "kappa≈1e4", "n=4096", "eps/var≈1e-2", "subnormal rows", "rms≈1e-30"
  double nominal = 0; // the value the sweep aimed at
  XAxis x_axis = XAxis::nominal;
  verify::Case input;
};

struct SweepInfo {
  std::string name, title, x_axis;
  bool log_x = true;
  Op op = Op::layernorm;
};
// Every op's sweeps, LayerNorm's first; names are unique across ops.
std::vector<SweepInfo> sweep_infos();

std::vector<SweepPoint> sweep_points(Op op, DType d, bool quick, std::uint64_t seed);

}  // namespace lnorm::report
