// RapidCheck generators of CaseSpecs. Each property draws from a Profile: which row classes it needs
// (cycled, so a run of at least that many cases sees every one — never only easy rows), which eps
// values, which affine kinds, how large.
#pragma once

#include <memory>
#include <vector>

#include <rapidcheck.h>

#include "lnorm/cases.hpp"

namespace lnorm::verify {

struct Profile {
  std::vector<RowClass> classes;      // cycled case by case: case k has primary class classes[k % size]
  bool mixed_batches = true;          // rows of other classes from `classes` mixed into the batch
  bool eps_zero_only = false;         // eps = 0 (invariance)
  bool allow_eps_zero = true;
  bool allow_affine = true;           // gamma/beta drawn; otherwise absent
  std::int64_t max_elements = 1 << 17;  // room for one 65537-wide row
  int max_rows = 48;
  bool params = false;                // the params property: gamma always given, its storage and offset drawn
  bool dy_range_edges = true;         // backward: dy at its format's range edges in 2 cases of 16 (cases.hpp)
};

// Widths every run draws from besides random ones: the edges, SIMD widths ± 1 (8 f32 lanes for
// AVX2, 16 for AVX-512, 32 f16/bf16 lanes), a page-sized row plus one and a row wider than 2^16.
inline constexpr std::int64_t kEdgeWidths[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 4097, 65537};
inline constexpr double kEdgeEps[] = {0, 1e-12, 1e-6, 1e-5, 1e-3, 1};

// The shared counter makes class cycling deterministic for a given run (and so for a given seed).
// LayerNorm's cases are drawn exactly as before ops existed (gen_case); other ops' cases are the same
// draws for that op, and the params property adds its draws on top (gen_case_for).
rc::Gen<CaseSpec> gen_case(DType dtype, const Profile& profile, std::shared_ptr<int> counter);
rc::Gen<CaseSpec> gen_case_for(DType dtype, Op op, const Profile& profile, std::shared_ptr<int> counter);

}  // namespace lnorm::verify
