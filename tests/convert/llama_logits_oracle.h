// llama.cpp's own forward pass: the oracle's libllama.v0.4.0.so (node-llama-cpp@3.21.1, llama.cpp
// 80fb11ac) loaded with dlopen, a model loaded from a GGUF file, tokens decoded in one batch on the
// CPU with an F32 KV cache and no flash attention, and the logits of every position read back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

class LlamaLogitsOracle {
 public:
  // Null when the oracle is not installed (or its structs do not look as expected); why_not says why.
  static const LlamaLogitsOracle* get(std::string* why_not);

  // The logits of every position of `tokens`, decoded as one sequence from position 0:
  // result[position][token id]. Empty, with `error` set (llama.cpp's error lines included), when the
  // model does not load or the decode fails.
  std::vector<std::vector<float>> logits(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                                         std::string* error) const;

 private:
  void* llama_ = nullptr;
};
