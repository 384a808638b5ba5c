// lnorm/quant.hpp: the formats' grids, the quantizer Q, names. Every value of every format is a small dyadic, exact
// in double, so the grid is compared with v itself: no step can round twice.
#include "lnorm/quant.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>

namespace lnorm {

namespace {
// 2^j from its exponent field: exact for the normal doubles' j (every format's grid and every level an mx walk
// reaches: |j| ≤ 140), and no libm call: ldexp here was a sixth of the _cr kernels' nvfp4 and mx epilogues (several
// calls per group of 16 or 32: perf record, issue 57).
double pow2_exact(int j) {
  if (j < -1022 || j > 1023) return std::ldexp(1.0, j);
  return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + j) << 52);
}

// floor(log2 a) from the exponent field for a normal double a > 0 (ilogb, a libm call, once a group in mx_exponent
// otherwise); others by ilogb.
int exponent_of(double a) {
  if (!(a >= 0x1p-1022) || !(a <= 0x1.fffffffffffffp1023)) return std::ilogb(a);
  return static_cast<int>(std::bit_cast<std::uint64_t>(a) >> 52) - 1023;
}

// A floating-point format's magnitude bits (the code without its sign) → value, from its mbits and bias.
double fp8_magnitude(QuantFormat f, unsigned mag) {
  const int mbits = info(f).mbits, bias = info(f).bias;
  const unsigned e = mag >> mbits, m = mag & ((1u << mbits) - 1);
  if (e == 0) return static_cast<double>(m) * pow2_exact(1 - bias - mbits);  // subnormal (products exact)
  return static_cast<double>((1u << mbits) | m) * pow2_exact(static_cast<int>(e) - bias - mbits);
}
}  // namespace

std::optional<QuantFormat> parse_quant_format(std::string_view s) {
  for (const FormatInfo& f : kFormatTable)
    if (s == f.name) return f.format;
  return std::nullopt;
}

std::optional<Scaling> parse_scaling(std::string_view s, std::int64_t& group) {
  group = 0;
  for (const ScalingInfo& sc : kScalingTable) {
    if (!sc.group_given) {
      if (s == sc.syntax) return sc.scaling;
      continue;
    }
    // "group:G": the syntax up to its colon, then a positive integer
    const std::string_view head = sc.syntax.substr(0, sc.syntax.find(':') + 1);
    if (s.substr(0, head.size()) != head) continue;
    const std::string_view g = s.substr(head.size());
    std::int64_t v = 0;
    const auto r = std::from_chars(g.data(), g.data() + g.size(), v);
    if (r.ec != std::errc() || r.ptr != g.data() + g.size() || v <= 0) return std::nullopt;
    group = v;
    return sc.scaling;
  }
  return std::nullopt;
}

namespace {
// "a, b or c" from a table's names
template <class Table, class Field>
std::string one_of(const Table& table, Field field) {
  std::string out;
  const std::size_t n = std::size(table);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? " or " : ", ";
    out.append(table[i].*field);
  }
  return out;
}
// The row of `table` named `text`; a refusal naming the table's rows otherwise (the spec parameters' tables).
template <class Table>
const auto& row_named(const Table& table, std::string_view flag, std::string_view text) {
  for (const auto& row : table)
    if (row.name == text) return row;
  throw QuantSpecError(std::string(flag) + std::string(text) + ": expected " +
                       one_of(table, &std::remove_cvref_t<decltype(table[0])>::name));
}
// "mx scaling takes fp8_e4m3, fp8_e5m2 or fp4_e2m1 (why)": the formats a scaling takes, from the tables.
std::string takes_text(const ScalingInfo& sc) {
  std::string out = std::string(sc.name) + " scaling takes ";
  std::string names;
  for (const FormatInfo& f : kFormatTable)
    if (takes(sc.scaling, f.format)) names.append(names.empty() ? "" : " or ").append(f.name);
  out += names;
  if (sc.needs_emax) out += " (OCP MX v1.0's element formats with an emax_elem: not MXINT8's implied scale, not FNUZ)";
  if (sc.only_format >= 0) out += " (NVIDIA's NVFP4: E2M1 values under E4M3 block scales)";
  return out;
}
std::string g9(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
// A packed format's rows and groups start on a byte: their lengths even (tensor scaling: the row's).
std::string packing_error(const QuantSpec& spec, std::int64_t cols) {
  if (!is_packed(spec.format)) return {};
  const std::int64_t g = spec.group_size(cols);
  if (cols % 2 == 0 && g % 2 == 0) return {};
  return std::string(name(spec.format)) + " stores two codes a byte: the row (" + std::to_string(cols) + ") and its groups (" +
         std::to_string(g) + ") must hold an even number of elements";
}
}  // namespace

std::string quant_format_names() { return one_of(kFormatTable, &FormatInfo::name); }
std::string scaling_syntaxes() { return one_of(kScalingTable, &ScalingInfo::syntax); }

std::string quant_spec_error(const QuantSpec& spec, std::int64_t cols) {
  std::string why;
  const ScalingInfo& sc = spec.scaling_info();
  if (sc.scale_given) {
    if (!(std::isfinite(spec.scale) && spec.scale > 0))
      why.append(sc.name).append(" scaling needs --scale S, a finite f32 greater than 0 (q = Q(y / S))");
  } else if (spec.scale != 0) {
    why.append("--scale is tensor scaling's; ").append(sc.name).append(" scaling computes its scales");
  } else if (!takes(spec.scaling, spec.format)) {
    why = takes_text(sc);
  } else if (sc.global_scale && spec.global_scale != 0 && !(std::isfinite(spec.global_scale) && spec.global_scale > 0)) {
    why = "--global-scale must be a finite f32 greater than 0";
  } else if (const std::int64_t g = spec.group_size(cols); g <= 0 || cols % g != 0) {
    why.append(sc.name).append(" scaling's groups of ").append(std::to_string(g));
    why.append(" do not divide the row of ").append(std::to_string(cols)).append(" elements");
  }
  if (why.empty()) why = packing_error(spec, cols);
  return why;
}

QuantSpec parse_quant_spec(std::string_view format, std::string_view scaling, std::optional<double> scale, std::int64_t cols,
                           const QuantSpecNames& names, std::optional<double> global_scale, std::string_view mx_rule,
                           std::string_view scale_format, std::string_view scale_layout) {
  const auto fail = [](std::string_view flag, std::string_view value, const std::string& why) {
    throw QuantSpecError(std::string(flag) + std::string(value) + ": " + why);
  };
  QuantSpec spec;
  const auto f = parse_quant_format(format);
  if (!f) fail(names.quant, format, "expected " + quant_format_names());
  spec.format = *f;
  const auto sc = parse_scaling(scaling, spec.group);
  if (!sc) fail(names.scaling, scaling, "expected " + scaling_syntaxes() + " (G > 0)");
  spec.scaling = *sc;
  const ScalingInfo& si = spec.scaling_info();
  if (scale) {
    const float sf = static_cast<float>(*scale);
    if (static_cast<double>(sf) != *scale && std::isfinite(*scale))
      fail(names.scale, g9(*scale), "not an f32 value; the scale is stored as f32 (nearest: " + g9(sf) + ", write it with %.9g)");
    if (!si.scale_given) fail(names.scale, g9(*scale), std::string(si.name) + " scaling computes its scales; a scale is tensor scaling's");
    if (!(std::isfinite(sf) && sf > 0)) fail(names.scale, g9(*scale), "must be a finite f32 greater than 0 (q = Q(y / S))");
    spec.scale = sf;
  } else if (si.scale_given) {
    fail(names.scaling, scaling, "needs " + std::string(names.scale) + "S, a finite f32 greater than 0 (q = Q(y / S))");
  }
  if (!takes(spec.scaling, spec.format)) fail(names.scaling, scaling, takes_text(si) + ", not " + std::string(format));
  if (global_scale) {
    const float g = static_cast<float>(*global_scale);
    if (!si.global_scale) fail(names.global_scale, g9(*global_scale), std::string(si.name) + " scaling has no global scale (nvfp4's)");
    if (static_cast<double>(g) != *global_scale && std::isfinite(*global_scale))
      fail(names.global_scale, g9(*global_scale), "not an f32 value; the global scale is an f32 (nearest: " + g9(g) + ")");
    if (!(std::isfinite(g) && g > 0)) fail(names.global_scale, g9(*global_scale), "must be a finite f32 greater than 0");
    spec.global_scale = g;
  }
  if (!mx_rule.empty()) {
    const MxRuleInfo& r = row_named(kMxRuleTable, names.mx_rule, mx_rule);
    if (spec.scaling != Scaling::mx && r.rule != MxRule::floor)
      fail(names.mx_rule, mx_rule, "an mx rule; " + std::string(si.name) + " scaling has none");
    spec.mx_rule = r.rule;
  }
  if (!scale_format.empty()) {
    const ScaleFormatInfo& sf = row_named(kScaleFormatTable, names.scale_format, scale_format);
    if (sf.format != ScaleFormat::f32 && si.storage != ScaleStorage::f32)
      fail(names.scale_format, scale_format, "row and group scales' storage; " + std::string(si.name) + " scaling's is its own");
    spec.scale_format = sf.format;
  }
  if (!scale_layout.empty()) {
    const ScaleLayoutInfo& l = row_named(kScaleLayoutTable, names.scale_layout, scale_layout);
    if (l.layout != ScaleLayout::row && !spec.has_scales())
      fail(names.scale_layout, scale_layout, std::string(si.name) + " scaling stores no scales (its one scale is given)");
    if (l.one_byte_codes && !spec.scales_are_codes())
      fail(names.scale_layout, scale_layout,
           "the 128x4 tiles hold one-byte scale codes (mx's E8M0, nvfp4's E4M3, --scale-format ue8m0), not f32 scales");
    spec.scale_layout = l.layout;
  }
  if (cols > 0)
    if (const std::int64_t g = spec.group_size(cols); g <= 0 || cols % g != 0)
      fail(names.scaling, scaling, "groups of " + std::to_string(g) + " do not divide the row of " + std::to_string(cols) + " elements");
  if (cols > 0)
    if (const std::string odd = packing_error(spec, cols); !odd.empty()) fail(names.quant, format, odd);
  return spec;
}

std::string describe(const QuantSpec& spec) {
  std::string s;
  s.append(name(spec.format)).append("/").append(name(spec.scaling));
  if (spec.scaling_info().group_given) s.append(":").append(std::to_string(spec.group));
  if (spec.scaling == Scaling::mx && spec.mx_rule != MxRule::floor) s.append(":").append(info(spec.mx_rule).name);
  if (spec.scale_format != ScaleFormat::f32) s.append(":").append(info(spec.scale_format).name);
  return s;
}

std::string mx_rule_names() { return one_of(kMxRuleTable, &MxRuleInfo::name); }

double mx_breakpoint(const QuantSpec& spec, int j) {
  switch (spec.exponent_rule()) {
    case MxRule::floor: return pow2_exact(j);        // floor(log2 a) ≥ j  ⇔  a ≥ 2^j
    case MxRule::ceil: return pow2_exact(j - 1);     // ceil(log2 a) ≥ j   ⇔  a > 2^(j−1)
    case MxRule::even:                               // a's significand rounded half up to mbits reaches 2^j
      return (1.0 - pow2_exact(-(info(spec.format).mbits + 2))) * pow2_exact(j);  // (exact: a power of two's multiple)
    case MxRule::rceil: return qmax(spec.format) * pow2_exact(j - 1);  // ceil(log2(a/qmax)) ≥ j  ⇔  a > qmax·2^(j−1)
  }
  return pow2_exact(j);
}

int mx_offset(const QuantSpec& spec) { return spec.exponent_rule() == MxRule::rceil ? 0 : emax_elem(spec.format); }

int mx_exponent(const QuantSpec& spec, double amax) {
  const int off = mx_offset(spec), lo = -127 + off, hi = 127 + off;  // levels outside [lo, hi] clamp
  if (!(amax > 0)) return -127;
  const bool strict = info(spec.exponent_rule()).strict;
  const auto reaches = [&](int j) { return strict ? amax > mx_breakpoint(spec, j) : amax >= mx_breakpoint(spec, j); };
  int j = std::clamp(exponent_of(amax) - (spec.exponent_rule() == MxRule::rceil ? exponent_of(qmax(spec.format)) : 0), lo, hi);
  while (j < hi && reaches(j + 1)) ++j;
  while (j > lo && !reaches(j)) --j;
  return j - off;
}

float nvfp4_element_scale(std::uint8_t c, float global_scale) {
  // E4M3's value from its fields (decode's, without its calls: this runs once per 16 elements in the kernels)
  const unsigned mag = c & 0x7fu, e = mag >> 3, m = mag & 7u;
  if (mag == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  if (mag == 0) return std::numeric_limits<float>::infinity();  // no scale: every q of the block ±0
  const float v = e == 0 ? static_cast<float>(m) * 0x1p-9f : std::bit_cast<float>(((e + 120u) << 23) | (m << 20));
  return ((c & 0x80u) ? -v : v) / global_scale;  // one f32 division, as the contract says (a negative code: negative)
}

float nvfp4_global_scale(float amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  const float g = 2688.0f / amax;  // 448·6, exact in f32: one f32 division
  return std::isfinite(g) ? g : std::numeric_limits<float>::max();  // amax below 2688/FLT_MAX: the largest f32
}

std::int64_t max_ordinal(QuantFormat f) {
  if (!is_float(f)) return static_cast<std::int64_t>(qmax(f));
  return top_magnitude_code(f);
}
std::int64_t min_ordinal(QuantFormat f) { return is_float(f) ? -max_ordinal(f) : static_cast<std::int64_t>(info(f).qmin); }

double value_of_ordinal(QuantFormat f, std::int64_t k) {
  if (!is_float(f)) return static_cast<double>(k);
  const double m = fp8_magnitude(f, static_cast<unsigned>(k < 0 ? -k : k));
  return k < 0 ? -m : m;
}

std::uint8_t code_of_ordinal(QuantFormat f, std::int64_t k, bool negative_zero) {
  if (!is_float(f)) return static_cast<std::uint8_t>(static_cast<std::int8_t>(k));
  if (k == 0) return negative_zero && has_negative_zero(f) ? static_cast<std::uint8_t>(sign_bit(f)) : 0x00;
  return static_cast<std::uint8_t>(k < 0 ? (sign_bit(f) | -k) : k);
}

std::int64_t ordinal_of_code(QuantFormat f, std::uint8_t code) {
  if (!is_float(f)) return static_cast<std::int8_t>(code);
  const std::int64_t mag = code & (sign_bit(f) - 1);
  return code & sign_bit(f) ? -mag : mag;
}

namespace {
// An IEEE-like format's Inf magnitude: the top exponent with a zero mantissa, one step past the largest finite.
bool code_is_inf(QuantFormat f, std::uint8_t code) {
  return info(f).nan == NanCodes::ieee && (code & (sign_bit(f) - 1)) == top_magnitude_code(f) + 1;
}
}  // namespace

bool code_is_nan(QuantFormat f, std::uint8_t code) {
  const unsigned mag = code & (sign_bit(f) - 1);
  switch (info(f).nan) {
    case NanCodes::top_magnitude: return mag == sign_bit(f) - 1;
    case NanCodes::ieee: return mag > top_magnitude_code(f) + 1;
    case NanCodes::negative_zero: return code == sign_bit(f);
    case NanCodes::none: break;
  }
  return false;
}

double decode(QuantFormat f, std::uint8_t code) {
  if (code_is_nan(f, code)) return std::numeric_limits<double>::quiet_NaN();
  if (code_is_inf(f, code))
    return code & sign_bit(f) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (has_negative_zero(f) && code == sign_bit(f)) return -0.0;
  return value_of_ordinal(f, ordinal_of_code(f, code));
}

double quantum_at(QuantFormat f, double v) {
  if (!is_float(f)) return 1.0;
  const int mbits = info(f).mbits, emin = 1 - info(f).bias;
  const double a = std::fmin(std::fabs(v), qmax(f));
  int e = emin;
  if (a >= std::ldexp(1.0, emin)) e = std::ilogb(a);
  return std::ldexp(1.0, e - mbits);
}

std::uint8_t encode(QuantFormat f, double v) {
  if (std::isnan(v)) return static_cast<std::uint8_t>(nan_code(f, std::signbit(v)));
  if (!is_float(f)) {
    // Adding and subtracting 1.5·2^52 rounds a double below 2^51 to an integer, ties to even (one IEEE addition).
    constexpr double kMagic = 0x1.8p52;
    const double k = (std::clamp(v, info(f).qmin, qmax(f)) + kMagic) - kMagic;
    return static_cast<std::uint8_t>(static_cast<std::int8_t>(k));
  }
  // fp8 from the double's bits, each step exact (an integer rounding of the significand, ties to even):
  //   below 2^emin, the subnormal quanta 2^(emin − mbits): a + M with M = 2^(52 + emin − mbits), whose ulp is that
  //   quantum, rounds a once; the quanta are the bits above M's;
  //   above, the exponent and significand fields rounded to mbits bits (a carry moves to the next binade's first
  //   code, as it should), then rebiased;
  //   at or past the largest value, the largest value (saturation).
  const int mbits = info(f).mbits, bias = info(f).bias, emin = 1 - bias;
  // Powers of two from their exponent fields (not ldexp: a libm call, a tenth of nvfp4's epilogue, which encodes
  // its block scales here); both are normal doubles for every format's emin.
  const auto pow2 = [](int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + e) << 52); };
  const double min_normal = pow2(emin);
  const double subnormal_magic = pow2(52 + emin - mbits);  // its ulp is the subnormal quantum
  const std::uint64_t top = top_magnitude_code(f);
  std::uint8_t sign = std::signbit(v) ? static_cast<std::uint8_t>(sign_bit(f)) : 0x00;
  const double a = std::fabs(v);
  if (a >= qmax(f)) return static_cast<std::uint8_t>(sign | top);
  std::uint64_t bits = 0, code = 0;
  if (a < min_normal) {
    const double r = a + subnormal_magic;
    std::uint64_t mb = 0;
    std::memcpy(&bits, &r, 8);
    std::memcpy(&mb, &subnormal_magic, 8);
    code = bits - mb;  // 0 .. 2^mbits (2^mbits is the first normal's code)
  } else {
    std::memcpy(&bits, &a, 8);
    const int shift = 52 - mbits;
    const std::uint64_t rounded = (bits + ((std::uint64_t{1} << (shift - 1)) - 1) + ((bits >> shift) & 1)) >> shift;
    code = rounded - (static_cast<std::uint64_t>(1023 - bias) << mbits);
  }
  if (code == 0 && !has_negative_zero(f)) sign = 0;  // FNUZ: one zero (its −0 code is NaN)
  return static_cast<std::uint8_t>(sign | std::min(code, top));
}

}  // namespace lnorm
