// Standard metadata conventions: typed accessors for general.*, {arch}.* and tokenizer.ggml.*,
// and llama.cpp's file type table (general.file_type).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/reader.h"

namespace ggufkit {

namespace keys {
inline constexpr std::string_view kArchitecture = "general.architecture";
inline constexpr std::string_view kFileType = "general.file_type";
inline constexpr std::string_view kType = "general.type";
inline constexpr std::string_view kName = "general.name";
inline constexpr std::string_view kAuthor = "general.author";
inline constexpr std::string_view kVersion = "general.version";
inline constexpr std::string_view kOrganization = "general.organization";
inline constexpr std::string_view kBasename = "general.basename";
inline constexpr std::string_view kFinetune = "general.finetune";
inline constexpr std::string_view kDescription = "general.description";
inline constexpr std::string_view kQuantizedBy = "general.quantized_by";
inline constexpr std::string_view kSizeLabel = "general.size_label";
inline constexpr std::string_view kLicense = "general.license";
inline constexpr std::string_view kUrl = "general.url";
inline constexpr std::string_view kRepoUrl = "general.repo_url";

inline constexpr std::string_view kTokenizerModel = "tokenizer.ggml.model";
inline constexpr std::string_view kTokenizerPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kTokenType = "tokenizer.ggml.token_type";
inline constexpr std::string_view kScores = "tokenizer.ggml.scores";
inline constexpr std::string_view kMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kBosId = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kEosId = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kUnkId = "tokenizer.ggml.unknown_token_id";
inline constexpr std::string_view kSepId = "tokenizer.ggml.seperator_token_id";  // sic: llama.cpp's spelling
inline constexpr std::string_view kPadId = "tokenizer.ggml.padding_token_id";
inline constexpr std::string_view kEotId = "tokenizer.ggml.eot_token_id";
inline constexpr std::string_view kAddBos = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kAddEos = "tokenizer.ggml.add_eos_token";
inline constexpr std::string_view kChatTemplate = "tokenizer.chat_template";
}  // namespace keys

// llama.cpp's llama_ftype ids (general.file_type).
struct FileTypeInfo {
  uint32_t id;
  std::string_view name;         // "MOSTLY_Q4_K_M"
  std::string_view description;  // "Q4_K - Medium", as llama.cpp prints it
  bool removed;                  // ids llama.cpp no longer accepts (4, 5, 6, 33, 34, 35)
  std::optional<TensorType> default_type;  // what its tensors quantize to by default (llama-quant.cpp)
  std::optional<TensorType> selected_by;   // the type name that alone selects it in llama-quantize
};
// nullptr for ids never defined. 1024 is LLAMA_FTYPE_GUESSED.
const FileTypeInfo* find_file_type(uint32_t id);
std::span<const FileTypeInfo> all_file_types();
// The name llama-quantize gives a file type: MOSTLY_Q4_K_M is Q4_K_M, ALL_F32 is F32.
std::string_view file_type_preset_name(const FileTypeInfo& file_type);
// "MOSTLY_Q4_K_M", "Q4_K_M" and "q4_k_m" all name 15.
std::optional<uint32_t> parse_file_type(std::string_view name);
// The ggml type a llama_ftype quantizes to by default (llama.cpp's table); nullopt for removed
// or unknown ids.
std::optional<TensorType> file_type_default_type(uint32_t file_type);
// The llama_ftype llama-quantize uses for a type name given alone (q4_K -> MOSTLY_Q4_K_M, as its
// "Q4_K" alias).
std::optional<uint32_t> file_type_for_type(TensorType type);

// The metadata keys llama.cpp (src/llama-arch.cpp) and gguf-py (constants.py, Keys) name, for a
// file of `architecture` (empty: the {arch}.* keys are left out). Indexed keys
// (general.base_model.{id}.name) and named ones (tokenizer.chat_template.{name}) match any index
// and name.
bool is_known_key(std::string_view key, std::string_view architecture);
// The namespace of `key` when it is one whose keys are all known: general, tokenizer, split,
// adapter, or the file's architecture; empty otherwise (a namespace of the user's own).
std::string_view known_key_namespace(std::string_view key, std::string_view architecture);
// Every known key as a concrete name, indexed and named ones spelt like `near`'s segments.
std::vector<std::string> known_keys(std::string_view architecture, std::string_view near = {});
// The known key a misspelt one is nearest to (edit distance, nearest.h), if close enough.
std::optional<std::string> nearest_known_key(std::string_view key, std::string_view architecture);

// Typed, lazy access to the standard keys of an open file. Cheap to construct.
class ModelMetadata {
 public:
  explicit ModelMetadata(const GgufFile& file) : file_(&file) {}
  const GgufFile& file() const { return *file_; }

  std::optional<std::string_view> string(std::string_view key) const;
  std::optional<uint64_t> uint(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;

  // general.*
  std::optional<std::string_view> architecture() const { return string(keys::kArchitecture); }
  std::optional<std::string_view> name() const { return string(keys::kName); }
  std::optional<std::string_view> type() const { return string(keys::kType); }
  std::optional<uint64_t> file_type() const { return uint(keys::kFileType); }
  std::optional<uint64_t> quantization_version() const { return uint(keys::kQuantizationVersion); }

  // "{arch}.<suffix>" for the file's architecture: arch_key("context_length").
  std::optional<std::string> arch_key(std::string_view suffix) const;
  // A per-architecture integer; for per-layer arrays, the value when every layer agrees.
  std::optional<uint64_t> arch_uint(std::string_view suffix) const;
  std::optional<double> arch_number(std::string_view suffix) const;
  std::optional<std::string_view> arch_string(std::string_view suffix) const;

  std::optional<uint64_t> context_length() const { return arch_uint("context_length"); }
  std::optional<uint64_t> embedding_length() const { return arch_uint("embedding_length"); }
  std::optional<uint64_t> block_count() const { return arch_uint("block_count"); }
  std::optional<uint64_t> feed_forward_length() const { return arch_uint("feed_forward_length"); }
  std::optional<uint64_t> head_count() const { return arch_uint("attention.head_count"); }
  std::optional<uint64_t> head_count_kv() const { return arch_uint("attention.head_count_kv"); }
  std::optional<uint64_t> key_length() const { return arch_uint("attention.key_length"); }
  std::optional<uint64_t> value_length() const { return arch_uint("attention.value_length"); }
  std::optional<double> rms_norm_epsilon() const { return arch_number("attention.layer_norm_rms_epsilon"); }
  std::optional<uint64_t> expert_count() const { return arch_uint("expert_count"); }
  std::optional<uint64_t> expert_used_count() const { return arch_uint("expert_used_count"); }
  std::optional<uint64_t> vocab_size() const { return arch_uint("vocab_size"); }
  std::optional<uint64_t> rope_dimension_count() const { return arch_uint("rope.dimension_count"); }
  std::optional<double> rope_freq_base() const { return arch_number("rope.freq_base"); }
  std::optional<std::string_view> rope_scaling_type() const { return arch_string("rope.scaling.type"); }
  std::optional<double> rope_scaling_factor() const { return arch_number("rope.scaling.factor"); }
  std::optional<uint64_t> rope_scaling_original_context_length() const {
    return arch_uint("rope.scaling.original_context_length");
  }

  // tokenizer.ggml.*
  std::optional<std::string_view> tokenizer_model() const { return string(keys::kTokenizerModel); }
  std::optional<std::string_view> tokenizer_pre() const { return string(keys::kTokenizerPre); }
  std::optional<ArrayView> tokens() const { return array(keys::kTokens); }
  std::optional<ArrayView> token_types() const { return array(keys::kTokenType); }
  std::optional<ArrayView> scores() const { return array(keys::kScores); }
  std::optional<ArrayView> merges() const { return array(keys::kMerges); }
  std::optional<uint64_t> bos_token_id() const { return uint(keys::kBosId); }
  std::optional<uint64_t> eos_token_id() const { return uint(keys::kEosId); }
  std::optional<uint64_t> unknown_token_id() const { return uint(keys::kUnkId); }
  std::optional<uint64_t> separator_token_id() const { return uint(keys::kSepId); }
  std::optional<uint64_t> padding_token_id() const { return uint(keys::kPadId); }
  std::optional<uint64_t> eot_token_id() const { return uint(keys::kEotId); }
  std::optional<bool> add_bos_token() const { return boolean(keys::kAddBos); }
  std::optional<bool> add_eos_token() const { return boolean(keys::kAddEos); }
  // tokenizer.chat_template, or tokenizer.chat_template.<name> when a name is given.
  std::optional<std::string_view> chat_template(std::string_view name = {}) const;

 private:
  std::optional<ArrayView> array(std::string_view key) const;
  const GgufFile* file_;
};

}  // namespace ggufkit
