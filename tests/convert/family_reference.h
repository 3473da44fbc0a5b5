// A plain float64 forward pass of Hugging Face's causal LMs as transformers computes them, driven by
// the checkpoint's config.json (read as the class's config does, its defaults for absent keys) and
// its weights in PyTorch layout: the yardstick llama.cpp's logits of a converted checkpoint are
// measured against, for every family of family_checkpoint.h (and LlamaForCausalLM, which checks
// this pass against reference_forward.h's).
//
// What is modelled, by class (transformers 4.57's modeling files):
//   LlamaForCausalLM, SmolLM3ForCausalLM: pre-norm blocks, SwiGLU, rotate_half rope; SmolLM3 skips
//     rope in the layers whose no_rope_layers entry is 0.
//   GraniteForCausalLM: + embeddings * embedding_multiplier, attention scale attention_multiplier
//     (instead of head_dim^-0.5), residual branches * residual_multiplier, logits / logits_scaling.
//   Phi3ForCausalLM: fused qkv_proj (q rows, k rows, v rows) and gate_up_proj (gate rows, up rows);
//     rope on the first int(head_dim * partial_rotary_factor) dims of each head (rotate_half
//     within them); longrope: inv_freq_i = 1 / (ext_i * theta^(2i/rot_dim)) with the short factors
//     while the sequence is no longer than original_max_position_embeddings, cos and sin times
//     sqrt(1 + ln(max_position_embeddings / original) / ln(original)); sliding_window on every layer.
//   GemmaForCausalLM: embeddings * sqrt(hidden), RMSNorm x * (1 + w), GELU (tanh approximation for
//     gelu_pytorch_tanh), tied output.
//   Gemma2ForCausalLM: + post_attention_layernorm on the attention output, pre/post_feedforward_layernorm,
//     scores scaled by query_pre_attn_scalar^-0.5 then capped cap * tanh(s / cap) before the mask,
//     logits capped likewise, sliding window (kv visible when q - kv < sliding_window) on the layers
//     layer_types says (default: even layers).
//   Gemma3ForCausalLM / Gemma3ForConditionalGeneration (text_config): Gemma 2 without the soft caps
//     (unless set), q_norm/k_norm per head before rope, sliding layers by layer_types or
//     sliding_window_pattern (default 6: every 6th layer global), rope_local_base_freq on sliding
//     layers, rope_theta and rope_scaling (linear) on global ones.
//   Olmo2ForCausalLM: no input norms; q_norm/k_norm over the whole q and k projections;
//     post_attention_layernorm and post_feedforward_layernorm on the branch outputs.
//   MixtralForCausalLM: llama's block with a sparse mixture of experts as its feed-forward
//     (block_sparse_moe): p = softmax(gate(x)) over num_local_experts, the num_experts_per_tok most
//     probable experts, their p renormalized to sum 1, sum of p_e * w2_e(silu(w1_e x) * w3_e x);
//     sliding_window (when not null) on every layer.
//   Qwen2MoeForCausalLM: Qwen2's attention (q, k, v biases) and the same mixture over num_experts
//     (mlp.experts.N.{gate,up,down}_proj), renormalized only when norm_topk_prob, plus
//     sigmoid(shared_expert_gate(x)) * shared_expert(x). Every layer sparse (dense layers through
//     mlp_only_layers or decoder_sparse_step are refused: llama.cpp has none).
//   Qwen3MoeForCausalLM: Qwen3's attention (per-head q_norm/k_norm, plain w) and Qwen2-MoE's
//     mixture without the shared expert; the experts either one tensor each or fused as
//     transformers 5 stores them (mlp.experts.gate_up_proj [experts, 2 * ff, hidden]: each expert's
//     gate rows, then its up rows; mlp.experts.down_proj [experts, hidden, ff]; ".weight" or not).
//   Mistral3ForConditionalGeneration (text_config): MistralForCausalLM's text model, llama's block
//     with sliding_window (when not null) on every layer; or, for a text_config of model_type
//     ministral3, Ministral3ForCausalLM's.
//   Ministral3ForCausalLM (transformers 5): Mistral's block with rope_parameters (rope_theta within;
//     yarn as yarn_rope below computes it), and queries times 1 + llama_4_scaling_beta *
//     ln(1 + floor(position / original_max_position_embeddings)) after rope (llama 4's scaling: 1
//     below that position).
//   (Linear biases are added wherever the checkpoint has NAME.bias for q, k and v.)
// Anything else a config asks for (another rope type, another activation) throws
// std::invalid_argument: the reference never silently computes something else.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "family_checkpoint.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {

// How the GELU of the GELU families is evaluated: exactly (HF's float math, here in float64), or as
// ggml's CPU backend does (ggml_vec_geglu_f32 with GGML_GELU_FP16: the input rounded to half, the
// result looked up in a table of half values), which is the only place where llama.cpp's CPU
// graph is not float32 math and costs up to ~1e-3 of a logit's value (~3e-2 relative on a small
// one). Tests comparing with llama.cpp use the second, so that their tolerance stays 1e-3 for
// everything else; both are reported.
enum class GeluEvaluation { exact, ggml_cpu_fp16_table };

// The logits of every position of `tokens` (one causal sequence from position 0):
// result[position][token id].
// The choice of experts the reference made, for the mixtures of experts (left empty otherwise).
struct ReferenceRouting {
  // chosen[layer][position]: the experts taken, most probable first.
  std::vector<std::vector<std::vector<int64_t>>> chosen;
  // The smallest gap, over every layer and position, between the probability of the last expert
  // taken and that of the most probable one left out, and where it is: a gap near float32's
  // rounding would let llama.cpp take another expert than the reference.
  double min_margin = 1.0;
  int64_t min_margin_layer = -1;
  size_t min_margin_position = 0;
};

// `routing`, when given, receives the experts chosen (mixtures of experts).
std::vector<std::vector<double>> reference_hf_logits(const nlohmann::ordered_json& config,
                                                     const std::map<std::string, HfTensor>& tensors,
                                                     const std::vector<int32_t>& tokens,
                                                     GeluEvaluation gelu = GeluEvaluation::exact,
                                                     ReferenceRouting* routing = nullptr);

inline std::vector<std::vector<double>> reference_family_logits(const TinyHfModel& model, const std::vector<int32_t>& tokens,
                                                                GeluEvaluation gelu = GeluEvaluation::exact,
                                                                ReferenceRouting* routing = nullptr) {
  return reference_hf_logits(model.config, model.tensors, tokens, gelu, routing);
}

// transformers' _compute_yarn_parameters (modeling_rope_utils, transformers 5): the inverse
// frequencies of `dim` rotated dims with base `theta` for a yarn rope_parameters (or rope_scaling)
// object, each between the plain frequency (extrapolation) and the plain one / factor
// (interpolation) by a linear ramp over the pairs from `low` to `high`, the correction dims of
// beta_fast and beta_slow rotations in original_max_position_embeddings (floored and ceiled unless
// truncate is false); the attention factor multiplying cos and sin (attention_factor, or mscale's
// ratio, or 0.1 ln(factor) + 1). max_position_embeddings of `config` stands in for an absent
// original_max_position_embeddings, and max_position_embeddings / original for an absent factor.
struct YarnRope {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
  double factor = 1.0;
  double low = 0.0, high = 0.0;
};
YarnRope yarn_rope(const nlohmann::ordered_json& config, const nlohmann::ordered_json& parameters, double theta, int64_t dim);

// The reference's arithmetic, in float64 (gpt_oss_reference.cpp uses it too): y = W x for a PyTorch
// linear weight [out_features, in_features], rows [row_begin, row_end) (all by default); RMSNorm
// x / sqrt(mean(x^2) + eps) * w, or * (1 + w) for Gemma's norms.
std::vector<double> reference_linear(const HfTensor& weight, const std::vector<double>& x, int64_t row_begin = 0,
                                     int64_t row_end = -1);
std::vector<double> reference_rms_norm(std::vector<double> x, const HfTensor& weight, double eps, bool plus_one = false);

// Whether the class's MLP uses GELU (then GeluEvaluation matters).
bool hf_uses_gelu(const nlohmann::ordered_json& config);

// The per-layer choices the reference makes for `config` (for the tests' messages): which layers
// use a sliding window, which skip rope, the rope base of each layer, the attention scale.
std::string describe_hf_semantics(const nlohmann::ordered_json& config);

}  // namespace ggufkit::test
