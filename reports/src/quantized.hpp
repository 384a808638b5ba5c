// The precision report's quantized outputs (docs/cli.md "Quantized outputs"): for every kernel that writes them, on
// each forward norm and f32/f16/bf16 x, q's worst distance from y*/s in quanta, its correctly rounded fraction, the
// elements saturation decided, and the scales' worst distance from the exact ones — per format × scaling, on rows
// of normal data and of heavy-tailed data (x = z³: outliers beside tiny values, so the subnormal codes and the
// groups' spread are exercised). report.json's "quantized" array; render.py's "Quantized outputs" tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lnorm/kernel.hpp"

namespace lnorm::report {

// The format × scaling specs measured (tensor: the exact amax/qmax of the problem, so nothing saturates by choice).
std::vector<QuantSpec> quantized_specs();

// One row per kernel × op × dtype × spec × input, for the kernels that declare the quantized epilogue and run here.
nlohmann::json quantized_rows(const std::vector<const KernelInfo*>& kernels, const std::vector<Op>& forward_ops,
                              const std::vector<DType>& dtypes, bool quick, std::uint64_t seed, const std::string& machine);

}  // namespace lnorm::report
