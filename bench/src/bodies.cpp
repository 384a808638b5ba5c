// What one timed call does for each kind of entry: a kernel's run, a copy of the same bytes, or
// oneDNN's layer_normalization_forward (inference, use_scale | use_shift, f32 statistics).
#include "bodies.hpp"

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <benchmark/benchmark.h>

#include "copies.hpp"
#include "lnorm/half.hpp"
#include "lnorm/operands.hpp"
#include "lnorm/parallel.hpp"

#if LNORM_HAVE_DNNL
#include <dnnl.hpp>
#include <dnnl_version.h>
#endif

namespace lnorm::bench {

std::vector<std::byte> random_data(DType d, std::int64_t count, unsigned seed) {
  // Speed does not depend on the values (no NaN, no range fallbacks): a cheap generator keeps set-up
  // of the 67M-element DRAM shapes short. Uniform in [-1.5, 2.5).
  std::uint64_t state = 0x9E3779B97F4A7C15ull ^ seed;
  std::vector<std::byte> out(static_cast<std::size_t>(count) * size_of(d));
  for (std::int64_t i = 0; i < count; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    const float v = static_cast<float>(state >> 40) * 0x1p-24f * 4.0f - 1.5f;
    std::byte* p = out.data() + static_cast<std::size_t>(i) * size_of(d);
    if (d == DType::f32) std::memcpy(p, &v, 4);
    else if (d == DType::f64) { const double w = v; std::memcpy(p, &w, 8); }
    else if (d == DType::f16) { const auto h = f16_from_float(v); std::memcpy(p, &h, 2); }
    else { const auto h = bf16_from_float(v); std::memcpy(p, &h, 2); }
  }
  return out;
}

void evict_caches() {
  static std::vector<std::uint64_t> junk(64u << 17);  // 64 MiB
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < junk.size(); i += 8) {
    junk[i] += 1;
    sum += junk[i];
  }
  benchmark::DoNotOptimize(sum);
}

namespace {

// A kernel's operands, allocated in this order (x, gamma, beta, y, mean, rstd) and written once before
// any timing (x with data, the rest zero-filled by std::vector), so no call pays a page fault. The copy
// bodies allocate exactly the same (whose x and y then sit at the same offsets from each other as the
// kernel's: glibc memcpy's speed here depends on that distance, docs/performance.md).
// Add & Norm adds residual (data) and h after them, the residual in x's dtype.
struct Operands {
  Problem p;
  std::vector<std::byte> x, g, b, y, mean, rstd, residual, h, q, scales;
  // The backward: dy (data), the forward's saved mean/rstd (in stats_dtype, from a double two-pass: speed
  // does not depend on their last bit), dx in y, dgamma and dbeta (x's dtype, as gamma).
  std::vector<std::byte> dy, dgamma, dbeta;
  Operands(const Entry& e, const Settings& s) {
    // RMSNorm as the transformers that use it: gamma, no beta, no mean.
    const bool beta = s.affine && e.op.norm == Norm::layernorm;
    p = with_op(make_problem(e.shape.rows, e.shape.cols, e.dtype, 1e-5, s.affine, beta, s.threads), e.op);
    x = random_data(e.dtype, p.elements(), 1);
    if (s.affine) g = random_data(e.dtype, p.cols, 2);
    if (beta) b = random_data(e.dtype, p.cols, 3);
    y.resize(x.size());
    if (e.op.norm == Norm::layernorm) mean.resize(static_cast<std::size_t>(p.rows) * size_of(stats_dtype(e.dtype)));
    rstd.resize(mean.size());
    if (e.op.prologue == Prologue::residual_add) {
      p = set_residual(p, e.dtype);
      residual = random_data(e.dtype, p.elements(), 4);
      h.resize(x.size());
    }
    if (e.op.epilogue == Epilogue::quantized) {  // q and scales in y's place (y stays allocated: the same layout)
      p = set_quant(p, e.quant);
      q.resize(static_cast<std::size_t>(e.quant.q_bytes(p.rows, p.cols)));
      scales.resize(static_cast<std::size_t>(e.quant.scale_bytes(p.rows, p.cols)));
    }
    if (e.op.direction == Direction::bwd) {
      dy = random_data(e.dtype, p.elements(), 5);
      if (!g.empty()) dgamma.resize(g.size());
      if (beta) dbeta.resize(g.size());
      save_statistics();
    }
  }
  void save_statistics() {
    const DType sd = stats_dtype(p.dtype);
    mean.resize(static_cast<std::size_t>(p.rows) * size_of(sd));
    rstd.resize(mean.size());
    for (std::int64_t r = 0; r < p.rows; ++r) {
      double s = 0, q = 0;
      for (std::int64_t i = 0; i < p.cols; ++i) s += value(r * p.cols + i);
      const double m = p.op.norm == Norm::layernorm ? s / static_cast<double>(p.cols) : 0.0;
      for (std::int64_t i = 0; i < p.cols; ++i) q += (value(r * p.cols + i) - m) * (value(r * p.cols + i) - m);
      const double rs = 1.0 / std::sqrt(q / static_cast<double>(p.cols) + p.eps);
      if (sd == DType::f64) {
        std::memcpy(mean.data() + 8 * r, &m, 8);
        std::memcpy(rstd.data() + 8 * r, &rs, 8);
      } else {
        const float mf = static_cast<float>(m), rf = static_cast<float>(rs);
        std::memcpy(mean.data() + 4 * r, &mf, 4);
        std::memcpy(rstd.data() + 4 * r, &rf, 4);
      }
    }
  }
  double value(std::int64_t i) const {
    switch (p.dtype) {
      case DType::f32: { float v; std::memcpy(&v, x.data() + 4 * i, 4); return v; }
      case DType::f64: { double v; std::memcpy(&v, x.data() + 8 * i, 8); return v; }
      case DType::f16: { f16 v; std::memcpy(&v, x.data() + 2 * i, 2); return to_float(v); }
      case DType::bf16: { bf16 v; std::memcpy(&v, x.data() + 2 * i, 2); return to_float(v); }
    }
    return 0;
  }
};

// The buffer of Operands that holds an operand (the backward's dx in y's, its saved statistics in mean and rstd),
// or null (quant_y: not asked for).
std::vector<std::byte>* buffer_of(Operands& o, Operand which) {
  switch (which) {
    case Operand::x: return &o.x;
    case Operand::gamma: return &o.g;
    case Operand::beta: return &o.b;
    case Operand::y:
    case Operand::dx: return &o.y;
    case Operand::mean:
    case Operand::saved_mean: return &o.mean;
    case Operand::rstd:
    case Operand::saved_rstd: return &o.rstd;
    case Operand::residual: return &o.residual;
    case Operand::h: return &o.h;
    case Operand::q: return &o.q;
    case Operand::scales: return &o.scales;
    case Operand::dy: return &o.dy;
    case Operand::dgamma: return &o.dgamma;
    case Operand::dbeta: return &o.dbeta;
    case Operand::quant_y: return nullptr;
  }
  return nullptr;
}

struct KernelBody : Body {
  const KernelInfo* k;
  Operands o;
  Tensors t;  // from the operand table, once: every operand the op has that Operands holds
  KernelBody(const Entry& e, const Settings& s) : k(e.kernel), o(e, s) {
    for (const OperandInfo& row : kOperandTable) {
      std::vector<std::byte>* b = buffer_of(o, row.operand);
      if (present(row, o.p) && b && !b->empty()) set_slot(t, row, b->data());
    }
  }
  void call() override { k->run(o.p, t); }
};

// x -> y, split into the row ranges a kernel's parallel_rows(rows, threads, fn, cols) uses, on the same pool.
struct CopyBody : Body {
  using CopyFn = void (*)(void*, const void*, std::size_t);
  Operands o;
  CopyFn copy;
  CopyBody(const Entry& e, const Settings& s, CopyFn fn) : o(e, s), copy(fn) {}
  void call() override {
    const std::size_t row_bytes = static_cast<std::size_t>(o.p.cols) * size_of(o.p.dtype);
    parallel_rows(o.p.rows, o.p.threads, [&](std::int64_t begin, std::int64_t end) {
      const std::size_t at = static_cast<std::size_t>(begin) * row_bytes;
      copy(o.y.data() + at, o.x.data() + at, static_cast<std::size_t>(end - begin) * row_bytes);
      if (!o.h.empty()) copy(o.h.data() + at, o.residual.data() + at, static_cast<std::size_t>(end - begin) * row_bytes);
    }, o.p.cols);
  }
};

void copy_memcpy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

#if LNORM_HAVE_DNNL
// oneDNN 2.x as Debian builds it runs on OpenMP (libgomp: DNNL_CPU_RUNTIME OMP in dnnl_config.h) and
// takes its thread count from omp_get_max_threads() of the calling thread, which defaults to every core.
// We set it with omp_set_num_threads, looked up once in the process (libdnnl brings libgomp in), so
// lnorm itself needs no OpenMP; a oneDNN on another runtime has no such symbol and its baseline is refused.
struct OmpThreads {
  void (*set)(int) = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  int (*get)() = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
};
const OmpThreads& omp_threads() {
  static const OmpThreads o;
  return o;
}

// Sets oneDNN's thread count; false if it cannot be set or does not hold.
bool set_onednn_threads(int threads) {
  const OmpThreads& o = omp_threads();
  if (!o.set || !o.get) return false;
  o.set(threads);
  return o.get() == threads;
}
#endif

#if LNORM_HAVE_DNNL
struct OneDnnBody : Body {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<std::byte> x, y;
  std::vector<float> scale, shift;
  dnnl::memory src, dst, sc, sh;
  dnnl::layer_normalization_forward prim;
  int threads;
  OneDnnBody(const Entry& e, const Settings& s) : threads(s.threads) {
    using namespace dnnl;
    if (!set_onednn_threads(threads)) throw std::runtime_error("cannot set oneDNN's thread count");
    const memory::data_type dt = e.dtype == DType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
    const memory::desc md({e.shape.rows, e.shape.cols}, dt, memory::format_tag::ab);
    const auto flags = s.affine ? normalization_flags::use_scale | normalization_flags::use_shift : normalization_flags::none;
    layer_normalization_forward::primitive_desc pd(
        layer_normalization_forward::desc(prop_kind::forward_inference, md, 1e-5f, flags), eng);
    x = random_data(e.dtype, e.shape.rows * e.shape.cols, 1);
    y.resize(x.size());
    src = memory(md, eng, x.data());
    dst = memory(md, eng, y.data());
    scale.assign(static_cast<std::size_t>(e.shape.cols), 1.5f);
    shift.assign(scale.size(), 0.25f);
    const memory::desc wd({e.shape.cols}, memory::data_type::f32, memory::format_tag::a);
    sc = memory(wd, eng, scale.data());
    sh = memory(wd, eng, shift.data());
    prim = layer_normalization_forward(pd);
  }
  void call() override {
    set_onednn_threads(threads);  // a per-thread OpenMP setting: the benchmark thread is the one that calls
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, sc}, {DNNL_ARG_SHIFT, sh}});
    strm.wait();
  }
};
#endif

}  // namespace

std::string onednn_unavailable(DType d, Op op) {
#if LNORM_HAVE_DNNL
  // oneDNN's layer_normalization gained an RMSNorm flag (normalization_flags::rms_norm) in 3.1.
  if (op == Op::rmsnorm && DNNL_VERSION_MAJOR * 100 + DNNL_VERSION_MINOR < 301)
    return "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) +
           " has no RMSNorm (its rms_norm flag came in 3.1)";
  if (op != Op::layernorm) return "the oneDNN baseline is LayerNorm's";
  if (d != DType::f32 && d != DType::bf16) return "oneDNN's layer norm takes f32 and bf16 only";
  if (!omp_threads().set || !omp_threads().get) return "cannot set oneDNN's thread count: no omp_set_num_threads in this process";
  try {
    Settings s;
    OneDnnBody probe(Entry{"onednn", nullptr, d, Shape{1, 64}}, s);
  } catch (const dnnl::error& e) {
    return std::string("oneDNN declines ") + std::string(name(d)) + " here: " + e.what();
  }
  return "";
#else
  (void)d, (void)op;
  return "not built (" + *onednn_not_built() + ")";
#endif
}

std::optional<std::string> onednn_not_built() {
#if LNORM_HAVE_DNNL
  return std::nullopt;
#elif defined(LNORM_ONEDNN_WHY)
  return std::string(LNORM_ONEDNN_WHY);
#else
  return std::string("built without oneDNN");
#endif
}

const std::vector<std::string>& copy_names() {
  static const std::vector<std::string> names = {"memcpy", "avx2_copy", "avx2_stream", "avx512_copy", "avx512_stream"};
  return names;
}

bool is_copy(std::string_view what) {
  for (const std::string& n : copy_names())
    if (n == what) return true;
  return false;
}

std::string avx2_copies_unavailable() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? "" : "needs AVX2 (this CPU lacks it)";
}

// GCC's and clang's __builtin_cpu_supports("avx512f") also check XGETBV: the OS must save the opmask and
// ZMM state (XCR0 bits 5-7) for the feature to be reported.
std::string avx512_copies_unavailable() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? "" : "needs AVX-512 F (this CPU lacks it)";
}

std::string copy_unavailable(std::string_view what) {
  if (what == "avx2_copy" || what == "avx2_stream") return avx2_copies_unavailable();
  if (what == "avx512_copy" || what == "avx512_stream") return avx512_copies_unavailable();
  return "";
}

std::unique_ptr<Body> make_body(const Entry& e, const Settings& s) {
  if (e.kernel) return std::make_unique<KernelBody>(e, s);
  if (e.what == "memcpy") return std::make_unique<CopyBody>(e, s, &copy_memcpy);
  if (e.what == "avx2_copy" && avx2_copies_unavailable().empty()) return std::make_unique<CopyBody>(e, s, &copy_avx2);
  if (e.what == "avx2_stream" && avx2_copies_unavailable().empty()) return std::make_unique<CopyBody>(e, s, &copy_avx2_stream);
  if (e.what == "avx512_copy" && avx512_copies_unavailable().empty()) return std::make_unique<CopyBody>(e, s, &copy_avx512);
  if (e.what == "avx512_stream" && avx512_copies_unavailable().empty())
    return std::make_unique<CopyBody>(e, s, &copy_avx512_stream);
#if LNORM_HAVE_DNNL
  if (e.what == "onednn") return std::make_unique<OneDnnBody>(e, s);
#endif
  return nullptr;
}

}  // namespace lnorm::bench
