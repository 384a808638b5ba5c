// The CUDA kernels' host-side entry points, in plain C++ (no CUDA headers), for the registry
// (cuda_kernels.cpp), the GPU benchmark (bench/gpu/) and the tests. Defined in runtime.cu; only
// present when lnorm is built with CUDA (LNORM_HAVE_CUDA).
#pragma once

#include <optional>
#include <string>

#include "launch_config.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cuda {

// nullopt when device 0 can run these kernels; else why not, in plain words: "no NVIDIA GPU or driver on this
// machine", "no NVIDIA GPU on this machine", another runtime error's string, or a compute capability below 9.0
// (the binary holds sm_90 code and compute_90 PTX only). Asked once per process.
std::optional<std::string> device_unavailable_reason();
// The runtime's own words behind that reason (the call, the error code and its name), for `lnorm list --verbose`;
// empty when there is nothing more to say.
std::string device_unavailable_detail();

// Device 0's multiprocessor count and opt-in shared memory per block.
DeviceLimits device_limits();

// Host buffers in and out (KernelInfo::run): copies x, gamma, beta to the device, launches, copies y,
// mean and rstd back. Throws std::runtime_error with the CUDA error string on any CUDA failure.
// Add & Norm when host.residual is given: residual in, h out as well.
void run_host(Algorithm algorithm, const Problem& p, const Tensors& host);
// The backward (cuda_warp, cuda_block): x, dy and gamma in, dx, dgamma and dbeta out, where gamma holds
// w = C + gamma staged in f64 (cols doubles; null: weight 1) and dgamma/dbeta are in p.param_dtype.
void run_host_backward(Algorithm algorithm, const Problem& p, const Tensors& host);

// Device buffers (from cudaMalloc; mean/rstd may be null), launch only, asynchronous on `stream` (a
// cudaStream_t; nullptr for the default stream). For benchmarks: nothing is copied or synchronized.
// Throws on a launch error.
void launch_device(Algorithm algorithm, const Problem& p, const Tensors& device, void* stream);
// The backward as run_host_backward's (gamma: w in f64); its f64 partials are allocated and freed
// stream-ordered inside.
void launch_backward_device(Algorithm algorithm, const Problem& p, const Tensors& device, void* stream);

}  // namespace lnorm::cuda
