// A model family of gguf convert: everything one Hugging Face architecture class needs, in one
// place, as llama.cpp's conversion/ package has one module per family. A family is
//   - its tensor table (TensorRule: the checkpoint name, the GGUF name, the shape from config.json,
//     the transform from the shared set below),
//   - its keys (a function in the role of the Python class's set_gguf_parameters, built from the
//     shared text_model_keys, TextModel.set_gguf_parameters),
//   - its tokenizer path (TokenizerOptions: the class's set_vocab),
//   - its generated tensors (llama 3's rope_freqs, Phi-3's rope factors) and its config defaults.
// The families are listed in families.cpp; each lives in families/<name>.cpp. docs/library.md
// ("A converter architecture") says how to add one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ggufkit/convert.h"
#include "ggufkit/hf_tokenizer.h"

namespace ggufkit::convert_detail {

using Json = nlohmann::json;  // (ggufkit::json is the library's JSON writer)

// Bound on sizes read from config.json.
inline constexpr int64_t kMaxConfigValue = int64_t{1} << 31;

Error config_error(std::string key, std::string message);
Error tensor_error(std::string_view name, std::string message);

// config.json as the Python converter's hparams: text_config's keys merged at the root
// (TextModel.__init__), the sizes every family needs read and checked, rope parameters gathered
// as TextModel.__init__ gathers them.
struct HfConfig {
  Json root;
  int64_t block_count = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, vocab = 0;
  // Mixture of experts (0 when config.json has none): experts (num_local_experts / num_experts),
  // an expert's and the shared expert's feed-forward sizes.
  int64_t n_expert = 0, n_ff_expert = 0, n_ff_shared = 0;
  bool has_head_kv = false, has_head_dim = false;
  std::optional<std::string> name_or_path;  // config.json's own _name_or_path (gguf-py's metadata reads the file)
  Json rope;            // rope_parameters / rope_scaling with rope_theta, ... mirrored in (TextModel.__init__)
  Json rope_full;       // rope["full_attention"] when split, else rope
  std::optional<double> local_rope_theta;  // rope["sliding_attention"]["rope_theta"]

  // An optional positive integer key, of `object` or the root.
  Expected<std::optional<int64_t>> optional_int(const Json& object, const std::string& key) const;
  Expected<std::optional<int64_t>> optional_int(const std::string& key) const { return optional_int(root, key); }
  Expected<int64_t> required_int(const std::string& key) const;
  Expected<std::optional<double>> optional_number(const Json& object, const std::string& key) const;
  Expected<std::optional<double>> optional_number(const std::string& key) const { return optional_number(root, key); }
  // The first of `keys` present (ModelBase.find_hparam with optional=True).
  const Json* find(std::initializer_list<std::string_view> keys) const;
  bool is_false(const std::string& key) const;  // present and false
};

// A value transformers' config class gives a key config.json leaves out.
struct ConfigDefault {
  std::string_view key;
  double value;
  bool integer = true;
};

// A transformers config class, as AutoConfig.to_dict() gives config.json to the Python converter:
// every attribute of the class is there, so a key config.json leaves out arrives with the class's
// default (and reaches the keys: Granite's multipliers, Llama's derived head_dim). Picked by
// config.json's model_type; a model_type no family lists is read as it is (AutoConfig fails on it
// and the converter falls back to the raw file too).
struct ConfigClass {
  std::string_view model_type;
  std::span<const ConfigDefault> defaults = {};
  bool kv_heads_from_heads = false;   // num_key_value_heads absent or null: num_attention_heads
  bool head_dim_from_hidden = false;  // head_dim absent or null: hidden_size / num_attention_heads (LlamaConfig)
  bool longrope_rename = false;       // rope_scaling "type" su or yarn becomes longrope (Phi3Config)
  // A multimodal wrapper (Gemma3Config): text_config is this class, completed before it is merged.
  std::string_view text_config_class = {};
};

// config.json as it is in the checkpoint, parsed once per conversion: plan_convert hands the same
// document to read_hf_class, read_config and the tokenizer.
Expected<Json> read_config_json(const std::filesystem::path& dir);
// config.json's architectures[0]: the class that picks the family.
Expected<std::string> read_hf_class(const Json& root);
Expected<HfConfig> read_config(Json root, std::span<const ConfigClass> classes = {});
// convert_hf_tokenizer with config.json already read.
Expected<TokenizerMetadata> convert_hf_tokenizer(const std::filesystem::path& model_dir, const TokenizerOptions& options,
                                                 const Json& model_config);

// A dimension of an expected shape, from config.json.
enum class Dim : uint8_t {
  none,       // no dimension (1-D tensors have one)
  vocab,      // vocab_size
  embd,       // hidden_size
  ff,         // intermediate_size
  ff2,        // 2 * intermediate_size (a fused gate_up_proj)
  q_out,      // num_attention_heads * head_dim
  kv_out,     // num_key_value_heads * head_dim
  qkv_out,    // q_out + 2 * kv_out (a fused qkv_proj)
  head_dim,   // head_dim, or hidden_size / num_attention_heads
  ff_expert,  // moe_intermediate_size (an expert's feed-forward)
  ff_expert2, // 2 * moe_intermediate_size (an expert's fused gate_up_proj)
  ff_shared,  // shared_expert_intermediate_size
  one,        // 1 (Qwen2-MoE's shared expert gate, one row)
  experts,    // num_local_experts / num_experts (a router's rows)
  heads,      // num_attention_heads (gpt-oss's attention sinks)
};
int64_t dim_value(const HfConfig& c, Dim d);

enum class Presence : uint8_t {
  required,
  optional,   // converted when present (llama's attention biases)
  output,     // lm_head: absent when the embeddings are tied
};

// One checkpoint tensor: its HF name (per layer: after "model.layers.N."), its GGUF name (per
// layer: after "blk.N."), its HF shape (outermost first) and what happens to it. A stack_experts
// rule names each expert's tensor with "{}" for the expert's index ("mlp.experts.{}.up_proj.weight");
// the experts of a layer become one 3-D tensor [experts, rows, cols] (ggml: {cols, rows, experts})
// when the last of them is read, as the Python converter's modify_tensors stacks them, the stacked
// tensors in the table's order.
struct TensorRule {
  std::string_view hf_name;
  std::string_view gguf_name;
  Dim rows;
  Dim cols;                   // Dim::none for 1-D tensors
  Presence presence = Presence::required;
  ConvertTransform transform = ConvertTransform::none;
  bool kv_heads = false;      // permute_rope groups the rows by the KV heads (K), not the heads (Q)
  uint8_t part = 0;           // deinterleave: the first value this rule's tensor takes; split_experts:
                              // which half of each expert's rows (the next rule with the same
                              // hf_name takes another part of the same tensor)
  Dim experts = Dim::none;    // Dim::experts for a checkpoint tensor of every expert ([experts, rows, cols])
};

// Metadata keys as gguf-py's GGUFWriter adds them: a key added again is replaced where it stands.
class KeyWriter {
 public:
  KeyWriter(std::vector<std::pair<std::string, MetadataValue>>& keys, std::string arch)
      : keys_(keys), arch_(std::move(arch)) {}
  void set(std::string key, MetadataValue value);
  // "{arch}.suffix"
  std::string arch_key(std::string_view suffix) const;
  void u32(std::string_view suffix, int64_t v) { set(arch_key(suffix), MetadataValue::of(static_cast<uint32_t>(v))); }
  void f32(std::string_view suffix, double v) { set(arch_key(suffix), MetadataValue::of(static_cast<float>(v))); }
  void boolean(std::string_view suffix, bool v) { set(arch_key(suffix), MetadataValue::of(v)); }
  void string(std::string_view suffix, std::string v) { set(arch_key(suffix), MetadataValue::string(std::move(v))); }
  const std::string& arch() const { return arch_; }
  // "{arch}.suffix" came from this config.json field: what a refusal of its value names.
  void from_config(std::string_view suffix, std::string_view field) { sources_[arch_key(suffix)] = std::string(field); }
  const std::map<std::string, std::string>& sources() const { return sources_; }

 private:
  std::map<std::string, std::string> sources_;
  std::vector<std::pair<std::string, MetadataValue>>& keys_;
  std::string arch_;
};

// What a family's functions see.
struct FamilyInput {
  const HfConfig& config;
  const std::filesystem::path& dir;
  uint32_t file_type;                // general.file_type
  // The checkpoint's tensors in the Python converter's order (shards by name, names sorted).
  std::span<const SafetensorsTensor* const> tensors = {};
};

using KeysFunction = Expected<void> (*)(const FamilyInput&, KeyWriter&);
// Generated tensors; a key it writes comes right after general.architecture.
using ExtraTensorsFunction = Expected<void> (*)(const FamilyInput&, KeyWriter&, std::vector<ConvertTensorPlan>&);
using VocabRowsFunction = Expected<std::optional<int64_t>> (*)(const FamilyInput&);

struct Family {
  std::string_view gguf_name;                    // general.architecture, and the prefix of its keys
  std::span<const std::string_view> hf_classes;  // config.json architectures[0] values it takes
  std::span<const TensorRule> global_tensors;
  std::span<const TensorRule> layer_tensors;
  KeysFunction keys;                             // set_gguf_parameters
  TokenizerOptions tokenizer = {.recipe = TokenizerRecipe::llama};  // set_vocab
  ExtraTensorsFunction extra_tensors = nullptr;  // generate_extra_tensors: written first
  std::span<const ConfigClass> config_classes = {};  // by model_type
  // Checkpoint tensors the family drops (GemmaModel.filter_tensors drops lm_head.weight).
  std::span<const std::string_view> dropped = {};
  // Checkpoint tensors its extra_tensors turns into others (gpt-oss's MXFP4 blocks and scales):
  // not matched against the tables.
  bool (*consumed)(std::string_view name) = nullptr;
  // Rows token_embd keeps when the family truncates it to the real vocabulary (Gemma 3).
  VocabRowsFunction embedding_rows = nullptr;
};

std::span<const Family* const> families();
const Family* find_family(std::string_view hf_class);

// ---- shared pieces the families build from ----

// TextModel.set_gguf_parameters: block_count, context_length, embedding_length,
// feed_forward_length, head_count, head_count_kv, causal attention, rope scaling, rope base (and
// the sliding-window one), rms eps, layer norm eps, key/value length, general.file_type.
Expected<void> text_model_keys(const FamilyInput& in, KeyWriter& w);
// LlamaModel.generate_extra_tensors: the rope_freqs tensor of llama 3 rope scaling.
Expected<void> llama3_rope_freqs(const FamilyInput& in, KeyWriter& keys, std::vector<ConvertTensorPlan>& out);
// LlamaModel.set_gguf_parameters: TextModel's, then the vocabulary size and the rope dimensions.
Expected<void> llama_model_keys(const FamilyInput& in, KeyWriter& w);
// A generated F32 tensor of `values`, shape {values.size()} (or `shape` when given).
ConvertTensorPlan generated_tensor(std::string gguf_name, std::vector<float> values);

// Qwen2Model's and Qwen3Model's attention (families/qwen.cpp), for the MoE families built on them.
std::span<const TensorRule> qwen2_attention();
std::span<const TensorRule> qwen3_attention();

// "model.layers.N.REST" as N (decimal, no leading zero, below 10^9) and REST; nothing for another name.
std::optional<std::pair<int64_t, std::string_view>> split_layer_name(std::string_view name);

// LlamaModel's block (families/llama.cpp): q and k permuted for llama.cpp's adjacent-pair rope;
// Granite and SmolLM3 are LlamaModel subclasses with the same block.
std::span<const TensorRule> llama_block();

// The decoder tensors every family has outside its blocks.
inline constexpr TensorRule kDecoderGlobals[] = {
    {"model.embed_tokens.weight", "token_embd.weight", Dim::vocab, Dim::embd},
    {"model.norm.weight", "output_norm.weight", Dim::embd, Dim::none},
    {"lm_head.weight", "output.weight", Dim::vocab, Dim::embd, Presence::output},
};

}  // namespace ggufkit::convert_detail
