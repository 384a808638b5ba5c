// cli/output_files.hpp: a run's output files, from the operand table.
#include "output_files.hpp"

namespace lnorm::cli {

const std::vector<std::int64_t>& ExtentShapes::of(const OperandInfo& o) const {
  if (o.storage == Storage::q_code && !q_codes.empty()) return q_codes;
  switch (o.extent) {
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
  files_[static_cast<std::size_t>(o)].emplace(path, std::string(npy_descr(row, p_)), shapes_.of(row));
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

// All or none: every file finished (size checked, flushed, synced, closed: what a full disk fails) before any is
// renamed into place; a rename that fails takes back the ones before it.
void commit_together(const std::vector<io::NpyWriter*>& writers) {
  for (io::NpyWriter* w : writers) w->finish();
  for (std::size_t i = 0; i < writers.size(); ++i) {
    try {
      writers[i]->publish();
    } catch (...) {
      for (std::size_t j = 0; j < i; ++j) writers[j]->unpublish();
      throw;
    }
  }
}

void OutputFiles::commit(std::initializer_list<io::NpyWriter*> also) {
  std::vector<io::NpyWriter*> all;
  for (auto& f : files_)
    if (f) all.push_back(&*f);
  for (io::NpyWriter* w : also)
    if (w) all.push_back(w);
  commit_together(all);
}

}  // namespace lnorm::cli
