// `lnorm gen`: writes a LayerNorm input (x, and optionally gamma/beta) with a chosen row
// distribution, for the demo, tests, and users who want a quick case for `check`.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "commands.hpp"
#include "flag_values.hpp"
#include "inputs.hpp"
#include "output_files.hpp"
#include "lnorm/format.hpp"
#include "lnorm/npy.hpp"

namespace lnorm::cli {
namespace {

struct GenFlags {
  std::string out, gamma_out, beta_out, shape = "64x1024", dtype = "f32", dist = "normal";
  double offset = 1e4, scale = 1;
  int axis = -1;
  std::uint64_t seed = 1;
};

// Values are drawn in double and rounded once to the storage format; written under the file's temporary name,
// committed with the others (commit_together: x, gamma and beta all, or none).
void write_tensor(std::vector<io::NpyWriter>& files, const std::string& path, DType d, const std::vector<std::int64_t>& shape,
                  const std::vector<double>& v) {
  const Format fmt = format_of(d);
  std::vector<std::byte> bytes(v.size() * size_of(d));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t b = double_to_bits(fmt, round_to_format(fmt, v[i]));
    std::memcpy(bytes.data() + i * size_of(d), &b, size_of(d));  // little-endian host
  }
  files.emplace_back(path, descr_of(d), shape).write(bytes.data(), bytes.size());
}

int run_gen(const GenFlags& f) {
  check_outputs({{f.out, "--out"}, {f.gamma_out, "--gamma-out"}, {f.beta_out, "--beta-out"}}, {});
  const auto d = parse_dtype(f.dtype);
  if (!d) throw InputError("--dtype: unknown dtype '" + f.dtype + "'; known: f32, f64, f16, bf16");
  const auto shape = parse_shape(f.shape, "--shape");
  const int rank = static_cast<int>(shape.size());
  if (f.axis < -rank || f.axis >= rank) throw InputError("--axis: out of range for --shape " + f.shape);
  const int axis = f.axis < 0 ? f.axis + rank : f.axis;
  std::int64_t n = 1, cols = 1;
  for (int i = 0; i < rank; ++i) {
    n *= shape[static_cast<std::size_t>(i)];
    if (i >= axis) cols *= shape[static_cast<std::size_t>(i)];
  }
  if (n > (std::int64_t{1} << 31)) throw InputError("--shape: gen writes at most 2^31 elements");
  std::mt19937_64 rng(f.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (f.dist == "normal") x[i] = f.scale * normal(rng);
    else if (f.dist == "uniform") x[i] = f.scale * uniform(rng);
    else if (f.dist == "offset") x[i] = f.offset + f.scale * normal(rng);
    else if (f.dist == "constant") x[i] = f.offset;
    else throw InputError("--dist: unknown distribution '" + f.dist + "'; known: normal, uniform, offset, constant");
  }
  std::vector<io::NpyWriter> files;
  files.reserve(3);  // no reallocation: commit_together holds pointers to them
  write_tensor(files, f.out, *d, shape, x);
  const std::vector<std::int64_t> row_shape(shape.begin() + axis, shape.end());
  if (!f.gamma_out.empty()) {
    std::vector<double> g(static_cast<std::size_t>(cols));
    for (auto& v : g) v = 1.0 + 0.25 * normal(rng);
    write_tensor(files, f.gamma_out, *d, row_shape, g);
  }
  if (!f.beta_out.empty()) {
    std::vector<double> b(static_cast<std::size_t>(cols));
    for (auto& v : b) v = 0.1 * normal(rng);
    write_tensor(files, f.beta_out, *d, row_shape, b);
  }
  std::vector<io::NpyWriter*> all;
  for (io::NpyWriter& w : files) all.push_back(&w);
  commit_together(all);
  return 0;
}

}  // namespace

void add_gen(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<GenFlags>();
  auto* cmd = app.add_subcommand("gen", "Write a generated LayerNorm input (x, gamma, beta) as .npy");
  cmd->add_option("--out", f->out, "x output (.npy)")->required();
  cmd->add_option("--gamma-out", f->gamma_out, "Also write gamma ~ 1 + 0.25·N(0,1) here");
  cmd->add_option("--beta-out", f->beta_out, "Also write beta ~ 0.1·N(0,1) here");
  cmd->add_option("--shape", f->shape, "Shape, like 64x1024 or 2x3x128")->default_val("64x1024");
  cmd->add_option("--axis", f->axis, "First normalized dim (for gamma/beta's shape)")->default_val(-1);
  cmd->add_option("--dtype", f->dtype, "f32, f64, f16 or bf16")->default_val("f32");
  cmd->add_option("--dist", f->dist, "normal, uniform, offset (offset + scale·N(0,1)) or constant (= offset)")
      ->default_val("normal");
  cmd->add_option("--offset", f->offset, "Row offset for --dist offset/constant (kappa ≈ offset/scale)")->default_val(1e4);
  cmd->add_option("--scale", f->scale, "Spread of the values")->default_val(1.0);
  cmd->add_option("--seed", f->seed, "Random seed")->check(seed_number())->default_val(1);
  cmd->callback([f, &exit_code] { exit_code = run_gen(*f); });
}

}  // namespace lnorm::cli
