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

  // amax* over a group lies in [lo, hi]; amax: the largest |y_i| (the candidate's source). The bound err grows with
  // |y| (each of its operations is monotone), so |y*_i| ≤ |y_i| + err_i ≤ amax + err(amax), and the element at amax
  // has |y*| ≥ amax − err(amax): both ends from amax alone, each rounded outward (up and down). The largest |y| is a
  // max, exact in any order: the ISA kernel's lanes (ExactQuantRow::max_abs) or group_amax.
  struct AmaxBounds {
    double lo = 0, hi = 0, amax = 0;
  };
  AmaxBounds bounds_of(double amax) const {
    const double d = err_of(amax);
    return {below(amax - d), above(amax + d), amax};
  }
  // max |y_i| over [b, e), a NaN dropped, in four scalar chains (one chain of maxsd was a third of the _cr kernels'
  // quantized epilogue, perf annotate).
  double group_amax(std::int64_t b, std::int64_t e) const {
    double m[4] = {0, 0, 0, 0};
    std::int64_t i = b;
    for (; i + 4 <= e; i += 4)
      for (int j = 0; j < 4; ++j) {
        const double a = std::fabs(r_.y[i + j]);  // (not fmax: a libm call)
        m[j] = a > m[j] ? a : m[j];
      }
    for (; i < e; ++i) m[0] = std::fabs(r_.y[i]) > m[0] ? std::fabs(r_.y[i]) : m[0];
    return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
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
// The f32 steps by the bits (c ≥ 0 finite; not nextafter: a libm call, twice a group).
float f32_step_up(float c) { return std::bit_cast<float>(std::bit_cast<std::uint32_t>(c) + 1); }
float f32_step_down(float c) { return std::bit_cast<float>(std::bit_cast<std::uint32_t>(c) - 1); }  // c > 0
float exact_scale(Decider& d, std::int64_t b, std::int64_t e, double qm, const Decider::AmaxBounds& m) {
  const double amax = m.amax;
  float c = static_cast<float>(amax / qm);
  if (!std::isfinite(c)) c = std::numeric_limits<float>::max();
  for (;;) {
    const float up = f32_step_up(c);
    if (std::isfinite(up)) {
      // Midpoints of adjacent f32 have 25 bits, qmax ≤ 7: their product is exact.
      const int k = d.compare_amax(b, e, 0.5 * (static_cast<double>(c) + up) * qm, m);
      if (k > 0 || (k == 0 && even_f32(up))) {
        c = up;
        continue;
      }
    }
    if (c > 0) {
      const float dn = f32_step_down(c);
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
std::uint8_t exact_nvfp4_code(Decider& d, std::int64_t b, std::int64_t e, float global_scale, const Decider::AmaxBounds& m) {
  constexpr QuantFormat e4m3 = QuantFormat::fp8_e4m3;
  constexpr std::int64_t kTop = top_magnitude_code(e4m3);  // 126: 448
  static_assert(info(e4m3).mbits == 3 && info(e4m3).bias == 7 && kTop == 126);
  // E4M3's value of ordinal k in [0, 127] (its code's magnitude bits: value_of_ordinal's arithmetic with the
  // format's constants; four calls of it a group were a tenth of nvfp4's epilogue, perf record).
  const auto value = [](std::int64_t k) {
    const auto e = static_cast<int>(k >> 3), mant = static_cast<int>(k & 7);
    return e == 0 ? mant * 0x1p-9 : (8 + mant) * std::bit_cast<double>(static_cast<std::uint64_t>(1023 + e - 10) << 52);
  };
  const auto mid = [&](std::int64_t o) { return 0.5 * (value(o) + value(o + 1)); };
  const double G = global_scale;
  // The candidate (the walk below settles the code whatever it starts from): amax·G/6's exponent and top three
  // fraction bits rounded half up, or its subnormal quanta, clamped to the ordinals.
  const double v = m.amax * G / 6;
  std::int64_t k = 0;
  if (v >= 0x1p-6) {
    const auto bits = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(v < 512.0 ? v : 512.0));
    k = ((bits + (std::int64_t{1} << 48)) >> 49) - ((1023 - 7) << 3);
  } else if (v > 0) {
    k = static_cast<std::int64_t>(v * 512 + 0.5);
  }
  k = std::clamp<std::int64_t>(k, 0, kTop);
  for (;;) {
    if (k < kTop) {
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
int exact_mx_exponent(Decider& d, std::int64_t b, std::int64_t e, const QuantSpec& spec, const Decider::AmaxBounds& m) {
  const double amax = m.amax;
  const int off = mx_offset(spec), lo = -127 + off, hi = 127 + off;  // levels outside [lo, hi] clamp
  // The floor rule (mx's default: breakpoints 2^j, reached at equality) where the bounds share a binade: amax* lies
  // in [2^E, 2^(E+1)) with E their exponent field, so the level is E, clamped, with no breakpoint compared (the walk
  // below calls mx_exponent and mx_breakpoint, a tenth of the mx epilogue at one group in 32, perf record).
  if (spec.exponent_rule() == MxRule::floor && m.lo >= 0x1p-1022 && m.hi <= 0x1.fffffffffffffp1023) {
    const auto exponent = [](double v) { return static_cast<int>(std::bit_cast<std::uint64_t>(v) >> 52) - 1023; };
    if (exponent(m.lo) == exponent(m.hi)) return std::clamp(exponent(m.lo), lo, hi) - off;
  }
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

// What a group's scale decision leaves its codes to: the settled or exact codes over s, NaN (a NaN y*: every code
// NaN), or ±0 (nvfp4's scale code 0: every q ±0, y*'s sign).
enum class GroupCodes : std::uint8_t { scaled, nan, zero };

// Group [b, e)'s scale, written to scales[at] (none for tensor), and s (as a double) for its codes. amax: max |y|
// over the group (not read for tensor).
GroupCodes decide_scale(Decider& d, const ExactQuantRow& r, const QuantSpec& spec, std::int64_t b, std::int64_t e,
                        double amax, void* scales, std::int64_t at, double& s) {
  s = spec.scale;
  if (spec.scaling == Scaling::tensor) return GroupCodes::scaled;  // a NaN y* is its own code's alone
  // A NaN y* (a NaN gamma or beta beside finite x: a NaN x sends its row to the fallback) makes its group's scale NaN
  // (E8M0 255) and every code there NaN, as lnorm/quant.hpp says; the walks below would skip it (a NaN is never the
  // amax).
  bool nan = false;
  if (!r.no_nan)
    for (std::int64_t i = b; i < e; ++i) nan |= r.y[i] != r.y[i];
  if (nan) {
    if (spec.pow2_scales()) static_cast<std::uint8_t*>(scales)[at] = 255;
    else if (spec.scaling == Scaling::nvfp4) static_cast<std::uint8_t*>(scales)[at] = 0x7f;  // E4M3's NaN
    else static_cast<float*>(scales)[at] = std::numeric_limits<float>::quiet_NaN();
    s = std::numeric_limits<double>::quiet_NaN();
    return GroupCodes::nan;
  }
  const Decider::AmaxBounds m = d.bounds_of(amax);
  if (spec.scaling == Scaling::nvfp4) {
    const std::uint8_t c = exact_nvfp4_code(d, b, e, spec.global_scale, m);
    static_cast<std::uint8_t*>(scales)[at] = c;
    s = nvfp4_element_scale(c, spec.global_scale);
    return std::isinf(s) ? GroupCodes::zero : GroupCodes::scaled;
  }
  if (spec.pow2_scales()) {
    const int x = exact_mx_exponent(d, b, e, spec, m);
    static_cast<std::uint8_t*>(scales)[at] = static_cast<std::uint8_t>(x + 127);
    s = std::bit_cast<float>(x > -127 ? static_cast<std::uint32_t>(127 + x) << 23 : 0x00400000u);  // 2^x (2^-127: subnormal)
    return GroupCodes::scaled;
  }
  const float f = exact_scale(d, b, e, qmax(spec.format), m);
  static_cast<float*>(scales)[at] = f;
  s = f;
  return GroupCodes::scaled;
}

}  // namespace

// The row in spans: a span's groups' largest |y| in one call (ExactQuantRow::max_abs), their scales, then their codes
// in chunks of kChunk elements, each through one settle call and then, a group's piece of each 64-code word at a
// time, kept at once where the word's bits say every code is settled and otherwise element by element. Small
// groups (G a multiple of 16, at most kChunk) share a span of kChunk / G groups, so one call serves nvfp4's 64 or
// mx's 32 groups rather than one (a call a group cost ~10 ns: docs/performance.md); a larger group is a span of its
// own, its codes in chunks.
void quantize_row_exact(const QuantSpec& spec, const ExactQuantRow& r, std::uint8_t* q_all, void* scales, std::int64_t row) {
  constexpr std::int64_t kChunk = 1024, kMaxGroups = kChunk / 16;
  Decider d(r);
  const QuantFormat f = spec.format;
  const std::int64_t G = spec.group_size(r.n), per_row = spec.scales_per_row(r.n);
  std::uint8_t* const q_row = q_all + spec.q_bytes(row, r.n);
  const bool packed = is_packed(f);  // (once: store_code's table lookup per element showed in the profile)
  const auto set = [&](std::int64_t i, std::uint8_t code) {
    if (packed) store_code(f, q_row, i, code);
    else q_row[i] = code;
  };
  const bool batched = r.settle && G < r.n && G <= kChunk && G % 16 == 0;
  const std::int64_t span = batched ? kChunk / G * G : G;
  std::uint8_t lane_codes[kChunk];
  std::uint64_t settled_bits[kChunk / 64];
  double amax[kMaxGroups], s_of[kMaxGroups];
  GroupCodes kind[kMaxGroups];
  const auto codes = [&](auto settled) {
    // Q(y*_i/s) where the lanes left code i (or no lanes were given).
    const auto one = [&](std::int64_t i, double sd) {
      if (r.y[i] != r.y[i]) {
        set(i, encode(f, r.y[i]));
        return;
      }
      const double t = r.y[i] / sd, err = d.err(i) / sd * (1 + 0x1p-50) + std::fabs(t) * 0x1p-52;
      const int c = settled(t, err);
      set(i, c >= 0 ? static_cast<std::uint8_t>(c) : exact_code(d, i, f, sd, t, err));
    };
    for (std::int64_t b0 = 0; b0 < r.n; b0 += span) {
      const std::int64_t e0 = b0 + span < r.n ? b0 + span : r.n, groups = (e0 - b0) / G;
      if (spec.scaling != Scaling::tensor) {
        if (G == r.n && r.row_amax >= 0) amax[0] = r.row_amax;
        else if (r.max_abs) r.max_abs(r.y + b0, e0 - b0, G, amax);
        else
          for (std::int64_t g = 0; g < groups; ++g) amax[g] = d.group_amax(b0 + g * G, b0 + (g + 1) * G);
      }
      const std::int64_t at0 = row * per_row + b0 / G;  // (one division a span: one a group was a tenth of mx's)
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t b = b0 + g * G;
        kind[g] = decide_scale(d, r, spec, b, b + G, amax[g], scales, at0 + g, s_of[g]);
      }
      for (std::int64_t from = b0; from < e0; from += kChunk) {
        const std::int64_t m = e0 - from < kChunk ? e0 - from : kChunk;
        std::uint8_t* const into = packed ? lane_codes : q_row + from;
        const std::int64_t g_first = (from - b0) / G;
        if (r.settle) r.settle(f, r.y + from, m, batched ? G : m, s_of + g_first, r.e_abs, r.e_rel, into, settled_bits);
        // The chunk's words: a settled word's codes are in q already (bytes) or packed at once; the others code by
        // code, each of its group's scale. (Word by word, not a group's piece of each word: the pieces' index
        // arithmetic cost int8/row 5%, q-only driver.)
        if (r.settle) {
          for (std::int64_t w = 0; w * 64 < m; ++w) {
            const std::int64_t i0 = from + w * 64, len = m - w * 64 < 64 ? m - w * 64 : 64;
            const std::uint64_t bits = settled_bits[w], all = len == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << len) - 1;
            if (bits == all) {
              if (packed) pack_codes(lane_codes + w * 64, len, q_row + i0 / 2);  // (i0, len even: G and kChunk are)
              continue;
            }
            std::int64_t g = (i0 - b0) / G, next = b0 + (g + 1) * G;  // (one division a word, not one a code)
            for (std::int64_t j = 0; j < len; ++j) {
              if (i0 + j == next) ++g, next += G;
              if (kind[g] != GroupCodes::scaled) continue;  // (below)
              if ((bits >> j) & 1u) set(i0 + j, into[w * 64 + j]);
              else one(i0 + j, s_of[g]);
            }
          }
        }
        // Groups without settled codes: NaN or ±0 groups (their bits are clear: s NaN or Inf settles nothing), and all
        // where no lanes were given.
        for (std::int64_t g = g_first; g * G + b0 < from + m; ++g) {
          const std::int64_t gb = b0 + g * G > from ? b0 + g * G : from, ge = b0 + (g + 1) * G < from + m ? b0 + (g + 1) * G : from + m;
          if (kind[g] == GroupCodes::nan) {
            for (std::int64_t i = gb; i < ge; ++i) set(i, encode(f, r.y[i] != r.y[i] ? r.y[i] : std::numeric_limits<double>::quiet_NaN()));
          } else if (kind[g] == GroupCodes::zero) {
            for (std::int64_t i = gb; i < ge; ++i) set(i, code_of_ordinal(f, 0, has_negative_zero(f) && d.sign(i) < 0));
          } else if (!r.settle) {
            for (std::int64_t i = gb; i < ge; ++i) one(i, s_of[g]);
          }
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

}  // namespace lnorm::cpu
