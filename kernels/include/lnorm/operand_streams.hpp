// A kernel (or the reference) run over a problem's rows in chunks, its operands from the operand table
// (lnorm/operands.hpp): each input's bytes come from where the caller says (a reader of rows, or memory that holds
// all of it), each output's go where the caller says, and every output the op has gets a buffer whether or not
// anything takes it. `lnorm run`, `reference` and `run --dir bwd` hand their kernels Tensors this way, so an operand
// a new op adds is a row of the table and a flag, not a thread through each command.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "lnorm/operands.hpp"

namespace lnorm {

// A kernel wrote past the end of an output chunk (OperandStreams::run checks the guard bytes after each).
struct OperandOverrun : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class OperandStreams {
 public:
  // Reads `count` elements of the operand from element `first` on (counted in its extent: x's elements, a
  // statistic's rows) into dst.
  using Reader = std::function<void(std::int64_t first, std::int64_t count, void* dst)>;
  // Takes one chunk of an output, in row order.
  using Writer = std::function<void(const void* data, std::size_t bytes)>;

  OperandStreams& read(Operand o, Reader r);
  // Memory that holds the whole operand (every row, or the parameter vector): handed over in place, no copy.
  OperandStreams& point(Operand o, const void* whole);
  OperandStreams& write(Operand o, Writer w);
  // An input of the op that this runner does not read: its slot stays null (the exact backward computes the
  // statistics itself and reads no saved ones).
  OperandStreams& unread(Operand o);

  // Calls fn on chunks of chunk_rows rows of p (the last one shorter; chunk_rows >= p.rows runs once) with the chunk's
  // problem and Tensors: every operand p's op has (present()) but the optional outputs (mean, rstd, quant_y) neither
  // in `optional` nor given a writer. An input of the op with no source is a std::logic_error (the caller's bug). Each
  // output chunk is followed by guard bytes, checked after fn: changed, they throw OperandOverrun naming the operand.
  void run(const Problem& p, std::int64_t chunk_rows, OperandSet optional,
           const std::function<void(const Problem&, const Tensors&)>& fn);

 private:
  static constexpr std::size_t kCount = std::size(kOperandTable);
  std::array<Reader, kCount> readers_;
  std::array<const void*, kCount> whole_{};
  OperandSet unread_;
  std::array<Writer, kCount> writers_;
  std::array<std::vector<std::byte>, kCount> chunk_;  // reused from chunk to chunk
};

// A writer that appends each chunk to `into` (an output kept in memory).
OperandStreams::Writer append_to(std::vector<std::byte>& into);

}  // namespace lnorm
