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

namespace {

// N of a name "blk.N.rest", N at most 9 digits.
std::optional<uint32_t> block_of(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  size_t i = 4;
  uint32_t n = 0;
  while (i < name.size() && i < 13 && name[i] >= '0' && name[i] <= '9') n = n * 10 + static_cast<uint32_t>(name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.') return std::nullopt;
  return n;
}

}  // namespace

std::vector<LayerUsage> summarize_layers(std::span<const TensorInfo* const> tensors) {
  std::map<uint32_t, SummaryBuilder> blocks;
  SummaryBuilder other;
  bool have_other = false;
  for (const TensorInfo* t : tensors) {
    if (const auto n = block_of(t->name)) {
      blocks[*n].add(*t);
    } else {
      other.add(*t);
      have_other = true;
    }
  }
  std::vector<LayerUsage> out;
  for (auto& [n, b] : blocks) out.push_back({n, std::move(b).finish()});
  if (have_other) out.push_back({std::nullopt, std::move(other).finish()});
  return out;
}

std::vector<LayerUsage> summarize_layers(const GgufFile& file) {
  std::vector<const TensorInfo*> tensors;
  for (const TensorInfo& t : file.tensors()) tensors.push_back(&t);
  return summarize_layers(tensors);
}

FileSummary summarize(const GgufFile& file) {
  SummaryBuilder b;
  for (const TensorInfo& t : file.tensors()) b.add(t);
  return std::move(b).finish();
}

}  // namespace ggufkit
