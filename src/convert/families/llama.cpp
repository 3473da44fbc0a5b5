// The llama family (conversion/llama.py's LlamaModel): LlamaForCausalLM, MistralForCausalLM, and
// MixtralForCausalLM (the same with a router and stacked experts per block).
// Q and K rows permuted for llama.cpp's adjacent-pair rope (LlamaModel.permute), llama 3 rope
// scaling as a rope_freqs tensor, the vocabulary size and rope dimension count written.
#include <vector>

#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kLlamaLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd, Presence::required, ConvertTransform::permute_rope},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd, Presence::required, ConvertTransform::permute_rope, true},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    // attention_bias: true checkpoints; permuted like their weights (LlamaModel.modify_tensors).
    {"self_attn.q_proj.bias", "attn_q.bias", Dim::q_out, Dim::none, Presence::optional, ConvertTransform::permute_rope},
    {"self_attn.k_proj.bias", "attn_k.bias", Dim::kv_out, Dim::none, Presence::optional, ConvertTransform::permute_rope, true},
    {"self_attn.v_proj.bias", "attn_v.bias", Dim::kv_out, Dim::none, Presence::optional},
    {"self_attn.o_proj.bias", "attn_output.bias", Dim::embd, Dim::none, Presence::optional},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

constexpr std::string_view kClasses[] = {"LlamaForCausalLM", "MistralForCausalLM"};

// LlamaConfig derives head_dim (so llama checkpoints get key and value lengths) and the kv heads;
// MistralConfig leaves head_dim out unless config.json has it.
constexpr ConfigDefault kLlamaDefaults[] = {
    {"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008}, {"num_hidden_layers", 32},
    {"num_attention_heads", 32}, {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-6, false},
    {"rope_theta", 10000.0, false}};
constexpr ConfigDefault kMistralDefaults[] = {
    {"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 32},
    {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"max_position_embeddings", 131072},
    {"rms_norm_eps", 1e-6, false}, {"rope_theta", 10000.0, false}, {"sliding_window", 4096}};
constexpr ConfigClass kConfigClasses[] = {
    {.model_type = "llama", .defaults = kLlamaDefaults, .kv_heads_from_heads = true, .head_dim_from_hidden = true},
    {.model_type = "mistral", .defaults = kMistralDefaults, .kv_heads_from_heads = true}};

// Mixtral: llama's attention, then a router and eight experts of w1 (gate), w2 (down), w3 (up),
// stacked in that order as LlamaModel.modify_tensors stacks them.
constexpr TensorRule kMixtralExperts[] = {
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", Dim::experts, Dim::embd},
    {"block_sparse_moe.experts.{}.w1.weight", "ffn_gate_exps.weight", Dim::ff, Dim::embd, Presence::required, ConvertTransform::stack_experts},
    {"block_sparse_moe.experts.{}.w2.weight", "ffn_down_exps.weight", Dim::embd, Dim::ff, Presence::required, ConvertTransform::stack_experts},
    {"block_sparse_moe.experts.{}.w3.weight", "ffn_up_exps.weight", Dim::ff, Dim::embd, Presence::required, ConvertTransform::stack_experts},
};

std::vector<TensorRule> mixtral_layer() {
  std::vector<TensorRule> rules(std::begin(kLlamaLayer), std::begin(kLlamaLayer) + 10);  // attention and ffn_norm
  rules.insert(rules.end(), std::begin(kMixtralExperts), std::end(kMixtralExperts));
  return rules;
}
const std::vector<TensorRule> kMixtralLayer = mixtral_layer();

constexpr std::string_view kMixtralClasses[] = {"MixtralForCausalLM"};
// MixtralConfig (transformers 4.57): head_dim stays absent.
constexpr ConfigDefault kMixtralDefaults[] = {
    {"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 32},
    {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"max_position_embeddings", 131072},
    {"rms_norm_eps", 1e-5, false}, {"rope_theta", 1000000.0, false}, {"num_experts_per_tok", 2},
    {"num_local_experts", 8}};
constexpr ConfigClass kMixtralConfig[] = {{.model_type = "mixtral", .defaults = kMixtralDefaults, .kv_heads_from_heads = true}};

}  // namespace

std::span<const TensorRule> llama_block() { return kLlamaLayer; }

// MixtralForCausalLM is LlamaModel with experts: general.architecture "llama".
extern const Family kMixtralFamily{
    .gguf_name = "llama",
    .hf_classes = kMixtralClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kMixtralLayer,
    .keys = llama_model_keys,
    .tokenizer = {.recipe = TokenizerRecipe::llama},
    .extra_tensors = llama3_rope_freqs,
    .config_classes = kMixtralConfig,
};

extern const Family kLlamaFamily{
    .gguf_name = "llama",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kLlamaLayer,
    .keys = llama_model_keys,
    .tokenizer = {.recipe = TokenizerRecipe::llama},
    .extra_tensors = llama3_rope_freqs,
    .config_classes = kConfigClasses,
};

}  // namespace ggufkit::convert_detail
