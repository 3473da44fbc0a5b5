// The architecture table of gguf convert. Names as gguf-py's tensor_mapping.py maps them and
// constants.py spells them (MODEL_TENSOR -> TENSOR_NAMES); shapes as transformers stores them.
#include "convert/architectures.h"

#include <array>

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kDecoderGlobals[] = {
    {"model.embed_tokens.weight", "token_embd.weight", Dim::vocab, Dim::embd},
    {"model.norm.weight", "output_norm.weight", Dim::embd, Dim::none},
    {"lm_head.weight", "output.weight", Dim::vocab, Dim::embd, Presence::output},
};

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

constexpr std::array kArchitectures = {
    ArchitectureSpec{"LlamaForCausalLM", "llama", kDecoderGlobals, kLlamaLayer, true, true, true},
    ArchitectureSpec{"MistralForCausalLM", "llama", kDecoderGlobals, kLlamaLayer, true, true, true},
    ArchitectureSpec{"Qwen2ForCausalLM", "qwen2", kDecoderGlobals, kQwen2Layer, false, false, false},
    ArchitectureSpec{"Qwen3ForCausalLM", "qwen3", kDecoderGlobals, kQwen3Layer, false, false, false},
};

}  // namespace

std::span<const ArchitectureSpec> architectures() { return kArchitectures; }

const ArchitectureSpec* find_architecture(std::string_view hf_name) {
  for (const ArchitectureSpec& spec : kArchitectures) {
    if (spec.hf_name == hf_name) return &spec;
  }
  return nullptr;
}

}  // namespace ggufkit::convert_detail
