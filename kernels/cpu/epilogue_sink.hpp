// The forward's epilogue as one policy for every CPU kernel: the fast and _cr SIMD row drivers
// (simd_fast_rows.hpp, simd_cr_rows.hpp) and the scalar kernels (scalar_rows.hpp) form row r's output in
// sink.row(r) and then call sink.done(r, error). The drivers know no epilogue: a new one is a new sink.
//   ToY<E>              y itself: row(r) is y's row r (elements E); done does nothing. y may be streamed.
//   ToQuantizer<A, Q>   the quantized epilogue (lnorm/quant.hpp): row(r) is one scratch row of A in cache, y as
//                       the kernel formed it before any storage rounding (f32 for the fast and scalar kernels;
//                       f64 for _cr), and y is not written; done(r, error) hands the row to the quantizer,
//                       q(row, r, error), which writes q's row r and its scales, then copies an f32 row to
//                       Tensors::quant_y where the caller asked for the y the quantizer read (_cr hands none:
//                       QuantInput::exact_y). A driver that took the row's amax on the way hands it too (RowAmax),
//                       and the x row it will read next, for the quantizer to prefetch (RowAhead). The fast
//                       SIMD rows pass it by where the scale is known before the row (tensor scaling: the codes
//                       in the output pass, simd_fast_rows.hpp normalize_codes, quant_y written there).
// error: how far the row may be from y* (|y − y*| ≤ abs + rel·|y|), for a quantizer that decides from y* (_cr's
// quantize_row_exact); the other drivers leave it 0: they quantize the y they formed, whatever its error.
// Included inside an anonymous namespace by the ISA translation units (simd_body.hpp: no ISA instantiation may be
// shared with generic code; ctest isa_objects_share_no_code) and at namespace scope by scalar_rows.hpp. It includes
// nothing itself (<cstdint>, <type_traits> come first in both).
#pragma once

namespace sinks {

struct RowError {
  double abs = 0, rel = 0;
  double amax = -1;  // max |y| over the row, where the driver took it while forming the f64 row (_cr); −1: not taken
};

// The max of |y| over the row and whether it holds a NaN, where the driver took them while forming the row (the fast
// SIMD rows: simd_fast_rows.hpp): a row-scaled quantizer then skips its own pass over the row for them. known false:
// not taken. Exact in any order (a max), so the scale is the same bits either way.
struct RowAmax {
  float amax = 0;
  bool nan = false;
  bool known = false;
};

// The x row the driver reads kAhead rows on (null: none), for a quantizer to prefetch into L2 over its own pass
// (simd_quant.hpp AheadLines): the fast SIMD rows' quantizer runs after the output pass, and a prefetch burst within
// the output pass left DRAM idle during the codes (docs/performance.md, "the next row's lines prefetched over the
// codes pass").
struct RowAhead {
  const char* next = nullptr;
  std::int64_t bytes = 0;  // the row's bytes
};

template <class E>
struct ToY {
  using Elem = E;
  static constexpr bool kMayStream = true;
  E* y;
  std::int64_t n;
  E* row(std::int64_t r) const { return y + r * n; }
  void done(std::int64_t, RowError = {}, RowAmax = {}, RowAhead = {}) const {}
};

template <class A, class Quantize>
struct ToQuantizer {
  using Elem = A;
  static constexpr bool kMayStream = false;  // the row stays in cache for the quantizer, which reads it at once
  A* scratch;                                // n elements, the calling thread's
  std::int64_t n;
  float* handed;  // Tensors::quant_y, or null
  Quantize quantize;
  A* row(std::int64_t) const { return scratch; }
  void done(std::int64_t r, RowError error = {}, RowAmax amax = {}, RowAhead ahead = {}) const {
    if constexpr (std::is_invocable_v<const Quantize&, const A*, std::int64_t, RowError, RowAmax, RowAhead>)
      quantize(static_cast<const A*>(scratch), r, error, amax, ahead);
    else if constexpr (std::is_invocable_v<const Quantize&, const A*, std::int64_t, RowError, RowAmax>)
      quantize(static_cast<const A*>(scratch), r, error, amax);
    else
      quantize(static_cast<const A*>(scratch), r, error);
    if constexpr (std::is_same_v<A, float>) {
      if (handed)
        for (std::int64_t i = 0; i < n; ++i) handed[r * n + i] = scratch[i];
    }
  }
};

template <class A, class Quantize>
ToQuantizer<A, Quantize> to_quantizer(A* scratch, std::int64_t n, float* handed, Quantize quantize) {
  return {scratch, n, handed, quantize};
}

}  // namespace sinks
