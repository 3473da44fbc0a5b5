#include "llama_quantize_oracle.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "test_support.h"
#include "ggufkit/tensor_types.h"

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

std::filesystem::path write_test_model(const std::filesystem::path& dir, const ModelShape& shape) {
  using namespace ggufkit;
  namespace fs = std::filesystem;
  const auto shared = ggufkit::test::shared_dir();
  if (!shared) return {};
  const auto tiny = GgufFile::open(*shared / "corpus/tiny-llama/tiny-llama-f32.gguf");
  if (!tiny) return {};
  GgufBuilder b;
  const std::string& a = shape.arch;
  constexpr uint32_t n_embd = 256, n_ff = 256, n_head = 8, n_head_kv = 2, n_vocab = 512;
  (void)b.set("general.architecture", MetadataValue::string(a));
  (void)b.set("general.name", MetadataValue::string(shape.label()));
  (void)b.set(a + ".context_length", MetadataValue::of<uint32_t>(512));
  (void)b.set(a + ".embedding_length", MetadataValue::of<uint32_t>(n_embd));
  (void)b.set(a + ".feed_forward_length", MetadataValue::of<uint32_t>(n_ff));
  (void)b.set(a + ".block_count", MetadataValue::of<uint32_t>(shape.n_layer));
  (void)b.set(a + ".attention.head_count", MetadataValue::of<uint32_t>(n_head));
  (void)b.set(a + ".attention.head_count_kv", MetadataValue::of<uint32_t>(n_head_kv));
  (void)b.set(a + ".attention.layer_norm_rms_epsilon", MetadataValue::of<float>(1e-5f));
  (void)b.set(a + ".attention.layer_norm_epsilon", MetadataValue::of<float>(1e-5f));
  (void)b.set(a + ".rope.dimension_count", MetadataValue::of<uint32_t>(n_embd / n_head));
  if (shape.n_expert > 0) {
    (void)b.set(a + ".expert_count", MetadataValue::of<uint32_t>(shape.n_expert));
    (void)b.set(a + ".expert_used_count", MetadataValue::of<uint32_t>(2));
  }
  (void)b.set("general.file_type", MetadataValue::of<uint32_t>(0));
  for (const KeyValue& kv : tiny->metadata()) {
    if (kv.key.starts_with("tokenizer.")) (void)b.set(kv.key, MetadataValue::copy_of(kv.value));
  }
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const auto add = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<std::byte> bytes(static_cast<size_t>(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float v = name.find("norm") != std::string::npos ? 1.0f + normal(rng) : normal(rng);
      std::memcpy(bytes.data() + i * 4, &v, sizeof v);
    }
    (void)b.add_tensor(name, TensorType::F32, dims, std::move(bytes));
  };
  const int64_t kv_width = n_embd / n_head * n_head_kv, e = shape.n_expert;
  add("token_embd.weight", {n_embd, n_vocab});
  add("output_norm.weight", {n_embd});
  if (a == "falcon") add("output_norm.bias", {n_embd});
  if (shape.output) add("output.weight", {n_embd, n_vocab});
  for (uint32_t il = 0; il < shape.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {n_embd});
    if (a == "falcon") {
      add(p + "attn_norm.bias", {n_embd});
      add(p + "attn_qkv.weight", {n_embd, n_embd + 2 * kv_width});
    } else {
      add(p + "attn_q.weight", {n_embd, n_embd});
      add(p + "attn_k.weight", {n_embd, kv_width});
      add(p + "attn_v.weight", {n_embd, kv_width});
      add(p + "ffn_norm.weight", {n_embd});
    }
    add(p + "attn_output.weight", {n_embd, n_embd});
    if (e > 0) {
      add(p + "ffn_gate_inp.weight", {n_embd, e});
      add(p + "ffn_gate_exps.weight", {n_embd, n_ff, e});
      add(p + "ffn_up_exps.weight", {n_embd, n_ff, e});
      add(p + "ffn_down_exps.weight", {n_ff, n_embd, e});
    } else {
      if (a != "falcon") add(p + "ffn_gate.weight", {n_embd, n_ff});
      add(p + "ffn_up.weight", {n_embd, n_ff});
      add(p + "ffn_down.weight", {n_ff, n_embd});
    }
  }
  const fs::path path = dir / (shape.label() + ".gguf");
  if (!b.write_file(path)) return {};
  return path;
}

