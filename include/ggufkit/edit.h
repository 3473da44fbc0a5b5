// Editing a file's metadata without touching its tensors.
//
// An edit is planned first (plan_metadata_edit: what changes, the new header, and how it will be
// written), then applied (apply_metadata_edit). Two ways to write it:
//  * in place, when the new header ends where the old one did once padded to the alignment (the
//    data section does not move) and every byte that changes lies in one 4 KiB page: one write the
//    kernel never tears when the process dies, so the file is always either old or new;
//  * otherwise a rewrite: the new header, then the data section copied byte for byte
//    (copy_file_range where the file system offers it) into a temporary file next to the target,
//    flushed and renamed over it. Killing it at any moment leaves the old file.
// Tensor infos and tensor bytes are copied verbatim either way (only a change of general.alignment
// lays the data out again).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <utility>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "ggufkit/sink.h"
#include "ggufkit/value.h"

namespace ggufkit {

struct MetadataChange {
  enum class Kind { set, remove, rename };
  Kind kind = Kind::set;
  std::string key;       // the key set, removed or renamed
  std::string new_key;   // rename only
  MetadataValue value;   // set only

  static MetadataChange set(std::string key, MetadataValue value) {
    return {Kind::set, std::move(key), {}, std::move(value)};
  }
  static MetadataChange remove(std::string key) { return {Kind::remove, std::move(key), {}, {}}; }
  static MetadataChange rename(std::string from, std::string to) {
    return {Kind::rename, std::move(from), std::move(to), {}};
  }
};

// How a planned edit reaches the disk.
enum class EditMode {
  unchanged,  // the new header is the old one: nothing to write
  in_place,   // one write into the existing file
  rewrite,    // a new file renamed over the target
};
std::string_view edit_mode_name(EditMode mode);

struct EditPlan {
  // One entry per key the edit touches, in the order of the new metadata.
  struct KeyChange {
    std::string key;
    std::optional<std::string> renamed_from;  // rename: the old key
    std::optional<MetadataValue> before;      // absent when the key is new
    std::optional<MetadataValue> after;       // absent when the key is removed
  };
  std::vector<KeyChange> changes;
  EditMode mode = EditMode::unchanged;
  std::string reason;              // why this mode (for --dry-run)
  std::vector<std::byte> header;   // the new header, padded to where the data section starts
  uint64_t old_data_offset = 0;
  // The file's bytes [0, old_data_offset) when the plan was made: apply_metadata_edit refuses to
  // write when the file on disk no longer starts with them.
  std::vector<std::byte> original_header;
  uint64_t new_data_offset = 0;
  uint64_t write_offset = 0;       // in place: the bytes written are header[write_offset, +write_length)
  uint64_t write_length = 0;
  bool realign = false;            // general.alignment changes: the tensor data is laid out again
  std::vector<std::pair<std::string, MetadataValue>> realigned_metadata;  // realign only: the new metadata
};

struct EditOptions {
  // Never write in place (always a rewrite). An output path other than the input implies it.
  bool force_rewrite = false;
};

// Applies the changes to a copy of the file's metadata, in the order given. Errors: removing or
// renaming a key that does not exist, renaming onto an existing key, invalid values (a malformed
// value, general.alignment not a uint32 power of two), an empty key.
Expected<EditPlan> plan_metadata_edit(const GgufFile& file, std::span<const MetadataChange> changes,
                                      const EditOptions& options = {});

struct ApplyOptions {
  bool sync = true;  // fsync before the rename (rewrite) or after the write (in place)
  // Rewrites: (bytes copied, bytes to copy), called as the data section is copied.
  std::function<void(uint64_t, uint64_t)> progress;
  // A target other than the source: what it may replace (sink.h); never the source.
  OutputPolicy output{};
  // Set from another thread (a signal handler) to stop a rewrite: ErrorCode::cancelled, the file
  // untouched. (An in-place write is one short write and always completes.)
  const std::atomic<bool>* cancel = nullptr;
};

// An advisory lock (flock(2), exclusive) on a file for the whole of an edit: taken before the file
// is opened and read, held until the edit is written. Every gguf edit takes it, so that two edits
// of one file run one after the other and both land, whether each writes in place or rewrites.
// A file replaced (renamed over) while waiting is locked again under the path's new file.
class EditLock {
 public:
  static Expected<EditLock> acquire(const std::filesystem::path& path);
  // The same, for a caller whose wait must end on request (the Python module's Ctrl-C): while
  // another process holds the lock, `cancelled` is called about every 10 ms on the calling
  // thread; once it returns true the wait ends with ErrorCode::cancelled and nothing is locked.
  // (acquire(path) waits in flock(2) and cannot be ended.)
  static Expected<EditLock> acquire(const std::filesystem::path& path, const std::function<bool()>& cancelled);
  EditLock(EditLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  EditLock& operator=(EditLock&&) = delete;
  EditLock(const EditLock&) = delete;
  ~EditLock();

 private:
  explicit EditLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Writes a plan made from `file` (opened from `source`) to `target`: `source` itself (in place or
// rewrite, as planned) or another path (always a fresh file, written atomically). The source must
// not have changed since it was opened. A read-only source is never replaced.
Expected<void> apply_metadata_edit(const GgufFile& file, const std::filesystem::path& source, const EditPlan& plan,
                                   const std::filesystem::path& target, const ApplyOptions& options = {});

// Parses text as a scalar of `type` (a string is taken as is; booleans are true/false/1/0; integers
// are range-checked; floats accept what strtod does, inf and nan included).
Expected<MetadataValue> parse_scalar_value(std::string_view text, ValueType type);

// Parses JSON text as a value: a scalar, or an array (nested arrays too). `type` is the scalar type,
// or for arrays the element type; nullopt takes it from the value the new one replaces (`like`,
// may be null), else infers it from the JSON (strings, booleans, float32, then the smallest of
// uint32, int32, int64, uint64 that holds every integer). Errors (invalid_argument): not JSON,
// null or objects, mixed kinds, a value that does not fit the type.
Expected<MetadataValue> parse_json_value(std::string_view json_text, std::optional<ValueType> type,
                                         const ValueView* like = nullptr);

// The type a new key gets from its text when none is given: a key the conventions define as a string
// (general.name, tokenizer.chat_template..., ...) stays a string; otherwise true/false is a bool, an
// integer is uint32 (int32 when negative; 64 bits when it does not fit), a decimal or exponent number
// is float32, anything else a string.
ValueType infer_value_type(std::string_view key, std::string_view text);

}  // namespace ggufkit
