// The cross-row reduction of the backward kernels (dgamma_j = Σ_rows dy·xhat, dbeta_j = Σ_rows dy) in a
// fixed order, so that dgamma and dbeta are the same bits at every thread count (Problem::threads): the
// rows are cut into blocks of kBackwardBlockRows whatever the thread count; each block's partial sums
// (one per column, in the partial type P) are formed in row order by whichever thread takes the block,
// and the partials are added in block order, column by column. Atomics or per-thread partials would
// make the bits depend on the split: the nondeterminism users of framework backward kernels fight.
// Generic code (it allocates); the ISA kernels call it with their own row functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "lnorm/half.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu {

// 64 rows: at 16384x4096 f32 the partials are 256 blocks x 4096 columns x 8 bytes x 2 = 16 MiB, ~2% of
// the 805 MB the backward moves there, and 16384 rows still give 256 blocks to share between threads.
// Small problems (fewer than 2·64 rows) run on one thread: their reduction is too small to split.
inline constexpr std::int64_t kBackwardBlockRows = 64;

// Stores v (a partial sum, P) as parameter dtype d at column j.
template <class P>
void store_param(DType d, void* out, std::int64_t j, P v) {
  switch (d) {
    case DType::f32: static_cast<float*>(out)[j] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(out)[j] = static_cast<double>(v); return;
    // Rounded once (to odd in f32 first: half.hpp's from_double).
    case DType::f16: static_cast<f16*>(out)[j] = from_double<f16>(static_cast<double>(v)); return;
    case DType::bf16: static_cast<bf16*>(out)[j] = from_double<bf16>(static_cast<double>(v)); return;
  }
}

// The block partials' memory, kept per calling thread between calls up to kKeepPartialsBytes: fresh memory is
// page-faulted (and zeroed by the OS) on every call, which on a 2-core AVX-512 EPYC VM cost more than the
// kernel's arithmetic (perf: 21% of samples in the page-fault path and 21% in memset, 9% in the rows). With
// the memory kept, LayerNorm's backward at 16384x4096 f32 on one thread went from 6.8 to 12.8 GB/s (avx512)
// and from 7.3 to 14.0 (avx2), the copy at 34-38 in the same runs. Larger needs (more than 64 MiB: ~4M rows at
// 4096 columns with dgamma and dbeta) are allocated per call and returned. The partials are zeroed block by
// block, just before the block's rows add to them.
inline constexpr std::size_t kKeepPartialsBytes = std::size_t{64} << 20;

template <class P>
class PartialsBuffer {
 public:
  explicit PartialsBuffer(std::size_t count) {
    if (count * sizeof(P) > kKeepPartialsBytes) {
      own_.reset(new P[count]);
      data_ = own_.get();
      return;
    }
    thread_local std::vector<P> kept;
    if (kept.size() < count) kept.resize(count);
    data_ = kept.data();
  }
  P* data() const { return data_; }

 private:
  std::unique_ptr<P[]> own_;
  P* data_ = nullptr;
};

// rows_fn(r0, r1, dgamma_partial, dbeta_partial): the dx of rows [r0, r1) (one block), adding each row's
// dy·xhat and dy to the block's partials (cols each, zeroed; null when that gradient is not wanted), in
// row order. Then dgamma/dbeta = the partials summed in block order, stored in p.param_dtype.
template <class P, class RowsFn>
void backward_blocks(const Problem& p, const Tensors& t, RowsFn&& rows_fn) {
  const std::int64_t n = p.cols;
  const std::int64_t blocks = (p.rows + kBackwardBlockRows - 1) / kBackwardBlockRows;
  const bool want_g = p.has_gamma && t.dgamma, want_b = p.has_beta && t.dbeta;
  const std::size_t each = static_cast<std::size_t>(blocks * n);
  PartialsBuffer<P> buffer((want_g ? each : 0) + (want_b ? each : 0));
  P* dg = want_g ? buffer.data() : nullptr;
  P* db = want_b ? buffer.data() + (want_g ? each : 0) : nullptr;
  parallel_rows(
      blocks, p.threads,
      [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          // Zeroed here, just before the block's rows add to them (in cache, and only the block's share).
          P* g = dg ? dg + b * n : nullptr;
          P* e = db ? db + b * n : nullptr;
          if (g) std::fill_n(g, n, P(0));
          if (e) std::fill_n(e, n, P(0));
          rows_fn(b * kBackwardBlockRows, std::min(p.rows, (b + 1) * kBackwardBlockRows), g, e);
        }
      },
      kBackwardBlockRows * n);
  if (!want_g && !want_b) return;
  // Column ranges in parallel; each column's partials in block order (the same bits for any split).
  parallel_rows(
      n, p.threads,
      [&](std::int64_t j0, std::int64_t j1) {
        for (int which = 0; which < 2; ++which) {
          const P* part = which == 0 ? dg : db;
          if (!part) continue;
          void* out = which == 0 ? t.dgamma : t.dbeta;
          for (std::int64_t j = j0; j < j1; ++j) {
            P s = part[static_cast<std::size_t>(j)];
            for (std::int64_t b = 1; b < blocks; ++b) s += part[static_cast<std::size_t>(b * n + j)];
            store_param(p.param_dtype, out, j, s);
          }
        }
      },
      blocks);
}

}  // namespace lnorm::cpu
