// lnorm select's rules (bench/include/lnorm/select.hpp) on made-up kernels and timings: which kernels
// qualify on verified accuracy, and which of those is recommended.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "lnorm/select.hpp"

using namespace lnorm;
using namespace lnorm::bench;

namespace {

std::optional<std::string> runs(const Problem&) { return std::nullopt; }
std::optional<std::string> never(const Problem&) { return "needs a GPU"; }
void nothing(const Problem&, const Tensors&) {}

const DTypeSet kF32{DType::f32};
const std::vector<KernelInfo> kKernels = {
    {"exact", "", {.dtypes = kF32, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &runs, false},             // a = 0.5, no kappa term
    {"fast", "", {.dtypes = kF32, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &runs, false},              // a = 6, no kappa term
    {"kappa", "", {.dtypes = kF32, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &runs, false},             // a = 4, b = 1
    {"broken", "", {.dtypes = kF32, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &runs, false},            // fails its own accuracy property
    {"wrong", "", {.dtypes = kF32, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &runs, true},       // cautionary
    {"gpu", "", {.dtypes = kF32, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &never, false},              // cannot run here
    {"f16_only", "", {.dtypes = DTypeSet{DType::f16}, .forward_norms = {Norm::layernorm}}, &nothing, nullptr, nullptr, &runs, false},
    {"rms_only", "", {.dtypes = kF32, .forward_norms = {Norm::rmsnorm}}, &nothing, nullptr, nullptr, &runs, false},
};

Accuracy accuracy_of(const KernelInfo& k) {
  const std::string n(k.name);
  if (n == "exact") return {0.5, 0, std::nullopt};
  if (n == "fast") return {6, 0, std::nullopt};
  if (n == "kappa") return {4, 1, std::nullopt};
  if (n == "broken") return {8, 1, std::string("E[x^2] - E[x]^2 cancels")};
  return {8, 1, std::nullopt};
}

Result timed(const KernelInfo& k, const SelectRequest& rq, double gbps) {
  Result r;
  r.entry = {std::string(k.name), &k, rq.dtype, rq.shape};
  r.bytes_per_second = gbps * 1e9;
  return r;
}

std::map<std::string, const Candidate*> by_name(const std::vector<Candidate>& cs) {
  std::map<std::string, const Candidate*> m;
  for (const Candidate& c : cs) m[std::string(c.kernel->name)] = &c;
  return m;
}

}  // namespace

TEST_CASE("select: kernels qualify on verified accuracy, and the rest say why", "[bench][select]") {
  SelectRequest rq{Shape{64, 768}, DType::f32, 6};
  const std::vector<Candidate> cs = qualify(kKernels, rq, &accuracy_of);
  const auto c = by_name(cs);
  CHECK(cs.size() == 6);  // f16_only does not support f32, rms_only not LayerNorm: not candidates at all
  CHECK(c.at("exact")->status.empty());
  CHECK(c.at("fast")->status.empty());  // a = 6 <= --max-ulp 6
  CHECK(c.at("kappa")->status == "over budget");  // a kappa term: no flat bound
  CHECK(c.at("kappa")->reason == "budget 4 + 1*kappa scaled ulps is over --max-ulp 6");
  CHECK(c.at("broken")->status == "over budget");
  CHECK(c.at("broken")->reason == "fails its own accuracy property: E[x^2] - E[x]^2 cancels");
  CHECK(c.at("wrong")->status == "excluded");
  CHECK(c.at("gpu")->status == "unavailable");
  CHECK(c.at("gpu")->reason == "needs a GPU");
  // No --max-ulp: every kernel that passes its own accuracy property qualifies, kappa term or not.
  rq.max_ulp = -1;
  // (by_name points into the vector qualify returns: keep the vector alive while the pointers are read.)
  const std::vector<Candidate> loose = qualify(kKernels, rq, &accuracy_of);
  CHECK(by_name(loose).at("kappa")->status.empty());
  // --max-ulp 1: only the exact one.
  rq.max_ulp = 1;
  const std::vector<Candidate> strict_list = qualify(kKernels, rq, &accuracy_of);
  const auto strict = by_name(strict_list);
  CHECK(strict.at("exact")->status.empty());
  CHECK(strict.at("fast")->status == "over budget");
}

TEST_CASE("select: the qualified kernels are timed beside the copies", "[bench][select]") {
  const SelectRequest rq{Shape{64, 768}, DType::f32, 6};
  const std::vector<Entry> e = entries_to_time(qualify(kKernels, rq, &accuracy_of), rq);
  REQUIRE(e.size() == 2 + copy_names().size());
  CHECK(e[0].what == "exact");
  CHECK(e[1].what == "fast");
  CHECK(is_copy(e[2].what));
}

TEST_CASE("select: the fastest qualified kernel is chosen, the others are slower by a stated factor", "[bench][select]") {
  const SelectRequest rq{Shape{64, 768}, DType::f32, 6};
  std::vector<Candidate> cs = qualify(kKernels, rq, &accuracy_of);
  const std::vector<Result> results = {timed(kKernels[0], rq, 10), timed(kKernels[1], rq, 25),
                                       timed(kKernels[2], rq, 99)};  // kappa is fastest but did not qualify
  const Candidate* best = rank(cs, results, rq);
  REQUIRE(best != nullptr);
  CHECK(best->kernel->name == "fast");
  const auto c = by_name(cs);
  CHECK(c.at("fast")->status == "chosen");
  CHECK(c.at("fast")->gb_per_second == 25);
  CHECK(c.at("exact")->status == "slower");
  CHECK(c.at("exact")->reason == "2.50x slower than fast");
  CHECK(c.at("kappa")->status == "over budget");
  CHECK(c.at("kappa")->gb_per_second == 0);  // never timed, never shown as a speed
}

TEST_CASE("select: a qualified kernel the run skipped is unavailable, and nothing qualified gives none", "[bench][select]") {
  SelectRequest rq{Shape{64, 768}, DType::f32, 6};
  std::vector<Candidate> cs = qualify(kKernels, rq, &accuracy_of);
  Result skipped = timed(kKernels[1], rq, 0);
  skipped.skipped = "declined";
  const Candidate* best = rank(cs, {timed(kKernels[0], rq, 10), skipped}, rq);
  REQUIRE(best != nullptr);
  CHECK(best->kernel->name == "exact");
  CHECK(by_name(cs).at("fast")->status == "unavailable");
  CHECK(by_name(cs).at("fast")->reason == "declined");
  rq.max_ulp = 0.1;
  std::vector<Candidate> none = qualify(kKernels, rq, &accuracy_of);
  CHECK(rank(none, {}, rq) == nullptr);
  CHECK(entries_to_time(none, rq).size() == copy_names().size());
}

TEST_CASE("select: only kernels that implement the op asked are candidates", "[bench][select]") {
  const SelectRequest rq{Shape{64, 768}, DType::f32, -1, Op::rmsnorm};
  const std::vector<Candidate> cs = qualify(kKernels, rq, &accuracy_of);
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].kernel->name == "rms_only");
  CHECK(cs[0].status.empty());
  const std::vector<Entry> e = entries_to_time(cs, rq);
  CHECK(e[0].op == Op::rmsnorm);
}

TEST_CASE("select: with a quantized output only the kernels that write q are candidates, timed and ranked writing it", "[bench][select]") {
  const std::vector<KernelInfo> ks = {
      {"plain", "", {.dtypes = kF32, .forward_norms = {Norm::rmsnorm}}, &nothing, nullptr, nullptr, &runs, false},
      {"quant", "", {.dtypes = kF32, .forward_norms = {Norm::rmsnorm}, .epilogues = kWithQuant}, &nothing, nullptr, nullptr, &runs, false},
  };
  const QuantSpec spec{QuantFormat::fp8_e4m3, Scaling::row, 0, 0};
  SelectRequest rq{Shape{64, 768}, DType::f32, -1, Op::rmsnorm, spec};
  std::vector<Candidate> cs = qualify(ks, rq, &accuracy_of);
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].kernel->name == "quant");
  const std::vector<Entry> e = entries_to_time(cs, rq);
  CHECK(e[0].op == quantized(Op::rmsnorm));
  CHECK(describe(e[0].quant) == "fp8_e4m3/row");
  // A time of the same kernel writing y (not q) is not the one asked for.
  Result y_time = timed(ks[1], rq, 20.0);
  y_time.entry.op = Op::rmsnorm;
  Result q_time = timed(ks[1], rq, 5.0);
  q_time.entry.op = quantized(Op::rmsnorm);
  const Candidate* best = rank(cs, {y_time, q_time}, rq);
  REQUIRE(best != nullptr);
  CHECK(best->gb_per_second == 5.0);
}
