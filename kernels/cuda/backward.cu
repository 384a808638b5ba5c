// The backward of cuda_warp and cuda_block (layernorm_bwd, rmsnorm_bwd): welford's careful backward in f64
// (backward_row.hpp has the arithmetic and why), one team per chunk of rows (launch_config.hpp's
// plan_backward_launch: a group of lanes for cuda_warp's narrow rows, a block otherwise).
//   backward_rows     per row: pass A (Σ(x − x0)), pass B (Σd², Σg, Σg·d), pass B2 where one element dominates
//                     Σd² (the others' sums: backward_row.hpp), pass C (dx, and dy·xhat and dy added to
//                     the chunk's f64 partials of dgamma and dbeta, each thread on its own columns, rows in order)
//   reduce_partials   dgamma_j, dbeta_j = the chunks' partials summed in chunk order, rounded once to the
//                     parameters' dtype
// No atomics: the bits depend on the chunk size only (tests/cuda_emulation.hpp computes them on the CPU). Thread
// t of a team of S reads accesses t, t + S, ... of kVec elements (16 bytes when every row starts aligned):
// coalesced. The row is read three times from global memory (the forward keeps it in registers or shared
// memory; here x and dy are 2-4x the bytes and L2 holds the rows in flight). Compiled with --fmad=false
// (backward_row.hpp). Speed on H200: unmeasured (bench/gpu/run_on_device.sh measures it).
#include "backward_row.hpp"
#include "launch.cuh"
#include "row_math.cuh"

namespace lnorm::cuda {
namespace {

// f64 to T rounded once (cvt.rn: f32, f16 and bf16 directly from f64), as lnorm/half.hpp's from_double.
template <class T>
__device__ __forceinline__ T from_f64(double v);
template <>
__device__ __forceinline__ float from_f64<float>(double v) { return __double2float_rn(v); }
template <>
__device__ __forceinline__ __half from_f64<__half>(double v) { return __double2half(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f64<__nv_bfloat16>(double v) { return __double2bfloat16(v); }

// The sum over a team of each thread's v, the same in every thread: xor butterflies within a group of `size`
// lanes; for a block, xor butterflies within each warp and the warps' sums folded in warp order (scratch: 32
// doubles of shared memory).
struct GroupTeam {
  unsigned mask;
  int size;
  __device__ __forceinline__ double sum(double v) const {
    for (int o = size / 2; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o);
    return v;
  }
};
struct BlockTeam {
  double* scratch;
  __device__ __forceinline__ double sum(double v) const {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
    __syncthreads();  // the previous sum's readers are done with scratch
    if ((threadIdx.x & 31) == 0) scratch[warp] = v;
    __syncthreads();
    double t = scratch[0];
    for (int w = 1; w < warps; ++w) t += scratch[w];
    return t;
  }
};

// w: C + gamma staged in f64 by the host (cols), or null (weight 1). part_g/part_b: chunks x n, zeroed, or null.
template <class T, int kVec, bool kBlock>
__global__ void backward_rows(const T* __restrict__ x, const T* __restrict__ dy, const double* __restrict__ w,
                                T* __restrict__ dx, double* __restrict__ part_g, double* __restrict__ part_b, std::int64_t rows,
                                std::int64_t n, int team_size, float eps, bool centred) {
  __shared__ double scratch[32];
  const int t = kBlock ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x) & (team_size - 1);
  const int teams_per_block = kBlock ? 1 : static_cast<int>(blockDim.x) / team_size;
  const int team_in_block = kBlock ? 0 : static_cast<int>(threadIdx.x) / team_size;
  const int warp_lane = static_cast<int>(threadIdx.x) & 31;
  // Shuffles name only this group's lanes: groups of one warp may leave the chunk loop at different times.
  const unsigned mask = team_size >= 32 ? 0xffffffffu : ((1u << team_size) - 1u) << (warp_lane & ~(team_size - 1));
  const auto team_sum = [&](double v) {
    if constexpr (kBlock) return BlockTeam{scratch}.sum(v);
    else return GroupTeam{mask, team_size}.sum(v);
  };
  const std::int64_t accesses = n / kVec;  // kVec divides n whenever kVec > 1 (launch_config)
  const std::int64_t chunks = (rows + kBackwardChunkRows - 1) / kBackwardChunkRows;  // launch_config's backward_chunks
  for (std::int64_t chunk = static_cast<std::int64_t>(blockIdx.x) * teams_per_block + team_in_block; chunk < chunks;
       chunk += static_cast<std::int64_t>(gridDim.x) * teams_per_block) {
    const std::int64_t end = (chunk + 1) * kBackwardChunkRows < rows ? (chunk + 1) * kBackwardChunkRows : rows;
    for (std::int64_t row = chunk * kBackwardChunkRows; row < end; ++row) {
      const T* xr = x + row * n;
      const T* dyr = dy + row * n;
      const double x0 = centred ? static_cast<double>(dev::to_f32(xr[0])) : 0.0;
      double s = 0;
      for (std::int64_t i = t; i < accesses; i += team_size) {
        float e[kVec];
        dev::load_vec<kVec>(xr + i * kVec, e);
#pragma unroll
        for (int k = 0; k < kVec; ++k) bwdrow::add_a(s, e[k], x0);
      }
      s = team_sum(s);
      const double m = bwdrow::mean_less_x0(s, n, centred);
      // f(x, dy, column) for each of this thread's elements of the row, in its access order (passes B, B2, C).
      const auto each_element = [&](auto f) {
        for (std::int64_t i = t; i < accesses; i += team_size) {
          float e[kVec], d[kVec];
          dev::load_vec<kVec>(xr + i * kVec, e);
          dev::load_vec<kVec>(dyr + i * kVec, d);
#pragma unroll
          for (int k = 0; k < kVec; ++k) f(e[k], d[k], i * kVec + k);
        }
      };
      bwdrow::SumsB b;
      each_element([&](float e, float d, std::int64_t col) { bwdrow::add_b(b, e, d, w ? w[col] : 1.0, x0, m); });
      b.q = team_sum(b.q);
      b.g = team_sum(b.g);
      b.gd = team_sum(b.gd);
      bwdrow::Coefs c = bwdrow::coefs(x0, m, s, b, n, eps, centred);
      // Pass B2 where an element dominates q (every thread of the team sees the same sum: no divergent barrier).
      if (team_sum(bwdrow::dominates(b.d2max, c) ? 1.0 : 0.0) > 0) {
        bwdrow::SumsRest r;
        each_element([&](float e, float d, std::int64_t col) { bwdrow::add_rest(r, e, d, w ? w[col] : 1.0, c); });
        r.q = team_sum(r.q);
        r.t = team_sum(r.t);
        bwdrow::with_rest(c, r);
      }
      T* dxr = dx + row * n;
      double* pg = part_g ? part_g + chunk * n : nullptr;
      double* pb = part_b ? part_b + chunk * n : nullptr;
      each_element([&](float e, float d, std::int64_t col) {
        double xhat;
        dxr[col] = from_f64<T>(bwdrow::dx_value(e, d, w ? w[col] : 1.0, c, xhat));
        if (pg) pg[col] += static_cast<double>(d) * xhat;
        if (pb) pb[col] += static_cast<double>(d);
      });
    }
  }
}

template <class Out>
__global__ void reduce_partials(const double* __restrict__ part, Out* __restrict__ out, std::int64_t chunks, std::int64_t n) {
  for (std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < n;
       col += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double s = part[col];
    for (std::int64_t c = 1; c < chunks; ++c) s += part[c * n + col];
    out[col] = from_f64<Out>(s);
  }
}

template <class T, int kVec>
void launch_rows(const LaunchConfig& c, const Problem& p, const Tensors& t, double* part_g, double* part_b, cudaStream_t stream) {
  const bool block = c.strategy == Strategy::block_per_row;
  const auto go = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(c.grid), c.block_threads, 0, stream>>>(
        static_cast<const T*>(t.x), static_cast<const T*>(t.dy), static_cast<const double*>(p.has_gamma ? t.gamma : nullptr),
        static_cast<T*>(t.dx), part_g, part_b, p.rows, p.cols, c.threads_per_row, static_cast<float>(p.eps), p.op.norm == Norm::layernorm);
  };
  if (block) go(&backward_rows<T, kVec, true>);
  else go(&backward_rows<T, kVec, false>);
}

template <class T>
void launch_typed(const LaunchConfig& c, const Problem& p, const Tensors& t, double* part_g, double* part_b, cudaStream_t stream) {
  constexpr int kVecElems = 16 / sizeof(T);
  if (c.vec == kVecElems) return launch_rows<T, kVecElems>(c, p, t, part_g, part_b, stream);
  if (c.vec == 1) return launch_rows<T, 1>(c, p, t, part_g, part_b, stream);
  throw_internal("CUDA backward: no instance for vector width " + std::to_string(c.vec));
}

// 256 threads per block for the column sums, one thread per column (coalesced: a warp reads 32 consecutive
// columns of one chunk).
constexpr int kReduceThreads = 256;

template <class T>
void launch_reduce(const Problem& p, const double* part, void* out, cudaStream_t stream) {
  const std::int64_t chunks = backward_chunks(p.rows);
  const auto blocks = static_cast<unsigned>((p.cols + kReduceThreads - 1) / kReduceThreads);
  if (p.param_dtype == DType::f32) reduce_partials<float><<<blocks, kReduceThreads, 0, stream>>>(part, static_cast<float*>(out), chunks, p.cols);
  else reduce_partials<T><<<blocks, kReduceThreads, 0, stream>>>(part, static_cast<T*>(out), chunks, p.cols);
}

}  // namespace

void launch_backward(const LaunchConfig& c, const Problem& p, const Tensors& t, double* part_g, double* part_b, cudaStream_t stream) {
  const std::size_t part_bytes = static_cast<std::size_t>(backward_chunks(p.rows)) * static_cast<std::size_t>(p.cols) * sizeof(double);
  if (part_g) check(cudaMemsetAsync(part_g, 0, part_bytes, stream), "cudaMemsetAsync(dgamma partials)");
  if (part_b) check(cudaMemsetAsync(part_b, 0, part_bytes, stream), "cudaMemsetAsync(dbeta partials)");
  const auto rows_then_reduce = [&](auto tag) {
    using T = decltype(tag);
    launch_typed<T>(c, p, t, part_g, part_b, stream);
    if (part_g) launch_reduce<T>(p, part_g, t.dgamma, stream);
    if (part_b) launch_reduce<T>(p, part_b, t.dbeta, stream);
  };
  switch (p.dtype) {
    case DType::f32: return rows_then_reduce(float{});
    case DType::f16: return rows_then_reduce(__half{});
    case DType::bf16: return rows_then_reduce(__nv_bfloat16{});
    case DType::f64: break;
  }
  throw_internal("CUDA backward: f64 is not offered");
}

}  // namespace lnorm::cuda
