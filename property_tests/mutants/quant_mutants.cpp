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
#include "quant_mutants.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/params.hpp"  // param_value: any buffer's element, exactly
#include "lnorm/quant.hpp"

namespace lnorm::mutants {
namespace {

std::uint8_t quantize(QuantDefect defect, QuantFormat f, double v) {
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
    return std::signbit(v) ? 0xff : 0x7f;
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
  for (std::int64_t r = 0; r < p.rows; ++r) {
    std::vector<double> v(static_cast<std::size_t>(n)), in(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      double yi = cpu::param_value(p.dtype, y.data(), r * n + i);
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
        if (spec.scaling == Scaling::mx) {
          int x = -127;
          if (nan) x = 128;
          else if (amax > 0 && std::isfinite(amax)) {
            const int fl = std::ilogb(amax);
            const int e = defect == QuantDefect::e8m0_rounds_up && std::ldexp(1.0, fl) != amax ? fl + 1 : fl;
            x = std::clamp(e - emax_elem(f), -127, 127);
          }
          static_cast<std::uint8_t*>(t.scales)[at] = static_cast<std::uint8_t>(x + 127);
          s = x == 128 ? std::nan("") : std::ldexp(1.0, x);
        } else {
          float sf = nan ? std::nanf("") : static_cast<float>(amax) / static_cast<float>(qmax(f));
          if (sf == 0) sf = 1.0f;
          static_cast<float*>(t.scales)[at] = sf;
          s = sf;
        }
      }
      for (std::int64_t i = g * G; i < (g + 1) * G; ++i) {
        const double yi = v[static_cast<std::size_t>(i)];
        q[r * n + i] = std::isnan(s) || std::isnan(yi) ? encode(f, std::nan("")) : quantize(defect, f, yi / s);
      }
    }
  }
}

}  // namespace lnorm::mutants
