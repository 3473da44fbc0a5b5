// The one way the converter reaches the files of a checkpoint directory: only regular files whose
// real path (links resolved) is inside the directory, or, for a Hugging Face cache snapshot
// (<repo>/snapshots/<revision>/, whose files are links to <repo>/blobs/), inside that blobs/
// folder; small files (JSON, templates, merges.txt) up to kMaxCheckpointTextBytes. A downloaded
// repository with a link to a private file, or config.json linked to /dev/zero, is refused with
// a message instead of being read into the model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "ggufkit/error.h"

namespace ggufkit::convert_detail {

inline constexpr uint64_t kMaxCheckpointTextBytes = uint64_t{256} << 20;

// Whether `file` (in `root`, the checkpoint directory) may be read; the error names the file
// (relative to root) and says why not. A file that does not exist passes (the caller decides).
Expected<void> check_checkpoint_file(const std::filesystem::path& root, const std::filesystem::path& file);

// The content of root/relative; nullopt when it does not exist.
Expected<std::optional<std::string>> read_checkpoint_text(const std::filesystem::path& root,
                                                          const std::filesystem::path& relative);

}  // namespace ggufkit::convert_detail
