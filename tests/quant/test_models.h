// Models for the quantize tests against llama_model_quantize.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

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
