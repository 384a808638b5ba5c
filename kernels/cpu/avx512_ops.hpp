// The operations of the SIMD kernel bodies (simd_body.hpp, simd_backward_body.hpp) as AVX-512 intrinsics:
// 16 f32 lanes, 8 f64 lanes, opmasks. avx2_ops.hpp is the same interface on 8 and 4 lanes; every operation
// has a lane-by-lane twin in simd_emulated_ops.hpp with the same name and the same bits;
// tests/test_simd_native.cpp checks the pairs on random and special inputs, and whole kernels bit for
// bit on the verify cases. Keep the three files in step: an operation added here needs its twins.
//
// Included inside an anonymous namespace of an ISA translation unit (avx512.cpp, avx512_cr.cpp,
// avx512_bf16.cpp), after <immintrin.h>, <cstdint>, <cstring> and simd_types.hpp, so nothing here
// has external linkage and no AVX-512 code can be picked by the linker for generic callers.
//
// Bf16Hw: f32 → bf16 by AVX512-BF16's vcvtneps2bf16 (true: the TU must be built with -mavx512bf16)
// or by integer round-to-nearest-even (false). vcvtneps2bf16 treats f32 subnormal inputs as zero
// (Intel SDM, "convert_fp32_to_bfloat16": DAZ regardless of MXCSR), so subnormal lanes are redone by
// the integer path: both choices give the same bits (tested).
#ifndef LNORM_AVX512_OPS_INCLUDED
#define LNORM_AVX512_OPS_INCLUDED

template <bool Bf16Hw>
struct Avx512Ops {
  using F = __m512;   // 16 f32 lanes
  using D = __m512d;  // 8 f64 lanes
  using M = std::uint16_t;  // one bit per f32 lane
  using MD = std::uint8_t;  // one bit per f64 lane
  static constexpr int kLanes = 16, kDLanes = 8;

  // ---- 16 f32 lanes (avx512) ----
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  // Lanes outside k are +0.
  static F maskz_sub(M k, F a, F b) { return _mm512_maskz_sub_ps(k, a, b); }
  // Lanes where a != b or either is NaN (unordered not-equal).
  static M cmp_neq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
  static M mask_cmp_neq(M k, F a, F b) { return _mm512_mask_cmp_ps_mask(k, a, b, _CMP_NEQ_UQ); }
  static float first(F a) { return _mm512_cvtss_f32(a); }
  static F abs(F a) { return _mm512_abs_ps(a); }  // the sign bit cleared (NaN payloads kept)
  static F max(F a, F b) { return _mm512_max_ps(a, b); }  // a > b ? a : b (b where either is NaN, or both are zeros)
  // The largest lane, for lanes without NaN (a max is exact in any order): four shuffle-and-max steps in registers,
  // where a store and a scalar tree of 15 compares took ~30 instructions per call (mx: one call per 32 elements).
  static float hmax(F a) { return _mm512_reduce_max_ps(a); }
  // Whether any value was subnormal: avx2_ops.hpp's running unsigned minimum of bits(|a|) − 1 (below 0x007FFFFF
  // exactly for a subnormal a).
  static F subnormal_key_init() { return _mm512_castsi512_ps(_mm512_set1_epi32(-1)); }
  static F subnormal_key(F key, F a) {
    const __m512i m1 = _mm512_sub_epi32(_mm512_castps_si512(abs(a)), _mm512_set1_epi32(1));
    return _mm512_castsi512_ps(_mm512_min_epu32(_mm512_castps_si512(key), m1));
  }
  static bool any_subnormal(F key) { return _mm512_cmple_epu32_mask(_mm512_castps_si512(key), _mm512_set1_epi32(0x007FFFFE)) != 0; }
  static void store_ps(float* p, F a) { _mm512_storeu_ps(p, a); }
  // The correctly rounded kernels' f32-width steps (simd_body.hpp, cr::normalize_row). lo and hi rounded to
  // nearest f32, lo in lanes 0-7, hi in 8-15.
  static F join_ps(D lo, D hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1); }
  // Lanes whose bit patterns differ (the f32 Ziv test: y − E and y + E rounded to different f32 values).
  static M differ_bits(F a, F b) { return _mm512_cmpneq_epi32_mask(_mm512_castps_si512(a), _mm512_castps_si512(b)); }
  // The f16/bf16 Ziv test on y32, y rounded to f32: the lanes where y32's pattern is within 1 f32 ulp of a
  // midpoint pattern of T (low 13 bits 0x1000 for f16, low 16 bits 0x8000 for bf16), or |y32| < y_min, or y32
  // is NaN: those need the scalar test; elsewhere T's rounding of y32 is y*'s (cr_exact.hpp, step 3).
  template <class T>
  static M near_mid16_f(F y32, float y_min) {
    constexpr int kLow = std::is_same_v<T, F16> ? 0x1FFF : 0xFFFF, kMid = std::is_same_v<T, F16> ? 0x1000 : 0x8000;
    const __m512i bits = _mm512_castps_si512(y32);
    const __m512i dist = _mm512_abs_epi32(_mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(kLow)), _mm512_set1_epi32(kMid)));
    const __mmask16 far = _mm512_cmpgt_epi32_mask(dist, _mm512_set1_epi32(1));
    const __m512 mag = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
    const __mmask16 big = _mm512_cmp_ps_mask(mag, _mm512_set1_ps(y_min), _CMP_GE_OQ);
    return static_cast<M>(~(far & big));
  }
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
  static F maskz_load(M k, const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) return _mm512_maskz_loadu_ps(k, p);
    else return from_bits16<T>(_mm256_maskz_loadu_epi16(k, p));
  }
  template <class T, bool Finite = false>  // Finite: store2's; the same bits either way here
  static void store(typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm512_storeu_ps(p, v);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bits16<T>(v));
  }
  template <class T>
  static void mask_store(M k, typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm512_mask_storeu_ps(p, k, v);
    else _mm256_mask_storeu_epi16(p, k, to_bits16<T>(v));
  }
  // Non-temporal: p aligned to 16 * sizeof(Bits) bytes. The same values as store.
  template <class T, bool Finite = false>
  static void stream(typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm512_stream_ps(p, v);
    else _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_bits16<T>(v));
  }
  // 2 x 16 values, a then b (the same as two stores: AVX-512 narrows with one vpmovdw per vector already).
  // Finite (the caller knows no lane is NaN): the same bits; AVX2's bf16 narrowing uses it (avx2_ops.hpp).
  template <class T, bool Finite = false>
  static void store2(typename T::Bits* p, F a, F b) {
    store<T>(p, a);
    store<T>(p + 16, b);
  }
  template <class T, bool Finite = false>
  static void stream2(typename T::Bits* p, F a, F b) {
    stream<T>(p, a);
    stream<T>(p + 16, b);
  }
  static void sfence() { _mm_sfence(); }
  // A hint only (fetch the line at p into L2); no value changes.
  // Forced inline, as avx2_ops.hpp's: GCC 12's early DCE deleted calls to the out-of-line wrappers.
  __attribute__((always_inline)) static void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  __attribute__((always_inline)) static void prefetch_l1(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

  // ---- 8 f64 lanes (avx512_cr) ----
  static D zero_pd() { return _mm512_setzero_pd(); }
  static D set1_pd(double v) { return _mm512_set1_pd(v); }
  static D add_pd(D a, D b) { return _mm512_add_pd(a, b); }
  static D sub_pd(D a, D b) { return _mm512_sub_pd(a, b); }
  static D mul_pd(D a, D b) { return _mm512_mul_pd(a, b); }
  static D fmadd_pd(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static D max_pd(D a, D b) { return _mm512_max_pd(a, b); }  // a > b ? a : b (b where either is NaN)
  static D abs_pd(D a) { return _mm512_abs_pd(a); }
  static D maskz_sub_pd(MD k, D a, D b) { return _mm512_maskz_sub_pd(k, a, b); }
  static double first_pd(D a) { return _mm512_cvtsd_f64(a); }
  static void store_pd(double* p, D a) { _mm512_storeu_pd(p, a); }
  static D load_pd(const double* p) { return _mm512_loadu_pd(p); }

  template <class T>
  static D load_d(const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F64>) return _mm512_loadu_pd(p);
    else if constexpr (std::is_same_v<T, F32>) return _mm512_cvtps_pd(_mm256_loadu_ps(p));
    else return widen_d<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <class T>
  static D maskz_load_d(MD k, const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F64>) return _mm512_maskz_loadu_pd(k, p);
    else if constexpr (std::is_same_v<T, F32>) return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, p));
    else return widen_d<T>(_mm_maskz_loadu_epi16(k, p));
  }
  template <class T>
  static D widen_d(__m128i h) {
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
  static __m128i bf16_int_d(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __mmask8 nan = _mm256_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm256_mask_or_epi32(r, nan, _mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    return _mm256_cvtepi32_epi16(r);
  }
  static __m128i narrow_d_bf16(__m256 v) {
    if constexpr (Bf16Hw) {
#ifdef __AVX512BF16__
      __m128i r = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(v));
      const __mmask8 sub = _mm256_fpclass_ps_mask(v, 0x20);  // subnormal lanes (vfpclassps, DQ+VL)
      if (sub) r = _mm_mask_blend_epi16(sub, r, bf16_int_d(v));
      return r;
#endif
    }
    return bf16_int_d(v);
  }
  // One rounding to T: f32 to nearest even; f16/bf16 by round-to-odd to f32, then nearest even.
  template <class T>
  static __m128i narrow_d(D v) {
    if constexpr (std::is_same_v<T, F16>) return _mm256_cvtps_ph(to_f32_odd(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else return narrow_d_bf16(to_f32_odd(v));
  }
  template <class T>
  static void mask_store_d(MD k, typename T::Bits* p, D v) {
    if constexpr (std::is_same_v<T, F32>) _mm256_mask_storeu_ps(p, k, _mm512_cvtpd_ps(v));
    else _mm_mask_storeu_epi16(p, k, narrow_d<T>(v));
  }

  // ---- the quantized epilogue's steps (simd_quant.hpp): f64 quotients, 32-bit integer lanes, byte stores ----
  using I = __m512i;  // 16 int32 lanes
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }  // a < b ? a : b (b where either is NaN)
  static F and_ps(F a, F b) { return _mm512_and_ps(a, b); }  // bitwise (DQ)
  static M cmp_eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static D div_pd(D a, D b) { return _mm512_div_pd(a, b); }
  static D min_pd(D a, D b) { return _mm512_min_pd(a, b); }  // a < b ? a : b (b where either is NaN)
  static D and_pd(D a, D b) { return _mm512_and_pd(a, b); }  // bitwise (DQ)
  static M cmp_lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static I bits_i(F a) { return _mm512_castps_si512(a); }
  template <int N>
  static I srli_i(I a) { return _mm512_srli_epi32(a, N); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static I max_i(I a, I b) { return _mm512_max_epi32(a, b); }  // signed
  static I min_i(I a, I b) { return _mm512_min_epi32(a, b); }  // signed
  static M cmp_lt_i(I a, I b) { return _mm512_cmplt_epi32_mask(a, b); }  // signed
  static F from_bits_i(I a) { return _mm512_castsi512_ps(a); }
  static I and_i(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_i(I a, I b) { return _mm512_or_si512(a, b); }
  static I set1_i(std::int32_t v) { return _mm512_set1_epi32(v); }
  static I select_i(M k, I a, I b) { return _mm512_mask_blend_epi32(k, b, a); }  // k ? a : b
  static I cvt_i(F a) { return _mm512_cvtps_epi32(a); }  // to nearest (MXCSR's default); integer-valued lanes only
  static I round_i(F a) { return _mm512_cvtps_epi32(a); }  // to nearest, ties to even; NaN and |a| ≥ 2^31: INT32_MIN
  static void store_u8(std::uint8_t* p, I a) {           // each lane's low byte (vpmovdb truncates)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(a));
  }
  // Lanes of 4-bit codes (0..15), two a byte, the even lane's in the low nibble: L/2 bytes. As 64-bit lanes the odd
  // lane's code sits at bit 32; shifted right by 28 it lands at bit 4 of its pair's low byte, which vpmovqb keeps.
  static void store_u4(std::uint8_t* p, I a) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm512_cvtepi64_epi8(_mm512_or_si512(a, _mm512_srli_epi64(a, 28))));
  }
};

#endif
