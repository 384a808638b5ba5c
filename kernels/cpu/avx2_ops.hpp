// The operations of the SIMD kernel bodies (simd_body.hpp, simd_backward_body.hpp) as AVX2 + FMA + F16C
// intrinsics: 8 f32 lanes, 4 f64 lanes. The interface of avx512_ops.hpp at half the width; AVX2 has no
// opmasks, so a mask is a bit per lane (as AVX-512's) turned into a vector mask where an operation needs one
// (lane_mask), and the 16-bit masked loads and stores, which AVX2 lacks, go through a small stack buffer
// (tails and heads only). Every operation has a lane-by-lane twin in simd_emulated_ops.hpp (EmulatedOps<8>)
// with the same bits; tests/test_simd_native.cpp checks them.
//
// Included inside an anonymous namespace of an ISA translation unit (avx2.cpp, avx2_cr.cpp) built with
// -mavx2 -mfma -mf16c -ffp-contract=off, after <immintrin.h>, <cstdint>, <cstring> and simd_types.hpp.
#ifndef LNORM_AVX2_OPS_INCLUDED
#define LNORM_AVX2_OPS_INCLUDED

struct Avx2Ops {
  using F = __m256;   // 8 f32 lanes
  using D = __m256d;  // 4 f64 lanes
  using M = std::uint8_t;   // one bit per f32 lane
  using MD = std::uint8_t;  // one bit per f64 lane (low 4 bits)
  static constexpr int kLanes = 8, kDLanes = 4;

  // Bit masks to vector masks: lane i all ones where bit i of k is set.
  static __m256i lane_mask(unsigned k) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(k)), bit), bit);
  }
  static __m128i lane_mask4(unsigned k) {
    const __m128i bit = _mm_setr_epi32(1, 2, 4, 8);
    return _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(static_cast<int>(k)), bit), bit);
  }
  static __m256i lane_mask_pd(unsigned k) {
    const __m256i bit = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(static_cast<long long>(k)), bit), bit);
  }

  // ---- 8 f32 lanes ----
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F maskz_sub(M k, F a, F b) { return _mm256_and_ps(_mm256_sub_ps(a, b), _mm256_castsi256_ps(lane_mask(k))); }
  static M cmp_neq(F a, F b) { return static_cast<M>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_NEQ_UQ))); }
  static M mask_cmp_neq(M k, F a, F b) { return static_cast<M>(k & cmp_neq(a, b)); }
  static float first(F a) { return _mm256_cvtss_f32(a); }
  static F abs(F a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }  // a > b ? a : b (b where either is NaN, or both are zeros)
  // The largest lane, for lanes without NaN (a max is exact in any order), in registers (avx512_ops.hpp's hmax).
  static float hmax(F a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
  // Whether any of a row's values was subnormal, as a running unsigned minimum of bits(|a|) − 1 per lane (key
  // starts at all ones, subnormal_key_init): that is below 0x007FFFFF exactly for a subnormal a (±0 wraps to all
  // ones; normals, Inf and NaN are at or above it). Two instructions besides |a| (shared with the row's max|a|),
  // where an exponent-and-fraction test took seven on AVX2 (the backward's pass 1: simd_backward_body.hpp).
  static F subnormal_key_init() { return _mm256_castsi256_ps(_mm256_set1_epi32(-1)); }
  static F subnormal_key(F key, F a) {
    const __m256i m1 = _mm256_sub_epi32(_mm256_castps_si256(abs(a)), _mm256_set1_epi32(1));
    return _mm256_castsi256_ps(_mm256_min_epu32(_mm256_castps_si256(key), m1));
  }
  static bool any_subnormal(F key) {
    const __m256i k = _mm256_castps_si256(key);
    const __m256i below = _mm256_cmpeq_epi32(_mm256_min_epu32(k, _mm256_set1_epi32(0x007FFFFE)), k);  // k ≤ 0x007FFFFE
    return _mm256_movemask_ps(_mm256_castsi256_ps(below)) != 0;
  }
  static void store_ps(float* p, F a) { _mm256_storeu_ps(p, a); }
  // avx512_ops.hpp's f32-width steps of the correctly rounded kernels, on 8 lanes (lo in 0-3, hi in 4-7).
  static F join_ps(D lo, D hi) { return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)); }
  static M differ_bits(F a, F b) {
    const __m256i same = _mm256_cmpeq_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b));
    return static_cast<M>(~_mm256_movemask_ps(_mm256_castsi256_ps(same)));
  }
  template <class T>
  static M near_mid16_f(F y32, float y_min) {
    constexpr int kLow = std::is_same_v<T, F16> ? 0x1FFF : 0xFFFF, kMid = std::is_same_v<T, F16> ? 0x1000 : 0x8000;
    const __m256i bits = _mm256_castps_si256(y32);
    const __m256i dist = _mm256_abs_epi32(_mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(kLow)), _mm256_set1_epi32(kMid)));
    const __m256i far = _mm256_cmpgt_epi32(dist, _mm256_set1_epi32(1));
    const __m256 mag = _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)));
    const __m256 big = _mm256_cmp_ps(mag, _mm256_set1_ps(y_min), _CMP_GE_OQ);
    return static_cast<M>(~_mm256_movemask_ps(_mm256_and_ps(_mm256_castsi256_ps(far), big)));
  }
  static D lo_pd(F a) { return _mm256_cvtps_pd(_mm256_castps256_ps128(a)); }
  static D hi_pd(F a) { return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)); }

  // f32 → bf16 by integer round-to-nearest-even; NaN keeps its sign and top payload, quiet bit set (as
  // vcvtneps2bf16 and the emulation). 32-bit lanes holding the 16-bit result.
  static __m256i bf16_int32(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i r = bf16_int32_finite(v);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, quiet, nan);
  }
  template <bool Finite = false>
  static __m128i bf16_int(__m256 v) {
    const __m256i r = Finite ? bf16_int32_finite(v) : bf16_int32(v);  // ≤ 0xFFFF per lane: packus keeps it
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  static __m256 widen_bf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

  template <class T>
  static F from_bits16(__m128i h) {
    if constexpr (std::is_same_v<T, F16>) return _mm256_cvtph_ps(h);
    else return widen_bf16(h);
  }
  // Finite: as store2's (below).
  template <class T, bool Finite = false>
  static __m128i to_bits16(F v) {
    if constexpr (std::is_same_v<T, F16>) return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else return bf16_int<Finite>(v);
  }

  template <class T>
  static F load(const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) return _mm256_loadu_ps(p);
    else return from_bits16<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // Lanes outside k read nothing and are +0 (vmaskmovps does not fault on them; 16-bit lanes are copied).
  template <class T>
  static F maskz_load(M k, const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F32>) {
      return _mm256_maskload_ps(p, lane_mask(k));
    } else {
      alignas(16) std::uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < 8; ++i)
        if ((k >> i) & 1u) buf[i] = p[i];
      return from_bits16<T>(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
    }
  }
  template <class T, bool Finite = false>
  static void store(typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm256_storeu_ps(p, v);
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bits16<T, Finite>(v));
  }
  template <class T>
  static void mask_store(M k, typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) {
      _mm256_maskstore_ps(p, lane_mask(k), v);
    } else {
      alignas(16) std::uint16_t buf[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(buf), to_bits16<T>(v));
      for (int i = 0; i < 8; ++i)
        if ((k >> i) & 1u) p[i] = buf[i];
    }
  }
  // 16 values, a then b: the same bits as store(p, a); store(p + 8, b). bf16 narrows both with one in-lane pack
  // and one permute, not an extract and a pack per vector: perf put 60% of avx2's bf16 output loop on those.
  // Finite: the caller knows no lane is NaN (Inf may be), so bf16 skips the NaN lanes' quieting: 4 of its 13
  // operations per vector (the same bits for every non-NaN lane).
  template <class T, bool Finite = false>
  static void store2(typename T::Bits* p, F a, F b) {
    if constexpr (std::is_same_v<T, BF16>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack_bf16<Finite>(a, b));
    } else {
      store<T>(p, a);
      store<T>(p + 8, b);
    }
  }
  // Non-temporal: p aligned to 32 bytes.
  template <class T, bool Finite = false>
  static void stream2(typename T::Bits* p, F a, F b) {
    if constexpr (std::is_same_v<T, BF16>) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p), pack_bf16<Finite>(a, b));
    } else if constexpr (std::is_same_v<T, F32>) {
      _mm256_stream_ps(p, a);
      _mm256_stream_ps(p + 8, b);
    } else {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm256_set_m128i(to_bits16<T>(b), to_bits16<T>(a)));
    }
  }
  // Round to nearest even without the NaN case: ±Inf and the overflow of the largest values to Inf come out right.
  static __m256i bf16_int32_finite(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  }
  template <bool Finite = false>
  static __m256i pack_bf16(F a, F b) {
    // packus interleaves the 128-bit halves (a0-3 b0-3 | a4-7 b4-7); the permute puts a before b.
    if constexpr (Finite) return _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_int32_finite(a), bf16_int32_finite(b)), 0xD8);
    else return _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_int32(a), bf16_int32(b)), 0xD8);
  }
  // Non-temporal: p aligned to 8 * sizeof(Bits) bytes. The same values as store.
  template <class T, bool Finite = false>
  static void stream(typename T::Bits* p, F v) {
    if constexpr (std::is_same_v<T, F32>) _mm256_stream_ps(p, v);
    else _mm_stream_si128(reinterpret_cast<__m128i*>(p), to_bits16<T, Finite>(v));
  }
  static void sfence() { _mm_sfence(); }
  // Forced inline: GCC 12 found these wrappers of __builtin_prefetch "looping const" and its first DCE of
  // the callers (cddce1, before they were inlined) deleted the backward's calls to prefetch_l1 from avx2.cpp
  // as dead code (none of avx2's 24 prefetcht0 reached the object; avx512.cpp's did). Inlined first, the
  // builtin is kept.
  __attribute__((always_inline)) static void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  __attribute__((always_inline)) static void prefetch_l1(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

  // ---- 4 f64 lanes (avx2_cr) ----
  static D zero_pd() { return _mm256_setzero_pd(); }
  static D set1_pd(double v) { return _mm256_set1_pd(v); }
  static D add_pd(D a, D b) { return _mm256_add_pd(a, b); }
  static D sub_pd(D a, D b) { return _mm256_sub_pd(a, b); }
  static D mul_pd(D a, D b) { return _mm256_mul_pd(a, b); }
  static D fmadd_pd(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  static D max_pd(D a, D b) { return _mm256_max_pd(a, b); }  // a > b ? a : b (b where either is NaN)
  static D abs_pd(D a) { return _mm256_and_pd(a, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFLL))); }
  static D maskz_sub_pd(MD k, D a, D b) { return _mm256_and_pd(_mm256_sub_pd(a, b), _mm256_castsi256_pd(lane_mask_pd(k))); }
  static double first_pd(D a) { return _mm256_cvtsd_f64(a); }
  static void store_pd(double* p, D a) { _mm256_storeu_pd(p, a); }
  static D load_pd(const double* p) { return _mm256_loadu_pd(p); }

  template <class T>
  static D widen_d(__m128i h) {  // 4 16-bit values in the low 64 bits
    if constexpr (std::is_same_v<T, F16>) return _mm256_cvtps_pd(_mm_cvtph_ps(h));
    else return _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16)));
  }
  template <class T>
  static D load_d(const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F64>) return _mm256_loadu_pd(p);
    else if constexpr (std::is_same_v<T, F32>) return _mm256_cvtps_pd(_mm_loadu_ps(p));
    else return widen_d<T>(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  template <class T>
  static D maskz_load_d(MD k, const typename T::Bits* p) {
    if constexpr (std::is_same_v<T, F64>) {
      return _mm256_maskload_pd(p, lane_mask_pd(k));
    } else if constexpr (std::is_same_v<T, F32>) {
      return _mm256_cvtps_pd(_mm_maskload_ps(p, lane_mask4(k)));
    } else {
      alignas(16) std::uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < 4; ++i)
        if ((k >> i) & 1u) buf[i] = p[i];
      return widen_d<T>(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
    }
  }
  // f64 → f32 rounded to odd. AVX2 has no embedded rounding mode: the nearest f32, stepped back one ulp toward
  // zero where it landed farther from zero than v (an overflow to Inf steps back to the largest finite value),
  // is the truncation; then the last bit set where inexact (the emulation's f32_odd, the same steps).
  static __m128 to_f32_odd(D v) {
    const __m128 f = _mm256_cvtpd_ps(v);
    const __m128i away = mask_pd_to_ps(_mm256_cmp_pd(abs_pd(_mm256_cvtps_pd(f)), abs_pd(v), _CMP_GT_OQ));
    __m128i bits = _mm_add_epi32(_mm_castps_si128(f), away);  // −1 (one step toward zero) where away
    const __m128i inexact = mask_pd_to_ps(_mm256_cmp_pd(_mm256_cvtps_pd(_mm_castsi128_ps(bits)), v, _CMP_NEQ_OQ));
    bits = _mm_or_si128(bits, _mm_and_si128(inexact, _mm_set1_epi32(1)));
    return _mm_castsi128_ps(bits);
  }
  // A 4-lane f64 compare mask as a 4-lane 32-bit one (the low half of each 64-bit lane: all ones or zero).
  static __m128i mask_pd_to_ps(D m) {
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
  }
  static __m128i bf16_int_d(__m128 v) {  // 4 lanes, in the low 64 bits
    const __m128i bits = _mm_castps_si128(v);
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(bits, 16), _mm_set1_epi32(1));
    const __m128i r = _mm_srli_epi32(_mm_add_epi32(bits, _mm_add_epi32(lsb, _mm_set1_epi32(0x7FFF))), 16);
    const __m128i nan = _mm_castps_si128(_mm_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m128i quiet = _mm_or_si128(_mm_srli_epi32(bits, 16), _mm_set1_epi32(0x40));
    const __m128i out = _mm_blendv_epi8(r, quiet, nan);
    return _mm_packus_epi32(out, out);
  }
  template <class T>
  static __m128i narrow_f32(__m128 v) {
    if constexpr (std::is_same_v<T, F16>) return _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else return bf16_int_d(v);
  }
  // One rounding to T: f32 to nearest even; f16/bf16 by round-to-odd to f32, then nearest even.
  template <class T>
  static __m128i narrow_d(D v) {
    return narrow_f32<T>(to_f32_odd(v));
  }
  template <class T>
  static void mask_store_d(MD k, typename T::Bits* p, D v) {
    if constexpr (std::is_same_v<T, F32>) {
      _mm_maskstore_ps(p, lane_mask4(k), _mm256_cvtpd_ps(v));
    } else {
      alignas(16) std::uint16_t buf[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(buf), narrow_d<T>(v));
      for (int i = 0; i < 4; ++i)
        if ((k >> i) & 1u) p[i] = buf[i];
    }
  }

  // ---- the quantized epilogue's steps (simd_quant.hpp): f64 quotients, 32-bit integer lanes, byte stores ----
  using I = __m256i;  // 8 int32 lanes
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }  // a < b ? a : b (b where either is NaN)
  static F and_ps(F a, F b) { return _mm256_and_ps(a, b); }  // bitwise
  static M cmp_eq(F a, F b) { return static_cast<M>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ))); }
  static D div_pd(D a, D b) { return _mm256_div_pd(a, b); }
  static D min_pd(D a, D b) { return _mm256_min_pd(a, b); }  // a < b ? a : b (b where either is NaN)
  static D and_pd(D a, D b) { return _mm256_and_pd(a, b); }  // bitwise
  static M cmp_lt(F a, F b) { return static_cast<M>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ))); }
  static I bits_i(F a) { return _mm256_castps_si256(a); }
  template <int N>
  static I srli_i(I a) { return _mm256_srli_epi32(a, N); }
  static I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  static I max_i(I a, I b) { return _mm256_max_epi32(a, b); }  // signed
  static I min_i(I a, I b) { return _mm256_min_epi32(a, b); }  // signed
  static M cmp_lt_i(I a, I b) { return static_cast<M>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(b, a)))); }  // signed
  static F from_bits_i(I a) { return _mm256_castsi256_ps(a); }
  static I and_i(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_i(I a, I b) { return _mm256_or_si256(a, b); }
  static I set1_i(std::int32_t v) { return _mm256_set1_epi32(v); }
  static I select_i(M k, I a, I b) { return _mm256_blendv_epi8(b, a, lane_mask(k)); }  // k ? a : b
  static I cvt_i(F a) { return _mm256_cvtps_epi32(a); }  // to nearest (MXCSR's default); integer-valued lanes only
  static I round_i(F a) { return _mm256_cvtps_epi32(a); }  // to nearest, ties to even; NaN and |a| ≥ 2^31: INT32_MIN
  static void store_u8(std::uint8_t* p, I a) {           // each lane's low byte: bytes 0, 4, 8, 12 of each half
    const __m256i low = _mm256_shuffle_epi8(a, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i both = _mm_unpacklo_epi32(_mm256_castsi256_si128(low), _mm256_extracti128_si256(low, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), both);
  }
  // Lanes of 4-bit codes (0..15), two a byte, the even lane's in the low nibble: 4 bytes (avx512_ops.hpp's store_u4:
  // the odd lane's code moved to bit 4 of its 64-bit pair's low byte, then bytes 0 and 8 of each half).
  static void store_u4(std::uint8_t* p, I a) {
    const __m256i pairs = _mm256_or_si256(a, _mm256_srli_epi64(a, 28));
    const __m256i low = _mm256_shuffle_epi8(pairs, _mm256_setr_epi8(0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                    0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const std::uint32_t bytes = static_cast<std::uint32_t>(_mm256_extract_epi16(low, 0)) |
                                static_cast<std::uint32_t>(_mm256_extract_epi16(low, 8)) << 16;
    std::memcpy(p, &bytes, 4);
  }
};

#endif
