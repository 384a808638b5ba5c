// lnorm_gpu_bench — throughput of the CUDA LayerNorm kernels on device-resident buffers, beside the
// device-to-device copy of the same bytes measured in the same run (the ceiling: DESIGN "Speed").
//
//   lnorm_gpu_bench --shapes bench/gpu/shapes.txt --out gpu_bench.json [--reps 20] [--min-mib 256]
//
// For each shape (dtype, cols; rows so x >= min-mib) and kernel (cuda_warp, cuda_block; cuda_naive is
// a checking baseline with uncoalesced loads and is not benchmarked): x filled with random normals
// (not zeros: METHOD.md), gamma/beta present (torch's layer_norm default), mean/rstd not written
// (torch's F.layer_norm returns neither). Each timed call is bracketed by CUDA events; 3 warm-up
// calls, then the median of --reps. GB/s counts x read + y written (gamma/beta are one row, cached).
// The copy: cudaMemcpyAsync(y <- x) of the same bytes, timed the same way, GB/s counting read + write.
// Output: JSON (GPU name, driver and runtime versions, SM count, L2 size, per-shape results with
// GB/s and % of the copy), and a table on stdout. Exit 1 on any CUDA error (message names the call).
// Built with the `cuda` preset (bench/gpu/CMakeLists.txt), or stand-alone with nvcc by
// bench/gpu/run_on_device.sh when the prebuilt binary does not run there.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/cuda/device_api.hpp"

namespace {

using lnorm::DType;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Shape {
  DType dtype;
  std::int64_t rows, cols;
};

std::vector<Shape> read_shapes(const std::string& path, double min_mib) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read shapes file " + path);
  std::vector<Shape> shapes;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string d;
    std::int64_t cols = 0;
    if (!(ls >> d >> cols) || cols <= 0) throw std::runtime_error(path + ": bad line '" + line + "'");
    const auto dtype = lnorm::parse_dtype(d);
    if (!dtype || *dtype == DType::f64) throw std::runtime_error(path + ": dtype must be f32, f16 or bf16: " + d);
    const double row_bytes = static_cast<double>(cols) * static_cast<double>(lnorm::size_of(*dtype));
    const auto rows = static_cast<std::int64_t>(min_mib * 1024 * 1024 / row_bytes + 0.999999);
    shapes.push_back({*dtype, rows, cols});
  }
  return shapes;
}

// x_i = a hashed standard-normal-ish value (sum of 4 uniforms, centred) + 0.5: random, not zeros.
__global__ void fill(void* p, std::int64_t n, int dtype, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ static_cast<std::uint32_t>(i >> 32) ^ seed;
    float s = 0.0f;
    for (int k = 0; k < 4; ++k) {
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      s += static_cast<float>(h >> 8) * 0x1p-24f;
    }
    const float v = (s - 2.0f) * 1.7320508f + 0.5f;
    if (dtype == static_cast<int>(DType::f32)) static_cast<float*>(p)[i] = v;
    else if (dtype == static_cast<int>(DType::f16)) static_cast<__half*>(p)[i] = __float2half_rn(v);
    else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
}

template <class F>
double median_ms(F call, int reps, cudaEvent_t a, cudaEvent_t b) {
  for (int i = 0; i < 3; ++i) call();
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> ms(static_cast<std::size_t>(reps));
  for (float& t : ms) {
    check(cudaEventRecord(a), "cudaEventRecord");
    call();
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes_path = "bench/gpu/shapes.txt", out_path = "gpu_bench.json";
  int reps = 20;
  double min_mib = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "lnorm_gpu_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--shapes") shapes_path = value();
    else if (a == "--out") out_path = value();
    else if (a == "--reps") reps = std::atoi(value().c_str());
    else if (a == "--min-mib") min_mib = std::atof(value().c_str());
    else {
      std::fprintf(stderr, "lnorm_gpu_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (reps < 1 || !(min_mib > 0)) {
    std::fprintf(stderr, "lnorm_gpu_bench: --reps must be >= 1 and --min-mib > 0\n");
    return 2;
  }
  try {
    if (const auto why = lnorm::cuda::device_unavailable_reason()) throw std::runtime_error(*why);
    const std::vector<Shape> shapes = read_shapes(shapes_path, min_mib);
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    cudaEvent_t ea, eb;
    check(cudaEventCreate(&ea), "cudaEventCreate");
    check(cudaEventCreate(&eb), "cudaEventCreate");

    std::ostringstream results;
    std::printf("%-10s %-5s %10s %6s %9s %10s %10s %8s\n", "kernel", "dtype", "rows", "cols", "MiB", "ms", "GB/s", "% copy");
    bool first = true;
    for (const Shape& s : shapes) {
      const std::size_t es = lnorm::size_of(s.dtype);
      const std::size_t bytes = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(s.cols) * es;
      void *x = nullptr, *y = nullptr, *gamma = nullptr, *beta = nullptr;
      check(cudaMalloc(&x, bytes), "cudaMalloc(x)");
      check(cudaMalloc(&y, bytes), "cudaMalloc(y)");
      check(cudaMalloc(&gamma, static_cast<std::size_t>(s.cols) * es), "cudaMalloc(gamma)");
      check(cudaMalloc(&beta, static_cast<std::size_t>(s.cols) * es), "cudaMalloc(beta)");
      fill<<<1024, 256>>>(x, s.rows * s.cols, static_cast<int>(s.dtype), 1);
      fill<<<16, 256>>>(gamma, s.cols, static_cast<int>(s.dtype), 2);
      fill<<<16, 256>>>(beta, s.cols, static_cast<int>(s.dtype), 3);
      check(cudaGetLastError(), "fill");
      const double moved = 2.0 * static_cast<double>(bytes);  // read x + write y, for both
      const double copy_ms = median_ms([&] { check(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice), "copy"); },
                                       reps, ea, eb);
      const double copy_gbps = moved / (copy_ms * 1e-3) / 1e9;
      std::printf("%-10s %-5s %10lld %6lld %9.0f %10.4f %10.1f %8s\n", "copy", std::string(lnorm::name(s.dtype)).c_str(),
                  static_cast<long long>(s.rows), static_cast<long long>(s.cols), bytes / 1048576.0, copy_ms, copy_gbps, "100");
      const lnorm::Problem p = lnorm::make_problem(s.rows, s.cols, s.dtype, 1e-5, true, true);
      const lnorm::Tensors t{x, gamma, beta, y, nullptr, nullptr};
      struct Bench {
        const char* name;
        lnorm::cuda::Algorithm algorithm;
      };
      for (const Bench& k : {Bench{"cuda_warp", lnorm::cuda::Algorithm::warp}, Bench{"cuda_block", lnorm::cuda::Algorithm::block}}) {
        const char* kname = k.name;
        const lnorm::cuda::Algorithm algo = k.algorithm;
        const double ms = median_ms([&] { lnorm::cuda::launch_device(algo, p, t, nullptr); }, reps, ea, eb);
        check(cudaDeviceSynchronize(), kname);
        const double gbps = moved / (ms * 1e-3) / 1e9;
        std::printf("%-10s %-5s %10lld %6lld %9.0f %10.4f %10.1f %8.1f\n", kname, std::string(lnorm::name(s.dtype)).c_str(),
                    static_cast<long long>(s.rows), static_cast<long long>(s.cols), bytes / 1048576.0, ms, gbps,
                    100.0 * gbps / copy_gbps);
        results << (first ? "" : ",\n") << "    {\"kernel\": \"" << kname << "\", \"dtype\": \"" << lnorm::name(s.dtype)
                << "\", \"rows\": " << s.rows << ", \"cols\": " << s.cols << ", \"bytes_x\": " << bytes
                << ", \"median_ms\": " << ms << ", \"GBps\": " << gbps << ", \"copy_median_ms\": " << copy_ms
                << ", \"copy_GBps\": " << copy_gbps << ", \"pct_of_copy\": " << 100.0 * gbps / copy_gbps << "}";
        first = false;
      }
      check(cudaFree(x), "cudaFree");
      check(cudaFree(y), "cudaFree");
      check(cudaFree(gamma), "cudaFree");
      check(cudaFree(beta), "cudaFree");
    }
    std::ofstream out(out_path);
    out << "{\n  \"tool\": \"lnorm_gpu_bench\",\n  \"gpu\": \"" << json_escape(prop.name) << "\",\n  \"sm_count\": "
        << prop.multiProcessorCount << ",\n  \"l2_bytes\": " << prop.l2CacheSize << ",\n  \"cuda_driver_version\": "
        << driver << ",\n  \"cuda_runtime_version\": " << runtime << ",\n  \"reps\": " << reps
        << ",\n  \"bytes_counted\": \"x read + y written\",\n  \"gamma_beta\": true,\n  \"eps\": 1e-5,\n  \"results\": [\n"
        << results.str() << "\n  ]\n}\n";
    if (!out) throw std::runtime_error("cannot write " + out_path);
    std::printf("wrote %s\n", out_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lnorm_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
