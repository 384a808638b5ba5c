// Add & Norm's reference (reference/include/lnorm/add.hpp): h = x + residual rounded once, checked against an
// independent rational evaluation (Boost cpp_rational: the exact sum, then the nearest value of the
// format found by comparing distances, ties to even), and the fused reference's y as the plain
// reference's y of h as stored.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <boost/multiprecision/cpp_int.hpp>
#include <catch2/catch.hpp>

#include "lnorm/add.hpp"
#include "lnorm/format.hpp"
#include "lnorm/reference.hpp"

using namespace lnorm;
using boost::multiprecision::cpp_rational;

namespace {

cpp_rational exact(double v) {
  int e = 0;
  const double m = std::frexp(v, &e);                 // v = m·2^e, |m| in [0.5, 1)
  const auto mi = static_cast<long long>(std::ldexp(m, 53));  // exact: 53-bit integer
  cpp_rational r(mi);
  e -= 53;
  const boost::multiprecision::cpp_int p2 = boost::multiprecision::cpp_int(1) << std::abs(e);  // 2^|e|, one shift
  return e >= 0 ? cpp_rational(r * p2) : cpp_rational(r / p2);
}

// The value of f nearest the exact sum, ties to the even ordinal, by rational comparison with the
// candidate's neighbours; overflow past the largest finite value's half ulp is ±Inf.
std::uint64_t independent_sum(const Format& f, double a, double b) {
  const cpp_rational s = exact(a) + exact(b);
  const double guess = round_to_format(f, static_cast<double>(s));  // only a starting point
  std::int64_t k = std::isinf(guess) ? (guess > 0 ? f.inf_ordinal() - 1 : -(f.inf_ordinal() - 1))
                                     : ordinal_of_bits(f, double_to_bits(f, guess));
  const double top = std::ldexp(2.0, f.emax);
  auto value = [&](std::int64_t o) -> cpp_rational {
    if (o >= f.inf_ordinal()) return exact(top);
    if (o <= -f.inf_ordinal()) return exact(-top);
    return exact(bits_to_double(f, bits_of_ordinal(f, o)));
  };
  auto dist = [&](std::int64_t o) { cpp_rational d = value(o) - s; return d < 0 ? -d : d; };
  for (int step = 0; step < 4; ++step) {  // walk to the nearest (the guess is within an ulp)
    if (k - 1 > -f.inf_ordinal() - 1 && dist(k - 1) < dist(k)) --k;
    else if (k + 1 < f.inf_ordinal() + 1 && dist(k + 1) < dist(k)) ++k;
  }
  for (std::int64_t o : {k - 1, k + 1}) {  // a tie: the even one
    if (o > -f.inf_ordinal() - 1 && o < f.inf_ordinal() + 1 && dist(o) == dist(k) && (o & 1) == 0) k = o;
  }
  if (s == 0) return double_to_bits(f, a + b);  // IEEE's zero sign: −0 only for −0 + −0
  return bits_of_ordinal(f, k);
}

double random_value(std::mt19937_64& rng, const Format& f) {
  // Exponents across the whole range (subnormals included), random significands, both signs.
  std::uniform_int_distribution<int> e(f.emin - f.precision, f.emax);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  const double v = round_to_format(f, std::ldexp(m(rng), e(rng)) * ((rng() & 1) ? -1 : 1));
  return std::isinf(v) ? std::copysign(std::ldexp(1.0, f.emax), v) : v;
}

}  // namespace

TEST_CASE("h = x + residual is the exact sum rounded once, for every dtype pairing") {
  std::mt19937_64 rng(23);
  struct Pair {
    DType x, h;
  };
  for (Pair pr : {Pair{DType::f32, DType::f32}, Pair{DType::f16, DType::f16}, Pair{DType::bf16, DType::bf16},
                  Pair{DType::f64, DType::f64}, Pair{DType::f16, DType::f32}, Pair{DType::bf16, DType::f32}}) {
    const Format xf = format_of(pr.x), hf = format_of(pr.h);
    int checked = 0;
    for (int i = 0; i < 20000; ++i) {
      const double a = random_value(rng, xf);
      // Half the residuals near −a (cancellation) or near a's scale (ties and carries), half anywhere.
      double b = random_value(rng, hf);
      if (i % 4 == 1) b = round_to_format(hf, -a * (1 + std::ldexp(static_cast<double>(rng() % 64), -hf.precision)));
      if (i % 4 == 2) b = round_to_format(hf, a * std::ldexp(1.0, -static_cast<int>(rng() % (2 * hf.precision + 4))));
      if (!std::isfinite(b)) continue;
      INFO(name(pr.x) << " + " << name(pr.h) << ": " << a << " + " << b);
      REQUIRE(round_sum_bits(hf, a, b) == independent_sum(hf, a, b));
      ++checked;
    }
    CHECK(checked > 15000);
  }
}

TEST_CASE("h at the edges: ties to even, overflow, signed zeros, NaN") {
  const Format f16 = format_of(DType::f16), bf16 = format_of(DType::bf16), f32 = format_of(DType::f32);
  CHECK(bits_to_double(f16, round_sum_bits(f16, 2048, 1)) == 2048);      // a tie: to the even 2048
  CHECK(bits_to_double(f16, round_sum_bits(f16, 2050, 1)) == 2052);      // a tie: to the even 2052
  CHECK(std::isinf(bits_to_double(f16, round_sum_bits(f16, 65504, 16))));  // 65520: the tie above max → Inf
  CHECK(bits_to_double(f16, round_sum_bits(f16, 65504, 8)) == 65504);
  CHECK(std::isinf(bits_to_double(bf16, round_sum_bits(bf16, 0x1.fep127, 0x1p119))));
  CHECK(round_sum_bits(f32, -0.0, -0.0) == 0x80000000u);
  CHECK(round_sum_bits(f32, -0.0, 0.0) == 0u);
  CHECK(round_sum_bits(f32, 1.5, -1.5) == 0u);
  CHECK(bits_is_nan(f32, round_sum_bits(f32, INFINITY, -INFINITY)));
  CHECK(bits_is_nan(f32, round_sum_bits(f32, NAN, 1)));
  CHECK(bits_to_double(f32, round_sum_bits(f32, INFINITY, 1)) == INFINITY);
  // The cancellation: |x| ≈ |residual| ≈ 1e4, the sum ≈ 1, exact.
  CHECK(bits_to_double(f32, round_sum_bits(f32, 10001.25, -10000.0)) == 1.25);
}

TEST_CASE("the fused reference's y, mean and rstd are the plain reference's of h as stored") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  for (Op op : kNormOps) {
    for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      for (bool f32_residual : {false, true}) {
        if (f32_residual && (d == DType::f32 || d == DType::f64)) continue;
        const DType hd = f32_residual ? DType::f32 : d;
        const std::int64_t rows = 5, cols = 37;
        Problem p = with_op(make_problem(rows, cols, d, 1e-5, false, false), Op{.norm = op.norm, .prologue = Prologue::residual_add});
        p = set_residual(p, hd);
        const Format xf = format_of(d), hf = format_of(hd);
        std::vector<std::byte> x(static_cast<std::size_t>(rows * cols) * size_of(d)), r(static_cast<std::size_t>(rows * cols) * size_of(hd));
        for (std::int64_t i = 0; i < rows * cols; ++i) {
          const std::uint64_t xb = double_to_bits(xf, round_to_format(xf, 1e4 * nd(rng)));
          const std::uint64_t rb = double_to_bits(hf, round_to_format(hf, -bits_to_double(xf, xb) + nd(rng)));
          std::memcpy(x.data() + i * size_of(d), &xb, size_of(d));
          std::memcpy(r.data() + i * size_of(hd), &rb, size_of(hd));
        }
        std::vector<std::byte> h(r.size()), y(x.size()), y2(x.size()), h_only(r.size());
        std::vector<double> mean(rows), rstd(rows);
        Tensors t{x.data(), nullptr, nullptr, y.data(), op.norm == Norm::layernorm ? mean.data() : nullptr, rstd.data()};
        t.residual = r.data();
        t.h = h.data();
        reference(p, t);
        // The plain norm of h: y in x's dtype, read from h's dtype, is the fused problem without the add.
        Problem plain = p;
        for (std::int64_t row = 0; row < rows; ++row)
          add_row(p, x.data() + row * cols * size_of(d), r.data() + row * cols * size_of(hd), cols,
                  h_only.data() + row * cols * size_of(hd), nullptr);
        REQUIRE(h_only == h);
        RowReferencer ref(plain);
        for (std::int64_t row = 0; row < rows; ++row) {
          const RowReference rr = ref.run(h.data() + row * cols * size_of(hd), nullptr, nullptr, cols,
                                          y2.data() + row * cols * size_of(d), nullptr);
          // The stats buffers hold f32 (f64 for f64 data), as a kernel writes them.
          const auto stat = [&](const std::vector<double>& v) {
            return d == DType::f64 ? v[static_cast<std::size_t>(row)] : static_cast<double>(reinterpret_cast<const float*>(v.data())[row]);
          };
          if (op.norm == Norm::layernorm) CHECK(rr.mean == stat(mean));
          CHECK(rr.rstd == stat(rstd));
        }
        CHECK(y2 == y);
      }
    }
  }
}
