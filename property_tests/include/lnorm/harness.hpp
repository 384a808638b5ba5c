// Running a kernel on a Case the way a suspicious harness does, and the exact answer for it.
//
// Every output buffer sits between two 64-byte guard regions filled with a canary byte, and the
// output itself is prefilled with a canary NaN pattern: after the run the guards must be intact and
// no output may still hold the canary (an element the kernel never wrote). Inputs may sit off
// 64-byte alignment (CaseSpec::misalign) and are checked to be unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lnorm/backward.hpp"
#include "lnorm/cases.hpp"
#include "lnorm/guarded_operands.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/reference.hpp"

namespace lnorm::verify {

struct Outputs {
  std::vector<std::uint64_t> y, mean, rstd;  // bit patterns (y: dtype, mean/rstd: stats dtype)
  std::vector<std::uint64_t> h;              // Add & Norm: the kernel's h (residual dtype), else empty
  // Empty, or "harness: " + what the kernel broke (guards, unwritten, inputs), or for Add & Norm
  // "h: " + the first element of h that is not x + residual rounded once.
  std::string violation;
  bool same_bits(const Outputs& o) const { return y == o.y && mean == o.mean && rstd == o.rstd && h == o.h; }
};

// A well-mixed 64-bit value from a seed and a position (one splitmix64 step): per-element draws with no
// generator state, the same on every platform.
inline std::uint64_t position_hash(std::uint64_t seed, std::size_t i) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Add & Norm: the kernel's x and residual for a case (Case's comment): the given residual, or an exact
// split of each value v of c.x: x = v·u rounded to x's dtype with u in [1/2, 1] drawn from the element's
// position and the case's seed, residual = v − x (exact by Sterbenz's lemma; zero takes v's sign, so
// −0 + −0 keeps h = −0). For another op: x = c.x, no residual.
struct KernelInputs {
  std::vector<double> x, residual;
};
KernelInputs kernel_inputs(const Case& c);
// The norm's input: h = x + residual rounded once to the residual's dtype (Add & Norm), else c.x.
std::vector<double> norm_input(const Case& c);

// Runs k on c with `threads` threads; explicit_identity passes gamma = 1 / beta = 0 buffers in
// place of absent ones (property 7).
Outputs run_guarded(const KernelInfo& k, const Case& c, int threads = 1, bool explicit_identity = false);

struct Exact {
  std::vector<std::uint64_t> y;             // exact answer rounded once, bits
  std::vector<ElementReference> elems;      // per element, for the metrics
  std::vector<RowReference> rows;
};
Exact exact_answer(const Case& c);

// The backward ops (harness_backward.cpp). The kernel gets x, gamma, dy and the forward's saved statistics
// (the exact mean and rstd rounded once to the stats format, as a framework saves them) and writes dx, dgamma,
// dbeta inside guard bytes; the harness checks what run_guarded checks.
struct BackwardOutputs {
  std::vector<std::uint64_t> dx, dgamma, dbeta;  // bits (dx: dtype; dgamma/dbeta: param dtype; empty when not asked)
  std::string violation;                         // "harness: ..." as run_guarded's
  bool same_bits(const BackwardOutputs& o) const { return dx == o.dx && dgamma == o.dgamma && dbeta == o.dbeta; }
};
// The forward's saved statistics: the exact mean (LayerNorm) and rstd, rounded once to the stats format.
struct SavedStats {
  std::vector<double> mean, rstd;
};
SavedStats saved_stats(const Case& c);
// One backward case's buffers, encoded once, for a kernel run as often as a property asks: determinism runs a
// case tiled to 2^18 elements five times, and under ASan every fresh buffer of that size is mapped and faulted in
// anew (perf, `lnorm verify --dir bwd --quick --property determinism` in the asan build: page faults, copies and
// fills of new buffers were most of its samples). Each run refills the outputs with the canary and checks what
// run_guarded_backward checks, the inputs against their bytes before the first run. It keeps references to k and
// c: both must outlive it.
class GuardedBackward {
 public:
  GuardedBackward(const KernelInfo& k, const Case& c, const SavedStats& saved);
  // Runs the kernel on `threads` threads: "" or "harness: " + what it broke.
  std::string run(int threads);
  // The last run's outputs as bits (violation empty).
  BackwardOutputs outputs() const;
  // The last run's outputs' bytes, and whether this run's are the same: a comparison without new buffers.
  struct Bytes {
    std::vector<std::byte> dx, dgamma, dbeta;
  };
  Bytes output_bytes() const;
  bool same_dx(const Bytes& b) const;
  bool same_params(const Bytes& b) const;

 private:
  const KernelInfo& k_;
  const Case& c_;
  SavedStats saved_;     // the saved statistics' values, which ops_ encodes
  GuardedOperands ops_;  // x, gamma, dy, saved_mean, saved_rstd; dx, dgamma, dbeta
};
BackwardOutputs run_guarded_backward(const KernelInfo& k, const Case& c, const SavedStats& saved, int threads = 1);
BackwardOutputs run_guarded_backward(const KernelInfo& k, const Case& c, int threads = 1);
// The exact gradients rounded once (bits) and their references (lnorm/backward.hpp).
struct ExactBackward {
  std::vector<std::uint64_t> dx, dgamma, dbeta;
  BackwardReference ref;
};
ExactBackward exact_backward(const Case& c);

// A case holding only the given rows of c (in that order): row-independence and NaN isolation.
Case select_rows(const Case& c, const std::vector<std::int64_t>& rows);

}  // namespace lnorm::verify
