// The one way the converter reaches the files of a checkpoint directory: only regular files whose
// real path (links resolved) is inside the directory, or, for a Hugging Face cache snapshot
// (<repo>/snapshots/<revision>/, whose files are links to <repo>/blobs/), inside that blobs/
// folder; text files up to a size that depends on the file (checkpoint_text_limit). A downloaded
// repository with a link to a private file, or config.json linked to /dev/zero, is refused with
// a message instead of being read into the model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "ggufkit/error.h"

namespace ggufkit::convert_detail {

// tokenizer.json (tens of MB for a large vocabulary; parsed by simdjson, in memory proportional
// to it), merges.txt, tokenizer.model, chat templates.
inline constexpr uint64_t kMaxCheckpointTextBytes = uint64_t{256} << 20;
// config.json and generation_config.json: kilobytes in real checkpoints, parsed into a DOM that
// takes some 30 times the text; a larger one is refused before it is read.
inline constexpr uint64_t kMaxConfigJsonBytes = uint64_t{4} << 20;
// tokenizer_config.json, chat_template.json, added_tokens.json: up to a few MB (Gemma 3's
// tokenizer_config.json is 1.2 MB), parsed the same way.
inline constexpr uint64_t kMaxTokenizerConfigBytes = uint64_t{16} << 20;
// The largest size read_checkpoint_text reads for a file of that name.
uint64_t checkpoint_text_limit(const std::filesystem::path& relative);

// Whether `file` (in `root`, the checkpoint directory) may be read; the error names the file
// (relative to root) and says why not. A file that does not exist passes (the caller decides).
Expected<void> check_checkpoint_file(const std::filesystem::path& root, const std::filesystem::path& file);

// The content of root/relative; nullopt when it does not exist.
Expected<std::optional<std::string>> read_checkpoint_text(const std::filesystem::path& root,
                                                          const std::filesystem::path& relative);

}  // namespace ggufkit::convert_detail
