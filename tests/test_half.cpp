// Specification tests for lnorm/half.hpp (f16 = IEEE binary16, bf16 = bfloat16).
//
// The oracles here are independent of the code under test: format values come from the IEEE
// definitions (sign, exponent, mantissa) evaluated in double, and rounding expectations come
// from exact midpoints of adjacent format values. format.hpp's round_to_format is deliberately
// not used: it produces its final bit pattern with f16_from_float itself. Where the CPU has
// them, the F16C and AVX512-BF16 conversion instructions serve as a second, hardware oracle.
#include <cpuid.h>
#include <catch2/catch.hpp>

#include <lnorm/half.hpp>

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

// F16C from cpuid leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c" (the asan
// preset builds with clang), as in kernels/cpu/simd_kernels.cpp.
static bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}


namespace {

using lnorm::bf16;
using lnorm::f16;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
double f16_value(std::uint16_t b) {
  const unsigned e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
  double v;
  if (e == 0x1F) v = m ? kNaN : kInf;
  else if (e == 0) v = std::ldexp(m, -24);  // subnormal: m * 2^-14 * 2^-10
  else v = std::ldexp(1024.0 + m, static_cast<int>(e) - 25);
  return (b & 0x8000u) ? -v : v;
}

// bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits.
double bf16_value(std::uint16_t b) {
  const unsigned e = (b >> 7) & 0xFFu, m = b & 0x7Fu;
  double v;
  if (e == 0xFF) v = m ? kNaN : kInf;
  else if (e == 0) v = std::ldexp(m, -133);  // subnormal: m * 2^-126 * 2^-7
  else v = std::ldexp(128.0 + m, static_cast<int>(e) - 134);
  return (b & 0x8000u) ? -v : v;
}

bool f16_is_nan(std::uint16_t b) { return (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0; }
bool bf16_is_nan(std::uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0; }

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

// Exhaustive loops collect failures here and assert once, so a broken conversion reports a
// count and the first few cases instead of millions of assertion lines.
struct Mismatches {
  std::size_t count = 0;
  std::string first;
  template <class... A>
  void add(const char* fmt, A... a) {
    if (count++ >= 8) return;
    char buf[200];
    std::snprintf(buf, sizeof buf, fmt, a...);
    first += buf;
    first += '\n';
  }
};
#define REQUIRE_NO_MISMATCHES(mm) \
  do {                            \
    INFO((mm).first);             \
    REQUIRE((mm).count == 0u);    \
  } while (0)

// One storage format, as seen by the generic checks below.
struct Format {
  const char* name;
  std::uint16_t max_finite;  // largest finite positive pattern; max_finite + 1 is +Inf
  double (*value)(std::uint16_t);
  bool (*is_nan)(std::uint16_t);
  std::uint16_t (*round)(float);
  float (*widen)(std::uint16_t);
};
const Format kF16{"f16", 0x7BFF, f16_value, f16_is_nan,
                  [](float x) { return lnorm::f16_from_float(x).bits; },
                  [](std::uint16_t b) { return lnorm::to_float(f16{b}); }};
const Format kBF16{"bf16", 0x7F7F, bf16_value, bf16_is_nan,
                   [](float x) { return lnorm::bf16_from_float(x).bits; },
                   [](std::uint16_t b) { return lnorm::to_float(bf16{b}); }};

// Value the pattern after `a` would have with an unbounded exponent: for max_finite that is
// max + 1 ulp (65536 for f16), whose midpoint with max is the overflow threshold.
double next_value(const Format& F, std::uint16_t a) {
  const double av = F.value(a);
  return a == F.max_finite ? av + (av - F.value(a - 1)) : F.value(a + 1);
}

// Exact midpoint of a and a+1 as a float. Both formats have at most 11 significant bits, so
// the sum in double is exact, and the midpoint (one more bit) always fits in a float; the
// caller checks that rather than assuming it.
double midpoint(const Format& F, std::uint16_t a) { return (F.value(a) + next_value(F, a)) / 2; }

void check_every_pattern_widens_exactly(const Format& F) {
  Mismatches mm;
  for (std::uint32_t i = 0; i <= 0xFFFF; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float got = F.widen(h);
    const double want = F.value(h);
    if (F.is_nan(h)) {
      if (!std::isnan(got)) mm.add("%s 0x%04x: want NaN, got %a", F.name, i, double(got));
    } else if (double(got) != want || std::signbit(got) != std::signbit(want)) {
      mm.add("%s 0x%04x: want %a, got %a", F.name, i, want, double(got));
    }
  }
  REQUIRE_NO_MISMATCHES(mm);
}

void check_every_pattern_round_trips(const Format& F) {
  Mismatches mm;
  for (std::uint32_t i = 0; i <= 0xFFFF; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const std::uint16_t back = F.round(F.widen(h));
    if (F.is_nan(h) ? !F.is_nan(back) : back != h)
      mm.add("%s 0x%04x -> float -> 0x%04x", F.name, i, unsigned(back));
  }
  REQUIRE_NO_MISMATCHES(mm);
}

// For every pair of adjacent finite values a < b (including max finite and the overflow
// "value" above it, which must become Inf), probe both sides of the exact midpoint m and m
// itself, for both signs. Pattern a+1 is b (or +Inf), so "even" is the pattern's low bit.
void check_rounding_between_neighbours(const Format& F) {
  Mismatches mm;
  for (std::uint32_t ia = 0; ia <= F.max_finite; ++ia) {
    const auto a = static_cast<std::uint16_t>(ia);
    const auto b = static_cast<std::uint16_t>(ia + 1);
    const double m = midpoint(F, a);
    const auto mf = static_cast<float>(m);
    if (double(mf) != m) {
      mm.add("%s 0x%04x: midpoint %a is not a float", F.name, ia, m);
      continue;
    }
    const auto af = static_cast<float>(F.value(a));
    const float bf = b == F.max_finite + 1 ? std::numeric_limits<float>::infinity()
                                           : static_cast<float>(F.value(b));
    const std::uint16_t even = (a & 1u) ? b : a;
    const struct { float x; std::uint16_t want; } probes[] = {
        {std::nextafter(af, bf), a},  // just above a
        {std::nextafter(mf, af), a},  // just below the midpoint
        {mf, even},                   // the tie
        {std::nextafter(mf, bf), b},  // just above the midpoint
        {std::nextafter(bf, af), b},  // just below b (FLT_MAX for the bf16 overflow pair)
    };
    for (const auto& p : probes) {
      if (!(af < p.x && p.x < bf)) {  // the probe construction itself must be sound
        mm.add("%s 0x%04x: probe %a outside (a, b)", F.name, ia, double(p.x));
        continue;
      }
      for (const std::uint16_t sign : {0x0000, 0x8000}) {
        const float x = sign ? -p.x : p.x;
        const auto want = static_cast<std::uint16_t>(p.want | sign);
        const std::uint16_t got = F.round(x);
        if (got != want)
          mm.add("%s(%a = 0x%08x): want 0x%04x, got 0x%04x", F.name, double(x), bits_of(x),
                 unsigned(want), unsigned(got));
      }
    }
  }
  REQUIRE_NO_MISMATCHES(mm);
}

// --- hardware oracles; only these helpers are compiled for the extra ISA, so the binary
// --- still runs on CPUs without it (the callers check __builtin_cpu_supports first).

__attribute__((target("f16c"))) void compare_one_with_f16c(float x, Mismatches& mm) {
  const auto hw = static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
  const std::uint16_t sw = lnorm::f16_from_float(x).bits;
  if (f16_is_nan(hw) ? !f16_is_nan(sw) : sw != hw)
    mm.add("f16(0x%08x): VCVTPS2PH 0x%04x, f16_from_float 0x%04x", bits_of(x), unsigned(hw),
           unsigned(sw));
}

__attribute__((target("f16c"))) void compare_with_f16c(const std::vector<float>& extra,
                                                       std::uint32_t stride, Mismatches& mm) {
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += stride)
    compare_one_with_f16c(float_of(std::uint32_t(u)), mm);
  for (const float x : extra) compare_one_with_f16c(x, mm);
}

// VCVTNEPS2BF16 treats f32 subnormal inputs as zero (it ignores MXCSR.DAZ and always flushes),
// so it is no oracle for them: callers pass only zero, normal, Inf and NaN inputs. It also
// always returns a quiet NaN, hence NaNs compare as "both NaN".
__attribute__((target("avx512bf16,avx512f,avx512vl"))) void compare_with_avx512bf16(
    const std::vector<float>& xs, Mismatches& mm) {
  for (std::size_t i = 0; i < xs.size(); i += 16) {
    float in[16] = {};
    const std::size_t n = std::min<std::size_t>(16, xs.size() - i);
    std::memcpy(in, xs.data() + i, n * sizeof(float));
    const auto packed = _mm512_cvtneps_pbh(_mm512_loadu_ps(in));
    std::uint16_t hw[16];
    static_assert(sizeof(packed) == sizeof(hw));
    std::memcpy(hw, &packed, sizeof(hw));  // element type differs between GCC versions
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint16_t sw = lnorm::bf16_from_float(in[k]).bits;
      if (bf16_is_nan(hw[k]) ? !bf16_is_nan(sw) : sw != hw[k])
        mm.add("bf16(0x%08x): VCVTNEPS2BF16 0x%04x, bf16_from_float 0x%04x", bits_of(in[k]),
               unsigned(hw[k]), unsigned(sw));
    }
  }
}

// Every float within +-4 ulps of every midpoint (both signs): where rounding bugs live.
std::vector<float> near_midpoints(const Format& F) {
  std::vector<float> out;
  for (std::uint32_t a = 0; a <= F.max_finite; ++a) {
    const std::uint32_t mb = bits_of(static_cast<float>(midpoint(F, std::uint16_t(a))));
    for (std::uint32_t k = mb - 4; k <= mb + 4; ++k) {
      out.push_back(float_of(k));
      out.push_back(float_of(k | 0x80000000u));
    }
  }
  return out;
}

constexpr std::uint32_t kStride = 251;  // prime, so the sample hits every low-bit residue

}  // namespace

TEST_CASE("f16: to_float of every bit pattern is its IEEE binary16 value, signed zeros kept",
          "[half]") {
  // Anchors, so the oracle itself is pinned to known constants.
  CHECK(f16_value(0x3C00) == 1.0);
  CHECK(f16_value(0x7BFF) == 65504.0);
  CHECK(f16_value(0x0001) == 0x1p-24);
  CHECK(f16_value(0x0400) == 0x1p-14);
  CHECK(f16_value(0xC000) == -2.0);
  CHECK(std::signbit(lnorm::to_float(f16{0x8000})));
  CHECK_FALSE(std::signbit(lnorm::to_float(f16{0x0000})));
  check_every_pattern_widens_exactly(kF16);
}

TEST_CASE("f16: every non-NaN pattern round-trips through float exactly, NaN stays NaN",
          "[half]") {
  check_every_pattern_round_trips(kF16);
}

TEST_CASE("bf16: to_float of every bit pattern is its bfloat16 value, the top half of an f32",
          "[half]") {
  CHECK(bf16_value(0x3F80) == 1.0);
  CHECK(bf16_value(0x7F7F) == 0x1.FEp127);
  CHECK(bf16_value(0x0001) == 0x1p-133);
  CHECK(bf16_value(0x0080) == 0x1p-126);
  CHECK(std::signbit(lnorm::to_float(bf16{0x8000})));
  check_every_pattern_widens_exactly(kBF16);
  Mismatches mm;  // and bit for bit: bf16 is by definition the f32 with 16 zero low bits
  for (std::uint32_t i = 0; i <= 0xFFFF; ++i)
    if (bits_of(lnorm::to_float(bf16{std::uint16_t(i)})) != i << 16) mm.add("bf16 0x%04x", i);
  REQUIRE_NO_MISMATCHES(mm);
}

TEST_CASE("bf16: every non-NaN pattern round-trips through float exactly, NaN stays NaN",
          "[half]") {
  check_every_pattern_round_trips(kBF16);
}

TEST_CASE("f16_from_float rounds to the nearer neighbour, ties to even, for every adjacent pair "
          "(subnormals, smallest normal, overflow to Inf)",
          "[half]") {
  check_rounding_between_neighbours(kF16);
}

TEST_CASE("bf16_from_float rounds to the nearer neighbour, ties to even, for every adjacent pair "
          "(subnormals, smallest normal, overflow to Inf)",
          "[half]") {
  check_rounding_between_neighbours(kBF16);
}

TEST_CASE("f16_from_float: max finite + half an ulp (65520) and beyond overflow to Inf",
          "[half]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const float s : {1.0f, -1.0f}) {
    const std::uint16_t sign = s < 0 ? 0x8000 : 0x0000;
    CHECK(lnorm::f16_from_float(s * 65504.0f).bits == (0x7BFF | sign));
    CHECK(lnorm::f16_from_float(s * std::nextafter(65520.0f, 0.0f)).bits == (0x7BFF | sign));
    CHECK(lnorm::f16_from_float(s * 65520.0f).bits == (0x7C00 | sign));  // tie; 0x7BFF is odd
    for (const float big : {65536.0f, 1e30f, std::numeric_limits<float>::max(), inf})
      CHECK(lnorm::f16_from_float(s * big).bits == (0x7C00 | sign));
  }
  // bf16 shares f32's exponent range: only the top of f32 overflows.
  CHECK(lnorm::bf16_from_float(std::numeric_limits<float>::max()).bits == 0x7F80);
  CHECK(lnorm::bf16_from_float(-inf).bits == 0xFF80);
  CHECK(lnorm::bf16_from_float(0x1.FEp127f).bits == 0x7F7F);
  CHECK(lnorm::bf16_from_float(1e30f).bits == 0x714A);  // 1e30f = 0x1.93e594p99 -> 0x1.94p99
}

TEST_CASE("f16_from_float: tiny floats round to signed zero or the smallest subnormal",
          "[half]") {
  const float half_sub = 0x1p-25f;  // half the smallest f16 subnormal 2^-24
  for (const float s : {1.0f, -1.0f}) {
    const std::uint16_t sign = s < 0 ? 0x8000 : 0x0000;
    INFO("sign " << s);
    for (const float tiny : {0.0f, std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::min(), 0x1p-26f,
                             std::nextafter(half_sub, 0.0f)})
      CHECK(lnorm::f16_from_float(s * tiny).bits == sign);  // signed zero, never +0 for -x
    CHECK(lnorm::f16_from_float(s * half_sub).bits == sign);  // tie between 0 and 1: even is 0
    CHECK(lnorm::f16_from_float(s * std::nextafter(half_sub, 1.0f)).bits == (0x0001 | sign));
    CHECK(lnorm::f16_from_float(s * 0x1p-24f).bits == (0x0001 | sign));
    CHECK(lnorm::f16_from_float(s * 0x3p-25f).bits == (0x0002 | sign));  // tie 1|2 -> 2
    CHECK(lnorm::f16_from_float(s * 0x1.FFCp-15f).bits == (0x0400 | sign));  // tie 0x3FF|0x400
    CHECK(lnorm::bf16_from_float(s * std::numeric_limits<float>::denorm_min()).bits == sign);
    CHECK(lnorm::bf16_from_float(s * 0x1p-134f).bits == sign);  // tie 0|2^-133 -> 0
  }
}

TEST_CASE("f16_from_float and bf16_from_float turn every NaN input (any sign, any payload) "
          "into a NaN",
          "[half]") {
  Mismatches mm;
  for (const std::uint32_t sign : {0x00000000u, 0x80000000u})
    for (std::uint32_t payload = 1; payload <= 0x7FFFFFu; ++payload) {
      const float x = float_of(sign | 0x7F800000u | payload);
      const std::uint16_t h = lnorm::f16_from_float(x).bits, b = lnorm::bf16_from_float(x).bits;
      if (!f16_is_nan(h) || !bf16_is_nan(b))
        mm.add("NaN 0x%08x: f16 0x%04x, bf16 0x%04x", bits_of(x), unsigned(h), unsigned(b));
    }
  REQUIRE_NO_MISMATCHES(mm);
}

TEST_CASE("from_float<T> is the matching conversion for f16, bf16 and float", "[half]") {
  for (const float x : {0.0f, -1.5f, 0.1f, 65519.0f, 1e-7f, 3.0e38f}) {
    CHECK(lnorm::from_float<f16>(x).bits == lnorm::f16_from_float(x).bits);
    CHECK(lnorm::from_float<bf16>(x).bits == lnorm::bf16_from_float(x).bits);
    CHECK(bits_of(lnorm::from_float<float>(x)) == bits_of(x));
  }
}

TEST_CASE("f16_from_float agrees with the F16C instruction VCVTPS2PH (round to nearest even) on "
          "a strided sample of all floats and near every midpoint",
          "[half]") {
  if (!cpu_has_f16c()) {
    WARN("CPU lacks F16C: hardware cross-check of f16_from_float SKIPPED (not passed)");
    return;
  }
  Mismatches mm;
  compare_with_f16c(near_midpoints(kF16), kStride, mm);
  REQUIRE_NO_MISMATCHES(mm);
}

TEST_CASE("bf16_from_float agrees with the AVX512-BF16 instruction VCVTNEPS2BF16 on a strided "
          "sample of non-subnormal floats and near every midpoint",
          "[half]") {
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512f") ||
      !__builtin_cpu_supports("avx512vl")) {
    WARN("CPU lacks AVX512-BF16: hardware cross-check of bf16_from_float SKIPPED (not passed)");
    return;
  }
  // f32 subnormals are excluded: the instruction flushes them to zero (see the helper).
  const auto is_subnormal = [](float x) { return std::fpclassify(x) == FP_SUBNORMAL; };
  std::vector<float> xs;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += kStride)
    if (const float x = float_of(std::uint32_t(u)); !is_subnormal(x)) xs.push_back(x);
  for (const float x : near_midpoints(kBF16))
    if (!is_subnormal(x)) xs.push_back(x);
  Mismatches mm;
  compare_with_avx512bf16(xs, mm);
  REQUIRE_NO_MISMATCHES(mm);
}

// from_double<f16/bf16> rounds a double once (to-odd f32, then nearest even). Oracle: the two patterns
// around d by the IEEE values above, the nearer one, ties to the even pattern; inputs near every
// midpoint, where a double rounded to f32 first would round twice (e.g. a tie in f32 of a value just above
// an f16 midpoint), and across all binades.
TEST_CASE("from_double<f16> and from_double<bf16> round a double once, ties to even, near every midpoint",
          "[half]") {
  const auto check = [](auto value_of, auto convert, const char* what) {
    std::vector<double> vals;  // non-negative finite values in pattern order
    for (std::uint32_t b = 0; b < 0x8000u; ++b) {
      const double v = value_of(static_cast<std::uint16_t>(b));
      if (std::isinf(v) || std::isnan(v)) break;
      vals.push_back(v);
    }
    const double top = vals.back(), gap = top - vals[vals.size() - 2];
    Mismatches mm;
    std::uint64_t z = 7;
    for (std::size_t k = 0; k < vals.size(); ++k) {
      const double lo = vals[k], hi = k + 1 < vals.size() ? vals[k + 1] : top + gap;
      const double mid = 0.5 * (lo + hi);
      // The midpoint, a double-ulp either side of it (below f32's resolution there), and a random point.
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      const double r = lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1p-53;
      for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, kInf), r}) {
        for (double s : {1.0, -1.0}) {
          const double v = s * d;
          double want;
          if (d >= top + gap / 2) want = kInf;
          else if (d < mid || (d == mid && (k % 2 == 0))) want = lo;
          else want = hi;
          if (d == mid && k + 1 == vals.size()) want = kInf;  // the tie above max finite: Inf (even)
          want *= s;
          const std::uint16_t got = convert(v).bits;
          const double gv = value_of(got);
          if (!(gv == want && std::signbit(gv) == std::signbit(want))) mm.add("%s: %.17g -> %.17g, want %.17g", what, v, gv, want);
        }
      }
    }
    REQUIRE_NO_MISMATCHES(mm);
  };
  check(f16_value, [](double d) { return lnorm::from_double<f16>(d); }, "f16");
  check(bf16_value, [](double d) { return lnorm::from_double<bf16>(d); }, "bf16");
  CHECK(std::isnan(f16_value(lnorm::from_double<f16>(kNaN).bits)));
  CHECK(std::isnan(bf16_value(lnorm::from_double<bf16>(kNaN).bits)));
}
