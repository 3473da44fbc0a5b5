// Digests of a model, tensor by tensor and file by file, as a manifest; and verification of a model
// against one. Users check a large download tensor by tensor: a mismatch names the tensor (or,
// when every tensor matches but a file does not, the metadata). Two manifest formats: ggufkit's
// own (files and tensors, with sizes) and the line format of llama.cpp's gguf-hash and gguf-py's
// gguf_hash.py ("ALGO  DIGEST  FILE:TENSOR"), read and written as they do.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/threads.h"

namespace ggufkit {

// SHA-1 and SHA-256 are libcrypto's, XXH64 (seed 0) libxxhash's. uuid is llama.cpp's model id: a
// version 5 UUID from the SHA-1 of its namespace ef001206-dadc-5f6d-a15f-3359e577d4e5 and the data.
enum class DigestAlgorithm : uint8_t { xxh64, sha256, sha1, uuid };
std::string_view digest_algorithm_name(DigestAlgorithm algorithm);  // "xxh64", "sha256", "sha1", "uuid"
std::optional<DigestAlgorithm> parse_digest_algorithm(std::string_view name);  // case-insensitive
// Lower-case hex: 16 digits for xxh64 (the 64-bit value, big-endian as xxhsum prints it), 40 for
// sha1, 64 for sha256; the 36-character 8-4-4-4-12 form for uuid.
std::string digest_hex(DigestAlgorithm algorithm, std::span<const std::byte> data);
size_t digest_length(DigestAlgorithm algorithm);  // the characters digest_hex gives

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
// hashed as stored (a big-endian file's bytes as they are). Each byte is read once per digest it
// belongs to, the file's and its tensor's on different cores at the same time; the largest
// streams start first.
// Progress of a digest run: (bytes digested, bytes in all), counting a byte once per digest it
// belongs to. Called from the workers one at a time, every 16 MiB or so, and last with
// (total, total) on the caller's thread.
using HashProgress = std::function<void(uint64_t done, uint64_t total)>;
// `cancel`, when set, is read between 16 MiB slices: once true the workers stop, and the manifest
// returned is incomplete (the digests not finished are empty); the caller reports the cancel.
Manifest hash_model(const SplitModel& model, DigestAlgorithm algorithm, Threads threads = kAllCores,
                    const HashProgress& progress = {}, const std::atomic<bool>* cancel = nullptr);

// The manifest as text: a comment line, "algorithm NAME", then one line per entry:
// "file DIGEST BYTES NAME" and "tensor DIGEST BYTES NAME"; names are escaped (escape_text, text.h:
// \\, and \xNN for each byte of a terminal control or of invalid UTF-8) so that every entry is one
// line, shows no control character, and reads back to the same name.
std::string format_manifest(const Manifest& manifest);
// Reads format_manifest's text back; errors name the line (invalid_argument). The stream overload
// reads line by line (memory is what the entries take); a read error is io_error.
Expected<Manifest> parse_manifest(std::string_view text);
Expected<Manifest> parse_manifest(std::istream& in);

struct ManifestMismatch {
  std::string kind;     // "tensor", "file", "missing_tensor", "unexpected_tensor", "file_count", "model"
  std::string name;
  std::string message;
};
// Compares a model's manifest with an expected one (same algorithm): tensors by name, files by
// position (a download may be renamed). Empty when they agree.
std::vector<ManifestMismatch> compare_manifests(const Manifest& expected, const Manifest& actual);
// The same, each mismatch handed over as it is found, in the same order: memory is the model's
// names, not the mismatches (a manifest listing a million tensors the model lacks).
using MismatchHandler = std::function<void(ManifestMismatch)>;
void compare_manifests(const Manifest& expected, const Manifest& actual, const MismatchHandler& on_mismatch);

// llama.cpp's gguf-hash manifests (examples/gguf-hash) and gguf-py's gguf_hash.py output: one line
// per digest, "ALGO  DIGEST  NAME" with ALGO padded to 8 columns, NAME the file as the tool was
// given it ("FILE") for the model's digest, "FILE:TENSOR" for a tensor's. The model's digest is
// that of every tensor's data in the file's tensor order (not the file's bytes); the model id
// (uuid) is computed over the same bytes. gguf_hash.py leaves out tensors named *.attention.bias,
// *.attention.masked_bias and *.rotary_emb.inv_freq, which no current converter writes.
struct GgufHashEntry {
  DigestAlgorithm algorithm = DigestAlgorithm::xxh64;
  std::string digest;
  std::string tensor;  // empty for the model's digest
};
struct GgufHashManifest {
  std::string file;                    // FILE, as the lines spell it
  std::vector<GgufHashEntry> entries;  // in the order of the lines
};
struct GgufHashOptions {
  // Among xxh64, sha1, sha256, uuid; listed in gguf-hash's order whatever the order here. uuid has
  // only a model line.
  std::vector<DigestAlgorithm> algorithms{DigestAlgorithm::xxh64};
  bool per_tensor = true;  // false: --no-layer, the model's lines only
  HashProgress progress{};
};
// What gguf-hash prints for `file` (one GGUF file; a shard is hashed on its own, as gguf-hash
// does), its lines in its order: each tensor's xxh64, sha1, sha256 in turn, then the model's
// xxh64, sha1, sha256, uuid. `name` is FILE.
GgufHashManifest gguf_hash_file(const GgufFile& file, std::string name, const GgufHashOptions& options,
                                Threads threads = kAllCores);
// A name (FILE or FILE:TENSOR) with a terminal control, a newline or bytes that are not UTF-8
// (needs_escape, text.h), or a space or tab at either end, is written escaped (escape_text, the
// edge spaces as \x20 / \x09) on a line that starts with '\', as
// coreutils' sha256sum marks an escaped name: "\xxh64  DIGEST  FILE:a\x0ab". Other lines are
// gguf-hash's, byte for byte.
std::string format_gguf_hash(const GgufHashManifest& manifest);
// True when the text's first entry line starts with an algorithm name (a gguf-hash manifest)
// rather than ggufkit's "algorithm" line.
bool is_gguf_hash_manifest(std::string_view text);
bool is_gguf_hash_manifest(std::istream& in);
// Reads gguf-hash's lines back (blank lines and # comments skipped; a line marked '\' has its name
// unescaped). FILE is the shortest name; every other name must be FILE:TENSOR. Errors name the
// line (invalid_argument). The stream overload reads line by line; a read error is io_error.
Expected<GgufHashManifest> parse_gguf_hash(std::string_view text);
Expected<GgufHashManifest> parse_gguf_hash(std::istream& in);
// The algorithms of a manifest's lines, and the one gguf-hash verifies with when none is asked
// for: the strongest present (sha256, then sha1, xxh64, uuid).
std::vector<DigestAlgorithm> gguf_hash_algorithms(const GgufHashManifest& manifest);
// Which lines a manifest has: a tensor line (FILE:TENSOR) or a model line (FILE) of one of
// `algorithms`.
enum class GgufHashLines : uint8_t { tensor, model };
bool has_gguf_hash_lines(const GgufHashManifest& manifest, std::span<const DigestAlgorithm> algorithms,
                         GgufHashLines lines);
DigestAlgorithm strongest_gguf_hash_algorithm(const GgufHashManifest& manifest);
// Compares a file's gguf-hash digests with a manifest's, for each algorithm `actual` has: tensors
// by name (FILE may differ: a download may be renamed) when both have tensor lines for the
// algorithm (not against a --no-layer manifest, nor when `actual` was computed without them), and
// the model's digest ("model").
std::vector<ManifestMismatch> compare_gguf_hash(const GgufHashManifest& expected, const GgufHashManifest& actual);
void compare_gguf_hash(const GgufHashManifest& expected, const GgufHashManifest& actual,
                       const MismatchHandler& on_mismatch);

}  // namespace ggufkit
