// The one dispatch from an op to a kernel's entries, and the fused-add adaptor (docs/DESIGN.md "Kernels").
//
// Add & Norm through a kernel's forward (unless it fuses the add itself): rows in chunks small enough that h stays in cache;
// per chunk, h = x + residual rounded once (the kernel's add_rows, or the scalar add below: the sum is
// correctly rounded either way, so the bits are the same), then the kernel's forward on those rows with h as
// their x. The norm therefore reads h exactly as stored, so y, mean and rstd are bit for bit what the plain
// kernel gives on h (verify's add_h_then_norm), and the bytes moved are x, residual, h and y: h is written
// once and re-read from cache.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "lnorm/half.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/parallel.hpp"

namespace lnorm {
namespace {

// Bytes of h per chunk: at most this, and at least one row. 64 KiB keeps a chunk's h in L2 (512 KiB per
// core on the Zen 3/4 and Xeon machines CI lands on) with room for x, residual and y; chosen by that
// arithmetic, not tuned: docs/performance.md has the fused kernels' measured speed.
constexpr std::int64_t kAddChunkBytes = 64 << 10;

// h (TH) = x (T) + residual (TH) for rows [begin, end), rounded once. The sum is formed in f32 (f64 for
// f64) and rounded to TH: correctly rounded, since f32 and f64 sums are IEEE's and f16/bf16 values are
// exact in f32, whose 24 bits are at least 2p + 2 of theirs (Figueroa 1995: the second rounding is then
// innocuous).
template <class T, class TH>
void scalar_add_typed(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  using A = std::conditional_t<std::is_same_v<TH, double>, double, float>;
  const T* x = static_cast<const T*>(t.x);
  const TH* res = static_cast<const TH*>(t.residual);
  TH* h = static_cast<TH*>(t.h);
  for (std::int64_t i = begin * p.cols; i < end * p.cols; ++i) {
    const A v = static_cast<A>(to_float(x[i])) + static_cast<A>(to_float(res[i]));
    if constexpr (std::is_same_v<TH, double> || std::is_same_v<TH, float>) h[i] = v;
    else if constexpr (std::is_same_v<TH, f16>) h[i] = f16_from_float(v);
    else h[i] = bf16_from_float(v);
  }
}

void scalar_add(const Problem& p, const Tensors& t, std::int64_t begin, std::int64_t end) {
  const bool f32_h = p.residual_dtype == DType::f32 && p.dtype != DType::f32;
  switch (p.dtype) {
    case DType::f32: return scalar_add_typed<float, float>(p, t, begin, end);
    case DType::f64: return scalar_add_typed<double, double>(p, t, begin, end);
    case DType::f16: return f32_h ? scalar_add_typed<f16, float>(p, t, begin, end) : scalar_add_typed<f16, f16>(p, t, begin, end);
    case DType::bf16: return f32_h ? scalar_add_typed<bf16, float>(p, t, begin, end) : scalar_add_typed<bf16, bf16>(p, t, begin, end);
  }
}

template <class P>
P* offset(P* base, std::int64_t elements, DType d) {
  if (!base) return nullptr;
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return static_cast<P*>(static_cast<Byte*>(base) + elements * static_cast<std::int64_t>(size_of(d)));
}

void add_then_forward(const KernelInfo& k, const Problem& p, const Tensors& t) {
  const AddRowsFn add = k.add_rows ? k.add_rows : &scalar_add;
  const std::int64_t row_bytes = std::max<std::int64_t>(1, p.cols * static_cast<std::int64_t>(size_of(p.residual_dtype)));
  const std::int64_t chunk = std::max<std::int64_t>(1, kAddChunkBytes / row_bytes);
  const DType stats = stats_dtype(p.dtype);
  parallel_rows(p.rows, p.threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r0 = begin; r0 < end; r0 += chunk) {
      const std::int64_t r1 = std::min(end, r0 + chunk);
      add(p, t, r0, r1);
      Problem part = p;
      part.rows = r1 - r0;
      part.threads = 1;
      Tensors rows;  // the forward's operands for these rows, h as x
      rows.x = offset(static_cast<const void*>(t.h), r0 * p.cols, p.residual_dtype);
      rows.gamma = t.gamma;
      rows.beta = t.beta;
      rows.y = offset(t.y, r0 * p.cols, p.dtype);
      rows.mean = offset(t.mean, r0, stats);
      rows.rstd = offset(t.rstd, r0, stats);
      k.forward(part, rows);
    }
  }, p.cols);
}

}  // namespace

bool KernelInfo::implements(Op op) const {
  if (!find_op(op)) return false;
  if (op.direction == Direction::bwd) return backward && takes.backward_norms.contains(op.norm);
  return forward && takes.forward_norms.contains(op.norm) && takes.prologues.contains(op.prologue) &&
         takes.epilogues.contains(op.epilogue);
}

void KernelInfo::run(const Problem& p, const Tensors& t) const {
  if (p.op.direction == Direction::bwd) return backward(p, t);
  if (p.op.prologue == Prologue::residual_add && !takes.fuses_add) return add_then_forward(*this, p, t);
  forward(p, t);
}

std::optional<std::string> unavailable_reason(const KernelInfo& k, const Problem& p) {
  const std::string who(k.name);
  if (!k.implements(p.op)) return who + " does not implement " + std::string(name(p.op));
  if (!k.takes.dtypes.contains(p.dtype)) return who + " does not support dtype " + std::string(name(p.dtype));
  if ((!k.takes.f32_params && p.param_dtype != p.dtype) || (!k.takes.gamma_offset && p.gamma_offset != 0))
    return who + " takes gamma/beta in x's dtype without an offset";
  if (p.op.prologue == Prologue::residual_add && !k.takes.f32_residual && p.residual_dtype != p.dtype)
    return who + " takes the residual in x's dtype only, not f32 beside 16-bit x";
  return k.why_not ? k.why_not(p) : std::nullopt;
}

}  // namespace lnorm
