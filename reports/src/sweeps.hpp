// The points a precision report measures: one Case per point, per dtype. Each sweep varies one
// condition and holds the rest: kappa (offset rows), row width, eps/var, and the verify suite's
// input classes. Sizes are chosen so the quick report runs in minutes on two cores (see sweeps.cpp).
#pragma once

#include <string>
#include <vector>

#include "lnorm/cases.hpp"

namespace lnorm::report {

struct SweepPoint {
  std::string sweep;  // "kappa", "width", "eps_over_var", "class"
  int index = 0;      // position within its sweep
  std::string label;  // "kappa≈1e4", "n=4096", "eps/var≈1e-2", "subnormal"
  double nominal = 0; // the value the sweep aimed at (the measured one comes from the reference)
  verify::Case input;
};

struct SweepInfo {
  std::string name, title, x_axis;
  bool log_x = true;
};
std::vector<SweepInfo> sweep_infos();

std::vector<SweepPoint> sweep_points(DType d, bool quick, std::uint64_t seed);

}  // namespace lnorm::report
