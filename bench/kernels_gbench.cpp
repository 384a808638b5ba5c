// lnorm_gbench — every available kernel × dtype × shape (bench/shapes.txt), with the copies and oneDNN
// rows in the same run, single thread, as Google Benchmark benchmarks named KERNEL/DTYPE/ROWSxCOLS
// (RMSNorm's: KERNEL/rmsnorm/DTYPE/ROWSxCOLS, gamma and no beta, as `lnorm bench --op rmsnorm`).
// Google Benchmark's own flags apply (--benchmark_filter, --benchmark_format=json, ...), so its
// tools/compare.py can compare two runs. `lnorm bench` prints the same numbers as a table.
//   build/release/bench/lnorm_gbench --benchmark_filter=/f32/64x4096
#include <benchmark/benchmark.h>

#include "lnorm/bench.hpp"
#include "lnorm/registry.hpp"

#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace lnorm;
  using namespace lnorm::bench;
  std::vector<Entry> entries;
  for (const Shape& s : builtin_shapes(false)) {
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      for (const std::string& c : copy_names())
        if (copy_unavailable(c).empty()) entries.push_back({c, nullptr, d, s});
      if (onednn_unavailable(d).empty()) entries.push_back({"onednn", nullptr, d, s});
      for (Op op : kNormOps) {  // Add & Norm: not benchmarked yet
        for (const KernelInfo& k : registry()) {
          const Problem probe = with_op(make_problem(s.rows, s.cols, d, 1e-5, true, op == Op::layernorm), op);
          if (k.cautionary || unavailable_reason(k, probe)) continue;
          entries.push_back({std::string(k.name), &k, d, s, op});
        }
      }
    }
  }
  const Settings settings;
  register_entries(entries, settings);
  // Our defaults first (5 repetitions, medians), so the user's own --benchmark_* flags override them.
  std::vector<std::string> defaults = benchmark_flags(settings);
  std::vector<char*> args = {argv[0]};
  for (std::string& f : defaults) args.push_back(f.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int nargs = static_cast<int>(args.size());
  benchmark::Initialize(&nargs, args.data());
  if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
