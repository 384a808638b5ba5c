// quant_exact.hpp's definition (what it decides and how is documented there).
#include "quant_exact.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "exact_decision.hpp"
#include "quant_epilogue.hpp"
#include "lnorm/half.hpp"
#include "lnorm/quant.hpp"

namespace lnorm::cpu {
namespace {

class Decider {
 public:
  explicit Decider(const ExactQuantRow& r) : r_(r) {}

  // The bound on |y_i − y*_i|, widened past its own rounding (a few f64 operations: 2^-50 is ample).
  double err(std::int64_t i) const { return err_of(std::fabs(r_.y[i])); }
  double err_of(double a) const { return (r_.e_abs + r_.e_rel * a) * (1 + 0x1p-50) + 0x1p-1074; }
  // v's rounded sum or difference moved past its own rounding (2^-53 of it, or 2^-1075 below the normal range): a
  // bound that stays one after the addition that formed it.
  static double above(double v) { return v * (1 + 0x1p-51) + 0x1p-1074; }
  static double below(double v) { return v * (1 - 0x1p-51) - 0x1p-1074; }

  // sign(y*_i − m), exactly.
  int compare(std::int64_t i, double m) {
    if (!row_) row_ = exact::row(r_.x, r_.x_dtype, r_.n, r_.eps, r_.centred);
    return exact::compare_element(row_, x_at(i), r_.w_hi ? r_.w_hi[i] : 1.0, r_.w_lo ? r_.w_lo[i] : 0.0,
                                  r_.beta ? r_.beta[i] : 0.0, m);
  }

  // amax* over [b, e) lies in [lo, hi]; amax: the largest |y_i| (the candidate's source). The bound err grows with
  // |y| (each of its operations is monotone), so |y*_i| ≤ |y_i| + err_i ≤ amax + err(amax), and the element at amax
  // has |y*| ≥ amax − err(amax): both ends from amax alone, each rounded outward (up and down). The largest |y| is a
  // max, exact in any order: the ISA kernel's lanes (ExactQuantRow::max_abs) or four scalar chains (one chain of
  // maxsd was a third of the _cr kernels' quantized epilogue, perf annotate).
  struct AmaxBounds {
    double lo = 0, hi = 0, amax = 0;
  };
  AmaxBounds amax_bounds(std::int64_t b, std::int64_t e) const {
    double amax = 0;
    if (b == 0 && e == r_.n && r_.row_amax >= 0) {
      amax = r_.row_amax;
    } else if (r_.max_abs) {
      amax = r_.max_abs(r_.y + b, e - b);
    } else {
      double m[4] = {0, 0, 0, 0};
      std::int64_t i = b;
      for (; i + 4 <= e; i += 4)
        for (int j = 0; j < 4; ++j) {
          const double a = std::fabs(r_.y[i + j]);  // (not fmax: a libm call)
          m[j] = a > m[j] ? a : m[j];
        }
      for (; i < e; ++i) m[0] = std::fabs(r_.y[i]) > m[0] ? std::fabs(r_.y[i]) : m[0];
      amax = std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
    }
    const double d = err_of(amax);
    return {below(amax - d), above(amax + d), amax};
  }

  // sign(amax* − T) over elements [b, e), T ≥ 0: the group's bounds settle most thresholds at once, the bound of
  // each element most of the rest, and the elements within their bound of T exactly.
  int compare_amax(std::int64_t b, std::int64_t e, double T, const AmaxBounds& m) {
    if (m.lo > T) return 1;
    if (m.hi < T) return -1;
    int result = -1;
    for (std::int64_t i = b; i < e; ++i) {
      const double a = std::fabs(r_.y[i]), d = err(i);
      if (below(a - d) > T) return 1;
      if (above(a + d) < T) continue;
      const int c = compare_abs(i, T);
      if (c > 0) return 1;
      if (c == 0) result = 0;
    }
    return result;
  }

  // sign(k·y*_i − m), exactly (k > 0).
  int compare_scaled(std::int64_t i, double k, double m) {
    if (!row_) row_ = exact::row(r_.x, r_.x_dtype, r_.n, r_.eps, r_.centred);
    return exact::compare_element_scaled(row_, x_at(i), r_.w_hi ? r_.w_hi[i] : 1.0, r_.w_lo ? r_.w_lo[i] : 0.0,
                                         r_.beta ? r_.beta[i] : 0.0, k, m);
  }

  // sign(k·amax* − M) over elements [b, e) (k > 0, M ≥ 0): compare_amax's walk with the bounds scaled by k, each
  // product's rounding covered by 2^-50 of it.
  int compare_amax_scaled(std::int64_t b, std::int64_t e, double k, double M, const AmaxBounds& m) {
    const double lo = m.lo * k * (1 - 0x1p-50), hi = m.hi * k * (1 + 0x1p-50);
    if (lo > M) return 1;
    if (hi < M) return -1;
    int result = -1;
    for (std::int64_t i = b; i < e; ++i) {
      const double a = std::fabs(r_.y[i]), d = err(i);
      if ((a - d) * k * (1 - 0x1p-50) > M) return 1;
      if ((a + d) * k * (1 + 0x1p-50) < M) continue;
      // sign(k·|y*| − M), M > 0: k·y* ≥ M decides it; else |k·y*| ≥ M only where k·y* ≤ −M.
      int c = compare_scaled(i, k, M);
      if (c < 0) {
        const int down = compare_scaled(i, k, -M);  // k·y* + M
        c = down < 0 ? 1 : down == 0 ? 0 : -1;
      }
      if (c > 0) return 1;
      if (c == 0) result = 0;
    }
    return result;
  }

  // sign of y*_i (its approximation where the bound settles it).
  int sign(std::int64_t i) {
    const double d = err(i);
    if (r_.y[i] > d) return 1;
    if (r_.y[i] < -d) return -1;
    return compare(i, 0.0);
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
float exact_scale(Decider& d, std::int64_t b, std::int64_t e, double qm) {
  const Decider::AmaxBounds m = d.amax_bounds(b, e);
  const double amax = m.amax;
  float c = static_cast<float>(amax / qm);
  if (!std::isfinite(c)) c = std::numeric_limits<float>::max();
  for (;;) {
    const float up = std::nextafter(c, std::numeric_limits<float>::infinity());
    if (std::isfinite(up)) {
      // Midpoints of adjacent f32 have 25 bits, qmax ≤ 7: their product is exact.
      const int k = d.compare_amax(b, e, 0.5 * (static_cast<double>(c) + up) * qm, m);
      if (k > 0 || (k == 0 && even_f32(up))) {
        c = up;
        continue;
      }
    }
    if (c > 0) {
      const float dn = std::nextafter(c, 0.0f);
      const int k = d.compare_amax(b, e, 0.5 * (static_cast<double>(c) + dn) * qm, m);
      if (k < 0 || (k == 0 && even_f32(dn))) {
        c = dn;
        continue;
      }
    }
    return c == 0 ? 1.0f : c;  // amax* = 0, or amax*/qmax below f32's range: 1 (lnorm/quant.hpp)
  }
}

// nvfp4's c* = E4M3(amax*·G/6) of elements [b, e) (G > 0): the candidate from the approximations' amax, moved one
// code while G·amax* lies past 6·midpoint (≤ 5 significant bits times 3: exact) toward a neighbour, ties to even;
// saturating at 448 (0x7e).
std::uint8_t exact_nvfp4_code(Decider& d, std::int64_t b, std::int64_t e, float global_scale) {
  constexpr QuantFormat e4m3 = QuantFormat::fp8_e4m3;
  const Decider::AmaxBounds m = d.amax_bounds(b, e);
  const double G = global_scale;
  const double amax = m.amax;
  std::int64_t k = ordinal_of_code(e4m3, encode(e4m3, amax * G / 6));
  const auto mid = [&](std::int64_t o) { return 0.5 * (value_of_ordinal(e4m3, o) + value_of_ordinal(e4m3, o + 1)); };
  for (;;) {
    if (k < max_ordinal(e4m3)) {
      const int c = d.compare_amax_scaled(b, e, G, 6 * mid(k), m);
      if (c > 0 || (c == 0 && (k & 1))) {
        ++k;
        continue;
      }
    }
    if (k > 0) {
      const int c = d.compare_amax_scaled(b, e, G, 6 * mid(k - 1), m);
      if (c < 0 || (c == 0 && (k & 1))) {
        --k;
        continue;
      }
    }
    return static_cast<std::uint8_t>(k);
  }
}

// X = floor(log2 amax*) − emax_elem, clamped to [−127, 127] (−127 for amax* = 0).
// With --mx-rule (lnorm/quant.hpp): the rule's level of amax*, the largest k with amax* ≥ B(k) (> for ceil and
// rceil), walked over the dyadic breakpoints B, then X = k − offset.
int exact_mx_exponent(Decider& d, std::int64_t b, std::int64_t e, const QuantSpec& spec) {
  const Decider::AmaxBounds m = d.amax_bounds(b, e);
  const double amax = m.amax;
  const int off = mx_offset(spec), lo = -127 + off, hi = 127 + off;  // levels outside [lo, hi] clamp
  const bool strict = info(spec.exponent_rule()).strict;
  const auto reaches = [&](int k) {
    const int c = d.compare_amax(b, e, mx_breakpoint(spec, k), m);
    return strict ? c > 0 : c >= 0;
  };
  int k = amax > 0 && std::isfinite(amax) ? std::clamp(mx_exponent(spec, amax) + off, lo, hi) : lo;
  for (;;) {
    if (k < hi && reaches(k + 1)) {
      ++k;
      continue;
    }
    if (k > lo && !reaches(k)) {
      --k;
      continue;
    }
    return k - off;
  }
}

// The code of t's rounding r (on the grid, |r| ≤ max) when the interval t ± e lies inside r's rounding region and on
// one side of 0 (so y*/s, within e of t, rounds to r too); -1 otherwise. fp8: r by one addition
// of C = 2^(max(e_a, emin) + 52 − mbits) (simd_quant.hpp's argument at 52 bits), its distance from the nearest
// midpoint half a quantum, c·2^-53, minus |t − r|; int8: by the 1.5·2^52 addition, 0.5 − |t − r|.
// An integer format's (int8: [lo, hi] = [−128, 127], its row's range).
int settled_int_code(double t, double e, double lo, double hi) {
  if (!(std::fabs(t) > e)) return -1;  // y*/s may be on either side of 0, or NaN
  const double tc = std::clamp(t, lo, hi), r = (tc + 0x1.8p52) - 0x1.8p52;
  if (!(0.5 - std::fabs(tc - r) > e)) return -1;
  return static_cast<std::uint8_t>(static_cast<std::int8_t>(r));
}
template <QuantFormat F>
int settled_code(double t, double e) {
  const double a = std::fabs(t);
  if (!(a > e)) return -1;  // y*/s may be on either side of 0 (the zero's sign), or NaN
  {
    // The format's row (lnorm/quant.hpp): E4M3 3, 7, 448; E5M2 2, 15, 57344; the FNUZ formats bias 8 and 16.
    constexpr int kMbits = info(F).mbits, kBias = info(F).bias;
    constexpr double kTop = qmax(F);
    constexpr double kMinNormal = 1.0 / static_cast<double>(1ull << (kBias - 1));                 // 2^emin
    constexpr double kToUlp = 0x1p52 / (1 << kMbits);                                             // 2^(52−mbits)
    constexpr double kSubnormalUnit = static_cast<double>(1ull << (kBias - 1 + kMbits));         // 2^(mbits−emin)
    const double ac = a < 2 * kTop ? a : 2 * kTop;
    const double pow2 = std::bit_cast<double>(std::bit_cast<std::uint64_t>(ac) & 0xFFF0000000000000ull);  // 2^floor(log2 ac)
    const double c = (pow2 > kMinNormal ? pow2 : kMinNormal) * kToUlp;
    double r = (ac + c) - c;
    // r's region reaches half a quantum at ac (c·2^-53) from r on ac's side, and at least half that on the other: the
    // binade below a power of two r ≤ ac has half the quantum.
    if (!(c * 0x1p-53 - std::fabs(ac - r) > e && c * 0x1p-54 > e)) return -1;
    r = r < kTop ? r : kTop;  // saturation
    const std::uint64_t mag = r < kMinNormal ? static_cast<std::uint64_t>(r * kSubnormalUnit)
                                             : (std::bit_cast<std::uint64_t>(r) >> (52 - kMbits)) - (std::uint64_t{1023 - kBias} << kMbits);
    if (mag == 0 && !has_negative_zero(F)) return 0;  // FNUZ: one zero
    return static_cast<int>(mag | (t < 0 ? sign_bit(F) : 0u));
  }
}

// Q(y*_i / s) exactly, where settled_code could not settle it (t = y_i/s, e: the bound moved to t).
std::uint8_t exact_code(Decider& d, std::int64_t i, QuantFormat f, double sd, double t, double e) {
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
  return code_of_ordinal(f, k, k == 0 && has_negative_zero(f) && d.compare(i, 0.0) < 0);
}

}  // namespace

void quantize_row_exact(const QuantSpec& spec, const ExactQuantRow& r, std::uint8_t* q_all, void* scales, std::int64_t row) {
  Decider d(r);
  const QuantFormat f = spec.format;
  const std::int64_t G = spec.group_size(r.n), per_row = spec.scales_per_row(r.n);
  std::uint8_t* const q_row = q_all + spec.q_bytes(row, r.n);
  const bool packed = is_packed(f);  // (once: store_code's table lookup per element showed in the profile)
  const auto set = [&](std::int64_t i, std::uint8_t code) {
    if (packed) store_code(f, q_row, i, code);
    else q_row[i] = code;
  };
  for (std::int64_t g = 0; g < r.n / G; ++g) {
    const std::int64_t b = g * G, e = b + G, at = row * per_row + g;
    float s = spec.scale;
    // A NaN y* (a NaN gamma or beta beside finite x: a NaN x sends its row to the fallback) makes its group's scale NaN
    // (E8M0 255) and every code there NaN, as lnorm/quant.hpp says; the walks below would skip it (a NaN is never the
    // amax). With a tensor scale, only its own code.
    bool nan = false;
    if (!r.no_nan && spec.scaling != Scaling::tensor)
      for (std::int64_t i = b; i < e; ++i) nan |= r.y[i] != r.y[i];
    if (nan) {
      if (spec.pow2_scales()) static_cast<std::uint8_t*>(scales)[at] = 255;
      else if (spec.scaling == Scaling::nvfp4) static_cast<std::uint8_t*>(scales)[at] = 0x7f;  // E4M3's NaN
      else static_cast<float*>(scales)[at] = std::numeric_limits<float>::quiet_NaN();
      for (std::int64_t i = b; i < e; ++i) set(i, encode(f, r.y[i] != r.y[i] ? r.y[i] : std::numeric_limits<double>::quiet_NaN()));
      continue;
    }
    if (spec.scaling == Scaling::nvfp4) {
      const std::uint8_t c = exact_nvfp4_code(d, b, e, spec.global_scale);
      static_cast<std::uint8_t*>(scales)[at] = c;
      s = nvfp4_element_scale(c, spec.global_scale);
      if (std::isinf(s)) {  // c = 0: every q ±0, y*'s sign
        for (std::int64_t i = b; i < e; ++i) set(i, code_of_ordinal(f, 0, has_negative_zero(f) && d.sign(i) < 0));
        continue;
      }
    } else if (spec.pow2_scales()) {
      const int x = exact_mx_exponent(d, b, e, spec);
      static_cast<std::uint8_t*>(scales)[at] = static_cast<std::uint8_t>(x + 127);
      s = std::bit_cast<float>(x > -127 ? static_cast<std::uint32_t>(127 + x) << 23 : 0x00400000u);  // 2^x (2^-127: subnormal)
    } else if (spec.scaling != Scaling::tensor) {
      s = exact_scale(d, b, e, qmax(f));
      static_cast<float*>(scales)[at] = s;
    }
    const auto codes = [&](auto settled) {
      const double sd = s;
      const auto one = [&](std::int64_t i) {
        if (r.y[i] != r.y[i]) {
          set(i, encode(f, r.y[i]));
          return;
        }
        const double t = r.y[i] / sd, err = d.err(i) / sd * (1 + 0x1p-50) + std::fabs(t) * 0x1p-52;
        const int c = settled(t, err);
        set(i, c >= 0 ? static_cast<std::uint8_t>(c) : exact_code(d, i, f, sd, t, err));
      };
      if (!r.settle) {
        for (std::int64_t i = b; i < e; ++i) one(i);
        return;
      }
      // The ISA kernel's lanes settle most codes a vector at a time, written straight into q where a code is a byte;
      // the rest one at a time, as above.
      constexpr std::int64_t kChunk = 256;
      std::uint8_t lane_codes[kChunk];
      std::uint64_t settled_bits[kChunk / 64];
      for (std::int64_t from = b; from < e; from += kChunk) {
        const std::int64_t m = e - from < kChunk ? e - from : kChunk;
        std::uint8_t* const into = packed ? lane_codes : q_row + from;
        r.settle(f, r.y + from, m, sd, r.e_abs, r.e_rel, into, settled_bits);
        for (std::int64_t w = 0; w * 64 < m; ++w) {
          const std::int64_t j0 = w * 64, j1 = j0 + 64 < m ? j0 + 64 : m;
          const std::uint64_t all = j1 - j0 == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << (j1 - j0)) - 1;
          if (settled_bits[w] == all) {  // a word's settled codes at once (a small group's: nvfp4's 16, mx's 32)
            if (packed) pack_codes(lane_codes + j0, j1 - j0, q_row + (from + j0) / 2);  // (from + j0, j1 even: G is)
            continue;
          }
          for (std::int64_t j = j0; j < j1; ++j) {
            if ((settled_bits[w] >> (j - j0)) & 1u) set(from + j, into[j]);
            else one(from + j);
          }
        }
      }
    };
    if (is_float(f)) {
      with_format(f, [&](auto fmt) {
        if constexpr (is_float(fmt.value)) codes([](double t, double err) { return settled_code<decltype(fmt)::value>(t, err); });
      });
    } else {  // an integer format, its range from its row
      const double lo = info(f).qmin, hi = qmax(f);
      codes([lo, hi](double t, double err) { return settled_int_code(t, err, lo, hi); });
    }
  }
}

}  // namespace lnorm::cpu
