// llama.cpp's own memory figures for a model and a context, without reading tensor data: the
// oracle's libllama.v0.4.0.so loads the model with no_alloc (nothing allocated, no tensor read),
// n_gpu_layers = 0, no mapping and no repacked buffers, creates a context, and reports
// llama_get_memory_breakdown (src/llama-ext.h) and the "output buffer size" it logs. Header-only
// files extended to their full size (sparse) therefore stand in for real 8B-30B models.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ggufkit::test {

struct OracleContext {
  uint32_t n_ctx = 4096;
  uint32_t n_batch = 2048;
  uint32_t n_ubatch = 512;
  uint32_t n_seq = 1;
  bool kv_unified = false;
  bool swa_full = false;
  int type_k = 1;      // ggml_type: 1 f16, 8 q8_0, 2 q4_0
  int type_v = 1;
  int flash_attn = 1;  // llama_flash_attn_type: -1 auto, 0 off, 1 on
};

struct OracleMemory {
  uint64_t model = 0;    // summed over buffer types
  uint64_t context = 0;  // KV caches and recurrent state
  uint64_t compute = 0;
  std::string output_mib;  // the "output buffer size" line's figure, "%.2f" MiB as llama.cpp logs it
};

class MemoryOracle {
 public:
  // Null when the oracle is not installed; why_not says why.
  static const MemoryOracle* get(std::string* why_not);
  // Loads the model once and creates one context per entry of `contexts`. A context llama.cpp
  // refuses is a nullopt with its error lines in (*errors)[i]; an empty result with errors[0] set
  // when the model itself is refused.
  std::vector<std::optional<OracleMemory>> measure(const std::string& gguf_path,
                                                   const std::vector<OracleContext>& contexts,
                                                   std::vector<std::string>* errors) const;

 private:
  void* llama_ = nullptr;
};

// What we print for output bytes, in llama.cpp's log format (for the comparison with output_mib).
std::string mib_2(uint64_t bytes);

}  // namespace ggufkit::test
