// The harness's buffers (lnorm/harness.hpp): an operand's elements between two guard regions, at a chosen
// misalignment, and the canary an output is filled with before a kernel runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lnorm/problem.hpp"

namespace lnorm::verify {

// Encoded values of one dtype, or raw elements of 1, 2, 4 or 8 bytes (a quantized code, a scale), at a chosen offset
// from 64-byte alignment.
class Buffer {
 public:
  Buffer(DType d, std::size_t count, int misalign_elements);
  Buffer(DType d, const std::vector<double>& values, int misalign_elements);
  // Elements that are no dtype's values: their bytes only (value() is not available).
  static Buffer raw(std::size_t element_bytes, std::size_t count, int misalign_elements);
  void* data() { return bytes_.data() + offset_; }
  const void* data() const { return bytes_.data() + offset_; }
  std::size_t count() const { return count_; }
  std::size_t element_bytes() const { return size_; }
  // Inline, with the element size a constant in each branch: as an out-of-line memcpy of size_of(dtype)
  // bytes it was 8% of verify's time.
  std::uint64_t bits(std::size_t i) const {
    const std::byte* p = static_cast<const std::byte*>(data());
    switch (size_) {
      case 1: return std::to_integer<std::uint8_t>(p[i]);
      case 2: { std::uint16_t b; std::memcpy(&b, p + 2 * i, 2); return b; }
      case 4: { std::uint32_t b; std::memcpy(&b, p + 4 * i, 4); return b; }
      default: { std::uint64_t b; std::memcpy(&b, p + 8 * i, 8); return b; }
    }
  }
  double value(std::size_t i) const;
  void fill_bits(std::uint64_t pattern);
  // Every element's bits (zero-extended), in one loop typed by the element size: as count() calls of bits(i)
  // (a switch and a variable-size copy each) reading the outputs back was a tenth of verify's harness time.
  std::vector<std::uint64_t> all_bits() const;
  // The first element holding these bits (count() when none does), in the same typed loop: a canary left
  // unwritten, looked for in the buffer itself.
  std::size_t find_bits(std::uint64_t pattern) const;
  // A copy of the data's bytes, and the first element whose bytes differ from this buffer's own copy (count()
  // when none do): a kernel must leave its inputs as it got them. A memcmp against the copy replaced encoding
  // every input value again after each run (perf: 9% of `lnorm verify --op add_layernorm`).
  std::vector<std::byte> snapshot() const;
  std::size_t first_change(const std::vector<std::byte>& snapshot) const;
  // Guard bytes before and after the data, as filled by the constructor.
  bool guards_intact() const;

 private:
  Buffer(std::size_t element_bytes, DType d, std::size_t count, int misalign_elements);
  DType dtype_;       // the values' dtype (a raw buffer's is unused)
  std::size_t size_;  // bytes per element
  std::size_t count_, offset_;
  std::vector<std::byte> bytes_;
};

// The bits an output buffer is filled with before a kernel runs: a quiet NaN with a payload no arithmetic
// produces, so an element left unwritten is told from any value a kernel writes.
std::uint64_t canary_bits(DType d);

}  // namespace lnorm::verify
