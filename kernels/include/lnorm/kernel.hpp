// The one interface every kernel implements (DESIGN.md "Kernels").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lnorm/problem.hpp"

namespace lnorm {

struct KernelInfo {
  std::string_view name;     // "naive", "welford", ...
  std::string_view summary;  // one line: algorithm, accumulation type
  DTypeSet dtypes;           // storage types it accepts
  // nullopt if it can run this problem on this machine; otherwise the reason.
  std::optional<std::string> (*why_not)(const Problem&);
  // Host pointers in, host pointers out. Must not depend on problem.threads bitwise.
  void (*run)(const Problem&, const Tensors&);
  // Kernels that are wrong on purpose (the cautionary `onepass`) say so here; the harness reports
  // their failures as expected rather than hiding the kernel.
  bool cautionary = false;
  // The ops it implements (problem.op); run is called only with one of them. Every kernel that takes an
  // op takes its parameter conventions too: gamma_offset, and f32 gamma/beta with f16/bf16 x.
  OpSet ops{Op::layernorm};
};

// The full availability check: op and dtype support first, then the kernel's own reason.
std::optional<std::string> unavailable_reason(const KernelInfo& k, const Problem& p);

}  // namespace lnorm
