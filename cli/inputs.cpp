#include "inputs.hpp"

#include "lnorm/registry.hpp"
#include "lnorm/temp_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace lnorm::cli {

std::string descr_of(DType d) { return std::string(npy_descr(d)); }

std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& what) {
  std::vector<std::int64_t> shape;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v < 0)
      throw InputError(what + ": bad shape '" + text + "'; expected sizes joined by 'x', like 4096x1024");
    shape.push_back(v);
  }
  if (shape.empty()) throw InputError(what + ": empty shape");
  return shape;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s.empty() ? "scalar" : s;
}

const KernelInfo& kernel_flag(const std::string& name) {
  const KernelInfo* k = find_kernel(name);
  if (k) return *k;
  std::string msg = "--kernel ";
  msg += name;
  msg += ": no such kernel (have:";
  for (const KernelInfo& i : registry()) {
    msg += ' ';
    msg += i.name;
  }
  throw InputError(msg + ")");
}

Direction dir_flag(const std::string& dir) {
  if (dir == "fwd") return Direction::fwd;
  if (dir == "bwd") return Direction::bwd;
  throw InputError("--dir " + dir + ": expected fwd or bwd");
}

Op op_flag(const std::string& name, Direction dir) {
  const auto o = parse_op(name);
  if (!o) throw InputError("--op " + name + ": expected layernorm, rmsnorm, add_layernorm or add_rmsnorm (backward: --dir bwd)");
  if (o->direction == Direction::bwd)
    throw InputError("--op " + name + ": the backward is asked as --op " + std::string(lnorm::name(plain(o->norm))) + " --dir bwd");
  if (dir == Direction::fwd) return *o;
  Op bwd = *o;
  bwd.direction = Direction::bwd;
  if (!find_op(bwd)) {  // a composition without a row in lnorm/op.hpp's table
    std::string takes;
    for (Op b : kBackwardOps) takes += (takes.empty() ? "" : " and ") + std::string(lnorm::name(plain(b.norm)));
    throw InputError("--op " + name + " --dir bwd: " + (o->prologue == Prologue::residual_add ? "Add & Norm's backward" : name + "'s backward") +
                     " is not built (--dir bwd takes " + takes + ")");
  }
  return bwd;
}

Op norm_op_flag(const std::string& name, const char* command) {
  const Op o = op_flag(name);
  if (o.prologue == Prologue::residual_add)
    throw InputError("--op " + name + ": `lnorm " + command + "` does not take Add & Norm yet (run, reference, check, verify, bench and select do)");
  return o;
}

void check_stat_flags(Op op, const std::string& mean_path, const char* mean_flag) {
  if (op.norm != Norm::layernorm && !mean_path.empty())
    throw InputError(std::string(mean_flag) + ": " + std::string(name(op)) +
                     " has no mean output (it takes the mean as 0); drop " + mean_flag);
}

DType dtype_flag(const std::string& name) {
  const auto d = parse_dtype(name);
  if (!d) throw InputError("--dtype " + name + ": expected f32, f64, f16 or bf16");
  return *d;
}

namespace {

DType dtype_for(const io::NpyReader& x, const std::string& flag) {
  const std::string& descr = x.header().descr;
  if (!flag.empty()) {
    const DType d = dtype_flag(flag);
    if (descr_of(d) != descr)
      throw InputError(x.path() + ": holds '" + descr + "' but --dtype " + flag + " needs '" + descr_of(d) + "'");
    return d;
  }
  if (descr == "<f4") return DType::f32;
  if (descr == "<f8") return DType::f64;
  if (descr == "<f2") return DType::f16;
  if (descr == "<u2") throw InputError(x.path() + ": holds '<u2'; pass --dtype bf16 if these are bfloat16 bit patterns");
  // '|u1' / '|i1' are quantized outputs (--q) and mx scales, never an input to normalize.
  throw InputError(x.path() + ": holds '" + descr + "', a quantized output's dtype; x must be '<f4', '<f8', '<f2' or "
                   "'<u2' (bf16 bit patterns, with --dtype bf16)");
}

// The dtype gamma/beta are stored in: x's, or f32 ('<f4') with f16/bf16 x.
DType param_dtype_of(const io::NpyReader& x, DType x_dtype, io::NpyReader& r, const char* flag) {
  const std::string& descr = r.header().descr;
  if (descr == x.header().descr) return x_dtype;
  if (descr == "<f4" && (x_dtype == DType::f16 || x_dtype == DType::bf16)) return DType::f32;
  throw InputError(r.path() + ": " + flag + " holds '" + descr + "' but x holds '" + x.header().descr +
                   "' (" + std::string(name(x_dtype)) + "): gamma/beta are x's dtype, or '<f4' (f32) with f16/bf16 x");
}

std::vector<std::byte> load_affine(io::NpyReader& r, const char* flag, const std::vector<std::int64_t>& row_shape,
                                   std::int64_t cols) {
  const auto& s = r.header().shape;
  const bool same = s == row_shape || (s.size() == 1 && s[0] == cols);
  if (!same)
    throw InputError(r.path() + ": " + flag + " has shape " + shape_text(s) + " but the normalized dims of x are " +
                     shape_text(row_shape));
  std::vector<std::byte> data(static_cast<std::size_t>(cols) * r.header().item_size);
  r.read(0, cols, data.data());
  return data;
}

}  // namespace

std::vector<std::int64_t> ProblemInputs::stats_shape() const {
  std::vector<std::int64_t> s(shape.begin(), shape.begin() + axis);
  s.resize(shape.size(), 1);
  return s;
}

void read_problem_inputs(OperandStreams& ops, ProblemInputs& in) {
  ops.read(Operand::x, [&in](std::int64_t first, std::int64_t count, void* dst) { in.x.read(first, count, dst); });
  if (in.residual)
    ops.read(Operand::residual, [&in](std::int64_t first, std::int64_t count, void* dst) { in.residual->read(first, count, dst); });
  if (!in.gamma_data.empty()) ops.point(Operand::gamma, in.gamma_data.data());
  if (!in.beta_data.empty()) ops.point(Operand::beta, in.beta_data.data());
}

ProblemInputs load_problem(const ProblemFlags& f) {
  if (f.x.empty()) throw InputError("--x is required");
  if (!std::isfinite(f.eps) || f.eps < 0) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", f.eps);
    throw InputError(std::string("--eps: must be finite and >= 0 (got ") + got + ")");
  }
  if (f.threads < 1) throw InputError("--threads: must be >= 1");
  ProblemInputs in{io::NpyReader(f.x), {}, {}, {}, {}, 0, {}, {}, {}};
  in.shape = in.x.header().shape;
  const DType dtype = dtype_for(in.x, f.dtype);
  const int rank = static_cast<int>(in.shape.size());
  if (rank == 0) throw InputError(f.x + ": is a 0-d scalar; LayerNorm needs at least one dimension");
  if (f.axis < -rank || f.axis >= rank)
    throw InputError("--axis: " + std::to_string(f.axis) + " is out of range for " + f.x + " of rank " +
                     std::to_string(rank) + " (valid: " + std::to_string(-rank) + " .. " + std::to_string(rank - 1) + ")");
  in.axis = f.axis < 0 ? f.axis + rank : f.axis;
  std::int64_t rows = 1, cols = 1;
  for (int i = 0; i < rank; ++i) (i < in.axis ? rows : cols) *= in.shape[static_cast<std::size_t>(i)];
  if (cols == 0) throw InputError(f.x + ": the normalized dims (from axis " + std::to_string(in.axis) + " on) have zero width");
  const std::vector<std::int64_t> row_shape(in.shape.begin() + in.axis, in.shape.end());
  Op op = op_flag(f.op);
  std::optional<DType> residual_dtype;
  if (!f.residual.empty()) {  // Add & Norm: --op names the norm (or its add_ form)
    op = Op{.norm = op.norm, .prologue = Prologue::residual_add};
    in.residual.emplace(f.residual);
    const auto& rh = in.residual->header();
    if (rh.shape != in.shape)
      throw InputError(f.residual + ": --residual has shape " + shape_text(rh.shape) + " but x has shape " + shape_text(in.shape));
    if (rh.descr == in.x.header().descr) residual_dtype = dtype;
    else if (rh.descr == "<f4" && (dtype == DType::f16 || dtype == DType::bf16)) residual_dtype = DType::f32;
    else
      throw InputError(f.residual + ": --residual holds '" + rh.descr + "' but x holds '" + in.x.header().descr + "' (" +
                       std::string(name(dtype)) + "): the residual is x's dtype, or '<f4' (f32) with f16/bf16 x");
  } else if (op.prologue == Prologue::residual_add) {
    throw InputError("--op " + f.op + ": needs --residual (h = x + residual, then the norm of h)");
  }
  std::optional<DType> param_dtype;
  if (!f.gamma.empty()) {
    in.gamma.emplace(f.gamma);
    param_dtype = param_dtype_of(in.x, dtype, *in.gamma, "gamma");
    in.gamma_data = load_affine(*in.gamma, "gamma", row_shape, cols);
  }
  if (!f.beta.empty()) {
    in.beta.emplace(f.beta);
    const DType b = param_dtype_of(in.x, dtype, *in.beta, "beta");
    if (param_dtype && b != *param_dtype)
      throw InputError(f.beta + ": beta holds '" + in.beta->header().descr + "' but gamma holds '" +
                       in.gamma->header().descr + "': gamma and beta share one dtype");
    param_dtype = b;
    in.beta_data = load_affine(*in.beta, "beta", row_shape, cols);
  }
  if (!std::isfinite(f.gamma_offset)) throw InputError("--gamma-offset: must be finite");
  if (f.gamma_offset != 0 && f.gamma.empty())
    throw InputError("--gamma-offset: needs --gamma (y uses gamma-offset + gamma; without gamma the weight is 1)");
  in.problem = with_op(make_problem(rows, cols, dtype, f.eps, !f.gamma.empty(), !f.beta.empty(), f.threads), op);
  in.problem = set_params(in.problem, param_dtype.value_or(dtype), f.gamma_offset);
  if (residual_dtype) in.problem = set_residual(in.problem, *residual_dtype);
  return in;
}

void check_outputs(const std::vector<OutputPath>& outputs, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [out, flag] = outputs[i];
    if (out.empty()) continue;
    const fs::path parent = fs::path(out).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec))
      throw InputError(flag + ": " + out + ": cannot create output file: " + parent.string() +
                       (fs::exists(parent, ec) ? " is not a folder" : ": folder does not exist"));
    // Caught here rather than when the finished file's rename fails, after all the work.
    if (fs::is_directory(out, ec)) throw InputError(flag + ": " + out + " is a folder, not an output file");
    for (const auto& in : inputs)
      if (!in.empty() && fs::exists(out, ec) && fs::equivalent(out, in, ec))
        throw InputError(flag + ": " + out + " is also an input; refusing to overwrite it");
    for (std::size_t j = 0; j < i; ++j)
      if (outputs[j].path == out || (fs::exists(out, ec) && fs::equivalent(outputs[j].path, out, ec)))
        throw InputError(flag + ": " + out + " is also the " + outputs[j].flag + " output; give each output its own file");
  }
}

std::int64_t rows_per_chunk(std::int64_t cols, std::size_t item_size, std::size_t bytes_budget) {
  const auto row_bytes = static_cast<std::size_t>(cols) * item_size;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes_budget / std::max<std::size_t>(row_bytes, 1)));
}

}  // namespace lnorm::cli

namespace lnorm::cli {

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw InputError(path + ": cannot create output file: " + std::strerror(errno));
  // Removed by the signal handlers until it is renamed into place (lnorm/temp_files.hpp).
  const struct Registered {
    int slot;
    ~Registered() { io::unregister_temp(slot); }
  } registered{io::register_temp(tmp)};
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw InputError(path + ": write failed: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot rename into place: " + std::strerror(errno));
  }
}

io::NpyReader open_stats_input(const std::string& path, const char* flag, const ProblemInputs& in) {
  io::NpyReader r(path);
  const std::string want = descr_of(stats_dtype(in.problem.dtype));
  if (r.header().descr != want)
    throw InputError(path + ": " + flag + " holds '" + r.header().descr + "' but the stats dtype is '" + want + "'");
  const std::vector<std::int64_t> lead(in.shape.begin(), in.shape.begin() + in.axis);
  if (r.header().shape != in.stats_shape() && r.header().shape != lead)
    throw InputError(path + ": " + flag + " has shape " + shape_text(r.header().shape) + "; expected " +
                     shape_text(in.stats_shape()) + " (one value per row)");
  return r;
}

}  // namespace lnorm::cli
