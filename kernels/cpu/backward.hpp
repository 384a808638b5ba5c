// The CPU kernels' backward entry points (layernorm_bwd, rmsnorm_bwd); each kernel's run dispatches to
// its own when problem.op is a backward op. backward_scalar.cpp: naive's textbook and welford's careful.
#pragma once

#include <cstdint>

#include "lnorm/problem.hpp"

namespace lnorm::cpu {

void naive_backward(const Problem& p, const Tensors& t);
void careful_backward(const Problem& p, const Tensors& t);
struct BackwardRows;
// careful_backward's row for f32 data, as the ISA backward rows hand over the rows they decline.
void careful_backward_row_f32(const BackwardRows& a, std::int64_t r, double* dg, double* db);

}  // namespace lnorm::cpu
