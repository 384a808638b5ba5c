// The quantized epilogue on a SIMD layer's lanes (avx2_ops.hpp, avx512_ops.hpp, simd_emulated_ops.hpp): a row's f32
// y to q and scales, the same bits as quantize_row (quant_epilogue.hpp: what is computed and why y/s in double is
// exact), which does it one element at a time with encode (lnorm/quant.hpp) at ~5 ns per element: 0.75 GB/s of
// x, 1/25 of the same kernel writing y (docs/performance.md "Quantized outputs"). Per vector of f32 y:
//   t = y · (1/s) in f32: two roundings, so |t − y/s| < 2^-23·(1 + 2^-22)·|t| ≤ 2·ulp(t)·(1 + 2^-22) (|t| < 2^(e+1)).
//   Rounding to the grid is monotone, so Q(t) = Q(y/s) unless a midpoint of the grid lies within that distance of
//   t: the lanes whose t is within 4·ulp(t) of a midpoint (kWindowUlps; ~2^-17 of random ones for E4M3, every
//   exact tie of bf16 data over a power-of-two scale) are redone from y/s in f64, which is never a midpoint it is
//   not on (quant_epilogue.hpp), with the same steps at 52 bits. A multiplication, not a division: vdivps zmm
//   issues one every 10-16 cycles on Intel's AVX-512 cores, and it was the epilogue's bound there (perf annotate,
//   `lnorm bench --quant fp8_e4m3` on a Xeon: the chain from vdivps to the midpoint test held 80% of fp8_codes'
//   samples). 1/s is taken once per scale; a scale whose 1/s is not a normal f32 (s subnormal below 2^-128, 0,
//   Inf, NaN: degenerate groups only) takes encode_quotient element by element, the same bits.
//   fp8: a = |t| clamped to 2·max (Inf and beyond round to it, then saturate), rounded to the grid by one
//   addition: C = 2^(max(e, emin) + 23 − mbits), e = floor(log2 a) (a's exponent field alone), has the grid's
//   quantum at a as its ulp, and a < 2^(e+1) ≤ C keeps a + C in C's binade, so (a + C) − C is a rounded to
//   nearest, ties to even, once; min(·, max) saturates. The code is the rounded value's exponent|significand
//   field shifted to mbits bits and rebiased, or, below 2^emin (the subnormal codes), the value over the least
//   quantum. The sign from y's; a NaN quotient (y NaN, or ±Inf over an Inf scale) gives 0x7f with it;
//   int8 (an integer format): clamped to [−128, 127] (its row's range), rounded by the 1.5·2^23 addition, converted
//   exactly; NaN gives 0.
//   The 8-bit float formats and int8 take the same codes by integer operations where every lane of a vector allows
//   it (fp8_codes_bits, int_codes_bits: one floating-point multiply, then the bits), the forms above for the rest.
// Scales as quantize_row (group_scale, in the generic TU: ISA code calls it, ctest isa_objects_share_no_code); rows
// of small groups form L groups' scales at once in lanes where the rule allows (group_scales_simd, the same bits);
// amax is a max, exact in any order. A group's last G mod lanes elements take encode, the same bits. The code
// functions are forced inline: out of line, each vector's chain (multiply, round, midpoint test, code) was a call
// the next vector's could not overlap.
// Included in simd_body.hpp, inside the anonymous namespace of the TU that includes it, after quant_epilogue.hpp
// at file scope (isa.hpp includes it) and <cstring>.
#ifndef LNORM_SIMD_QUANT_INCLUDED
#define LNORM_SIMD_QUANT_INCLUDED

constexpr float pow2f(int e) { return e >= 0 ? static_cast<float>(1ull << e) : 1.0f / static_cast<float>(1ull << -e); }
// The f64 rounding constant of a ≥ 0 on Fmt's grid: c = 2^(max(e, emin) + 52 − mbits), e = floor(log2 a) (a's
// exponent field alone), whose ulp is the grid's quantum at a; (a + c) − c is a rounded to the grid, to nearest, ties
// to even (a < 2^(e+1) ≤ c keeps a + c in c's binade). fp8_codes' f64 path, group_scales_simd's nvfp4 scale codes and
// settle_vector's (simd_quant_exact.hpp) rounding.
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::D grid_step_pd(typename V::D a) {
  constexpr int Mbits = info(Fmt).mbits;
  constexpr double kMinNormal = 1.0 / static_cast<double>(1ull << (info(Fmt).bias - 1));  // 2^emin
  return V::mul_pd(V::max_pd(V::and_pd(a, V::set1_pd(-__builtin_inf())), V::set1_pd(kMinNormal)), V::set1_pd(0x1p52 / (1 << Mbits)));
}

// The code of r, the format's grid value (before saturation: min(r, max) here; kSaturated: r ≤ max already) of y's
// magnitude, with y's sign; the format's NaN code in the lanes nan (E2M1, which has none: 0). fp8_codes' and
// settle_codes' (simd_quant_exact.hpp).
template <class V, QuantFormat Fmt, bool kSaturated = false>
inline LNORM_ALWAYS_INLINE typename V::I grid_code(typename V::F r, typename V::F y, typename V::M nan) {
  constexpr int Mbits = info(Fmt).mbits;
  constexpr int kBias = info(Fmt).bias;
  constexpr float kMax = static_cast<float>(qmax(Fmt));
  constexpr float kMinNormal = pow2f(1 - kBias);
  constexpr float kSubnormalUnit = pow2f(kBias - 1 + Mbits);
  constexpr unsigned kSign = sign_bit(Fmt);
  constexpr int kSignShift = 32 - info(Fmt).bits;
  constexpr int kNanCode = static_cast<int>(nan_code(Fmt, false));
  if constexpr (!kSaturated) r = V::min(r, V::set1(kMax));
  const typename V::I normal = V::add_i(V::template srli_i<23 - Mbits>(V::bits_i(r)), V::set1_i(-((127 - kBias) << Mbits)));
  typename V::I code = normal;
  // Rare lanes by branch, not by select: AVX2's selects cost a mask round trip each (avx2_ops.hpp lane_mask).
  // (r clamped to 2^emin first: the other lanes' r·2^(mbits−emin) would leave int32's range, E5M2's 57344·2^16.)
  if (const typename V::M sub = V::cmp_lt(r, V::set1(kMinNormal)))
    code = V::select_i(sub, V::cvt_i(V::mul(V::min(r, V::set1(kMinNormal)), V::set1(kSubnormalUnit))), code);
  if constexpr (has_negative_zero(Fmt)) {
    if constexpr (has_nan(Fmt)) {
      if (nan) code = V::select_i(nan, V::set1_i(kNanCode), code);
      return V::or_i(code, V::and_i(V::template srli_i<kSignShift>(V::bits_i(y)), V::set1_i(static_cast<int>(kSign))));
    } else {  // E2M1: no NaN code; a NaN lane is 0, unsigned (encode's)
      code = V::or_i(code, V::and_i(V::template srli_i<kSignShift>(V::bits_i(y)), V::set1_i(static_cast<int>(kSign))));
      return nan ? V::select_i(nan, V::set1_i(0), code) : code;
    }
  } else {
    // One zero: the sign only where the code is not 0; every NaN lane the one NaN code (the sign bit alone).
    const typename V::I negative = V::and_i(V::template srli_i<kSignShift>(V::bits_i(y)), V::set1_i(static_cast<int>(kSign)));
    const typename V::M zero = V::cmp_eq(r, V::zero());
    code = V::or_i(code, zero ? V::select_i(zero, V::set1_i(0), negative) : negative);
    return nan ? V::select_i(nan, V::set1_i(kNanCode), code) : code;
  }
}

// The code of an 8-bit float format's a = min(|t|, max) from its bits, where a is at or above 2^emin and not at a
// midpoint of the grid: a's bits rounded by adding half a quantum's ulps (2^(22 − mbits); no tie, so rounding half
// up is to nearest), shifted to mbits bits and rebiased, with t's sign (never a zero code: a ≥ 2^emin). The rebias
// is folded into the addition: a ≥ 2^emin keeps the sum positive. fp8_codes_bits' and settle_vector_bits'
// (simd_quant_exact.hpp).
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::I normal_code_bits(typename V::I a_bits, typename V::I t_bits) {
  constexpr int kShift = 23 - info(Fmt).mbits;
  constexpr std::int32_t kRound = (1 << (kShift - 1)) - ((127 - info(Fmt).bias) << 23);
  const typename V::I magnitude = V::template srli_i<kShift>(V::add_i(a_bits, V::set1_i(kRound)));
  return V::or_i(magnitude, V::and_i(V::template srli_i<24>(t_bits), V::set1_i(0x80)));
}

// How far from a midpoint, in ulps of t, a lane is redone in f64: twice the bound on |t − y/s| (the header).
constexpr int kWindowUlps = 4;
// One vector of y (kLanes) to its codes in the floating-point format Fmt, from its row (lnorm/quant.hpp: mbits,
// bias, max; E4M3: 3, 7, 448; E5M2: 2, 15, 57344; the FNUZ formats: bias 8 and 16, one zero, NaN at the sign bit).
// inv: 1/s in f32 (a normal number: usable_inverse), sd: s in f64; nan: the lanes whose quotient is NaN (y's).
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::I fp8_codes(typename V::F y, typename V::F inv, typename V::D sd, typename V::M nan) {
  using F = typename V::F;
  using D = typename V::D;
  constexpr int Mbits = info(Fmt).mbits;
  constexpr int kBias = info(Fmt).bias;
  constexpr float kMax = static_cast<float>(qmax(Fmt));
  constexpr float kMinNormal = pow2f(1 - kBias);                  // 2^emin, emin = 1 − bias
  // Every format fact a constant expression: an unoptimised build would otherwise call the constexpr helpers and
  // emit them, and the table, as weak symbols in this ISA object (ctest isa_objects_share_no_code).
  // The f32 quotient's rounding: c = 2^(max(e, emin) + 23 − mbits) has the quantum as its ulp (the header's
  // argument with f32's 23 bits). Exact unless t is within the window of a midpoint: |a − r| (exact: Sterbenz) is
  // at most half a quantum, c·2^-24, and ulp(a) ≤ c·2^(mbits−46) (equal where a is normal for the format).
  F a = V::min(V::abs(V::mul(y, inv)), V::set1(2 * kMax));  // NaN lanes: 2·max (replaced below)
  const F c = V::mul(V::max(V::and_ps(a, V::set1(-__builtin_inff())), V::set1(kMinNormal)), V::set1(0x1p23f / (1 << Mbits)));
  F r = V::sub(V::add(a, c), c);
  constexpr float kNearMidpoint = 0x1p-24f - kWindowUlps * pow2f(Mbits - 46);
  if (V::cmp_lt(V::mul(c, V::set1(kNearMidpoint)), V::abs(V::sub(a, r)))) {
    // A midpoint (rare but for exact ties): the f64 quotient decides, the header's argument with 52 bits.
    const auto rounded = [&](D y_half) LNORM_ALWAYS_INLINE {
      const D a64 = V::min_pd(V::abs_pd(V::div_pd(y_half, sd)), V::set1_pd(2 * kMax));
      const D c64 = grid_step_pd<V, Fmt>(a64);
      return V::sub_pd(V::add_pd(a64, c64), c64);
    };
    r = V::join_ps(rounded(V::lo_pd(y)), rounded(V::hi_pd(y)));
  }
  return grid_code<V, Fmt>(r, y, nan);
}

// fp8_codes for an 8-bit float format, by t's bits where it can: every lane's a = min(|t|, max) at or above 2^emin
// (no subnormal code, no zero), no NaN, and no a within kWindowUlps ulps of a midpoint (the grid's midpoints are
// where a's low 23 − mbits bits, frac, equal half = 2^(22 − mbits); ulps of a are ulps of t where |t| ≤ max, and a
// clamped a = max has frac 0). Then Q(t) = Q(y/s) (the header's argument) and normal_code_bits is the code. Other
// vectors (one rare lane in it) take fp8_codes, the same bits. E2M1 keeps fp8_codes: its subnormal codes (0, ±0.5)
// are common. One floating-point operation (t) and eleven integer ones, where fp8_codes takes ~14 floating-point
// ones: on this Zen 5, 512-bit floating-point operations issue once a cycle and integer ones twice (the `_cr`
// section of docs/performance.md), and the loop is bound by that count.
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::I fp8_codes_bits(typename V::F y, typename V::F inv, typename V::D sd) {
  using I = typename V::I;
  static_assert(is_float(Fmt) && info(Fmt).bits == 8);
  constexpr int kShift = 23 - info(Fmt).mbits;
  constexpr std::int32_t kHalf = 1 << (kShift - 1);
  constexpr std::uint32_t kMinBits = __builtin_bit_cast(std::uint32_t, pow2f(1 - info(Fmt).bias));  // 2^emin
  constexpr std::uint32_t kInfBits = 0x7f800000u;
  constexpr float kMax = static_cast<float>(qmax(Fmt));
  const typename V::F t = V::mul(y, inv);
  const I t_bits = V::bits_i(t);
  const I abs_bits = V::and_i(t_bits, V::set1_i(0x7fffffff));
  const I a_bits = V::min_i(abs_bits, V::bits_i(V::set1(kMax)));  // (+Inf: max, saturated as fp8_codes does)
  // |t| outside [2^emin, +Inf] (below: subnormal codes and zeros; above: NaN), one signed compare: the interval
  // moved to begin at INT32_MIN (the bits of |t| below 2^emin wrap to the top).
  const I moved = V::add_i(abs_bits, V::set1_i(static_cast<std::int32_t>(0x80000000u - kMinBits)));
  const typename V::M outside = V::cmp_lt_i(V::set1_i(static_cast<std::int32_t>(0x80000000u + (kInfBits - kMinBits))), moved);
  // |frac − half| ≤ kWindowUlps as (frac − half + window) mod 2^kShift ≤ 2·window.
  const I off = V::and_i(V::add_i(a_bits, V::set1_i(kWindowUlps - kHalf)), V::set1_i(2 * kHalf - 1));
  const typename V::M near = V::cmp_lt_i(off, V::set1_i(2 * kWindowUlps + 1));
  if (outside | near) return fp8_codes<V, Fmt>(y, inv, sd, V::cmp_neq(y, y));
  return normal_code_bits<V, Fmt>(a_bits, t_bits);
}

// An integer format's codes (int8: [lo, hi] = [−128, 127]; the range is the format's row, lnorm/quant.hpp).
template <class V>
inline LNORM_ALWAYS_INLINE typename V::I int_codes(typename V::F y, typename V::F inv, typename V::D sd, typename V::M nan, float lo, float hi) {
  using F = typename V::F;
  using D = typename V::D;
  // Clamped, then rounded by the 1.5·2^23 addition (f32: |t| ≤ 128 < 2^22); a t within the window of k + 1/2
  // (kWindowUlps ulps of t ≤ 128: 2^-14) may be the rounding of a quotient on either side: the f64 quotient
  // decides (1.5·2^52). Clamping is monotone and lo, hi are integers: it moves no lane across a midpoint.
  const F t = V::min(V::max(V::mul(y, inv), V::set1(lo)), V::set1(hi));
  F r = V::sub(V::add(t, V::set1(0x1.8p23f)), V::set1(0x1.8p23f));
  if (V::cmp_lt(V::set1(0.5f - kWindowUlps * 0x1p-16f), V::abs(V::sub(t, r)))) {
    const auto rounded = [&](D y_half) LNORM_ALWAYS_INLINE {
      const D t64 = V::min_pd(V::max_pd(V::div_pd(y_half, sd), V::set1_pd(lo)), V::set1_pd(hi));
      return V::sub_pd(V::add_pd(t64, V::set1_pd(0x1.8p52)), V::set1_pd(0x1.8p52));
    };
    r = V::join_ps(rounded(V::lo_pd(y)), rounded(V::hi_pd(y)));
  }
  const typename V::I k = V::cvt_i(r);
  return nan ? V::select_i(nan, V::set1_i(0), k) : k;
}

// An integer format's codes by integer operations where it can, t scaled to 2^-14 units: t' = y·(2^14/s) (inv14 =
// 2^14·f32(1/s), exact; t' = 2^14·t, the same two roundings), v = t' rounded to an integer (round_i), clamped to
// [lo, hi]·2^14. |v − 2^14·y/s| < 1/2 + 2·ulp(t')·(1 + 2^-22) ≤ 3/4 (|t'| ≤ 2^21: ulp ≤ 1/8; a clamped v is an
// integer code's exact multiple, frac 0); so where v's low 14 bits (frac) are more than kIntWindow from 2^13, the
// midpoint, Q(t) = Q(y/s) = the code (v + 2^13) >> 14, one rounding of v, not a tie. Plus 2^22 keeps the sum
// positive for a logical shift and makes the result code + 256, whose low byte (store_u8 keeps it) is the
// two's-complement code. A lane of NaN, or |t'| ≥ 2^31 (round_i's INT32_MIN: saturated beyond int32), sends the
// vector to int_codes, as does one within the window. Two floating-point operations and eight integer ones, where
// int_codes takes ~10 floating-point ones (fp8_codes_bits says why the count matters).
constexpr std::int32_t kIntWindow = 2;  // in 2^-14 units: more than twice the bound (3/4) above
template <class V>
inline LNORM_ALWAYS_INLINE typename V::I int_codes_bits(typename V::F y, typename V::F inv14, typename V::F inv, typename V::D sd,
                                                        float lo, float hi) {
  using I = typename V::I;
  const I v0 = V::round_i(V::mul(y, inv14));
  const typename V::M outside = V::cmp_lt_i(v0, V::set1_i(INT32_MIN + 1));
  const I v = V::min_i(V::max_i(v0, V::set1_i(static_cast<std::int32_t>(lo) * (1 << 14))), V::set1_i(static_cast<std::int32_t>(hi) * (1 << 14)));
  const I off = V::and_i(V::add_i(v, V::set1_i(kIntWindow - (1 << 13))), V::set1_i((1 << 14) - 1));
  const typename V::M near = V::cmp_lt_i(off, V::set1_i(2 * kIntWindow + 1));
  if (outside | near) return int_codes<V>(y, inv, sd, V::cmp_neq(y, y), lo, hi);
  return V::template srli_i<14>(V::add_i(v, V::set1_i((1 << 13) + (1 << 22))));
}

// One vector of y to its codes in format Fmt (one a lane): the 8-bit float formats and int8 by their bits
// (fp8_codes_bits, int_codes_bits), E2M1 by fp8_codes. inv: f32(1/s) (usable_inverse), sd: s in f64.
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::I vector_codes(typename V::F v, float inv, typename V::D sd) {
  if constexpr (!is_float(Fmt)) {
    constexpr float lo = static_cast<float>(info(Fmt).qmin), hi = static_cast<float>(qmax(Fmt));
    return int_codes_bits<V>(v, V::set1(inv * 0x1p14f), V::set1(inv), sd, lo, hi);
  } else if constexpr (info(Fmt).bits == 8) {
    return fp8_codes_bits<V, Fmt>(v, V::set1(inv), sd);
  } else {
    return fp8_codes<V, Fmt>(v, V::set1(inv), sd, V::cmp_neq(v, v));
  }
}

// 1/s in f32 where it is a normal number (the codes' precondition: the header's error bound), else false: s
// subnormal below 2^-128, 0, Inf (nvfp4's block of zeros), NaN. Tested on the bits: the exponent field 1..254.
inline bool usable_inverse_bits(float inv) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &inv, 4);
  const std::uint32_t field = (bits >> 23) & 0xffu;
  return field != 0 && field != 0xffu;
}
inline bool usable_inverse(float s, float& inv) {
  inv = 1.0f / s;
  return usable_inverse_bits(inv);
}

// The next x row's lines (sinks::RowAhead), prefetched into L2 in step with the codes pass over this row: where the
// pass reaches element k of the row's n, the next row's first k·bytes/n bytes are asked for (upto(k)). The output
// pass before it, which had them all asked for at once (as the streamed y rows do), left DRAM idle during the codes:
// q-only driver, avx512 RMSNorm fp8_e4m3/row 16384x4096, three runs alternating: f32 0.45-0.51 → 0.38-0.44 ns an
// element, bf16 0.39-0.42 → 0.35-0.36 (docs/performance.md, "the next row's lines prefetched over the codes pass").
template <class V>
struct AheadLines {
  const char* at = nullptr;    // the next line to ask for
  const char* end = nullptr;   // the row's end
  const char* base = nullptr;  // the row's first byte
  std::int64_t per_elem = 0;   // the next row's bytes per element of this row's pass (its x's element size)
  AheadLines() = default;
  AheadLines(sinks::RowAhead a, std::int64_t n)
      : at(a.next), end(a.next ? a.next + a.bytes : nullptr), base(a.next), per_elem(a.next && n ? a.bytes / n : 0) {}
  // Every line below element k's byte asked for (none where there is no next row: at = end).
  LNORM_ALWAYS_INLINE void upto(std::int64_t k) {
    const char* const to = base + k * per_elem < end ? base + k * per_elem : end;
    for (; at < to; at += 64) V::prefetch_l2(at);
  }
};

// body(i) for every whole vector [i, i + L) of [i, n), in chunks of kAheadVectors vectors, each chunk's lines of the
// next row asked for before it (ahead.upto(from + the chunk's end): from is i = 0's element in its row). Per chunk,
// not per vector: q-only driver, avx2 int8/row bf16 64x4096, three runs: 0.338 ns an element with the test per
// vector, 0.320 per chunk (0.300 before the prefetch moved here: docs/performance.md, "the next row's lines
// prefetched over the codes pass", has what is left of that gap).
constexpr std::int64_t kAheadVectors = 8;  // 2-8 lines of x a chunk (bf16 on AVX2 to f32 on AVX-512); the one setting measured
template <class V, class Body>
inline LNORM_ALWAYS_INLINE void vectors_ahead(std::int64_t& i, std::int64_t n, AheadLines<V>& ahead, std::int64_t from, Body body) {
  constexpr std::int64_t L = V::kLanes, kChunk = kAheadVectors * L;
  AheadLines<V> lines = ahead;  // a local copy, in registers: q's byte stores may alias the caller's
  while (i + L <= n) {
    lines.upto(from + i + kChunk);
    const std::int64_t stop = n - i < kChunk ? n : i + kChunk;
    for (; i + L <= stop; i += L) body(i);
  }
  ahead = lines;
}

// q[0, n) = Q(y / s), n elements of one scale (q: one code a byte). ahead: the next row's lines, asked for a chunk
// ahead of the codes (vectors_ahead; from: this span's first element in its row).
template <class V>
void encode_span(QuantFormat f, float s, const float* y, std::int64_t n, std::uint8_t* q, AheadLines<V>& ahead,
                 std::int64_t from = 0) {
  std::int64_t i = 0;
  float inv_s = 0;
  if (usable_inverse(s, inv_s)) {
    const typename V::F inv = V::set1(inv_s);
    const typename V::D sd = V::set1_pd(static_cast<double>(s));
    const auto each = [&](auto codes) LNORM_ALWAYS_INLINE {
      vectors_ahead(i, n, ahead, from, [&](std::int64_t j) LNORM_ALWAYS_INLINE {
        const typename V::F v = V::template load<F32>(y + j);
        V::store_u8(q + j, codes(v, inv, sd, V::cmp_neq(v, v)));
      });
    };
    using F = typename V::F;
    using D = typename V::D;
    using M = typename V::M;
    // The format as a constant (compared, never looked up: the table is not read at run time in ISA code, whose
    // objects must define no shared symbol, ctest isa_objects_share_no_code).
    with_format(f, [&](auto fmt) LNORM_ALWAYS_INLINE {
      constexpr QuantFormat kF = decltype(fmt)::value;
      if constexpr (is_float(kF)) {
        if constexpr (info(kF).bits == 8) {
          vectors_ahead(i, n, ahead, from, [&](std::int64_t j) LNORM_ALWAYS_INLINE {
            V::store_u8(q + j, fp8_codes_bits<V, kF>(V::template load<F32>(y + j), inv, sd));
          });
        } else {
          each([](F v, F s1, D s2, M m) LNORM_ALWAYS_INLINE { return fp8_codes<V, kF>(v, s1, s2, m); });
        }
      } else {  // an integer format, its range from its row
        constexpr float lo = static_cast<float>(info(kF).qmin), hi = static_cast<float>(qmax(kF));
        const F inv14 = V::mul(inv, V::set1(0x1p14f));
        vectors_ahead(i, n, ahead, from, [&](std::int64_t j) LNORM_ALWAYS_INLINE {
          V::store_u8(q + j, int_codes_bits<V>(V::template load<F32>(y + j), inv14, inv, sd, lo, hi));
        });
      }
    });
  }
  for (; i < n; ++i) q[i] = ::lnorm::cpu::encode_quotient(f, y[i], s);
  ahead.upto(from + n);
}

// The same into q as stored: a packed format's n codes (n even) two a byte, encoded a chunk at a time on the stack
// and packed (pack_codes, generic code); one a byte, directly.
template <class V>
void encode_span_stored(QuantFormat f, bool packed, float s, const float* y, std::int64_t n, std::uint8_t* q, AheadLines<V>& ahead,
                        std::int64_t from) {
  if (!packed) return encode_span<V>(f, s, y, n, q, ahead, from);
  constexpr std::int64_t kChunk = 256;
  std::uint8_t codes[kChunk];
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = n - i < kChunk ? n - i : kChunk;
    encode_span<V>(f, s, y + i, m, codes, ahead, from + i);
    ::lnorm::cpu::pack_codes(codes, m, q + i / 2);
  }
}

// The max of acc's lanes (nonnegative, no NaN): V's shuffle tree in registers (mx: once per 32 elements).
template <class V>
inline LNORM_ALWAYS_INLINE float max_of_lanes(typename V::F acc) {
  return V::hmax(acc);
}

// |v|'s bits folded into acc by an integer max: nonnegative floats order as their bits and a NaN's lie above +Inf's,
// so acc holds both the amax and whether a NaN was seen (amax_of_bits). It was abs, a max and a compare into a mask,
// floating-point operations, which issue once a cycle on this Zen 5 where integer ones issue twice
// (docs/performance.md, "the fast kernels' codes by their bits").
template <class V>
inline LNORM_ALWAYS_INLINE typename V::I max_abs_bits(typename V::I acc, typename V::F v) {
  return V::max_i(V::and_i(V::bits_i(v), V::set1_i(0x7fffffff)), acc);
}
// The amax of max_abs_bits' lanes, and whether one of them is a NaN (then 0: a NaN group's scale is NaN whatever
// its amax, group_scale).
template <class V>
inline LNORM_ALWAYS_INLINE float amax_of_bits(typename V::I acc, bool& nan) {
  nan = V::cmp_lt_i(V::set1_i(0x7f800000), acc) != 0;
  return nan ? 0.0f : max_of_lanes<V>(V::from_bits_i(acc));
}

// A group's amax (the f32 max of |y|, exact in any order) and whether it holds a NaN, V's lanes at a time. Inline:
// mx and nvfp4 take it once per 32 or 16 elements, and a call's set-up was a quarter of its samples there.
template <class V>
inline LNORM_ALWAYS_INLINE float group_amax(const float* yg, std::int64_t G, bool& nan) {
  constexpr int L = V::kLanes;
  typename V::I acc = V::set1_i(0);
  std::int64_t i = 0;
  for (; i + L <= G; i += L) acc = max_abs_bits<V>(acc, V::template load<F32>(yg + i));
  float amax = amax_of_bits<V>(acc, nan);
  for (; i < G; ++i) {
    nan |= yg[i] != yg[i];
    const float a = yg[i] < 0 ? -yg[i] : yg[i];
    amax = a > amax ? a : amax;
  }
  return amax;
}

// Every group's scale into s_of and its stored scale into scales[at + g], from its amax in a_of (NaN where the group
// holds a NaN), L groups at a time in lanes for the rules scale_rule names, group_scale's bits (quant_epilogue.hpp):
//   quotient    s = amax / qmax, one f32 division per lane, as group_scale's.
//   pow2_floor  s = 2^clamp(floor(log2 amax) − emax, −127, 127) as clamp(2^floor(log2 amax) · 2^-emax, 2^-127,
//               2^127): amax's exponent field alone (and_ps) is 2^floor(log2 amax) where amax is normal and 0 where
//               it is 0 or subnormal, which group_scale's ilogb puts at −127 after the clamp too (emax ≥ 0); the
//               product is exact (a power of two ≥ 2^-141); the E8M0 byte is s's exponent field (0 for 2^-127).
//   nvfp4       amax·G/6 in f64 lanes (amax·G exact, the quotient correctly rounded: group_scale's double), rounded
//               to E4M3's grid by fp8_codes' f64 addition; s = that value (exact in f32) / G in f32, as
//               nvfp4_element_scale's division; the byte its code (grid_code).
// The lanes group_scale treats apart go to it, one at a time: a NaN or Inf amax, a zero scale (quotient: s = 1;
// nvfp4: c = 0, s = +Inf), an E4M3 value past 448 (saturation). Once per group, group_scale was a call into generic
// code each (with nvfp4's double encode and element scale: 6.5% of `lnorm bench --kernel avx512 --op rmsnorm --dtype
// f32 --shape 64x4096 --quant fp4_e2m1 --scaling nvfp4`'s samples, as much as the quantizer's own loop).
template <class V, QuantFormat Fmt>
void group_scales_simd(const QuantSpec& spec, ::lnorm::cpu::ScaleRule rule, const float* a_of, std::int64_t per_row, void* scales,
                       std::int64_t at, float* s_of) {
  using F = typename V::F;
  using D = typename V::D;
  using M = typename V::M;
  constexpr int L = V::kLanes;
  std::uint8_t* const bytes = static_cast<std::uint8_t*>(scales);
  const auto apart = [&](std::int64_t from, unsigned lanes) {
    for (int k = 0; k < L; ++k) {
      if (((lanes >> k) & 1u) == 0) continue;
      const float a = a_of[from + k];
      s_of[from + k] = ::lnorm::cpu::group_scale(spec, a, a != a, scales, at + from + k);
    }
  };
  const F inf = V::set1(__builtin_inff());
  std::int64_t g = 0;
  if (rule == ::lnorm::cpu::ScaleRule::quotient) {
    constexpr float kTop = static_cast<float>(qmax(Fmt));  // constants: ISA code reads no table at run time
    const F top = V::set1(kTop);
    for (; g + L <= per_row; g += L) {
      const F a = V::template load<F32>(a_of + g);
      const F s = V::div(a, top);
      V::store_ps(s_of + g, s);
      V::store_ps(static_cast<float*>(scales) + at + g, s);
      if (const auto lanes = static_cast<M>(~(V::cmp_lt(V::zero(), s) & V::cmp_lt(a, inf)))) apart(g, lanes);
    }
  } else if (rule == ::lnorm::cpu::ScaleRule::pow2_floor) {
    constexpr float kDown = pow2f(-emax_elem(Fmt));
    const F down = V::set1(kDown);
    for (; g + L <= per_row; g += L) {
      const F a = V::template load<F32>(a_of + g);
      const F s = V::min(V::max(V::mul(V::and_ps(a, inf), down), V::set1(0x1p-127f)), V::set1(0x1p127f));
      V::store_ps(s_of + g, s);
      V::store_u8(bytes + at + g, V::template srli_i<23>(V::bits_i(s)));
      if (const auto lanes = static_cast<M>(~V::cmp_lt(a, inf))) apart(g, lanes);
    }
  } else if (rule == ::lnorm::cpu::ScaleRule::nvfp4) {
    const D global = V::set1_pd(static_cast<double>(spec.global_scale));
    const F global32 = V::set1(spec.global_scale);
    const auto rounded = [&](D a) LNORM_ALWAYS_INLINE {
      const D t = V::div_pd(V::mul_pd(a, global), V::set1_pd(6.0));
      const D c = grid_step_pd<V, QuantFormat::fp8_e4m3>(t);
      return V::sub_pd(V::add_pd(t, c), c);
    };
    // r is on E4M3's grid, so r ≤ 448 (no saturation) is r < 449.
    constexpr float kBelowSaturation = static_cast<float>(qmax(QuantFormat::fp8_e4m3)) + 1;
    for (; g + L <= per_row; g += L) {
      const F a = V::template load<F32>(a_of + g);
      const F r = V::join_ps(rounded(V::lo_pd(a)), rounded(V::hi_pd(a)));
      V::store_ps(s_of + g, V::div(r, global32));
      V::store_u8(bytes + at + g, grid_code<V, QuantFormat::fp8_e4m3>(r, r, M{0}));
      if (const auto lanes = static_cast<M>(~(V::cmp_lt(V::zero(), r) & V::cmp_lt(r, V::set1(kBelowSaturation))))) apart(g, lanes);
    }
  }
  for (; g < per_row; ++g) s_of[g] = ::lnorm::cpu::group_scale(spec, a_of[g], a_of[g] != a_of[g], scales, at + g);
}

// Rows of many small groups (mx's 32, nvfp4's 16, group:G), G a multiple of V's lanes: every group's scale first,
// then every code in one loop with the format a constant. Group by group (quantize_row_simd's general path), each
// group's one or two vectors sat behind its own amax, scale and a call's set-up: a chain of dependent latencies
// (the division alone ~15 cycles) that the next group could not overlap; nvfp4 and mx read 0.05-0.16 of y's GB/s.
// Here the codes' iterations are independent and overlap. Same bits: the same scale rule (group_scale) and codes.
constexpr std::int64_t kBatchedGroups = 1024;  // groups a row may hold for this path (a 4 KiB stack array of scales)
template <class V>
void quantize_groups_simd(const QuantSpec& spec, const float* y, std::int64_t G, std::int64_t per_row, std::uint8_t* q,
                          void* scales, std::int64_t row, AheadLines<V>& ahead) {
  constexpr int L = V::kLanes;
  float a_of[kBatchedGroups], s_of[kBatchedGroups], inv_of[kBatchedGroups];
  for (std::int64_t g = 0; g < per_row; ++g) {
    bool nan = false;
    const float amax = group_amax<V>(y + g * G, G, nan);
    a_of[g] = nan ? __builtin_nanf("") : amax;
  }
  const ::lnorm::cpu::ScaleRule rule = ::lnorm::cpu::scale_rule(spec);
  with_format(spec.format, [&](auto fmt) LNORM_ALWAYS_INLINE {
    group_scales_simd<V, decltype(fmt)::value>(spec, rule, a_of, per_row, scales, row * per_row, s_of);
  });
  // Every group's 1/s, L at a time: one vdivps per L groups where a vdivss per group sat in the chain above (perf
  // annotate, fp8_e4m3/mx on a Xeon: the division and the test after it held 13% of this function's samples). The
  // same correctly rounded quotient either way; usable_inverse's test is taken on it below.
  std::int64_t k = 0;
  for (; k + L <= per_row; k += L) V::store_ps(inv_of + k, V::div(V::set1(1.0f), V::template load<F32>(s_of + k)));
  for (; k < per_row; ++k) inv_of[k] = 1.0f / s_of[k];
  with_format(spec.format, [&](auto fmt) LNORM_ALWAYS_INLINE {
    constexpr QuantFormat kF = decltype(fmt)::value;
    // A packed format's codes (E2M1: two a byte, the even element's in the low nibble) go to q as stored, a vector's
    // L codes as L/2 bytes (V::store_u4): gathering them a byte each and packing 512 at a time in generic code
    // (pack_codes) was 11% of nvfp4's epilogue (perf, avx512 f32 1024x4096).
    constexpr bool kPacked = is_packed(kF);
    for (std::int64_t g = 0; g < per_row; ++g) {
      const std::int64_t i = g * G;
      const float s = s_of[g];
      if (s != s) {  // a NaN group: every code the format's NaN code (0 where it has none)
        const int c = ::lnorm::encode(spec.format, static_cast<double>(s));
        if constexpr (kPacked) std::memset(q + i / 2, c | c << 4, static_cast<std::size_t>(G / 2));
        else std::memset(q + i, c, static_cast<std::size_t>(G));
        continue;
      }
      if (!usable_inverse_bits(inv_of[g])) {
        for (std::int64_t j = i; j < i + G; ++j) {
          const std::uint8_t c = ::lnorm::cpu::encode_quotient(spec.format, y[j], s);
          if constexpr (kPacked) {  // lnorm/quant.hpp store_code's nibbles, here: ISA objects define no shared symbol
            std::uint8_t& b = q[j >> 1];
            b = static_cast<std::uint8_t>((j & 1) ? (b & 0x0f) | (c << 4) : (b & 0xf0) | (c & 0x0f));
          } else {
            q[j] = c;
          }
        }
        continue;
      }
      ahead.upto(i + G);  // per group, not per vector (vectors_ahead says why)
      for (std::int64_t j = i; j < i + G; j += L) {
        const typename V::I codes = vector_codes<V, kF>(V::template load<F32>(y + j), inv_of[g], V::set1_pd(static_cast<double>(s)));
        if constexpr (kPacked) V::store_u4(q + j / 2, codes);
        else V::store_u8(q + j, codes);
      }
    }
  });
  ahead.upto(per_row * G);
}

// quantize_row's q and scales (quant_epilogue.hpp), V's lanes at a time.
// known: the row's amax where the row driver took it (sinks::RowAmax); used where the row is one group. next: the x
// row the driver reads next, prefetched over the codes (AheadLines).
template <class V>
void quantize_row_simd(const QuantSpec& spec, const float* y, std::int64_t n, std::uint8_t* q_all, void* scales, std::int64_t row,
                       sinks::RowAmax known = {}, sinks::RowAhead next = {}) {
  AheadLines<V> ahead(next, n);
  constexpr int L = V::kLanes;
  std::int64_t G = 0, per_row = 0, row_bytes = 0;
  ::lnorm::cpu::quant_groups(spec, n, G, per_row, row_bytes);
  const bool packed = row_bytes != n;  // two codes a byte (lnorm/quant.hpp is_packed; G even)
  std::uint8_t* q = q_all + row * row_bytes;
  if (per_row > 1 && G % L == 0 && per_row <= kBatchedGroups)
    return quantize_groups_simd<V>(spec, y, G, per_row, q, scales, row, ahead);
  // A packed format's small groups (nvfp4's 16, mx's 32) gather their codes here, one a byte, and are packed a chunk
  // at a time: one pack_codes call per 512 codes, not one per group (it was a fifth of nvfp4's epilogue).
  constexpr std::int64_t kChunk = 512;
  std::uint8_t codes[kChunk];
  std::int64_t held = 0, held_from = 0;  // codes gathered, and the element index of the first
  const auto flush = [&] {
    if (held) ::lnorm::cpu::pack_codes(codes, held, q + held_from / 2);
    held = 0;
  };
  for (std::int64_t g = 0; g < n / G; ++g) {
    const float* yg = y + g * G;
    std::uint8_t* qg = q + (packed ? g * G / 2 : g * G);
    bool nan = known.known && per_row == 1 ? known.nan : false;
    const float amax = spec.scaling == Scaling::tensor     ? 0.0f
                       : known.known && per_row == 1 ? known.amax
                                                           : group_amax<V>(yg, G, nan);
    const float s = ::lnorm::cpu::group_scale(spec, amax, nan, scales, row * per_row + g);
    if (packed && G <= kChunk) {
      if (held + G > kChunk) flush();
      if (held == 0) held_from = g * G;
      if (nan) std::memset(codes + held, ::lnorm::encode(spec.format, static_cast<double>(s)), static_cast<std::size_t>(G));
      else encode_span<V>(spec.format, s, yg, G, codes + held, ahead, g * G);
      held += G;
      continue;
    }
    if (nan) {
      const int c = ::lnorm::encode(spec.format, static_cast<double>(s));  // s: NaN
      std::memset(qg, packed ? c | c << 4 : c, static_cast<std::size_t>(packed ? G / 2 : G));
      continue;
    }
    encode_span_stored<V>(spec.format, packed, s, yg, G, qg, ahead, g * G);
  }
  flush();
  ahead.upto(n);
}

#endif
