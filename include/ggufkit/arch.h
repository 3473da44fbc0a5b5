// The architecture registry (src/arch/): what llama.cpp knows about each architecture, stated once
// as data, and the hyperparameters it derives from a file's metadata for memory: head dimensions,
// per-layer head counts, the K and V row of each layer's cache, the sliding-window layers, MLA's
// compressed row, recurrent state rows, and architectures without a KV cache (encoders).
// The facts are those of llama.cpp's llama-model.cpp (load_hparams, create_memory), models/*.cpp
// (load_arch_hparams), llama-hparams.cpp and llama-memory-*.cpp, in the oracle's version.
#pragma once

#include <ggufkit/error.h>
#include <ggufkit/reader.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ggufkit::arch {

// The memory llama.cpp's create_memory makes for the architecture.
enum class Memory : uint8_t {
  kv_cache,   // llama_kv_cache, or llama_kv_cache_iswa when some layers use a sliding window
  recurrent,  // llama_memory_recurrent: every layer keeps a state, no KV cache
  hybrid,     // llama_memory_hybrid: attention layers in a KV cache, the others recurrent
  none,       // encoders (bert, nomic-bert): no memory at all
};

// llama_swa_type.
enum class SwaType : uint8_t { none, standard, chunked };

// When an architecture's layers use a sliding window (its load_arch_hparams).
enum class SwaWhen : uint8_t {
  never,
  always,             // gemma2, cohere2, gpt-oss
  window_positive,    // only when attention.sliding_window is present and > 0 (gemma3, olmo2)
  unless_window_zero, // unless attention.sliding_window is present and 0 (llama4)
  layer_count,        // when block_count is SwaRule::layer_count (exaone4: the 32B)
  per_layer_array,    // attention.sliding_window_pattern is a per-layer bool array (gemma4)
};

struct SwaRule {
  SwaWhen when = SwaWhen::never;
  SwaType type = SwaType::standard;
  uint32_t period = 0;          // llama.cpp's default sliding_window_pattern (set_swa_pattern)
  bool dense_first = false;     // set_swa_pattern(period, dense_first)
  uint32_t default_window = 0;  // 0: attention.sliding_window is required
  bool window_forced = false;   // the default replaces the file's value (llama4's 8192)
  uint32_t layer_count = 0;     // for SwaWhen::layer_count
};

// How a recurrent layer's state rows are sized (llama_hparams::n_embd_r / n_embd_s).
enum class State : uint8_t {
  none,
  ssm,         // Mamba-2 and the gated DeltaNet of qwen35: ssm.conv_kernel, inner_size, state_size, group_count
  shortconv,   // LFM2: shortconv.l_cache
  wkv,         // RWKV: wkv.head_size, token_shift_count
};

// One registry entry.
struct Architecture {
  std::string_view name;  // general.architecture
  Memory memory = Memory::kv_cache;
  SwaRule swa{};
  State state = State::none;
  // Keys llama.cpp requires of this architecture beyond the common ones, as suffixes of "{arch}."
  // (the common ones: context_length, embedding_length, block_count).
  std::span<const std::string_view> required_keys{};
  bool causal = true;  // attention.causal's default
  bool gated_ffn = true;  // gate, up and down (SwiGLU/GeGLU); false: up and down (bert's GELU)
  // The NextN (multi-token prediction) blocks, the last nextn_predict_layers of block_count, are not
  // loaded (llama.cpp skips their tensors unless asked for MTP); their KV cache rows still are.
  bool skips_nextn = false;
};

// Every architecture of the registry, in llama-arch.cpp's order.
std::span<const Architecture> architectures();
// Null for an architecture the registry lacks.
const Architecture* find_architecture(std::string_view name);

// One layer as llama.cpp's hparams see it for memory.
struct Layer {
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_k = 0;  // n_embd_head_k(il): key_length (or _swa on sliding-window layers)
  uint32_t head_v = 0;
  bool swa = false;        // in the sliding-window cache
  bool recurrent = false;  // keeps a recurrent state instead of K and V
  bool has_kv = true;      // false for gemma4's layers that reuse an earlier layer's cache

  uint64_t n_embd_k_gqa() const { return uint64_t{head_k} * n_head_kv; }
  uint64_t n_embd_v_gqa() const { return uint64_t{head_v} * n_head_kv; }
};

struct Hyperparameters {
  std::string architecture;
  const Architecture* entry = nullptr;  // null when estimated with assume_dense
  bool assumed_dense = false;
  uint32_t n_embd = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_vocab = 0;       // tokenizer.ggml.tokens' count
  bool causal = true;
  bool mla = false;           // attention.key_length_mla and value_length_mla: K only (the compressed row)
  SwaType swa_type = SwaType::none;
  uint32_t n_swa = 0;         // the window, in tokens
  std::vector<Layer> layers;  // every layer (block_count, NextN layers included)
  uint32_t n_layer_nextn = 0; // nextn_predict_layers: the last of `layers` that are NextN blocks
  // For the compute buffer's estimate: the feed-forward widths (the largest layer's).
  uint32_t n_ff = 0;          // feed_forward_length
  uint32_t n_expert = 0;      // expert_count
  uint32_t n_expert_used = 0; // expert_used_count
  uint32_t n_ff_exp = 0;      // expert_feed_forward_length
  uint64_t n_embd_r = 0;      // recurrent layers: the conv / token-shift state row (elements)
  uint64_t n_embd_s = 0;      // recurrent layers: the SSM / WKV state row (elements)

  uint64_t n_embd_v_gqa_max() const;
  bool any_swa() const;
};

struct DeriveOptions {
  // For an architecture the registry lacks: every layer full attention, with the common keys.
  bool assume_dense = false;
};

// The hyperparameters of `file` (a model, or the first shard of one). Errors: unknown_architecture
// (the registry lacks it, without assume_dense), bad_hyperparameter (a key llama.cpp requires is
// missing, has the wrong type, is zero where it divides, or a per-layer array has the wrong length).
Expected<Hyperparameters> derive_hyperparameters(const GgufFile& file, const DeriveOptions& options = {});

}  // namespace ggufkit::arch
