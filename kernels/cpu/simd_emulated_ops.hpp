// The operations of avx512_ops.hpp (L = 16 f32 lanes) and avx2_ops.hpp (L = 8), emulated lane by lane in
// plain C++ (no ISA flags): each function computes, lane by lane, exactly what its intrinsic twins compute
// (IEEE operations rounded once to nearest even, x86's rules where IEEE leaves a choice: MAXPS-style
// masks, NaN quieting in conversions, round-to-odd by truncation). The kernel bodies (simd_body.hpp,
// simd_backward_body.hpp) compiled against this layer are the test kernels avx512_emu, avx512_cr_emu,
// avx2_emu and avx2_cr_emu: the SIMD kernels' algorithm at both widths, verified on every machine;
// tests/test_simd_native.cpp checks the bits against the native ones where the CPU has the ISA.
//
// Compiled with -ffp-contract=off, as the native TUs: a contracted a*b + c would change bits.
// Included inside an anonymous namespace, after <cmath>, <cstdint>, <cstring>, lnorm/half.hpp and
// simd_types.hpp.
#ifndef LNORM_SIMD_EMULATED_OPS_INCLUDED
#define LNORM_SIMD_EMULATED_OPS_INCLUDED

template <int L>
struct EmulatedOps {
  static constexpr int kLanes = L, kDLanes = L / 2;
  struct F {
    float v[L];
  };
  struct D {
    double v[L / 2];
  };
  using M = std::conditional_t<(L > 8), std::uint16_t, std::uint8_t>;  // one bit per f32 lane
  using MD = std::uint8_t;                                             // one bit per f64 lane
  static constexpr unsigned kAll = (1u << L) - 1, kAllD = (1u << (L / 2)) - 1;

  static bool on(unsigned k, int i) { return (k >> i) & 1u; }
  static std::uint32_t bits32(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  static float from_bits32(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static std::uint64_t bits64(double d) {
    std::uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
  }
  static double from_bits64(std::uint64_t u) {
    double d;
    std::memcpy(&d, &u, 8);
    return d;
  }

  // ---- L f32 lanes ----
  static F zero() { return F{}; }
  static F set1(float x) {
    F r;
    for (float& l : r.v) l = x;
    return r;
  }
  static F add(F a, F b) {
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] + b.v[i];
    return a;
  }
  static F sub(F a, F b) {
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] - b.v[i];
    return a;
  }
  static F mul(F a, F b) {
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] * b.v[i];
    return a;
  }
  static F fmadd(F a, F b, F c) {
    for (int i = 0; i < L; ++i) a.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return a;
  }
  static F maskz_sub(M k, F a, F b) {
    for (int i = 0; i < L; ++i) a.v[i] = on(k, i) ? a.v[i] - b.v[i] : 0.0f;
    return a;
  }
  static M cmp_neq(F a, F b) { return mask_cmp_neq(static_cast<M>(kAll), a, b); }
  static M mask_cmp_neq(M k, F a, F b) {
    unsigned m = 0;
    for (int i = 0; i < L; ++i)
      if (on(k, i) && !(a.v[i] == b.v[i])) m |= 1u << i;
    return static_cast<M>(m);
  }
  static float first(F a) { return a.v[0]; }
  static F abs(F a) {
    for (float& l : a.v) l = from_bits32(bits32(l) & 0x7FFFFFFFu);
    return a;
  }
  static F max(F a, F b) {  // MAXPS: b where either is NaN or both are zeros
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  static float hmax(F a) {  // the largest lane (no NaN lanes: any order gives it)
    float m = a.v[0];
    for (int i = 1; i < L; ++i) m = a.v[i] > m ? a.v[i] : m;
    return m;
  }
  // avx2_ops.hpp's subnormal key: per lane the unsigned minimum of bits(|a|) − 1, below 0x007FFFFF exactly for
  // a subnormal a (the lanes hold bit patterns, moved and never computed on as floats).
  static F subnormal_key_init() {
    F r;
    for (float& l : r.v) l = from_bits32(0xFFFFFFFFu);
    return r;
  }
  static F subnormal_key(F key, F a) {
    for (int i = 0; i < L; ++i) {
      const std::uint32_t m1 = (bits32(a.v[i]) & 0x7FFFFFFFu) - 1u, k = bits32(key.v[i]);
      key.v[i] = from_bits32(m1 < k ? m1 : k);
    }
    return key;
  }
  static bool any_subnormal(F key) {
    for (float l : key.v)
      if (bits32(l) < 0x007FFFFFu) return true;
    return false;
  }
  static void store_ps(float* p, F a) { std::memcpy(p, a.v, sizeof a.v); }
  static F join_ps(D lo, D hi) {
    F r;
    for (int i = 0; i < L / 2; ++i) r.v[i] = static_cast<float>(lo.v[i]), r.v[L / 2 + i] = static_cast<float>(hi.v[i]);
    return r;
  }
  static M differ_bits(F a, F b) {
    unsigned m = 0;
    for (int i = 0; i < L; ++i)
      if (bits32(a.v[i]) != bits32(b.v[i])) m |= 1u << i;
    return static_cast<M>(m);
  }
  template <class T>
  static M near_mid16_f(F y32, float y_min) {
    constexpr std::int32_t kLow = std::is_same_v<T, F16> ? 0x1FFF : 0xFFFF, kMid = std::is_same_v<T, F16> ? 0x1000 : 0x8000;
    unsigned m = 0;
    for (int i = 0; i < L; ++i) {
      const std::int32_t low = static_cast<std::int32_t>(bits32(y32.v[i]) & static_cast<std::uint32_t>(kLow));
      const bool far = (low > kMid ? low - kMid : kMid - low) > 1;
      const bool big = std::fabs(y32.v[i]) >= y_min;  // false for NaN, as _CMP_GE_OQ
      if (!(far && big)) m |= 1u << i;
    }
    return static_cast<M>(m);
  }
  static D lo_pd(F a) {
    D r;
    for (int i = 0; i < L / 2; ++i) r.v[i] = a.v[i];
    return r;
  }
  static D hi_pd(F a) {
    D r;
    for (int i = 0; i < L / 2; ++i) r.v[i] = a.v[L / 2 + i];
    return r;
  }

  // f32 → bf16 as vcvtneps2bf16 without its subnormal flush (the native layer repairs those lanes):
  // nearest even; NaN keeps its sign and top payload with the quiet bit set.
  static std::uint16_t bf16_of(float f) { return bf16_from_float(f).bits; }
  // f32 → f16 as vcvtps2ph with nearest even (lnorm/half.hpp: subnormals, Inf, quiet NaN payload).
  static std::uint16_t f16_of(float f) { return f16_from_float(f).bits; }
  template <class T>
  static float widen(std::uint16_t h) {
    if constexpr (std::is_same_v<T, F16>) {
      // vcvtph2ps quiets a signalling NaN (sets the top mantissa bit).
      const float f = to_float(f16{h});
      return std::isnan(f) ? from_bits32(bits32(f) | 0x00400000u) : f;
    } else {
      return to_float(bf16{h});  // a shift: the pattern unchanged
    }
  }
  template <class T>
  static std::uint16_t narrow(float f) {
    if constexpr (std::is_same_v<T, F16>) return f16_of(f);
    else return bf16_of(f);
  }

  template <class T>
  static F load(const typename T::Bits* p) {
    return maskz_load<T>(static_cast<M>(kAll), p);
  }
  template <class T>
  static F maskz_load(M k, const typename T::Bits* p) {
    F r{};
    for (int i = 0; i < L; ++i) {
      if (!on(k, i)) continue;
      if constexpr (std::is_same_v<T, F32>) r.v[i] = p[i];
      else r.v[i] = widen<T>(p[i]);
    }
    return r;
  }
  template <class T>
  static void mask_store(M k, typename T::Bits* p, F v) {
    for (int i = 0; i < L; ++i) {
      if (!on(k, i)) continue;
      if constexpr (std::is_same_v<T, F32>) p[i] = v.v[i];
      else p[i] = narrow<T>(v.v[i]);
    }
  }
  template <class T, bool Finite = false>  // Finite: store2's (below)
  static void store(typename T::Bits* p, F v) {
    mask_store<T>(static_cast<M>(kAll), p, v);
  }
  template <class T, bool Finite = false>
  static void stream(typename T::Bits* p, F v) {
    mask_store<T>(static_cast<M>(kAll), p, v);
  }
  // Finite (the caller knows no lane is NaN): the same bits; AVX2's bf16 narrowing uses it (avx2_ops.hpp).
  template <class T, bool Finite = false>
  static void store2(typename T::Bits* p, F a, F b) {
    store<T>(p, a);
    store<T>(p + L, b);
  }
  template <class T, bool Finite = false>
  static void stream2(typename T::Bits* p, F a, F b) {
    store2<T>(p, a, b);
  }
  static void sfence() {}
  static void prefetch_l2(const void*) {}
  static void prefetch_l1(const void*) {}

  // ---- L/2 f64 lanes ----
  static D zero_pd() { return D{}; }
  static D set1_pd(double x) {
    D r;
    for (double& l : r.v) l = x;
    return r;
  }
  static D add_pd(D a, D b) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = a.v[i] + b.v[i];
    return a;
  }
  static D sub_pd(D a, D b) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = a.v[i] - b.v[i];
    return a;
  }
  static D mul_pd(D a, D b) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = a.v[i] * b.v[i];
    return a;
  }
  static D fmadd_pd(D a, D b, D c) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return a;
  }
  static D max_pd(D a, D b) {  // vmaxpd: a > b ? a : b, so b where either is NaN or both are zeros
    for (int i = 0; i < L / 2; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  static D abs_pd(D a) {
    for (double& l : a.v) l = from_bits64(bits64(l) & 0x7FFFFFFFFFFFFFFFull);
    return a;
  }
  static D maskz_sub_pd(MD k, D a, D b) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = on(k, i) ? a.v[i] - b.v[i] : 0.0;
    return a;
  }
  static double first_pd(D a) { return a.v[0]; }
  static void store_pd(double* p, D a) { std::memcpy(p, a.v, sizeof a.v); }
  static D load_pd(const double* p) {
    D r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }

  template <class T>
  static D load_d(const typename T::Bits* p) {
    return maskz_load_d<T>(static_cast<MD>(kAllD), p);
  }
  template <class T>
  static D maskz_load_d(MD k, const typename T::Bits* p) {
    D r{};
    for (int i = 0; i < L / 2; ++i) {
      if (!on(k, i)) continue;
      if constexpr (std::is_same_v<T, F32> || std::is_same_v<T, F64>) r.v[i] = p[i];
      else r.v[i] = widen<T>(p[i]);
    }
    return r;
  }
  // f64 → f32 toward zero (vcvtpd2ps with embedded {rz-sae}): the nearest f32, stepped back one ulp
  // toward zero when it landed farther from zero than v (an overflow to Inf steps back to the
  // largest finite value, as truncation gives). Then the last bit set when inexact: round to odd.
  static float f32_odd(double d) {
    float f = static_cast<float>(d);
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = from_bits32(bits32(f) - 1);
    const double back = f;
    if (back == back && d == d && back != d) f = from_bits32(bits32(f) | 1u);
    return f;
  }
  template <class T>
  static std::uint16_t narrow_d_one(double d) {
    return narrow<T>(f32_odd(d));
  }
  template <class T>
  static void mask_store_d(MD k, typename T::Bits* p, D v) {
    for (int i = 0; i < L / 2; ++i) {
      if (!on(k, i)) continue;
      if constexpr (std::is_same_v<T, F32>) p[i] = static_cast<float>(v.v[i]);
      else p[i] = narrow_d_one<T>(v.v[i]);
    }
  }

  // ---- the quantized epilogue's steps (simd_quant.hpp) ----
  struct I {
    std::int32_t v[L];
  };
  static F div(F a, F b) {
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] / b.v[i];
    return a;
  }
  static F min(F a, F b) {  // MINPS: a < b ? a : b, so b where either is NaN
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  static F and_ps(F a, F b) {
    for (int i = 0; i < L; ++i) a.v[i] = from_bits32(bits32(a.v[i]) & bits32(b.v[i]));
    return a;
  }
  static M cmp_eq(F a, F b) {
    unsigned m = 0;
    for (int i = 0; i < L; ++i) m |= static_cast<unsigned>(a.v[i] == b.v[i]) << i;
    return static_cast<M>(m);
  }
  static D div_pd(D a, D b) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = a.v[i] / b.v[i];
    return a;
  }
  static D min_pd(D a, D b) {  // vminpd: a < b ? a : b, so b where either is NaN
    for (int i = 0; i < L / 2; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  static D and_pd(D a, D b) {
    for (int i = 0; i < L / 2; ++i) a.v[i] = from_bits64(bits64(a.v[i]) & bits64(b.v[i]));
    return a;
  }
  static M cmp_lt(F a, F b) {
    unsigned m = 0;
    for (int i = 0; i < L; ++i) m |= static_cast<unsigned>(a.v[i] < b.v[i]) << i;
    return static_cast<M>(m);
  }
  static I bits_i(F a) {
    I r;
    for (int i = 0; i < L; ++i) r.v[i] = static_cast<std::int32_t>(bits32(a.v[i]));
    return r;
  }
  template <int N>
  static I srli_i(I a) {
    for (std::int32_t& l : a.v) l = static_cast<std::int32_t>(static_cast<std::uint32_t>(l) >> N);
    return a;
  }
  static I add_i(I a, I b) {
    for (int i = 0; i < L; ++i) a.v[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.v[i]) + static_cast<std::uint32_t>(b.v[i]));
    return a;
  }
  static I max_i(I a, I b) {  // signed
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  static I min_i(I a, I b) {  // signed
    for (int i = 0; i < L; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  static M cmp_lt_i(I a, I b) {  // signed
    unsigned m = 0;
    for (int i = 0; i < L; ++i) m |= static_cast<unsigned>(a.v[i] < b.v[i]) << i;
    return static_cast<M>(m);
  }
  static F from_bits_i(I a) {
    F r;
    for (int i = 0; i < L; ++i) r.v[i] = from_bits32(static_cast<std::uint32_t>(a.v[i]));
    return r;
  }
  static I and_i(I a, I b) {
    for (int i = 0; i < L; ++i) a.v[i] &= b.v[i];
    return a;
  }
  static I or_i(I a, I b) {
    for (int i = 0; i < L; ++i) a.v[i] |= b.v[i];
    return a;
  }
  static I set1_i(std::int32_t x) {
    I r;
    for (std::int32_t& l : r.v) l = x;
    return r;
  }
  static I select_i(M k, I a, I b) {
    for (int i = 0; i < L; ++i) a.v[i] = on(k, i) ? a.v[i] : b.v[i];
    return a;
  }
  static I cvt_i(F a) {  // integer-valued lanes (the only ones simd_quant.hpp converts): exact
    I r;
    for (int i = 0; i < L; ++i) r.v[i] = static_cast<std::int32_t>(a.v[i]);
    return r;
  }
  static I round_i(F a) {  // CVTPS2DQ under MXCSR's default: to nearest, ties to even; NaN and |a| ≥ 2^31: INT32_MIN
    I r;
    for (int i = 0; i < L; ++i) {
      const float v = a.v[i];
      r.v[i] = v >= -0x1p31f && v < 0x1p31f ? static_cast<std::int32_t>(std::nearbyint(v)) : INT32_MIN;
    }
    return r;
  }
  static void store_u8(std::uint8_t* p, I a) {
    for (int i = 0; i < L; ++i) p[i] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(a.v[i]) & 0xFFu);
  }
  static void store_u4(std::uint8_t* p, I a) {  // 4-bit codes two a byte, the even lane's low (VPMOVQB of x | x >> 28)
    for (int i = 0; i < L; i += 2)
      p[i / 2] = static_cast<std::uint8_t>((static_cast<std::uint32_t>(a.v[i]) & 0xFFu) | (static_cast<std::uint32_t>(a.v[i + 1]) << 4));
  }
};

#endif
