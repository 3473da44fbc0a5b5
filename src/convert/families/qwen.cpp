// The Qwen family (conversion/qwen.py's Qwen2Model, Qwen3Model): Qwen2ForCausalLM (biases on q, k
// and v) and Qwen3ForCausalLM (per-head q and k norms). NEOX rope in llama.cpp: no permutation.
// The GPT-2 BPE tokenizer path only.
#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kQwen2Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.q_proj.bias", "attn_q.bias", Dim::q_out, Dim::none},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.k_proj.bias", "attn_k.bias", Dim::kv_out, Dim::none},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.v_proj.bias", "attn_v.bias", Dim::kv_out, Dim::none},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

constexpr TensorRule kQwen3Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::head_dim, Dim::none},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::head_dim, Dim::none},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

constexpr std::string_view kQwen2Classes[] = {"Qwen2ForCausalLM"};

// Qwen2Config and Qwen3Config (Qwen3's fixed head_dim 128 gives key and value lengths).
constexpr ConfigDefault kQwen2Defaults[] = {
    {"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016}, {"num_hidden_layers", 32},
    {"num_attention_heads", 32}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6, false},
    {"rope_theta", 10000.0, false}};
constexpr ConfigDefault kQwen3Defaults[] = {
    {"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016}, {"num_hidden_layers", 32},
    {"num_attention_heads", 32}, {"head_dim", 128}, {"max_position_embeddings", 32768},
    {"rms_norm_eps", 1e-6, false}, {"rope_theta", 10000.0, false}};
constexpr ConfigClass kQwen2Config[] = {{.model_type = "qwen2", .defaults = kQwen2Defaults, .kv_heads_from_heads = true}};
constexpr ConfigClass kQwen3Config[] = {{.model_type = "qwen3", .defaults = kQwen3Defaults, .kv_heads_from_heads = true}};
constexpr std::string_view kQwen3Classes[] = {"Qwen3ForCausalLM"};

}  // namespace

// The attention of each block (input norm to o_proj): the MoE families build on it.
std::span<const TensorRule> qwen2_attention() { return std::span(kQwen2Layer).first(8); }
std::span<const TensorRule> qwen3_attention() { return std::span(kQwen3Layer).first(7); }

// Qwen2Model.set_gguf_parameters is TextModel's (and a pooling type for embedding models only).
extern const Family kQwen2Family{
    .gguf_name = "qwen2",
    .hf_classes = kQwen2Classes,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kQwen2Layer,
    .keys = text_model_keys,
    .tokenizer = {.recipe = TokenizerRecipe::gpt2},
    .config_classes = kQwen2Config,
};

extern const Family kQwen3Family{
    .gguf_name = "qwen3",
    .hf_classes = kQwen3Classes,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kQwen3Layer,
    .keys = text_model_keys,
    .tokenizer = {.recipe = TokenizerRecipe::gpt2},
    .config_classes = kQwen3Config,
};

}  // namespace ggufkit::convert_detail
