// The output files of one run, one per operand asked for, opened from the operand table (lnorm/operands.hpp): each
// file's .npy descr is its operand's storage (npy_descr), its shape its extent's (x's shape, the statistics' shape,
// the parameters', the scales'). They are written through NpyWriter's temporaries, handed to an OperandStreams
// as its writers, and committed together: run, reference and run --dir bwd open their outputs this one way.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "lnorm/npy.hpp"
#include "lnorm/operand_streams.hpp"

namespace lnorm::cli {

// Commits the writers as one set: every one finished before any is renamed into place, and a failed rename takes
// back the ones before it, so a command leaves all its outputs or none (a full disk, a read-only second output).
void commit_together(const std::vector<io::NpyWriter*>& writers);

// The shape of an operand of each extent, for one problem's files.
struct ExtentShapes {
  std::vector<std::int64_t> elements, per_row, params, scales;
  std::vector<std::int64_t> q_codes;  // q's, where it is not the elements' (a packed format); empty: elements
  const std::vector<std::int64_t>& of(const OperandInfo& o) const;
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
  // Every file into place, or none (a full disk, a failed rename: the error names the file, and no output is left);
  // `also`: writers of outputs that are not operands (the reference's y beside q), in the same set.
  void commit(std::initializer_list<io::NpyWriter*> also = {});

 private:
  Problem p_;
  ExtentShapes shapes_;
  std::array<std::optional<io::NpyWriter>, std::size(kOperandTable)> files_;
};

}  // namespace lnorm::cli
