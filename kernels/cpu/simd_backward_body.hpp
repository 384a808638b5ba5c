// The SIMD kernels' backward rows (avx2, avx512: layernorm_bwd, rmsnorm_bwd; f32, f16 and bf16 storage, f32
// math), written once against an operations layer V as simd_body.hpp is: Avx2Ops (avx2.cpp), Avx512Ops
// (avx512.cpp) and EmulatedOps<8>/<16> (the test kernels avx2_emu, avx512_emu, tests/simd_emulation.cpp), the
// same bits (tests/test_simd_native.cpp).
//
// On L lanes, from the forward's saved f32 mean m and rstd, with the mean made
// exact (a two-float mean, as the forward avx512's): m is the exact mean rounded to f32, and on offset rows
// its error |mean − m| ≤ |mean|·2^-24 would cost xhat kappa·2^-24 absolutely, kappa = |mean|/std (the
// kappa ulps avx2's backward and PyTorch's lose, measured 2.5e5 scaled ulp on dx at seed 1). Pass 1 sums
// d = x − m, exact in f32 wherever it matters (Sterbenz: x within a factor 2 of m, which is every element
// of a row whose kappa is large), so mean_lo = Σd/n is the rest of the mean to ~2^-53, and
//   xhat = (d − mean_lo)·rstd = fma(d, rstd, −mean_lo·rstd)     (the constant rounded once to f32)
//   pass 1 (reads x, dy, w):  d = x − m, g = dy·w, u = d·rstd in f32;  Σd, Σg and Σg·u in f64 (8 lanes × 2 each)
//                             mean(g·xhat) = (Σg·u − mean_lo·rstd·Σg)/n in f64
// (g·u rather than g·d: on rows of tiny or subnormal values g·d would underflow f32 and lose its relative
// precision — 44 scaled ulp on dx, seed 4 — where u is of the size of xhat.)
//   pass 2 (x, dy, w again, from L1/L2):  dx = rstd·(g − mean(g) − xhat·mean(g·xhat)) in f32, rounded once
//                             to x's dtype and stored; the block's dgamma += dy·xhat and dbeta += dy in f64.
// RMSNorm has mean 0: d = x, no Σd, xhat = x·rstd. What is left of the error is f32's few roundings per
// element (xhat's fma, g, dx's three operations) and the saved rstd's own rounding: no kappa term.
// Pass 2 of row r shares its column loop with pass 1 of row r + 1 (DRAM reads of the next row overlap this
// row's arithmetic; measured on the AVX2 kernel when it was written apart). Rows whose saved statistics are not finite, or whose rstd
// is 0, subnormal or +Inf, and rows whose sums are not finite (x − m overflowing, NaN/Inf in dy or gamma),
// go to a.careful_row (welford's careful scalar row) before any of their partials is added.
// Tails are masked: lanes past the row read nothing and add +0 to every sum (d is masked to +0 there).
// Range: pass 1 also keeps max|g|, max|dy| and whether any dy is subnormal, and the careful row takes the rows
// where f32 would overflow or lose precision (a review found both; verify draws dy at 2^-3..2^3 only):
//   (2 + sqrt(n))·max(max|g|·max(1, rstd), max|dy|) ≥ 2^126: g − mean(g) − xhat·mean(g·xhat) (at most
//     (2 + sqrt(n))·max|g|: |xhat| ≤ sqrt(n) and |mean(g·xhat)| ≤ max|g|), its product with rstd, or dy·xhat could
//     overflow where dx and dgamma are finite (rstd was added when a width-1 RMSNorm row with eps = 0, whose exact
//     dx is 0, came out +Inf: rstd = 1/|x| = 1.3e9 times f32's rounding residue of g = 1.6e36, seed 1);
//   0 < max|g| < 2^-90, or a subnormal dy: g, mean(g) and dy·xhat would be rounded on the 2^-149 grid and the
//     error multiplied by rstd; at max|g| ≥ 2^-90 that grid is at most 2^-150·n/max|g| ≤ 2^-29 of dx's scale;
//   max|dy| ≥ 2^64: dy·xhat and xhat·mean(g·xhat) multiply xhat's rounding on that grid by |dy| (and an xhat
//     below 2^-149 is lost where dy·xhat is not);
//   RMSNorm with a subnormal x, or with rstd < 2^-60 (values past 2^60): xhat = x·rstd may be subnormal, and
//     dgamma's dy·xhat multiplies its rounding on the 2^-149 grid by |dy| (4.9 ulps of a subnormal dgamma, 1x4096
//     subnormal row, eps 1e-3). All three found by RMSNorm's metric, which measures a small dx or dgamma against
//     its own terms; subnormal inputs are rare in real data, so the careful row costs nothing there.
// RMSNorm's dx is rstd·g − xhat·(rstd·mean(g·xhat)): each term of dx's own size, so where dx is small only its own
// rounding falls on the subnormal grid (the form above rounded xhat·mean(g·xhat) there first, and rstd multiplied
// that: 30 scaled ulp on a dx of 2.9e-40 whose g is 0).
//
// What limits it: the f32 → f64 conversions of the exact sums. vcvtps2pd zmm ← ymm issues about once per 1.6
// cycles on this Zen 5 (a loop of 6 per iteration: 9.8-10.4 cycles), and a LayerNorm element needs 10 per 16
// lanes (Σd, Σg, Σg·u, dgamma, dbeta: two each), RMSNorm 6; in cache (64x1024) LayerNorm runs at 0.41 ns per
// element; on a Zen 3 (AVX2) the LayerNorm f32 loop is 62 instructions per 8 elements, ten of them f32 → f64
// conversions of two µops each. At DRAM sizes the loads of the next row wait besides (software prefetch,
// kAheadBytes; the prefetch wrappers must be inlined or GCC 12 deletes the calls: avx2_ops.hpp). Measured
// with `lnorm bench --dir bwd` (README "Backward"; docs/performance.md).
//
// Included inside an anonymous namespace after the layer's header and simd_body.hpp's helpers (hsum_pd):
// internal linkage in every TU (ctest isa_objects_share_no_code).
#ifndef LNORM_SIMD_BACKWARD_BODY_INCLUDED
#define LNORM_SIMD_BACKWARD_BODY_INCLUDED

namespace bwd {

// One row's f64 sums of pass 1 (8 lanes × 2 each): Σd, Σg (LayerNorm), Σg·u. A local of the column loop, so
// the compiler keeps it in registers (as a member of a row struct copied between rows GCC kept it on the
// stack: a store and a reload per addition), and finish_row takes it by value (by reference, GCC stored all
// nine accumulators to the stack every step).
template <class V>
struct Sums {
  typename V::D d_lo, d_hi, g_lo, g_hi, gu_lo, gu_hi;
  typename V::F max_g, max_dy;
  typename V::F sub_key;  // whether a dy (RMSNorm: or an x) was subnormal: V::subnormal_key
  static Sums zero() {
    const typename V::D z = V::zero_pd();
    return {z, z, z, z, z, z, V::zero(), V::zero(), V::subnormal_key_init()};
  }
};

// The next row is read from DRAM in pass 1: software prefetches kAheadBytes ahead of its loads (into L1; the
// hardware prefetcher alone left them waiting). A/B on this 2-core AVX-512 EPYC, 16384x4096 f32,
// one thread, medians of 3 runs of 7 (GB/s with dgamma (and dbeta)): no prefetch LayerNorm 13.5, RMSNorm 16.7;
// 4096 bytes 14.1, 17.6; 8192 bytes 13.9, 18.3. Without dgamma/dbeta RMSNorm went from 23.6 to 27.9.
// Measured again on a Zen 5 (2026-12-04) with each setting and 8192 interleaved in one process, 7 rounds,
// 16384x4096 and 16384x1024, f32 and bf16, both ops, avx2 and avx512: none, 4096 and 16384 bytes all within
// 0.95-1.05x of 8192, none 0.96-0.99x on f32 (docs/performance.md); on a Zen 3
// none read 0.32 → 0.35 of the copy (docs/performance.md). The backward is bound by its arithmetic, not by this.
constexpr std::int64_t kAheadBytes = 8192;
// p + kAheadBytes as an address (integer arithmetic: it may point past the array, which a prefetch allows).
inline const void* ahead(const void* p) { return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + kAheadBytes); }

// A row's statistics for pass 2: the saved m and rstd, and what pass 1 made of them.
struct Row {
  float m = 0, rstd = 0;
  float shift = 0;  // −mean_lo·rstd: xhat = fma(d, rstd, shift) (LayerNorm)
  float mean_g = 0, mean_gx = 0;
  float rstd_mean_gx = 0;  // rstd·mean(g·xhat) rounded once from f64 (RMSNorm's dx)
};

// Whether row r's saved statistics can be used (this file's header says why each case is not).
inline bool start_row(const lnorm::cpu::BackwardRows& a, std::int64_t r, Row& row) {
  row.m = a.centred ? a.mean[r] : 0.0f;
  row.rstd = a.rstd[r];
  return std::isfinite(row.m) && std::isfinite(row.rstd) && row.rstd >= 0x1p-126f;
}

template <class V>
inline void add_f64(typename V::D& lo, typename V::D& hi, typename V::F v) {
  lo = V::add_pd(lo, V::lo_pd(v));
  hi = V::add_pd(hi, V::hi_pd(v));
}

// Pass 1 on L lanes: d = x − m (RMSNorm: x; +0 past the row), g = dy·w, u = d·rstd; Σd and Σg (LayerNorm) and
// Σg·u in f64.
template <class V, bool Centred>
inline void pass1(Sums<V>& s, typename V::F d, typename V::F vdy, typename V::F vw, typename V::F vrstd) {
  const typename V::F g = V::mul(vdy, vw);
  s.max_g = V::max(s.max_g, V::abs(g));
  s.max_dy = V::max(s.max_dy, V::abs(vdy));
  s.sub_key = V::subnormal_key(s.sub_key, vdy);
  if (!Centred) s.sub_key = V::subnormal_key(s.sub_key, d);  // RMSNorm: d = x (below)
  if (Centred) {  // RMSNorm needs neither: its mean and mean(g) are 0 (and each sum costs two vcvtps2pd, below)
    add_f64<V>(s.d_lo, s.d_hi, d);
    add_f64<V>(s.g_lo, s.g_hi, g);
  }
  add_f64<V>(s.gu_lo, s.gu_hi, V::mul(g, V::mul(d, vrstd)));
}

// The largest of the L lanes (finite rows: exact and in any order).
template <class V>
inline float max_lane(typename V::F a) {
  float l[V::kLanes];
  V::store_ps(l, a);
  float m = l[0];
  for (int i = 1; i < V::kLanes; ++i) m = l[i] > m ? l[i] : m;
  return m;
}

// After pass 1: mean(g), mean(g·xhat) and xhat's shift, or false when a sum is not finite (the careful row
// decides it).
template <class V, bool Centred>
bool finish_row(const lnorm::cpu::BackwardRows& a, const Sums<V> s, Row& row) {
  const double sd = Centred ? hsum_pd<V>(V::add_pd(s.d_lo, s.d_hi)) : 0.0;
  const double sg = Centred ? hsum_pd<V>(V::add_pd(s.g_lo, s.g_hi)) : 0.0, sgu = hsum_pd<V>(V::add_pd(s.gu_lo, s.gu_hi));
  if (!std::isfinite(sd) || !std::isfinite(sg) || !std::isfinite(sgu)) return false;
  const float max_g = max_lane<V>(s.max_g), max_dy = max_lane<V>(s.max_dy);
  const double nd = static_cast<double>(a.cols);
  const double rs = static_cast<double>(row.rstd), g_terms = static_cast<double>(max_g) * (rs > 1 ? rs : 1.0);
  if (!((2.0 + std::sqrt(nd)) * (g_terms > max_dy ? g_terms : static_cast<double>(max_dy)) < 0x1p126)) return false;
  if ((max_g != 0.0f && max_g < 0x1p-90f) || V::any_subnormal(s.sub_key)) return false;
  if (max_dy >= 0x1p64f) return false;  // huge dy: this file's header says why
  const double inv_n = 1.0 / static_cast<double>(a.cols), rstd = static_cast<double>(row.rstd);
  const double mean_lo = sd * inv_n;
  // Σ g·xhat = Σ g·(d − mean_lo)·rstd = Σg·u − mean_lo·rstd·Σg.
  const double mean_gx = (sgu - mean_lo * rstd * sg) * inv_n;
  row.mean_gx = static_cast<float>(mean_gx);
  row.rstd_mean_gx = static_cast<float>(rstd * mean_gx);
  if (!Centred && rs < 0x1p-60) return false;  // RMSNorm rows of values past 2^60: this file's header says why
  row.mean_g = Centred ? static_cast<float>(sg * inv_n) : 0.0f;
  row.shift = static_cast<float>(-mean_lo * rstd);
  return std::isfinite(row.mean_gx) && std::isfinite(row.shift);
}

// acc[at + j] += p's lane j for j < count (the block's f64 partials).
template <class V>
inline void add_partials(double* acc, std::int64_t at, std::int64_t count, typename V::F p) {
  constexpr int DL = V::kDLanes;
  const typename V::D lo = V::lo_pd(p), hi = V::hi_pd(p);
  if (count == V::kLanes) {
    V::store_pd(acc + at, V::add_pd(V::load_pd(acc + at), lo));
    V::store_pd(acc + at + DL, V::add_pd(V::load_pd(acc + at + DL), hi));
    return;
  }
  double t[V::kLanes];
  V::store_pd(t, lo);
  V::store_pd(t + DL, hi);
  for (std::int64_t j = 0; j < count; ++j) acc[at + j] += t[j];
}

// The rows [r0, r1) of one block. Every row: pass 1 (from DRAM), then pass 2 (from L1/L2) sharing its column
// loop with pass 1 of the next row. a.w is never null here (backward_simd.cpp stages ones without gamma).
template <class V, class T, bool Centred>
void rows_of(const lnorm::cpu::BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  using F = typename V::F;
  using M = typename V::M;
  using B = typename T::Bits;
  constexpr int L = V::kLanes;
  const std::int64_t n = a.cols, full = n / L * L, rest = n - full;
  const M tail = static_cast<M>((1u << rest) - 1);
  const B* xs = static_cast<const B*>(a.x);
  const B* dys = static_cast<const B*>(a.dy);
  B* dxs = static_cast<B*>(a.dx);
  const float* w = a.w;
  // d = x − m on L lanes (all of them, or the tail's: +0 past the row).
  const auto diff = [](F vx, F vm, M k, bool masked) LNORM_ALWAYS_INLINE { return !Centred ? vx : masked ? V::maskz_sub(k, vx, vm) : V::sub(vx, vm); };
  // Pass 1 of row r alone (the first row of the range, and the row after one the careful row took).
  const auto pass1_row = [&](std::int64_t r, Row& row) {
    if (!start_row(a, r, row)) return false;
    Sums<V> s = Sums<V>::zero();
    const B* x = xs + r * n;
    const B* dy = dys + r * n;
    const F vm = V::set1(row.m), vr = V::set1(row.rstd);
    for (std::int64_t i = 0; i < full; i += L)
      pass1<V, Centred>(s, diff(V::template load<T>(x + i), vm, 0, false), V::template load<T>(dy + i), V::template load<F32>(w + i), vr);
    if (rest)
      pass1<V, Centred>(s, diff(V::template maskz_load<T>(tail, x + full), vm, tail, true), V::template maskz_load<T>(tail, dy + full),
                        V::template maskz_load<F32>(tail, w + full), vr);
    return finish_row<V, Centred>(a, s, row);
  };
  if (r0 >= r1) return;
  Row cur, next;
  bool cur_ok = pass1_row(r0, cur);
  for (std::int64_t r = r0; r < r1; ++r) {
    const bool has_next = r + 1 < r1;
    if (!cur_ok) {
      a.careful_row(a, r, dg, db);
      if (has_next) cur_ok = pass1_row(r + 1, next), cur = next;
      continue;
    }
    const bool next_started = has_next && start_row(a, r + 1, next);
    const B* x = xs + r * n;
    const B* dy = dys + r * n;
    B* dx = dxs + r * n;
    // Non-temporal stores for the row's whole vectors when dx is large and the row starts aligned to
    // 16·sizeof(B) bytes (every row when n is a multiple of 16 and dx is); the tail and unaligned rows store
    // plainly. The same values.
    const bool stream = a.stream_dx && head_to_align(dx, L * static_cast<std::int64_t>(sizeof(B))) == 0;
    const F vm = V::set1(cur.m), vrstd = V::set1(cur.rstd), vshift = V::set1(cur.shift);
    const F vmg = V::set1(cur.mean_g), vmgx = V::set1(cur.mean_gx), vrmgx = V::set1(cur.rstd_mean_gx);
    const F vm_next = V::set1(next.m), vrstd_next = V::set1(next.rstd);
    Sums<V> s = Sums<V>::zero();
    // Pass 2 on lanes [at, at + 16) (k: those in the row), with pass 1 of the next row on the same lanes.
    const auto step = [&](std::int64_t at, M k, std::int64_t count, bool with_next) LNORM_ALWAYS_INLINE {
      const bool masked = count < L;
      const auto load = [&](const auto* p) LNORM_ALWAYS_INLINE {
        using P = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
        using S = std::conditional_t<std::is_same_v<P, float>, F32, T>;
        return masked ? V::template maskz_load<S>(k, p) : V::template load<S>(p);
      };
      const F vw = load(w + at);
      if (with_next) pass1<V, Centred>(s, diff(load(x + n + at), vm_next, k, masked), load(dy + n + at), vw, vrstd_next);
      if (with_next && kAheadBytes > 0) {  // addresses past the arrays are harmless to a prefetch
        V::prefetch_l1(ahead(x + n + at));
        V::prefetch_l1(ahead(dy + n + at));
      }
      const F vx = load(x + at), vdy = load(dy + at);
      const F xhat = Centred ? V::fmadd(diff(vx, vm, k, masked), vrstd, vshift) : V::mul(vx, vrstd);
      // g − mean(g) − xhat·mean(g·xhat): one FMA for the last two terms, then rstd (avx2's order); RMSNorm:
      // rstd·g − xhat·(rstd·mean(g·xhat)), each term of dx's own size (this file's header says why).
      const F v = Centred ? V::mul(V::sub(V::mul(vdy, vw), V::fmadd(xhat, vmgx, vmg)), vrstd)
                          : V::sub(V::mul(V::mul(vdy, vw), vrstd), V::mul(xhat, vrmgx));
      // Finite: dx is finite on every row that reaches here, so AVX2's bf16 narrowing skips its NaN case (the same
      // bits). Every summed f32 term is finite, as its f64 sum is: LayerNorm's d = x − m and g; RMSNorm's g·u alone,
      // which is NaN or ±Inf wherever g or u = x·rstd is not finite. The range test bounds dx's terms below 2^126.
      if (masked) V::template mask_store<T>(k, dx + at, v);
      else if (stream) V::template stream<T, true>(dx + at, v);
      else V::template store<T, true>(dx + at, v);
      if (dg) add_partials<V>(dg, at, count, V::mul(vdy, xhat));
      if (db) add_partials<V>(db, at, count, vdy);
    };
    if (next_started) {
      for (std::int64_t at = 0; at < full; at += L) step(at, static_cast<M>((1u << L) - 1), L, true);
      if (rest) step(full, tail, rest, true);
      cur_ok = finish_row<V, Centred>(a, s, next);
      cur = next;
    } else {
      for (std::int64_t at = 0; at < full; at += L) step(at, static_cast<M>((1u << L) - 1), L, false);
      if (rest) step(full, tail, rest, false);
      cur_ok = false;  // the next row (if any) has unusable statistics: the careful row takes it
    }
  }
  if (a.stream_dx) V::sfence();  // the non-temporal stores are visible before the caller reads dx
}

template <class V, class T>
void rows(const lnorm::cpu::BackwardRows& a, std::int64_t r0, std::int64_t r1, double* dg, double* db) {
  if (a.centred) rows_of<V, T, true>(a, r0, r1, dg, db);
  else rows_of<V, T, false>(a, r0, r1, dg, db);
}

}  // namespace bwd

#endif
