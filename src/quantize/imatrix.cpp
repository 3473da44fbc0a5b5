// Importance matrix files (not yet implemented).
#include "ggufkit/imatrix.h"

#include <algorithm>

namespace ggufkit {

const ImportanceEntry* ImportanceMatrix::find(std::string_view name) const {
  const auto it = std::ranges::lower_bound(entries, name, {}, &ImportanceEntry::name);
  return it != entries.end() && it->name == name ? &*it : nullptr;
}

Expected<ImportanceMatrix> parse_importance_matrix(std::span<const std::byte>) {
  return make_error(ErrorCode::invalid_argument, 0, {}, "importance matrices are not supported yet");
}

Expected<ImportanceMatrix> load_importance_matrix(const std::filesystem::path&) {
  return make_error(ErrorCode::invalid_argument, 0, {}, "importance matrices are not supported yet");
}

void exclude_importance_entries(ImportanceMatrix&, std::span<const std::string>) {}
void include_importance_entries(ImportanceMatrix&, std::span<const std::string>) {}

}  // namespace ggufkit
