// The architectures gguf check knows, as data: for each, the tensors llama.cpp's loader creates
// (name template, shape as expressions of the hyperparameters, required or optional, when) and the
// hyperparameters it needs. Adding an architecture is one more table in architecture_table.cpp.
//
// Facts come from llama.cpp's src/models/<arch>.cpp (load_arch_hparams, load_arch_tensors),
// src/llama-model.cpp (load_hparams, create_tensor_qkv) and src/llama-arch.cpp (names).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ggufkit::check {

// LLAMA_MAX_LAYERS and LLAMA_MAX_EXPERTS (src/llama-hparams.h): llama.cpp aborts past them.
inline constexpr uint64_t kLlamaMaxLayers = 512;
inline constexpr uint64_t kLlamaMaxExperts = 1024;

enum class Presence : uint8_t {
  required,  // llama.cpp throws "tensor '...' not found" without it
  optional,  // TENSOR_NOT_REQUIRED: loaded when present
  // TENSOR_NOT_REQUIRED for the loader, but the model's graph uses it unconditionally: llama.cpp
  // loads a file without it and crashes when it evaluates the model.
  needed_by_graph,
};

// When the loader creates a tensor at all (a tensor it does not create is one too many).
enum class When : uint8_t {
  always,
  dense_ffn,     // expert_count is 0
  moe_ffn,       // expert_count > 0
  long_rope,     // rope.scaling.type is "longrope"
  not_long_rope,
};

// A tensor the loader creates. `name` holds "{}" for the layer index when the tensor is per layer
// ("blk.{}.attn_q.weight"). Each dimension of `shape` (ggml order, ne0 first, empty = no more
// dimensions) is an expression: sums, products and divisions of integers and the variables below,
// evaluated left to right without precedence between * and /; "?" is any size.
//
// Variables: n_embd, n_vocab, n_ctx, n_ff, n_head, n_head_kv, head_k, head_v, n_embd_k_gqa
// (head_k*n_head_kv), n_embd_v_gqa, n_rot, n_expert, n_expert_used, n_ff_exp, n_ff_shexp,
// n_token_types, n_cls_out. Per-layer ones take the layer's value (see ArchSpec::per_layer_shapes).
struct TensorSpec {
  std::string_view name;
  std::array<std::string_view, 4> shape{};
  Presence presence = Presence::required;
  When when = When::always;
  // The loader skips this tensor when `replaced_by` (same layer) is in the file: fused QKV
  // instead of separate Q, K and V.
  std::string_view replaced_by{};
  // The loader only looks for this tensor when `only_with` (same layer) is in the file.
  std::string_view only_with{};
};

// A variable's value when its key is absent (or 0): {"n_ff_exp", "n_ff/n_expert_used"}.
struct VariableDefault {
  std::string_view variable;
  std::string_view expression;
};

struct ArchSpec {
  std::string_view name;  // general.architecture
  std::vector<TensorSpec> tensors;
  // "{arch}.<suffix>" keys the loader reads with ml.get_key(..., required): it refuses the file
  // without them. context_length, embedding_length and block_count are required for every
  // architecture and not repeated here.
  std::vector<std::string_view> required_keys;
  // Keys the loader reads as optional but that size the tensors: without them llama.cpp takes 0
  // and no tensor of the model can match.
  std::vector<std::string_view> shape_keys;
  // The other "{arch}.<suffix>" keys its load_arch_hparams reads when present (the keys every
  // architecture reads are architecture.cpp's). Their types are checked as the loader reads them.
  std::vector<std::string_view> optional_keys;
  std::vector<VariableDefault> defaults;
  bool needs_experts = false;      // the loader throws unless expert_count and expert_used_count > 0
  bool needs_token_types = false;  // the loader throws unless tokenizer.ggml.token_type_count > 0
  // False when the loader sizes every layer from layer 0's head and feed-forward counts (true of
  // every architecture here): per-layer arrays whose values differ cannot load.
  bool per_layer_shapes = false;
};

// A weight next to which llama.cpp's generic pass (load_tensors, after the architecture's own
// tensors) also loads "<stem>.scale" and "<stem>.input_scale" (NVFP4 and FP8 scales), when the
// weight itself was loaded. `size` is the scales' one dimension, an expression as in TensorSpec.
struct ScaleSpec {
  std::string_view weight;
  std::string_view size;
};
std::span<const ScaleSpec> scaled_weights();

// nullptr when gguf check has no table for `arch`.
const ArchSpec* find_arch_spec(std::string_view arch);
std::span<const ArchSpec> all_arch_specs();
// Every general.architecture value llama.cpp's LLM_ARCH_NAMES lists.
bool llama_cpp_knows_architecture(std::string_view arch);

}  // namespace ggufkit::check
