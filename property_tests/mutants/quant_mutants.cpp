// The quantized epilogue's mutants: the control kernel's y (two-pass in double, rounded once to x's dtype), then
// quantized with one defect each. Each imitates a real-world bug:
//   truncates         q = trunc(y/s): a float -> int cast where a round was meant (static_cast<int8_t>(y * inv_s))
//   nan_on_overflow   no saturation: the fp8 conversion's non-saturating mode (__nv_cvt_float_to_fp8 with
//                     __NV_NOSAT), so 449 in E4M3 is NaN; int8 wraps (a cast of an out-of-range value)
//   amax_of_x         a dynamic scale from the input's amax, not the output's (the norm's input and output swapped)
//   e8m0_rounds_up    the MX exponent from ceil(log2 amax): the group lands a binade low, the top of the format unused
//   group_off_by_one  each group's amax over the wrong window (a pointer off by one element)
//   int8_clamps_127   int8 clamped to [−127, 127] (symmetric quantization) where the contract says [−128, 127]
//   double_rounds     y rounded to bf16 first, then divided and rounded again: a kernel that claims one rounding of
//                     its f32 y (the check then measures it against the f32 problem's budget)
// and the ones a budget on q cannot see, each wrong by less than one quantum or one f32 rounding:
//   ties_away, ties_to_odd   an exact tie broken away from zero (C's round()) or to the odd code
//   scale_truncated          f32(amax/qmax) rounded toward zero
//   scale_times_reciprocal   amax · f32(1/qmax) in f32 (the compiler's -freciprocal-math, or a hand-written inverse)
//   reciprocal_multiply      Q(f32(y · f32(1/s))) (vLLM's rounding points, in a kernel that claims the contract's)
//   mx_exponent_of_bf16_amax the MX exponent of amax rounded to bf16 first (an amax reduced in bf16)
// and FNUZ's, OCP habits where AMD's formats differ (LLVM's Float8E4M3FNUZ: 0x80 is NaN, bias 8 / 16):
//   fnuz_negative_zero       a negative value rounding to zero written 0x80 (OCP's −0; FNUZ's one NaN)
//   fnuz_ocp_bias            FNUZ written with the OCP twin's codes (E4M3FN for E4M3FNUZ): every value read back halved
// and FP4's packing (two codes a byte: FlashInfer, torchao and PTX's cvt.rn.satfinite.e2m1x2 put element 2i low):
//   fp4_nibbles_swapped      element 2i in the high nibble: every code right, every pair read back swapped
// and NVFP4's block scale, c = E4M3(amax·G/6) (NVIDIA's recipe; FlashInfer's cvt_warp_fp16_to_fp4):
//   nvfp4_scale_truncated    c rounded toward zero (a round-toward-zero conversion where __nv_cvt_float_to_fp8's RN was meant)
//   nvfp4_scale_rounds_up    c one code up wherever it rounds down (a ceil, the habit of keeping every block below 6)
// and mx's rules (torchao's ScaleCalculationMode):
//   mx_rule_ignored          floor's exponent whatever the rule (a kernel with one rule hard-wired)
//   mx_ceil_as_floor_plus_one ceil(log2 v) as floor(log2 v) + 1: a binade too many where v is a power of two
//   ue8m0_log2f              UE8M0's exponent as vLLM's ceilf(log2f(amax/qmax)) in f32: log2f rounds a quotient a
//                            few ulps above 2^k to k, one binade low (saturating the amax element)
// Every mutant hands verify the y its quantizer read (y in x's dtype, Tensors::quant_y), as a real kernel would.
#include "quant_mutants.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/params.hpp"  // param_value: any buffer's element, exactly
#include "lnorm/quant.hpp"

namespace lnorm::mutants {
namespace {

// Q(v) with an exact tie broken away from zero or to the odd code instead of to even; otherwise the contract's.
std::uint8_t quantize_tie(QuantDefect defect, QuantFormat f, double v) {
  const std::uint8_t c = encode(f, v);
  if (!std::isfinite(v) || (std::fabs(decode(f, c)) == qmax(f) && std::fabs(v) >= qmax(f))) return c;
  const std::int64_t k = ordinal_of_code(f, c);
  const double got = value_of_ordinal(f, k);
  const std::int64_t other = got < v ? k + 1 : k - 1;  // the neighbour on v's other side
  if (other < min_ordinal(f) || other > max_ordinal(f) || got == v) return c;
  const double alt = value_of_ordinal(f, other);
  if (std::fabs(alt - v) != std::fabs(got - v)) return c;  // not a tie
  // A tie: even chose c; odd takes the other, away takes the larger magnitude.
  if (defect == QuantDefect::ties_to_odd || std::fabs(alt) > std::fabs(got)) return code_of_ordinal(f, other, std::signbit(v));
  return c;
}

std::uint8_t quantize(QuantDefect defect, QuantFormat f, double v) {
  if (defect == QuantDefect::ties_away || defect == QuantDefect::ties_to_odd) return quantize_tie(defect, f, v);
  if (defect == QuantDefect::truncates && std::isfinite(v)) {
    // The grid value of largest magnitude not above |v| (saturating).
    std::uint8_t c = encode(f, v);
    if (std::fabs(decode(f, c)) > std::fabs(v)) {
      const std::int64_t k = ordinal_of_code(f, c);
      c = code_of_ordinal(f, k + (v > 0 ? -1 : 1), std::signbit(v));
    }
    return c;
  }
  if (defect == QuantDefect::nan_on_overflow && std::fabs(v) > qmax(f) + (f == QuantFormat::int8 ? 0.5 : 0.0)) {
    if (f == QuantFormat::int8) return static_cast<std::uint8_t>(static_cast<std::int64_t>(std::nearbyint(v)) & 0xff);
    return encode(f, std::copysign(std::numeric_limits<double>::quiet_NaN(), v));  // the format's NaN
  }
  if (info(f).nan == NanCodes::negative_zero) {  // the FNUZ slips
    const std::uint8_t c = encode(f, v);
    if (defect == QuantDefect::fnuz_negative_zero && c == 0 && std::signbit(v)) return static_cast<std::uint8_t>(sign_bit(f));
    if (defect == QuantDefect::fnuz_ocp_bias && !std::isnan(v))
      return encode(info(f).mbits == 3 ? QuantFormat::fp8_e4m3 : QuantFormat::fp8_e5m2, v);
  }
  if (defect == QuantDefect::int8_clamps_127 && f == QuantFormat::int8) return encode(f, std::clamp(v, -127.0, 127.0));
  return encode(f, v);
}

}  // namespace

void run_quant_defect(QuantDefect defect, ForwardFn y_forward, const Problem& p, const Tensors& t) {
  Problem yp = p;
  yp.op.epilogue = Epilogue::y_as_x;
  std::vector<std::byte> y(static_cast<std::size_t>(p.elements()) * size_of(p.dtype));
  Tensors yt = t;
  yt.y = y.data();
  yt.q = yt.scales = nullptr;
  y_forward(yp, yt);
  const QuantSpec& spec = p.quant;
  const QuantFormat f = spec.format;
  const std::int64_t n = p.cols, G = spec.group_size(n), per_row = spec.scales_per_row(n);
  auto* q = static_cast<std::uint8_t*>(t.q);
  auto* handed = static_cast<float*>(t.quant_y);  // the y its quantizer reads, for verify (QuantInput::x_dtype_y)
  for (std::int64_t r = 0; r < p.rows; ++r) {
    std::vector<double> v(static_cast<std::size_t>(n)), in(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      double yi = cpu::param_value(p.dtype, y.data(), r * n + i);
      if (handed) handed[r * n + i] = static_cast<float>(yi);
      if (defect == QuantDefect::double_rounds && std::isfinite(yi)) yi = to_float(bf16_from_float(static_cast<float>(yi)));
      v[static_cast<std::size_t>(i)] = yi;
      in[static_cast<std::size_t>(i)] = cpu::param_value(p.op.prologue == Prologue::residual_add ? p.residual_dtype : p.dtype, t.x, r * n + i);
    }
    for (std::int64_t g = 0; g < n / G; ++g) {
      double s = spec.scale;
      if (spec.scaling != Scaling::tensor) {
        const std::vector<double>& src = defect == QuantDefect::amax_of_x ? in : v;
        const std::int64_t lo = defect == QuantDefect::group_off_by_one ? std::min(g * G + 1, n - G) : g * G;
        double amax = 0;
        bool nan = false;
        for (std::int64_t i = lo; i < lo + G; ++i) {
          nan |= std::isnan(v[static_cast<std::size_t>(i)]);
          amax = std::max(amax, std::fabs(src[static_cast<std::size_t>(i)]));
        }
        const std::int64_t at = r * per_row + g;
        if (spec.scaling == Scaling::nvfp4) {
          // c = E4M3(amax·G/6) (quant_epilogue.cpp: the double quotient rounds as the exact one); the planted slips
          // round it toward zero (truncation) or up (a ceil, to keep every block off saturation)
          const double want = amax * spec.global_scale / 6;
          std::uint8_t c = nan ? 0x7f : encode(QuantFormat::fp8_e4m3, want);
          if (!nan && std::isfinite(want)) {
            const double v = decode(QuantFormat::fp8_e4m3, c);
            if (defect == QuantDefect::nvfp4_scale_truncated && v > want && c > 0) --c;
            if (defect == QuantDefect::nvfp4_scale_rounds_up && v < want && c < 0x7e) ++c;
          }
          static_cast<std::uint8_t*>(t.scales)[at] = c;
          s = nvfp4_element_scale(c, spec.global_scale);
        } else if (spec.pow2_scales()) {  // mx, or UE8M0 row/group scales (rceil)
          int x = -127;
          if (nan) x = 128;
          else if (amax > 0 && std::isfinite(amax)) {
            const double seen = defect == QuantDefect::mx_exponent_of_bf16_amax ? to_float(bf16_from_float(static_cast<float>(amax))) : amax;
            const MxRule rule = spec.exponent_rule();
            if (rule == MxRule::floor || defect == QuantDefect::mx_rule_ignored) {
              const int fl = std::ilogb(seen);
              const int e = defect == QuantDefect::e8m0_rounds_up && std::ldexp(1.0, fl) != amax ? fl + 1 : fl;
              x = std::clamp(e - emax_elem(f), -127, 127);
            } else if (defect == QuantDefect::ue8m0_log2f && rule == MxRule::rceil) {
              // vLLM's exp2f(ceilf(log2f(amax / qmax))): log2f rounds a quotient just above 2^k to k
              x = std::clamp(static_cast<int>(std::ceil(std::log2(static_cast<float>(static_cast<float>(seen) / static_cast<float>(qmax(f)))))),
                             -127, 127);
            } else if (defect == QuantDefect::mx_ceil_as_floor_plus_one && (rule == MxRule::ceil || rule == MxRule::rceil)) {
              // ceil(log2 v) as floor(log2 v) + 1, v = amax (ceil) or amax/qmax (rceil): one binade too many exactly
              // where v is a power of two, the rule's level L (amax = 2^L, or qmax·2^L)
              const int X = mx_exponent(spec, seen);
              const double on = std::ldexp(rule == MxRule::rceil ? qmax(f) : 1.0, X + mx_offset(spec));
              x = std::min(X + (seen == on ? 1 : 0), 127);
            } else {
              x = mx_exponent(spec, seen);
            }
          }
          static_cast<std::uint8_t*>(t.scales)[at] = static_cast<std::uint8_t>(x + 127);
          s = x == 128 ? std::nan("") : std::ldexp(1.0, x);
        } else {
          float sf = nan ? std::nanf("") : static_cast<float>(amax) / static_cast<float>(qmax(f));
          if (defect == QuantDefect::scale_truncated && !nan) {  // the exact quotient toward zero
            const double exact = amax / qmax(f);  // amax has at most 24 bits: the double quotient decides the f32 one
            if (static_cast<double>(sf) > exact) sf = std::nextafter(sf, 0.0f);
          }
          if (defect == QuantDefect::scale_times_reciprocal && !nan)
            sf = static_cast<float>(amax) * (1.0f / static_cast<float>(qmax(f)));
          if (sf == 0) sf = 1.0f;
          static_cast<float*>(t.scales)[at] = sf;
          s = sf;
        }
      }
      for (std::int64_t i = g * G; i < (g + 1) * G; ++i) {
        const double yi = v[static_cast<std::size_t>(i)];
        double t_i = yi / s;
        if (defect == QuantDefect::reciprocal_multiply)
          t_i = static_cast<float>(static_cast<float>(yi) * (1.0f / static_cast<float>(s)));
        // fp4_nibbles_swapped: element i in its pair partner's nibble (a packed format's slip only).
        const std::int64_t at = defect == QuantDefect::fp4_nibbles_swapped && is_packed(f) ? (r * n + i) ^ 1 : r * n + i;
        store_code(f, q, at, std::isnan(s) || std::isnan(yi) ? encode(f, std::nan("")) : quantize(defect, f, t_i));
      }
    }
  }
}

}  // namespace lnorm::mutants
