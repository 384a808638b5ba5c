// The emulated AVX-512 kernels (see avx512_emulation.hpp). Generic code: no -mavx512 flags, built with
// -ffp-contract=off like the native TUs (tests/CMakeLists.txt) so that no a*b + c is fused here.
#include "avx512_emulation.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../kernels/cpu/isa.hpp"
#include "lnorm/params.hpp"
#include "../kernels/cpu/row_split.hpp"
#include "../kernels/cpu/backward.hpp"
#include "lnorm/half.hpp"
#include "../kernels/cpu/avx2_cr_exact.hpp"  // avx512_cr's scalar slow paths (generic f16 conversions here)

namespace lnorm::testing::avx512_emulation {
namespace {
#include "../kernels/cpu/avx512_types.hpp"
#include "../kernels/cpu/avx512_emulated_ops.hpp"
using lnorm::cpu::welford_row;
#include "../kernels/cpu/avx512_body.hpp"
#include "../kernels/cpu/avx512_backward_body.hpp"

// The backward rows as avx512.cpp dispatches them.
void backward_rows(const lnorm::cpu::BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  switch (a.dtype) {
    case DType::f16: return bwd::rows<EmulatedOps, F16>(a, r0, r1, dg, db);
    case DType::bf16: return bwd::rows<EmulatedOps, BF16>(a, r0, r1, dg, db);
    default: return bwd::rows<EmulatedOps, F32>(a, r0, r1, dg, db);
  }
}

// Rows split as the native kernels' (and every CPU kernel's) are: cpu::split_rows.
// Parameters staged as avx512_kernel.cpp stages them.
// Add & Norm as the native kernels declare it: the adaptor with the body's sum (sum_rows).
void backward(const Problem& p, const Tensors& t) { lnorm::cpu::simd_backward(p, t, &backward_rows); }
void forward_fast(const Problem& p, const Tensors& t) {
  lnorm::cpu::StagedParams<float> staged;
  if (!lnorm::cpu::params_in_place(p)) staged = lnorm::cpu::stage_params<float>(p, t);
  const lnorm::cpu::Staged s{staged.gamma(), staged.beta()};
  lnorm::cpu::split_rows(p, [&](std::int64_t begin, std::int64_t end) { fast_rows<EmulatedOps>(p, t, begin, end, s); });
}
void forward_cr(const Problem& p, const Tensors& t) {
  lnorm::cpu::split_rows(p, [&](std::int64_t begin, std::int64_t end) { cr_rows<EmulatedOps>(p, t, begin, end); });
}
// The residual in x's dtype, as the native kernels'.
constexpr Takes kFastTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms,
                           .backward_norms = kBothNorms, .prologues = kWithAdd};
constexpr Takes kCrTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms, .prologues = kWithAdd};
}  // namespace

const KernelInfo kAvx512Emu{"avx512_emu", "avx512 with every AVX-512 operation emulated lane by lane (test kernel)",
                            kFastTakes, &forward_fast, &backward, &sum_rows<EmulatedOps>};
const KernelInfo kAvx512CrEmu{"avx512_cr_emu", "avx512_cr with every AVX-512 operation emulated lane by lane (test kernel)",
                              kCrTakes, &forward_cr, nullptr, &sum_rows<EmulatedOps>};

std::uint16_t emu_bf16(float f) { return EmulatedOps::narrow<BF16>(f); }
std::uint16_t emu_f16(float f) { return EmulatedOps::narrow<F16>(f); }
float emu_f32_odd(double d) { return EmulatedOps::f32_odd(d); }
float emu_widen_f16(std::uint16_t h) { return EmulatedOps::widen<F16>(h); }
void emu_ops8(const double* a, const double* b, const double* c, float y_min, double* fma, double* mx, std::uint8_t* masks, std::uint16_t* near16) {
  EmulatedOps::D va, vb, vc;
  std::memcpy(va.v, a, sizeof va.v);
  std::memcpy(vb.v, b, sizeof vb.v);
  std::memcpy(vc.v, c, sizeof vc.v);
  EmulatedOps::store_pd(fma, EmulatedOps::fmadd_pd(va, vb, vc));
  EmulatedOps::store_pd(mx, EmulatedOps::max_pd(va, vb));
  masks[0] = EmulatedOps::cvt_differ_f32(va, vb);
  masks[1] = EmulatedOps::near_mid16<F16>(va, y_min);
  masks[2] = EmulatedOps::near_mid16<BF16>(va, y_min);
  EmulatedOps::store8_near<F16>(near16, va);
  EmulatedOps::store8_near<BF16>(near16 + 8, va);
}

}  // namespace lnorm::testing::avx512_emulation
