// SmolLM3 (conversion/llama.py's SmolLM3Model): exactly LlamaModel under the "smollm3"
// architecture. llama.cpp skips rope in every fourth layer ((layer + 1) % 4 == 0), which is
// SmolLM3Config's default no_rope_layers; the converter writes no key for it.
#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr std::string_view kClasses[] = {"SmolLM3ForCausalLM"};
// SmolLM3Config's defaults (AutoConfig.to_dict() has them).
constexpr ConfigDefault kDefaults[] = {
    {"vocab_size", 128256},         {"hidden_size", 2048},         {"intermediate_size", 11008},
    {"num_hidden_layers", 36},      {"num_attention_heads", 16},   {"num_key_value_heads", 4},
    {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6, false}, {"rope_theta", 2000000.0, false}};

constexpr ConfigClass kConfigClasses[] = {{.model_type = "smollm3", .defaults = kDefaults, .kv_heads_from_heads = true}};

}  // namespace

extern const Family kSmolLM3Family{
    .gguf_name = "smollm3",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = llama_block(),
    .keys = llama_model_keys,
    .tokenizer = {.recipe = TokenizerRecipe::llama},
    .config_classes = kConfigClasses,
};

}  // namespace ggufkit::convert_detail
