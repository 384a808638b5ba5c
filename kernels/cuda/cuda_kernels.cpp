// The CUDA kernels as the registry sees them (plain C++: the CUDA calls are in runtime.cu).
// Each copies its host buffers to the device, launches and copies back; why_not says "no NVIDIA GPU or driver on
// this machine" on machines without one (the runtime's error code: why_not_detail), so `lnorm list` and `lnorm verify` report them unavailable there.
#include "cuda_kernels.hpp"

#include "lnorm/params.hpp"
#include "device_api.hpp"

namespace lnorm::cuda {
namespace {

std::optional<std::string> why_not(const Problem&) { return device_unavailable_reason(); }

// f32 gamma/beta beside 16-bit x, or an offset: w = C + gamma and beta staged in f32 once per call (as the
// CPU kernels, params.hpp); the device then reads f32 parameters without an offset.
// The backward: the device reads w = C + gamma in f64 (backward_row.hpp), as welford's careful backward.
template <Algorithm kAlgorithm>
void backward(const Problem& p, const Tensors& t) {
  const cpu::StagedParams<double> staged = cpu::stage_params<double>(p, t);
  Tensors st = t;
  st.gamma = staged.gamma();
  run_host_backward(kAlgorithm, p, st);
}

// The forward, Add & Norm's add fused on the device (fuses_add: a chunked host adaptor would launch per chunk).
template <Algorithm kAlgorithm>
void forward(const Problem& p, const Tensors& t) {
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

// Add & Norm: the residual in x's dtype (the kernels read both through one element type).
constexpr Takes kTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms,
                       .backward_norms = kBothNorms, .prologues = kWithAdd, .fuses_add = true};
// cuda_naive is the textbook LayerNorm, bitwise the CPU naive with parameters in x's dtype.
constexpr Takes kNaiveTakes{.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = {Norm::layernorm},
                            .f32_params = false, .gamma_offset = false};

}  // namespace

const KernelInfo kCudaWarp{"cuda_warp",
                           "CUDA, 1-32 lanes per row, row in registers (<= 2048 wide; wider: as cuda_block); "
                           "shifted corrected three-pass stats (RMSNorm: the sum of squares), f32 (rstd in f64); backward: welford's careful "
                           "row in f64, dgamma/dbeta over fixed 32-row chunks",
                           kTakes, &forward<Algorithm::warp>, &backward<Algorithm::warp>, nullptr, &why_not, false,
                           &device_unavailable_detail};
const KernelInfo kCudaBlock{"cuda_block",
                            "CUDA, one block per row, row cached in shared memory when it fits; shifted corrected "
                            "three-pass stats (RMSNorm: the sum of squares), f32 (rstd in f64); backward: welford's careful row in "
                            "f64, dgamma/dbeta over fixed 32-row chunks",
                            kTakes, &forward<Algorithm::block>, &backward<Algorithm::block>, nullptr, &why_not, false,
                           &device_unavailable_detail};
const KernelInfo kCudaNaive{"cuda_naive", "CUDA, one thread per row, textbook two-pass; f32, bitwise equal to naive",
                            kNaiveTakes, &forward<Algorithm::naive>, nullptr, nullptr, &why_not, false,
                           &device_unavailable_detail};

}  // namespace lnorm::cuda
