// llama.cpp's own model quantizer, llama_model_quantize from the oracle's libllama.v0.4.0.so
// (node-llama-cpp@3.21.1), loaded with dlopen at test time.
#pragma once

#include <cstdint>
#include <string>

class LlamaQuantizeOracle {
 public:
  // Null when the oracle is not installed; why_not says why.
  static const LlamaQuantizeOracle* get(std::string* why_not);
  // llama_model_quantize(in, out, {ftype, pure, nthread}); true on success.
  bool quantize(const std::string& in, const std::string& out, uint32_t file_type, bool pure, int threads) const;

 private:
  void* handle_ = nullptr;
};
