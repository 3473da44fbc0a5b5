// llama.cpp's parameter structs as the oracle's libllama.v0.4.0.so (node-llama-cpp@3.21.1,
// llama.cpp 80fb11ac) defines them, mirrored for calls through dlopen: the logits oracle and the
// memory oracle share them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ggufkit::test::llama {

// struct llama_model_params (include/llama.h of llama.cpp 80fb11ac, the oracle's build). Enums are
// ints; field order and types must match exactly, the struct is passed by value.
struct ModelParams {
  void* devices;
  const void* tensor_buft_overrides;
  int32_t n_gpu_layers;
  int split_mode;
  int load_mode;
  int lazy_mode;
  int32_t main_gpu;
  const float* tensor_split;
  void* progress_callback;
  void* progress_callback_user_data;
  const void* kv_overrides;
  bool vocab_only;
  bool check_tensors;
  bool use_extra_bufts;
  bool no_host;
  bool no_alloc;
  bool load_mtp;
};

// struct llama_context_params (same header).
struct ContextParams {
  uint32_t n_ctx;
  uint32_t n_batch;
  uint32_t n_ubatch;
  uint32_t n_seq_max;
  uint32_t n_rs_seq;
  uint32_t n_outputs_max;
  uint32_t n_outputs_max_per_seq;
  int32_t n_threads;
  int32_t n_threads_batch;
  int ctx_type;
  int rope_scaling_type;
  int pooling_type;
  int attention_type;
  int flash_attn_type;
  float rope_freq_base;
  float rope_freq_scale;
  float yarn_ext_factor;
  float yarn_attn_factor;
  float yarn_beta_fast;
  float yarn_beta_slow;
  uint32_t yarn_orig_ctx;
  float defrag_thold;
  void* cb_eval;
  void* cb_eval_user_data;
  int type_k;
  int type_v;
  void* abort_callback;
  void* abort_callback_data;
  bool embeddings;
  bool offload_kqv;
  bool no_perf;
  bool op_offload;
  bool swa_full;
  bool kv_unified;
  void* samplers;
  size_t n_samplers;
  void* ctx_other;
};

using ModelDefaults = ModelParams (*)();
using ContextDefaults = ContextParams (*)();

}  // namespace ggufkit::test::llama
