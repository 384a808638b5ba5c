// Specifications for the pieces of the property suite (property_tests/): the float and row
// generators make the inputs they claim, the harness catches out-of-bounds and missing writes, the
// budget file is strict, and the driver's verdicts (fail, expected failure, XPASS, mistrusted) mean
// what they say.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "lnorm/cases.hpp"
#include "lnorm/harness.hpp"
#include "properties.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/verify.hpp"
#include "mutants.hpp"

using namespace lnorm;
using namespace lnorm::verify;

namespace {

const char* kOneSection = R"(
[k.f32]
y = { a = 2, b = 1, reason = "r" }
mean = { ulp = 3, reason = "r" }
rstd = { ulp = 4, reason = "r" }
exact_mean = { value = true, reason = "r" }
[k.f32.expected_failures]
accuracy = "known"
)";

// A kernel that writes one element before y: the guard region must catch it.
void writes_before_y(const Problem& p, const Tensors& t) {
  find_kernel("welford")->run(p, t);
  static_cast<float*>(t.y)[-1] = 1.0f;
}
// A kernel that never writes the last y element.
void skips_last_y(const Problem& p, const Tensors& t) {
  const std::uint32_t keep_bits = 0;
  float* y = static_cast<float*>(t.y);
  const float last = y[p.elements() - 1];
  find_kernel("welford")->run(p, t);
  std::memcpy(&y[p.elements() - 1], &last, sizeof last);
  (void)keep_bits;
}
// Outputs x itself: wrong everywhere but the structure.
void copies_x(const Problem& p, const Tensors& t) {
  std::memcpy(t.y, t.x, static_cast<std::size_t>(p.elements()) * size_of(p.dtype));
  find_kernel("welford")->run(Problem{p.rows, p.cols, p.dtype, p.eps, p.has_gamma, p.has_beta, p.threads},
                    Tensors{t.x, t.gamma, t.beta, t.y, t.mean, t.rstd});
  std::memcpy(t.y, t.x, static_cast<std::size_t>(p.elements()) * size_of(p.dtype));
}

// A correct run (welford's), after which one element of one input is a step off: the harness compares each
// input's bytes with what it handed over. Which input, and which element, are set by the test.
const void* Tensors::*g_altered = nullptr;
std::int64_t g_altered_at = 0;
void alter_input(const Tensors& t) {
  auto* v = static_cast<float*>(const_cast<void*>(t.*g_altered));
  v[g_altered_at] = std::nextafter(v[g_altered_at], INFINITY);
}
void changes_input(const Problem& p, const Tensors& t) {  // forward and backward: the op says which welford runs
  find_kernel("welford")->run(p, t);
  alter_input(t);
}

const KernelInfo kWritesBefore{"writes_before_y", "test", {.dtypes = {DType::f32}, .forward_norms = {Norm::layernorm}}, &writes_before_y};
const KernelInfo kSkipsLast{"skips_last_y", "test", {.dtypes = {DType::f32}, .forward_norms = {Norm::layernorm}}, &skips_last_y};
// fuses_add: the forward gets the Add & Norm problem as asked, residual included.
const KernelInfo kChangesInput{"changes_input", "test",
                               {.dtypes = {DType::f32}, .forward_norms = {Norm::layernorm}, .prologues = {Prologue::none, Prologue::residual_add},
                                .fuses_add = true, .f32_residual = true},
                               &changes_input};
const KernelInfo kChangesInputBwd{"changes_input_bwd", "test", {.dtypes = {DType::f32}, .backward_norms = {Norm::layernorm}}, nullptr,
                                  &changes_input};
// Add & Norm with h one step off at element 8 (the harness compares h with x + residual rounded once).
void h_one_off(const Problem& p, const Tensors& t) {
  find_kernel("welford")->run(p, t);
  float* h = static_cast<float*>(t.h);
  h[8] = std::nextafter(h[8], INFINITY);
}
const KernelInfo kHOneOff{"h_one_off", "test",
                          {.dtypes = {DType::f32}, .forward_norms = {Norm::layernorm}, .prologues = {Prologue::none, Prologue::residual_add},
                           .fuses_add = true, .f32_residual = true},
                          &h_one_off};
// Backward kernels whose bits are not a function of their inputs: dgamma one step off on more than one thread, or
// dx one step off on every second call. The determinism property must see both (it runs one set of buffers five
// times: GuardedBackward).
void nudge(void* p, std::int64_t at) {
  auto* v = static_cast<float*>(p);
  v[at] = std::nextafter(v[at], INFINITY);
}
void varies_with_threads(const Problem& p, const Tensors& t) {
  find_kernel("welford")->run(p, t);
  if (p.threads > 1) nudge(t.dgamma, 0);
}
void varies_between_runs(const Problem& p, const Tensors& t) {
  static int calls = 0;
  find_kernel("welford")->run(p, t);
  if (++calls % 2 == 0) nudge(t.dx, p.elements() - 1);
}
const KernelInfo kVariesWithThreadsBwd{"varies_with_threads_bwd", "test", {.dtypes = {DType::f32}, .backward_norms = {Norm::layernorm}},
                                       nullptr, &varies_with_threads};
const KernelInfo kVariesBetweenRunsBwd{"varies_between_runs_bwd", "test", {.dtypes = {DType::f32}, .backward_norms = {Norm::layernorm}},
                                       nullptr, &varies_between_runs};
const KernelInfo kCopiesX{"copies_x", "test", {.dtypes = {DType::f32}, .forward_norms = {Norm::layernorm}}, &copies_x};

Case one_row_case(std::int64_t n) {
  CaseSpec s;
  s.row_classes = {RowClass::normal};
  s.shape = {3, n};
  s.axis = 1;
  s.data_seed = 5;
  return materialize(s);
}

// Three normal rows of n with random gamma and beta.
Case affine_case(std::int64_t n, std::uint64_t seed) {
  CaseSpec s;
  s.row_classes = {RowClass::normal};
  s.shape = {3, n};
  s.axis = 1;
  s.data_seed = seed;
  s.gamma = s.beta = Affine::random;
  return materialize(s);
}

}  // namespace

TEST_CASE("float generator: reaches subnormals, -0, the top binade, never NaN or Inf", "[generators]") {
  for (DType d : kAllDTypes) {
    const Format f = format_of(d);
    std::mt19937_64 rng(1);
    int subnormal = 0, neg_zero = 0, top = 0;
    for (int i = 0; i < 50000; ++i) {
      const double v = random_float_bits(rng, f, f.lsb_exponent() - 1, f.emax);
      REQUIRE(std::isfinite(v));
      REQUIRE(round_to_format(f, v) == v);  // representable
      if (v != 0 && std::abs(v) < std::ldexp(1.0, f.emin)) ++subnormal;
      if (v == 0 && std::signbit(v)) ++neg_zero;
      if (std::abs(v) >= std::ldexp(1.0, f.emax)) ++top;
    }
    INFO(name(d));
    CHECK(subnormal > 0);
    CHECK(neg_zero > 0);
    CHECK(top > 0);
  }
}

TEST_CASE("row classes: each makes the rows its name promises", "[generators]") {
  for (DType d : kAllDTypes) {
    INFO(name(d));
    const Format f = format_of(d);
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 50; ++trial) {
      const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 300);
      // exact_stats: the mean is a power of two and the plain double sum is exactly n·mean.
      const auto ex = make_row(rng, d, RowClass::exact_stats, n, 1e-5, 0);
      const double sum = std::accumulate(ex.begin(), ex.end(), 0.0);
      const double mean = sum / static_cast<double>(n);
      int e = 0;
      CHECK(std::frexp(std::abs(mean), &e) == 0.5);
      for (double v : ex) CHECK(std::abs(v - mean) <= 15 * std::abs(mean) / 16);
      // subnormal: every element below the smallest normal
      for (double v : make_row(rng, d, RowClass::subnormal, n, 1e-5, 0)) CHECK(std::abs(v) < std::ldexp(1.0, f.emin));
      // huge: every element within a factor 2 of the largest finite value
      for (double v : make_row(rng, d, RowClass::huge, n, 1e-5, 0)) {
        CHECK(std::isfinite(v));
        CHECK(std::abs(v) >= std::ldexp(1.0, f.emax - 1));
      }
      // constant: all equal
      const auto c = make_row(rng, d, RowClass::constant, n, 1e-5, 0);
      for (double v : c) CHECK(v == c[0]);
      // nonfinite: at least one NaN or Inf
      const auto nf = make_row(rng, d, RowClass::nonfinite, n, 1e-5, 0);
      CHECK(std::any_of(nf.begin(), nf.end(), [](double v) { return !std::isfinite(v); }));
    }
  }
}

TEST_CASE("row classes: offset rows reach the asked kappa, tiny rows have var << eps", "[generators]") {
  std::mt19937_64 rng(9);
  for (double log10_kappa : {0.0, 3.0, 6.0}) {
    const auto x = make_row(rng, DType::f64, RowClass::offset, 4096, 1e-5, log10_kappa);
    const double mean = std::accumulate(x.begin(), x.end(), 0.0) / 4096;
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean) / 4096;
    CHECK(std::log10(std::abs(mean) / std::sqrt(var)) == Approx(log10_kappa).margin(0.1));
  }
  const double eps = 1e-5;
  const auto t = make_row(rng, DType::f32, RowClass::tiny, 4096, eps, 0);
  const double mean = std::accumulate(t.begin(), t.end(), 0.0) / 4096;
  double var = 0;
  for (double v : t) var += (v - mean) * (v - mean) / 4096;
  CHECK(var < eps * 1e-6);
}

TEST_CASE("harness: a write before y, a y element never written, are reported", "[harness]") {
  const Case c = one_row_case(17);
  CHECK_THAT(run_guarded(kWritesBefore, c).violation, Catch::Matchers::Contains("wrote outside y"));
  CHECK_THAT(run_guarded(kSkipsLast, c).violation, Catch::Matchers::Contains("never wrote y at element 50"));
  CHECK(run_guarded(*find_kernel("welford"), c).violation.empty());
}

TEST_CASE("harness: a kernel that changes an input is reported, naming the element", "[harness]") {
  const Case c = affine_case(17, 5);
  const auto violation = [&](const void* Tensors::*input, std::int64_t at, const Case& on) {
    g_altered = input;
    g_altered_at = at;
    return run_guarded(kChangesInput, on).violation;
  };
  CHECK_THAT(violation(&Tensors::x, 40, c), Catch::Matchers::Equals("harness: modified x at element 40 (row 2)"));
  CHECK_THAT(violation(&Tensors::gamma, 3, c), Catch::Matchers::Equals("harness: modified gamma at column 3"));
  CHECK_THAT(violation(&Tensors::beta, 16, c), Catch::Matchers::Equals("harness: modified beta at column 16"));
  Case beta_only = c;
  beta_only.gamma.clear();
  beta_only.spec.gamma = Affine::absent;
  CHECK_THAT(violation(&Tensors::beta, 0, beta_only), Catch::Matchers::Equals("harness: modified beta at column 0"));
  Case fused = c;
  fused.spec.op = Op::add_layernorm;
  CHECK_THAT(violation(&Tensors::residual, 50, fused), Catch::Matchers::Equals("harness: modified residual at element 50 (row 2)"));
  CHECK_THAT(violation(&Tensors::x, 0, fused), Catch::Matchers::Equals("harness: modified x at element 0 (row 0)"));
  // h one step off, where the harness split each value (h is c.x) and where the residual is given.
  CHECK_THAT(run_guarded(kHOneOff, fused).violation, Catch::Matchers::StartsWith("h: element 8 (row 0)"));
  Case given = fused;
  given.residual.assign(given.x.size(), 0.25);
  CHECK_THAT(run_guarded(kHOneOff, given).violation, Catch::Matchers::StartsWith("h: element 8 (row 0)"));
  CHECK(run_guarded(*find_kernel("welford"), fused).violation.empty());
  CHECK(run_guarded(*find_kernel("welford"), given).violation.empty());

  Case bwd = c;
  bwd.spec.op = Op::layernorm_bwd;
  bwd = materialize(bwd.spec);  // with dy
  const auto bwd_violation = [&](const void* Tensors::*input, std::int64_t at) {
    g_altered = input;
    g_altered_at = at;
    return run_guarded_backward(kChangesInputBwd, bwd).violation;
  };
  CHECK_THAT(bwd_violation(&Tensors::x, 7), Catch::Matchers::Equals("harness: modified x at element 7 (row 0)"));
  CHECK_THAT(bwd_violation(&Tensors::dy, 50), Catch::Matchers::Equals("harness: modified dy at element 50 (row 2)"));
  CHECK_THAT(bwd_violation(&Tensors::gamma, 2), Catch::Matchers::Equals("harness: modified gamma at column 2"));
  CHECK_THAT(bwd_violation(&Tensors::saved_rstd, 1), Catch::Matchers::Equals("harness: modified saved_rstd at row 1"));
  CHECK_THAT(bwd_violation(&Tensors::saved_mean, 2), Catch::Matchers::Equals("harness: modified saved_mean at row 2"));
  g_altered = nullptr;
}

// The quantized epilogue's run (run_quantized) hands the kernel its operands as run_guarded does (GuardedOperands,
// from the operand table): an input altered, or a write past the scales, only on the quantized path, is reported.
void quant_then_alter(const Problem& p, const Tensors& t) {
  find_kernel("welford")->run(p, t);
  if (g_altered) alter_input(t);
  else static_cast<float*>(t.scales)[p.rows * p.quant.scales_per_row(p.cols)] = 1.0f;  // one past the last scale
}
const KernelInfo kQuantAlters{"quant_alters", "test",
                              {.dtypes = {DType::f32}, .forward_norms = {Norm::layernorm}, .epilogues = {Epilogue::y_as_x, Epilogue::quantized}},
                              &quant_then_alter};

TEST_CASE("harness: the quantized run guards every operand as the plain run does", "[harness]") {
  const Case c = affine_case(32, 7);
  const QuantSpec row = parse_quant_spec("fp8_e4m3", "row", std::nullopt);
  g_altered = &Tensors::x;
  g_altered_at = 33;
  CHECK_THAT(run_quantized(kQuantAlters, c, row, 1).violation, Catch::Matchers::Equals("harness: " + describe(row) + ": modified x at element 33 (row 1)"));
  g_altered = &Tensors::gamma;
  g_altered_at = 5;
  CHECK_THAT(run_quantized(kQuantAlters, c, row, 1).violation, Catch::Matchers::EndsWith(": modified gamma at column 5"));
  g_altered = nullptr;
  CHECK_THAT(run_quantized(kQuantAlters, c, row, 1).violation, Catch::Matchers::EndsWith(": wrote outside scales (guard region changed)"));
  const QuantOutputs good = run_quantized(*find_kernel("welford"), c, row, 1);
  CHECK(good.violation.empty());
  CHECK(good.q.size() == 96);
  CHECK(good.scales.size() == 3 * sizeof(float));
}

TEST_CASE("backward determinism: bits that change between runs or with the thread count are reported", "[harness]") {
  CaseSpec s;
  s.row_classes = {RowClass::normal};
  s.shape = {3, 1000};  // tiled by the property to 263 rows (2^18 elements)
  s.axis = 1;
  s.data_seed = 5;
  s.gamma = Affine::random;
  s.op = Op::layernorm_bwd;
  const Case c = materialize(s);
  const KernelBudget budget;
  Worst worst;
  const auto check = [&](const KernelInfo& k) {
    const CheckContext ctx{k, budget, worst};
    return definition(Property::determinism, DType::f32, Op::layernorm_bwd).check(ctx, c);
  };
  CHECK(check(*find_kernel("welford")).empty());
  CHECK_THAT(check(kVariesWithThreadsBwd), Catch::Matchers::Equals("263 rows on 2 threads: dgamma/dbeta differ from 1 thread (a reduction "
                                                                    "order that depends on the split)"));
  CHECK_THAT(check(kVariesBetweenRunsBwd), Catch::Matchers::Equals("263 rows: a second run on 1 thread gave different bits"));
}

// A budget is a bound, a measurement over many seeds, or a policy, and the built-in file says which
// for every numeric entry (a user's file may leave it out; a wrong word is refused).
TEST_CASE("budgets: every numeric entry of the built-in file names its basis", "[budgets]") {
  const Budgets b = Budgets::builtin();
  int entries = 0;
  for (const KernelBudget* kb : b.sections()) {
    for (const auto& [key, basis] : kb->basis) {
      INFO(kb->section << "." << key);
      CHECK((basis == "bound" || basis == "measured" || basis == "policy"));
      ++entries;
    }
  }
  CHECK(entries > 300);
  const std::string base = "[default.f32]\ny = { a = 8, b = 1, reason = \"r\", basis = \"%s\" }\nmean = { ulp = 8, reason = \"r\" }\n"
                           "rstd = { ulp = 8, reason = \"r\" }\nexact_mean = { value = true, reason = \"r\" }\n";
  const auto with = [&](const char* basis) {
    char text[512];
    std::snprintf(text, sizeof text, base.c_str(), basis);
    return std::string(text);
  };
  CHECK(Budgets::parse(with("measured"), "t.toml").for_kernel("welford", DType::f32).basis.at("y") == "measured");
  CHECK(Budgets::parse(with("policy"), "t.toml").for_kernel("welford", DType::f32).basis.at("mean").empty());
  CHECK_THROWS_WITH(Budgets::parse(with("guess"), "t.toml"), Catch::Matchers::Contains("default.f32.y.basis"));
}

TEST_CASE("budgets: the built-in file covers every kernel x dtype with reasons", "[budgets]") {
  const Budgets b = Budgets::builtin();
  for (const KernelInfo& k : registry()) {
    for (DType d : kAllDTypes) {
      if (!k.takes.dtypes.contains(d)) continue;
      INFO(k.name << " " << name(d));
      CHECK(b.has_own(k.name, d));
      const KernelBudget& kb = b.for_kernel(k.name, d);
      CHECK_FALSE(kb.y_reason.empty());
      CHECK_FALSE(kb.mean_reason.empty());
      CHECK_FALSE(kb.rstd_reason.empty());
      for (const auto& [p, reason] : kb.expected_failures) CHECK_FALSE(reason.empty());
    }
    // A kernel with no section (a plugin, a mutant) falls back to [default.<dtype>].
    CHECK(b.for_kernel("no_such_kernel", DType::f32).section == "default.f32");
  }
}

TEST_CASE("budgets: a typo, a missing reason, a negative number or an unknown property is an error naming the key", "[budgets]") {
  const Budgets ok = Budgets::parse(kOneSection, "t.toml");
  CHECK(ok.for_kernel("k", DType::f32).y.a == 2);
  CHECK(ok.for_kernel("k", DType::f32).expected_failures.at(Property::accuracy) == "known");
  CHECK_THROWS_WITH(Budgets::parse(kOneSection + std::string("[k.f32.y]\n"), "t.toml"), Catch::Matchers::Contains("t.toml"));
  std::string s = kOneSection;
  CHECK_THROWS_WITH(Budgets::parse(std::string(s).replace(s.find("a = 2"), 5, "aa = 2"), "t.toml"),
                    Catch::Matchers::Contains("k.f32.y.aa: unknown key"));
  CHECK_THROWS_WITH(Budgets::parse(std::string(s).replace(s.find("ulp = 3, reason = \"r\""), 22, "ulp = 3"), "t.toml"),
                    Catch::Matchers::Contains("k.f32.mean.reason"));
  CHECK_THROWS_WITH(Budgets::parse(std::string(s).replace(s.find("ulp = 4"), 7, "ulp = -4"), "t.toml"),
                    Catch::Matchers::Contains("k.f32.rstd.ulp: must be >= 0"));
  CHECK_THROWS_WITH(Budgets::parse(std::string(s).replace(s.find("accuracy = "), 11, "acuracy = "), "t.toml"),
                    Catch::Matchers::Contains("k.f32.expected_failures.acuracy: not a property name"));
  std::string f33 = s;
  for (std::size_t at; (at = f33.find("k.f32")) != std::string::npos;) f33.replace(at, 5, "k.f33");
  CHECK_THROWS_WITH(Budgets::parse(f33, "t.toml"),
                    Catch::Matchers::Contains("k.f33: not a dtype"));
  CHECK_THROWS_WITH(ok.for_kernel("k", DType::f64), Catch::Matchers::Contains("no [k.f64]"));
  CHECK(ok.for_kernel("k", DType::f32).non_strict_failures.empty());  // a plain string is strict
}

TEST_CASE("budgets: an expected failure is strict unless it says strict = false", "[budgets]") {
  const std::string s = std::string(kOneSection) + "invariance = { reason = \"rare\", strict = false }\n";
  const Budgets parsed = Budgets::parse(s, "t.toml");
  const KernelBudget& b = parsed.for_kernel("k", DType::f32);
  CHECK(b.expected_failures.at(Property::invariance) == "rare");
  CHECK(b.non_strict_failures.count(Property::invariance) == 1);
  CHECK(b.non_strict_failures.count(Property::accuracy) == 0);
  CHECK(Budgets::parse(std::string(kOneSection) + "invariance = { reason = \"r\", strict = true }\n", "t.toml")
            .for_kernel("k", DType::f32).non_strict_failures.empty());
  CHECK_THROWS_WITH(Budgets::parse(std::string(kOneSection) + "invariance = { reason = \"r\" }\n", "t.toml"),
                    Catch::Matchers::Contains("k.f32.expected_failures.invariance.strict"));
  CHECK_THROWS_WITH(Budgets::parse(std::string(kOneSection) + "invariance = { strict = false }\n", "t.toml"),
                    Catch::Matchers::Contains("k.f32.expected_failures.invariance.reason"));
}

TEST_CASE("verify: a wrong kernel fails with a shrunk case and a reproduction, and the same seed gives the same verdict", "[verify]") {
  const KernelBudget budget = Budgets::builtin().for_kernel("welford", DType::f32);
  Settings s;
  s.cases = 30;
  s.properties = {Property::accuracy, Property::shape};
  const auto a = verify_kernel(kCopiesX, DType::f32, budget, s);
  REQUIRE(a.size() == 2);
  CHECK(a[0].status == Status::fail);
  CHECK_FALSE(a[0].counterexample.empty());
  CHECK_THAT(a[0].reproduce, Catch::Matchers::Contains("--kernel copies_x --dtype f32 --property accuracy --seed 1"));
  CHECK(a[1].status == Status::pass);  // the structure is right: it writes every y and nothing else
  const auto b = verify_kernel(kCopiesX, DType::f32, budget, s);
  CHECK(b[0].counterexample == a[0].counterexample);
  CHECK(b[0].message == a[0].message);
}

TEST_CASE("verify: expected failures are xfail, one that passes is XPASS, too few cases is mistrusted", "[verify]") {
  KernelBudget budget = Budgets::builtin().for_kernel("welford", DType::f32);
  Settings s;
  s.cases = 30;
  s.properties = {Property::accuracy};
  budget.expected_failures[Property::accuracy] = "pretend";
  CHECK(verify_kernel(kCopiesX, DType::f32, budget, s)[0].status == Status::expected_failure);
  const Outcome xpass = verify_kernel(*find_kernel("welford"), DType::f32, budget, s)[0];
  CHECK(xpass.status == Status::unexpected_pass);
  CHECK(is_failure(xpass.status));
  // Non-strict (strict = false): holding on a full run is reported, not failed; failing is still xfail.
  budget.non_strict_failures.insert(Property::accuracy);
  const Outcome maybe = verify_kernel(*find_kernel("welford"), DType::f32, budget, s)[0];
  CHECK(maybe.status == Status::unconfirmed);
  CHECK_FALSE(is_failure(maybe.status));
  CHECK_THAT(maybe.message, Catch::Matchers::Contains("strict = false"));
  CHECK(verify_kernel(kCopiesX, DType::f32, budget, s)[0].status == Status::expected_failure);
  budget.non_strict_failures.clear();
  budget.expected_failures.clear();
  s.cases = 5;  // fewer cases than the 11 input classes: some class is never generated
  const Outcome few = verify_kernel(*find_kernel("welford"), DType::f32, budget, s)[0];
  CHECK(few.status == Status::mistrusted);
  CHECK_THAT(few.message, Catch::Matchers::Contains("never generated"));
}

TEST_CASE("properties: onepass fails accuracy and invariance on offset rows, welford holds both", "[verify]") {
  // The llm.c / ONNX Runtime failure: offset rows (kappa = 1e4) in f32.
  CaseSpec s;
  s.row_classes = {RowClass::offset};
  s.log10_kappa = 4;
  s.shape = {4, 1024};
  s.axis = 1;
  s.eps = 0;
  s.data_seed = 11;
  const Case c = materialize(s);
  Worst worst;
  const KernelInfo& onepass = *find_kernel("onepass");
  const KernelInfo& welford = *find_kernel("welford");
  const Budgets b = Budgets::builtin();
  CHECK_FALSE(check_accuracy({onepass, b.for_kernel("onepass", DType::f32), worst}, c).empty());
  CHECK(check_accuracy({welford, b.for_kernel("welford", DType::f32), worst}, c).empty());
  s.row_classes = {RowClass::normal};  // invariance shifts a centred row to kappa' up to 1e4 itself
  const Case centred = materialize(s);
  int onepass_failures = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    Case k = centred;
    k.spec.data_seed = seed;
    onepass_failures += !check_invariance({onepass, b.for_kernel("onepass", DType::f32), worst}, k).empty();
    CHECK(check_invariance({welford, b.for_kernel("welford", DType::f32), worst}, k).empty());
  }
  CHECK(onepass_failures > 0);
}

// vLLM #48271 chose a block size by the number of tokens, so a row's bits depended on its batch's size.
// mutants' batch_dependent takes a "large batch" path (f32 running sums) from 256 rows on: row_independence, whose
// batches stay under 49 rows, cannot see it; batch_invariance (batches of 1 to 4097 rows) must, in both norms,
// and must hold for the control (the mutant below 256 rows) and for a real kernel.
TEST_CASE("properties: batch_invariance catches a kernel whose bits depend on the batch's size, row_independence does not",
          "[verify]") {
  const KernelInfo* mutant = nullptr;
  for (const KernelInfo& k : mutants::all())
    if (k.name == "mutant_batch_dependent") mutant = &k;
  REQUIRE(mutant != nullptr);
  const Budgets b = Budgets::builtin();
  Settings s;
  s.cases = 24;
  s.properties = {Property::row_independence, Property::batch_invariance};
  for (Op op : {Op::layernorm, Op::rmsnorm}) {
    for (DType d : {DType::f32, DType::bf16}) {
      const auto got = verify_kernel(*mutant, op, d, b.for_kernel(op, mutant->name, d), s);
      REQUIRE(got.size() == 2);
      INFO(name(op) << " " << name(d) << ": " << got[1].message << "\n" << got[1].counterexample);
      CHECK(got[0].property == Property::row_independence);
      CHECK(got[0].status == Status::pass);
      CHECK(got[1].property == Property::batch_invariance);
      CHECK(got[1].status == Status::fail);
      CHECK_THAT(got[1].message, Catch::Matchers::Contains("differs from that row alone"));
      const auto control = verify_kernel(mutants::control(), op, d, b.for_kernel(op, mutants::control().name, d), s);
      CHECK(control[1].status == Status::pass);
    }
  }
  // The check itself, on a case of three rows: alone they agree with the control; in a batch of 256 (this seed's
  // draw of the ladder) they do not.
  CaseSpec spec;
  spec.row_classes = {RowClass::normal};
  spec.shape = {3, 64};
  spec.axis = 1;
  spec.data_seed = 3 * 32 + 1;  // not a multiple of 32 (the big case); (seed / 32) % 7 = 3: the ladder's 256 rows
  const Case c = materialize(spec);
  Worst worst;
  const std::string message = check_batch_invariance({*mutant, b.for_kernel("welford", DType::f32), worst}, c);
  CHECK_THAT(message, Catch::Matchers::Contains("batch of 256 rows of width 64 on 1 thread(s)"));
  CHECK(check_row_independence({*mutant, b.for_kernel("welford", DType::f32), worst}, c).empty());
  CHECK(check_batch_invariance({*find_kernel("welford"), b.for_kernel("welford", DType::f32), worst}, c).empty());
  // A seed that is a multiple of 32: the big case, 4097 rows of width 513 (8 MiB of f32 y and more) on 2 threads.
  spec.data_seed = 2 * 32;
  const Case big = materialize(spec);
  Case ran;
  CHECK_THAT(check_batch_invariance({*mutant, b.for_kernel("welford", DType::f32), worst, &ran}, big),
             Catch::Matchers::Contains("batch of 4097 rows of width 513 on 2 thread(s)"));
  CHECK(ran.spec.cols() == 513);  // the case that ran, for the dump and the counterexample
  CHECK(check_batch_invariance({mutants::control(), b.for_kernel("welford", DType::f32), worst}, big).empty());
}
