// Add & Norm through a plain norm's row driver (docs/DESIGN.md "Ops"): rows in chunks small enough that
// h stays in cache; per chunk, h = x + residual rounded once (the kernel's own add), then the norm's rows
// with h as their input. The norm therefore reads h exactly as stored, so y, mean and rstd are bit for bit
// what the plain kernel gives on h (verify's add_h_then_norm), and the bytes moved are x, residual, h
// and y: h is written once and re-read from cache.
#pragma once

#include <algorithm>
#include <cstdint>

#include "lnorm/problem.hpp"
#include "row_split.hpp"

namespace lnorm::cpu {

// Bytes of h per chunk: at most this, and at least one row. 64 KiB keeps a chunk's h in L2 (512 KiB per
// core on the Zen 3/4 and Xeon machines CI lands on) with room for x, residual and y; chosen by that
// arithmetic, not tuned: docs/performance.md has the fused kernels' measured speed.
inline constexpr std::int64_t kAddChunkBytes = 64 << 10;

// The plain problem the norm's driver sees: the same rows, its op, h as its x.
inline Problem norm_problem(const Problem& p) {
  Problem n = with_op(p, norm_of(p.op));
  return n;
}
inline Tensors norm_tensors(const Tensors& t) {
  Tensors n = t;
  n.x = t.h;
  n.residual = nullptr;
  n.h = nullptr;
  return n;
}

// add(p, t, begin, end) writes h for rows [begin, end); norm(np, nt, begin, end) normalizes them, where np
// and nt are norm_problem(p) and norm_tensors(t). Rows are split over threads as every CPU kernel splits
// them (row_split.hpp).
template <class AddFn, class NormFn>
void add_then_norm(const Problem& p, const Tensors& t, AddFn&& add, NormFn&& norm) {
  const Problem np = norm_problem(p);
  const Tensors nt = norm_tensors(t);
  const std::int64_t row_bytes = std::max<std::int64_t>(1, p.cols * static_cast<std::int64_t>(size_of(p.residual_dtype)));
  const std::int64_t chunk = std::max<std::int64_t>(1, kAddChunkBytes / row_bytes);
  split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r0 = begin; r0 < end; r0 += chunk) {
      const std::int64_t r1 = std::min(end, r0 + chunk);
      add(p, t, r0, r1);
      norm(np, nt, r0, r1);
    }
  });
}

}  // namespace lnorm::cpu
