// quant_exact.hpp's definition (what it decides and how is documented there).
#include "quant_exact.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "exact_decision.hpp"
#include "lnorm/half.hpp"
#include "lnorm/quant.hpp"

namespace lnorm::cpu {
namespace {

class Decider {
 public:
  explicit Decider(const ExactQuantRow& r) : r_(r) {}

  // The bound on |y_i − y*_i|, widened past its own rounding (a few f64 operations: 2^-50 is ample).
  double err(std::int64_t i) const { return (r_.e_abs + r_.e_rel * std::fabs(r_.y[i])) * (1 + 0x1p-50) + 0x1p-1074; }

  // sign(y*_i − m), exactly.
  int compare(std::int64_t i, double m) {
    if (!row_) row_ = exact::row(r_.x, r_.x_dtype, r_.n, r_.eps, r_.centred);
    return exact::compare_element(row_, x_at(i), r_.w_hi ? r_.w_hi[i] : 1.0, r_.w_lo ? r_.w_lo[i] : 0.0,
                                  r_.beta ? r_.beta[i] : 0.0, m);
  }

  // sign(amax* − T) over elements [b, e), T ≥ 0: the bound settles most elements, the rest exactly.
  int compare_amax(std::int64_t b, std::int64_t e, double T) {
    int result = -1;
    for (std::int64_t i = b; i < e; ++i) {
      const double a = std::fabs(r_.y[i]), d = err(i);
      if (a - d > T) return 1;
      if (a + d < T) continue;
      const int c = compare_abs(i, T);
      if (c > 0) return 1;
      if (c == 0) result = 0;
    }
    return result;
  }

 private:
  // sign(|y*_i| − T), T ≥ 0.
  int compare_abs(std::int64_t i, double T) {
    const int up = compare(i, T);  // y* − T
    if (up >= 0) return up;
    if (T == 0) return 1;          // y* < 0
    const int down = compare(i, -T);  // y* + T
    return down <= 0 ? -down : -1;  // y* ≤ −T: |y*| − T = −(y* + T); else |y*| < T
  }

  double x_at(std::int64_t i) const {
    if (r_.x_dtype == DType::f32) {
      float v;
      std::memcpy(&v, static_cast<const char*>(r_.x) + 4 * i, 4);
      return v;
    }
    std::uint16_t h;
    std::memcpy(&h, static_cast<const char*>(r_.x) + 2 * i, 2);
    if (r_.x_dtype == DType::bf16) return std::bit_cast<float>(std::uint32_t{h} << 16);
    return to_float(f16{h});
  }

  const ExactQuantRow& r_;
  const exact::Row* row_ = nullptr;  // the row's exact sums, on first need
};

bool even_f32(float v) { return (std::bit_cast<std::uint32_t>(v) & 1u) == 0; }

// s* = f32(amax*/qmax) of elements [b, e): the candidate moved while amax* lies past a midpoint to a neighbour.
float exact_scale(Decider& d, const ExactQuantRow& r, std::int64_t b, std::int64_t e, double qm) {
  double amax = 0;
  for (std::int64_t i = b; i < e; ++i) amax = std::fmax(amax, std::fabs(r.y[i]));
  float c = static_cast<float>(amax / qm);
  if (!std::isfinite(c)) c = std::numeric_limits<float>::max();
  for (;;) {
    const float up = std::nextafter(c, std::numeric_limits<float>::infinity());
    if (std::isfinite(up)) {
      // Midpoints of adjacent f32 have 25 bits, qmax ≤ 7: their product is exact.
      const int k = d.compare_amax(b, e, 0.5 * (static_cast<double>(c) + up) * qm);
      if (k > 0 || (k == 0 && even_f32(up))) {
        c = up;
        continue;
      }
    }
    if (c > 0) {
      const float dn = std::nextafter(c, 0.0f);
      const int k = d.compare_amax(b, e, 0.5 * (static_cast<double>(c) + dn) * qm);
      if (k < 0 || (k == 0 && even_f32(dn))) {
        c = dn;
        continue;
      }
    }
    return c == 0 ? 1.0f : c;  // amax* = 0, or amax*/qmax below f32's range: 1 (lnorm/quant.hpp)
  }
}

// X = floor(log2 amax*) − emax_elem, clamped to [−127, 127] (−127 for amax* = 0).
int exact_mx_exponent(Decider& d, const ExactQuantRow& r, std::int64_t b, std::int64_t e, int emax) {
  double amax = 0;
  for (std::int64_t i = b; i < e; ++i) amax = std::fmax(amax, std::fabs(r.y[i]));
  const int lo = -127 + emax, hi = 127 + emax;  // floor(log2) outside [lo, hi] clamps
  int k = amax > 0 && std::isfinite(amax) ? std::clamp(std::ilogb(amax), lo, hi) : lo;
  for (;;) {
    if (k < hi && d.compare_amax(b, e, std::ldexp(1.0, k + 1)) >= 0) {
      ++k;
      continue;
    }
    if (k > lo && d.compare_amax(b, e, std::ldexp(1.0, k)) < 0) {
      --k;
      continue;
    }
    return k - emax;
  }
}

// Q(y*_i / s) exactly.
std::uint8_t exact_code(Decider& d, const ExactQuantRow& r, std::int64_t i, QuantFormat f, float s) {
  const double sd = s, t = r.y[i] / sd;
  const double e = d.err(i) / sd * (1 + 0x1p-50) + std::fabs(t) * 0x1p-52;
  const std::uint8_t lo = encode(f, t - e), hi = encode(f, t + e);
  if (lo == hi) return lo;
  const std::int64_t k_lo = ordinal_of_code(f, lo), k_hi = ordinal_of_code(f, hi);
  std::int64_t k = k_hi;
  for (std::int64_t j = k_lo; j < k_hi; ++j) {
    // The midpoint of ordinals j and j + 1, times s: ≤ 9 significant bits times an f32, exact.
    const int c = d.compare(i, 0.5 * (value_of_ordinal(f, j) + value_of_ordinal(f, j + 1)) * sd);
    if (c < 0 || (c == 0 && (j & 1) == 0)) {
      k = j;
      break;
    }
    if (c == 0) {
      k = j + 1;
      break;
    }
  }
  return code_of_ordinal(f, k, k == 0 && is_fp8(f) && d.compare(i, 0.0) < 0);
}

}  // namespace

void quantize_row_exact(const QuantSpec& spec, const ExactQuantRow& r, std::uint8_t* q, void* scales, std::int64_t row) {
  Decider d(r);
  const QuantFormat f = spec.format;
  const std::int64_t G = spec.group_size(r.n), per_row = spec.scales_per_row(r.n);
  for (std::int64_t g = 0; g < r.n / G; ++g) {
    const std::int64_t b = g * G, e = b + G, at = row * per_row + g;
    float s = spec.scale;
    if (spec.scaling == Scaling::mx) {
      const int x = exact_mx_exponent(d, r, b, e, emax_elem(f));
      static_cast<std::uint8_t*>(scales)[at] = static_cast<std::uint8_t>(x + 127);
      s = static_cast<float>(std::ldexp(1.0, x));  // 2^-127 is an f32 subnormal: exact
    } else if (spec.scaling != Scaling::tensor) {
      s = exact_scale(d, r, b, e, qmax(f));
      static_cast<float*>(scales)[at] = s;
    }
    for (std::int64_t i = b; i < e; ++i) q[i] = exact_code(d, r, i, f, s);
  }
}

}  // namespace lnorm::cpu
