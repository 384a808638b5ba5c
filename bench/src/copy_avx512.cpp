// The copy ceiling's 512-bit loops (copies.hpp): on an AVX-512 CPU the fastest copy may be a 512-bit one,
// and a ceiling is only honest if it is the fastest copy the machine has. Built with -mavx512f, called only
// after avx512_copies_unavailable() is empty. Nothing here is inline or a template (no weak symbols the
// linker could pick for generic code; ctest isa_objects_share_no_code), and the byte tails are plain loops.
#include <immintrin.h>

#include <cstdint>

#include "copies.hpp"

namespace lnorm::bench {

namespace {
void copy_bytes_512(unsigned char* d, const unsigned char* s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
}
}  // namespace

void copy_avx512(void* dst, const void* src, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  std::size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    const __m512i a = _mm512_loadu_si512(s + i);
    const __m512i b = _mm512_loadu_si512(s + i + 64);
    const __m512i c = _mm512_loadu_si512(s + i + 128);
    const __m512i e = _mm512_loadu_si512(s + i + 192);
    _mm512_storeu_si512(d + i, a);
    _mm512_storeu_si512(d + i + 64, b);
    _mm512_storeu_si512(d + i + 128, c);
    _mm512_storeu_si512(d + i + 192, e);
  }
  for (; i + 64 <= bytes; i += 64) _mm512_storeu_si512(d + i, _mm512_loadu_si512(s + i));
  copy_bytes_512(d + i, s + i, bytes - i);
}

void copy_avx512_stream(void* dst, const void* src, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Up to 63 bytes with ordinary stores until dst is 64-byte aligned (the stream store needs it).
  std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63;
  if (head > bytes) head = bytes;
  copy_bytes_512(d, s, head);
  std::size_t i = head;
  for (; i + 256 <= bytes; i += 256) {
    const __m512i a = _mm512_loadu_si512(s + i);
    const __m512i b = _mm512_loadu_si512(s + i + 64);
    const __m512i c = _mm512_loadu_si512(s + i + 128);
    const __m512i e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 192), e);
  }
  for (; i + 64 <= bytes; i += 64) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
  copy_bytes_512(d + i, s + i, bytes - i);
  _mm_sfence();  // the streamed lines are globally visible before the call returns
}

}  // namespace lnorm::bench
