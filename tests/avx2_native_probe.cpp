// Native AVX2 conversions and f64 operations over arrays, for tests/test_simd_native.cpp to hold against the
// emulated ones (the AVX2 twin of avx512_native_probe.cpp). Built with the kernels' AVX2 flags; called only
// after the CPU check. Uses the kernels' own operation layer (kernels/cpu/avx2_ops.hpp) inside an anonymous
// namespace; exports plain functions only (no inline or template symbols another TU could pick up).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../kernels/cpu/storage_tags.hpp"

namespace lnorm::testing::avx2_probe {
namespace {
#include "../kernels/cpu/simd_types.hpp"
#include "../kernels/cpu/avx2_ops.hpp"

using V = Avx2Ops;

template <class T>
void narrow_f(const float* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 8) {
    const auto k = static_cast<std::uint8_t>(n - i >= 8 ? 0xFF : (1u << (n - i)) - 1);
    V::mask_store<T>(k, out + i, V::maskz_load<F32>(k, in + i));
  }
}
template <class T>
void narrow_d(const double* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 4) {
    const auto k = static_cast<std::uint8_t>(n - i >= 4 ? 0xF : (1u << (n - i)) - 1);
    double buf[4] = {0, 0, 0, 0};
    for (std::int64_t j = 0; j < 4 && i + j < n; ++j) buf[j] = in[i + j];
    V::mask_store_d<T>(k, out + i, V::load_pd(buf));
  }
}
}  // namespace

// f32 → bf16 / f16, 8 lanes (integer path; AVX2 has no bf16 instruction).
void bf16_f(const float* in, std::uint16_t* out, std::int64_t n, bool) { narrow_f<BF16>(in, out, n); }
void f16_f(const float* in, std::uint16_t* out, std::int64_t n) { narrow_f<F16>(in, out, n); }
// f64 → f16/bf16 through round-to-odd f32 (4 lanes, avx2_cr's output).
void bf16_d(const double* in, std::uint16_t* out, std::int64_t n, bool) { narrow_d<BF16>(in, out, n); }
void f16_d(const double* in, std::uint16_t* out, std::int64_t n) { narrow_d<F16>(in, out, n); }
// f16 → f32 (8 lanes).
void widen_f16(const std::uint16_t* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 8) {
    const auto k = static_cast<std::uint8_t>(n - i >= 8 ? 0xFF : (1u << (n - i)) - 1);
    V::mask_store<F32>(k, out + i, V::maskz_load<F16>(k, in + i));
  }
}
// The correctly rounded kernels' f64 operations on 4 lanes (simd_emulation.hpp's emu_ops_d).
void ops_d(const double* a, const double* b, const double* c, float y_min, double* fma, double* mx, std::uint8_t* masks, std::uint16_t* near16) {
  const __m256d va = _mm256_loadu_pd(a), vb = _mm256_loadu_pd(b), vc = _mm256_loadu_pd(c);
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

// The backward's subnormal test (avx2_ops.hpp's subnormal_key): out[g] = whether either of the two vectors of
// group g (16 floats) holds a subnormal, the key taken over both.
void any_subnormal(const float* in, std::int64_t groups, std::uint8_t* out) {
  for (std::int64_t g = 0; g < groups; ++g) {
    const float* v = in + g * 16;
    out[g] = V::any_subnormal(V::subnormal_key(V::subnormal_key(V::subnormal_key_init(), _mm256_loadu_ps(v)), _mm256_loadu_ps(v + 8)));
  }
}

}  // namespace lnorm::testing::avx2_probe
