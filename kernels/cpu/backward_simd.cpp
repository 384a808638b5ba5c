// The SIMD kernels' backward driver (avx2, avx512, and the emulated avx512_emu): generic code, so the ISA
// translation units hold only their row loops (isa.hpp says why).
#include "backward.hpp"
#include "backward_blocks.hpp"
#include "isa.hpp"
#include "lnorm/params.hpp"

namespace lnorm::cpu {
namespace {

// dx is written with non-temporal stores when it exceeds kStreamDxBytes, the forward's y threshold (simd_body.hpp's
// kStreamBytes: 8 MiB, past a 2-core EPYC's share of L3). A plain store reads dx's line before writing it:
// a third read stream. Measured on this AVX-512 EPYC at 16384x4096 f32 (x and dy read, x·dy written, 7 runs):
// 79% of the copy's bandwidth with plain stores, 106% with non-temporal ones.
constexpr std::int64_t kStreamDxBytes = std::int64_t{8} << 20;
bool stream_dx(const Problem& p) { return p.elements() * static_cast<std::int64_t>(size_of(p.dtype)) > kStreamDxBytes; }

}  // namespace

void simd_backward(const Problem& p, const Tensors& t, BackwardRowsFnPtr rows_fn) {
  if (!t.saved_rstd || (p.op.norm == Norm::layernorm && !t.saved_mean)) return careful_backward(p, t);
  StagedParams<float> staged = stage_params<float>(p, t);  // w = C + gamma rounded once to f32
  // Without gamma the weight is 1: staged as ones, so the row loops load w unconditionally (dy·1 = dy exactly).
  if (!staged.gamma()) staged.w.assign(static_cast<std::size_t>(p.cols), 1.0f);
  const BackwardRows a{t.x, t.dy, staged.gamma(), static_cast<const float*>(t.saved_mean), static_cast<const float*>(t.saved_rstd),
                       t.dx, p.cols, p.op.norm == Norm::layernorm, p.dtype, stream_dx(p), &careful_backward_row, &p};
  backward_blocks<double>(p, t, [&](std::int64_t r0, std::int64_t r1, double* dg, double* db) { rows_fn(a, r0, r1, dg, db); });
}

}  // namespace lnorm::cpu
