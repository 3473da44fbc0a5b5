// Qwen's mixtures of experts (conversion/qwen.py's Qwen2MoeModel and Qwen3MoeModel):
// Qwen2MoeForCausalLM ("qwen2moe": Qwen2's attention with biases, a shared expert with its own
// gate) and Qwen3MoeForCausalLM ("qwen3moe": Qwen3's per-head q and k norms). Each layer's experts
// become three 3-D tensors (down, gate, up: the order the Python converter stacks them in), the
// routers stay F32; the expert feed-forward sizes are written after TextModel's keys.
#include <vector>

#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kExperts[] = {
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none},
    {"mlp.gate.weight", "ffn_gate_inp.weight", Dim::experts, Dim::embd},
    {"mlp.experts.{}.down_proj.weight", "ffn_down_exps.weight", Dim::embd, Dim::ff_expert, Presence::required, ConvertTransform::stack_experts},
    {"mlp.experts.{}.gate_proj.weight", "ffn_gate_exps.weight", Dim::ff_expert, Dim::embd, Presence::required, ConvertTransform::stack_experts},
    {"mlp.experts.{}.up_proj.weight", "ffn_up_exps.weight", Dim::ff_expert, Dim::embd, Presence::required, ConvertTransform::stack_experts},
    // Newer checkpoints hold each kind's experts in one 3-D tensor (with or without ".weight"):
    // down as it is, gate_up split in its gate and up halves (Qwen2MoeModel.modify_tensors).
    {"mlp.experts.down_proj", "ffn_down_exps.weight", Dim::embd, Dim::ff_expert, Presence::optional, ConvertTransform::none,
     false, 0, Dim::experts},
    {"mlp.experts.down_proj.weight", "ffn_down_exps.weight", Dim::embd, Dim::ff_expert, Presence::optional,
     ConvertTransform::none, false, 0, Dim::experts},
    {"mlp.experts.gate_up_proj", "ffn_gate_exps.weight", Dim::ff_expert2, Dim::embd, Presence::optional,
     ConvertTransform::split_experts, false, 0, Dim::experts},
    {"mlp.experts.gate_up_proj", "ffn_up_exps.weight", Dim::ff_expert2, Dim::embd, Presence::optional,
     ConvertTransform::split_experts, false, 1, Dim::experts},
    {"mlp.experts.gate_up_proj.weight", "ffn_gate_exps.weight", Dim::ff_expert2, Dim::embd, Presence::optional,
     ConvertTransform::split_experts, false, 0, Dim::experts},
    {"mlp.experts.gate_up_proj.weight", "ffn_up_exps.weight", Dim::ff_expert2, Dim::embd, Presence::optional,
     ConvertTransform::split_experts, false, 1, Dim::experts},
};

constexpr TensorRule kSharedExpert[] = {
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", Dim::ff_shared, Dim::embd},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", Dim::ff_shared, Dim::embd},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", Dim::embd, Dim::ff_shared},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", Dim::one, Dim::embd},
};

// A block: the base model's attention, then the experts (and the shared expert).
std::vector<TensorRule> block(std::span<const TensorRule> attention, bool shared_expert) {
  std::vector<TensorRule> rules(attention.begin(), attention.end());
  rules.insert(rules.end(), std::begin(kExperts), std::end(kExperts));
  if (shared_expert) rules.insert(rules.end(), std::begin(kSharedExpert), std::end(kSharedExpert));
  return rules;
}

const std::vector<TensorRule> kQwen2MoeLayer = block(qwen2_attention(), true);
const std::vector<TensorRule> kQwen3MoeLayer = block(qwen3_attention(), false);

// Qwen2MoeModel.set_gguf_parameters: TextModel's (expert counts included), then the experts'
// feed-forward sizes when config.json has them.
Expected<void> keys(const FamilyInput& in, KeyWriter& w) {
  if (auto r = text_model_keys(in, w); !r) return r;
  if (in.config.n_ff_expert != 0) w.u32("expert_feed_forward_length", in.config.n_ff_expert);
  if (in.config.n_ff_shared != 0) w.u32("expert_shared_feed_forward_length", in.config.n_ff_shared);
  return {};
}

constexpr std::string_view kQwen2MoeClasses[] = {"Qwen2MoeForCausalLM"};
constexpr std::string_view kQwen3MoeClasses[] = {"Qwen3MoeForCausalLM"};
// Qwen2MoeConfig and Qwen3MoeConfig (transformers 4.57).
constexpr ConfigDefault kQwen2MoeDefaults[] = {
    {"vocab_size", 151936}, {"hidden_size", 2048}, {"intermediate_size", 5632}, {"num_hidden_layers", 24},
    {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"max_position_embeddings", 32768},
    {"rms_norm_eps", 1e-6, false}, {"rope_theta", 10000.0, false}, {"moe_intermediate_size", 1408},
    {"shared_expert_intermediate_size", 5632}, {"num_experts_per_tok", 4}, {"num_experts", 60}};
constexpr ConfigDefault kQwen3MoeDefaults[] = {
    {"vocab_size", 151936}, {"hidden_size", 2048}, {"intermediate_size", 6144}, {"num_hidden_layers", 24},
    {"num_attention_heads", 32}, {"num_key_value_heads", 4}, {"max_position_embeddings", 32768},
    {"rms_norm_eps", 1e-6, false}, {"rope_theta", 10000.0, false}, {"moe_intermediate_size", 768},
    {"num_experts_per_tok", 8}, {"num_experts", 128}};
constexpr ConfigClass kQwen2MoeConfig[] = {{.model_type = "qwen2_moe", .defaults = kQwen2MoeDefaults}};
constexpr ConfigClass kQwen3MoeConfig[] = {{.model_type = "qwen3_moe", .defaults = kQwen3MoeDefaults}};

}  // namespace

extern const Family kQwen2MoeFamily{
    .gguf_name = "qwen2moe",
    .hf_classes = kQwen2MoeClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kQwen2MoeLayer,
    .keys = keys,
    .tokenizer = {.recipe = TokenizerRecipe::gpt2},
    .config_classes = kQwen2MoeConfig,
};

extern const Family kQwen3MoeFamily{
    .gguf_name = "qwen3moe",
    .hf_classes = kQwen3MoeClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kQwen3MoeLayer,
    .keys = keys,
    .tokenizer = {.recipe = TokenizerRecipe::gpt2},
    .config_classes = kQwen3MoeConfig,
};

}  // namespace ggufkit::convert_detail
