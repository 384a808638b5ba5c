// A test case as a small, printable recipe (CaseSpec) and the data it stands for (Case).
//
// RapidCheck generates and shrinks the recipe — class, shape, axis, eps, affine kind, seed — and the
// values are drawn from it deterministically. Shrinking then means "fewer rows, a narrower row, a
// simpler class", the counterexample prints as one line, and a seed reproduces it exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "lnorm/format.hpp"
#include "lnorm/problem.hpp"

namespace lnorm::verify {

// Input classes (DESIGN.md "Verification"). Every run counts how many rows of each it generated.
enum class RowClass : int {
  normal,       // N(0, 1)·2^k
  uniform,      // U(−1, 1)·2^k
  offset,       // mean ±2^e, kappa = |mean|/std from 1 to 1e7
  constant,     // every element equal (any finite value, subnormals and ±0 included)
  tiny,         // var ≪ eps (eps > 0)
  huge,         // |x| near the format's largest finite value
  subnormal,    // every element subnormal or zero
  sparse,       // zeros with a few large outliers
  exact_stats,  // pairs x[i] + x[i+1] = 2·mean, mean a power of two: mean and var exact in any order
  bits,         // every element drawn by sign/exponent/mantissa over the whole finite range
  nonfinite,    // a normal row with NaN, +Inf or −Inf in it
  small,        // |x| from 1e-38 to 1e-15 (f32, bf16; f16: its subnormals and lowest binades; f64: 2^-1022..2^-500):
                // x² leaves the working format's range, and RMSNorm's outputs x/sqrt(ms + eps) are small with eps > 0
};
inline constexpr int kRowClassCount = 12;
std::string_view name(RowClass c);

enum class Affine : int { absent, identity, random, with_zeros };
std::string_view name(Affine a);

struct CaseSpec {
  DType dtype = DType::f32;
  std::vector<RowClass> row_classes;  // row r has class row_classes[r % size]
  std::vector<std::int64_t> shape;    // the N-d tensor; rows = prod(shape[:axis]), cols = prod(shape[axis:])
  int axis = 0;
  double eps = 1e-5;                  // already rounded to the kernel's eps format
  Affine gamma = Affine::absent, beta = Affine::absent;
  double log10_kappa = 0;             // offset rows: target kappa = 10^log10_kappa
  int misalign = 0;                   // elements by which x, gamma, beta, y sit off 64-byte alignment
  std::uint64_t data_seed = 0;
  Op op = Op::layernorm;
  std::optional<DType> param_dtype;   // gamma/beta storage; absent: dtype (f32 with f16/bf16 x: params)
  double gamma_offset = 0;            // y uses (C + gamma); already rounded to the kernel's format
  // Add & Norm: residual/h storage; absent: dtype (f32 with f16/bf16 x: flash-attn's residual_in_fp32).
  std::optional<DType> residual_dtype;
  // Backward: dy at the ends of its format's range (huge or tiny) in 2 cases of 16, chosen by data_seed
  // (materialize); false keeps dy at scales 2^-3..2^3 (the dy_linearity property's cases).
  bool dy_range_edges = true;
  DType params() const { return param_dtype.value_or(dtype); }
  DType residual() const { return residual_dtype.value_or(dtype); }

  std::int64_t rows() const;
  std::int64_t cols() const;
  // One line: "f32 offset kappa=1e4 shape=[2,17] axis=1 (2x17) eps=1e-05 gamma=random beta=absent misalign=3 seed=7",
  // then " op=rmsnorm", " params=f32", " gamma_offset=1", " residual=f32" where they are not LayerNorm's defaults,
  // and " dy=huge" / " dy=tiny" for a backward case whose dy is at a range edge.
  std::string describe() const;
};

// The values a spec stands for, as doubles exactly representable in spec.dtype.
//
// Add & Norm (spec.op add_*): x holds the values the norm's laws are about, and the kernel gets them
// as a sum: with `residual` empty, the harness splits each value exactly (kernel_inputs: the kernel's
// x and residual add up to it with no rounding, so h = x and every law of the norm applies unchanged);
// with `residual` given (the add_* properties), x and residual are the kernel's inputs as they stand
// and h is their rounded sum.
struct Case {
  CaseSpec spec;
  std::vector<double> x;      // rows*cols
  std::vector<double> residual;  // Add & Norm only: rows*cols values of spec.residual(), or empty (see above)
  std::vector<double> gamma;  // cols, or empty when absent (values of spec.params())
  std::vector<double> beta;   // cols, or empty when absent (values of spec.params())
  // Backward ops: the upstream gradient, rows*cols values of spec.dtype (N(0, 1)·2^k, k in [-3, 3] per
  // case, a quarter of the cases with some exact zeros); empty otherwise. beta's presence asks for dbeta.
  std::vector<double> dy;
  Problem problem(int threads = 1) const;
};

Case materialize(const CaseSpec& spec);

// One value by sign, exponent and mantissa, uniformly over exponents in [exp_lo, exp_hi] (clamped to
// the format; exponents below emin give subnormals, and exp_lo below that gives ±0 too). Unlike
// RapidCheck's own float generator this reaches subnormals, −0 and the largest binades.
double random_float_bits(std::mt19937_64& rng, const Format& f, int exp_lo, int exp_hi);

// One row of class c (n values of the format), for the given eps. op: what the row is for (RMSNorm's
// tiny rows are centred on 0, so that mean(x²) ≪ eps; LayerNorm's may sit anywhere).
std::vector<double> make_row(std::mt19937_64& rng, DType d, RowClass c, std::int64_t n, double eps,
                             double log10_kappa, Op op = Op::layernorm);

}  // namespace lnorm::verify
