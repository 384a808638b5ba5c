// The emulated SIMD kernels (see simd_emulation.hpp). Generic code: no ISA flags, built with
// -ffp-contract=off like the native TUs (tests/CMakeLists.txt) so that no a*b + c is fused here.
#include "simd_emulation.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../kernels/cpu/isa.hpp"
#include "lnorm/params.hpp"
#include "../kernels/cpu/row_split.hpp"
#include "../kernels/cpu/backward.hpp"
#include "lnorm/half.hpp"
#include "../kernels/cpu/cr_exact.hpp"  // the cr kernels' scalar slow paths (generic f16 conversions here)

namespace lnorm::testing::simd_emulation {
namespace {
#include "../kernels/cpu/simd_types.hpp"
#include "../kernels/cpu/simd_emulated_ops.hpp"
#define LNORM_ALWAYS_INLINE  // simd_body.hpp says why
using lnorm::cpu::welford_row;
#include "../kernels/cpu/simd_body.hpp"
#include "../kernels/cpu/simd_backward_body.hpp"

// The kernels as simd_kernels.cpp drives the native ones: rows split by cpu::split_rows, parameters staged the
// same way, Add & Norm through the adaptor with the body's sum (sum_rows).
template <int L>
struct Emulated {
  using V = EmulatedOps<L>;
  static void backward_rows(const lnorm::cpu::BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
    switch (a.dtype) {
      case DType::f16: return bwd::rows<V, F16>(a, r0, r1, dg, db);
      case DType::bf16: return bwd::rows<V, BF16>(a, r0, r1, dg, db);
      default: return bwd::rows<V, F32>(a, r0, r1, dg, db);
    }
  }
  static void backward(const Problem& p, const Tensors& t) { lnorm::cpu::simd_backward(p, t, &backward_rows); }
  static void forward_fast(const Problem& p, const Tensors& t) { lnorm::cpu::staged_forward(p, t, &fast_rows<V>); }
  static void forward_cr(const Problem& p, const Tensors& t) { lnorm::cpu::staged_cr_forward(p, t, &cr_rows<V>); }
  static void add(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) { sum_rows<V>(p, t, begin, end); }
};

// What the native kernels take (simd_kernels.cpp).
constexpr Takes kFastTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms,
                           .backward_norms = kBothNorms, .prologues = kWithAdd, .epilogues = kWithQuant, .f32_residual = true};
constexpr Takes kCrTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms, .prologues = kWithAdd,
                         .epilogues = kWithQuant, .f32_residual = true, .quant_input = QuantInput::exact_y};

template <int L>
void ops_d(const double* a, const double* b, const double* c, float y_min, double* fma, double* mx, std::uint8_t* masks,
           std::uint16_t* near16) {
  using V = EmulatedOps<L>;
  typename V::D va, vb, vc;
  std::memcpy(va.v, a, sizeof va.v);
  std::memcpy(vb.v, b, sizeof vb.v);
  std::memcpy(vc.v, c, sizeof vc.v);
  V::store_pd(fma, V::fmadd_pd(va, vb, vc));
  V::store_pd(mx, V::max_pd(va, vb));
  // The f32-width steps on (a, a) and (b, b), their first L/2 lanes.
  const auto low = static_cast<unsigned>(V::kAllD);
  const typename V::F ja = V::join_ps(va, va), jb = V::join_ps(vb, vb);
  masks[0] = static_cast<std::uint8_t>(V::differ_bits(ja, jb) & low);
  masks[1] = static_cast<std::uint8_t>(V::template near_mid16_f<F16>(ja, y_min) & low);
  masks[2] = static_cast<std::uint8_t>(V::template near_mid16_f<BF16>(ja, y_min) & low);
  std::uint16_t h[16];
  V::template store<F16>(h, ja);
  std::memcpy(near16, h, sizeof(std::uint16_t) * L / 2);
  V::template store<BF16>(h, ja);
  std::memcpy(near16 + 8, h, sizeof(std::uint16_t) * L / 2);
}
}  // namespace

const KernelInfo kAvx512Emu{"avx512_emu", "avx512 with every AVX-512 operation emulated lane by lane (test kernel)", kFastTakes,
                            &Emulated<16>::forward_fast, &Emulated<16>::backward, &Emulated<16>::add};
const KernelInfo kAvx512CrEmu{"avx512_cr_emu", "avx512_cr with every AVX-512 operation emulated lane by lane (test kernel)",
                              kCrTakes, &Emulated<16>::forward_cr, nullptr, &Emulated<16>::add};
const KernelInfo kAvx2Emu{"avx2_emu", "avx2 with every AVX2 operation emulated lane by lane (test kernel)", kFastTakes,
                          &Emulated<8>::forward_fast, &Emulated<8>::backward, &Emulated<8>::add};
const KernelInfo kAvx2CrEmu{"avx2_cr_emu", "avx2_cr with every AVX2 operation emulated lane by lane (test kernel)", kCrTakes,
                            &Emulated<8>::forward_cr, nullptr, &Emulated<8>::add};

std::string native_name(const KernelInfo& k) {
  const std::string n(k.name);
  return n.substr(0, n.size() - 4);  // "..._emu"
}

std::uint16_t emu_bf16(float f) { return EmulatedOps<16>::narrow<BF16>(f); }
std::uint16_t emu_f16(float f) { return EmulatedOps<16>::narrow<F16>(f); }
float emu_f32_odd(double d) { return EmulatedOps<16>::f32_odd(d); }
float emu_widen_f16(std::uint16_t h) { return EmulatedOps<16>::widen<F16>(h); }
void emu_ops_d(int lanes, const double* a, const double* b, const double* c, float y_min, double* fma, double* mx,
               std::uint8_t* masks, std::uint16_t* near16) {
  if (lanes == 16) ops_d<16>(a, b, c, y_min, fma, mx, masks, near16);
  else ops_d<8>(a, b, c, y_min, fma, mx, masks, near16);
}

void emu_any_subnormal(int lanes, const float* in, std::int64_t groups, std::uint8_t* out) {
  const auto run = [&](auto ops) {
    using V = decltype(ops);
    for (std::int64_t g = 0; g < groups; ++g) {
      typename V::F a, b;
      std::memcpy(a.v, in + g * 2 * V::kLanes, sizeof a.v);
      std::memcpy(b.v, in + g * 2 * V::kLanes + V::kLanes, sizeof b.v);
      out[g] = V::any_subnormal(V::subnormal_key(V::subnormal_key(V::subnormal_key_init(), a), b));
    }
  };
  if (lanes == 16) run(EmulatedOps<16>{});
  else run(EmulatedOps<8>{});
}

void emu_settle_codes(int lanes, QuantFormat f, const double* y, std::int64_t n, std::int64_t G, const double* s,
                      double e_abs, double e_rel, std::uint8_t* codes, std::uint8_t* settled) {
  std::vector<std::uint64_t> bits(static_cast<std::size_t>((n + 63) / 64));
  if (lanes == 16) exact_lanes::settle_codes<EmulatedOps<16>>(f, y, n, G, s, e_abs, e_rel, codes, bits.data());
  else exact_lanes::settle_codes<EmulatedOps<8>>(f, y, n, G, s, e_abs, e_rel, codes, bits.data());
  for (std::int64_t i = 0; i < n; ++i) settled[i] = static_cast<std::uint8_t>((bits[static_cast<std::size_t>(i / 64)] >> (i % 64)) & 1u);
}

void emu_group_max_abs(int lanes, const double* y, std::int64_t n, std::int64_t G, double* amax) {
  if (lanes == 16) cr::group_max_abs<EmulatedOps<16>>(y, n, G, amax);
  else cr::group_max_abs<EmulatedOps<8>>(y, n, G, amax);
}

}  // namespace lnorm::testing::simd_emulation
