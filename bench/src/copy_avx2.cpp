// The copy ceiling's AVX2 loops (copies.hpp). Built with -mavx2, called only after cpuid says AVX2.
// Nothing here is inline or a template (no weak symbols the linker could pick for generic code), and the
// byte tails are plain loops, not std:: calls.
#include <immintrin.h>

#include <cstdint>

#include "copies.hpp"

namespace lnorm::bench {

namespace {
void copy_bytes(unsigned char* d, const unsigned char* s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
}
}  // namespace

void copy_avx2(void* dst, const void* src, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  std::size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  for (; i + 32 <= bytes; i += 32) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  }
  copy_bytes(d + i, s + i, bytes - i);
}

void copy_avx2_stream(void* dst, const void* src, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Up to 31 bytes with ordinary stores until dst is 32-byte aligned (the stream store needs it).
  std::size_t head = (32 - (reinterpret_cast<std::uintptr_t>(d) & 31)) & 31;
  if (head > bytes) head = bytes;
  copy_bytes(d, s, head);
  std::size_t i = head;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  for (; i + 32 <= bytes; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  }
  copy_bytes(d + i, s + i, bytes - i);
  _mm_sfence();  // the streamed lines are globally visible before the call returns
}

}  // namespace lnorm::bench
