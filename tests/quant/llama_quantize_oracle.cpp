#include "llama_quantize_oracle.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ggufkit/reader.h"
#include "ggufkit/tensor_types.h"
#include "oracle_library.h"

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

// struct llama_model_kv_override and llama_model_tensor_override (llama.h).
struct KvOverride {
  int tag;
  char key[128];
  union {
    int64_t val_i64;
    double val_f64;
    bool val_bool;
    char val_str[128];
  };
};
struct TensorOverride {
  const char* pattern;
  int type;
};
// struct llama_model_imatrix_data (llama.h).
struct ImatrixData {
  const char* name;
  const float* data;
  size_t size;
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
    void* handle = ggufkit::test::open_oracle_library(
        "libllama.v0.4.0.so", {"llama_model_quantize", "llama_model_quantize_default_params", "llama_backend_init"},
        &reason);
    if (handle == nullptr) return nullptr;
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

bool LlamaQuantizeOracle::quantize(const std::string& in, const std::string& out,
                                   const LlamaQuantizeRequest& request) const {
  auto defaults = reinterpret_cast<DefaultParams>(dlsym(handle_, "llama_model_quantize_default_params"));
  auto run = reinterpret_cast<Quantize>(dlsym(handle_, "llama_model_quantize"));
  QuantizeParams params = defaults();
  params.ftype = static_cast<int>(request.file_type);
  params.pure = request.pure;
  params.nthread = request.threads;
  if (request.output_tensor_type >= 0) params.output_tensor_type = request.output_tensor_type;
  if (request.token_embedding_type >= 0) params.token_embedding_type = request.token_embedding_type;
  params.allow_requantize = request.allow_requantize;
  params.quantize_output_tensor = request.quantize_output_tensor;
  std::vector<TensorOverride> tensor_types;
  for (const auto& [pattern, type] : request.tensor_types) tensor_types.push_back({pattern.c_str(), type});
  tensor_types.push_back({nullptr, 0});
  if (!request.tensor_types.empty()) params.tt_overrides = tensor_types.data();
  std::vector<KvOverride> kvs;
  for (const auto& kv : request.kv_overrides) {
    KvOverride o{};
    o.tag = kv.tag;
    std::strncpy(o.key, kv.key.c_str(), sizeof o.key - 1);
    if (kv.tag == 0) o.val_i64 = kv.i;
    if (kv.tag == 1) o.val_f64 = kv.f;
    if (kv.tag == 2) o.val_bool = kv.b;
    if (kv.tag == 3) std::strncpy(o.val_str, kv.s.c_str(), sizeof o.val_str - 1);
    kvs.push_back(o);
  }
  kvs.push_back(KvOverride{});  // the terminator: an empty key
  if (!request.kv_overrides.empty()) params.kv_overrides = kvs.data();
  std::vector<ImatrixData> imatrix;
  for (const auto& [name, values] : request.imatrix) imatrix.push_back({name.c_str(), values.data(), values.size()});
  imatrix.push_back({nullptr, nullptr, 0});
  if (!request.imatrix.empty()) params.imatrix = imatrix.data();
  params.keep_split = request.keep_split;
  params.only_copy = request.only_copy;
  return run(in.c_str(), out.c_str(), &params) == 0;
}

std::string first_difference(const std::string& ours, const std::string& theirs) {
  auto a = ggufkit::GgufFile::open(ours);
  auto b = ggufkit::GgufFile::open(theirs);
  if (!a || !b) return "one of the files does not parse";
  if (a->tensors().size() != b->tensors().size()) return "tensor counts differ";
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    const ggufkit::TensorInfo& x = a->tensors()[i];
    const ggufkit::TensorInfo& y = b->tensors()[i];
    if (x.name != y.name) return "tensor order differs at " + std::string(y.name);
    if (x.type != y.type) {
      return std::string(x.name) + ": ours " + std::string(ggufkit::type_name(x.type)) + ", llama.cpp " +
             std::string(ggufkit::type_name(y.type));
    }
    const auto dx = a->tensor_data(x), dy = b->tensor_data(y);
    if (!std::equal(dx.begin(), dx.end(), dy.begin(), dy.end())) {
      return std::string(x.name) + " (" + std::string(ggufkit::type_name(x.type)) + "): bytes differ";
    }
  }
  return {};
}
