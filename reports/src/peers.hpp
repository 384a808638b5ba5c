// Peer implementations: another LayerNorm (PyTorch, NumPy, a framework build) run as a command on
// .npy files, so a report can put "ours" and "theirs" through the same metric.
//
// The command is run by /bin/sh with these placeholders replaced (paths are shell-quoted):
//   {x} {gamma} {beta}  inputs: x is rows×cols; gamma and beta always exist (ones/zeros when the case
//                       has none, which LayerNorm treats the same as absent)
//   {y} {mean} {rstd}   outputs: y is required; mean and rstd (rows, f32 or f64) are measured if written
//   {eps} {dtype}       eps as the kernels receive it (%.17g), and f32/f64/f16/bf16
// bf16 files hold bit patterns as '<u2', as everywhere in lnorm. Exit status non-zero: the cell is
// reported as an error with the last line the command printed.
#pragma once

#include <string>
#include <vector>

#include "lnorm/cases.hpp"

namespace lnorm::report {

struct PeerOutputs {
  std::vector<std::uint64_t> y, mean, rstd;  // bit patterns, empty when not produced
  std::string error;                         // empty on success
};

// dir: a private folder for this call's files (created and emptied by the caller).
PeerOutputs run_peer(const std::string& command, const verify::Case& input, const std::string& dir);

}  // namespace lnorm::report
