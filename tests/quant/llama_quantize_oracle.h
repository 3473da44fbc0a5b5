// llama.cpp's own model quantizer, llama_model_quantize from the oracle's libllama.v0.4.0.so
// (node-llama-cpp@3.21.1), loaded with dlopen at test time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// The llama_model_quantize_params fields the quantize options tests set. Types are ggml_type ids
// (ggufkit's TensorType values); -1 leaves llama.cpp's default.
struct LlamaQuantizeRequest {
  uint32_t file_type = 0;
  bool pure = false;
  int threads = 2;
  int output_tensor_type = -1;
  int token_embedding_type = -1;
  bool allow_requantize = false;
  bool quantize_output_tensor = true;
  std::vector<std::pair<std::string, int>> tensor_types;  // pattern, type (tt_overrides)
  // kv_overrides: tag 0 int, 1 float, 2 bool, 3 str (llama_model_kv_override_type).
  struct Kv {
    std::string key;
    int tag = 0;
    int64_t i = 0;
    double f = 0;
    bool b = false;
    std::string s;
  };
  std::vector<Kv> kv_overrides;
  // imatrix: each weight's importance values (llama_model_imatrix_data).
  std::vector<std::pair<std::string, std::vector<float>>> imatrix;
  bool keep_split = false;
  bool only_copy = false;  // llama-quantize's COPY
};

// Compares two quantized files tensor by tensor (order, names, types, bytes): a sentence naming
// the first tensor that differs (with both types), or an empty string when they agree.
std::string first_difference(const std::string& ours, const std::string& theirs);

class LlamaQuantizeOracle {
 public:
  // Null when the oracle is not installed; why_not says why.
  static const LlamaQuantizeOracle* get(std::string* why_not);
  // llama_model_quantize(in, out, {ftype, pure, nthread}); true on success.
  bool quantize(const std::string& in, const std::string& out, uint32_t file_type, bool pure, int threads) const;
  bool quantize(const std::string& in, const std::string& out, const LlamaQuantizeRequest& request) const;

 private:
  void* handle_ = nullptr;
};
