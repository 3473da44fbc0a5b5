#include "ggufkit/summary.h"

#include <algorithm>

namespace ggufkit {

void SummaryBuilder::add(const TensorInfo& t) {
  TypeUsage& u = by_type_.try_emplace(static_cast<uint32_t>(t.type), TypeUsage{t.type}).first->second;
  ++u.tensors;
  u.elements += static_cast<uint64_t>(t.n_elements());
  u.bytes += t.size;
  summary_.parameters += static_cast<uint64_t>(t.n_elements());
  summary_.tensor_bytes += t.size;
}

FileSummary SummaryBuilder::finish() && {
  FileSummary s = std::move(summary_);
  for (const auto& [id, usage] : by_type_) s.types.push_back(usage);
  std::stable_sort(s.types.begin(), s.types.end(),
                   [](const TypeUsage& a, const TypeUsage& b) { return a.elements > b.elements; });
  s.bits_per_weight = s.parameters == 0 ? 0.0 : 8.0 * static_cast<double>(s.tensor_bytes) / static_cast<double>(s.parameters);
  return s;
}

FileSummary summarize(const GgufFile& file) {
  SummaryBuilder b;
  for (const TensorInfo& t : file.tensors()) b.add(t);
  return std::move(b).finish();
}

}  // namespace ggufkit
