// OLMo 2 (conversion/olmo.py's Olmo2Model, a TextModel): no norm before attention or feed-forward,
// a norm after each (post_attention_norm, post_ffw_norm), q and k normalised over the whole
// projection (not per head), NEOX rope (no permutation), TextModel's keys only, GPT-2 BPE tokenizer.
#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kLayer[] = {
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::q_out, Dim::none},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::kv_out, Dim::none},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", Dim::embd, Dim::none},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", Dim::embd, Dim::none},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

constexpr std::string_view kClasses[] = {"Olmo2ForCausalLM"};
// Olmo2Config's defaults (AutoConfig.to_dict() has them).
constexpr ConfigDefault kDefaults[] = {
    {"vocab_size", 50304},       {"hidden_size", 4096},             {"intermediate_size", 11008},
    {"num_hidden_layers", 32},   {"num_attention_heads", 32},       {"max_position_embeddings", 2048},
    {"rms_norm_eps", 1e-5, false}, {"rope_theta", 10000.0, false}};

constexpr ConfigClass kConfigClasses[] = {{.model_type = "olmo2", .defaults = kDefaults, .kv_heads_from_heads = true}};

}  // namespace

extern const Family kOlmo2Family{
    .gguf_name = "olmo2",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kLayer,
    .keys = text_model_keys,
    .tokenizer = {.recipe = TokenizerRecipe::gpt2},
    .config_classes = kConfigClasses,
};

}  // namespace ggufkit::convert_detail
