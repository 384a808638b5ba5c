// Storage-type tags of the AVX-512 kernels, shared by both operation layers (avx512_native_ops.hpp,
// avx512_emulated_ops.hpp) and the kernel bodies (avx512_body.hpp). Included inside an anonymous
// namespace of each translation unit (see avx512_body.hpp for why); no include guard of its own.
#ifndef LNORM_AVX512_TYPES_INCLUDED
#define LNORM_AVX512_TYPES_INCLUDED

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

#endif
