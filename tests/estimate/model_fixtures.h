// Header-only GGUF files with the shapes of real models (their config.json's hyperparameters),
// extended to their full size as sparse files: llama.cpp loads them with no_alloc without reading a
// byte of tensor data, so they stand in for 8B-30B models in the memory comparisons.
#pragma once

#include <ggufkit/writer.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ggufkit::test {

struct ModelShape {
  std::string name;  // "Llama-3.1-8B"
  std::string arch;  // general.architecture
  uint32_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  uint32_t ctx_train = 131072;
  uint32_t head_dim = 0;  // attention.key_length and value_length when non-zero
  uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_expert_shared = 0, n_ff_shexp = 0, n_dense_lead = 0;
  uint32_t sliding_window = 0;  // written when non-zero
  uint32_t swa_pattern = 0;     // attention.sliding_window_pattern, written when non-zero
  uint32_t kv_lora_rank = 0, q_lora_rank = 0, rope_dim = 0, key_length_mla = 0, value_length_mla = 0;
  uint32_t ssm_conv = 0, ssm_inner = 0, ssm_state = 0, ssm_dt_rank = 0, ssm_groups = 0;  // Mamba-2, gated DeltaNet
  std::vector<uint32_t> attention_layers;  // LFM2: the layers with KV heads (head_count_kv per layer)
  uint32_t shortconv_l_cache = 0;
  uint32_t n_nextn = 0;  // nextn_predict_layers: the last n_nextn of n_layer blocks are NextN (MTP) layers
  bool qkv_bias = false;
  bool tied = false;  // no output.weight
};

// The models of the grid: real shapes of Llama-3.1-8B, Mixtral-8x7B, Qwen2.5-7B, Qwen3-8B,
// Qwen3-30B-A3B, Gemma-2-9B, Gemma-3-27B, gpt-oss-20b, Phi-3-mini, Command-R7B (cohere2) and
// DeepSeek-V2-Lite (MLA).
const std::vector<ModelShape>& grid_models();
const ModelShape& grid_model(const std::string& name);

// Writes `shape` as a GGUF header (a synthetic vocabulary of n_vocab tokens, every tensor llama.cpp
// requires for the architecture) and extends the file to its full size without writing the data.
void write_sparse_model(const ModelShape& shape, const std::filesystem::path& path);
// The same in two steps, for tests that change a key first.
GgufBuilder sparse_model_builder(const ModelShape& shape);
void write_sparse(const GgufBuilder& builder, const std::filesystem::path& path);

}  // namespace ggufkit::test
