// cli/output_files.hpp: a run's output files, from the operand table.
#include "output_files.hpp"

namespace lnorm::cli {

const std::vector<std::int64_t>& ExtentShapes::of(Extent e) const {
  switch (e) {
    case Extent::elements: return elements;
    case Extent::per_row: return per_row;
    case Extent::params: return params;
    case Extent::scales: return scales;
  }
  return elements;
}

void OutputFiles::open(Operand o, const std::string& path) {
  if (path.empty()) return;
  const OperandInfo& row = info(o);
  files_[static_cast<std::size_t>(o)].emplace(path, std::string(npy_descr(row, p_)), shapes_.of(row.extent));
}

void OutputFiles::connect(OperandStreams& ops) {
  OperandSet all;
  for (const OperandInfo& o : kOperandTable) all.add(o.operand);
  connect(ops, all);
}

void OutputFiles::connect(OperandStreams& ops, OperandSet only) {
  for (const OperandInfo& o : kOperandTable) {
    std::optional<io::NpyWriter>& f = files_[static_cast<std::size_t>(o.operand)];
    if (f && only.has(o.operand)) ops.write(o.operand, [&w = *f](const void* data, std::size_t bytes) { w.write(data, bytes); });
  }
}

std::vector<std::string> OutputFiles::temp_paths() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    if (f) out.push_back(f->temp_path());
  return out;
}

void OutputFiles::commit() {
  for (auto& f : files_)
    if (f) f->commit();
}

}  // namespace lnorm::cli
