// Reading GGUF files: zero-copy and validated.
//
// GgufFile::open maps the file and checks every record once (every check llama.cpp's gguf.cpp
// makes, and the ones it misses). After that, keys, strings, arrays and tensor data are views
// into the mapping, decoded only when asked for. Opening a 262k-token vocabulary allocates one
// record per key, not one per token.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/format.h"
#include "ggufkit/mapped_file.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/value.h"

namespace ggufkit {

struct OpenOptions {
  // Arrays of arrays deeper than this are rejected (llama.cpp accepts none; gguf-py writes them).
  // GgufBuilder refuses to build a value deeper than the default (format.h).
  uint32_t max_array_depth = kMaxArrayDepth;
  // For diagnosis (gguf check), as LLVM's warning handlers: when set, it is called with each
  // problem after which the rest of the file can still be located, and parsing goes on when it
  // returns true (the problem then fails the open when it returns false). A problem that makes the
  // rest unreadable always fails the open, without a call. A file opened past problems may break
  // rules its users normally rely on: repeated keys (find() gives the first) and tensor names,
  // alignment 32 when general.alignment is bad, tensors of unknown or removed type ids (type holds
  // the raw id, size 0), tensors with an impossible shape (shape [0], size 0), misplaced tensor
  // data (tensor_data() is empty when the bytes are not inside the file).
  std::function<bool(const Error&)> on_problem{};
  // Accept a metadata-only file: tensor infos whose data is not in the file at all (the file ends
  // where the data section would start, after the padding), as llama.cpp's
  // gguf_write_to_file(..., only_meta = true) writes and its parser reads when no data is asked
  // for. GgufFile::has_tensor_data() is then false and tensor_data() empty for every tensor; the
  // tensors' offsets are still checked. Without it such a file is refused (data_out_of_bounds,
  // saying it is metadata-only): commands that need the data (extract, hash, quantize, merge...)
  // leave it off; those that show the metadata (info, dump, get, check) turn it on.
  bool allow_metadata_only = false;
};

struct KeyValue {
  std::string_view key;
  ValueView value;
  uint64_t offset = 0;   // file offset of the record (its key length field)
};

struct TensorInfo {
  std::string_view name;
  TensorType type = TensorType::F32;
  uint32_t n_dims = 0;                       // as stored; ne[i] == 1 for i >= n_dims
  std::array<int64_t, kMaxDimensions> ne{1, 1, 1, 1};
  uint64_t offset = 0;                       // relative to the data section
  uint64_t size = 0;                         // bytes, without padding
  uint64_t info_offset = 0;                  // file offset of this tensor's info record

  std::span<const int64_t> shape() const { return {ne.data(), n_dims}; }
  // Validated not to overflow; a zero dimension makes it 0 before any product is formed (the
  // other dimensions may be huge).
  int64_t n_elements() const {
    if (ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0) return 0;
    return ne[0] * ne[1] * ne[2] * ne[3];
  }
};

struct PrefixParse;

class GgufFile {
 public:
  // Maps and validates a file.
  static Expected<GgufFile> open(const std::filesystem::path& path, const OpenOptions& options = {});
  // Validates bytes already in memory. The bytes must outlive the GgufFile and every view from it
  // (`owner`, their buffer say, lives as long as the file).
  static Expected<GgufFile> parse(std::span<const std::byte> bytes, const OpenOptions& options = {},
                                  std::shared_ptr<const void> owner = {});
  // Validates the header from the first bytes of a file of `file_size` bytes (a download in
  // progress: src/remote reads headers this way). Every check of parse() is made, those about the
  // tensor data against `file_size`. When the prefix ends before the header does, the result has
  // no file but says how far the parser needs to read (PrefixParse::needed, estimate); errors are
  // the file's own problems. The file is a header view: bytes() is the header, has_tensor_data()
  // is false, tensor_data() empty. `owner` (the prefix's buffer, say) lives as long as the file.
  static Expected<PrefixParse> parse_prefix(std::span<const std::byte> prefix, uint64_t file_size,
                                            const OpenOptions& options = {}, std::shared_ptr<const void> owner = {});

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  // The path it was opened from (open); empty for parse(). Writers never replace it (OutputPolicy).
  const std::filesystem::path& path() const { return path_; }
  // The open file it was read from (open), -1 for parse(): the same file whatever the path names
  // later (another process may rename a new file over it).
  int fd() const;
  uint32_t version() const { return version_; }
  // A big-endian file is read through a byte-swapped copy of its header (so metadata views,
  // tensor infos and error offsets work as for a little-endian file); its tensor data stays in
  // the mapping, big-endian: tensor_data() gives the stored bytes, copy_tensor_native
  // (ggufkit/endian.h) gives them in the host's order.
  ByteOrder byte_order() const { return byte_order_; }
  uint32_t alignment() const { return alignment_; }
  // Where the tensor data section starts: the end of the tensor infos, padded to the alignment
  // when there is at least one tensor (as llama.cpp does).
  uint64_t data_offset() const { return data_offset_; }
  // Where the tensor infos end, before padding.
  uint64_t header_size() const { return header_size_; }
  // Whether the header is padded to the alignment: always when there are tensors; without tensors
  // when the file is exactly its padded header (llama.cpp writes that; some gguf-py versions write
  // the header alone). The one definition writers copy when they reproduce a file's layout.
  bool header_padded() const;
  uint64_t file_size() const { return file_size_; }
  std::span<const std::byte> bytes() const { return bytes_; }
  // The header [0, header_size()) as the metadata views see it: the file's own bytes when it is
  // little-endian, the byte-swapped copy when it is big-endian.
  std::span<const std::byte> header_view() const {
    return byte_order_ == ByteOrder::big ? std::span<const std::byte>(swapped_header_) : bytes_.first(header_size_);
  }

  // Metadata in file order.
  std::span<const KeyValue> metadata() const { return kvs_; }
  const KeyValue* find(std::string_view key) const;
  std::optional<ValueView> get(std::string_view key) const {
    const KeyValue* kv = find(key);
    return kv ? std::optional<ValueView>(kv->value) : std::nullopt;
  }

  // Tensors in file order.
  std::span<const TensorInfo> tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes at their aligned place in the mapping, in the file's byte order.
  // Empty when they are not inside the file (only possible when opened with OpenOptions::on_problem).
  std::span<const std::byte> tensor_data(const TensorInfo& tensor) const {
    const uint64_t size = bytes_.size();
    if (data_offset_ > size || tensor.offset > size - data_offset_ || tensor.size > size - data_offset_ - tensor.offset) {
      return {};
    }
    return bytes_.subspan(data_offset_ + tensor.offset, tensor.size);
  }
  // False for a metadata-only file (OpenOptions::allow_metadata_only) that has tensors, and for a
  // header view (parse_prefix).
  bool has_tensor_data() const { return !metadata_only_ && !header_only_; }
  // A header parsed from a prefix (parse_prefix): the tensor data is in the file, not here.
  bool header_only() const { return header_only_; }
  // Sum of the tensors' sizes (without padding).
  uint64_t tensor_bytes() const;
  // Done with a tensor's bytes for now: a mapped file's pages of it leave the process's resident
  // memory (MappedFile::release); nothing happens for caller-owned bytes.
  void release_tensor_pages(const TensorInfo& tensor) const {
    if (mapping_ && !tensor_data(tensor).empty()) mapping_->release(data_offset_ + tensor.offset, tensor.size);
  }

 private:
  friend class Parser;
  GgufFile() = default;

  std::unique_ptr<MappedFile> mapping_;  // null when parsing caller-owned bytes
  std::filesystem::path path_;
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t header_size_ = 0;
  uint64_t data_offset_ = 0;
  bool metadata_only_ = false;
  bool header_only_ = false;
  uint64_t file_size_ = 0;
  std::shared_ptr<const void> owner_;      // what keeps a prefix's bytes alive (parse_prefix)
  std::vector<KeyValue> kvs_;
  std::vector<size_t> kv_by_key_;            // indices of kvs_ sorted by key, for find()
  std::vector<TensorInfo> tensors_;
  std::vector<size_t> tensor_by_name_;       // indices of tensors_ sorted by name
  ByteOrder byte_order_ = ByteOrder::little;
  // Big-endian files only: bytes [0, header_size_) with every integer swapped to little-endian.
  // Metadata and name views point here. A vector's buffer survives moves of the GgufFile.
  std::vector<std::byte> swapped_header_;
};

// GgufFile::parse_prefix's result: the file, or how much of it the parser needs.
struct PrefixParse {
  std::optional<GgufFile> file;  // set when the prefix held the whole header
  uint64_t needed = 0;           // otherwise: the bytes from the start of the file it needs at least
  uint64_t estimate = 0;         // and its estimate of the whole header's size (>= needed)
};

}  // namespace ggufkit
