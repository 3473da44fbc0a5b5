// Split models: shards written and read as llama.cpp's gguf-split and model loader do.
//
// A split model is N GGUF files named PREFIX-00001-of-0000N.gguf ... Every shard carries the keys
// split.no (uint16, 0-based), split.count (uint16) and split.tensors.count (int32, all shards'
// tensors); the first shard also carries all the model's metadata, the others nothing else.
// Tensors keep their order: shard 1 holds the first ones, shard 2 the next, and so on.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/json.h"
#include "ggufkit/reader.h"
#include "ggufkit/summary.h"
#include "ggufkit/writer.h"

namespace ggufkit {


// "PREFIX-00002-of-00005.gguf" for index 1 of 5 (llama_split_path; index is 0-based).
std::string split_path(std::string_view prefix, uint32_t index, uint32_t count);
// PREFIX when `path` ends in "-NNNNN-of-MMMMM.gguf" with exactly those numbers (llama_split_prefix).
std::optional<std::string> split_prefix(std::string_view path, uint32_t index, uint32_t count);

// "2G", "500M" (powers of 1000, as llama-gguf-split), "1GiB", "64MiB", "512K", or plain bytes.
Expected<uint64_t> parse_size(std::string_view text);

// When a new shard starts. With max_bytes, as llama-gguf-split --split-max-size: the tensors' sizes,
// each padded to 32 bytes, are summed (metadata is not counted) and a tensor that would take the
// sum past the limit opens a new shard. A tensor larger than the limit gets a shard of its own
// (llama-gguf-split refuses when that tensor is the first; we never write an empty shard).
// With max_tensors, as --split-max-tensors: at most that many tensors per shard.
struct SplitLimits {
  uint64_t max_bytes = 0;     // 0: no size limit
  uint64_t max_tensors = 0;   // 0: no count limit
};

struct ShardPlan {
  std::string path;
  size_t first_tensor = 0;    // index into the input's tensors
  size_t tensor_count = 0;
  uint64_t tensor_bytes = 0;  // sum of the tensors' sizes, without padding
  uint64_t file_bytes = 0;    // the shard file's exact size
};

struct SplitPlan {
  std::vector<ShardPlan> shards;
  uint64_t total_file_bytes() const;
};

// Which tensors go to which shard, from the tensors' sizes alone: the index of each shard's first
// tensor (the first is always 0; one shard when there are no tensors).
Expected<std::vector<size_t>> plan_shard_starts(std::span<const uint64_t> tensor_sizes, const SplitLimits& limits);

// The complete plan for splitting `input` into PREFIX-0000i-of-0000N.gguf files.
Expected<SplitPlan> plan_split(const GgufFile& input, std::string_view prefix, const SplitLimits& limits);

// Shard `index`'s content as a builder whose tensors are views of `input`'s data. The first shard
// gets the input's metadata (any split.* keys dropped), then split.no, split.tensors.count and
// split.count, in the order llama-gguf-split leaves them; the others get only those three keys.
// Every shard keeps the input's GGUF version.
Expected<GgufBuilder> shard_builder(const GgufFile& input, const SplitPlan& plan, size_t index);

struct SplitWriteOptions {
  bool sync = true;
  // The input's path (besides input.path()): a shard that would replace it is refused.
  std::filesystem::path input_path;
  // Called after each shard is written: (shards written, shards in all, the shard's path).
  std::function<void(size_t, size_t, const std::string&)> progress;
  // What the shards may replace (sink.h); checked for every shard before any is written.
  OutputPolicy output{};
  // Set from another thread (a signal handler) to stop: ErrorCode::cancelled, no shard written.
  const std::atomic<bool>* cancel = nullptr;
};
// Writes every shard of the plan as a set: each under a temporary name, renamed into place only when
// all are complete, so that a failure or an interruption leaves no shard under its final name.
// Refuses to replace the input.
Expected<void> write_split(const GgufFile& input, const SplitPlan& plan, const SplitWriteOptions& options = {});

// One tensor of a model that may be split: where its info and bytes are.
struct ModelTensor {
  const TensorInfo* info = nullptr;  // in shard `shard`'s GgufFile
  uint32_t shard = 0;
  std::span<const std::byte> data;
};

// A model opened from a plain GGUF file or from the first shard of a split model. A plain file
// (no split.count, or split.count 0 or 1, as llama.cpp reads it) is a model with one shard.
class SplitModel {
 public:
  // Opening a split model finds the siblings by the naming rule and checks, as llama.cpp's loader
  // and more: the first shard is split.no 0; every shard exists, parses, has split.no == its index
  // (uint16) and the same split.count; split.tensors.count (int32) equals the number of tensors;
  // no tensor name repeats; metadata in later shards (other than split.*) agrees with the first.
  static Expected<SplitModel> open(const std::filesystem::path& path, const OpenOptions& options = {});
  // One file already read (a remote header view, say) as a model of one shard named `name`; its
  // split keys are not followed.
  static SplitModel of_file(GgufFile file, std::filesystem::path name);

  SplitModel(SplitModel&&) noexcept = default;
  SplitModel& operator=(SplitModel&&) noexcept = default;

  bool is_split() const { return shards_.size() > 1; }
  // The file with the model's metadata (the first shard).
  const GgufFile& metadata_file() const { return shards_.front(); }
  std::span<const GgufFile> shards() const { return shards_; }
  std::span<const std::filesystem::path> paths() const { return paths_; }

  // Every tensor in model order (shard by shard, file order within a shard).
  std::span<const ModelTensor> tensors() const { return tensors_; }
  const ModelTensor* find_tensor(std::string_view name) const;
  const GgufFile& shard_of(const ModelTensor& t) const { return shards_[t.shard]; }
  // The shards' byte order. Shards of different orders are an error (invalid_argument): their
  // tensor bytes cannot be copied verbatim into one file.
  Expected<ByteOrder> byte_order() const;
  // Sum of the tensors' sizes (without padding) and of the files' sizes.
  uint64_t tensor_bytes() const;
  uint64_t file_bytes() const;
  // False when a shard is a metadata-only file (OpenOptions::allow_metadata_only).
  bool has_tensor_data() const;

 private:
  SplitModel() = default;
  void index_tensors();
  std::vector<GgufFile> shards_;
  std::vector<std::filesystem::path> paths_;
  std::vector<ModelTensor> tensors_;
  std::vector<size_t> tensor_by_name_;  // indices of tensors_ sorted by name
};

// The merged file's content: the first shard's metadata without the split.* keys, its version
// and header padding choice, then every tensor in model order (views of the shards' data, copied
// verbatim: the merged file is written in the shards' byte order, and shards of mixed orders are
// refused).
// merge(split(X)) reproduces X byte for byte when X had no split.* keys and was laid out as
// llama.cpp writes files (see rewrite_file).
Expected<GgufBuilder> merge_builder(const SplitModel& model);

// Writes the merged model to `out`, atomically, in the shards' byte order (whatever
// options.byte_order says). Refuses when `out` is one of the model's files.
// gguf dump --json of a split model: the first shard's dump (its metadata is the model's), the
// tensors of every shard with their shard's 0-based index, and each shard's own layout.
void append_dump_json(std::string& out, const SplitModel& model, const JsonDumpOptions& options = {});

// summarize() over every shard's tensors: the same rules as for one file (types by elements, most
// first, ties by id). A model that is not split gives its one file's summary.
FileSummary summarize(const SplitModel& model);

Expected<void> write_merged(const SplitModel& model, const std::filesystem::path& out, const WriteOptions& options = {});

}  // namespace ggufkit
