// Host side of the CUDA kernels: device discovery, buffers, copies, the launch dispatch, and CUDA
// errors turned into exceptions. The kernels themselves are in naive.cu, group.cu and block.cu.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "device_api.hpp"
#include "launch.cuh"

namespace lnorm::cuda {
namespace {

// One cudaMalloc'd buffer, freed on scope exit (also when a later CUDA call throws).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % kVectorBytes == 0; }

struct Unavailable {
  std::string reason;  // in words a user reads
  std::string detail;  // the runtime's call, error code and string (lnorm list --verbose)
};

std::string error_detail(const char* call, cudaError_t e) {
  return std::string(call) + " returned " + std::to_string(static_cast<int>(e)) + " (" + cudaGetErrorName(e) + ": " +
         cudaGetErrorString(e) + ")";
}

std::optional<Unavailable> query_unavailable() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  // No driver at all reads as "insufficient driver" (the runtime finds no libcuda, or the toolkit's stub): on a
  // machine without a GPU that is what every call says, so it is said plainly; the code stays in the detail.
  if (e == cudaErrorInsufficientDriver) return Unavailable{"no NVIDIA GPU or driver on this machine", error_detail("cudaGetDeviceCount", e)};
  if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
    return Unavailable{"no NVIDIA GPU on this machine", e == cudaSuccess ? "cudaGetDeviceCount: 0 devices" : error_detail("cudaGetDeviceCount", e)};
  if (e != cudaSuccess) return Unavailable{std::string("the CUDA runtime cannot use a GPU here: ") + cudaGetErrorString(e),
                                           error_detail("cudaGetDeviceCount", e)};
  cudaDeviceProp prop{};
  if (const cudaError_t pe = cudaGetDeviceProperties(&prop, 0); pe != cudaSuccess) {
    return Unavailable{std::string("GPU 0 is unusable: ") + cudaGetErrorString(pe), error_detail("cudaGetDeviceProperties", pe)};
  }
  if (prop.major < 9) {
    return Unavailable{"needs compute capability 9.0 or newer (built for sm_90); device 0 " + std::string(prop.name) + " is " +
                           std::to_string(prop.major) + "." + std::to_string(prop.minor),
                       ""};
  }
  return std::nullopt;
}

const std::optional<Unavailable>& unavailable() {
  static const std::optional<Unavailable> u = query_unavailable();
  return u;
}

}  // namespace

std::optional<std::string> device_unavailable_reason() {
  if (const auto& u = unavailable()) return u->reason;
  return std::nullopt;
}

std::string device_unavailable_detail() {
  const auto& u = unavailable();
  return u ? u->detail : std::string();
}

DeviceLimits device_limits() {
  static const DeviceLimits limits = [] {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    DeviceLimits l;
    check(cudaDeviceGetAttribute(&l.sm_count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SM count)");
    int smem = 0;
    check(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
    l.max_smem_per_block = static_cast<std::size_t>(smem);
    return l;
  }();
  return limits;
}


// The backward on device buffers: its f64 partials stream-ordered (cudaMallocAsync), freed after the launches.
void launch_backward_device(Algorithm algorithm, const Problem& p, const Tensors& t, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const bool aligned = aligned16(t.x) && aligned16(t.dy) && aligned16(t.dx);
  const LaunchConfig c = plan_backward_launch(algorithm, p.rows, p.cols, p.dtype, aligned, device_limits());
  if (c.grid == 0) return;
  const std::size_t part_bytes = static_cast<std::size_t>(backward_chunks(p.rows)) * static_cast<std::size_t>(p.cols) * sizeof(double);
  void* pg = nullptr;
  void* pb = nullptr;
  if (p.has_gamma && t.dgamma) check(cudaMallocAsync(&pg, part_bytes, s), "cudaMallocAsync(dgamma partials)");
  if (p.has_beta && t.dbeta) check(cudaMallocAsync(&pb, part_bytes, s), "cudaMallocAsync(dbeta partials)");
  launch_backward(c, p, t, static_cast<double*>(pg), static_cast<double*>(pb), s);
  check(cudaGetLastError(), "kernel launch");
  if (pg) check(cudaFreeAsync(pg, s), "cudaFreeAsync");
  if (pb) check(cudaFreeAsync(pb, s), "cudaFreeAsync");
}

void run_host_backward(Algorithm algorithm, const Problem& p, const Tensors& host) {
  if (p.rows == 0 || p.cols == 0) return;
  // gamma: w = C + gamma in f64 (cuda_kernels.cpp stages it); dgamma/dbeta in p.param_dtype.
  const std::size_t data_bytes = static_cast<std::size_t>(p.rows) * static_cast<std::size_t>(p.cols) * size_of(p.dtype);
  const std::size_t w_bytes = static_cast<std::size_t>(p.cols) * sizeof(double);
  const std::size_t param_bytes = static_cast<std::size_t>(p.cols) * size_of(p.param_dtype);
  const bool want_g = p.has_gamma && host.dgamma, want_b = p.has_beta && host.dbeta;
  DeviceBuffer x(data_bytes), dy(data_bytes), dx(data_bytes), w(host.gamma ? w_bytes : 0), dg(want_g ? param_bytes : 0),
      db(want_b ? param_bytes : 0);
  check(cudaMemcpy(x.get(), host.x, data_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(x to device)");
  check(cudaMemcpy(dy.get(), host.dy, data_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(dy to device)");
  if (host.gamma) check(cudaMemcpy(w.get(), host.gamma, w_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(w to device)");
  Tensors d;
  d.x = x.get();
  d.dy = dy.get();
  d.dx = dx.get();
  d.gamma = w.get();
  d.dgamma = want_g ? dg.get() : nullptr;
  d.dbeta = want_b ? db.get() : nullptr;
  launch_backward_device(algorithm, p, d, nullptr);
  check(cudaMemcpy(host.dx, dx.get(), data_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(dx to host)");
  if (want_g) check(cudaMemcpy(host.dgamma, dg.get(), param_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(dgamma to host)");
  if (want_b) check(cudaMemcpy(host.dbeta, db.get(), param_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(dbeta to host)");
}

void launch_device(Algorithm algorithm, const Problem& p, const Tensors& t, void* stream) {
  const bool aligned = aligned16(t.x) && aligned16(t.y) && aligned16(p.has_gamma ? t.gamma : nullptr) &&
                       aligned16(p.has_beta ? t.beta : nullptr) && aligned16(t.residual) && aligned16(t.h);
  const LaunchConfig c = plan_launch(algorithm, p.rows, p.cols, p.dtype, aligned, device_limits());
  if (c.grid == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (c.strategy) {
    case Strategy::thread_per_row: launch_naive(c, p, t, s); break;
    case Strategy::group_per_row: launch_group(c, p, t, s); break;
    case Strategy::block_per_row: launch_block(c, p, t, s); break;
  }
  check(cudaGetLastError(), "kernel launch");
}

void run_host(Algorithm algorithm, const Problem& p, const Tensors& host) {
  if (p.rows == 0 || p.cols == 0) return;
  // gamma/beta in p.param_dtype (cuda_kernels.cpp stages f32 parameters and the offset; no offset here).
  const std::size_t es = size_of(p.dtype);
  const std::size_t data_bytes = static_cast<std::size_t>(p.rows) * static_cast<std::size_t>(p.cols) * es;
  const std::size_t row_bytes = static_cast<std::size_t>(p.cols) * size_of(p.param_dtype);
  const std::size_t stat_bytes = static_cast<std::size_t>(p.rows) * sizeof(float);
  // Add & Norm (its operands given): residual and h in x's dtype (cuda_kernels.cpp declines others), x's size.
  const bool fused = host.residual != nullptr;
  DeviceBuffer x(data_bytes), y(data_bytes), gamma(host.gamma ? row_bytes : 0), beta(host.beta ? row_bytes : 0),
      mean(host.mean ? stat_bytes : 0), rstd(host.rstd ? stat_bytes : 0), residual(fused ? data_bytes : 0),
      h(fused ? data_bytes : 0);
  check(cudaMemcpy(x.get(), host.x, data_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(x to device)");
  if (fused) check(cudaMemcpy(residual.get(), host.residual, data_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(residual to device)");
  if (host.gamma) check(cudaMemcpy(gamma.get(), host.gamma, row_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(gamma to device)");
  if (host.beta) check(cudaMemcpy(beta.get(), host.beta, row_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(beta to device)");
  launch_device(algorithm, p,
                Tensors{x.get(), gamma.get(), beta.get(), y.get(), mean.get(), rstd.get(), residual.get(), h.get()}, nullptr);
  // cudaMemcpy waits for the kernel; an error raised while it ran is reported here.
  check(cudaMemcpy(host.y, y.get(), data_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(y to host)");
  if (fused) check(cudaMemcpy(host.h, h.get(), data_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(h to host)");
  if (host.mean) check(cudaMemcpy(host.mean, mean.get(), stat_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(mean to host)");
  if (host.rstd) check(cudaMemcpy(host.rstd, rstd.get(), stat_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(rstd to host)");
}

}  // namespace lnorm::cuda
