// A version-5 plugin whose kernel writes the quantized epilogue (LNORM_EPILOGUE_QUANTIZED), for test_cli_plugin.cpp:
// plugin "quant", kernel quant:two_pass — the example's two-pass LayerNorm (y in f32 from double statistics), then
// q = Q(y/s) by its own quantizer, as a user's fused kernel would carry one: the nearest code by search over the
// format's values (ties to even, saturating), y/s in double; row/group scales f32(amax/qmax) of its f32 y, mx
// exponents floor(log2 amax) − emax_elem; a group holding a NaN gets a NaN scale and NaN codes (lnorm/quant.hpp).
//   -DLNORM_TEST_QUANT_TRUNCATE   the planted bug: codes truncated toward zero instead of rounded
//   -DLNORM_TEST_QUANT_TIES_AWAY  exact ties rounded away from zero (C's round()), 0.5 quantum from y*/s like the right
//                                 code: inside q's budget, caught only by the contract on the y it hands out
//   -DLNORM_TEST_QUANT_SCALE_RECIPROCAL  row/group scales amax·f32(1/qmax): one f32 rounding off
//   -DLNORM_TEST_QUANT_MX_BF16_AMAX      the MX exponent of amax rounded to bf16: a binade high just below 2^k
//   -DLNORM_TEST_QUANT_STATIC     a static-FP8 kernel (vLLM's rms_norm_static_fp8_quant's kind): fp8_e4m3 with a
//                                 tensor scale only, the rest declined in why_not
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "../../examples/plugin/two_pass.hpp"

namespace {

// The fp8 formats it writes: OCP E4M3FN and E5M2, and AMD's FNUZ pair (bias one higher, NaN 0x80 only, no −0).
bool fnuz(int fmt) { return fmt == LNORM_FP8_E4M3FNUZ || fmt == LNORM_FP8_E5M2FNUZ; }
bool e4m3(int fmt) { return fmt == LNORM_FP8_E4M3 || fmt == LNORM_FP8_E4M3FNUZ; }
bool knows(int fmt) { return fmt == LNORM_INT8 || e4m3(fmt) || fmt == LNORM_FP8_E5M2 || fmt == LNORM_FP8_E5M2FNUZ; }

double fp8_value(int fmt, unsigned mag) {
  const int mbits = e4m3(fmt) ? 3 : 2, bias = (e4m3(fmt) ? 7 : 15) + (fnuz(fmt) ? 1 : 0);
  const unsigned e = mag >> mbits, m = mag & ((1u << mbits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  return std::ldexp(static_cast<double>((1u << mbits) | m), static_cast<int>(e) - bias - mbits);
}

std::uint8_t encode(int fmt, double v) {
  if (fmt == LNORM_INT8) {
    if (std::isnan(v)) return 0;
    const double c = std::fmin(std::fmax(v, -128.0), 127.0);
#ifdef LNORM_TEST_QUANT_TRUNCATE
    return static_cast<std::uint8_t>(static_cast<std::int8_t>(std::trunc(c)));
#else
#ifdef LNORM_TEST_QUANT_TIES_AWAY
    return static_cast<std::uint8_t>(static_cast<std::int8_t>(std::round(c)));
#else
    return static_cast<std::uint8_t>(static_cast<std::int8_t>(std::nearbyint(c)));  // the default mode: ties to even
#endif
#endif
  }
  std::uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  if (std::isnan(v)) return fnuz(fmt) ? 0x80 : static_cast<std::uint8_t>(sign | 0x7f);
  const unsigned top = fnuz(fmt) ? 0x7f : fmt == LNORM_FP8_E4M3 ? 0x7e : 0x7b;
  const double a = std::fabs(v);
  unsigned best = 0;
  for (unsigned mag = 1; mag <= top; ++mag) {  // values increase with the code: the last one not above a, or the next
    if (fp8_value(fmt, mag) > a) {
#ifdef LNORM_TEST_QUANT_TRUNCATE
      break;
#else
      const double below = a - fp8_value(fmt, mag - 1), above = fp8_value(fmt, mag) - a;
#ifdef LNORM_TEST_QUANT_TIES_AWAY
      best = above <= below ? mag : mag - 1;
#else
      best = above < below || (above == below && (mag & 1u) == 0) ? mag : mag - 1;
#endif
      if (best == 0 && fnuz(fmt)) sign = 0;  // one zero
      return static_cast<std::uint8_t>(sign | best);
#endif
    }
    best = mag;
  }
  return static_cast<std::uint8_t>(sign | best);  // at or past the largest value: saturated
}

void run(const lnorm_problem* p, const lnorm_tensors* t) {
  if (p->epilogue != LNORM_EPILOGUE_QUANTIZED) return demo::two_pass_f32<true>(p, t);
  const std::int64_t n = p->cols, G = p->quant_group;
  std::vector<float> y(static_cast<std::size_t>(p->rows * n)), mean(static_cast<std::size_t>(p->rows)), rstd(mean.size());
  lnorm_tensors inner = *t;
  inner.y = y.data(), inner.mean = mean.data(), inner.rstd = rstd.data();
  demo::two_pass_f32<true>(p, &inner);
  const double qmax = p->quant_format == LNORM_FP8_E4M3       ? 448
                      : p->quant_format == LNORM_FP8_E4M3FNUZ ? 240
                      : p->quant_format == LNORM_INT8         ? 127
                                                              : 57344;
  const int emax = p->quant_format == LNORM_FP8_E4M3 ? 8 : 15;
  auto* q = static_cast<std::uint8_t*>(t->q);
  for (std::int64_t r = 0; r < p->rows; ++r)
    for (std::int64_t g = 0; g < n / G; ++g) {
      const float* yg = y.data() + r * n + g * G;
      std::uint8_t* qg = q + r * n + g * G;
      const std::int64_t at = r * (n / G) + g;
      double s = p->quant_scale;
      if (p->quant_scaling != LNORM_SCALING_TENSOR) {
        float amax = 0;
        bool nan = false;
        for (std::int64_t i = 0; i < G; ++i) nan |= std::isnan(yg[i]), amax = std::fmax(amax, std::fabs(yg[i]));
        if (p->quant_scaling == LNORM_SCALING_MX) {
#ifdef LNORM_TEST_QUANT_MX_BF16_AMAX
          std::uint32_t bits;
          std::memcpy(&bits, &amax, 4);
          bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;  // to bf16, nearest even
          float seen;
          std::memcpy(&seen, &bits, 4);
#else
          const float seen = amax;
#endif
          const int x = nan ? 128 : amax == 0 ? -127 : std::clamp(std::ilogb(seen) - emax, -127, 127);
          static_cast<std::uint8_t*>(t->scales)[at] = static_cast<std::uint8_t>(x + 127);
          s = nan ? std::nan("") : std::ldexp(1.0, x);
        } else {
#ifdef LNORM_TEST_QUANT_SCALE_RECIPROCAL
          float sf = nan ? std::numeric_limits<float>::quiet_NaN() : amax * (1.0f / static_cast<float>(qmax));
#else
          float sf = nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(amax / qmax);
#endif
          if (sf == 0) sf = 1;
          static_cast<float*>(t->scales)[at] = sf;
          s = sf;
        }
      }
      for (std::int64_t i = 0; i < G; ++i) qg[i] = encode(p->quant_format, static_cast<double>(yg[i]) / s);
    }
  // The y its quantizer read, when lnorm asks (lnorm_kernel_decl.quant_input below; a field lnorm's struct has).
  if (t->struct_size >= offsetof(lnorm_tensors, quant_y) + sizeof(void*) && t->quant_y)
    std::memcpy(t->quant_y, y.data(), y.size() * sizeof(float));
}

const lnorm_op_desc kOps[] = {
    {"layernorm", LNORM_NORM_LAYERNORM, LNORM_PROLOGUE_NONE, LNORM_EPILOGUE_Y, LNORM_DIRECTION_FWD},
    {"layernorm_quant", LNORM_NORM_LAYERNORM, LNORM_PROLOGUE_NONE, LNORM_EPILOGUE_QUANTIZED, LNORM_DIRECTION_FWD},
};
const lnorm_kernel_decl kDecl = {sizeof(lnorm_kernel_decl), kOps, sizeof kOps / sizeof kOps[0], LNORM_QUANT_INPUT_F32_Y,
                                 sizeof(lnorm_problem)};
const lnorm_kernel_decl* const kDecls[] = {&kDecl};

int no_offset(const lnorm_problem* p, char* reason, size_t size) {
#ifdef LNORM_TEST_QUANT_STATIC
  if (p->epilogue == LNORM_EPILOGUE_QUANTIZED && (p->quant_format != LNORM_FP8_E4M3 || p->quant_scaling != LNORM_SCALING_TENSOR)) {
    std::snprintf(reason, size, "writes fp8_e4m3 with a tensor scale only");
    return 1;
  }
#endif
  if (p->epilogue == LNORM_EPILOGUE_QUANTIZED && !knows(p->quant_format)) {  // a format appended after it was built
    std::snprintf(reason, size, "does not write format %d", p->quant_format);
    return 1;
  }
  if (p->epilogue == LNORM_EPILOGUE_QUANTIZED && (p->quant_scaling > LNORM_SCALING_MX || p->quant_mx_rule != LNORM_MX_FLOOR ||
                                                  p->quant_scale_format != LNORM_SCALE_F32)) {
    std::snprintf(reason, size, "writes tensor, row, group (f32) and mx (floor) scales only");  // nvfp4, other rules, UE8M0
    return 1;
  }
  if (p->gamma_offset == 0) return 0;
  std::snprintf(reason, size, "takes no gamma offset");
  return 1;
}

const lnorm_plugin_kernel kKernels[] = {
    {"two_pass", "two-pass LayerNorm in double, f32 in and out; q by its own quantizer", LNORM_DTYPE_BIT(LNORM_F32),
     no_offset, run, 0},
};

const lnorm_plugin kPlugin = {LNORM_PLUGIN_ABI_VERSION, "quant", sizeof kKernels / sizeof kKernels[0], kKernels, kDecls};

}  // namespace

const lnorm_plugin* lnorm_plugin_entry(void) { return &kPlugin; }
