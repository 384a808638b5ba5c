// Fuzz target: the .npy header parser (lnorm::io::parse_npy, the same code NpyReader runs on a file).
// Any input must either parse into a header that agrees with the bytes, or throw NpyError with a
// one-line message; anything else (a crash, a sanitizer report, another exception, a header that
// promises more data than there is) is a bug and aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lnorm/npy.hpp"

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "npy_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const lnorm::io::NpyHeader h = lnorm::io::parse_npy(bytes, "fuzz.npy");
    // The descrs parse_npy normalizes to (npy.hpp): the float formats, bf16 bits, and the one-byte quantized ones.
    if (h.descr != "<f4" && h.descr != "<f8" && h.descr != "<f2" && h.descr != "<u2" && h.descr != "|u1" && h.descr != "|i1")
      broken("unexpected descr");
    if (h.item_size != (h.descr[0] == '|' ? 1u : h.descr == "<f8" ? 8u : h.descr == "<f4" ? 4u : 2u)) broken("item size");
    // The product of the dimensions, as parse_npy must have found it. A zero dimension makes the array
    // empty however large the others are, and their partial product may overflow int64 (fuzz_npy found
    // (46744073704775807, 447, ..., 0) in CI: the harness's own multiply was the UB then); without one,
    // the data are really there, so an overflowing product must have been refused.
    std::int64_t elements = 1;
    bool has_zero = false, overflowed = false;
    for (std::int64_t d : h.shape) {
      if (d < 0) broken("negative dimension accepted");
      has_zero = has_zero || d == 0;
      overflowed = overflowed || __builtin_mul_overflow(elements, d, &elements);
    }
    if (has_zero) elements = 0;
    else if (overflowed) broken("a shape whose element count overflows int64 was accepted");
    if (elements != h.elements) broken("elements is not the product of the shape");
    if (h.data_offset > size || size - h.data_offset != static_cast<std::uint64_t>(h.elements) * h.item_size)
      broken("the header's data size does not match the bytes");
  } catch (const lnorm::io::NpyError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos) broken("multi-line error message");
    if (std::string_view(e.what()).rfind("fuzz.npy: ", 0) != 0) broken("message does not name the file");
  }
  return 0;
}
