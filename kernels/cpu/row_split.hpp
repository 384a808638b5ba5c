// How every CPU kernel splits a problem's rows over threads: one function, so the kernels cannot drift
// apart (avx512 once called parallel_rows without the row length and split tiny problems that avx2 kept on
// one thread; tests/test_row_split.cpp checks every kernel and the emulated twins).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "lnorm/kernel.hpp"
#include "lnorm/parallel.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu {

// fn(begin, end) on contiguous row ranges of p, on up to p.threads threads, and on one thread when the
// problem has fewer than kMinElementsPerThread elements per extra thread (parallel.hpp has the measurement).
// Inside an Add & Norm forward handed over by the fused-add adaptor (lnorm/kernel.hpp PendingAdd), the first
// call takes the pending add and runs each range in chunks: h for the chunk's rows, then fn on them, so h is
// re-read from cache (a nested call, e.g. a fallback row's, finds nothing pending).
template <class Fn>
void split_rows(const Problem& p, Fn&& fn) {
  const PendingAdd* add = std::exchange(pending_add(), nullptr);
  if (!add) {
    parallel_rows(p.rows, p.threads, static_cast<Fn&&>(fn), p.cols);
    return;
  }
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r0 = begin; r0 < end; r0 += add->chunk_rows) {
      const std::int64_t r1 = std::min(end, r0 + add->chunk_rows);
      add->add(*add->problem, *add->tensors, r0, r1);
      fn(r0, r1);
    }
  }, p.cols);
}

}  // namespace lnorm::cpu
