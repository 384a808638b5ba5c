// The copies whose fastest is the copy ceiling (docs/DESIGN.md "Speed"): each moves `bytes` from src to dst.
// copy_avx2.cpp is compiled with -mavx2, copy_avx512.cpp with -mavx512f; neither holds inline or template
// code (ctest isa_objects_share_no_code). Call their functions only when avx2_copies_unavailable() /
// avx512_copies_unavailable() is empty.
#pragma once

#include <cstddef>
#include <string>

namespace lnorm::bench {

// 256-bit unaligned loads and stores, four per iteration.
void copy_avx2(void* dst, const void* src, std::size_t bytes);
// 256-bit loads and non-temporal (streaming) stores to 32-byte aligned dst, then sfence: y goes to DRAM
// without being read first (no read-for-ownership).
void copy_avx2_stream(void* dst, const void* src, std::size_t bytes);

// 512-bit unaligned loads and stores, four per iteration.
void copy_avx512(void* dst, const void* src, std::size_t bytes);
// 512-bit loads and non-temporal stores to 64-byte aligned dst (a full cache line per store), then sfence.
void copy_avx512_stream(void* dst, const void* src, std::size_t bytes);

// "" when this CPU runs AVX2 / AVX-512 F (and the OS saves the ZMM state); otherwise why not (bodies.cpp,
// generic code).
std::string avx2_copies_unavailable();
std::string avx512_copies_unavailable();

}  // namespace lnorm::bench
