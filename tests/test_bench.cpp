// The copy ceiling (bench/src/ceiling.cpp): which copy sets it, and how a kernel's speed is shown
// against it. Pure functions over Results; the timing itself is exercised by test_cli_bench.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "copies.hpp"
#include "lnorm/bench.hpp"

using namespace lnorm;
using namespace lnorm::bench;

namespace {

Result measured(const std::string& what, DType d, Shape s, double gbps) {
  Result r;
  r.entry = Entry{what, nullptr, d, s};
  r.bytes_per_second = gbps * 1e9;
  r.seconds = 1;
  return r;
}

}  // namespace

TEST_CASE("copy ceiling: the fastest copy of the same dtype and shape, named", "[bench][ceiling]") {
  const Shape s{64, 768}, other{64, 4096};
  std::vector<Result> rs = {measured("memcpy", DType::bf16, s, 4.6),       // glibc's slow buffer pair
                            measured("avx2_copy", DType::bf16, s, 90.0),
                            measured("avx2_stream", DType::bf16, s, 40.0),
                            measured("avx2_stream", DType::f32, s, 200.0),  // other dtype: not this ceiling
                            measured("memcpy", DType::bf16, other, 300.0),  // other shape
                            measured("avx2", DType::bf16, s, 500.0)};       // a kernel is never the ceiling
  const auto c = copy_ceiling(rs, DType::bf16, s);
  REQUIRE(c);
  CHECK(c->winner == "avx2_copy");
  CHECK(c->bytes_per_second == 90.0e9);

  // Every copy takes its turn at being the fastest.
  for (const std::string& name : copy_names()) {
    std::vector<Result> three;
    for (const std::string& n : copy_names()) three.push_back(measured(n, DType::f32, s, n == name ? 30.0 : 20.0));
    const auto w = copy_ceiling(three, DType::f32, s);
    REQUIRE(w);
    CHECK(w->winner == name);
  }
}

TEST_CASE("copy ceiling: Add & Norm's is the four-stream copy (x to y, residual to h), never the two-stream one", "[bench][ceiling]") {
  const Shape s{64, 768};
  Result two = measured("avx2_copy", DType::f32, s, 90.0);
  Result four = measured("avx2_copy", DType::f32, s, 60.0);
  four.entry.op = Op::add_layernorm;
  CHECK(four.entry.name() == "avx2_copy/add/f32/64x768");
  const std::vector<Result> rs = {two, four};
  for (Op op : {Op::add_layernorm, Op::add_rmsnorm}) {
    const auto c = copy_ceiling(rs, DType::f32, s, op);
    REQUIRE(c);
    CHECK(c->bytes_per_second == 60.0e9);
  }
  for (Op op : {Op::layernorm, Op::rmsnorm}) CHECK(copy_ceiling(rs, DType::f32, s, op)->bytes_per_second == 90.0e9);
  CHECK_FALSE(copy_ceiling({two}, DType::f32, s, Op::add_rmsnorm));  // no four-stream copy measured: none
}

TEST_CASE("copy ceiling: skipped copies do not count, and none measured gives none", "[bench][ceiling]") {
  const Shape s{16, 64};
  Result fast = measured("avx2_stream", DType::f32, s, 99.0);
  fast.skipped = "needs AVX2 (this CPU lacks it)";
  std::vector<Result> rs = {measured("memcpy", DType::f32, s, 10.0), fast};
  const auto c = copy_ceiling(rs, DType::f32, s);
  REQUIRE(c);
  CHECK(c->winner == "memcpy");
  CHECK_FALSE(copy_ceiling({fast, measured("avx2", DType::f32, s, 5.0)}, DType::f32, s));
}

TEST_CASE("copy ceiling: a result above 1.05x is 'ceiling suspect' with both numbers, never a percentage",
          "[bench][ceiling]") {
  const Ceiling c{24.0e9, "avx2_stream"};
  CHECK(percent_of_copy(10.0 / 24.0, 10.0e9, c) == "42%");
  CHECK(percent_of_copy(1.0, 24.0e9, c) == "100%");
  CHECK(percent_of_copy(25.0 / 24.0, 25.0e9, c) == "104%");  // within the 5% noise band: shown as measured
  CHECK_FALSE(ceiling_suspect(25.0 / 24.0));
  CHECK(ceiling_suspect(34.32 / 24.0));
  const std::string s = percent_of_copy(34.32 / 24.0, 34.32e9, c);  // the 143% once reported
  CHECK(s == "ceiling suspect: 34.32 GB/s vs copy 24.00 GB/s (avx2_stream)");
  CHECK(s.find('%') == std::string::npos);
}

// On a shared memory system the copy's bandwidth moves 2x from one second to the next. Timed in rounds,
// the kernel is held to the copy of its own round, not to the best copy of the whole run.
TEST_CASE("copy ceiling in rounds: each round's fastest copy, the fraction taken per round", "[bench][ceiling]") {
  const Shape s{16384, 4096};
  const auto with_rounds = [&](const std::string& what, std::vector<double> gbps) {
    std::vector<double> sorted = gbps;
    std::sort(sorted.begin(), sorted.end());
    Result r = measured(what, DType::f32, s, sorted[sorted.size() / 2]);
    for (double g : gbps) r.round_bytes_per_second.push_back(g * 1e9);
    return r;
  };
  // The memory system halves its bandwidth in rounds 1 and 3; the kernel runs at 0.75 of the copy in every round.
  const std::vector<Result> rs = {with_rounds("avx2_copy", {40, 20, 40, 20, 40}), with_rounds("avx2_stream", {44, 22, 44, 22, 44}),
                                  with_rounds("avx2", {33, 16.5, 33, 16.5, 33})};
  const auto c = copy_ceiling(rs, DType::f32, s);
  REQUIRE(c);
  CHECK(c->winner == "avx2_stream");
  CHECK(c->bytes_per_second == 44e9);
  const auto f = fraction_of_copy(rs[2], rs);
  REQUIRE(f);
  CHECK(*f == Approx(0.75));
  CHECK(fraction_of_copy(rs[2], {rs[2]}) == std::nullopt);  // no copy: no fraction
  // Where they differ, the round's own copy counts: 0.5, 0.9 and 0.9 of it (the medians' ratio would read 20/30).
  const std::vector<Result> mixed = {with_rounds("avx2_stream", {40, 20, 30}), with_rounds("avx2", {20, 18, 27})};
  CHECK(*fraction_of_copy(mixed[1], mixed) == Approx(0.9));
  CHECK(copy_ceiling(mixed, DType::f32, s)->bytes_per_second == 30e9);
  // Copies with unequal round counts (results merged from elsewhere): the fastest median, as without rounds.
  std::vector<Result> merged = mixed;
  merged.push_back(with_rounds("memcpy", {35}));
  CHECK(copy_ceiling(merged, DType::f32, s)->bytes_per_second == 35e9);
  CHECK(*fraction_of_copy(merged[1], merged) == Approx(20.0 / 35.0));
}

TEST_CASE("copies: memcpy always runs, and the AVX2 and AVX-512 loops say why not where they cannot", "[bench][ceiling]") {
  CHECK(copy_names().size() == 5);
  CHECK(copy_unavailable("memcpy").empty());
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) {
    CHECK(copy_unavailable("avx2_copy").empty());
    CHECK(copy_unavailable("avx2_stream").empty());
  } else {
    CHECK_FALSE(copy_unavailable("avx2_stream").empty());
  }
  for (const char* c : {"avx512_copy", "avx512_stream"}) {
    if (__builtin_cpu_supports("avx512f")) CHECK(copy_unavailable(c).empty());
    else CHECK(copy_unavailable(c) == "needs AVX-512 F (this CPU lacks it)");
  }
  CHECK(is_copy("avx2_stream"));
  CHECK_FALSE(is_copy("avx2"));
}

namespace {
// Every byte at every length and misalignment (the lengths cross each loop's 1-vector and 4-vector steps).
void check_copies_every_byte(std::initializer_list<void (*)(void*, const void*, std::size_t)> copies) {
  std::vector<unsigned char> src(1200), dst(1300);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  for (auto* copy : copies) {
    for (std::size_t n : {0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000}) {
      for (std::size_t off : {0, 1, 8, 31, 63}) {
        std::fill(dst.begin(), dst.end(), 0);
        copy(dst.data() + off, src.data() + 3, n);
        INFO("bytes " << n << ", dst offset " << off);
        CHECK(std::equal(src.begin() + 3, src.begin() + 3 + static_cast<std::ptrdiff_t>(n), dst.begin() + static_cast<std::ptrdiff_t>(off)));
        CHECK(std::all_of(dst.begin() + static_cast<std::ptrdiff_t>(off + n), dst.end(), [](unsigned char c) { return c == 0; }));
        CHECK(std::all_of(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(off), [](unsigned char c) { return c == 0; }));
      }
    }
  }
}
}  // namespace

TEST_CASE("copies: the AVX2 loops copy every byte, at every length and misalignment", "[bench][ceiling]") {
  if (!avx2_copies_unavailable().empty()) {
    WARN("skipped: " << avx2_copies_unavailable());
    return;
  }
  check_copies_every_byte({&copy_avx2, &copy_avx2_stream});
}

TEST_CASE("copies: the AVX-512 loops copy every byte, at every length and misalignment", "[bench][ceiling]") {
  if (!avx512_copies_unavailable().empty()) {
    WARN("skipped: " << avx512_copies_unavailable());
    return;
  }
  check_copies_every_byte({&copy_avx512, &copy_avx512_stream});
}
