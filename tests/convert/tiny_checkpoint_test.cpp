// The tiny random llama checkpoint and the reference forward pass, on their own: the safetensors
// file reads back (with ggufkit's reader) as the weights in memory, config.json says what a
// transformers LlamaConfig says, the half conversions round to nearest even, the rope permutation
// pairs the right rows, and the reference pass is causal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "forward_check.h"
#include "ggufkit/safetensors.h"
#include "reference_forward.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

float decode(const SafetensorsTensor& t, size_t i) {
  if (t.dtype == SafetensorsDtype::F32) {
    float v;
    std::memcpy(&v, t.data.data() + 4 * i, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, t.data.data() + 2 * i, 2);
  return t.dtype == SafetensorsDtype::F16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
}

TEST(HalfConversion, RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);           // halfway past the largest: infinity
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // halfway to it: even is zero
  EXPECT_EQ(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even stays
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even stays
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, odd rounds up
  for (const float v : {0.1f, -3.75f, 1e-3f, 1234.5f, std::ldexp(1.0f, -20)}) {
    EXPECT_NEAR(f16_bits_to_float(float_to_f16_bits(v)), v, std::fabs(v) * std::ldexp(1.0, -11) + std::ldexp(1.0, -25));
    EXPECT_NEAR(bf16_bits_to_float(float_to_bf16_bits(v)), v, std::fabs(v) * std::ldexp(1.0, -8));
  }
}

class TinyCheckpoint : public testing::TestWithParam<CheckpointDtype> {};

TEST_P(TinyCheckpoint, SafetensorsHoldTheWeightsInMemory) {
  TinyLlamaConfig config;
  config.dtype = GetParam();
  config.tie_word_embeddings = GetParam() == CheckpointDtype::F16;
  const TinyLlama model = make_tiny_llama(config);
  const fs::path dir = temp_dir("tiny-checkpoint");
  ASSERT_EQ(write_checkpoint(model, dir), "");

  auto file = SafetensorsFile::open(dir / "model.safetensors");
  ASSERT_TRUE(file) << file.error().describe();
  EXPECT_EQ(file->data_offset() % 8, 0u);
  EXPECT_EQ(file->tensors().size(), model.tensors.size());
  EXPECT_EQ(file->find("lm_head.weight") != nullptr, !config.tie_word_embeddings);
  const SafetensorsDtype expected_dtype = GetParam() == CheckpointDtype::F32   ? SafetensorsDtype::F32
                                          : GetParam() == CheckpointDtype::F16 ? SafetensorsDtype::F16
                                                                               : SafetensorsDtype::BF16;
  for (const auto& [name, tensor] : model.tensors) {
    const SafetensorsTensor* t = file->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, expected_dtype) << name;
    EXPECT_EQ(t->shape, tensor.shape) << name;
    size_t mismatches = 0;
    for (size_t i = 0; i < tensor.values.size(); ++i) mismatches += decode(*t, i) != tensor.values[i];
    EXPECT_EQ(mismatches, 0u) << name;
  }
  // PyTorch layout: [out_features, in_features].
  EXPECT_EQ(model.at("model.layers.1.self_attn.k_proj.weight").shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(model.at("model.layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(model.at("model.embed_tokens.weight").shape, (std::vector<int64_t>{32000, 64}));

  std::ifstream in(dir / "config.json");
  const auto json = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_EQ(json["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(json["num_key_value_heads"], 2);
  EXPECT_EQ(json["vocab_size"], 32000);
  EXPECT_EQ(json["tie_word_embeddings"], config.tie_word_embeddings);
  if (fs::exists(llama2_tokenizer_dir() / "tokenizer.json")) {
    EXPECT_EQ(fs::file_size(dir / "tokenizer.json"), fs::file_size(llama2_tokenizer_dir() / "tokenizer.json"));
    EXPECT_TRUE(fs::exists(dir / "tokenizer_config.json"));
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TinyCheckpoint,
                         testing::Values(CheckpointDtype::F32, CheckpointDtype::F16, CheckpointDtype::BF16),
                         [](const auto& param_info) {
                           return param_info.param == CheckpointDtype::F32 ? "F32" : param_info.param == CheckpointDtype::F16 ? "F16" : "BF16";
                         });

TEST(RopePermutation, PairsEachHeadsHalvesIntoAdjacentRows) {
  // 2 heads of dimension 4, one input column holding the row number.
  const std::vector<float> rows = {0, 1, 2, 3, 4, 5, 6, 7};
  // Head 0 rows (0, 1 | 2, 3): pairs (0, 2) and (1, 3) become adjacent.
  EXPECT_EQ(permute_rope_rows(rows, 2, 4, 1), (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
}

TEST(ReferenceForward, EarlierPositionsIgnoreLaterTokens) {
  TinyLlamaConfig config;
  config.vocab_size = 100;
  const TinyLlama model = make_tiny_llama(config);
  const std::vector<int32_t> tokens = {1, 17, 42, 99, 5, 63};
  const auto all = reference_llama_logits(model, tokens);
  ASSERT_EQ(all.size(), tokens.size());
  const auto prefix = reference_llama_logits(model, {tokens.begin(), tokens.begin() + 3});
  for (size_t t = 0; t < prefix.size(); ++t) EXPECT_EQ(prefix[t], all[t]) << "position " << t;
  // The logits do depend on the earlier tokens: changing token 1 moves position 4's logits.
  std::vector<int32_t> changed = tokens;
  changed[1] = 18;
  EXPECT_NE(reference_llama_logits(model, changed)[4], all[4]);
}

}  // namespace
}  // namespace ggufkit::test
