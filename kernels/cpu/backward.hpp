// The CPU kernels' backward entry points (layernorm_bwd, rmsnorm_bwd); each kernel's run dispatches to
// its own when problem.op is a backward op. backward_scalar.cpp: naive's textbook and welford's careful.
#pragma once

#include "lnorm/problem.hpp"

namespace lnorm::cpu {

void naive_backward(const Problem& p, const Tensors& t);
void careful_backward(const Problem& p, const Tensors& t);

}  // namespace lnorm::cpu
