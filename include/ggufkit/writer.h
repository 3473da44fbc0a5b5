// Writing GGUF files: metadata plus tensors whose bytes come from memory or from a callback,
// streamed in bounded memory, written to a temporary file and renamed into place.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "ggufkit/sink.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/value.h"

namespace ggufkit {

// Fills `out` with the tensor's bytes starting at byte `offset` of the tensor. Called in order,
// with chunks of at most WriteOptions::chunk_bytes, so a producer can quantize or read lazily.
using TensorProducer = std::function<Expected<void>(uint64_t offset, std::span<std::byte> out)>;

struct WriteOptions {
  // llama.cpp pads the end of the tensor infos to the alignment even when there are no tensors;
  // some gguf-py files without tensors are not padded. Round trips copy the source's choice.
  bool pad_header_without_tensors = true;
  // Size of the buffer a TensorProducer fills; bounds the writer's memory.
  size_t chunk_bytes = size_t{4} << 20;
  // fsync the file (and its directory) before the rename.
  bool sync = true;
  // The byte order of the header (counts, metadata values, tensor infos). Tensor bytes are written
  // exactly as given: a big-endian file needs big-endian tensor data (ggufkit/endian.h swaps it).
  ByteOrder byte_order = ByteOrder::little;
  // What write_file may replace (sink.h).
  OutputPolicy output{};
  // Set from another thread (a signal handler) to stop: write() returns ErrorCode::cancelled, and
  // write_file leaves no file behind.
  const std::atomic<bool>* cancel = nullptr;
  // Called after each tensor's bytes are written: (tensors written, tensors in all).
  std::function<void(size_t, size_t)> progress;
  // Called while a tensor is written, after each chunk of it (chunk_bytes, or a 64 MiB slice of a
  // view): (its index from 0, its bytes written so far, its size). Movement inside a large tensor.
  std::function<void(size_t tensor, uint64_t done, uint64_t size)> tensor_progress{};
};

class GgufBuilder {
 public:
  GgufBuilder() = default;
  // Everything from a file: version, metadata (byte-exact copies), tensors (views of its data),
  // and its header padding choice and byte order (suggested_options). The file must outlive the
  // builder. See rewrite_file for which bytes come back unchanged.
  static GgufBuilder from_file(const GgufFile& file);

  // GGUF v2 or v3 (the default); v2 and v3 share one layout.
  Expected<void> set_version(uint32_t version);
  uint32_t version() const { return version_; }

  // Adds a key at the end, or replaces the value of an existing key in place.
  // Setting general.alignment checks that it is a uint32 power of two.
  Expected<void> set(std::string_view key, MetadataValue value);
  bool remove(std::string_view key);
  const MetadataValue* find(std::string_view key) const;
  // The alignment general.alignment gives, or 32.
  uint32_t alignment() const;
  Expected<void> set_alignment(uint32_t alignment) { return set(keys::kAlignment, MetadataValue::of(alignment)); }

  // Tensors are written in the order they are added. The shape is in ggml order (ne0 first).
  // Spans are not copied: their bytes must live until the write (use the vector overload to hand
  // the bytes over).
  Expected<void> add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape,
                            std::span<const std::byte> data);
  Expected<void> add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape,
                            TensorProducer producer);
  // The builder keeps the bytes.
  Expected<void> add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape,
                            std::vector<std::byte>&& data);

  size_t tensor_count() const { return tensors_.size(); }
  // Tensor `index` (in the order added): its name and its size in bytes, without padding.
  std::string_view tensor_name(size_t index) const { return tensors_.at(index).name; }
  uint64_t tensor_size(size_t index) const { return tensors_.at(index).size; }
  size_t metadata_count() const { return kvs_.size(); }

  // Size of everything before the data section, padding included.
  uint64_t header_bytes(const WriteOptions& options = {}) const;
  // Size of the whole file this builder writes.
  uint64_t file_bytes(const WriteOptions& options = {}) const;

  Expected<void> write(ByteSink& sink, const WriteOptions& options = {}) const;
  // The header alone, padded: what write() writes before the first tensor's bytes. For a writer
  // that is handed the tensors' bytes one after another (the Python GGUFWriter's
  // write_tensor_data): it then writes each tensor's size() bytes and padding_after() zeros.
  Expected<void> write_header(ByteSink& sink, const WriteOptions& options = {}) const;
  // The zeros that follow `bytes` of tensor data to the alignment.
  uint64_t padding_after(uint64_t bytes) const;
  // Writes to a temporary file next to `path`, flushes it, then renames it over `path`:
  // `path` is either untouched or complete, never half written.
  Expected<void> write_file(const std::filesystem::path& path, const WriteOptions& options = {}) const;

  // Where the builder's padding choice must come from when copying a file.
  WriteOptions suggested_options() const { return suggested_; }

 private:
  struct Entry {
    std::string key;
    MetadataValue value;
  };
  struct Tensor {
    std::string name;
    TensorType type;
    uint32_t n_dims;
    std::array<int64_t, kMaxDimensions> ne;
    uint64_t size;
    std::span<const std::byte> bytes;   // used when producer is empty
    TensorProducer producer;
    std::shared_ptr<const std::vector<std::byte>> owned;  // keeps `bytes` alive when handed over
  };
  Expected<void> add_tensor_impl(std::string_view name, TensorType type, std::span<const int64_t> shape,
                                 std::span<const std::byte> data, TensorProducer producer);
  void encode_header(std::vector<std::byte>& out, ByteOrder order = ByteOrder::little) const;  // without the padding
  uint64_t header_padding(uint64_t unpadded, const WriteOptions& options) const;

  uint32_t version_ = kGgufVersionLatest;
  std::vector<Entry> kvs_;
  std::vector<Tensor> tensors_;
  uint64_t data_bound_ = 0;  // the data section's size at the largest alignment (kept below 2^63)
  WriteOptions suggested_;
};

// Writes `file` back out, atomically; `sync` fsyncs before the rename. Files laid out the way
// llama.cpp's and gguf-py's writers lay them out (zero padding after every tensor) come back byte for
// byte. Other files llama.cpp accepts come back normalised: padding zeroed, the last tensor padded,
// bytes after the last tensor (or after a header without tensors) dropped.
Expected<void> rewrite_file(const GgufFile& file, const std::filesystem::path& path, bool sync = true);

}  // namespace ggufkit
