// The llama family (conversion/llama.py's LlamaModel): LlamaForCausalLM, MistralForCausalLM.
// Q and K rows permuted for llama.cpp's adjacent-pair rope (LlamaModel.permute), llama 3 rope
// scaling as a rope_freqs tensor, the vocabulary size and rope dimension count written.
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

}  // namespace

std::span<const TensorRule> llama_block() { return kLlamaLayer; }

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
