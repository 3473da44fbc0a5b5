#include "memory_oracle.h"

#include "llama_params.h"
#include "oracle_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <mutex>

namespace ggufkit::test {
namespace {

// struct llama_memory_breakdown_data (src/llama-ext.h): three size_t.
struct BreakdownData {
  size_t model = 0;
  size_t context = 0;
  size_t compute = 0;
};
// llama_memory_breakdown is std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>: a
// map keyed by a pointer has the same layout whatever the pointee; returned by value (C++ ABI).
using Breakdown = std::map<void*, BreakdownData>;
using GetBreakdown = Breakdown (*)(const void*);
constexpr const char* kGetBreakdown = "_Z26llama_get_memory_breakdownPK13llama_context";

using LoadModel = void* (*)(const char*, llama::ModelParams);
using FreeModel = void (*)(void*);
using InitContext = void* (*)(void*, llama::ContextParams);
using FreeContext = void (*)(void*);
using LogCallback = void (*)(int, const char*, void*);
using LogSet = void (*)(LogCallback, void*);

constexpr int kLogError = 4;
std::mutex log_mutex;
std::string error_log;
std::string output_line;

void keep_log(int level, const char* text, void*) {
  if (text == nullptr) return;
  std::lock_guard lock(log_mutex);
  if (level == kLogError) error_log += text;
  const std::string_view line(text);
  if (line.find("output buffer size") != std::string_view::npos) output_line = text;
}

template <class F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

}  // namespace

std::string mib_2(uint64_t bytes) {
  char out[64];
  std::snprintf(out, sizeof out, "%.2f", static_cast<double>(bytes) / 1024.0 / 1024.0);
  return out;
}

const MemoryOracle* MemoryOracle::get(std::string* why_not) {
  static std::string reason;
  static const MemoryOracle* oracle = []() -> const MemoryOracle* {
    void* handle = open_llama_library({"llama_model_default_params", "llama_context_default_params",
                                       "llama_model_load_from_file", "llama_init_from_model", "llama_free",
                                       "llama_model_free", "llama_log_set", kGetBreakdown},
                                      &reason);
    if (handle == nullptr) return nullptr;
    symbol<LogSet>(handle, "llama_log_set")(keep_log, nullptr);
    const auto context_defaults = symbol<llama::ContextDefaults>(handle, "llama_context_default_params")();
    if (context_defaults.n_ctx != 512 || context_defaults.n_batch != 2048 || context_defaults.n_ubatch != 512 ||
        context_defaults.ctx_other != nullptr || context_defaults.n_samplers != 0) {
      reason = "llama_context_params differ from the mirrored llama.h (80fb11ac)";
      return nullptr;
    }
    auto* o = new MemoryOracle();
    o->llama_ = handle;
    return o;
  }();
  if (why_not != nullptr) *why_not = reason;
  return oracle;
}

std::vector<std::optional<OracleMemory>> MemoryOracle::measure(const std::string& gguf_path,
                                                               const std::vector<OracleContext>& contexts,
                                                               std::vector<std::string>* errors) const {
  const auto take_errors = [] {
    std::lock_guard lock(log_mutex);
    std::string text = std::move(error_log);
    error_log.clear();
    output_line.clear();
    return text;
  };
  std::vector<std::optional<OracleMemory>> result;
  std::vector<std::string> messages;
  (void)take_errors();
  auto model_params = symbol<llama::ModelDefaults>(llama_, "llama_model_default_params")();
  model_params.n_gpu_layers = 0;
  model_params.no_alloc = true;
  model_params.load_mode = 0;  // LLAMA_LOAD_MODE_NONE
  model_params.use_extra_bufts = false;
  void* model = symbol<LoadModel>(llama_, "llama_model_load_from_file")(gguf_path.c_str(), model_params);
  if (model == nullptr) {
    if (errors != nullptr) *errors = {"llama_model_load_from_file refused " + gguf_path + ": " + take_errors()};
    return {};
  }
  for (const OracleContext& c : contexts) {
    auto params = symbol<llama::ContextDefaults>(llama_, "llama_context_default_params")();
    params.n_ctx = c.n_ctx;
    params.n_batch = c.n_batch;
    params.n_ubatch = c.n_ubatch;
    params.n_seq_max = c.n_seq;
    params.kv_unified = c.kv_unified;
    params.swa_full = c.swa_full;
    params.type_k = c.type_k;
    params.type_v = c.type_v;
    params.flash_attn_type = c.flash_attn;
    params.n_threads = 1;
    params.n_threads_batch = 1;
    void* context = symbol<InitContext>(llama_, "llama_init_from_model")(model, params);
    if (context == nullptr) {
      result.emplace_back();
      messages.push_back("llama_init_from_model failed: " + take_errors());
      continue;
    }
    OracleMemory memory;
    {
      const Breakdown breakdown = reinterpret_cast<GetBreakdown>(dlsym(llama_, kGetBreakdown))(context);
      for (const auto& [buffer_type, data] : breakdown) {
        memory.model += data.model;
        memory.context += data.context;
        memory.compute += data.compute;
      }
    }
    symbol<FreeContext>(llama_, "llama_free")(context);
    std::string line;
    {
      std::lock_guard lock(log_mutex);
      line = output_line;
    }
    // "llama_context:        CPU  output buffer size =     0.58 MiB"
    const size_t equals = line.find('=');
    const size_t begin = equals == std::string::npos ? std::string::npos : line.find_first_not_of(' ', equals + 1);
    if (begin == std::string::npos) {
      result.emplace_back();
      messages.push_back("no output buffer line in llama.cpp's log: " + take_errors());
      continue;
    }
    memory.output_mib = line.substr(begin, line.find(' ', begin) - begin);
    (void)take_errors();
    result.emplace_back(std::move(memory));
    messages.emplace_back();
  }
  symbol<FreeModel>(llama_, "llama_model_free")(model);
  if (errors != nullptr) *errors = std::move(messages);
  return result;
}

}  // namespace ggufkit::test
