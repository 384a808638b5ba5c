// quantized.hpp's rows.
#include "quantized.hpp"

#include <cmath>
#include <cstring>
#include <random>

#include "lnorm/operand_streams.hpp"
#include "lnorm/format.hpp"
#include "lnorm/quantize.hpp"

namespace lnorm::report {
namespace {

using nlohmann::json;

std::vector<std::byte> encoded(DType d, const std::vector<double>& v) {
  const Format f = format_of(d);
  std::vector<std::byte> out(v.size() * size_of(d));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t b = double_to_bits(f, round_to_format(f, v[i]));
    std::memcpy(out.data() + i * size_of(d), &b, size_of(d));
  }
  return out;
}

struct Input {
  const char* name;
  std::vector<double> x;
};

}  // namespace

std::vector<QuantSpec> quantized_specs() {
  // tensor scaling's scale is a placeholder: quantized_rows sets it to the exact tensor amax/qmax
  return {parse_quant_spec("fp8_e4m3", "tensor", 1.0), parse_quant_spec("fp8_e4m3", "row", std::nullopt),
          parse_quant_spec("fp8_e5m2", "group:128", std::nullopt), parse_quant_spec("int8", "row", std::nullopt),
          parse_quant_spec("fp8_e4m3", "mx", std::nullopt),
          parse_quant_spec("fp8_e4m3fnuz", "row", std::nullopt),  // ROCm's per-token FP8 (MI300)
          parse_quant_spec("fp4_e2m1", "mx", std::nullopt),       // MXFP4
          parse_quant_spec("fp4_e2m1", "nvfp4", std::nullopt)};   // NVFP4 (G: the tensor's own, resolved per input)
}

json quantized_rows(const std::vector<const KernelInfo*>& kernels, const std::vector<Op>& forward_ops,
                    const std::vector<DType>& dtypes, bool quick, std::uint64_t seed, const std::string& machine) {
  // Sizes: quick 4x1024 (a few seconds for every kernel); full 16x1024.
  const std::int64_t rows = quick ? 4 : 16, cols = 1024, n = rows * cols;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 38);
  std::normal_distribution<double> z;
  Input inputs[2] = {{"normal", std::vector<double>(static_cast<std::size_t>(n))}, {"heavy-tailed", std::vector<double>(static_cast<std::size_t>(n))}};
  for (double& v : inputs[0].x) v = 0.5 + z(rng);
  for (double& v : inputs[1].x) v = std::pow(z(rng), 3);
  std::vector<double> gamma(static_cast<std::size_t>(cols)), beta(static_cast<std::size_t>(cols));
  for (double& v : gamma) v = 1.0 + 0.2 * z(rng);
  for (double& v : beta) v = 0.1 * z(rng);
  json out = json::array();
  for (const Op op : forward_ops)
    for (const DType d : dtypes) {
      if (d == DType::f64) continue;  // quantized outputs take f32, f16 or bf16 x
      const bool has_beta = op.norm == Norm::layernorm;
      const Problem base = with_op(make_problem(rows, cols, d, 1e-5, true, has_beta), op);
      const auto g = encoded(d, gamma), b = encoded(d, beta);
      for (const Input& in : inputs) {
        const auto x = encoded(d, in.x);
        // The exact tensor amax/qmax: the largest exact row scale.
        for (QuantSpec spec : quantized_specs()) {
          if (spec.scaling_info().scale_given) {
            const QuantSpec row = parse_quant_spec(name(spec.format), "row", std::nullopt);
            std::vector<std::uint8_t> q(static_cast<std::size_t>(n));
            std::vector<float> s(static_cast<std::size_t>(rows));
            quantize_reference(set_quant(base, row), row, x.data(), nullptr, g.data(), has_beta ? b.data() : nullptr, rows, 1,
                               q.data(), s.data());
            float amax_over_qmax = 0;
            for (float v : s) amax_over_qmax = std::fmax(amax_over_qmax, v);
            spec.scale = amax_over_qmax > 0 ? amax_over_qmax : 1.0f;
          }
          spec = resolve_global_scale(base, spec, x.data(), nullptr, g.data(), has_beta ? b.data() : nullptr, rows, 1);
          const Problem p = set_quant(base, spec);
          for (const KernelInfo* k : kernels) {
            if (!k->takes.epilogues.contains(Epilogue::quantized) || unavailable_reason(*k, p)) continue;
            // The kernel's operands from the operand table: x, gamma, beta in place; q and its scales kept.
            std::vector<std::byte> q, scales;
            OperandStreams ops;
            ops.point(Operand::x, x.data()).point(Operand::gamma, g.data()).point(Operand::beta, has_beta ? b.data() : nullptr);
            ops.write(Operand::q, append_to(q)).write(Operand::scales, append_to(scales));
            ops.run(p, p.rows, {}, [&](const Problem& part, const Tensors& t) { k->run(part, t); });
            const QuantSummary m = measure_quantized(p, spec, x.data(), nullptr, g.data(), has_beta ? b.data() : nullptr,
                                                     reinterpret_cast<const std::uint8_t*>(q.data()),
                                                     scales.empty() ? nullptr : scales.data(), rows, 0, QuantBudget{}, 1);
            out.push_back({{"implementation", std::string(k->name)}, {"machine", machine}, {"op", std::string(name(op))},
                           {"dtype", std::string(name(d))}, {"quant", describe(spec)}, {"input", in.name},
                           {"elements", m.elements}, {"max_quanta", std::isfinite(m.max_ulp) ? json(m.max_ulp) : json(nullptr)},
                           {"correctly_rounded", m.correctly_rounded_fraction()}, {"saturated", m.saturated},
                           {"nonfinite_mismatches", m.nonfinite_mismatches},
                           {"scale_max", spec.has_scales() ? json(m.scale_max_ulp) : json(nullptr)},
                           {"scale_unit", spec.has_scales() ? std::string(spec.storage().unit) : std::string("f32 ulps")}});
          }
        }
      }
    }
  return out;
}

}  // namespace lnorm::report
