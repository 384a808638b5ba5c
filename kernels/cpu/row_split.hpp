// How every CPU kernel splits a problem's rows over threads: one function, so the kernels cannot drift
// apart (avx512 once called parallel_rows without the row length and split tiny problems that avx2 kept on
// one thread; tests/test_row_split.cpp checks every kernel and the emulated twins).
#pragma once

#include <cstdint>

#include "lnorm/parallel.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cpu {

// fn(begin, end) on contiguous row ranges of p, on up to p.threads threads, and on one thread when the
// problem has fewer than kMinElementsPerThread elements per extra thread (parallel.hpp has the measurement).
template <class Fn>
void split_rows(const Problem& p, Fn&& fn) {
  parallel_rows(p.rows, p.threads, static_cast<Fn&&>(fn), p.cols);
}

}  // namespace lnorm::cpu
