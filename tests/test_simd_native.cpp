// On a CPU with the ISA: the native SIMD kernels (avx512 and avx512_cr; avx2 and avx2_cr with a test spec naming
// avx2) compute the emulation's bits (y, mean, rstd, h; dx, dgamma, dbeta) on every case the verify suite
// generates (every input class, width and dtype), and the native conversions and f64 operations equal the
// emulated ones. Elsewhere the executable exits 77 with the reason and ctest reports it skipped
// (SKIP_RETURN_CODE 77), never passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <bit>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "simd_emulation.hpp"
#include "lnorm/budgets.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/verify.hpp"

// The probes' exports (avx512_native_probe.cpp, avx2_native_probe.cpp): the same functions at each width.
#define LNORM_PROBE_DECLS                                                                                              \
  void bf16_f(const float* in, std::uint16_t* out, std::int64_t n, bool hw);                                          \
  void f16_f(const float* in, std::uint16_t* out, std::int64_t n);                                                    \
  void bf16_d(const double* in, std::uint16_t* out, std::int64_t n, bool hw);                                         \
  void f16_d(const double* in, std::uint16_t* out, std::int64_t n);                                                   \
  void widen_f16(const std::uint16_t* in, float* out, std::int64_t n);                                                \
  void ops_d(const double* a, const double* b, const double* c, float y_min, double* fma, double* mx, std::uint8_t* masks, \
             std::uint16_t* near16);                                                                                \
  void any_subnormal(const float* in, std::int64_t groups, std::uint8_t* out);
namespace lnorm::testing::avx512_probe {
LNORM_PROBE_DECLS
void bf16_raw(const float* in, std::uint16_t* out, std::int64_t n);
}  // namespace lnorm::testing::avx512_probe
namespace lnorm::testing::avx2_probe {
LNORM_PROBE_DECLS
}  // namespace lnorm::testing::avx2_probe
namespace lnorm::cpu {
bool cpu_has_avx512_bf16();
}

using namespace lnorm;
namespace emu = lnorm::testing::simd_emulation;

// A test spec naming avx2 ("[avx2]", "[avx2_quick]", ...) needs the AVX2 kernels; any other, the AVX-512 ones.
int main(int argc, char** argv) {
  const bool avx2 = argc > 1 && std::string(argv[1]).find("avx2") != std::string::npos;
  const KernelInfo* k = find_kernel(avx2 ? "avx2" : "avx512");
  if (!k) return 1;
  if (const auto why = k->why_not(make_problem(1, 1, DType::f32, 1e-5, false, false))) {
    std::printf("skipped: the native %s kernels cannot run here (%s)\n", avx2 ? "AVX2" : "AVX-512", why->c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

namespace {

// A kernel that runs the emulated and the native kernel on the same case and records any difference
// in y, mean or rstd; it returns the native outputs, so the suite checks them too.
struct Pair {
  const KernelInfo* native = nullptr;
  const KernelInfo* emulated = nullptr;
  long calls = 0, elements = 0, mismatches = 0;
  std::string first;
};
Pair g_pair;

void record_mismatch(const Problem& p, const char* what, const void* native, const std::vector<std::byte>& e, std::size_t n) {
  if (!native || n == 0 || std::memcmp(native, e.data(), n) == 0) return;
  ++g_pair.mismatches;
  if (!g_pair.first.empty()) return;
  const auto* a = static_cast<const unsigned char*>(native);
  std::size_t i = 0;
  while (a[i] == static_cast<unsigned char>(e[i])) ++i;
  std::ostringstream s;
  s << g_pair.native->name << " " << name(p.op) << " " << name(p.dtype) << " " << p.rows << "x" << p.cols << " eps " << p.eps << " gamma "
    << p.has_gamma << " beta " << p.has_beta << " threads " << p.threads << ": " << what << " differs first at byte " << i;
  g_pair.first = s.str();
}

// The backward: dx, dgamma and dbeta (the emulated kernel on copies of the inputs, as the harness gives them).
void compare_backward(const Problem& p, const Tensors& t) {
  const std::size_t bytes = static_cast<std::size_t>(p.elements()) * size_of(p.dtype);
  const std::size_t params = static_cast<std::size_t>(p.cols) * size_of(p.param_dtype);
  std::vector<std::byte> dx(bytes), dg(t.dgamma ? params : 0), db(t.dbeta ? params : 0);
  Tensors e = t;
  e.dx = dx.data();
  e.dgamma = t.dgamma ? dg.data() : nullptr;
  e.dbeta = t.dbeta ? db.data() : nullptr;
  g_pair.emulated->run(p, e);
  g_pair.native->run(p, t);
  ++g_pair.calls;
  g_pair.elements += p.elements();
  record_mismatch(p, "dx", t.dx, dx, bytes);
  record_mismatch(p, "dgamma", t.dgamma, dg, dg.size());
  record_mismatch(p, "dbeta", t.dbeta, db, db.size());
}

void compare_forward(const Problem& p, const Tensors& t) {
  const std::size_t bytes = static_cast<std::size_t>(p.elements()) * size_of(p.dtype);
  const std::size_t stats = static_cast<std::size_t>(p.rows) * size_of(stats_dtype(p.dtype));
  // Add & Norm: residual and h in x's dtype (the kernels decline others), h compared like y.
  const bool fused = p.op.prologue == Prologue::residual_add;
  const std::size_t res_bytes = fused ? static_cast<std::size_t>(p.elements()) * size_of(p.residual_dtype) : 0;  // residual and h
  std::vector<std::byte> x(bytes), y(bytes), mean(stats), rstd(stats), res(res_bytes), h(res_bytes);
  if (bytes) std::memcpy(x.data(), t.x, bytes);  // y may alias x
  if (res_bytes) std::memcpy(res.data(), t.residual, res_bytes);
  g_pair.emulated->run(p, Tensors{x.data(), t.gamma, t.beta, y.data(), t.mean ? mean.data() : nullptr, t.rstd ? rstd.data() : nullptr,
                                  fused ? res.data() : nullptr, fused ? h.data() : nullptr});
  g_pair.native->run(p, t);
  ++g_pair.calls;
  g_pair.elements += p.elements();
  record_mismatch(p, "y", t.y, y, bytes);
  record_mismatch(p, "mean", t.mean, mean, stats);
  record_mismatch(p, "rstd", t.rstd, rstd, stats);
  if (fused) record_mismatch(p, "h", t.h, h, res_bytes);
}

// Hands each whole problem (Add & Norm too: fuses_add) to both kernels' own dispatch.
const KernelInfo kCompare{"simd_native_vs_emulated", "runs both, records differences",
                          {.dtypes = {DType::f32, DType::f16, DType::bf16}, .forward_norms = kBothNorms,
                           .backward_norms = kBothNorms, .prologues = kWithAdd, .fuses_add = true, .f32_residual = true},
                          &compare_forward, &compare_backward};

void bits_equal_on_suite(const char* native, const KernelInfo& emulated, bool quick) {
  const KernelInfo* k = find_kernel(native);
  REQUIRE(k);
  const auto budgets = verify::Budgets::builtin();
  verify::Settings settings;
  settings.quick = quick;
  settings.command = "test_simd_native";
  for (Op op : kAllOps) {
    if (!k->implements(op)) continue;  // the _cr kernels have no backward
    // Add & Norm: 12 cases per property in the quick run, as ctest verify_quick_add (the sum is the only new
    // code; the norm of h is the plain rows' checked above), so the test stays cheap where CI has AVX-512.
    // The backward's quick suite at 12 cases too, as ctest verify_quick_bwd (its determinism property tiles each
    // case to 2^18 elements at four thread counts, and the emulation runs every one).
    settings.cases = quick && (op.prologue == Prologue::residual_add || op.direction == Direction::bwd) ? 12 : 0;
    for (DType d : {DType::f32, DType::f16, DType::bf16}) {
      g_pair = Pair{};
      g_pair.native = find_kernel(native);
      g_pair.emulated = &emulated;
      REQUIRE(g_pair.native);
      // The suite only drives the cases here: budgets are lnorm verify's business (its draws differ by
      // kernel name), bits are this test's.
      for (const verify::Outcome& o : verify::verify_kernel(kCompare, op, d, budgets.for_kernel(op, native, d), settings)) {
        INFO(native << " " << name(op) << " " << name(d) << " " << name(o.property) << ": " << name(o.status) << "\n"
                    << o.message);
        CHECK(o.status != verify::Status::skipped);
      }
      INFO(native << " " << name(op) << " " << name(d) << ": " << g_pair.calls << " runs, " << g_pair.elements
                  << " elements; " << g_pair.first);
      CHECK(g_pair.calls > (quick ? 10 : 100));
      CHECK(g_pair.mismatches == 0);
      WARN(native << " " << name(op) << " " << name(d) << ": native == emulated on " << g_pair.calls << " runs, "
                  << g_pair.elements << " elements");
    }
  }
}

}  // namespace

// The quick suite's cases (hidden: ctest runs the full suite, the same generators at 160 cases a property; run
// these by hand with "[quick]" for a 40 s check where the full one takes 210 s).
TEST_CASE("native avx512 computes the emulation's bits on every case of the quick verify suite", "[.quick][avx512][native]") {
  bits_equal_on_suite("avx512", emu::kAvx512Emu, true);
}

TEST_CASE("native avx512_cr computes the emulation's bits on every case of the quick verify suite", "[.quick][avx512][native]") {
  bits_equal_on_suite("avx512_cr", emu::kAvx512CrEmu, true);
}

TEST_CASE("native avx2 and avx2_cr compute the emulation's bits on every case of the quick verify suite", "[.avx2_quick][avx2][native]") {
  bits_equal_on_suite("avx2", emu::kAvx2Emu, true);
  bits_equal_on_suite("avx2_cr", emu::kAvx2CrEmu, true);
}

TEST_CASE("native avx2 and avx2_cr compute the emulation's bits on every case of the full verify suite", "[.avx2_full][avx2][native]") {
  bits_equal_on_suite("avx2", emu::kAvx2Emu, false);
  bits_equal_on_suite("avx2_cr", emu::kAvx2CrEmu, false);
}

// The full suite (160 cases per property): ctest avx512_native_equals_emulation_full, label slow.
TEST_CASE("native avx512 computes the emulation's bits on every case of the full verify suite", "[.full][avx512][native]") {
  bits_equal_on_suite("avx512", emu::kAvx512Emu, false);
}

TEST_CASE("native avx512_cr computes the emulation's bits on every case of the full verify suite", "[.full][avx512][native]") {
  bits_equal_on_suite("avx512_cr", emu::kAvx512CrEmu, false);
}

namespace {
// Every f32 high half with low halves at and around the rounding boundaries, plus random patterns.
std::vector<float> conversion_inputs() {
  std::vector<float> v;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xEFFFu, 0xF000u, 0xFFFFu})
      v.push_back(std::bit_cast<float>(hi << 16 | lo));
  std::mt19937 rng(1);
  for (int i = 0; i < 1000000; ++i) v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  v.resize(v.size() / 16 * 16 + 5);  // a masked tail too
  return v;
}
}  // namespace

namespace {
// One width's probe functions (avx512_native_probe.cpp or avx2_native_probe.cpp) and whether its bf16 narrowing has
// a hardware path (AVX512-BF16) besides the integer one.
struct Probe {
  int lanes;
  bool hw_bf16;
  void (*bf16_f)(const float*, std::uint16_t*, std::int64_t, bool);
  void (*f16_f)(const float*, std::uint16_t*, std::int64_t);
  void (*bf16_d)(const double*, std::uint16_t*, std::int64_t, bool);
  void (*f16_d)(const double*, std::uint16_t*, std::int64_t);
  void (*widen_f16)(const std::uint16_t*, float*, std::int64_t);
  void (*ops_d)(const double*, const double*, const double*, float, double*, double*, std::uint8_t*, std::uint16_t*);
  void (*any_subnormal)(const float*, std::int64_t, std::uint8_t*);
};
namespace p512 = lnorm::testing::avx512_probe;
namespace p2 = lnorm::testing::avx2_probe;
Probe avx512_probe() {
  return {16, cpu::cpu_has_avx512_bf16(), &p512::bf16_f, &p512::f16_f, &p512::bf16_d, &p512::f16_d, &p512::widen_f16, &p512::ops_d, &p512::any_subnormal};
}
const Probe kAvx2Probe{8, false, &p2::bf16_f, &p2::f16_f, &p2::bf16_d, &p2::f16_d, &p2::widen_f16, &p2::ops_d, &p2::any_subnormal};

void narrowing_equals_emulation(const Probe& probe) {
  const auto in = conversion_inputs();
  const auto n = static_cast<std::int64_t>(in.size());
  std::vector<std::uint16_t> out(in.size());
  const auto same = [&](auto emulated, const char* what) {
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (out[i] != emulated(in[i]) && bad++ == 0) first = i;
    INFO(what << ": " << bad << " differ; first input 0x" << std::hex << std::bit_cast<std::uint32_t>(in[first]) << " native 0x"
              << out[first] << " emulated 0x" << emulated(in[first]));
    CHECK(bad == 0);
  };
  probe.bf16_f(in.data(), out.data(), n, false);
  same(emu::emu_bf16, "bf16, integer path");
  if (probe.hw_bf16) {
    probe.bf16_f(in.data(), out.data(), n, true);
    same(emu::emu_bf16, "bf16, AVX512-BF16 path");
    // Without the repair, vcvtneps2bf16 would differ on subnormal inputs (if this CPU flushes them).
    p512::bf16_raw(in.data(), out.data(), n / 16 * 16);
    std::size_t flushed = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n / 16 * 16); ++i) flushed += out[i] != emu::emu_bf16(in[i]);
    WARN("raw vcvtneps2bf16 differs from round-to-nearest-even on " << flushed << " inputs (subnormals)");
  } else if (probe.lanes == 16) {
    WARN("CPU lacks AVX512-BF16: only the integer bf16 path checked");
  }
  probe.f16_f(in.data(), out.data(), n);
  same(emu::emu_f16, "f16");
}

void odd_narrowing_equals_emulation(const Probe& probe) {
  std::vector<double> in;
  std::mt19937_64 rng(2);
  for (float f : conversion_inputs()) {
    const double d = f;
    in.push_back(d);
    if (std::isfinite(d)) {
      in.push_back(std::nextafter(d, INFINITY));
      in.push_back(d * (1 + 0x1p-30));
    }
  }
  for (int i = 0; i < 1000000; ++i) in.push_back(std::bit_cast<double>(rng()));
  const auto n = static_cast<std::int64_t>(in.size());
  std::vector<std::uint16_t> out(in.size());
  const auto same = [&](auto emulated, const char* what) {
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (out[i] != emulated(in[i]) && bad++ == 0) first = i;
    INFO(what << ": " << bad << " differ; first input " << in[first]);
    CHECK(bad == 0);
  };
  probe.bf16_d(in.data(), out.data(), n, false);
  same([](double d) { return emu::emu_bf16(emu::emu_f32_odd(d)); }, "bf16 via odd, integer");
  if (probe.hw_bf16) {
    probe.bf16_d(in.data(), out.data(), n, true);
    same([](double d) { return emu::emu_bf16(emu::emu_f32_odd(d)); }, "bf16 via odd, AVX512-BF16");
  }
  probe.f16_d(in.data(), out.data(), n);
  same([](double d) { return emu::emu_f16(emu::emu_f32_odd(d)); }, "f16 via odd");
  std::vector<std::uint16_t> h(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<std::uint16_t>(i);
  std::vector<float> w(65536);
  probe.widen_f16(h.data(), w.data(), 65536);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) bad += std::bit_cast<std::uint32_t>(w[i]) != std::bit_cast<std::uint32_t>(emu::emu_widen_f16(h[i]));
  CHECK(bad == 0);
}

void ops_d_equal_emulation(const Probe& probe) {
  // Operands: f64 values near f32/f16/bf16 midpoints and ties (a and b one or two f64/f32 ulps apart),
  // zeros of both signs, NaN, Inf, subnormals, and random patterns; y_min from 0 to 2^-14.
  std::mt19937_64 rng(3);
  std::vector<double> pool;
  for (float f : conversion_inputs()) {
    if (pool.size() > 400000) break;
    const double d = f;
    pool.push_back(d);
    pool.push_back(std::nextafter(d, INFINITY));
    pool.push_back(std::nextafter(d, -INFINITY));
  }
  for (double d : std::initializer_list<double>{0.0, -0.0, NAN, -NAN, INFINITY, -INFINITY, 0x1p-1074, 0x1p-1022, 1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-52})
    pool.push_back(d);
  for (int i = 0; i < 200000; ++i) pool.push_back(std::bit_cast<double>(rng()));
  const float y_mins[] = {0.0f, 0x1p-126f, 0x1p-14f, 1.0f};
  const int lanes = probe.lanes / 2;  // f64 lanes
  std::size_t bad = 0, groups = 0, first = 0;
  for (std::size_t g = 0; g + 8 <= pool.size(); g += 8, ++groups) {
    double a[8], b[8], c[8];
    for (int l = 0; l < 8; ++l) {
      a[l] = pool[g + static_cast<std::size_t>(l)];
      const double pick = pool[rng() % pool.size()];
      // b: a's neighbour half of the time (the Ziv test's lo/hi pairs), else any value; c: any value.
      b[l] = rng() % 2 ? std::nextafter(a[l], (rng() % 2) ? INFINITY : -INFINITY) : pick;
      c[l] = pool[rng() % pool.size()];
    }
    const float y_min = y_mins[groups % 4];
    double fn[8], fe[8], mn[8], me[8];
    std::uint8_t kn[3], ke[3];
    std::uint16_t hn[16], he[16];
    std::memset(hn, 0, sizeof hn);
    std::memset(he, 0, sizeof he);
    probe.ops_d(a, b, c, y_min, fn, mn, kn, hn);
    emu::emu_ops_d(probe.lanes, a, b, c, y_min, fe, me, ke, he);
    bool differ = std::memcmp(kn, ke, 3) != 0 || std::memcmp(hn, he, sizeof hn) != 0;
    for (int l = 0; l < lanes; ++l)
      differ |= std::bit_cast<std::uint64_t>(fn[l]) != std::bit_cast<std::uint64_t>(fe[l]) ||
                std::bit_cast<std::uint64_t>(mn[l]) != std::bit_cast<std::uint64_t>(me[l]);
    if (differ && bad++ == 0) first = g;
  }
  INFO(bad << " of " << groups << " groups of 8 differ (" << lanes << " f64 lanes); first at pool index " << first << ", a[0] = " << pool[first]);
  CHECK(bad == 0);
  CHECK(groups > 70000);  // the pool above gives ~75000
}
}  // namespace

namespace {
// The backward's subnormal test (subnormal_key, any_subnormal): a group of two vectors holds one probe value in a
// lane that moves with the index, beside values that are not subnormal (±0, normals at both ends, ±Inf, NaNs);
// the answer must be fpclassify's, natively and in the emulation (both widths). Probe values: every f32 exponent
// with fractions at and around the subnormal boundary's edges, and random patterns.
void subnormal_test_equals_fpclassify(const Probe& probe) {
  std::vector<float> probes;
  for (std::uint32_t e = 0; e < 256; ++e)
    for (std::uint32_t f : {0u, 1u, 2u, 0x3FFFFFu, 0x400000u, 0x7FFFFEu, 0x7FFFFFu})
      for (std::uint32_t sign : {0u, 0x80000000u}) probes.push_back(std::bit_cast<float>(sign | e << 23 | f));
  std::mt19937 rng(4);
  for (int i = 0; i < 200000; ++i) probes.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (int i = 0; i < 20000; ++i) probes.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0x807FFFFFu));  // subnormal or 0
  const float others[] = {0.0f, -0.0f, 0x1p-126f, -0x1p-126f, 1.0f, 0x1.fffffep127f, INFINITY, -INFINITY, NAN, -NAN};
  const int width = 2 * probe.lanes;
  const auto groups = static_cast<std::int64_t>(probes.size());
  std::vector<float> in(probes.size() * static_cast<std::size_t>(width));
  std::vector<std::uint8_t> native(probes.size()), emulated(probes.size());
  for (std::size_t g = 0; g < probes.size(); ++g) {
    for (int l = 0; l < width; ++l) in[g * width + l] = others[(g + static_cast<std::size_t>(l)) % std::size(others)];
    in[g * width + g % static_cast<std::size_t>(width)] = probes[g];
  }
  probe.any_subnormal(in.data(), groups, native.data());
  emu::emu_any_subnormal(probe.lanes, in.data(), groups, emulated.data());
  std::size_t bad_native = 0, bad_emulated = 0, subnormals = 0, first = 0;
  for (std::size_t g = 0; g < probes.size(); ++g) {
    const bool want = std::fpclassify(probes[g]) == FP_SUBNORMAL;
    subnormals += want;
    if ((native[g] != 0) != want && bad_native++ == 0) first = g;
    bad_emulated += (emulated[g] != 0) != want;
  }
  INFO(probes.size() << " groups, " << subnormals << " with a subnormal; first native miss 0x" << std::hex
                     << std::bit_cast<std::uint32_t>(probes[first]));
  CHECK(bad_native == 0);
  CHECK(bad_emulated == 0);
  CHECK(subnormals > 20000);
}
}  // namespace

TEST_CASE("native AVX-512 f32 -> bf16 (AVX512-BF16 and integer) and f32 -> f16 equal the emulated conversions", "[avx512][native]") {
  narrowing_equals_emulation(avx512_probe());
}
TEST_CASE("native AVX-512 f64 -> f16/bf16 through round-to-odd f32 equals the emulation, and f16 -> f32 too", "[avx512][native]") {
  odd_narrowing_equals_emulation(avx512_probe());
}
TEST_CASE("native AVX-512 fmadd_pd, max_pd, join_ps, differ_bits, near_mid16_f and store equal the emulation", "[avx512][native]") {
  ops_d_equal_emulation(avx512_probe());
}
TEST_CASE("native AVX2 f32 -> bf16 (integer) and f32 -> f16 equal the emulated conversions", "[avx2_ops][native]") {
  narrowing_equals_emulation(kAvx2Probe);
}
TEST_CASE("native AVX2 f64 -> f16/bf16 through round-to-odd f32 equals the emulation, and f16 -> f32 too", "[avx2_ops][native]") {
  odd_narrowing_equals_emulation(kAvx2Probe);
}
TEST_CASE("native AVX-512 subnormal_key finds exactly the groups that hold a subnormal, as the emulation", "[avx512][native]") {
  subnormal_test_equals_fpclassify(avx512_probe());
}
TEST_CASE("native AVX2 subnormal_key finds exactly the groups that hold a subnormal, as the emulation", "[avx2_ops][native]") {
  subnormal_test_equals_fpclassify(kAvx2Probe);
}
TEST_CASE("native AVX2 fmadd_pd, max_pd, join_ps, differ_bits, near_mid16_f and store equal the emulation", "[avx2_ops][native]") {
  ops_d_equal_emulation(kAvx2Probe);
}
