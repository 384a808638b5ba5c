// The one dispatch from an op to a kernel's entries, and the fused-add adaptor (docs/DESIGN.md "Kernels").
//
// Add & Norm through a kernel's forward (unless it fuses the add itself): the forward gets the whole problem
// with h as x, and its row driver (cpu::split_rows, which every CPU kernel uses) takes the pending add
// (lnorm/kernel.hpp PendingAdd): rows in chunks small enough that h stays in cache; per chunk, h = x + residual
// rounded once (the kernel's add_rows, or the scalar add below: the sum is correctly rounded either way, so the
// bits are the same), then the kernel's rows on that chunk. The norm therefore reads h exactly as stored, so y,
// mean and rstd are bit for bit what the plain kernel gives on h (verify's add_h_then_norm), the bytes moved
// are x, residual, h and y (h written once, re-read from cache), and the kernel stages its parameters and
// chooses streaming stores once, for the whole problem.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "lnorm/half.hpp"
#include "lnorm/kernel.hpp"

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

// Sets this thread's pending add for one forward call; the forward's split_rows takes it.
class PendingAddScope {
 public:
  explicit PendingAddScope(const PendingAdd& add) { pending_add() = &add; }
  ~PendingAddScope() { pending_add() = nullptr; }
  PendingAddScope(const PendingAddScope&) = delete;
  PendingAddScope& operator=(const PendingAddScope&) = delete;
};

void add_then_forward(const KernelInfo& k, const Problem& p, const Tensors& t) {
  const std::int64_t row_bytes = std::max<std::int64_t>(1, p.cols * static_cast<std::int64_t>(size_of(p.residual_dtype)));
  const PendingAdd pending{k.add_rows ? k.add_rows : &scalar_add, &p, &t, std::max<std::int64_t>(1, kAddChunkBytes / row_bytes)};
  Tensors rows = t;  // the forward's operands: h as x
  rows.x = t.h;
  rows.residual = nullptr;
  rows.h = nullptr;
  {
    const PendingAddScope scope(pending);
    k.forward(p, rows);
    if (pending_add() == &pending && p.rows > 0)  // the forward never split its rows: h was never formed
      throw std::logic_error(std::string(k.name) + " takes Add & Norm through the adaptor, but its forward does not split its rows with cpu::split_rows");
  }
}

}  // namespace

const PendingAdd*& pending_add() {
  thread_local const PendingAdd* pending = nullptr;
  return pending;
}

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
  if (!k.implements(p.op)) {
    // The quantized op is named as its norm ("layernorm"): say which part the kernel lacks, not that it lacks the norm.
    Op with_y = p.op;
    with_y.epilogue = Epilogue::y_as_x;
    if (p.op.epilogue == Epilogue::quantized && k.implements(with_y))
      return who + " writes no quantized output (it implements " + std::string(name(with_y)) + " with y only)";
    return who + " does not implement " + std::string(name(p.op));
  }
  if (!k.takes.dtypes.contains(p.dtype)) return who + " does not support dtype " + std::string(name(p.dtype));
  if ((!k.takes.f32_params && p.param_dtype != p.dtype) || (!k.takes.gamma_offset && p.gamma_offset != 0))
    return who + " takes gamma/beta in x's dtype without an offset";
  if (p.op.prologue == Prologue::residual_add && !k.takes.f32_residual && p.residual_dtype != p.dtype)
    return who + " takes the residual in x's dtype only, not f32 beside 16-bit x";
  // A kernel takes G as an input (FlashInfer's global_scale): the caller resolves the tensor's own first.
  if (p.op.epilogue == Epilogue::quantized && p.quant.scaling_info().global_scale && !(p.quant.global_scale > 0))
    return "nvfp4's global scale is not resolved (the harness sets the tensor's own before " + who + " runs: resolve_global_scale)";
  return k.why_not ? k.why_not(p) : std::nullopt;
}

}  // namespace lnorm
