// Models for the quantize tests against llama_model_quantize.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ggufkit/tensor_types.h"

// A model for llama_model_quantize to load: llama.cpp reads its hparams (and wants a vocabulary:
// the tokenizer comes from ../shared's tiny-llama), never its tensors' roles, so the shapes only
// need to be plausible (they are: llama.cpp runs these models). 8 heads over 2 kv heads (n_gqa 4);
// rows multiples of 256.
struct ModelShape {
  std::string arch = "llama";  // "llama" (attn_q/k/v) or "falcon" (attn_qkv)
  uint32_t n_layer = 8;
  uint32_t n_expert = 0;       // > 0: ffn_*_exps experts as Mixtral stores them
  bool output = false;         // an output.weight (else token_embd doubles as the output)
  std::string label() const {
    return arch + "-" + std::to_string(n_layer) + "L-" + std::to_string(n_expert) + "x" + (output ? "-out" : "-tied");
  }
};

// Writes the model as DIR/<label>.gguf (f32 tensors); an empty path when ../shared is missing.
std::filesystem::path write_test_model(const std::filesystem::path& dir, const ModelShape& shape);

// A model's label as a test name (gtest's take no '-').
std::string test_name(std::string label);

// A mixture of experts as `gguf convert` writes it from a tiny Hugging Face checkpoint (F16 or
// BF16, routers F32, a small GPT-2 or SentencePiece vocabulary of its own): MixtralForCausalLM
// (arch llama), Qwen2MoeForCausalLM (qwen2moe: attention biases, a shared expert and its gate)
// and Qwen3MoeForCausalLM (qwen3moe: per-head q/k norms, head_dim 128, tied embeddings). Two
// blocks of n_expert experts; every row is a multiple of 256 (n_embd 256, experts 256 wide, the
// shared expert 512).
struct ConvertedMoe {
  std::string family = "mixtral";  // "mixtral", "qwen2moe" or "qwen3moe"
  uint32_t n_expert = 8;
  ggufkit::TensorType type = ggufkit::TensorType::F16;
  std::string label() const;
};

// Writes the model as DIR/<label>.gguf; an empty path on failure.
std::filesystem::path write_converted_moe(const std::filesystem::path& dir, const ConvertedMoe& model);
