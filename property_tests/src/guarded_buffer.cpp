// lnorm/guarded_buffer.hpp: guarded, misaligned buffers of encoded values or raw elements, and the output canaries.
#include "lnorm/guarded_buffer.hpp"

#include "lnorm/format.hpp"

namespace lnorm::verify {

namespace {

constexpr std::size_t kGuard = 64;
constexpr std::byte kGuardByte{0xA5};

// Calls fn with a zero of the unsigned type one element is stored in (1, 2, 4 or 8 bytes), so that a loop over
// a buffer copies fixed-size elements (a memcpy of size_of(d) bytes per element compiled to a byte loop).
template <class Fn>
void with_bits_type(std::size_t element_bytes, Fn&& fn) {
  switch (element_bytes) {
    case 1: fn(std::uint8_t{}); return;
    case 2: fn(std::uint16_t{}); return;
    case 4: fn(std::uint32_t{}); return;
    default: fn(std::uint64_t{}); return;
  }
}

}  // namespace

// Output canaries: quiet NaNs with a payload no arithmetic produces (default NaNs have payload 0).
std::uint64_t canary_bits(DType d) {
  switch (d) {
    case DType::f32: return 0x7FA5A5A5u;
    case DType::f64: return 0x7FF5A5A5A5A5A5A5ull;
    case DType::f16: return 0x7E5Au;
    case DType::bf16: return 0x7FA5u;
  }
  return 0;
}

Buffer::Buffer(std::size_t element_bytes, DType d, std::size_t count, int misalign_elements)
    // Room for the leading guard, up to 63 bytes to reach alignment, up to 7 elements of misalignment,
    // the data, and a full trailing guard.
    : dtype_(d), size_(element_bytes), count_(count), bytes_(2 * kGuard + 64 + (8 + count) * element_bytes, kGuardByte) {
  const auto base = reinterpret_cast<std::uintptr_t>(bytes_.data()) + kGuard;
  const std::size_t to_align = (64 - base % 64) % 64;
  offset_ = kGuard + to_align + static_cast<std::size_t>(misalign_elements) * size_;
  std::memset(bytes_.data() + offset_, 0, count * size_);
}

Buffer::Buffer(DType d, std::size_t count, int misalign_elements) : Buffer(size_of(d), d, count, misalign_elements) {}

Buffer Buffer::raw(std::size_t element_bytes, std::size_t count, int misalign_elements) {
  return Buffer(element_bytes, DType::f32, count, misalign_elements);
}

Buffer::Buffer(DType d, const std::vector<double>& values, int misalign_elements)
    : Buffer(d, values.size(), misalign_elements) {
  const Format f = format_of(d);
  std::byte* p = static_cast<std::byte*>(data());
  with_bits_type(size_, [&]<class Bits>(Bits) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto b = static_cast<Bits>(double_to_bits(f, values[i]));
      std::memcpy(p + i * sizeof(Bits), &b, sizeof(Bits));
    }
  });
}

double Buffer::value(std::size_t i) const { return bits_to_double(format_of(dtype_), bits(i)); }

void Buffer::fill_bits(std::uint64_t pattern) {
  std::byte* p = static_cast<std::byte*>(data());
  with_bits_type(size_, [&]<class Bits>(Bits) {
    const auto b = static_cast<Bits>(pattern);
    for (std::size_t i = 0; i < count_; ++i) std::memcpy(p + i * sizeof(Bits), &b, sizeof(Bits));
  });
}

std::vector<std::uint64_t> Buffer::all_bits() const {
  std::vector<std::uint64_t> out(count_);
  const std::byte* p = static_cast<const std::byte*>(data());
  with_bits_type(size_, [&]<class Bits>(Bits) {
    for (std::size_t i = 0; i < count_; ++i) {
      Bits b;
      std::memcpy(&b, p + i * sizeof(Bits), sizeof(Bits));
      out[i] = b;
    }
  });
  return out;
}

std::size_t Buffer::find_bits(std::uint64_t pattern) const {
  const std::byte* p = static_cast<const std::byte*>(data());
  std::size_t at = count_;
  with_bits_type(size_, [&]<class Bits>(Bits) {
    const auto want = static_cast<Bits>(pattern);
    for (std::size_t i = 0; i < count_; ++i) {
      Bits b;
      std::memcpy(&b, p + i * sizeof(Bits), sizeof(Bits));
      if (b == want) {
        at = i;
        return;
      }
    }
  });
  return at;
}

std::vector<std::byte> Buffer::snapshot() const {
  const std::byte* p = static_cast<const std::byte*>(data());
  return std::vector<std::byte>(p, p + count_ * size_);
}

// before: this buffer's own snapshot (the same size).
std::size_t Buffer::first_change(const std::vector<std::byte>& before) const {
  const std::size_t size = size_;
  const std::byte* p = static_cast<const std::byte*>(data());
  // (An empty buffer's data may be null, which memcmp may not be handed even for 0 bytes: UBSan's nonnull.)
  if (count_ == 0 || std::memcmp(p, before.data(), before.size()) == 0) return count_;
  for (std::size_t i = 0; i < count_; ++i)
    if (std::memcmp(p + i * size, before.data() + i * size, size) != 0) return i;
  return count_;
}

bool Buffer::guards_intact() const {
  const std::size_t end = offset_ + count_ * size_;
  // The two guard ranges only (a loop over every byte with a test per byte was 5% of verify's time).
  const auto intact = [&](std::size_t from, std::size_t to) {
    unsigned bad = 0;
    for (std::size_t i = from; i < to; ++i) bad |= static_cast<unsigned>(bytes_[i] ^ kGuardByte);
    return bad == 0;
  };
  return intact(0, offset_) && intact(end, bytes_.size());
}

}  // namespace lnorm::verify
