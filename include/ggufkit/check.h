// Validating a GGUF file before an engine loads it: structure, metadata conventions, architecture
// consistency, tokenizer, RoPE, LoRA adapters against their base, and which engines read its types.
//
// Problems are findings, not errors: check_file keeps going after a problem wherever the rest of
// the file can still be located safely, and reports each problem once. Only a file that cannot be
// opened at all (missing, unreadable) is an Error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"

namespace ggufkit {

enum class Severity : uint8_t { error, warning, info };
std::string_view severity_name(Severity severity);  // "error", "warning", "info"

struct Finding {
  Severity severity = Severity::error;
  // Stable, "<area>.<name>": structure.*, metadata.*, arch.*, tokenizer.*, rope.*, lora.*, mmproj.*,
  // split.*, compat.*.
  // The codes are part of the CLI's JSON output and never change meaning.
  std::string code;
  std::string subject;              // the key or tensor concerned, empty when none
  std::optional<uint64_t> offset;   // byte offset in the file, when the finding has one
  std::string message;              // what is wrong and what to do, one or two sentences
  std::string file;                 // the shard or base file concerned, empty for the checked file

  // "error structure.bad_tensor_offset at offset 1234, tensor 'blk.0.attn_q.weight': ..."
  std::string describe() const;
};

struct CheckOptions {
  // The base model of a LoRA adapter (--base): the adapter's tensors are checked against it.
  std::optional<std::filesystem::path> base;
};

// What check judged the file to be; each kind is checked by the passes that apply to it:
//   model       every pass
//   adapter     a LoRA adapter (general.type "adapter"): structure, metadata, lora.*, compat.*
//   projector   a multimodal projector (general.type "mmproj", architecture "clip"): structure,
//               metadata, mmproj.*, compat.*
//   vocabulary  no tensors (llama.cpp's vocab_only files): structure, metadata, tokenizer.*, and
//               the hyperparameters and RoPE keys it gives (none is required)
//   shard       a split model's shard other than the first: its structure and tensor types (the
//               model as a whole is checked from the first shard)
enum class FileKind : uint8_t { model, adapter, projector, vocabulary, shard };
std::string_view file_kind_name(FileKind kind);  // "model", "adapter", ...

struct CheckReport {
  FileKind kind = FileKind::model;
  std::vector<Finding> findings;   // in the order they were found: structure first
  // False when the file's structure was too broken to check anything past it (no metadata or
  // tensor checks ran on the part after the break).
  bool complete = true;

  size_t count(Severity severity) const;
  // Exit status rule: no errors, and no warnings when strict.
  bool passed(bool strict) const;
};

// Checks a file, or a split model from its first shard (every shard's structure, the model as a
// whole for the rest). Errors: the file (or the base) cannot be opened or mapped.
Expected<CheckReport> check_file(const std::filesystem::path& path, const CheckOptions& options = {});

// Checks bytes already in memory as one file (a download not yet written, a section of a larger
// file). Never fails.
CheckReport check_bytes(std::span<const std::byte> bytes, const CheckOptions& options = {});
// Checks a file of `file_size` bytes from its header alone (a remote file's, GgufFile::bytes() of
// a header view): every check of check_bytes but those of the tensor data's bytes. Without
// `file_size`, check_bytes.
CheckReport check_header(std::span<const std::byte> header, std::optional<uint64_t> file_size,
                         const CheckOptions& options = {});

}  // namespace ggufkit
