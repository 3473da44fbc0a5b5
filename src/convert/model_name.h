// gguf-py's metadata.py heuristics for general.* names (the converter's own; tests include it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ggufkit {

struct ModelNameParts {
  std::optional<std::string> name, organization, basename, finetune, version, size_label;
};
// Metadata.get_model_id_components, with the name title-cased as Metadata.id_to_title.
ModelNameParts model_name_parts(std::string_view model_id, int64_t total_params);
// gguf.size_label for a model without experts: "1.1B", "33M", "7.2K".
std::string model_size_label(uint64_t total_params);

}  // namespace ggufkit
