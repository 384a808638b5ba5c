// What one timed call does for each kind of entry: a kernel's run, memcpy of the same bytes, or
// oneDNN's layer_normalization_forward (inference, use_scale | use_shift, f32 statistics).
#include "bodies.hpp"

#include <cstring>

#include "lnorm/half.hpp"

#if LNORM_HAVE_DNNL
#include <dnnl.hpp>
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

namespace {

struct KernelBody : Body {
  const KernelInfo* k;
  Problem p;
  std::vector<std::byte> x, g, b, y, mean, rstd;
  KernelBody(const Entry& e, const Settings& s) : k(e.kernel) {
    p = make_problem(e.shape.rows, e.shape.cols, e.dtype, 1e-5, s.affine, s.affine, s.threads);
    x = random_data(e.dtype, p.elements(), 1);
    if (s.affine) g = random_data(e.dtype, p.cols, 2), b = random_data(e.dtype, p.cols, 3);
    y.resize(x.size());
    mean.resize(static_cast<std::size_t>(p.rows) * size_of(stats_dtype(e.dtype)));
    rstd.resize(mean.size());
  }
  void call() override {
    k->run(p, Tensors{x.data(), g.empty() ? nullptr : g.data(), b.empty() ? nullptr : b.data(), y.data(), mean.data(),
                      rstd.data()});
  }
};

struct MemcpyBody : Body {
  std::vector<std::byte> x, y;
  explicit MemcpyBody(const Entry& e) : x(random_data(e.dtype, e.shape.rows * e.shape.cols, 1)), y(x.size()) {}
  void call() override { std::memcpy(y.data(), x.data(), x.size()); }
};

#if LNORM_HAVE_DNNL
struct OneDnnBody : Body {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<std::byte> x, y;
  std::vector<float> scale, shift;
  dnnl::memory src, dst, sc, sh;
  dnnl::layer_normalization_forward prim;
  OneDnnBody(const Entry& e, const Settings& s) {
    using namespace dnnl;
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
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, sc}, {DNNL_ARG_SHIFT, sh}});
    strm.wait();
  }
};
#endif

}  // namespace

std::string onednn_unavailable(DType d) {
#if LNORM_HAVE_DNNL
  if (d != DType::f32 && d != DType::bf16) return "oneDNN's layer norm takes f32 and bf16 only";
  try {
    Settings s;
    OneDnnBody probe(Entry{"onednn", nullptr, d, Shape{1, 64}}, s);
  } catch (const dnnl::error& e) {
    return std::string("oneDNN declines ") + std::string(name(d)) + " here: " + e.what();
  }
  return "";
#else
  (void)d;
  return "built without oneDNN (install libdnnl-dev and reconfigure)";
#endif
}

std::unique_ptr<Body> make_body(const Entry& e, const Settings& s) {
  if (e.kernel) return std::make_unique<KernelBody>(e, s);
  if (e.what == "memcpy") return std::make_unique<MemcpyBody>(e);
#if LNORM_HAVE_DNNL
  if (e.what == "onednn") return std::make_unique<OneDnnBody>(e, s);
#endif
  return nullptr;
}

}  // namespace lnorm::bench
