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
    if (h.descr != "<f4" && h.descr != "<f8" && h.descr != "<f2" && h.descr != "<u2") broken("unexpected descr");
    std::int64_t elements = 1;
    for (std::int64_t d : h.shape) {
      if (d < 0) broken("negative dimension accepted");
      elements *= d;  // cannot overflow: the data are really there, so elements*item_size <= size
    }
    if (elements != h.elements) broken("elements is not the product of the shape");
    if (h.data_offset > size || size - h.data_offset != static_cast<std::uint64_t>(h.elements) * h.item_size)
      broken("the header's data size does not match the bytes");
  } catch (const lnorm::io::NpyError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos) broken("multi-line error message");
    if (std::string_view(e.what()).rfind("fuzz.npy: ", 0) != 0) broken("message does not name the file");
  }
  return 0;
}
