// lnorm/operand_streams.hpp: a problem's operands, chunk by chunk, from the operand table.
#include "lnorm/operand_streams.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lnorm {

namespace {

// After each output chunk: bytes no kernel may touch (a write that runs on past the end meets them first).
constexpr std::size_t kGuardBytes = 64;
constexpr std::byte kGuardByte{0xA5};

// The first element of rows [r0, ...) of the operand, in its extent's count (parameters are never chunked).
std::int64_t first_of(const OperandInfo& o, const Problem& p, std::int64_t r0) {
  switch (o.extent) {
    case Extent::elements: return r0 * p.cols;
    case Extent::per_row: return r0;
    case Extent::scales: return r0 * p.quant.scales_per_row(p.cols);
    case Extent::params: return 0;
  }
  return 0;
}

}  // namespace

OperandStreams& OperandStreams::read(Operand o, Reader r) {
  readers_[static_cast<std::size_t>(o)] = std::move(r);
  return *this;
}

OperandStreams& OperandStreams::point(Operand o, const void* whole) {
  whole_[static_cast<std::size_t>(o)] = whole;
  return *this;
}

OperandStreams& OperandStreams::unread(Operand o) {
  unread_.add(o);
  return *this;
}

OperandStreams& OperandStreams::write(Operand o, Writer w) {
  writers_[static_cast<std::size_t>(o)] = std::move(w);
  return *this;
}

void OperandStreams::run(const Problem& p, std::int64_t chunk_rows, OperandSet optional,
                         const std::function<void(const Problem&, const Tensors&)>& fn) {
  const std::int64_t step = std::max<std::int64_t>(1, chunk_rows);
  std::array<std::size_t, kCount> bytes{};
  for (std::int64_t r0 = 0; r0 < p.rows; r0 += step) {
    Problem part = p;
    part.rows = std::min(step, p.rows - r0);
    Tensors t;
    for (const OperandInfo& o : kOperandTable) {
      const auto i = static_cast<std::size_t>(o.operand);
      if (!present(o, p) || unread_.has(o.operand) || (o.optional && !optional.has(o.operand) && !writers_[i])) continue;
      if (o.role == Role::input && whole_[i]) {
        const auto offset = static_cast<std::size_t>(first_of(o, p, r0)) * element_size(o, p);
        set_slot(t, o, const_cast<std::byte*>(static_cast<const std::byte*>(whole_[i]) + offset));
        continue;
      }
      if (o.role == Role::input && !readers_[i])
        throw std::logic_error("OperandStreams: the op reads " + std::string(o.name) + ", and nothing gives it");
      bytes[i] = static_cast<std::size_t>(byte_count(o, part));
      // An output is followed by guard bytes: a kernel that writes past its end is caught here, not in the heap.
      const std::size_t guard = o.role == Role::output ? kGuardBytes : 0;
      chunk_[i].resize(bytes[i] + guard);
      std::fill(chunk_[i].begin() + static_cast<std::ptrdiff_t>(bytes[i]), chunk_[i].end(), kGuardByte);
      if (o.role == Role::input) readers_[i](first_of(o, p, r0), element_count(o, part), chunk_[i].data());
      if (bytes[i] > 0) set_slot(t, o, chunk_[i].data());
    }
    fn(part, t);
    for (const OperandInfo& o : kOperandTable) {
      const auto i = static_cast<std::size_t>(o.operand);
      if (o.role != Role::output || !slot(t, o)) continue;
      if (std::any_of(chunk_[i].begin() + static_cast<std::ptrdiff_t>(bytes[i]), chunk_[i].end(), [](std::byte b) { return b != kGuardByte; }))
        throw OperandOverrun("wrote past the end of " + std::string(o.name) + " (the guard bytes after it changed)");
    }
    for (const OperandInfo& o : kOperandTable) {
      const auto i = static_cast<std::size_t>(o.operand);
      if (o.role == Role::output && writers_[i] && present(o, p)) writers_[i](chunk_[i].data(), bytes[i]);
    }
  }
}

OperandStreams::Writer append_to(std::vector<std::byte>& into) {
  return [&into](const void* data, std::size_t bytes) {
    const auto* b = static_cast<const std::byte*>(data);
    into.insert(into.end(), b, b + bytes);
  };
}

}  // namespace lnorm
