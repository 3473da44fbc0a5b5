// Hugging Face safetensors files, read zero-copy: the JSON header is parsed and validated once,
// the tensors' data are views into the mapped file (or the caller's bytes).
//
// The format (github.com/huggingface/safetensors, README "Format"): an 8-byte little-endian
// header size N, N bytes of UTF-8 JSON, then the data region. The JSON is an object mapping tensor
// names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data region),
// plus an optional "__metadata__" object of strings.
//
// Checks: those of the reference Rust crate (safetensors/src/tensor.rs: read_metadata and
// Metadata::validate, crate at 24b0b28, 2026-05), plus what the README requires and the crate does
// not enforce, plus bounds for untrusted input. See the comment at the top of
// src/convert/safetensors.cpp for the list.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/mapped_file.h"

namespace ggufkit {

inline constexpr uint64_t kSafetensorsSizeFieldBytes = 8;                // the u64 header size N
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;      // the crate's MAX_HEADER_SIZE
inline constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";
inline constexpr std::string_view kSafetensorsSingleFileName = "model.safetensors";
inline constexpr std::string_view kSafetensorsIndexFileName = "model.safetensors.index.json";

// Element types, as the crate's Dtype enum (names as written in the header).
enum class SafetensorsDtype : uint8_t {
  BOOL,
  F4,           // MXF4, 4 bits
  F6_E2M3,      // MXF6, 6 bits
  F6_E3M2,      // MXF6, 6 bits
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  F8_E4M3FNUZ,
  F8_E5M2FNUZ,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,          // complex: two F32
  F64,
  I64,
  U64,
};
inline constexpr size_t kSafetensorsDtypeCount = 22;

// "F32", "BF16", "F8_E4M3", ...
std::string_view safetensors_dtype_name(SafetensorsDtype dtype);
// The dtype a header names; nullopt for a name the crate does not know (names are case-sensitive).
std::optional<SafetensorsDtype> safetensors_dtype_from_name(std::string_view name);
// Bits per element: 4 and 6 for F4 and F6_*, else 8 times the byte size.
uint32_t safetensors_dtype_bits(SafetensorsDtype dtype);
// Bytes per element; 0 for the sub-byte types (F4, F6_*), whose tensors are sized in bits.
inline uint32_t safetensors_dtype_bytes(SafetensorsDtype dtype) {
  const uint32_t bits = safetensors_dtype_bits(dtype);
  return bits % 8 == 0 ? bits / 8 : 0;
}

struct SafetensorsOptions {
  // The crate's limit; lower it to refuse big headers early.
  uint64_t max_header_bytes = kSafetensorsMaxHeaderBytes;
  // Nesting of JSON objects and arrays (a valid header needs 3: the header, a tensor, its shape).
  // Deeper input is rejected before it is parsed further.
  uint32_t max_json_depth = 32;
  // Dimensions of one tensor (the crate has no limit; torch's is 64). Bounds memory on hostile
  // headers such as a shape of 50 million zeros.
  uint32_t max_dimensions = 64;
};

struct SafetensorsTensor {
  std::string name;                       // decoded from the JSON (escapes resolved)
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;             // outermost first (row-major); empty for a scalar
  std::span<const std::byte> data;        // the tensor's bytes, little-endian, in the mapping
  uint64_t data_begin = 0;                // data_offsets as stored: relative to the data region
  uint64_t data_end = 0;
  uint64_t header_offset = 0;             // file offset of the tensor's name in the header

  // Validated to fit in int64 when the file was opened.
  int64_t n_elements() const {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return n;
  }
};

class SafetensorsFile {
 public:
  // Maps and validates a file. Error offsets are file offsets.
  static Expected<SafetensorsFile> open(const std::filesystem::path& path, const SafetensorsOptions& options = {});
  // Validates bytes already in memory (a whole file). The bytes must outlive the SafetensorsFile
  // and every view from it.
  static Expected<SafetensorsFile> parse(std::span<const std::byte> bytes, const SafetensorsOptions& options = {});

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  // Tensors in the order of their data (by data_offsets; ties, only possible between empty
  // tensors, keep header order).
  std::span<const SafetensorsTensor> tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // The "__metadata__" strings, in header order; empty when there are none.
  std::span<const std::pair<std::string, std::string>> metadata() const { return metadata_; }
  std::optional<std::string_view> metadata_value(std::string_view key) const;

  uint64_t header_size() const { return header_size_; }    // N, the JSON's length
  uint64_t data_offset() const { return kSafetensorsSizeFieldBytes + header_size_; }
  uint64_t file_size() const { return bytes_.size(); }
  std::span<const std::byte> bytes() const { return bytes_; }
  // Asks the kernel to map the tensor's pages ahead of reading them (a hint; nothing for bytes
  // given to parse()).
  void prefetch(const SafetensorsTensor& tensor) const {
    if (mapping_) mapping_->prefetch(data_offset() + tensor.data_begin, tensor.data_end - tensor.data_begin);
  }
  // The JSON header as stored (including any padding).
  std::string_view header_json() const {
    return {reinterpret_cast<const char*>(bytes_.data()) + kSafetensorsSizeFieldBytes, header_size_};
  }

 private:
  friend class SafetensorsParser;
  SafetensorsFile() = default;

  std::unique_ptr<MappedFile> mapping_;  // null when parsing caller-owned bytes
  std::span<const std::byte> bytes_;
  uint64_t header_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::vector<size_t> tensor_by_name_;   // indices of tensors_ sorted by name, for find()
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {"tensor": "shard file"}}.
struct SafetensorsIndexEntry {
  std::string tensor;
  std::string shard;        // a file name next to the index
  uint64_t offset = 0;      // offset of the tensor's name in the index file
};

struct SafetensorsIndex {
  // The "metadata" object's members: strings as they are, other values as compact JSON
  // (transformers writes {"total_size": N}). Empty when absent.
  std::vector<std::pair<std::string, std::string>> metadata;
  // weight_map, in the index's order.
  std::vector<SafetensorsIndexEntry> weight_map;

  // Shard file names, each once, in order of first appearance in weight_map.
  std::vector<std::string> shard_files() const;
  // The shard holding `tensor` (a linear search); nullopt when the index does not list it.
  std::optional<std::string_view> shard_of(std::string_view tensor) const;

  // Errors: bad_header for malformed JSON, too deep a nesting, members of the wrong type or a
  // missing weight_map; duplicate_tensor for a tensor listed twice, duplicate_key for any other
  // repeated key; index_mismatch for a shard name that is not a plain file name (empty, ".",
  // "..", or with '/' or '\\': shards live next to the index). Offsets are offsets in the index.
  static Expected<SafetensorsIndex> parse(std::string_view json, const SafetensorsOptions& options = {});
  static Expected<SafetensorsIndex> open(const std::filesystem::path& path, const SafetensorsOptions& options = {});
};

struct SafetensorsModelTensor {
  const SafetensorsTensor* tensor = nullptr;  // points into one of the model's shards
  size_t shard = 0;                           // index into SafetensorsModel::shards()
};

// A checkpoint directory: model.safetensors, or the shards model.safetensors.index.json names.
class SafetensorsModel {
 public:
  // Opens DIR/model.safetensors.index.json and its shards when the index exists, else
  // DIR/model.safetensors. With an index, the index and the shards must agree exactly: every
  // tensor of weight_map is in the shard it names, and every tensor of every shard is listed for
  // that shard (index_mismatch otherwise, subject the tensor); a name in two shards is
  // duplicate_tensor. Errors from a shard have their message prefixed with the shard's file name.
  static Expected<SafetensorsModel> open(const std::filesystem::path& dir, const SafetensorsOptions& options = {});

  SafetensorsModel(SafetensorsModel&&) noexcept = default;
  SafetensorsModel& operator=(SafetensorsModel&&) noexcept = default;

  // The index, when the model has one.
  const std::optional<SafetensorsIndex>& index() const { return index_; }
  std::span<const SafetensorsFile> shards() const { return shards_; }
  // File names of shards(), relative to the directory.
  std::span<const std::string> shard_files() const { return shard_files_; }
  // Every tensor: shard by shard (in shard_files() order), each shard in data order.
  std::span<const SafetensorsModelTensor> tensors() const { return tensors_; }
  const SafetensorsModelTensor* find(std::string_view name) const;

 private:
  SafetensorsModel() = default;

  std::optional<SafetensorsIndex> index_;
  std::vector<SafetensorsFile> shards_;  // a vector's elements do not move when it is moved
  std::vector<std::string> shard_files_;
  std::vector<SafetensorsModelTensor> tensors_;
  std::vector<size_t> tensor_by_name_;
};

}  // namespace ggufkit
