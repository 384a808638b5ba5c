// Specifications for the op as data (lnorm/op.hpp) and the one dispatch (kernels/dispatch.cpp): the table's
// names and codes are the ones users and plugins have always used; a composition without a row is no op; a
// kernel is offered exactly what its Takes declares; Add & Norm reaches a kernel's forward through the
// adaptor (h as x, in chunks, on the threads) unless the kernel fuses it; the backward entry gets the backward.
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/cpu/row_split.hpp"
#include "lnorm/kernel.hpp"

using namespace lnorm;

TEST_CASE("op table: names and plugin codes as before, parts read back, no row for the fused add's backward", "[op]") {
  const char* names[] = {"layernorm", "rmsnorm", "add_layernorm", "add_rmsnorm", "layernorm_bwd", "rmsnorm_bwd"};
  for (unsigned code = 0; code < 6; ++code) {
    INFO(names[code]);
    const auto op = parse_op(names[code]);
    REQUIRE(op);
    CHECK(lnorm::code(*op) == code);  // the plugin ABI's LNORM_* numbers of versions 1-4
    CHECK(name(*op) == names[code]);
    CHECK(op_of_code(code) == op);
  }
  CHECK(Op::add_rmsnorm.norm == Norm::rmsnorm);
  CHECK(Op::add_rmsnorm.prologue == Prologue::residual_add);
  CHECK(Op::layernorm_bwd.direction == Direction::bwd);
  CHECK(plain(Norm::rmsnorm) == Op::rmsnorm);
  const Op add_bwd{Norm::layernorm, Prologue::residual_add, Epilogue::y_as_x, Direction::bwd};
  CHECK_FALSE(find_op(add_bwd));
  CHECK(name(add_bwd) == "?");
  CHECK_FALSE(parse_op("add_layernorm_bwd"));
  CHECK_FALSE(op_of_code(6));
}

namespace {

// What the fake kernel's entries were handed.
struct Call {
  std::string entry;
  Op op;
  std::int64_t rows;
  int threads;
  const void* x;
  const void* residual;
  void* y;
};
std::vector<Call> g_log;  // single-threaded tests below
// The row ranges the forward's split_rows handed it, and whether h was formed for them by then.
std::vector<std::pair<std::int64_t, std::int64_t>> g_ranges;
bool g_h_ready = true;

void record_forward(const Problem& p, const Tensors& t) {
  g_log.push_back({"forward", p.op, p.rows, p.threads, t.x, t.residual, t.y});
  cpu::split_rows(p, [&](std::int64_t begin, std::int64_t end) {
    g_ranges.emplace_back(begin, end);
    const float* x = static_cast<const float*>(t.x);  // h, when the adaptor handed it over
    for (std::int64_t i = begin * p.cols; i < end * p.cols; ++i) g_h_ready = g_h_ready && (p.op.prologue == Prologue::none || x[i] == 3.0f);
  });
}
void never_splits(const Problem&, const Tensors&) {}
void record_backward(const Problem& p, const Tensors& t) { g_log.push_back({"backward", p.op, p.rows, p.threads, t.x, t.residual, t.dx}); }

KernelInfo fake(Takes takes) {
  return KernelInfo{"fake", "records its calls", takes, &record_forward, &record_backward};
}

}  // namespace

TEST_CASE("dispatch: a kernel is offered what its Takes declares, and nothing else", "[op]") {
  const KernelInfo plain_only = fake({.dtypes = {DType::f32}, .forward_norms = {Norm::rmsnorm}});
  CHECK(plain_only.implements(Op::rmsnorm));
  CHECK_FALSE(plain_only.implements(Op::layernorm));
  CHECK_FALSE(plain_only.implements(Op::add_rmsnorm));
  CHECK_FALSE(plain_only.implements(Op::rmsnorm_bwd));  // no backward norms declared
  Problem p = make_problem(4, 8, DType::f32, 1e-5, true, true);
  CHECK(unavailable_reason(plain_only, p) == std::string("fake does not implement layernorm"));
  CHECK_FALSE(unavailable_reason(plain_only, with_op(p, Op::rmsnorm)));
  CHECK(unavailable_reason(plain_only, make_problem(4, 8, DType::f64, 1e-5, true, true)) ==
        std::string("fake does not implement layernorm"));

  const KernelInfo both = fake({.dtypes = {DType::f16}, .forward_norms = kBothNorms, .backward_norms = {Norm::layernorm},
                                .prologues = kWithAdd, .f32_params = false});
  CHECK(both.implements(Op::add_layernorm));
  CHECK(both.implements(Op::layernorm_bwd));
  CHECK_FALSE(both.implements(Op::rmsnorm_bwd));
  Problem h = make_problem(4, 8, DType::f16, 1e-5, true, true);
  CHECK(unavailable_reason(both, set_params(h, DType::f32, 0)) == std::string("fake takes gamma/beta in x's dtype without an offset"));
  const Problem add = set_residual(with_op(h, Op::add_layernorm), DType::f32);
  CHECK(unavailable_reason(both, add) == std::string("fake takes the residual in x's dtype only, not f32 beside 16-bit x"));
  CHECK(unavailable_reason(both, make_problem(4, 8, DType::f32, 1e-5, true, true)) == std::string("fake does not support dtype f32"));
}

TEST_CASE("dispatch: the backward entry gets the backward, and Add & Norm goes through the adaptor unless the kernel fuses it",
          "[op]") {
  const std::int64_t rows = 3000, cols = 16;  // 64 KiB of f32 h is 1024 rows: three chunks on one thread
  std::vector<float> x(rows * cols, 1.0f), res(rows * cols, 2.0f), h(rows * cols, 0.0f), y(rows * cols);
  Tensors t;
  t.x = x.data();
  t.residual = res.data();
  t.h = h.data();
  t.y = y.data();
  const Problem add = with_op(make_problem(rows, cols, DType::f32, 1e-5, false, false, 1), Op::add_rmsnorm);

  g_log.clear();
  g_ranges.clear();
  g_h_ready = true;
  const KernelInfo adapted = fake({.dtypes = {DType::f32}, .forward_norms = kBothNorms, .backward_norms = kBothNorms,
                                   .prologues = kWithAdd});
  adapted.run(add, t);
  REQUIRE(g_log.size() == 1);  // one call on the whole problem: parameters staged once, streaming by its size
  CHECK(g_log[0].op == Op::add_rmsnorm);  // the op as asked: the kernel reads its norm and input_dtype
  CHECK(g_log[0].rows == rows);
  CHECK(g_log[0].residual == nullptr);
  CHECK(g_log[0].x == h.data());  // h as x
  CHECK(g_log[0].y == y.data());
  // Its split_rows ran it in chunks, h formed for each chunk before the kernel's rows saw it.
  const std::vector<std::pair<std::int64_t, std::int64_t>> chunks{{0, 1024}, {1024, 2048}, {2048, 3000}};
  CHECK(g_ranges == chunks);
  CHECK(g_h_ready);
  for (float v : h) REQUIRE(v == 3.0f);
  CHECK(pending_add() == nullptr);

  // A forward that never splits its rows would read h unformed: refused loudly.
  KernelInfo lazy = adapted;
  lazy.forward = &never_splits;
  CHECK_THROWS_AS(lazy.run(add, t), std::logic_error);
  CHECK(pending_add() == nullptr);

  g_log.clear();
  const KernelInfo fused = fake({.dtypes = {DType::f32}, .forward_norms = kBothNorms, .prologues = kWithAdd, .fuses_add = true});
  fused.run(add, t);
  REQUIRE(g_log.size() == 1);
  CHECK(g_log[0].x == x.data());
  CHECK(g_log[0].residual == res.data());
  CHECK(g_log[0].rows == rows);

  g_log.clear();
  adapted.run(with_op(make_problem(rows, cols, DType::f32, 1e-5, true, false), Op::rmsnorm_bwd), t);
  REQUIRE(g_log.size() == 1);
  CHECK(g_log[0].entry == "backward");
}
