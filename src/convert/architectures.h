// The architectures gguf convert knows, as data: one entry per Hugging Face architecture name.
// Adding one is adding an entry (and, for a new transform or key, a line where it is applied).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ggufkit/convert.h"

namespace ggufkit::convert_detail {

// A dimension of an expected shape, from config.json.
enum class Dim : uint8_t {
  none,       // no dimension (1-D tensors have one)
  vocab,      // vocab_size
  embd,       // hidden_size
  ff,         // intermediate_size
  q_out,      // num_attention_heads * head_dim
  kv_out,     // num_key_value_heads * head_dim
  head_dim,   // head_dim, or hidden_size / num_attention_heads
};

enum class Presence : uint8_t {
  required,
  optional,   // converted when present (llama's attention biases)
  output,     // lm_head: absent when the embeddings are tied
};

// One checkpoint tensor: its HF name (per layer: after "model.layers.N."), its GGUF name (per
// layer: after "blk.N."), its HF shape (outermost first) and what happens to it.
struct TensorRule {
  std::string_view hf_name;
  std::string_view gguf_name;
  Dim rows;
  Dim cols;                   // Dim::none for 1-D tensors
  Presence presence = Presence::required;
  ConvertTransform transform = ConvertTransform::none;
  bool kv_heads = false;      // permute_rope groups the rows by the KV heads (K), not the heads (Q)
};

struct ArchitectureSpec {
  std::string_view hf_name;       // config.json architectures[0]
  std::string_view gguf_name;     // general.architecture, and the prefix of its keys
  std::span<const TensorRule> global_tensors;
  std::span<const TensorRule> layer_tensors;
  // LlamaModel.set_gguf_parameters adds these two; Qwen2Model does not.
  bool writes_vocab_size = false;
  bool writes_rope_dimension_count = false;
  // llama3 rope scaling is written as a rope_freqs tensor (LlamaModel.generate_extra_tensors).
  bool llama3_rope_freqs = false;
};

const ArchitectureSpec* find_architecture(std::string_view hf_name);
std::span<const ArchitectureSpec> architectures();

}  // namespace ggufkit::convert_detail
