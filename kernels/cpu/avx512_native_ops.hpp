// The operations the AVX-512 kernel bodies (avx512_body.hpp) use, as AVX-512 intrinsics. Every
// operation has a lane-by-lane twin in avx512_emulated_ops.hpp with the same name and the same bits;
// tests/test_avx512_emulation.cpp checks the pairs on random and special inputs, and whole kernels bit
// for bit on the verify cases. Keep the two files in step: an operation added here needs its twin.
//
// Included inside an anonymous namespace of an ISA translation unit (avx512.cpp, avx512_cr.cpp,
// avx512_bf16.cpp), after <immintrin.h>, <cstdint>, <cstring> and avx512_types.hpp, so nothing here
// has external linkage and no AVX-512 code can be picked by the linker for generic callers.
//
// Bf16Hw: f32 → bf16 by AVX512-BF16's vcvtneps2bf16 (true: the TU must be built with -mavx512bf16)
// or by integer round-to-nearest-even (false). vcvtneps2bf16 treats f32 subnormal inputs as zero
// (Intel SDM, "convert_fp32_to_bfloat16": DAZ regardless of MXCSR), so subnormal lanes are redone by
// the integer path: both choices give the same bits (tested).
#ifndef LNORM_AVX512_NATIVE_OPS_INCLUDED
#define LNORM_AVX512_NATIVE_OPS_INCLUDED

template <bool Bf16Hw>
struct NativeOps {
  using F = __m512;   // 16 f32 lanes
  using D = __m512d;  // 8 f64 lanes
  using M16 = std::uint16_t;
  using M8 = std::uint8_t;

  // ---- 16 f32 lanes (avx512) ----
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  // Lanes outside k are +0.
  static F maskz_sub(M16 k, F a, F b) { return _mm512_maskz_sub_ps(k, a, b); }
  // Lanes where a != b or either is NaN (unordered not-equal).
  static M16 cmp_neq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
  static M16 mask_cmp_neq(M16 k, F a, F b) { return _mm512_mask_cmp_ps_mask(k, a, b, _CMP_NEQ_UQ); }
  static float first(F a) { return _mm512_cvtss_f32(a); }
  static F abs(F a) { return _mm512_abs_ps(a); }  // the sign bit cleared (NaN payloads kept)
  static F max(F a, F b) { return _mm512_max_ps(a, b); }  // a > b ? a : b (b where either is NaN, or both are zeros)
  static M16 subnormal(F a) { return _mm512_fpclass_ps_mask(a, 0x20); }  // vfpclassps (DQ): lanes holding a subnormal
  static void store_ps(float* p, F a) { _mm512_storeu_ps(p, a); }
  // Exact widening of lanes 0-7 and 8-15 to f64.
  static D lo_pd(F a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); }
  static D hi_pd(F a) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))); }

  static __m512 widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m256i bf16_int(__m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
  }
  static __m256i narrow_bf16(__m512 v) {
    if constexpr (Bf16Hw) {
#ifdef __AVX512BF16__
      __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
      const __mmask16 sub = _mm512_fpclass_ps_mask(v, 0x20);  // subnormal lanes (vfpclassps, DQ)
      if (sub) r = _mm256_mask_blend_epi16(sub, r, bf16_int(v));
      return r;
#endif
    }
    return bf16_int(v);
  }

  template <class T>
  static F from_bits16(__m256i h) {
    if constexpr (std::is_same_v<T, F16>) return _mm512_cvtph_ps(h);
    else return widen_bf16(h);
  }
  template <class T>
  static __m256i to_bits16(F v) {
    if constexpr (std::is_same_v<T, F16>) return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else return narrow_bf16(v);
  }

  template <class T>
  static F load(const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) return _mm512_loadu_ps(p);
    else return from_bits16<T>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // Lanes outside k read nothing and are +0.
  template <class T>
  static F maskz_load(M16 k, const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) return _mm512_maskz_loadu_ps(k, p);
    else return from_bits16<T>(_mm256_maskz_loadu_epi16(k, p));
  }
  template <class T>
  static void store(typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm512_storeu_ps(p, v);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bits16<T>(v));
  }
  template <class T>
  static void mask_store(M16 k, typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm512_mask_storeu_ps(p, k, v);
    else _mm256_mask_storeu_epi16(p, k, to_bits16<T>(v));
  }
  // Non-temporal: p aligned to 16 * sizeof(Bits) bytes. The same values as store.
  template <class T>
  static void stream(typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm512_stream_ps(p, v);
    else _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_bits16<T>(v));
  }
  static void sfence() { _mm_sfence(); }
  // A hint only (fetch the line at p into L2); no value changes.
  static void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static void prefetch_l1(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

  // ---- 8 f64 lanes (avx512_cr) ----
  static D zero_pd() { return _mm512_setzero_pd(); }
  static D set1_pd(double v) { return _mm512_set1_pd(v); }
  static D add_pd(D a, D b) { return _mm512_add_pd(a, b); }
  static D sub_pd(D a, D b) { return _mm512_sub_pd(a, b); }
  static D mul_pd(D a, D b) { return _mm512_mul_pd(a, b); }
  static D fmsub_pd(D a, D b, D c) { return _mm512_fmsub_pd(a, b, c); }
  static D fmadd_pd(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static D max_pd(D a, D b) { return _mm512_max_pd(a, b); }  // a > b ? a : b (b where either is NaN)
  // Lanes whose f32 roundings (to nearest even) of a and b differ in bits: avx512_cr's f32 Ziv test.
  static M8 cvt_differ_f32(D a, D b) {
    return _mm256_cmpneq_epi32_mask(_mm256_castps_si256(_mm512_cvtpd_ps(a)), _mm256_castps_si256(_mm512_cvtpd_ps(b)));
  }
  // avx512_cr's f16/bf16 test (avx512_body.hpp, cr::round_test): y32 = y rounded to f32; the lanes
  // where y32's pattern is within 1 f32 ulp of a midpoint pattern of T (low 13 bits 0x1000 for f16,
  // low 16 bits 0x8000 for bf16), or |y32| < y_min, or y32 is NaN: those need the scalar test.
  template <class T>
  static M8 near_mid16(D y, float y_min) {
    constexpr int kLow = std::is_same_v<T, F16> ? 0x1FFF : 0xFFFF, kMid = std::is_same_v<T, F16> ? 0x1000 : 0x8000;
    const __m256 y32 = _mm512_cvtpd_ps(y);
    const __m256i bits = _mm256_castps_si256(y32);
    const __m256i dist = _mm256_abs_epi32(_mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(kLow)), _mm256_set1_epi32(kMid)));
    const __mmask8 far = _mm256_cmpgt_epi32_mask(dist, _mm256_set1_epi32(1));
    const __m256 mag = _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)));
    const __mmask8 big = _mm256_cmp_ps_mask(mag, _mm256_set1_ps(y_min), _CMP_GE_OQ);
    return static_cast<M8>(~(far & big));
  }
  static D abs_pd(D a) { return _mm512_abs_pd(a); }
  static D maskz_mov_pd(M8 k, D a) { return _mm512_maskz_mov_pd(k, a); }
  static D maskz_sub_pd(M8 k, D a, D b) { return _mm512_maskz_sub_pd(k, a, b); }
  static D blend_pd(M8 k, D a, D b) { return _mm512_mask_blend_pd(k, a, b); }  // k ? b : a
  static M8 cmp_le_pd(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
  static double first_pd(D a) { return _mm512_cvtsd_f64(a); }
  static void store_pd(double* p, D a) { _mm512_storeu_pd(p, a); }
  static D load_pd(const double* p) { return _mm512_loadu_pd(p); }
  // Integer operations on the 64-bit patterns.
  static D bits_add(D a, std::int64_t b) {
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(a), _mm512_set1_epi64(b)));
  }
  static D bits_and(D a, std::int64_t b) {
    return _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(a), _mm512_set1_epi64(b)));
  }
  static M8 bits_test(D a, std::int64_t b) { return _mm512_test_epi64_mask(_mm512_castpd_si512(a), _mm512_set1_epi64(b)); }

  template <class T>
  static D load8(const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) return _mm512_cvtps_pd(_mm256_loadu_ps(p));
    else return widen8<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <class T>
  static D maskz_load8(M8 k, const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, p));
    else return widen8<T>(_mm_maskz_loadu_epi16(k, p));
  }
  template <class T>
  static D widen8(__m128i h) {
    if constexpr (std::is_same_v<T, F16>) return _mm512_cvtps_pd(_mm256_cvtph_ps(h));
    else return _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  // f64 → f32 rounded to odd: truncate, then set the last bit if anything was lost.
  static __m256 to_f32_odd(D v) {
    const __m256 t = _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_cvtps_pd(t), v, _CMP_NEQ_OQ);
    const __m256i bits = _mm256_castps_si256(t);
    return _mm256_castsi256_ps(_mm256_mask_or_epi32(bits, inexact, bits, _mm256_set1_epi32(1)));
  }
  static __m128i bf16_int8(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __mmask8 nan = _mm256_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm256_mask_or_epi32(r, nan, _mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    return _mm256_cvtepi32_epi16(r);
  }
  static __m128i narrow8_bf16(__m256 v) {
    if constexpr (Bf16Hw) {
#ifdef __AVX512BF16__
      __m128i r = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(v));
      const __mmask8 sub = _mm256_fpclass_ps_mask(v, 0x20);  // subnormal lanes (vfpclassps, DQ+VL)
      if (sub) r = _mm_mask_blend_epi16(sub, r, bf16_int8(v));
      return r;
#endif
    }
    return bf16_int8(v);
  }
  // One rounding to T: f32 to nearest even; f16/bf16 by round-to-odd to f32, then nearest even.
  template <class T>
  static __m128i narrow8(D v) {
    if constexpr (std::is_same_v<T, F16>) return _mm256_cvtps_ph(to_f32_odd(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else return narrow8_bf16(to_f32_odd(v));
  }
  template <class T>
  static void store8(typename T::Bits* p, D v) {
    if constexpr (std::is_same_v<T, F32>) _mm256_storeu_ps(p, _mm512_cvtpd_ps(v));
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow8<T>(v));
  }
  template <class T>
  static void mask_store8(M8 k, typename T::Bits* p, D v) {
    if constexpr (std::is_same_v<T, F32>) _mm256_mask_storeu_ps(p, k, _mm512_cvtpd_ps(v));
    else _mm_mask_storeu_epi16(p, k, narrow8<T>(v));
  }
  // f16/bf16 only: v rounded to nearest f32 (y32), then to nearest T: two roundings, y's correct
  // rounding only where near_mid16 certified it (avx512_body.hpp, cr::normalize_row); one conversion
  // fewer than narrow8's round-to-odd.
  template <class T>
  static __m128i narrow8_near(D v) {
    const __m256 y32 = _mm512_cvtpd_ps(v);
    if constexpr (std::is_same_v<T, F16>) return _mm256_cvtps_ph(y32, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else return narrow8_bf16(y32);
  }
  template <class T>
  static void store8_near(typename T::Bits* p, D v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow8_near<T>(v));
  }
  template <class T>
  static void stream8_near(typename T::Bits* p, D v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow8_near<T>(v));
  }
  // Non-temporal: p aligned to 8 * sizeof(Bits) bytes.
  template <class T>
  static void stream8(typename T::Bits* p, D v) {
    if constexpr (std::is_same_v<T, F32>) _mm256_stream_ps(p, _mm512_cvtpd_ps(v));
    else _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow8<T>(v));
  }
};

#endif
