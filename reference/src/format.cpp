#include "lnorm/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace lnorm {

Format format_of(DType d) {
  switch (d) {
    case DType::f32: return {d, 24, -126, 127, 32};
    case DType::f64: return {d, 53, -1022, 1023, 64};
    case DType::f16: return {d, 11, -14, 15, 16};
    case DType::bf16: return {d, 8, -126, 127, 16};
  }
  return {d, 24, -126, 127, 32};
}

double Format::unit_roundoff() const { return std::ldexp(1.0, -precision); }

double ulp_at(const Format& f, double s) {
  const double a = std::fabs(s);
  const int e = (a == 0 || !std::isfinite(a)) ? f.emin : std::max(std::ilogb(a), f.emin);
  return std::ldexp(1.0, e - f.precision + 1);
}

std::uint64_t bits_at(DType d, const void* p, std::int64_t i) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(p) + static_cast<std::size_t>(i) * size_of(d), size_of(d));
  return bits;
}
double value_at(DType d, const void* p, std::int64_t i) { return bits_to_double(format_of(d), bits_at(d, p, i)); }
void set_bits_at(DType d, void* p, std::int64_t i, std::uint64_t bits) {
  std::memcpy(static_cast<char*>(p) + static_cast<std::size_t>(i) * size_of(d), &bits, size_of(d));
}

}  // namespace lnorm
