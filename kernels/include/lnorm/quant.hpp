// Quantized outputs: the formats, the scalings and the one quantizer Q every layer shares (docs/DESIGN.md
// "Quantized outputs"). A storage description like half.hpp: the kernels encode with it, the reference decodes
// with it (its exact rounding is its own: reference/src/quantize.cpp).
//
//   q = Q(y / s): y divided by the scale s, rounded to nearest, ties to even, once; a value beyond the format's
//   largest finite value saturates to it (±448 E4M3, ±57344 E5M2, [−128, 127] int8): never NaN or Inf for a
//   finite y. NaN y gives the fp8 NaN (int8 has none: 0, and no metric gates it).
//   fp8_e4m3  OCP E4M3FN: 1-4-3, bias 7, no Inf, NaN 0x7f/0xff, max 448 (0x7e), min subnormal 2^-9
//   fp8_e5m2  OCP E5M2: 1-5-2, bias 15, IEEE-like (Inf 0x7c, NaN 0x7d-0x7f), max 57344 (0x7b), min 2^-16
//   fp8_e4m3fnuz, fp8_e5m2fnuz  the FNUZ formats of AMD's MI300 (LLVM's Float8E4M3FNUZ, Float8E5M2FNUZ; Graphcore's
//             "8-bit numerical formats for deep neural networks", arXiv 2206.02915): 1-4-3 bias 8, max 240 (0x7f),
//             and 1-5-2 bias 16, max 57344 (0x7f); no Inf; one NaN, 0x80, the code −0 would have; one zero (a
//             negative value that rounds to zero is 0x00). NaN y gives 0x80.
//   int8      two's complement integers [−128, 127]
//   fp4_e2m1  OCP MX v1.0's FP4 (E2M1): 1-2-1, bias 1, ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no Inf, no NaN, max 6 (0x7);
//             stored two codes a byte, element 2i in the low nibble (q.npy: uint8 [..., cols/2]: the packing of
//             FlashInfer's and torchao's FP4 tensors and of PTX's cvt.rn.satfinite.e2m1x2). NaN y has no code: 0,
//             and, as for int8, no metric gates it (the group's scale says the group is lost: NaN).
//
// Scalings (the scale s of each element):
//   tensor    one f32 s, given (a static scale: vLLM's rms_norm_static_fp8_quant, FlashInfer's rmsnorm_quant)
//   row       per row s = f32(amax|y*| / qmax), qmax = 448 / 57344 / 127 (vLLM's dynamic per-token quant)
//   group:G   the same per G consecutive elements of a row (G divides the row): rows × cols/G f32 scales
//   mx        OCP MX v1.0: groups of 32, s = 2^X, X = floor(log2 amax) − emax_elem (8 E4M3, 15 E5M2), clamped
//             to [−127, 127], stored as E8M0 (X + 127); the OCP formats only (MXINT8's implied scale is not this)
//             --mx-rule picks X's rule (torchao's ScaleCalculationMode, as exact functions of the real amax):
//               floor  X = floor(log2 amax) − emax_elem (OCP MX v1.0; the default)
//               ceil   X = ceil(log2 amax) − emax_elem (no element saturates that floor would)
//               even   X = floor(log2 amax′) − emax_elem, amax′ = amax's significand rounded half up to the element's
//                      mbits (torchao's EVEN: the next binade once amax ≥ 2^(k+1)·(1 − 2^-(mbits+2)))
//               rceil  X = ceil(log2(amax / qmax)) (NVIDIA's cuBLAS recipe for UE8M0 scales: the smallest power of
//                      two with amax/s ≤ qmax, so nothing saturates)
//   nvfp4     NVIDIA's NVFP4 (fp4_e2m1 only): blocks of 16, each with an E4M3 scale code c, and one f32 global
//             scale G > 0 for the tensor: c = E4M3(amax_b · G / 6), amax_b the block's amax|y*|, the exact
//             quotient rounded once to nearest even, saturating at 448; the element scale s = f32(E4M3value(c) / G)
//             (one f32 division); q = Q(y / s). G is given (--global-scale) or the tensor's own: G = f32(2688 / A),
//             A = the tensor's amax|y*| rounded to f32 (2688 = 448·6: the largest block maps to E4M3's top, NVIDIA's
//             recipe); 1 where A is 0 or not finite, the largest f32 where the quotient overflows. A block whose c is 0 (amax_b·G/6 below half of E4M3's least
//             subnormal 2^-9) has no element scale: s is +Inf and every q is ±0, y's sign (as FlashInfer's output
//             scale of 0 gives); a block holding a NaN has c = 0x7f (E4M3's NaN) and codes 0, not gated.
// A group whose y* are all zero has no amax to scale by: every q is 0 whatever s is. Its scale is 1 (row,
// group: dequantizes to 0 and divides nothing by zero) and 2^-127 (mx: E8M0 code 0, where floor(log2 0) clamps);
// `check` accepts any finite positive scale there. A row or group whose amax/qmax is below f32's range (rounds to
// 0) is scaled the same way, by 1: its y* are tiny enough that q is ±0 (a scale of 0 would saturate them all, and
// an f32 kernel's y there may already be 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "lnorm/plugin.h"

namespace lnorm {

enum class QuantFormat : std::uint8_t { fp8_e4m3 = 0, fp8_e5m2 = 1, int8 = 2, fp8_e4m3fnuz = 3, fp8_e5m2fnuz = 4, fp4_e2m1 = 5 };
enum class Scaling : std::uint8_t { tensor = 0, row = 1, group = 2, mx = 3, nvfp4 = 4 };
// How a scale is stored: none (tensor scaling: the given S, not written), f32, E8M0 codes (mx) or E4M3 codes (nvfp4).
enum class ScaleStorage : std::uint8_t { none = 0, f32 = 1, e8m0 = 2, e4m3 = 3 };

// The parts as data (docs/DESIGN.md "Parts as data"): one row per format, scaling and scale storage. Every layer
// reads its names, storage and numbers from these rows; a new format or scaling is a row here, its rounding in
// the reference (reference/src/quantize.cpp) and its kernels' code.
// Where a floating-point format keeps its NaN (and Inf): every code's value follows from this, bits, mbits and bias.
enum class NanCodes : std::uint8_t {
  none,            // no NaN and no Inf: an integer format, or a float one that saturates everything (E2M1)
  top_magnitude,   // OCP E4M3FN: S.1111.111 only; no Inf; the largest finite magnitude is the code below
  ieee,            // IEEE-like (OCP E5M2): the top exponent is Inf (mantissa 0) and NaN; the largest finite below it
  negative_zero,   // FNUZ: the code of −0 (only the sign bit) is the one NaN; every other code is finite; no −0
};
struct FormatInfo {
  QuantFormat format;
  std::string_view name;         // --quant, Python's quant=, JSON
  int bits;                      // per code: 8, or 4 (two codes a byte, element 2i in the low nibble)
  int mbits, bias;               // a floating-point format's significand bits and exponent bias (int8: 0, 0)
  NanCodes nan;                  // where its NaN codes are (none for an integer format)
  double qmax;                   // the largest finite magnitude (what saturation gives)
  double qmin;                   // the most negative value (an integer format's -(qmax + 1); -qmax otherwise)
  int emax_elem;                 // OCP MX v1.0's emax_elem: the exponent of the largest power of two (-1: no mx)
  std::string_view npy_descr;    // q.npy's descr
  std::string_view numpy_dtype;  // Python's q
  int abi;                       // lnorm/plugin.h's lnorm_quant_format
};
inline constexpr FormatInfo kFormatTable[] = {
    {QuantFormat::fp8_e4m3, "fp8_e4m3", 8, 3, 7, NanCodes::top_magnitude, 448.0, -448.0, 8, "|u1", "uint8", LNORM_FP8_E4M3},
    {QuantFormat::fp8_e5m2, "fp8_e5m2", 8, 2, 15, NanCodes::ieee, 57344.0, -57344.0, 15, "|u1", "uint8", LNORM_FP8_E5M2},
    // Integer formats: two's complement codes in [qmin, qmax], one a byte (mbits 0 marks them).
    {QuantFormat::int8, "int8", 8, 0, 0, NanCodes::none, 127.0, -128.0, -1, "|i1", "int8", LNORM_INT8},
    // No emax_elem: OCP MX v1.0 defines its elements in the OCP formats only (mx refuses these).
    {QuantFormat::fp8_e4m3fnuz, "fp8_e4m3fnuz", 8, 3, 8, NanCodes::negative_zero, 240.0, -240.0, -1, "|u1", "uint8",
     LNORM_FP8_E4M3FNUZ},
    {QuantFormat::fp8_e5m2fnuz, "fp8_e5m2fnuz", 8, 2, 16, NanCodes::negative_zero, 57344.0, -57344.0, -1, "|u1", "uint8",
     LNORM_FP8_E5M2FNUZ},
    // OCP MX v1.0 §5.3.3: E2M1, emax_elem 2 (its largest power of two, 4).
    {QuantFormat::fp4_e2m1, "fp4_e2m1", 4, 1, 1, NanCodes::none, 6.0, -6.0, 2, "|u1", "uint8", LNORM_FP4_E2M1},
};

struct ScalingInfo {
  Scaling scaling;
  std::string_view name;       // JSON, describe()
  std::string_view syntax;     // --scaling as typed: "group:G" takes G after the colon
  std::int64_t fixed_group;    // elements per scale fixed by the scaling (mx: 32); 0: the row's, or G
  bool group_given;            // G comes from the syntax (group:G)
  bool scale_given;            // the scale is the caller's S (tensor), not computed from y
  ScaleStorage storage;
  bool needs_emax;             // takes only formats with an emax_elem (mx: the OCP formats)
  int only_format;             // takes only this format (a QuantFormat's number; nvfp4: fp4_e2m1); -1: any
  bool global_scale;           // one f32 G for the tensor beside the block scales (nvfp4)
  int abi;                     // lnorm/plugin.h's lnorm_scaling
};
// NVFP4's block size (NVIDIA's NVFP4: 16 E2M1 values share an E4M3 scale).
constexpr std::int64_t kNvfp4Group = 16;
// OCP MX v1.0's block size.
constexpr std::int64_t kMxGroup = 32;
inline constexpr ScalingInfo kScalingTable[] = {
    {Scaling::tensor, "tensor", "tensor", 0, false, true, ScaleStorage::none, false, -1, false, LNORM_SCALING_TENSOR},
    {Scaling::row, "row", "row", 0, false, false, ScaleStorage::f32, false, -1, false, LNORM_SCALING_ROW},
    {Scaling::group, "group", "group:G", 0, true, false, ScaleStorage::f32, false, -1, false, LNORM_SCALING_GROUP},
    {Scaling::mx, "mx", "mx", kMxGroup, false, false, ScaleStorage::e8m0, true, -1, false, LNORM_SCALING_MX},
    {Scaling::nvfp4, "nvfp4", "nvfp4", kNvfp4Group, false, false, ScaleStorage::e4m3, false,
     static_cast<int>(QuantFormat::fp4_e2m1), true, LNORM_SCALING_NVFP4},
};

struct ScaleStorageInfo {
  ScaleStorage storage;
  std::size_t bytes;             // per scale
  std::string_view npy_descr;    // scales.npy's descr
  std::string_view numpy_dtype;  // Python's scales
  std::string_view unit;         // what a scale's error is counted in
  std::string_view metric;       // JSON: what the scale metric measures
  std::string_view values_are;   // how a scale's printed value reads, where it is not the scale itself
};
inline constexpr ScaleStorageInfo kScaleStorageTable[] = {
    {ScaleStorage::none, 0, "", "", "", "", ""},
    {ScaleStorage::f32, 4, "<f4", "float32", "f32 ulps", "f32 ulps from the exact scale", ""},
    {ScaleStorage::e8m0, 1, "|u1", "uint8", "E8M0 steps", "E8M0 steps from the exact exponent", "E8M0 exponents"},
    {ScaleStorage::e4m3, 1, "|u1", "uint8", "E4M3 steps", "E4M3 codes from the exact block scale's", "E4M3 block scales"},
};

constexpr const FormatInfo& info(QuantFormat f) { return kFormatTable[static_cast<unsigned>(f)]; }
constexpr const ScalingInfo& info(Scaling s) { return kScalingTable[static_cast<unsigned>(s)]; }
constexpr const ScaleStorageInfo& info(ScaleStorage s) { return kScaleStorageTable[static_cast<unsigned>(s)]; }
constexpr bool rows_in_order() {
  for (unsigned i = 0; i < std::size(kFormatTable); ++i)
    if (static_cast<unsigned>(kFormatTable[i].format) != i) return false;
  for (unsigned i = 0; i < std::size(kScalingTable); ++i)
    if (static_cast<unsigned>(kScalingTable[i].scaling) != i) return false;
  for (unsigned i = 0; i < std::size(kScaleStorageTable); ++i)
    if (static_cast<unsigned>(kScaleStorageTable[i].storage) != i) return false;
  return true;
}
static_assert(rows_in_order(), "the part tables are indexed by their enums");

constexpr std::string_view name(QuantFormat f) { return info(f).name; }
constexpr std::string_view name(Scaling s) { return info(s).name; }
constexpr double qmax(QuantFormat f) { return info(f).qmax; }
constexpr int emax_elem(QuantFormat f) { return info(f).emax_elem; }
// A floating-point format (a sign bit, an exponent and mbits of significand), not an integer one.
constexpr bool is_float(QuantFormat f) { return info(f).mbits > 0; }
// Whether the format has a NaN code (not int8, not E2M1: their NaN y is written 0 and not gated).
constexpr bool has_nan(QuantFormat f) { return info(f).nan != NanCodes::none; }
// Whether −0 has a code of its own (the OCP formats: the sign bit; FNUZ spends that code on NaN, integers have none).
constexpr bool has_negative_zero(QuantFormat f) { return is_float(f) && info(f).nan != NanCodes::negative_zero; }
// q as stored: one code a byte, or two (bits 4: element 2i in byte i's low nibble, 2i + 1 in its high one). The
// codes of a row of n are at element r·n; a packed format needs even rows and groups (quant_spec_error).
constexpr bool is_packed(QuantFormat f) { return info(f).bits < 8; }
constexpr std::uint8_t load_code(QuantFormat f, const std::uint8_t* q, std::int64_t i) {
  if (!is_packed(f)) return q[i];
  const std::uint8_t b = q[i >> 1];
  return (i & 1) ? static_cast<std::uint8_t>(b >> 4) : static_cast<std::uint8_t>(b & 0x0f);
}
constexpr void store_code(QuantFormat f, std::uint8_t* q, std::int64_t i, std::uint8_t code) {
  if (!is_packed(f)) {
    q[i] = code;
    return;
  }
  std::uint8_t& b = q[i >> 1];
  b = (i & 1) ? static_cast<std::uint8_t>((b & 0x0f) | (code << 4)) : static_cast<std::uint8_t>((b & 0xf0) | (code & 0x0f));
}
// A floating-point format's sign bit, and its largest finite magnitude's code (the largest ordinal).
constexpr unsigned sign_bit(QuantFormat f) { return 1u << (info(f).bits - 1); }
constexpr unsigned top_magnitude_code(QuantFormat f) {
  const FormatInfo& i = info(f);
  const unsigned all = sign_bit(f) - 1;  // every magnitude bit set
  return i.nan == NanCodes::top_magnitude ? all - 1 : i.nan == NanCodes::ieee ? all - (1u << i.mbits) : all;
}
// The code every NaN y gets (with y's sign where the format's NaN has one); 0 for an integer format.
constexpr unsigned nan_code(QuantFormat f, bool negative) {
  const NanCodes n = info(f).nan;
  if (n == NanCodes::none) return 0;
  if (n == NanCodes::negative_zero) return sign_bit(f);
  return (sign_bit(f) - 1) | (negative ? sign_bit(f) : 0);
}
// Whether a scaling takes a format (mx: only formats with an emax_elem; nvfp4: only fp4_e2m1).
constexpr bool takes(Scaling s, QuantFormat f) {
  const ScalingInfo& i = info(s);
  return (!i.needs_emax || info(f).emax_elem >= 0) && (i.only_format < 0 || i.only_format == static_cast<int>(f));
}

// fn(std::integral_constant<QuantFormat, F>{}) with F = f: a format as a compile-time constant, for the codecs that
// are templates on it (the SIMD epilogue, the exact kernels'); every row of kFormatTable, so a new row needs no case.
template <class Fn>
constexpr void with_format(QuantFormat f, Fn&& fn) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)((f == static_cast<QuantFormat>(I) && (fn(std::integral_constant<QuantFormat, static_cast<QuantFormat>(I)>{}), true)) ||
           ...);
  }(std::make_index_sequence<std::size(kFormatTable)>{});
}

// How row and group scales are stored (--scale-format): f32 (today's), or UE8M0, a power of two
// 2^ceil(log2(amax/qmax)) stored as its E8M0 code (DeepSeek-style FP8: vLLM's and SGLang's per-token-group quant with
// UE8M0 scales; the rceil rule of mx below, on row's or group:G's groups).
enum class ScaleFormat : std::uint8_t { f32 = 0, ue8m0 = 1 };
struct ScaleFormatInfo {
  ScaleFormat format;
  std::string_view name;  // --scale-format, Python's scale_format=
  int abi;                // lnorm/plugin.h's lnorm_scale_format
};
inline constexpr ScaleFormatInfo kScaleFormatTable[] = {
    {ScaleFormat::f32, "f32", LNORM_SCALE_F32},
    {ScaleFormat::ue8m0, "ue8m0", LNORM_SCALE_UE8M0},
};
constexpr const ScaleFormatInfo& info(ScaleFormat f) { return kScaleFormatTable[static_cast<unsigned>(f)]; }

// How a quantized output's row, group, mx and nvfp4 scales are laid out in files and arrays (--scale-layout). Kernels
// and plugins always hand them over row-major (row r's scale g at r·per_row + g); a layout is a conversion at the
// file and array boundary (lnorm/scale_layout.hpp), with the rows the flattened x.shape[:axis]:
//   row       x.shape[:axis] + (per_row,), today's;
//   col       (per_row,) + x.shape[:axis]: column-major, [groups, rows] (vLLM's and SGLang's per-token-group scales);
//   swizzled  the 128x4 tiles block-scaled GEMMs read (cuBLAS's block-scaling-factors layout; FlashInfer's
//             get_sf_out_offset_128x4, torchao's to_blocked): rows padded to 128, scale columns to 4, the padding 0, one
//             dimension of round_up(rows, 128)·round_up(per_row, 4) bytes; one-byte scale codes only (E8M0, E4M3).
enum class ScaleLayout : std::uint8_t { row = 0, col = 1, swizzled = 2 };
struct ScaleLayoutInfo {
  ScaleLayout layout;
  std::string_view name;  // --scale-layout, Python's scale_layout=
  bool one_byte_codes;    // takes only one-byte scale codes (the GEMMs' tiles hold E8M0 or E4M3)
};
inline constexpr ScaleLayoutInfo kScaleLayoutTable[] = {
    {ScaleLayout::row, "row", false},
    {ScaleLayout::col, "col", false},
    {ScaleLayout::swizzled, "swizzled", true},
};
constexpr const ScaleLayoutInfo& info(ScaleLayout l) { return kScaleLayoutTable[static_cast<unsigned>(l)]; }

// mx's exponent rules (above): X = level(amax) − offset, level(amax) the largest j with amax ≥ B(j) (inclusive) or
// amax > B(j) (strict), B(j) = base·2^j a dyadic breakpoint. One row each: every layer decides from these.
enum class MxRule : std::uint8_t { floor = 0, ceil = 1, even = 2, rceil = 3 };
struct MxRuleInfo {
  MxRule rule;
  std::string_view name;  // --mx-rule, Python's mx_rule=, JSON
  bool strict;            // level: amax > B(j) (ceil, rceil), else amax ≥ B(j)
  int abi;                // lnorm/plugin.h's lnorm_mx_rule
};
inline constexpr MxRuleInfo kMxRuleTable[] = {
    {MxRule::floor, "floor", false, LNORM_MX_FLOOR},
    {MxRule::ceil, "ceil", true, LNORM_MX_CEIL},
    {MxRule::even, "even", false, LNORM_MX_EVEN},
    {MxRule::rceil, "rceil", true, LNORM_MX_RCEIL},
};
constexpr const MxRuleInfo& info(MxRule r) { return kMxRuleTable[static_cast<unsigned>(r)]; }
constexpr bool mx_rules_in_order() {
  for (unsigned i = 0; i < std::size(kMxRuleTable); ++i)
    if (static_cast<unsigned>(kMxRuleTable[i].rule) != i) return false;
  return true;
}
static_assert(mx_rules_in_order(), "kMxRuleTable is indexed by MxRule");

struct QuantSpec {
  QuantFormat format = QuantFormat::fp8_e4m3;
  Scaling scaling = Scaling::tensor;
  std::int64_t group = 0;  // group:G's G (row: the row's length, mx: kMxGroup; set by group_size)
  float scale = 0;         // tensor scaling's s (finite, > 0)
  float global_scale = 0;  // nvfp4's G (finite, > 0); 0: not given, the tensor's own (resolve_global_scale)
  MxRule mx_rule = MxRule::floor;  // mx's exponent rule
  ScaleFormat scale_format = ScaleFormat::f32;  // row and group: f32, or UE8M0 powers of two
  ScaleLayout scale_layout = ScaleLayout::row;  // the scales' layout in files and arrays (not the kernels')

  constexpr const FormatInfo& format_info() const { return info(format); }
  constexpr const ScalingInfo& scaling_info() const { return info(scaling); }
  constexpr const ScaleStorageInfo& storage() const {
    return info(scale_format == ScaleFormat::ue8m0 ? ScaleStorage::e8m0 : info(scaling).storage);
  }
  // Power-of-two scales stored as E8M0 (mx, or row/group with UE8M0), and the rule of their exponent: mx's, or
  // rceil for UE8M0 (lnorm/quant.hpp mx_exponent).
  constexpr bool pow2_scales() const { return storage().storage == ScaleStorage::e8m0; }
  constexpr MxRule exponent_rule() const { return scaling == Scaling::mx ? mx_rule : MxRule::rceil; }
  // Elements per scale for a row of `cols` (tensor: the whole row: one s for everything).
  constexpr std::int64_t group_size(std::int64_t cols) const {
    const ScalingInfo& s = scaling_info();
    return s.group_given ? group : s.fixed_group > 0 ? s.fixed_group : cols;
  }
  // Scales per row (0 for tensor: none stored).
  constexpr std::int64_t scales_per_row(std::int64_t cols) const {
    return storage().bytes == 0 ? 0 : cols / group_size(cols);
  }
  constexpr bool has_scales() const { return storage().bytes != 0; }
  constexpr bool scales_are_e8m0() const { return storage().storage == ScaleStorage::e8m0; }
  constexpr bool scales_are_codes() const { return storage().bytes == 1; }  // E8M0 or E4M3, one byte each
  // Bytes of q and of the scales for a rows x cols output.
  constexpr std::int64_t q_bytes(std::int64_t rows, std::int64_t cols) const { return rows * cols * format_info().bits / 8; }
  constexpr std::int64_t scale_bytes(std::int64_t rows, std::int64_t cols) const {
    return rows * scales_per_row(cols) * static_cast<std::int64_t>(storage().bytes);
  }
};

// The one parser of a quantized output's description, for every caller (CLI, Python, bench, report): the format,
// the scaling as typed ("group:G" too) and the scale when one was given. It refuses, with one text for every
// caller (the names spelled as the caller's user writes them), an unknown format or scaling, a scale that is not
// an f32 value, a scale for a computed scaling, a missing or non-positive scale for a given one, a scaling that does
// not take the format, and, with cols > 0, groups that do not divide the row. Throws QuantSpecError.
struct QuantSpecNames {  // each written before its value: "--quant fp9", Python's "quant=fp9"
  std::string_view quant = "--quant ", scaling = "--scaling ", scale = "--scale ", global_scale = "--global-scale ",
                   mx_rule = "--mx-rule ", scale_format = "--scale-format ", scale_layout = "--scale-layout ";
};
struct QuantSpecError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// "fp8_e4m3, fp8_e5m2, int8, ..." and "tensor, row, group:G or mx", from the tables (help texts and errors).
std::string quant_format_names();
std::string scaling_syntaxes();
QuantSpec parse_quant_spec(std::string_view format, std::string_view scaling, std::optional<double> scale,
                           std::int64_t cols = 0, const QuantSpecNames& names = {},
                           std::optional<double> global_scale = std::nullopt, std::string_view mx_rule = {},
                           std::string_view scale_format = {}, std::string_view scale_layout = {});
// "floor, ceil, even or rceil"
std::string mx_rule_names();

// A format's name (kFormatTable); "tensor" | "row" | "group:G" | "mx" (G > 0). nullopt otherwise.
std::optional<QuantFormat> parse_quant_format(std::string_view s);
std::optional<Scaling> parse_scaling(std::string_view s, std::int64_t& group);
// Empty when the spec fits a row of `cols`; otherwise why not, in words a user can act on.
std::string quant_spec_error(const QuantSpec& spec, std::int64_t cols);
// "fp8_e4m3/row", "int8/group:64", "fp8_e5m2/tensor"
std::string describe(const QuantSpec& spec);

// A code's value (NaN for the NaN codes, ±Inf for E5M2's); int8 codes are the byte as two's complement.
// code_of_ordinal's negative_zero asks for −0 where the format has it (has_negative_zero), +0 otherwise.
double decode(QuantFormat f, std::uint8_t code);
// Q(v): v rounded to nearest, ties to even, once, saturating; NaN gives the fp8 NaN (0x7f, with v's sign bit)
// and 0 for int8. Exact for any double v (no double rounding: the format's grid is compared with v itself).
std::uint8_t encode(QuantFormat f, double v);
// The format's codes in value order: ordinal k in [min_ordinal, max_ordinal] (0 is +0; fp8: the code's
// magnitude bits, negated for negative values, so one step is one quantum; int8: the value, −128..127).
std::int64_t max_ordinal(QuantFormat f);
std::int64_t min_ordinal(QuantFormat f);
double value_of_ordinal(QuantFormat f, std::int64_t k);
std::uint8_t code_of_ordinal(QuantFormat f, std::int64_t k, bool negative_zero = false);
std::int64_t ordinal_of_code(QuantFormat f, std::uint8_t code);  // precondition: not NaN/Inf
bool code_is_nan(QuantFormat f, std::uint8_t code);
// One quantum at magnitude |v| (clamped to the format's range): the spacing of the format there.
double quantum_at(QuantFormat f, double v);

// E8M0 (mx scales): code c is 2^(c − 127), c = 255 is NaN.
inline double decode_e8m0(std::uint8_t c) { return c == 255 ? std::nan("") : std::ldexp(1.0, static_cast<int>(c) - 127); }

// The exponent rule (spec.exponent_rule(): mx's, or UE8M0's rceil) for a format: B(j) = mx_breakpoint(spec, j), strict or not (info(rule).strict), and
// X = clamp(level − mx_offset(spec), −127, 127). mx_exponent(spec, amax): X of a double amax ≥ 0 decided exactly
// (−127 for 0); NaN and Inf are the caller's.
double mx_breakpoint(const QuantSpec& spec, int j);
int mx_offset(const QuantSpec& spec);
int mx_exponent(const QuantSpec& spec, double amax);

// nvfp4's block scale code → its element scale s = f32(E4M3value(c) / G) (one f32 division), +Inf for c = 0 (every q
// ±0), NaN for E4M3's NaN codes. G > 0 finite.
float nvfp4_element_scale(std::uint8_t c, float global_scale);
// The tensor's own global scale from A, its amax|y| as an f32: f32(2688 / A), 1 where A is 0 or not finite.
float nvfp4_global_scale(float amax);

}  // namespace lnorm
