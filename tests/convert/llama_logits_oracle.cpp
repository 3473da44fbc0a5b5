#include "llama_logits_oracle.h"

#include "llama_params.h"
#include "oracle_library.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>

namespace {

using ggufkit::test::llama::ContextParams;
using ggufkit::test::llama::ModelParams;

// struct llama_batch.
struct Batch {
  int32_t n_tokens;
  int32_t* token;
  float* embd;
  int32_t* pos;
  int32_t* n_seq_id;
  int32_t** seq_id;
  int8_t* logits;  // non-zero: output the logits of this token
};

constexpr int kGgmlTypeF32 = 0;
constexpr int kGgmlTypeF16 = 1;
constexpr int kFlashAttentionDisabled = 0;
constexpr int kGgmlLogLevelError = 4;

using ggufkit::test::llama::ContextDefaults;
using ggufkit::test::llama::ModelDefaults;
using LoadModel = void* (*)(const char*, ModelParams);
using FreeModel = void (*)(void*);
using InitContext = void* (*)(void*, ContextParams);
using FreeContext = void (*)(void*);
using Decode = int32_t (*)(void*, Batch);
using GetLogits = float* (*)(void*, int32_t);
using GetVocab = const void* (*)(const void*);
using VocabTokens = int32_t (*)(const void*);
using LogCallback = void (*)(int, const char*, void*);
using LogSet = void (*)(LogCallback, void*);

// llama.cpp's error lines since the last call (the oracle is used from one thread at a time).
std::mutex log_mutex;
std::string error_log;
void keep_errors(int level, const char* text, void*) {
  if (level != kGgmlLogLevelError || text == nullptr) return;
  std::lock_guard lock(log_mutex);
  error_log += text;
}

template <class F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

}  // namespace

const LlamaLogitsOracle* LlamaLogitsOracle::get(std::string* why_not) {
  static std::string reason;
  static const LlamaLogitsOracle* oracle = []() -> const LlamaLogitsOracle* {
    void* handle = ggufkit::test::open_llama_library(
        {"llama_backend_init", "llama_model_default_params", "llama_context_default_params",
         "llama_model_load_from_file", "llama_init_from_model", "llama_decode", "llama_get_logits_ith",
         "llama_model_get_vocab", "llama_vocab_n_tokens", "llama_free", "llama_model_free"},
        &reason);
    if (handle == nullptr) return nullptr;
    const std::string path = ggufkit::test::oracle_library_dir() + "/libllama.v0.4.0.so";
    if (auto log_set = symbol<LogSet>(handle, "llama_log_set")) log_set(keep_errors, nullptr);

    // The mirrored structs must give llama.cpp's documented defaults, else the layout differs.
    const ModelParams model_defaults = symbol<ModelDefaults>(handle, "llama_model_default_params")();
    const ContextParams context_defaults = symbol<ContextDefaults>(handle, "llama_context_default_params")();
    if (model_defaults.n_gpu_layers != -1 || !model_defaults.use_extra_bufts || model_defaults.vocab_only ||
        context_defaults.n_ctx != 512 || context_defaults.n_batch != 2048 || context_defaults.n_ubatch != 512 ||
        context_defaults.type_k != kGgmlTypeF16 || context_defaults.type_v != kGgmlTypeF16 ||
        !context_defaults.offload_kqv || !context_defaults.no_perf || context_defaults.embeddings ||
        context_defaults.n_samplers != 0 || context_defaults.ctx_other != nullptr) {
      reason = path + ": llama_model_params or llama_context_params differ from the mirrored llama.h (80fb11ac)";
      return nullptr;
    }
    auto* o = new LlamaLogitsOracle();
    o->llama_ = handle;
    return o;
  }();
  if (why_not) *why_not = reason;
  return oracle;
}

std::vector<std::vector<float>> LlamaLogitsOracle::logits(const std::string& gguf_path,
                                                          const std::vector<int32_t>& tokens,
                                                          std::string* error) const {
  {
    std::lock_guard lock(log_mutex);
    error_log.clear();
  }
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(log_mutex);
    if (error) *error = what + (error_log.empty() ? "" : ": " + error_log);
    return std::vector<std::vector<float>>{};
  };

  ModelParams model_params = symbol<ModelDefaults>(llama_, "llama_model_default_params")();
  model_params.n_gpu_layers = 0;
  void* model = symbol<LoadModel>(llama_, "llama_model_load_from_file")(gguf_path.c_str(), model_params);
  if (model == nullptr) return fail("llama_model_load_from_file refused " + gguf_path);

  const auto n_tokens = static_cast<uint32_t>(tokens.size());
  ContextParams context_params = symbol<ContextDefaults>(llama_, "llama_context_default_params")();
  context_params.n_ctx = 256;
  context_params.n_batch = n_tokens;
  context_params.n_ubatch = n_tokens;
  context_params.n_outputs_max_per_seq = 0;  // every position's logits
  context_params.n_threads = 2;
  context_params.n_threads_batch = 2;
  // F32 everywhere: an F16 KV cache or flash attention's F16 conversions would cost about 1e-3.
  context_params.flash_attn_type = kFlashAttentionDisabled;
  context_params.type_k = kGgmlTypeF32;
  context_params.type_v = kGgmlTypeF32;
  void* context = symbol<InitContext>(llama_, "llama_init_from_model")(model, context_params);
  if (context == nullptr) {
    symbol<FreeModel>(llama_, "llama_model_free")(model);
    return fail("llama_init_from_model failed");
  }

  std::vector<int32_t> token_ids = tokens;
  std::vector<int8_t> output(tokens.size(), 1);
  // pos and seq_id null: llama.cpp numbers the tokens from 0 in sequence 0.
  const Batch batch{static_cast<int32_t>(n_tokens), token_ids.data(), nullptr, nullptr, nullptr, nullptr, output.data()};
  std::vector<std::vector<float>> result;
  const int32_t status = symbol<Decode>(llama_, "llama_decode")(context, batch);
  if (status == 0) {
    const void* vocab = symbol<GetVocab>(llama_, "llama_model_get_vocab")(model);
    const int32_t n_vocab = symbol<VocabTokens>(llama_, "llama_vocab_n_tokens")(vocab);
    for (int32_t i = 0; i < static_cast<int32_t>(n_tokens); ++i) {
      const float* row = symbol<GetLogits>(llama_, "llama_get_logits_ith")(context, i);
      if (row == nullptr) break;
      result.emplace_back(row, row + n_vocab);
    }
  }
  symbol<FreeContext>(llama_, "llama_free")(context);
  symbol<FreeModel>(llama_, "llama_model_free")(model);
  if (status != 0) return fail("llama_decode returned " + std::to_string(status));
  if (result.size() != tokens.size()) return fail("llama_get_logits_ith gave no logits for some position");
  return result;
}
