// The CUDA kernels as the registry sees them (plain C++: the CUDA calls are in runtime.cu).
// Each copies its host buffers to the device, launches and copies back; why_not says "no CUDA device"
// on machines without one, so `lnorm list` and `lnorm verify` report them unavailable there.
#include "cuda_kernels.hpp"

#include "device_api.hpp"

namespace lnorm::cuda {
namespace {

std::optional<std::string> why_not(const Problem&) { return device_unavailable_reason(); }

template <Algorithm kAlgorithm>
void run(const Problem& p, const Tensors& t) {
  run_host(kAlgorithm, p, t);
}

constexpr DTypeSet kDTypes{DType::f32, DType::f16, DType::bf16};

}  // namespace

const KernelInfo kCudaWarp{"cuda_warp",
                           "CUDA, 1-32 lanes per row, row in registers (<= 2048 wide; wider: as cuda_block); "
                           "shifted corrected three-pass stats, f32 (rstd in f64)",
                           kDTypes, &why_not, &run<Algorithm::warp>};
const KernelInfo kCudaBlock{"cuda_block",
                            "CUDA, one block per row, row cached in shared memory when it fits; shifted corrected "
                            "three-pass stats, f32 (rstd in f64)",
                            kDTypes, &why_not, &run<Algorithm::block>};
const KernelInfo kCudaNaive{"cuda_naive", "CUDA, one thread per row, textbook two-pass; f32, bitwise equal to naive",
                            kDTypes, &why_not, &run<Algorithm::naive>};

}  // namespace lnorm::cuda
