// Loading a normalization problem from .npy files and flags, with every check the CLI contract asks
// for: op, dtype rules (gamma/beta in x's dtype or f32 with 16-bit x), axis range, gamma/beta shape, eps,
// the gamma offset, outputs that are not inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lnorm/npy.hpp"
#include "lnorm/kernel.hpp"
#include "lnorm/operand_streams.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::cli {

// Bad input or usage: the CLI prints the message and exits 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Flags shared by run, reference and check.
struct ProblemFlags {
  std::string x, gamma, beta;
  int axis = -1;
  double eps = 1e-5;
  std::string dtype;  // empty: from x.npy
  int threads = 1;
  std::string op = "layernorm";
  double gamma_offset = 0;
  std::string residual;  // Add & Norm: given, the op is add_<op>
};

// --dir value: fwd or bwd; throws InputError "--dir D: expected fwd or bwd".
Direction dir_flag(const std::string& dir);
// --op value in --dir's direction (the one place both are read): the forward op of that name, or with
// Direction::bwd its backward. Throws InputError for a name lnorm does not know ("--op O: expected
// layernorm, rmsnorm, add_layernorm or add_rmsnorm"), a backward name given to --op, and a composition
// lnorm has no op for (Add & Norm's backward).
Op op_flag(const std::string& name, Direction dir = Direction::fwd);
// --op for a command that does not take Add & Norm yet (bench, select, report): a plain norm, or an
// InputError naming the command.
Op norm_op_flag(const std::string& name, const char* command);
// Refuses (InputError naming the flag) a statistic the op does not have: --mean with rmsnorm.
void check_stat_flags(Op op, const std::string& mean_path, const char* mean_flag = "--mean");

// The .npy descr that holds a dtype ('<u2' for bf16 bit patterns).
std::string descr_of(DType d);
// --kernel / --dtype values; throw InputError "--kernel K: no such kernel (have: ...)" or
// "--dtype D: expected f32, f64, f16 or bf16".
const KernelInfo& kernel_flag(const std::string& name);
DType dtype_flag(const std::string& name);
// Shape text like "4096x1024" or "2x3x5"; throws InputError naming `what`.
std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& what);
std::string shape_text(const std::vector<std::int64_t>& shape);

struct ProblemInputs {
  io::NpyReader x;
  std::optional<io::NpyReader> gamma, beta;
  std::optional<io::NpyReader> residual;  // Add & Norm: x's shape; x's dtype or f32 with 16-bit x
  std::vector<std::int64_t> shape;       // x's shape
  int axis = 0;                          // normalized to [0, rank)
  Problem problem;                       // rows × cols, op, dtype, param_dtype, eps and offset (kernel format), threads
  std::vector<std::byte> gamma_data, beta_data;  // cols elements each, or empty
  std::vector<std::int64_t> stats_shape() const;  // x.shape[:axis] + (1,)*(rank-axis)
};

ProblemInputs load_problem(const ProblemFlags& flags);
// The loaded inputs as the run's operands: x and the residual read by rows from their files, gamma and beta in memory.
void read_problem_inputs(OperandStreams& ops, ProblemInputs& in);

// An output file the command will write, with the flag that named it.
struct OutputPath {
  std::string path;
  std::string flag;
};
// Refuses, before any work is done, outputs that would destroy an input or each other, and outputs
// whose folder does not exist. Empty paths (optional outputs not asked for) are skipped.
void check_outputs(const std::vector<OutputPath>& outputs, const std::vector<std::string>& inputs);

// The row-chunk size that keeps roughly `bytes_budget` of data per chunk in memory.
std::int64_t rows_per_chunk(std::int64_t cols, std::size_t item_size, std::size_t bytes_budget = 4u << 20);

}  // namespace lnorm::cli

namespace lnorm::cli {
// A candidate's per-row statistic (--mean, --rstd) opened for reading: the stats dtype, shaped x.shape[:axis] + (1,)...
// or x.shape[:axis]; InputError naming the flag otherwise.
io::NpyReader open_stats_input(const std::string& path, const char* flag, const ProblemInputs& in);
// Writes text to path via a temporary file and a rename (no partial file on failure).
void write_text_atomically(const std::string& path, const std::string& text);
}  // namespace lnorm::cli
