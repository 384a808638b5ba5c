// The launchers of the three CUDA kernels, called by runtime.cu with device pointers and a plan from
// launch_config.hpp (CUDA-only header).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "launch_config.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cuda {

// t holds device pointers; mean/rstd may be null. Launches only (asynchronous on stream).
void launch_naive(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream);
void launch_group(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream);
void launch_block(const LaunchConfig& c, const Problem& p, const Tensors& t, cudaStream_t stream);
// The backward (backward.cu; c from plan_backward_launch): t.x, t.dy, t.dx, t.dgamma, t.dbeta, and t.gamma holding
// w = C + gamma in f64 (or null); part_g/part_b: backward_chunks(rows) x cols doubles each, or null when that
// gradient is not wanted (zeroed here).
void launch_backward(const LaunchConfig& c, const Problem& p, const Tensors& t, double* part_g, double* part_b, cudaStream_t stream);

[[noreturn]] inline void throw_internal(const std::string& what) { throw std::logic_error(what); }

// Throws with the CUDA error string, naming the call that failed.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace lnorm::cuda
