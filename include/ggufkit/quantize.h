// Quantizing a whole model file, as llama.cpp's llama_model_quantize does, streamed: a few tensors'
// worth of memory whatever the model's size, the output written atomically.
//
// The presets' per-tensor type rules (Q4_K_M and friends) are one table in
// src/quantize/preset_rules.cpp; --pure gives every tensor llama-quantize would convert one type.
// Type overrides follow llama-quantize's options: --output-tensor-type, --token-embedding-type,
// --tensor-type REGEX=TYPE, --leave-output-tensor; --override-kv sets metadata in the output.
// An importance matrix (imatrix.h) steers the quantizers and a few preset rules, as in llama.cpp;
// the IQ1/IQ2/IQ3_XXS tensors of the lowest-bit presets need one.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ggufkit/conventions.h"
#include "ggufkit/error.h"
#include "ggufkit/imatrix.h"
#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/value.h"

namespace ggufkit {

// --tensor-type PATTERN=TYPE: tensors whose name contains a match of the regular expression
// (ECMAScript, std::regex_search) get TYPE. The first matching override wins; they apply only when
// the file type's default type is quantized, as in llama.cpp.
struct TensorTypeOverride {
  std::string pattern;
  TensorType type = TensorType::F32;
};

// --override-kv KEY=TYPE:VALUE: a key set in the output's metadata, after the quantization keys
// (moved to the end, as gguf_set_val does). Ints are written as u32 of their absolute value, floats
// as f32, as llama_model_quantize does. An int override of a hyperparameter the preset rules read
// (block_count, head counts, expert_count) changes their choices, as it does in llama.cpp.
struct MetadataOverride {
  std::string key;
  MetadataValue value;
};

// llama-quantize's syntax: "attn_q=q8_0" (the pattern is lower-cased, as llama-quantize does).
Expected<TensorTypeOverride> parse_tensor_type_override(std::string_view text);
// "general.name=str:x", "k=int:3", "k=float:0.5", "k=bool:true" (llama.cpp's llama_model_kv_override
// syntax and limits: keys under 128 bytes, strings under 128).
Expected<MetadataOverride> parse_metadata_override(std::string_view text);

struct QuantizeOptions : RunOptions {  // threads, cancel, progress, sync (threads.h)
  uint32_t file_type = 0;        // a llama_ftype id: what general.file_type says, and the default type
  bool pure = true;              // every convertible tensor gets the file type's default type; false: the preset's rules
  bool quantize_output_tensor = true;  // false: output.weight is copied (--leave-output-tensor)
  // output.weight's type, and token_embd's when it doubles as the output (--output-tensor-type).
  std::optional<TensorType> output_tensor_type;
  // token_embd.weight's (and per_layer_token_embd's) type (--token-embedding-type).
  std::optional<TensorType> token_embedding_type;
  std::vector<TensorTypeOverride> tensor_types;
  std::vector<MetadataOverride> metadata_overrides;
  // Quantized input tensors are dequantized and quantized again; without it they are refused.
  bool allow_requantize = false;
  // llama-imatrix's statistics (--imatrix), used when it has entries: passed to the quantizers per
  // tensor (per expert for 3-D tensors), read by the preset rules, and named in the output's
  // quantize.imatrix.* keys. It must outlive the plan.
  const ImportanceMatrix* importance = nullptr;
  std::string importance_file;  // quantize.imatrix.file's value (llama-quantize: the path as given)
  // The output keeps the input's shards (--keep-split): tensors in the input's shard and data
  // order, one output file per input shard (see quantize_model).
  bool keep_split = false;
  // Planning only (--dry-run): a tensor that needs an importance matrix none was given for is
  // noted in its plan instead of failing the plan (quantize_model still refuses it).
  bool dry_run = false;
  // llama-quantize's COPY: every tensor copied as it is; general.file_type keeps the input's, or
  // llama.cpp's guess when it has none (the most common tensor type's file type, marked guessed:
  // 1024 + id). file_type is then ignored.
  bool only_copy = false;
};

// What happens to one tensor.
struct TensorPlan {
  const TensorInfo* tensor = nullptr;
  const GgufFile* file = nullptr;   // the file (or shard) it is in
  std::span<const std::byte> data;  // the source tensor's bytes (in its file or shard)
  TensorType target = TensorType::F32;
  bool convert = false;      // false: the bytes are copied
  uint64_t bytes = 0;        // the tensor's size in the output, without padding
  std::string note;          // why, when it is not the default type (fallbacks)
  uint32_t shard = 0;        // the output shard (keep_split), else 0
  // The importance weights the quantizer gets: ne[0] per expert, or empty.
  std::span<const float> importance;
};

struct QuantizePlan {
  std::vector<TensorPlan> tensors;  // in the order they are written (llama.cpp's order)
  uint64_t tensor_bytes = 0;         // the output's tensor data, padding included
  // The input's byte order, and so the output's: converted tensors are read swapped to the host's
  // order and written swapped back, copied tensors keep their bytes.
  ByteOrder byte_order = ByteOrder::little;
  uint32_t shard_count = 1;  // output files (keep_split)
  uint32_t file_type = 0;    // the output's general.file_type (options.file_type, or COPY's)
};

// The figures llama-quantize ends with: the model's size before and after over every tensor's
// elements (bits per weight), without padding.
struct QuantizeSizes {
  uint64_t elements = 0;
  uint64_t source_bytes = 0;
  uint64_t output_bytes = 0;
  size_t converted = 0;  // tensors quantized or converted
  size_t copied = 0;     // tensors copied as they are
  double source_bits_per_weight() const { return elements ? 8.0 * static_cast<double>(source_bytes) / static_cast<double>(elements) : 0; }
  double output_bits_per_weight() const { return elements ? 8.0 * static_cast<double>(output_bytes) / static_cast<double>(elements) : 0; }
};
QuantizeSizes quantize_sizes(const QuantizePlan& plan);

// The output files of a plan: `output` itself, or with keep_split llama-quantize's shard names
// (OUTPUT without ".gguf", then -00001-of-0000N.gguf, even for one shard).
std::vector<std::filesystem::path> quantize_output_paths(const QuantizePlan& plan, const std::filesystem::path& output,
                                                         const QuantizeOptions& options);

// Whether a preset (llama_ftype) quantizes its main tensors to a type llama.cpp refuses to write
// without an importance matrix ("this quantization requires an importance matrix"): IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and Q2_K_S. Which tensors need one is per tensor (the
// embedding and the output never do); plan_quantize says which.
bool preset_requires_importance_matrix(uint32_t file_type);

// The target as llama-quantize's TYPE argument names it, in any case: a llama_ftype name (Q4_K_M,
// mostly_q4_k_m), its number (15), a tensor type name (q4_K: llama-quantize's alias for Q4_K_M), or
// COPY (every tensor copied as it is). Sets options.file_type and options.only_copy; false, options
// untouched, when the text names none of these or a file type without a default tensor type.
bool set_quantize_target(std::string_view text, QuantizeOptions& options);

// Whether llama.cpp quantizes a tensor of this name and shape at all (norms, 1-D tensors, position
// embeddings and the other exceptions stay as they are).
bool tensor_allows_quantization(std::string_view name, const TensorInfo& tensor, const QuantizeOptions& options);

Expected<QuantizePlan> plan_quantize(const GgufFile& input, const QuantizeOptions& options);
// The exact size of the file quantize_model writes for `plan` (one output, not keep_split): the
// header it builds from `input`'s metadata (the first shard's, for a split model) and the tensors.
Expected<uint64_t> quantize_output_bytes(const GgufFile& input, const QuantizePlan& plan, const QuantizeOptions& options);
Expected<void> quantize_model(const GgufFile& input, const std::filesystem::path& output, const QuantizeOptions& options);
// The same for a split model opened from its first shard: the output is one file, the one the
// merged model would give (llama_model_quantize reads split models the same way), or with
// keep_split one file per input shard. Shards are written atomically; when one fails, those
// already written are removed.
Expected<QuantizePlan> plan_quantize(const SplitModel& input, const QuantizeOptions& options);
Expected<void> quantize_model(const SplitModel& input, const std::filesystem::path& output, const QuantizeOptions& options);

}  // namespace ggufkit
