// What llama.cpp allocates for a model and a context on a CPU build with n_gpu_layers = 0 and no
// repacked buffers, from the file's header alone: the model buffer, every KV cache (dense and
// sliding-window), recurrent state, the output buffer and (estimated) the compute buffer. The
// figures are those of llama_get_memory_breakdown and the "output buffer size" llama.cpp logs, in
// the oracle's version (tests/estimate compares them on a grid of real model shapes).
#pragma once

#include <ggufkit/arch.h>
#include <ggufkit/error.h>
#include <ggufkit/split.h>
#include <ggufkit/tensor_types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ggufkit {

enum class FlashAttention : int8_t { automatic = -1, off = 0, on = 1 };

// llama_context_params with llama_context_default_params()' defaults, but swa_full off as in
// llama-cli and llama-server.
struct EstimateOptions {
  uint32_t ctx_size = 512;  // 0: the model's context_length
  uint32_t batch_size = 2048;
  uint32_t ubatch_size = 512;
  uint32_t parallel = 1;  // n_seq_max
  bool kv_unified = false;
  bool swa_full = false;
  TensorType cache_type_k = TensorType::F16;
  TensorType cache_type_v = TensorType::F16;
  FlashAttention flash_attn = FlashAttention::automatic;
  bool assume_dense = false;  // an architecture the registry lacks: every layer full attention
};

// One cache of the context's memory.
struct CacheEstimate {
  enum class Kind : uint8_t { kv, kv_swa, recurrent };
  Kind kind = Kind::kv;
  uint32_t cells = 0;    // per stream (kv_size; for recurrent: the state slots)
  uint32_t streams = 1;  // one per sequence unless the KV cache is unified
  uint32_t layers = 0;
  TensorType type_k = TensorType::F16;  // for recurrent: the conv / token-shift state's type (F32)
  TensorType type_v = TensorType::F16;  // for recurrent: the SSM / WKV state's type (F32)
  bool has_v = true;                    // false for MLA (the compressed row is K only)
  uint64_t k_bytes = 0;
  uint64_t v_bytes = 0;
  uint64_t bytes() const { return k_bytes + v_bytes; }
};
std::string_view cache_kind_name(CacheEstimate::Kind kind);

struct MemoryEstimate {
  std::string architecture;
  bool assumed_dense = false;
  // The context as llama.cpp resolves it: n_ctx padded to 256 and to a multiple of the sequences.
  uint32_t n_ctx = 0;
  uint32_t n_ctx_seq = 0;
  uint32_t n_batch = 0;
  uint32_t n_ubatch = 0;
  uint32_t n_seq = 1;
  bool flash_attn = true;  // as resolved: auto is on for the CPU
  uint64_t model_bytes = 0;
  std::vector<CacheEstimate> caches;
  uint64_t context_bytes = 0;  // the caches' sum
  uint64_t output_bytes = 0;
  uint64_t compute_bytes = 0;  // estimated (graph allocation is not modelled exactly)
  uint64_t total_bytes = 0;
};

// The estimate for a model (plain or split: every shard's tensors count). Errors: those of
// arch::derive_hyperparameters, invalid_argument for a context llama.cpp refuses (a quantized V
// cache without flash attention, a cache type whose block does not divide the head size, MLA with
// different K and V types, more than 256 sequences, a context that does not fit 32 bits), and
// shape_overflow when a size does not fit 64 bits.
Expected<MemoryEstimate> estimate_memory(const SplitModel& model, const EstimateOptions& options = {});
// Opens `path` (a plain file or a split model's first shard; a metadata-only file too: nothing but
// the header is read) and estimates it.
Expected<MemoryEstimate> estimate_memory(const std::filesystem::path& path, const EstimateOptions& options = {});

// The largest context, in llama.cpp's 256-cell steps and at most the model's context_length, whose
// total_bytes is at most `memory_bytes` (options.ctx_size is ignored): its estimate, or nullopt
// when not even 256 cells fit. A binary search over estimate_memory (the total grows with the
// context).
Expected<std::optional<MemoryEstimate>> estimate_max_context(const SplitModel& model, const EstimateOptions& options,
                                                             uint64_t memory_bytes);

}  // namespace ggufkit
