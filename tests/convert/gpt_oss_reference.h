// A float64 forward pass of transformers' GptOssForCausalLM (modeling_gpt_oss.py, eager attention,
// MXFP4 experts dequantized as integrations/mxfp4.py's convert_moe_packed_tensors does), from a
// TinyGptOss checkpoint: the yardstick llama.cpp's logits of a converted gpt-oss file are measured
// against. Everything is read from config.json, so a test can switch a knob off:
//  - embeddings, then per layer: RMSNorm; q/k/v with biases; NEOX rope (halves) with the yarn
//    inverse frequencies and attention factor of modeling_rope_utils._compute_yarn_parameters
//    (factor, beta_fast, beta_slow, original_max_position_embeddings, truncate: default true,
//    attention_factor / mscale / mscale_all_dim); attention scaled by head_dim^-0.5 over the causal
//    keys, the last sliding_window of them on "sliding_attention" layers (layer_types), with one
//    sink logit per head in the softmax (then dropped); o_proj with bias; residual;
//  - post_attention_layernorm; router logits (with bias), the top num_experts_per_tok of them,
//    softmax over those; per expert: gate_up = x W + b, gate = even columns clamped above at
//    swiglu_limit, up = odd columns clamped to +-swiglu_limit, (up + 1) * gate * sigmoid(1.702 gate),
//    times down_proj plus its bias, weighted; residual;
//  - final RMSNorm and lm_head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt_oss_checkpoint.h"

namespace ggufkit::test {

// How the inputs of the experts' matrix products are taken.
enum class ExpertInputs : uint8_t {
  exact,  // as Hugging Face computes them (float64 here)
  // Rounded as llama.cpp's CPU backend rounds them: an MXFP4 weight's vec_dot_type is Q8_0, so the
  // activations (the normed hidden state into gate/up, the SwiGLU output into down) are quantized to
  // Q8_0 first (per 32 values: d = max|x| / 127 stored as F16, q = round(x / d)). The products are
  // then exact (integer sums times the two scales). On the tiny checkpoint this moves the logits by
  // 2e-2 of max|logit|; llama.cpp's are within 4e-7 of this reference's (gpt_oss_test.cpp).
  ggml_q8_0,
};

// What the reference's routing was: how clear-cut, and whether swiglu_limit clipped anything.
struct GptOssRouting {
  std::vector<std::vector<std::vector<int64_t>>> chosen;  // [layer][position]: the experts taken
  double min_gap = 1e300;  // smallest router logit gap between the last expert taken and the first left out
  int64_t min_gap_layer = -1;
  int64_t min_gap_position = -1;
  int64_t clipped = 0;  // gate and up values of the chosen experts beyond swiglu_limit
  int64_t gate_up_values = 0;
};

// The logits of every position of `tokens` (one causal sequence from position 0):
// result[position][token id].
std::vector<std::vector<double>> reference_gpt_oss_logits(const TinyGptOss& model, const std::vector<int32_t>& tokens,
                                                          ExpertInputs inputs = ExpertInputs::exact,
                                                          GptOssRouting* routing = nullptr);

// An expert tensor's values as transformers dequantizes *_blocks and *_scales:
// result[(expert * rows + row) * cols + col] = E2M1(code) * 2^(scale - 127), where `col`'s code is
// the low nibble of byte col % 32 / 2 of its 32-value block when col is even, the high one when odd
// (rows: output features, cols: input features).
std::vector<double> dequantize_gpt_oss_mxfp4(const U8Tensor& blocks, const U8Tensor& scales);

// One line: the semantics the reference computed for `config` (for failure messages).
std::string describe_gpt_oss_semantics(const nlohmann::ordered_json& config);

}  // namespace ggufkit::test
