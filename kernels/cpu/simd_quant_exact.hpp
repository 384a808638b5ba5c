// The correctly rounded kernels' settled-code test (quant_exact.hpp: Q(t − e) = Q(t + e) settles Q(y*/s)) on V's f32
// lanes: quantize_row_exact's codes loop, which ran it one element at a time (4-6 ns an element, 1/30-1/60 of the
// same kernel's y: docs/performance.md), hands each group's span here first (ExactQuantRow::settle) and takes the
// exact path only for the lanes this leaves unsettled. A lane settles where the interval the bound allows around its
// quotient lies inside one code's rounding region and on one side of 0. Not the scalar test's arithmetic (it need not
// be: a settled code is proven Q(y*/s), so only how many lanes settle can differ, never a code):
//   t = f32(y)·f32(1/s) in f32: three roundings, each within 2^-24 of its result (1/s a normal f32, else nothing
//   settles), so |t − y/s| ≤ 3.0001·2^-24·|t| + f32(1/s)·2^-150 (y's subnormal step) + 2^-150 (t's).
//   e = fma(|t|, A, C) in f32 bounds |t − y*/s|, with A ≥ (e_rel + 2^-22)·(1 + 2^-20) and C ≥ (e_abs/s +
//   f32(1/s)·2^-149)·(1 + 2^-20)² + 2^-126, each rounded up to f32: e_rel·|y|/s ≤ e_rel·|t|·(1 + 2^-21), and the
//   slack covers that factor, the fma's own rounding (2^-24 of e ≥ C ≥ 2^-126, normal) and e_abs/s's.
//   The region: a = min(|t|, max) rounded to the grid by one addition (fp8_codes' f32 argument, simd_quant.hpp),
//   r; half the quantum at a is hq. r's region reaches hq − |a − r| from a on a's side and at least hq/2 on the
//   other (where r is a power of two below a, the binade below has half the quantum): the margin is
//   min(hq − |a − r|, hq/2, |t|) (the last: y*/s keeps t's sign, for the zero's sign and as the NaN carrier), exact
//   in f32 (Sterbenz), and the lane settles where e < margin. Clamping |t| at max settles only lanes whose every
//   value lies above max − hq/2, in max's region (max is no power of two: E4M3 448, E5M2 57344, E2M1 6). int8:
//   t clamped to [lo, hi] (integers: no lane crosses a midpoint), rounded by the 1.5·2^23 addition, region ±0.5.
// The quantum and its halves come from a's exponent field by integer additions, not multiplications: this Zen 5
// issues one 512-bit FP operation a cycle (a microbenchmark: vfmadd/vminps on zmm 1.0 a cycle, on ymm 2.0; vandps
// 3.7), and the FP operations were the loop's bound: ~14 a vector now (two conversions and their join, the product,
// clamp, fma, the rounding's add and sub, three for the margin, two mins, two compares), against ~20 with the
// products and ~65 in f64 lanes (the first form: 0.87 ns an element, 41% of avx512_cr's fp8/row epilogue at
// 1024x4096, perf record).
// The settled r is a grid value ≤ max: its code is grid_code's (simd_quant.hpp), the sign from t's (y*'s: |t| > e).
// Included in simd_body.hpp after simd_quant.hpp, inside the anonymous namespace of the ISA translation unit.
#pragma once

namespace exact_lanes {

// The lanes' constants (the header): 1/s and the bound's A and C in f32, A and C rounded up; A = +Inf (no lane
// settles) where 1/s is not a normal f32 or C leaves f32's range.
struct LaneBound {
  float inv, a, c;
};
// v ≥ 2^-126 (a normal f32 or above) rounded up to f32 or past it, without a branch: f32's nearest of v·(1 + 2^-22)
// is at least v·(1 + 2^-22)·(1 − 2^-24) > v (the double product's own rounding is 2^-53). The slack, 2^-22 of A and
// C, settles a few fewer lanes than the next f32 would; the exact next f32 took a compare and a branch taken half
// the time, mispredicted once a group (a sixth of nvfp4's epilogue at one group a vector, perf annotate).
inline float f32_up(double v) {
  const double w = v * (1 + 0x1p-22);
  return w <= 0x1.fffffep127 ? static_cast<float>(w) : __builtin_inff();  // NaN or beyond f32: +Inf, nothing settles
}
// Per call (per group where groups are small: one division, no libm call; e_abs/s as e_abs·(1/s), whose two roundings
// the slack covers).
inline LaneBound lane_bound(double s, double e_abs, double e_rel) {
  constexpr double kSlack = 1 + 0x1p-20;
  const double inv_d = 1.0 / s;
  const float inv = static_cast<float>(inv_d);
  const bool normal = inv >= 0x1p-126f && inv <= 0x1.fffffep127f;
  const float a = f32_up((e_rel + 0x1p-22) * kSlack), c = f32_up((e_abs * inv_d + inv * 0x1p-149) * kSlack * kSlack + 0x1p-126);
  return {normal ? inv : 1.0f, normal && c < __builtin_inff() ? a : __builtin_inff(), c};
}

// Lanes of one vector: the codes of y[0, L) and the mask of the lanes they settle (1 bit each). The margin test as
// e + |a − r| < hq, e < hq/2 and e < |t| (fl(e + d) < hq implies e + d < hq: rounding is monotone and hq an f32), the
// comparisons on the bits as integers (the same order for values ≥ 0; a NaN's bits lie above +Inf's, so a NaN lane
// fails them), and the clamp likewise: integer lanes issue twice as often as FP ones here (the header).
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::M settle_vector(const double* y, typename V::F inv, typename V::F ea, typename V::F ec,
                                                       typename V::I& code) {
  using F = typename V::F;
  using I = typename V::I;
  const F t = V::mul(V::join_ps(V::load_pd(y), V::load_pd(y + V::kDLanes)), inv);
  const F at = V::abs(t);
  // |·|: e is ≥ 0 or a NaN (0·Inf, where A = +Inf says nothing settles and t = 0), and x86's NaN from an invalid
  // operation has its sign bit set: as an integer it lay below every bound, and a y = 0 lane of a group without a
  // usable scale settled (test_quant_simd's settled-code case, groups without a scale).
  const F e = V::abs(V::fmadd(at, ea, ec));
  const I e_bits = V::bits_i(e);
  if constexpr (is_float(Fmt)) {
    // Every format fact a constant expression (simd_quant.hpp's fp8_codes says why: an unoptimised build would call
    // the helpers and emit the format table in this ISA object; ctest isa_objects_share_no_code).
    constexpr int Mbits = info(Fmt).mbits;
    constexpr float kMax = static_cast<float>(qmax(Fmt)), kMinNormal = pow2f(1 - info(Fmt).bias);
    const I a_bits = V::min_i(V::bits_i(at), V::bits_i(V::set1(kMax)));  // NaN lanes: max
    const F a = V::from_bits_i(a_bits);
    // 2^max(floor(log2 a), emin), then c (its ulp the quantum), hq and hq/2 by adding to the exponent field.
    const I p = V::max_i(V::and_i(a_bits, V::set1_i(0x7f800000)), V::bits_i(V::set1(kMinNormal)));
    const F c = V::from_bits_i(V::add_i(p, V::set1_i((23 - Mbits) << 23)));
    const I hq = V::add_i(p, V::set1_i((-1 - Mbits) * (1 << 23)));
    const I hq2 = V::add_i(p, V::set1_i((-2 - Mbits) * (1 << 23)));
    const F r = V::sub(V::add(a, c), c);
    code = grid_code<V, Fmt, true>(r, t, typename V::M{0});
    return V::cmp_lt_i(V::bits_i(V::add(e, V::abs(V::sub(a, r)))), hq) & V::cmp_lt_i(e_bits, hq2) & V::cmp_lt_i(e_bits, V::bits_i(at));
  } else {
    constexpr float lo = static_cast<float>(info(Fmt).qmin), hi = static_cast<float>(qmax(Fmt));
    const F tc = V::min(V::max(t, V::set1(lo)), V::set1(hi));
    const F r = V::sub(V::add(tc, V::set1(0x1.8p23f)), V::set1(0x1.8p23f));
    code = V::cvt_i(r);  // the rounded integer, its low byte the code (store_u8 truncates)
    return V::cmp_lt_i(V::bits_i(V::add(e, V::abs(V::sub(tc, r)))), V::bits_i(V::set1(0.5f))) & V::cmp_lt_i(e_bits, V::bits_i(at));
  }
}

// An 8-bit float format's lanes by their bits alone, where the bound is small against the grid (bits_window): a =
// min(|t|, max) at or above 2^emin has its grid's midpoints where its low 23 − mbits bits (frac) equal half =
// 2^(22 − mbits), in ulps of a; the bound e = A·|t| + C is at most K ulps of a, K ≥ A·2^24 + C/ulp(2^emin), so a lane
// settles where |frac − half| > K: a more than e from both midpoints of its binade, and, with K < half/2, from the
// one below a power of two (half/2 of a's ulps away at least). K < half/2 also gives e < a (the sign) and, for a
// clamped |t| > max, every value within e above max − hq (max's region). The code is a's bits rounded by adding
// half (no lane settles at a tie), shifted and rebiased, with t's sign (never zero: a ≥ 2^emin). Below 2^emin (the
// format's subnormals), NaN: not `normal`, and the caller redoes that vector with settle_vector (rare in a row scaled
// to its amax; every ordinal equally often, as the tests draw them, puts 6% of E4M3's lanes there). Twelve integer operations where the general form has ~24 vector operations;
// every vector operation shares the same pipes on this Zen 5 (the header): the count is what bounds the loop.
template <class V, QuantFormat Fmt>
inline LNORM_ALWAYS_INLINE typename V::M settle_vector_bits(const double* y, typename V::F inv, typename V::I lo_frac,
                                                            typename V::I hi_frac, typename V::I& code, typename V::M& normal) {
  using I = typename V::I;
  constexpr int Mbits = info(Fmt).mbits, kShift = 23 - Mbits, kRebias = -((127 - info(Fmt).bias) << Mbits);
  constexpr float kMax = static_cast<float>(qmax(Fmt)), kMinNormal = pow2f(1 - info(Fmt).bias);  // (constants: above)
  const typename V::F t = V::mul(V::join_ps(V::load_pd(y), V::load_pd(y + V::kDLanes)), inv);
  const I t_bits = V::bits_i(t);
  const I abs_bits = V::and_i(t_bits, V::set1_i(0x7fffffff));
  const I a_bits = V::min_i(abs_bits, V::bits_i(V::set1(kMax)));
  const I frac = V::and_i(a_bits, V::set1_i((1 << kShift) - 1));
  normal = V::cmp_lt_i(V::bits_i(V::set1(kMinNormal)), V::add_i(a_bits, V::set1_i(1))) &
           V::cmp_lt_i(abs_bits, V::set1_i(0x7f800001));
  // (Not AND-ed with normal: the caller redoes every vector with a lane outside it, bits and codes.)
  const typename V::M settled = V::cmp_lt_i(frac, lo_frac) | V::cmp_lt_i(hi_frac, frac);
  const I magnitude = V::add_i(V::template srli_i<kShift>(V::add_i(a_bits, V::set1_i(1 << (kShift - 1)))),
                               V::set1_i(kRebias));
  code = V::or_i(magnitude, V::and_i(V::template srli_i<24>(t_bits), V::set1_i(0x80)));
  return settled;
}
// K for settle_vector_bits (the ulps of a the bound may reach), or -1 where the bound is not small enough for it.
template <QuantFormat Fmt>
inline std::int32_t bits_window(const LaneBound& b) {
  constexpr int Mbits = info(Fmt).mbits;
  constexpr double kHalf = static_cast<double>(1 << (22 - Mbits));
  constexpr double ulp_min = static_cast<double>(pow2f(1 - info(Fmt).bias)) * 0x1p-23;
  const double k = static_cast<double>(b.a) * 0x1p24 * (1 + 0x1p-20) + static_cast<double>(b.c) / ulp_min * (1 + 0x1p-20) + 1;
  return k < kHalf / 2 ? static_cast<std::int32_t>(k) + 1 : -1;
}

// One group's lane constants: lane_bound's, and for settle_vector_bits its window of low bits [lo, hi] that do not
// settle; [0, 2^31 − 1] (no bits settle) where the group takes settle_vector: bits_window −1, or not a bits format.
struct GroupLanes {
  float inv, a, c;
  std::int32_t lo, hi;
};
template <QuantFormat Fmt>
inline GroupLanes group_lanes(double s, double e_abs, double e_rel) {
  const LaneBound b = lane_bound(s, e_abs, e_rel);
  if constexpr (is_float(Fmt) && info(Fmt).bits == 8) {
    constexpr std::int32_t kHalf = 1 << (22 - info(Fmt).mbits);
    if (const std::int32_t k = bits_window<Fmt>(b); k >= 0) return {b.inv, b.a, b.c, kHalf - k, kHalf + k};
  }
  return {b.inv, b.a, b.c, 0, 0x7fffffff};
}

// codes[0, n) and the bitmap settled (bit i of word i/64: 1 where code i is Q(y*/s), 0 where the exact path must
// decide; n ≤ 64·words) for y[0, n) in groups of G, group g over its own scale s[g] (finite and > 0; any other
// settles nothing there), and the bound |y_i − y*_i| ≤ e_abs + e_rel·|y_i|. G = n (one scale), or a multiple of
// V's lanes, so that no vector holds two groups. The tail past whole vectors reads unsettled (its codes
// unwritten). A bitmap, not a byte per element: the caller keeps a word's 64 codes at once where every bit is set
// (bytes cost a scalar store and a test per element, a third of the epilogue). One call for a row's small groups
// (nvfp4's 16, mx's 32, group:128), not one a group: a call a group, with its constants and a loop set up for one
// or two vectors, cost ~10 ns, and held nvfp4 at 0.08 of its y (docs/performance.md).
// In blocks of 64 vectors: the block's groups' constants first, in a scalar loop of independent iterations (a
// division each; formed inside the vector loop they cost registers, and the loop spilled), then its vectors, a
// group's from its constants; an 8-bit float format's by their bits where the group's bound allows
// (settle_vector_bits), and every vector that cannot take the bits is marked (redo) and redone after the block's
// loop, which then holds no second body: with one inline, or a call (every zmm caller-saved), GCC re-broadcast the
// loop's constants every vector.
template <class V>
void settle_codes(QuantFormat f, const double* y, std::int64_t n, std::int64_t G, const double* s, double e_abs,
                  double e_rel, std::uint8_t* codes, std::uint64_t* settled) {
  constexpr int L = V::kLanes;
  constexpr std::int64_t kBlock = 64 * L;
  static_assert(64 % L == 0);
  with_format(f, [&](auto fmt) LNORM_ALWAYS_INLINE {
    constexpr QuantFormat kF = decltype(fmt)::value;
    constexpr bool kBits = is_float(kF) && info(kF).bits == 8;
    constexpr auto kAll = static_cast<typename V::M>((std::uint64_t{1} << L) - 1);
    GroupLanes lanes[kBlock / L + 1];  // (G ≥ L, or one group: at most a group a vector, and one more begun)
    for (std::int64_t block = 0; block < n; block += kBlock) {
      const std::int64_t block_end = n - block < kBlock ? n : block + kBlock, g0 = block / G, g1 = (block_end - 1) / G;
      for (std::int64_t g = g0; g <= g1; ++g) lanes[g - g0] = group_lanes<kF>(s[g], e_abs, e_rel);
      std::uint64_t redo = 0, word = 0;
      std::int64_t i = block;
      for (std::int64_t g = g0; g <= g1; ++g) {
        const GroupLanes& c = lanes[g - g0];
        const std::int64_t group_end = (g + 1) * G < block_end ? (g + 1) * G : block_end;
        // The group's vectors: its whole words in a loop of their own (a word's bits in a register, stored once, no
        // test a vector: with one, int8/row lost 7%, q-only driver), then a small group's part of a word, or the
        // tail, vector by vector, the word kept across groups.
        const auto run = [&](auto vector) LNORM_ALWAYS_INLINE {
          if (i % 64 == 0)
            for (; i + 64 <= group_end; i += 64) {
              std::uint64_t whole = 0;
              for (int j = 0; j < 64; j += L) whole |= vector(i + j) << j;
              settled[i / 64] = whole;
            }
          for (; i + L <= group_end; i += L) {
            word |= vector(i) << (i % 64);
            if ((i + L) % 64 == 0) settled[i / 64] = word, word = 0;
          }
        };
        const typename V::F inv = V::set1(c.inv);
        if constexpr (kBits) {
          const typename V::I lo_frac = V::set1_i(c.lo), hi_frac = V::set1_i(c.hi);
          const bool group_redo = c.lo == 0;  // (a window kHalf ± k has lo > 0)
          run([&](std::int64_t at) LNORM_ALWAYS_INLINE {
            typename V::I code;
            typename V::M normal;
            const auto ok = static_cast<std::uint64_t>(settle_vector_bits<V, kF>(y + at, inv, lo_frac, hi_frac, code, normal));
            V::store_u8(codes + at, code);
            redo |= static_cast<std::uint64_t>(group_redo || normal != kAll) << ((at - block) / L);
            return ok;
          });
        } else {
          const typename V::F ea = V::set1(c.a), ec = V::set1(c.c);
          run([&](std::int64_t at) LNORM_ALWAYS_INLINE {
            typename V::I code;
            const auto ok = static_cast<std::uint64_t>(settle_vector<V, kF>(y + at, inv, ea, ec, code));
            V::store_u8(codes + at, code);
            return ok;
          });
        }
      }
      if (block_end % 64 != 0) settled[block_end / 64] = word;  // the last word, part of it past whole vectors
      if constexpr (kBits) {
        for (; redo != 0; redo &= redo - 1) {
          const std::int64_t at = block + __builtin_ctzll(redo) * L;
          const GroupLanes& c = lanes[at / G - g0];
          typename V::I code;
          const auto ok = static_cast<std::uint64_t>(settle_vector<V, kF>(y + at, V::set1(c.inv), V::set1(c.a), V::set1(c.c), code));
          V::store_u8(codes + at, code);
          settled[at / 64] = (settled[at / 64] & ~(((std::uint64_t{1} << L) - 1) << (at % 64))) | ok << (at % 64);
        }
      }
    }
  });
}

}  // namespace exact_lanes
