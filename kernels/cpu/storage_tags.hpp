// Storage-type tags of the CPU ISA kernels (the SIMD kernels and their emulation): the bits
// an element is stored in and the output format's precision in bits (significand with the hidden bit),
// which the correctly rounded paths round to. Types only, no code: sharing them across ISA translation
// units emits no symbol (ctest isa_objects_share_no_code).
#pragma once

#include <cstdint>

namespace lnorm::cpu::storage {

struct F32 {
  using Bits = float;
  static constexpr int kPrecision = 24;
};
struct F16 {
  using Bits = std::uint16_t;
  static constexpr int kPrecision = 11;
};
struct BF16 {
  using Bits = std::uint16_t;
  static constexpr int kPrecision = 8;
};
// f64: the correctly rounded kernels' staged parameters only (not a storage the SIMD kernels take for x or y).
struct F64 {
  using Bits = double;
  static constexpr int kPrecision = 53;
};

}  // namespace lnorm::cpu::storage
