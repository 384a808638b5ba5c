// Native AVX-512 conversions over arrays, for tests/test_simd_native.cpp to hold against the emulated
// ones. Built with the kernels' AVX-512 flags (+ -mavx512bf16); called only after the CPU check. Uses
// the kernels' own operation layer (kernels/cpu/avx512_ops.hpp) inside an anonymous namespace;
// exports plain functions only (no inline or template symbols another TU could pick up).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../kernels/cpu/storage_tags.hpp"

namespace lnorm::testing::avx512_probe {
namespace {
#include "../kernels/cpu/simd_types.hpp"
#include "../kernels/cpu/avx512_ops.hpp"

template <bool Hw, class T>
void narrow16(const float* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    const auto k = static_cast<std::uint16_t>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    Avx512Ops<Hw>::template mask_store<T>(k, out + i, Avx512Ops<Hw>::template maskz_load<F32>(k, in + i));
  }
}
template <bool Hw, class T>
void narrow8(const double* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 8) {
    const auto k = static_cast<std::uint8_t>(n - i >= 8 ? 0xFF : (1u << (n - i)) - 1);
    const __m512d v = _mm512_maskz_loadu_pd(k, in + i);
    Avx512Ops<Hw>::template mask_store_d<T>(k, out + i, v);
  }
}
}  // namespace

// f32 → bf16 (16 lanes): hw = AVX512-BF16 (with the subnormal repair) or the integer path.
void bf16_f(const float* in, std::uint16_t* out, std::int64_t n, bool hw) {
  hw ? narrow16<true, BF16>(in, out, n) : narrow16<false, BF16>(in, out, n);
}
void f16_f(const float* in, std::uint16_t* out, std::int64_t n) { narrow16<false, F16>(in, out, n); }
// f64 → f16/bf16 through round-to-odd f32 (8 lanes, avx512_cr's output).
void bf16_d(const double* in, std::uint16_t* out, std::int64_t n, bool hw) {
  hw ? narrow8<true, BF16>(in, out, n) : narrow8<false, BF16>(in, out, n);
}
void f16_d(const double* in, std::uint16_t* out, std::int64_t n) { narrow8<false, F16>(in, out, n); }
// f16 → f32 (16 lanes).
void widen_f16(const std::uint16_t* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    const auto k = static_cast<std::uint16_t>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    Avx512Ops<false>::mask_store<F32>(k, out + i, Avx512Ops<false>::maskz_load<F16>(k, in + i));
  }
}
// Raw vcvtneps2bf16 (no repair), to show what the repair is for.
void ops_d(const double* a, const double* b, const double* c, float y_min, double* fma, double* mx, std::uint8_t* masks, std::uint16_t* near16) {
  using V = Avx512Ops<false>;
  const __m512d va = _mm512_loadu_pd(a), vb = _mm512_loadu_pd(b), vc = _mm512_loadu_pd(c);
  V::store_pd(fma, V::fmadd_pd(va, vb, vc));
  V::store_pd(mx, V::max_pd(va, vb));
  // The f32-width steps on (a, a) and (b, b), their first kDLanes lanes (simd_emulation.cpp's emu_ops_d).
  constexpr unsigned low = (1u << V::kDLanes) - 1;
  const V::F ja = V::join_ps(va, va), jb = V::join_ps(vb, vb);
  masks[0] = static_cast<std::uint8_t>(V::differ_bits(ja, jb) & low);
  masks[1] = static_cast<std::uint8_t>(V::near_mid16_f<F16>(ja, y_min) & low);
  masks[2] = static_cast<std::uint8_t>(V::near_mid16_f<BF16>(ja, y_min) & low);
  std::uint16_t h[16];
  V::store<F16>(h, ja);
  std::memcpy(near16, h, sizeof(std::uint16_t) * V::kDLanes);
  V::store<BF16>(h, ja);
  std::memcpy(near16 + 8, h, sizeof(std::uint16_t) * V::kDLanes);
}
void bf16_raw(const float* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i))));
}

// The backward's subnormal test on 16 lanes (avx2_native_probe.cpp's twin): groups of 32 floats.
void any_subnormal(const float* in, std::int64_t groups, std::uint8_t* out) {
  using V = Avx512Ops<false>;
  for (std::int64_t g = 0; g < groups; ++g) {
    const float* v = in + g * 32;
    out[g] = V::any_subnormal(V::subnormal_key(V::subnormal_key(V::subnormal_key_init(), _mm512_loadu_ps(v)), _mm512_loadu_ps(v + 16)));
  }
}

}  // namespace lnorm::testing::avx512_probe
