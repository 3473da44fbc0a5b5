// The per-tensor type choices of llama-quantize's presets (Q4_K_M and friends): a table of rules
// and the small interpreter that walks it (preset_rules.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ggufkit/error.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"

namespace ggufkit::preset_rules {

// What the rules look at in the model besides a tensor's name and shape (llama.cpp's hparams).
struct ModelFacts {
  std::string arch;
  int n_layer = 0;             // {arch}.block_count
  int n_gqa = 0;               // head_count / head_count_kv of layer 0 (0 without kv heads)
  int n_expert = 0;            // {arch}.expert_count
  bool is_70b = false;         // llama.cpp's LLM_TYPE_70B (a few architectures, by layer count)
  bool tied_embeddings = true; // no output.weight: token_embd takes the output's type
  int n_attention_v = 0;       // attn_v-like tensors (attn_v, attn_qkv, attn_kv_b)
  bool importance_matrix = false;  // quantizing with an importance matrix (a few rules differ)
};

// The facts of a model, with llama-quantize's --override-kv values applied as its loader applies
// them to the hyperparameters.
Expected<ModelFacts> model_facts(const GgufFile& metadata, std::span<const TensorInfo* const> tensors,
                                 std::span<const MetadataOverride> overrides = {});

// Chooses types for one model; call choose() for every quantizable tensor in the order llama.cpp
// writes them (the counters of attn_v and ffn_* tensors depend on it).
class TypeChooser {
 public:
  TypeChooser(uint32_t file_type, TensorType default_type, ModelFacts facts)
      : file_type_(file_type), default_type_(default_type), facts_(std::move(facts)) {}
  // The preset's type for the tensor, before the fallback for rows that are not whole blocks.
  Expected<TensorType> choose(const TensorInfo& tensor);

 private:
  uint32_t file_type_;
  TensorType default_type_;
  ModelFacts facts_;
  int attention_v_seen_ = 0, ffn_down_seen_ = 0, ffn_gate_seen_ = 0, ffn_up_seen_ = 0;
};

// Whether llama.cpp refuses to write this tensor with this type without an importance matrix.
bool needs_importance_matrix(std::string_view name, TensorType type, uint32_t file_type);

}  // namespace ggufkit::preset_rules
