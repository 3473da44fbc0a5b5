#include "llama_quantize_oracle.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>

namespace {

// struct llama_model_quantize_params (llama.h of llama.cpp 80fb11ac). The enums are ints.
struct QuantizeParams {
  int32_t nthread;
  int ftype;
  int output_tensor_type;
  int token_embedding_type;
  bool allow_requantize;
  bool quantize_output_tensor;
  bool only_copy;
  bool pure;
  bool keep_split;
  bool dry_run;
  const void* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
};

using DefaultParams = QuantizeParams (*)();
using Quantize = uint32_t (*)(const char*, const char*, const QuantizeParams*);
using LogCallback = void (*)(int, const char*, void*);
using LogSet = void (*)(LogCallback, void*);

void quiet(int, const char*, void*) {}

}  // namespace

const LlamaQuantizeOracle* LlamaQuantizeOracle::get(std::string* why_not) {
  static std::string reason;
  static const LlamaQuantizeOracle* oracle = []() -> const LlamaQuantizeOracle* {
    const char* env = std::getenv("GGUFKIT_ORACLE_LIB_DIR");
    const std::string dir = env && *env ? env : GGUFKIT_ORACLE_LIB_DIR;
    const std::string path = dir + "/libllama.v0.4.0.so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      reason = "cannot load " + path + ": " + (err ? err : "dlopen failed");
      return nullptr;
    }
    if (!dlsym(handle, "llama_model_quantize") || !dlsym(handle, "llama_model_quantize_default_params") ||
        !dlsym(handle, "llama_backend_init")) {
      reason = path + " lacks llama_model_quantize";
      return nullptr;
    }
    reinterpret_cast<void (*)()>(dlsym(handle, "llama_backend_init"))();
    if (auto log_set = reinterpret_cast<LogSet>(dlsym(handle, "llama_log_set"))) log_set(quiet, nullptr);
    auto* o = new LlamaQuantizeOracle();
    o->handle_ = handle;
    return o;
  }();
  if (why_not) *why_not = reason;
  return oracle;
}

bool LlamaQuantizeOracle::quantize(const std::string& in, const std::string& out, uint32_t file_type, bool pure,
                                   int threads) const {
  auto defaults = reinterpret_cast<DefaultParams>(dlsym(handle_, "llama_model_quantize_default_params"));
  auto run = reinterpret_cast<Quantize>(dlsym(handle_, "llama_model_quantize"));
  QuantizeParams params = defaults();
  params.ftype = static_cast<int>(file_type);
  params.pure = pure;
  params.nthread = threads;
  return run(in.c_str(), out.c_str(), &params) == 0;
}
