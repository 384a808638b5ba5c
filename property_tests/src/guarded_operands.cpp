// lnorm/guarded_operands.hpp: the harness's buffers, one per operand of the problem, from the operand table.
#include "lnorm/guarded_operands.hpp"

namespace lnorm::verify {

namespace {

// Where element i of an operand lies, in its extent's words: "element 7 (row 0)", "column 3", "row 2".
std::string where(const OperandInfo& o, std::size_t i, std::int64_t cols) {
  switch (o.extent) {
    case Extent::params: return "column " + std::to_string(i);
    case Extent::per_row: return "row " + std::to_string(i);
    case Extent::elements:
      return "element " + std::to_string(i) + " (row " + std::to_string(i / static_cast<std::size_t>(cols)) + ")";
    case Extent::scales: return "scale " + std::to_string(i);
  }
  return std::to_string(i);
}

}  // namespace

GuardedOperands::GuardedOperands(const Problem& p, const InputValues& values, int misalign, OperandSet optional) : p_(p) {
  for (const OperandInfo& o : kOperandTable) {
    if (!present(o, p) || (o.optional && !optional.has(o.operand))) continue;
    const auto i = static_cast<std::size_t>(o.operand);
    const int mis = o.extent == Extent::per_row ? 0 : misalign;
    const auto count = static_cast<std::size_t>(element_count(o, p));
    if (const auto d = element_dtype(o, p)) {
      const std::vector<double>* given = o.role == Role::input ? values.get(o.operand) : nullptr;
      bufs_[i].emplace(given ? Buffer(*d, *given, mis) : Buffer(*d, count, mis));
    } else if (o.storage == Storage::q_code) {  // codes as bytes (sub-byte formats pack: byte_count)
      bufs_[i].emplace(Buffer::raw(1, static_cast<std::size_t>(byte_count(o, p)), mis));
    } else {
      bufs_[i].emplace(Buffer::raw(element_size(o, p), count, mis));
    }
    if (o.role == Role::input) before_[i] = bufs_[i]->snapshot();
  }
}

void GuardedOperands::prefill(std::uint8_t raw_fill) {
  for (const OperandInfo& o : kOperandTable) {
    std::optional<Buffer>& b = bufs_[static_cast<std::size_t>(o.operand)];
    if (!b || o.role != Role::output) continue;
    if (const auto d = element_dtype(o, p_)) b->fill_bits(canary_bits(*d));
    else b->fill_bits(0x0101010101010101ull * raw_fill);
  }
}

Tensors GuardedOperands::tensors() const {
  Tensors t;
  for (const OperandInfo& o : kOperandTable)
    if (const Buffer* b = find(o.operand)) set_slot(t, o, const_cast<void*>(b->data()));
  return t;
}

std::string GuardedOperands::check() const {
  const auto first = [&](Role role, auto&& broken) -> std::string {
    for (const OperandInfo& o : kOperandTable) {
      const Buffer* b = find(o.operand);
      if (!b || o.role != role) continue;
      if (std::string what = broken(o, *b); !what.empty()) return "harness: " + what;
    }
    return "";
  };
  if (auto v = first(Role::output, [](const OperandInfo& o, const Buffer& b) {
        return b.guards_intact() ? std::string() : "wrote outside " + std::string(o.name) + " (guard region changed)";
      }); !v.empty())
    return v;
  if (auto v = first(Role::input, [](const OperandInfo& o, const Buffer& b) {
        return b.guards_intact() ? std::string() : "wrote around the input " + std::string(o.name) + " (guard region changed)";
      }); !v.empty())
    return v;
  if (auto v = first(Role::input, [&](const OperandInfo& o, const Buffer& b) {
        const std::size_t i = b.first_change(before_[static_cast<std::size_t>(o.operand)]);
        return i < b.count() ? "modified " + std::string(o.name) + " at " + where(o, i, p_.cols) : std::string();
      }); !v.empty())
    return v;
  return first(Role::output, [&](const OperandInfo& o, const Buffer& b) {
    const auto d = element_dtype(o, p_);
    if (!d) return std::string();  // every byte is a code or a scale: the caller's two prefills tell
    const std::size_t i = b.find_bits(canary_bits(*d));
    return i < b.count() ? "never wrote " + std::string(o.name) + " at " + where(o, i, p_.cols) : std::string();
  });
}

const Buffer* GuardedOperands::find(Operand o) const {
  const std::optional<Buffer>& b = bufs_[static_cast<std::size_t>(o)];
  return b ? &*b : nullptr;
}

std::vector<std::uint64_t> GuardedOperands::bits(Operand o) const {
  const Buffer* b = find(o);
  return b ? b->all_bits() : std::vector<std::uint64_t>{};
}

}  // namespace lnorm::verify
