// The CPU kernels' backward entry points (layernorm_bwd, rmsnorm_bwd); each kernel's run dispatches to
// its own when problem.op is a backward op. backward_scalar.cpp: naive's textbook and welford's careful.
#pragma once

#include <cstdint>

#include "lnorm/problem.hpp"

namespace lnorm::cpu {

void naive_backward(const Problem& p, const Tensors& t);
void careful_backward(const Problem& p, const Tensors& t);
struct BackwardRows;
// careful_backward's row (f32, f16 or bf16 data, a.dtype), as the ISA backward rows hand over the rows they
// decline.
void careful_backward_row(const BackwardRows& a, std::int64_t r, double* dg, double* db);
// The SIMD kernels' backward driver (backward_simd.cpp): w = C + gamma staged in f32, rows_fn over the fixed
// blocks of backward_blocks.hpp from the forward's saved statistics, dgamma/dbeta from the f64 partials;
// careful_backward when the statistics were not saved. f32, f16 or bf16 data.
using BackwardRowsFnPtr = void (*)(const BackwardRows&, std::int64_t, std::int64_t, double*, double*);
void simd_backward(const Problem& p, const Tensors& t, BackwardRowsFnPtr rows_fn);

}  // namespace lnorm::cpu
