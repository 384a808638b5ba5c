// Part of simd_body.hpp (its header has the algorithms, and why these files are included inside an anonymous
// namespace after the layer's header): the fast kernels' rows: the output pass (normalize_row), the
// row driver (rows_typed, into an epilogue sink: epilogue_sink.hpp), gamma and beta widened once (rows_wide), and
// the storage dispatch (rows, which picks the sink).
#pragma once

namespace fast {

// One vector of a row's y in f32 (normalize_row's formula, below): at(i), elements [i, i + L); masked(i, k), the
// lanes of k (the others 0). normalize_row's and normalize_codes', so a quantizer fed by either reads the same bits.
template <class V, class X, class Gs, bool G, bool B, bool Centred>
struct RowY {
  using F = typename V::F;
  const typename X::Bits* x;
  const typename Gs::Bits* gamma;
  const typename Gs::Bits* beta;
  F mv, lo_rstd, rstd;
  RowY(const typename X::Bits* x_, const typename Gs::Bits* g, const typename Gs::Bits* b, const Stats& s)
      : x(x_), gamma(g), beta(b), mv(V::set1(s.m)), lo_rstd(V::set1(-s.mean_lo * s.rstd)), rstd(V::set1(s.rstd)) {}
  LNORM_ALWAYS_INLINE F at(std::int64_t i) const { return one(i, 0, false); }
  LNORM_ALWAYS_INLINE F masked(std::int64_t i, typename V::M k) const { return one(i, k, true); }

 private:
  LNORM_ALWAYS_INLINE F one(std::int64_t i, typename V::M k, bool masked) const {
    const auto ld = [&](const typename Gs::Bits* p) LNORM_ALWAYS_INLINE { return masked ? V::template maskz_load<Gs>(k, p) : V::template load<Gs>(p); };
    const F xv = masked ? V::template maskz_load<X>(k, x + i) : V::template load<X>(x + i);
    F t;
    if constexpr (Centred) t = V::fmadd(V::sub(xv, mv), rstd, lo_rstd);
    else t = V::mul(xv, rstd);
    if constexpr (G && B) return V::fmadd(t, ld(gamma + i), ld(beta + i));
    else if constexpr (G) return V::mul(t, ld(gamma + i));
    else if constexpr (B) return V::add(t, ld(beta + i));
    else return t;
  }
};

// y = fma(x − m, rstd, −mean_lo·rstd) · γ + β (the two-float centre in one FMA); RMSNorm (Centred = false)
// x·rstd · γ + β, the same bits (m = mean_lo = 0) with two operations fewer. NT: y is streamed. Prefetch (NT):
// next (the row kAhead rows on) is prefetched into L2 meanwhile, one prefetch per 64-byte line, so DRAM keeps
// reading while this pass runs from L1 (kPrefetch). The quantized epilogue's row prefetches nothing here: its
// quantizer spreads the same prefetches over the codes pass that follows (sinks::RowAhead).
// Amax (the quantized epilogue's f32 row): the max of |y| and a NaN flag are taken as the row is formed, into amax,
// so a row-scaled quantizer reads the row once, not twice (sinks::RowAmax).
// X: how x is stored (T, or F32: Add & Norm's f32 h beside 16-bit y); T: y's storage; Gs: how gamma and beta
// are stored (T, or F32 once widened: rows_wide).
template <class V, class X, class T, class Gs, bool G, bool B, bool NT, bool Centred, bool Finite = false, bool Prefetch = NT,
          bool Amax = false>
void normalize_row(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta,
                   typename T::Bits* y, std::int64_t n, const Stats& s, const typename X::Bits* next,
                   sinks::RowAmax* amax = nullptr) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  static_assert(!Amax || (std::is_same_v<T, F32> && !NT));
  // Elements of x per 64-byte line.
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(typename X::Bits));
  const RowY<V, X, Gs, G, B, Centred> row_y(x, gamma, beta, s);
  const auto one = [&](std::int64_t i, typename V::M k, bool masked) LNORM_ALWAYS_INLINE {
    return masked ? row_y.masked(i, k) : row_y.at(i);
  };
  const auto masked_at = [&](std::int64_t i, std::int64_t count) {
    const auto k = static_cast<typename V::M>((1u << count) - 1);
    V::template mask_store<T>(k, y + i, one(i, k, true));
  };
  // Two vectors per step (store2: AVX2 packs 16 bf16 values at once), then one, then the masked tail.
  constexpr std::int64_t kStep = 2 * L;
  const auto prefetch = [&](std::int64_t i) LNORM_ALWAYS_INLINE {
    if constexpr (Prefetch && kPrefetch) {
      if constexpr (kLine <= kStep) {
        for (std::int64_t j = 0; j < kStep; j += kLine) V::prefetch_l2(next + i + j);
      } else if (i % kLine < kStep) {
        V::prefetch_l2(next + i);
      }
    }
  };
  std::int64_t i = 0;
  if constexpr (NT) {
    // Heads up to a 64-byte boundary: stream2's 32-byte stores, and every line written whole.
    const std::int64_t head = head_to_align(y, 64);
    const std::int64_t h = head < n ? head : n;
    for (; i < h; i += L) masked_at(i, h - i < L ? h - i : L);
    for (i = h; i + kStep <= n; i += kStep) {
      prefetch(i);
      V::template stream2<T, Finite>(y + i, one(i, 0, false), one(i + L, 0, false));
    }
    if (i + L <= n) {
      V::template stream<T>(y + i, one(i, 0, false));
      i += L;
    }
  } else {
    typename V::I acc0 = V::set1_i(0), acc1 = acc0;  // Amax: two chains of max_abs_bits, one per vector of a step
    const auto tap = [&](F v, typename V::I& acc) LNORM_ALWAYS_INLINE {
      if constexpr (Amax) acc = max_abs_bits<V>(acc, v);
    };
    for (; i + kStep <= n; i += kStep) {
      prefetch(i);
      const F a = one(i, 0, false), b = one(i + L, 0, false);
      tap(a, acc0);
      tap(b, acc1);
      V::template store2<T, Finite>(y + i, a, b);
    }
    if (i + L <= n) {
      const F a = one(i, 0, false);
      tap(a, acc0);
      V::template store<T>(y + i, a);
      i += L;
    }
    if constexpr (Amax) {
      if (i < n) masked_at(i, n - i);
      // The tail as stored (its masked-off lanes are not y): fewer than L elements, group_amax's scalar loop.
      bool tail_nan = false;
      const float tail = group_amax<V>(y + i, n - i, tail_nan);
      bool nan = false;
      const float m = amax_of_bits<V>(V::max_i(acc0, acc1), nan);
      *amax = {tail > m ? tail : m, nan || tail_nan, true};
      return;
    }
  }
  if (i < n) masked_at(i, n - i);
}

// A row's codes formed in the output pass, where the scale is known before the row (tensor scaling): y by RowY, as
// normalize_row forms it, then its codes (vector_codes), with no f32 row stored and read again. handed: the row of
// Tensors::quant_y, or null; y is written there as the staged path's sink would copy it. ahead: the next row's lines,
// prefetched along (AheadLines). One pass, not two: q-only driver, avx512, 64x4096, three runs alternating:
// fp8_e4m3/tensor RMSNorm f32 0.291 → 0.241 ns an element, LayerNorm bf16 0.326 → 0.293; int8/tensor LayerNorm f32
// 0.329 → 0.250 (docs/performance.md, "tensor scaling's codes in the output pass"). The f32 row formed and coded in
// blocks of 256 or 1024 elements (the same instantiations as today) reached only 0.28 and 0.31 for f32. Row scaling
// formed y twice this way (its amax first, then the codes): no faster than the f32 row (0.30 → 0.30 f32, 0.27 → 0.30
// bf16), not kept. Fmt: a format of one code a byte; inv = f32(1/scale), a normal number (usable_inverse).
template <class V, class X, class Gs, bool G, bool B, bool Centred, QuantFormat Fmt>
void normalize_codes(const typename X::Bits* x, const typename Gs::Bits* gamma, const typename Gs::Bits* beta, std::int64_t n,
                     const Stats& s, float scale, float inv, std::uint8_t* q, float* handed, AheadLines<V>& ahead) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  static_assert(!is_packed(Fmt));
  const RowY<V, X, Gs, G, B, Centred> row_y(x, gamma, beta, s);
  const typename V::D sd = V::set1_pd(static_cast<double>(scale));
  std::int64_t i = 0;
  vectors_ahead(i, n, ahead, 0, [&](std::int64_t j) LNORM_ALWAYS_INLINE {
    const F v = row_y.at(j);
    if (handed) V::template store<F32>(handed + j, v);
    V::store_u8(q + j, vector_codes<V, Fmt>(v, inv, sd));
  });
  if (i < n) {  // the tail (fewer than L): its y through the stack, encode_quotient's codes (encode_span's tail)
    alignas(64) float tail[L];
    V::template store<F32>(tail, row_y.masked(i, static_cast<typename V::M>((1u << (n - i)) - 1)));
    for (std::int64_t j = 0; i + j < n; ++j) {
      q[i + j] = ::lnorm::cpu::encode_quotient(Fmt, tail[j], scale);
      if (handed) handed[i + j] = tail[j];
    }
  }
  ahead.upto(n);
}

// Whether a tensor-scaled quantizer takes its codes in the output pass (normalize_codes): a format of one code a byte
// and a scale whose 1/s is a normal f32 (else the f32 row and quantize_row_simd, which treat the rest).
inline bool codes_in_output_pass(const QuantSpec& spec, float& inv) {
  bool packed = true;  // the format's fact as a constant (ISA code reads no table at run time: isa_objects_share_no_code)
  with_format(spec.format, [&](auto fmt) {
    constexpr bool kPacked = is_packed(decltype(fmt)::value);  // constexpr: unoptimised (ASan) builds would call it
    packed = kPacked;
  });
  return spec.scaling == Scaling::tensor && !packed && usable_inverse(spec.scale, inv);
}

// Whether a bf16 y's narrowing may skip NaN lanes where they cannot occur (AVX2: 4 of 13 operations a vector).
// `lnorm bench --kernel avx2 --shape 1024x768 --dtype bf16`, two runs before and after, AMD EPYC (Zen 3, AVX2):
// LayerNorm 8.4, 9.0 → 11.2, 11.8 GB/s; RMSNorm 10.9, 12.2 → 14.6, 14.9. Other storage types gain nothing.
template <class T>
constexpr bool kFiniteNarrowing = std::is_same_v<T, BF16>;

// No NaN or Inf among p[0, n) (gamma or beta as the output loop reads them: f32 once widened, or x's storage).
template <class S>
bool all_finite(const typename S::Bits* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<S, F32>) {
      if (!__builtin_isfinite(p[i])) return false;
    } else {
      constexpr unsigned kExp = std::is_same_v<S, BF16> ? 0x7F80u : 0x7C00u;  // bf16's / f16's exponent field
      if ((p[i] & kExp) == kExp) return false;
    }
  }
  return true;
}

// Each row's output is formed in T (the sink's rows: y's storage, or F32 for the quantizer's row) into sink.row(row),
// then sink.done(row).
template <class V, class X, class T, class Gs, bool G, bool B, bool NT, class Sink>
void rows_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end,
                const typename Gs::Bits* gamma, const typename Gs::Bits* beta, const Sink& sink) {
  using XBits = typename X::Bits;
  static_assert(std::is_same_v<typename Sink::Elem, typename T::Bits> && (!NT || Sink::kMayStream));
  // The quantizer's f32 row in cache: the row's amax taken on the way (sinks::RowAmax), and the row kAhead on
  // handed to the quantizer to prefetch (sinks::RowAhead): its x is read from DRAM at the sizes a quantized epilogue
  // is for.
  constexpr bool kQuantRow = !Sink::kMayStream && std::is_same_v<T, F32>;
  const XBits* x = static_cast<const XBits*>(t.x);
  float* mean = static_cast<float*>(t.mean);
  float* rstd = static_cast<float*>(t.rstd);
  const std::int64_t n = p.cols;
  const float eps = static_cast<float>(p.eps);
  const bool is_centred = p.op.norm == Norm::layernorm;  // one row driver for both ops: only the statistics differ
  // A safe row's y is never NaN where gamma and beta are finite: x − m, the statistics and t are finite there, and
  // a finite product and sum round to ±Inf at worst. The bf16 narrowing then skips its NaN case (store2's Finite).
  const bool finite = kFiniteNarrowing<T> && (!G || all_finite<Gs>(gamma, n)) && (!B || all_finite<Gs>(beta, n));
  // Where a row's statistics are taken (the same bits either way: stats_ahead). Ahead: row + 1's before row's
  // output pass, so the scalar tail of one row's statistics (f64 divisions and sqrt) overlaps the other row's
  // output loop. In order: the row's own just before its output pass, which then reads x from L1. The shift is
  // taken a row ahead in both (a chain of ~40 cycles, 32 loads, f64 sums, a horizontal sum through memory, that
  // the row's sums wait on), after the row's statistics, when the next row's first lines are in cache (avx2
  // LayerNorm f32 against the best sketch, taken ahead like this, four runs of each binary alternating, AMD EPYC
  // Zen 3: 64x768 0.85-0.94 → 0.93-1.00; docs/performance.md, the AVX2-only machine in rounds).
  const bool ahead = stats_ahead<X, NT>(n);
  // A tensor-scaled quantizer's codes in the output pass (normalize_codes), q's rows written here, not by the sink.
  // Gamma and beta in f32 only (x in f32, or 16-bit x up to kWideMax, widened): one instantiation per format in
  // every storage form doubled the ISA objects' compile time (avx512.cpp 12 → 23 s, one build each); longer 16-bit
  // rows keep the f32 row.
  float inv = 0;
  const bool in_pass = kQuantRow && std::is_same_v<Gs, F32> && codes_in_output_pass(p.quant, inv);
  const auto shift_of = [&](std::int64_t r) { return is_centred ? row_shift<V, X>(x + r * n, n) : 0.0f; };
  const auto stats = [&](std::int64_t r, float shift) { return stats_of<V, X>(x + r * n, n, eps, is_centred, shift); };
  float shift = begin < end ? shift_of(begin) : 0.0f;  // of the next row whose statistics are taken
  Stats next{};
  if (ahead && begin < end) {
    next = stats(begin, shift);
    if (begin + 1 < end) shift = shift_of(begin + 1);
  }
  for (std::int64_t row = begin; row < end; ++row) {
    const XBits* xr = x + row * n;
    const std::int64_t r_stats = ahead ? row + 1 : row;  // whose statistics this step takes
    Stats s = next;
    if (r_stats < end) {
      const Stats taken = stats(r_stats, shift);
      if (ahead) next = taken;
      else s = taken;
      if (r_stats + 1 < end) shift = shift_of(r_stats + 1);
    }
    if (!s.safe) {
      welford_row(p, t, row);
      continue;
    }
    if (mean) mean[row] = s.m + s.mean_lo;
    if (rstd) rstd[row] = s.rstd;
    const XBits* ahead = row + kAhead < end ? xr + kAhead * n : xr;
    typename T::Bits* yr = sink.row(row);
    const bool nt = NT && head_to_align(yr, 64) >= 0;
    const sinks::RowAhead next_row{row + kAhead < end ? reinterpret_cast<const char*>(xr + kAhead * n) : nullptr,
                                   n * static_cast<std::int64_t>(sizeof(XBits))};
    if constexpr (kQuantRow && std::is_same_v<Gs, F32>) {
      if (in_pass) {
        AheadLines<V> lines(next_row, n);
        std::uint8_t* qr = static_cast<std::uint8_t*>(t.q) + row * n;
        float* handed = t.quant_y ? static_cast<float*>(t.quant_y) + row * n : nullptr;
        with_format(p.quant.format, [&](auto fmt) LNORM_ALWAYS_INLINE {
          constexpr QuantFormat kF = decltype(fmt)::value;
          if constexpr (!is_packed(kF)) {
            if (is_centred) normalize_codes<V, X, Gs, G, B, true, kF>(xr, gamma, beta, n, s, p.quant.scale, inv, qr, handed, lines);
            else normalize_codes<V, X, Gs, G, B, false, kF>(xr, gamma, beta, n, s, p.quant.scale, inv, qr, handed, lines);
          }
        });
        continue;
      }
    }
    sinks::RowAmax amax;
    const auto out = [&]<bool Finite>() LNORM_ALWAYS_INLINE {
      if (is_centred) {
        if (nt) normalize_row<V, X, T, Gs, G, B, NT, true, Finite>(xr, gamma, beta, yr, n, s, ahead);
        else normalize_row<V, X, T, Gs, G, B, false, true, Finite, false, kQuantRow>(xr, gamma, beta, yr, n, s, ahead, &amax);
      } else {
        if (nt) normalize_row<V, X, T, Gs, G, B, NT, false, Finite>(xr, gamma, beta, yr, n, s, ahead);
        else normalize_row<V, X, T, Gs, G, B, false, false, Finite, false, kQuantRow>(xr, gamma, beta, yr, n, s, ahead, &amax);
      }
    };
    if (finite) out.template operator()<kFiniteNarrowing<T>>();
    else out.template operator()<false>();
    sink.done(row, {}, amax, next_row);
  }
  if (NT) V::sfence();
}

// The storage tag of a sink's rows: T where they are y, F32 where they are the quantizer's f32 row. T stays x's
// storage for gamma and beta.
template <class T, class Sink>
using RowTag = std::conditional_t<std::is_same_v<typename Sink::Elem, float>, F32, T>;

template <class V, class X, class T, class Gs, bool NT, class Sink>
void rows_nt(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const typename Gs::Bits* gamma,
             const typename Gs::Bits* beta, const Sink& sink) {
  using Y = RowTag<T, Sink>;
  if (p.has_gamma && p.has_beta) rows_typed<V, X, Y, Gs, true, true, NT>(p, t, begin, end, gamma, beta, sink);
  else if (p.has_gamma) rows_typed<V, X, Y, Gs, true, false, NT>(p, t, begin, end, gamma, beta, sink);
  else if (p.has_beta) rows_typed<V, X, Y, Gs, false, true, NT>(p, t, begin, end, gamma, beta, sink);
  else rows_typed<V, X, Y, Gs, false, false, NT>(p, t, begin, end, gamma, beta, sink);
}

// 16-bit rows up to kWideMax long get gamma and beta widened to f32 once per call, on the stack (2 x 16
// KiB): the output loop then converts x alone, not 3 vectors
// per 16 elements. Widening is exact, so y's bits are the same (docs/performance.md has the speed-up).
constexpr std::int64_t kWideMax = 4096;

template <class V, class X, class T, bool NT, class Sink>
void rows_wide(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged,
               const Sink& sink) {
  using Bits = typename T::Bits;
  // Staged by the generic driver (f32 gamma/beta beside 16-bit x, or an offset: w = C + gamma in f32).
  if (staged.gamma || staged.beta) return rows_nt<V, X, T, F32, NT>(p, t, begin, end, staged.gamma, staged.beta, sink);
  const Bits* gamma = static_cast<const Bits*>(t.gamma);
  const Bits* beta = static_cast<const Bits*>(t.beta);
  const std::int64_t n = p.cols;
  if constexpr (!std::is_same_v<T, F32>) {
    if ((p.has_gamma || p.has_beta) && n <= kWideMax) {
      alignas(64) float g32[kWideMax], b32[kWideMax];
      const auto widen = [n](const Bits* src, float* dst) {
        constexpr int L = V::kLanes;
        std::int64_t i = 0;
        for (; i + L <= n; i += L) V::template store<F32>(dst + i, V::template load<T>(src + i));
        if (i < n) {
          const auto k = static_cast<typename V::M>((1u << (n - i)) - 1);
          V::template mask_store<F32>(k, dst + i, V::template maskz_load<T>(k, src + i));
        }
      };
      if (p.has_gamma) widen(gamma, g32);
      if (p.has_beta) widen(beta, b32);
      // Only what was widened is handed on (GCC 12 warned of an uninitialized array passed where it is unread).
      return rows_nt<V, X, T, F32, NT>(p, t, begin, end, p.has_gamma ? g32 : nullptr, p.has_beta ? b32 : nullptr, sink);
    }
  }
  rows_nt<V, X, T, T, NT>(p, t, begin, end, gamma, beta, sink);
}

// Rows [begin, end) of p, y in storage type T; x in T, or f32 where the rows are Add & Norm's f32 h beside
// 16-bit y (input_dtype(p)). The sink: y's rows, or (the quantized epilogue) y in f32 in the generic driver's row
// (Staged::y_row, in cache) handed to quantize_row_simd (simd_quant.hpp: quantize_row's bits on V's lanes); with
// tensor scaling the codes are formed in the output pass instead (rows_typed, normalize_codes).
template <class V, class T>
void rows(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end, const ::lnorm::cpu::Staged& staged) {
  const std::int64_t n = p.cols;
  if (p.op.epilogue == Epilogue::quantized) {
    const auto to_q = sinks::to_quantizer(staged.y_row, n, static_cast<float*>(t.quant_y),
                                         [&p, &t, n](const float* y, std::int64_t row, sinks::RowError, sinks::RowAmax amax,
                                                     sinks::RowAhead ahead) {
                                           quantize_row_simd<V>(p.quant, y, n, static_cast<std::uint8_t*>(t.q), t.scales, row, amax, ahead);
                                         });
    if constexpr (!std::is_same_v<T, F32>) {
      if (input_dtype(p) == DType::f32) return rows_wide<V, F32, T, false>(p, t, begin, end, staged, to_q);
    }
    return rows_wide<V, T, T, false>(p, t, begin, end, staged, to_q);
  }
  const sinks::ToY<typename T::Bits> to_y{static_cast<typename T::Bits*>(t.y), n};
  const bool nt = p.elements() * static_cast<std::int64_t>(sizeof(typename T::Bits)) > kStreamBytes;
  if constexpr (!std::is_same_v<T, F32>) {
    if (input_dtype(p) == DType::f32) {
      if (nt) return rows_wide<V, F32, T, true>(p, t, begin, end, staged, to_y);
      return rows_wide<V, F32, T, false>(p, t, begin, end, staged, to_y);
    }
  }
  if (nt) rows_wide<V, T, T, true>(p, t, begin, end, staged, to_y);
  else rows_wide<V, T, T, false>(p, t, begin, end, staged, to_y);
}

}  // namespace fast
