// NaN and +Inf as the reference's sources spell them: one definition, so that the library's sources can be compiled
// together (a unity build, CMAKE_UNITY_BUILD) without each file's own copy colliding.
#pragma once

#include <limits>

namespace lnorm::detail {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace lnorm::detail
