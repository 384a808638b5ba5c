// The CUDA kernels as the registry sees them (plain C++: the CUDA calls are in runtime.cu).
// Each copies its host buffers to the device, launches and copies back; why_not says "no CUDA device"
// on machines without one, so `lnorm list` and `lnorm verify` report them unavailable there.
#include "cuda_kernels.hpp"

#include "lnorm/params.hpp"
#include "device_api.hpp"

namespace lnorm::cuda {
namespace {

// Add & Norm: the residual in x's dtype (the kernels read both through one element type).
std::optional<std::string> why_not(const Problem& p) {
  if (fused_add(p.op) && p.residual_dtype != p.dtype)
    return "the CUDA kernels take the residual in x's dtype (an f32 residual beside 16-bit x: welford, naive)";
  return device_unavailable_reason();
}

// cuda_naive is the textbook LayerNorm, bitwise the CPU naive with parameters in x's dtype.
std::optional<std::string> naive_why_not(const Problem& p) {
  if (p.param_dtype != p.dtype || p.gamma_offset != 0) return "cuda_naive takes gamma/beta in x's dtype without an offset";
  return device_unavailable_reason();
}

// f32 gamma/beta beside 16-bit x, or an offset: w = C + gamma and beta staged in f32 once per call (as the
// CPU kernels, params.hpp); the device then reads f32 parameters without an offset.
template <Algorithm kAlgorithm>
void run(const Problem& p, const Tensors& t) {
  if (backward(p.op)) {  // the device reads w = C + gamma in f64 (backward_row.hpp), as welford's careful backward
    const cpu::StagedParams<double> staged = cpu::stage_params<double>(p, t);
    Tensors st = t;
    st.gamma = staged.gamma();
    return run_host(kAlgorithm, p, st);
  }
  if (cpu::params_in_place(p)) return run_host(kAlgorithm, p, t);
  const cpu::StagedParams<float> staged = cpu::stage_params<float>(p, t);
  Problem device = p;
  device.param_dtype = DType::f32;
  device.gamma_offset = 0;
  Tensors st = t;
  st.gamma = staged.gamma();
  st.beta = staged.beta();
  run_host(kAlgorithm, device, st);
}

constexpr DTypeSet kDTypes{DType::f32, DType::f16, DType::bf16};

}  // namespace

const KernelInfo kCudaWarp{"cuda_warp",
                           "CUDA, 1-32 lanes per row, row in registers (<= 2048 wide; wider: as cuda_block); "
                           "shifted corrected three-pass stats (RMSNorm: the sum of squares), f32 (rstd in f64); backward: welford's careful "
                           "row in f64, dgamma/dbeta over fixed 32-row chunks",
                           kDTypes, &why_not, &run<Algorithm::warp>, false,
                           OpSet{Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm, Op::layernorm_bwd, Op::rmsnorm_bwd}};
const KernelInfo kCudaBlock{"cuda_block",
                            "CUDA, one block per row, row cached in shared memory when it fits; shifted corrected "
                            "three-pass stats (RMSNorm: the sum of squares), f32 (rstd in f64); backward: welford's careful row in "
                            "f64, dgamma/dbeta over fixed 32-row chunks",
                            kDTypes, &why_not, &run<Algorithm::block>, false,
                            OpSet{Op::layernorm, Op::rmsnorm, Op::add_layernorm, Op::add_rmsnorm, Op::layernorm_bwd, Op::rmsnorm_bwd}};
const KernelInfo kCudaNaive{"cuda_naive", "CUDA, one thread per row, textbook two-pass; f32, bitwise equal to naive",
                            kDTypes, &naive_why_not, &run<Algorithm::naive>};

}  // namespace lnorm::cuda
