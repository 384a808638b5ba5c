// A/B driver (issue 37; README.md beside it): two settings of a temporary environment knob (LNORM_TUNE_ORDER, or the
// variable named by ABVAR) and a streaming copy, interleaved in
// rounds inside one process; per-round ratios, medians.
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "lnorm/kernel.hpp"
#include "lnorm/registry.hpp"
#include "lnorm/problem.hpp"
using namespace lnorm;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static void stream_copy(const void* s, void* d, size_t bytes) {
  auto* a = (const __m512i*)s; auto* b = (__m512i*)d;
  for (size_t i = 0; i < bytes / 64; ++i) _mm512_stream_si512(b + i, _mm512_loadu_si512(a + i));
  _mm_sfence();
}
int main(int argc, char** argv) {
  // ab KERNEL OP DTYPE ROWS COLS MODEA MODEB ROUNDS [bwd]
  const char* kn = argv[1]; std::string op = argv[2], dt = argv[3];
  long rows = atol(argv[4]), cols = atol(argv[5]); const char* ma = argv[6]; const char* mb = argv[7]; int R = atoi(argv[8]);
  DType d = dt == "f32" ? DType::f32 : DType::bf16;
  Problem p = make_problem(rows, cols, d, 1e-5, true, true);
  if (op == "rmsnorm") p = with_op(p, Op::rmsnorm);
  size_t es = d == DType::f32 ? 4 : 2, nb = rows * cols * es;
  char* x = (char*)aligned_alloc(64, nb); char* y = (char*)aligned_alloc(64, nb); char* y2 = (char*)aligned_alloc(64, nb);
  std::vector<char> g(cols * es), b(cols * es); std::vector<float> mean(rows), rstd(rows);
  std::mt19937 rng(1); std::normal_distribution<float> nd(0.5f, 2.0f);
  auto put = [&](char* dst, long i, float v) { if (es == 4) memcpy(dst + 4 * i, &v, 4); else { uint32_t u; memcpy(&u, &v, 4); uint16_t h = u >> 16; memcpy(dst + 2 * i, &h, 2); } };
  for (long i = 0; i < rows * cols; ++i) put(x, i, nd(rng));
  for (long i = 0; i < cols; ++i) { put(g.data(), i, 1 + 0.1f * nd(rng)); put(b.data(), i, 0.1f * nd(rng)); }
  memset(y, 0, nb); memset(y2, 0, nb);
  Tensors t; t.x = x; t.gamma = g.data(); t.beta = b.data(); t.y = y; t.mean = mean.data(); t.rstd = rstd.data();
  // DIR "bwd" (a ninth argument): the backward, from the forward's saved statistics (welford's), dy random, dx into y.
  const bool bwd = argc > 9 && std::string(argv[9]) == "bwd";
  char* dy = nullptr;
  std::vector<char> dg(cols * es), db(cols * es);
  if (bwd) {
    const KernelInfo* w = find_kernel("welford");
    w->run(p, t);
    dy = (char*)aligned_alloc(64, nb);
    for (long i = 0; i < rows * cols; ++i) put(dy, i, nd(rng));
    p = with_op(p, op == "rmsnorm" ? Op::rmsnorm_bwd : Op::layernorm_bwd);
    Tensors tb; tb.x = x; tb.gamma = g.data(); tb.dy = dy; tb.saved_mean = op == "rmsnorm" ? nullptr : mean.data(); tb.saved_rstd = rstd.data();
    tb.dx = y; tb.dgamma = dg.data(); tb.dbeta = db.data();
    t = tb;
  }
  const KernelInfo* k = find_kernel(kn);
  if (auto why = unavailable_reason(*k, p)) { printf("unavailable: %s\n", why->c_str()); return 1; }
  const double bytes = (bwd ? 3.0 : 2.0) * nb;  // x (and dy) read, y (dx) written: the bench's count
  auto timed = [&](auto&& f) { int calls = 0; double t0 = now(), t1; do { f(); ++calls; t1 = now(); } while (t1 - t0 < 0.05); return bytes * calls / (t1 - t0) / 1e9; };
  auto runA = [&] { setenv(getenv("ABVAR") ? getenv("ABVAR") : "LNORM_TUNE_ORDER", ma, 1); k->run(p, t); };
  auto runB = [&] { setenv(getenv("ABVAR") ? getenv("ABVAR") : "LNORM_TUNE_ORDER", mb, 1); k->run(p, t); };
  // The backward's copy moves 2/3 of its counted bytes: read its B/A only.
  auto cp = [&] { if (bwd) { stream_copy(x, y2, nb / 2); stream_copy(dy, y2 + nb / 2, nb / 2); } else stream_copy(x, y2, nb); };
  runA(); runB(); cp();
  std::vector<double> ra, rb, rab, ca, cb;
  for (int r = 0; r < R; ++r) {
    double A, B, C;
    if (r % 2) { A = timed(runA); B = timed(runB); C = timed(cp); } else { C = timed(cp); B = timed(runB); A = timed(runA); }
    ra.push_back(A); rb.push_back(B); rab.push_back(B / A); ca.push_back(A / C); cb.push_back(B / C);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  printf("%-7s %-8s %-4s %6ldx%-5ld  mode%s %5.1f GB/s (%.2f of copy)  mode%s %5.1f (%.2f)  B/A %.3f  [B/A q1 %.3f q3 %.3f]\n", kn, op.c_str(), dt.c_str(), rows, cols, ma, med(ra), med(ca), mb, med(rb), med(cb), med(rab),
         [&]{auto v=rab; std::sort(v.begin(),v.end()); return v[v.size()/4];}(), [&]{auto v=rab; std::sort(v.begin(),v.end()); return v[3*v.size()/4];}());
}
