// Digests of a model, tensor by tensor and file by file, as a manifest; and verification of a model
// against one. Users check a large download tensor by tensor: a mismatch names the tensor (or,
// when every tensor matches but a file does not, the metadata).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/split.h"
#include "ggufkit/threads.h"

namespace ggufkit {

enum class DigestAlgorithm : uint8_t { xxh64, sha256 };
std::string_view digest_algorithm_name(DigestAlgorithm algorithm);  // "xxh64", "sha256"
std::optional<DigestAlgorithm> parse_digest_algorithm(std::string_view name);  // case-insensitive
// Lower-case hex: 16 digits for xxh64 (the 64-bit value, big-endian as xxhsum prints it), 64 for sha256.
std::string digest_hex(DigestAlgorithm algorithm, std::span<const std::byte> data);

struct ManifestEntry {
  std::string name;    // a file's name (no directory) or a tensor's name
  uint64_t bytes = 0;  // the file's size or the tensor's stored size
  std::string digest;  // hex, as digest_hex
};

struct Manifest {
  DigestAlgorithm algorithm = DigestAlgorithm::xxh64;
  std::vector<ManifestEntry> files;    // the model's files: one, or every shard in order
  std::vector<ManifestEntry> tensors;  // every tensor in model order, its bytes as stored
};

// Digests of every file and tensor of a model (a plain file or a split model). Tensors are
// hashed as stored (a big-endian file's bytes as they are).
Manifest hash_model(const SplitModel& model, DigestAlgorithm algorithm, Threads threads = kAllCores);

// The manifest as text: a comment line, "algorithm NAME", then one line per entry:
// "file DIGEST BYTES NAME" and "tensor DIGEST BYTES NAME"; names are escaped (\\, \xNN for control
// bytes) so that every entry is one line.
std::string format_manifest(const Manifest& manifest);
// Reads format_manifest's text back; errors name the line (invalid_argument).
Expected<Manifest> parse_manifest(std::string_view text);

struct ManifestMismatch {
  std::string kind;     // "tensor", "file", "missing_tensor", "unexpected_tensor", "file_count"
  std::string name;
  std::string message;
};
// Compares a model's manifest with an expected one (same algorithm): tensors by name, files by
// position (a download may be renamed). Empty when they agree.
std::vector<ManifestMismatch> compare_manifests(const Manifest& expected, const Manifest& actual);

}  // namespace ggufkit
