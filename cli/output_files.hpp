// The output files of one run, one per operand asked for, opened from the operand table (lnorm/operands.hpp): each
// file's .npy descr is its operand's storage (npy_descr), its shape its extent's (x's shape, the statistics' shape,
// the parameters', the scales'). They are written through NpyWriter's temporaries, handed to an OperandStreams
// as its writers, and committed together: run, reference and run --dir bwd open their outputs this one way.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lnorm/npy.hpp"
#include "lnorm/operand_streams.hpp"

namespace lnorm::cli {

// The shape of an operand of each extent, for one problem's files.
struct ExtentShapes {
  std::vector<std::int64_t> elements, per_row, params, scales;
  const std::vector<std::int64_t>& of(Extent e) const;
};

class OutputFiles {
 public:
  OutputFiles(const Problem& p, ExtentShapes shapes) : p_(p), shapes_(std::move(shapes)) {}
  // Opens the operand's file (an empty path: not asked for, nothing opened).
  void open(Operand o, const std::string& path);
  bool has(Operand o) const { return files_[static_cast<std::size_t>(o)].has_value(); }
  // Every open file as its operand's writer in ops; `only` limits it to those operands.
  void connect(OperandStreams& ops);
  void connect(OperandStreams& ops, OperandSet only);
  // The temporaries (a crash handler unlinks them: crash_guard.hpp).
  std::vector<std::string> temp_paths() const;
  void commit();

 private:
  Problem p_;
  ExtentShapes shapes_;
  std::array<std::optional<io::NpyWriter>, std::size(kOperandTable)> files_;
};

}  // namespace lnorm::cli
