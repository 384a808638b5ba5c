// Exact sums of doubles and of their squares in fixed-point integers (Kulisch's long accumulator).
//
// A format value x = X * 2^lsb with X an integer, lsb the format's smallest subnormal exponent
// (-149 for f32/f16/bf16, -1074 for f64). |X| < 2^(emax + 1 - lsb), so
//   f32 family: |X| < 2^277,  n|X| < 2^340 for n < 2^63  -> Σx  fits 6 limbs of 64 bits,
//               X^2 < 2^554,  n X^2 < 2^617              -> Σx² fits 10 limbs;
//   f64:        |X| < 2^2098, n|X| < 2^2161              -> Σx  fits 34 limbs,
//               X^2 < 2^4196, n X^2 < 2^4259             -> Σx² fits 67 limbs.
// Positive and negative terms go to separate unsigned accumulators, so carries only ripple upward
// and amortize to O(1) per add; the signed result is formed once per row.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "dyadic.hpp"

namespace lnorm::detail {

__extension__ typedef unsigned __int128 U128;  // GCC/Clang builtin; -Wpedantic-clean spelling

template <int Limbs>
class UnsignedAccumulator {
 public:
  // Adds v * 2^shift, v < 2^128, shift >= 0, the result fits by the size argument above.
  void add(U128 v, std::int64_t shift) {
    std::size_t limb = static_cast<std::size_t>(shift >> 6);
    const unsigned bit = static_cast<unsigned>(shift & 63);
    // v << bit spans up to three limbs.
    const std::uint64_t w0 = static_cast<std::uint64_t>(v) << bit;
    const U128 upper = bit ? (v >> (64 - bit)) : (v >> 64);
    const std::uint64_t w1 = static_cast<std::uint64_t>(upper);
    const std::uint64_t w2 = bit ? static_cast<std::uint64_t>(v >> 64 >> (64 - bit)) : 0;
    add_word(limb, w0);
    if (w1) add_word(limb + 1, w1);
    if (w2) add_word(limb + 2, w2);
  }
  BigInt to_bigint() const {
    BigInt r = 0;
    for (int i = Limbs - 1; i >= 0; --i) {
      r <<= 64;
      r += limbs_[static_cast<std::size_t>(i)];
    }
    return r;
  }
  void clear() { limbs_.fill(0); }

 private:
  void add_word(std::size_t limb, std::uint64_t w) {
    std::uint64_t old = limbs_[limb];
    limbs_[limb] = old + w;
    bool carry = limbs_[limb] < old;
    while (carry && ++limb < Limbs) carry = (++limbs_[limb] == 0);
  }
  std::array<std::uint64_t, Limbs> limbs_{};
};

// Σx and Σx² of a row, exact, in units of 2^lsb and 2^(2 lsb).
template <int SumLimbs, int SquareLimbs>
class RowAccumulator {
 public:
  explicit RowAccumulator(int lsb) : lsb_(lsb) {}

  void add(double x) {  // x finite and a value of the format
    if (x == 0) return;
    int exp = 0;
    const double frac = std::frexp(std::fabs(x), &exp);
    std::uint64_t mant = static_cast<std::uint64_t>(std::ldexp(frac, 53));
    std::int64_t e = exp - 53;
    const int tz = std::countr_zero(mant);  // keeps e >= lsb for values of narrower formats
    mant >>= tz;
    e += tz;
    const std::int64_t shift = e - lsb_;
    (x < 0 ? neg_ : pos_).add(mant, shift);
    squares_.add(static_cast<U128>(mant) * mant, 2 * shift);
  }
  Dyadic sum() const { return {pos_.to_bigint() - neg_.to_bigint(), lsb_}; }
  Dyadic sum_of_squares() const { return {squares_.to_bigint(), 2 * std::int64_t{lsb_}}; }

 private:
  int lsb_;
  UnsignedAccumulator<SumLimbs> pos_, neg_;
  UnsignedAccumulator<SquareLimbs> squares_;
};

using NarrowRowAccumulator = RowAccumulator<6, 10>;  // f32, f16, bf16 (lsb = -149)
using WideRowAccumulator = RowAccumulator<34, 67>;   // f64 (lsb = -1074)

}  // namespace lnorm::detail
