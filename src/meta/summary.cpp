#include "ggufkit/summary.h"

#include <algorithm>
#include <map>

namespace ggufkit {

FileSummary summarize(const GgufFile& file) {
  FileSummary s;
  std::map<uint32_t, TypeUsage> by_type;
  for (const TensorInfo& t : file.tensors()) {
    TypeUsage& u = by_type.try_emplace(static_cast<uint32_t>(t.type), TypeUsage{t.type}).first->second;
    ++u.tensors;
    u.elements += static_cast<uint64_t>(t.n_elements());
    u.bytes += t.size;
    s.parameters += static_cast<uint64_t>(t.n_elements());
    s.tensor_bytes += t.size;
  }
  for (const auto& [id, usage] : by_type) s.types.push_back(usage);
  std::stable_sort(s.types.begin(), s.types.end(),
                   [](const TypeUsage& a, const TypeUsage& b) { return a.elements > b.elements; });
  s.bits_per_weight = s.parameters == 0 ? 0.0 : 8.0 * static_cast<double>(s.tensor_bytes) / static_cast<double>(s.parameters);
  return s;
}

}  // namespace ggufkit
