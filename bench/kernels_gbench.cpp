// lnorm_gbench — Google Benchmark of every available kernel × dtype × shape, single thread, beside
// memcpy and oneDNN's layer_normalization_forward on the same bytes, in the same run. The numbers the
// kernel headers quote come from here until `lnorm bench` (issue 5) takes over:
//   OMP_NUM_THREADS=1 build/release/bench/lnorm_gbench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true --benchmark_filter=...   (one command line)
// bytes_per_second counts x read + y written (no gamma/beta: neither side uses an affine), so a kernel
// at memcpy's bytes_per_second moves data as fast as the memory system does.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <dnnl.hpp>

#include "lnorm/half.hpp"
#include "lnorm/registry.hpp"

namespace {

using lnorm::DType;

struct Shape {
  std::int64_t rows, cols;
};
// In cache (L2/LLC) and DRAM-sized shapes of issue 4.
constexpr Shape kShapes[] = {{256, 1024}, {64, 4096}, {1024, 768}, {16384, 4096}};
constexpr DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

std::vector<std::byte> random_data(DType d, std::int64_t count) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<std::byte> out(static_cast<std::size_t>(count) * lnorm::size_of(d));
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = normal(rng);
    if (d == DType::f32) std::memcpy(out.data() + i * 4, &v, 4);
    else if (d == DType::f16) { const auto h = lnorm::f16_from_float(v); std::memcpy(out.data() + i * 2, &h, 2); }
    else { const auto h = lnorm::bf16_from_float(v); std::memcpy(out.data() + i * 2, &h, 2); }
  }
  return out;
}

void set_counters(benchmark::State& state, const Shape& s, DType d) {
  const double bytes = 2.0 * static_cast<double>(s.rows * s.cols) * static_cast<double>(lnorm::size_of(d));
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["rows_per_second"] =
      benchmark::Counter(static_cast<double>(s.rows) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void bench_kernel(benchmark::State& state, const lnorm::KernelInfo* k, Shape s, DType d) {
  const auto x = random_data(d, s.rows * s.cols);
  std::vector<std::byte> y(x.size());
  std::vector<float> mean(static_cast<std::size_t>(s.rows)), rstd(mean.size());
  const lnorm::Problem p = lnorm::make_problem(s.rows, s.cols, d, 1e-5, false, false, 1);
  const lnorm::Tensors t{x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data()};
  for (auto _ : state) {
    k->run(p, t);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, s, d);
}

void bench_memcpy(benchmark::State& state, Shape s, DType d) {
  const auto x = random_data(d, s.rows * s.cols);
  std::vector<std::byte> y(x.size());
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, s, d);
}

void bench_onednn(benchmark::State& state, Shape s, DType d) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const memory::data_type dt = d == DType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
  const memory::desc md({s.rows, s.cols}, dt, memory::format_tag::ab);
  layer_normalization_forward::primitive_desc pd;
  try {
    pd = layer_normalization_forward::primitive_desc(
        layer_normalization_forward::desc(prop_kind::forward_inference, md, 1e-5f, normalization_flags::none), eng);
  } catch (const dnnl::error& e) {
    state.SkipWithError(("oneDNN declines: " + std::string(e.what())).c_str());
    return;
  }
  auto x = random_data(d, s.rows * s.cols);
  std::vector<std::byte> y(x.size());
  memory src(md, eng, x.data()), dst(md, eng, y.data());
  layer_normalization_forward prim(pd);
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    strm.wait();
    benchmark::ClobberMemory();
  }
  set_counters(state, s, d);
}

std::string label(const char* what, Shape s, DType d) {
  return std::string(what) + "/" + std::string(lnorm::name(d)) + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

}  // namespace

int main(int argc, char** argv) {
  for (const Shape& s : kShapes) {
    for (DType d : kDTypes) {
      benchmark::RegisterBenchmark(label("memcpy", s, d).c_str(), bench_memcpy, s, d)->UseRealTime();
      if (d != DType::f16) benchmark::RegisterBenchmark(label("onednn", s, d).c_str(), bench_onednn, s, d)->UseRealTime();
      for (const lnorm::KernelInfo& k : lnorm::registry()) {
        if (k.cautionary || unavailable_reason(k, lnorm::make_problem(s.rows, s.cols, d, 1e-5, false, false))) continue;
        benchmark::RegisterBenchmark(label(std::string(k.name).c_str(), s, d).c_str(), bench_kernel, &k, s, d)->UseRealTime();
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
