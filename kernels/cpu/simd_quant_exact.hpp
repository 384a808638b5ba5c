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
// One group's (a block with fewer groups than lanes: group_lanes_simd's arithmetic one group at a time; e_abs/s as
// e_abs·(1/s), whose two roundings the slack covers).
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

// An 8-bit float format's lanes by their bits alone, where the bound is small against the grid (BlockLanes: K): a =
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
  constexpr int kShift = 23 - info(Fmt).mbits;
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
  code = normal_code_bits<V, Fmt>(a_bits, t_bits);
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

// A block's groups' lane constants (the header's): 1/s and the bound's A and C in f32, A and C rounded up (f32_up's
// way); A = +Inf (no lane settles) where 1/s is not a normal f32 or C leaves f32's range; e_abs/s as e_abs·(1/s),
// whose two roundings the slack covers. And for settle_vector_bits, K, the ulps of a the bound may reach (K > A·2^24 +
// C/ulp(2^emin), usable below kHalf/2: settle_vector_bits' comment), as the window of low bits [kHalf − K, kHalf + K]
// that does not settle; [0, 2^31 − 1] (no bits settle; stored as f32 bits) where the group takes settle_vector, or
// the format has no bits path. N: room for a block's groups, in whole vectors.
template <int N>
struct BlockLanes {
  float inv[N], a[N], c[N], lo[N], hi[N];
};
// Formed L groups at once on V's lanes, in f64 lanes and rounded to f32 by the lanes' conversion (to nearest), where
// the block has L groups or more (groups of 64 or fewer); else one at a time (lane_bound, bits_window). One group at a
// time, a division and three conversions each, they were 10-15% of mx's epilogue at a group every two vectors (q-only
// driver with them dropped: 1.33 → 1.12-1.21 ns an element); in lanes, settle_codes' loop (1024 codes in L1,
// microbenchmark) takes 0.43 ns an E4M3 code in groups of 16 where it took 0.62, 0.34 in groups of 32 for 0.44. K from k = A·2^24·(1 +
// 2^-20) + C/ulp(2^emin)·(1 + 2^-20) + 1 in f32: where k < kHalf/2 ≤ 2^19, f32(k) is within 2^-5 of k, and f32(k) <
// kHalf/2 only where k < kHalf/2 (a power of two: rounding is monotone); f32(k) rounded to an integer, to nearest,
// plus one is K > k.
template <class V, QuantFormat Fmt, int N>
inline void group_lanes_simd(const double* s, std::int64_t count, double e_abs, double e_rel, BlockLanes<N>& out) {
  using F = typename V::F;
  using D = typename V::D;
  constexpr int L = V::kLanes, DL = V::kDLanes;
  constexpr double kSlack = 1 + 0x1p-20;
  if (count < L) {  // (the lanes' chain before the block's first vector cost groups of 128 3-5%, one scale 6-15%)
    for (std::int64_t g = 0; g < count; ++g) {
      const LaneBound b = lane_bound(s[g], e_abs, e_rel);
      out.inv[g] = b.inv, out.a[g] = b.a, out.c[g] = b.c;
      std::int32_t lo = 0, hi = 0x7fffffff;
      if constexpr (is_float(Fmt) && info(Fmt).bits == 8) {
        constexpr std::int32_t kHalf = 1 << (22 - info(Fmt).mbits);
        if (const std::int32_t k = bits_window<Fmt>(b); k >= 0) lo = kHalf - k, hi = kHalf + k;
      }
      std::memcpy(out.lo + g, &lo, 4), std::memcpy(out.hi + g, &hi, 4);
    }
    return;
  }
  const float a_all = f32_up((e_rel + 0x1p-22) * kSlack);  // (the same for every group)
  double padded[N];  // s, then 1 to whole vectors (the loads read whole vectors)
  std::int64_t j = 0;
  for (; j < count; ++j) padded[j] = s[j];
  for (; j % L != 0; ++j) padded[j] = 1.0;
  const auto c_of = [&](D inv_d, D inv) LNORM_ALWAYS_INLINE {  // (e_abs·inv_d + inv·2^-149)·kSlack² + 2^-126, up
    const D v = V::add_pd(V::mul_pd(V::mul_pd(V::add_pd(V::mul_pd(V::set1_pd(e_abs), inv_d), V::mul_pd(inv, V::set1_pd(0x1p-149))),
                                              V::set1_pd(kSlack)), V::set1_pd(kSlack)), V::set1_pd(0x1p-126));
    return V::mul_pd(v, V::set1_pd(1 + 0x1p-22));  // f32_up's: its nearest f32 lies above v
  };
  const F inf = V::set1(__builtin_inff());
  for (std::int64_t g = 0; g < count; g += L) {
    const D inv_d0 = V::div_pd(V::set1_pd(1.0), V::load_pd(padded + g)), inv_d1 = V::div_pd(V::set1_pd(1.0), V::load_pd(padded + g + DL));
    const F inv = V::join_ps(inv_d0, inv_d1);
    const F c = V::join_ps(c_of(inv_d0, V::lo_pd(inv)), c_of(inv_d1, V::hi_pd(inv)));
    const typename V::M normal = V::cmp_lt(V::set1(0x1.fffffcp-127f), inv) & V::cmp_lt(inv, inf);  // (NaN: neither)
    const typename V::M usable = normal & V::cmp_lt(c, inf);
    const F a = V::from_bits_i(V::select_i(usable, V::bits_i(V::set1(a_all)), V::bits_i(inf)));
    V::store_ps(out.inv + g, V::from_bits_i(V::select_i(normal, V::bits_i(inv), V::bits_i(V::set1(1.0f)))));
    V::store_ps(out.a + g, a);
    V::store_ps(out.c + g, c);
    if constexpr (is_float(Fmt) && info(Fmt).bits == 8) {
      constexpr int kHalf = 1 << (22 - info(Fmt).mbits);
      constexpr double kPerUlpMin = 1.0 / (static_cast<double>(pow2f(1 - info(Fmt).bias)) * 0x1p-23);  // a power of two
      const auto k_of = [&](D a_d, D c_d) LNORM_ALWAYS_INLINE {
        return V::add_pd(V::add_pd(V::mul_pd(V::mul_pd(a_d, V::set1_pd(0x1p24)), V::set1_pd(1 + 0x1p-20)),
                                   V::mul_pd(V::mul_pd(c_d, V::set1_pd(kPerUlpMin)), V::set1_pd(1 + 0x1p-20))), V::set1_pd(1.0));
      };
      const F k = V::join_ps(k_of(V::lo_pd(a), V::lo_pd(c)), k_of(V::hi_pd(a), V::hi_pd(c)));
      const typename V::M window = V::cmp_lt(k, V::set1(static_cast<float>(kHalf / 2)));
      // k rounded to an integer by the 1.5·2^23 addition (clamped first: +Inf and huge lanes are outside the window)
      const F kr = V::sub(V::add(V::min(k, V::set1(static_cast<float>(kHalf / 2))), V::set1(0x1.8p23f)), V::set1(0x1.8p23f));
      const typename V::I lo = V::cvt_i(V::sub(V::set1(static_cast<float>(kHalf - 1)), kr));  // kHalf − (kr + 1)
      const typename V::I hi = V::cvt_i(V::add(V::set1(static_cast<float>(kHalf + 1)), kr));
      V::store_ps(out.lo + g, V::from_bits_i(V::select_i(window, lo, V::set1_i(0))));
      V::store_ps(out.hi + g, V::from_bits_i(V::select_i(window, hi, V::set1_i(0x7fffffff))));
    }
  }
}

// codes[0, n) and the bitmap settled (bit i of word i/64: 1 where code i is Q(y*/s), 0 where the exact path must
// decide; n ≤ 64·words) for y[0, n) in groups of G, group g over its own scale s[g] (finite and > 0; any other
// settles nothing there), and the bound |y_i − y*_i| ≤ e_abs + e_rel·|y_i|. G = n (one scale), or a multiple of
// V's lanes, so that no vector holds two groups. The tail past whole vectors reads unsettled (its codes
// unwritten). A bitmap, not a byte per element: the caller keeps a word's 64 codes at once where every bit is set
// (bytes cost a scalar store and a test per element, a third of the epilogue). One call for a row's small groups
// (nvfp4's 16, mx's 32, group:128), not one a group: a call a group, with its constants and a loop set up for one
// or two vectors, cost ~10 ns, and held nvfp4 at 0.08 of its y (docs/performance.md).
// In blocks of 64 vectors: the block's groups' constants first, L groups at once (group_lanes_simd; formed inside the
// vector loop they cost registers, and the loop spilled), then its vectors, a
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
    // (G ≥ L, or one group: at most a group a vector, and one more begun; in whole vectors)
    BlockLanes<(kBlock / L + 1 + L - 1) / L * L> lanes;
    for (std::int64_t block = 0; block < n; block += kBlock) {
      const std::int64_t block_end = n - block < kBlock ? n : block + kBlock, g0 = block / G, g1 = (block_end - 1) / G;
      group_lanes_simd<V, kF>(s + g0, g1 - g0 + 1, e_abs, e_rel, lanes);
      std::uint64_t redo = 0, word = 0;
      std::int64_t i = block;
      for (std::int64_t g = g0; g <= g1; ++g) {
        const std::int64_t k = g - g0;
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
        const typename V::F inv = V::set1(lanes.inv[k]);
        if constexpr (kBits) {
          std::int32_t lo, hi;  // (memcpy: this header is included inside a namespace, without <bit>)
          std::memcpy(&lo, lanes.lo + k, 4), std::memcpy(&hi, lanes.hi + k, 4);
          const typename V::I lo_frac = V::set1_i(lo), hi_frac = V::set1_i(hi);
          const bool group_redo = lo == 0;  // (a window kHalf ± K has lo > 0)
          run([&](std::int64_t at) LNORM_ALWAYS_INLINE {
            typename V::I code;
            typename V::M normal;
            const auto ok = static_cast<std::uint64_t>(settle_vector_bits<V, kF>(y + at, inv, lo_frac, hi_frac, code, normal));
            V::store_u8(codes + at, code);
            redo |= static_cast<std::uint64_t>(group_redo || normal != kAll) << ((at - block) / L);
            return ok;
          });
        } else {
          const typename V::F ea = V::set1(lanes.a[k]), ec = V::set1(lanes.c[k]);
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
          const std::int64_t k = at / G - g0;
          typename V::I code;
          const auto ok = static_cast<std::uint64_t>(settle_vector<V, kF>(y + at, V::set1(lanes.inv[k]), V::set1(lanes.a[k]), V::set1(lanes.c[k]), code));
          V::store_u8(codes + at, code);
          settled[at / 64] = (settled[at / 64] & ~(((std::uint64_t{1} << L) - 1) << (at % 64))) | ok << (at % 64);
        }
      }
    }
  });
}

}  // namespace exact_lanes
