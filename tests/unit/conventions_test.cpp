// ModelMetadata: typed access to the standard keys of a small file built byte by byte.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/conventions.h"
#include "ggufkit/reader.h"
#include "raw_gguf.h"

namespace ggufkit {
namespace {

using test::RawGguf;
namespace vt = test::gguf_type;

// A llama-like header: scalar hyperparameters of several integer widths, a uniform and a
// non-uniform per-layer array, chat templates and a tokenizer.
RawGguf small_model() {
  RawGguf g;
  g.header(3, 0, 29);
  g.kv_string("general.architecture", "llama");
  g.kv_string("general.name", "Tiny Test");
  g.kv_string("general.type", "model");
  g.kv_u32("general.file_type", 15);
  g.kv_u32("general.quantization_version", 2);
  g.kv_u32("llama.context_length", 4096);
  g.kv_u64("llama.embedding_length", 256);    // uint64 where llama.cpp writes uint32
  g.kv_i32("llama.block_count", 3);           // signed, as some converters write
  g.kv_u32("llama.feed_forward_length", 688);
  g.kv_u32_array("llama.attention.head_count", {8, 8, 8});      // per layer, all equal
  g.kv_i32_array("llama.attention.head_count_kv", {4, 2, 4});   // per layer, different
  g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.kv_f64("llama.rope.freq_base", 500000.0);
  g.kv_u32("llama.rope.dimension_count", 32);
  g.kv_string("llama.rope.scaling.type", "linear");
  g.kv_f32("llama.rope.scaling.factor", 2.0f);
  g.kv_u32("llama.vocab_size", 5);
  g.kv_u32("mistral.context_length", 999);  // another architecture's key: never consulted
  g.kv_string("tokenizer.ggml.model", "llama");
  g.kv_string("tokenizer.ggml.pre", "default");
  g.kv_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81hi", std::string_view("a\0b", 3)});
  g.kv_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  g.kv_f32_array("tokenizer.ggml.scores", {0.0f, 0.0f, 0.0f, -1.5f, -2.5f});
  g.kv_u32("tokenizer.ggml.bos_token_id", 1);
  g.kv_i32("tokenizer.ggml.eos_token_id", 2);
  g.kv_bool("tokenizer.ggml.add_bos_token", 1);
  g.kv_bool("tokenizer.ggml.add_eos_token", 0);
  g.kv_string("tokenizer.chat_template", "{{ messages }}");
  g.kv_string("tokenizer.chat_template.tool_use", "{{ tools }}");
  return g;
}

class ModelMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = GgufFile::parse(bytes_.span());
    ASSERT_TRUE(f) << f.error().describe();
    file_ = std::make_unique<GgufFile>(std::move(f).value());
  }
  ModelMetadata meta() const { return ModelMetadata(*file_); }

  RawGguf bytes_ = small_model();
  std::unique_ptr<GgufFile> file_;
};

TEST_F(ModelMetadataTest, GeneralKeys) {
  const ModelMetadata m = meta();
  EXPECT_EQ(&m.file(), file_.get());
  EXPECT_EQ(m.architecture(), "llama");
  EXPECT_EQ(m.name(), "Tiny Test");
  EXPECT_EQ(m.type(), "model");
  EXPECT_EQ(m.file_type(), 15u);
  EXPECT_EQ(m.quantization_version(), 2u);
}

TEST_F(ModelMetadataTest, ArchitecturePrefixedKeys) {
  const ModelMetadata m = meta();
  EXPECT_EQ(m.arch_key("context_length"), "llama.context_length");
  EXPECT_EQ(m.context_length(), 4096u);   // not mistral's 999
  EXPECT_EQ(m.embedding_length(), 256u);  // from a uint64
  EXPECT_EQ(m.block_count(), 3u);         // from an int32
  EXPECT_EQ(m.feed_forward_length(), 688u);
  EXPECT_EQ(m.rope_dimension_count(), 32u);
  EXPECT_EQ(m.vocab_size(), 5u);
  EXPECT_FLOAT_EQ(static_cast<float>(*m.rms_norm_epsilon()), 1e-5f);
  EXPECT_EQ(m.rope_freq_base(), 500000.0);
  EXPECT_EQ(m.rope_scaling_type(), "linear");
  EXPECT_EQ(m.rope_scaling_factor(), 2.0);
}

TEST_F(ModelMetadataTest, AbsentKeysAreEmpty) {
  const ModelMetadata m = meta();
  EXPECT_FALSE(m.expert_count());
  EXPECT_FALSE(m.expert_used_count());
  EXPECT_FALSE(m.key_length());
  EXPECT_FALSE(m.value_length());
  EXPECT_FALSE(m.rope_scaling_original_context_length());
  EXPECT_FALSE(m.unknown_token_id());
  EXPECT_FALSE(m.padding_token_id());
  EXPECT_FALSE(m.separator_token_id());
  EXPECT_FALSE(m.eot_token_id());
  EXPECT_FALSE(m.merges());
  EXPECT_FALSE(m.chat_template("rag"));
}

TEST_F(ModelMetadataTest, PerLayerArrays) {
  const ModelMetadata m = meta();
  EXPECT_EQ(m.head_count(), 8u) << "every layer has 8 heads";
  EXPECT_FALSE(m.head_count_kv()) << "layers disagree: no single value";
}

TEST_F(ModelMetadataTest, TypeMismatchesAreEmpty) {
  const ModelMetadata m = meta();
  EXPECT_FALSE(m.uint("general.name"));
  EXPECT_FALSE(m.string("llama.context_length"));
  EXPECT_FALSE(m.boolean("llama.context_length"));
  EXPECT_FALSE(m.number("tokenizer.ggml.model"));
  EXPECT_FALSE(m.arch_string("context_length"));
  EXPECT_EQ(m.arch_number("context_length"), 4096.0);
  EXPECT_FALSE(m.arch_uint("rope.freq_base")) << "a float is not an integer";
}

TEST_F(ModelMetadataTest, ChatTemplates) {
  const ModelMetadata m = meta();
  EXPECT_EQ(m.chat_template(), "{{ messages }}");
  EXPECT_EQ(m.chat_template("tool_use"), "{{ tools }}");
}

TEST_F(ModelMetadataTest, Tokenizer) {
  const ModelMetadata m = meta();
  EXPECT_EQ(m.tokenizer_model(), "llama");
  EXPECT_EQ(m.tokenizer_pre(), "default");
  EXPECT_EQ(m.bos_token_id(), 1u);
  EXPECT_EQ(m.eos_token_id(), 2u);
  EXPECT_EQ(m.add_bos_token(), true);
  EXPECT_EQ(m.add_eos_token(), false);

  const auto tokens = m.tokens();
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 5u);
  const std::vector<std::string_view> got(tokens->strings().begin(), tokens->strings().end());
  EXPECT_EQ(got, (std::vector<std::string_view>{"<unk>", "<s>", "</s>", "\xE2\x96\x81hi", std::string_view("a\0b", 3)}));

  const auto types = m.token_types();
  ASSERT_TRUE(types);
  std::vector<int32_t> type_ids;
  ASSERT_TRUE(types->copy_to(type_ids));
  EXPECT_EQ(type_ids, (std::vector<int32_t>{2, 3, 3, 1, 1}));

  const auto scores = m.scores();
  ASSERT_TRUE(scores);
  EXPECT_EQ(scores->get<float>(4), -2.5f);
}

TEST(ModelMetadata, NoArchitectureMeansNoArchitectureKeys) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("llama.context_length", 4096);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const ModelMetadata m(*f);
  EXPECT_FALSE(m.architecture());
  EXPECT_FALSE(m.arch_key("context_length"));
  EXPECT_FALSE(m.context_length());
}

TEST(ModelMetadata, EmptyPerLayerArrayHasNoValue) {
  RawGguf g;
  g.header(3, 0, 2).kv_string("general.architecture", "x").kv_u32_array("x.attention.head_count", {});
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_FALSE(ModelMetadata(*f).head_count());
}

TEST(ModelMetadata, PerLayerArrayWithANegativeEntryHasNoValue) {
  RawGguf g;
  g.header(3, 0, 2).kv_string("general.architecture", "x").kv_i32_array("x.attention.head_count", {-1, -1});
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_FALSE(ModelMetadata(*f).head_count());
}

TEST(ModelMetadata, BoolByteTwoIsTrue) {
  RawGguf g;
  g.header(3, 0, 1).kv_bool("tokenizer.ggml.add_bos_token", 2);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(ModelMetadata(*f).add_bos_token(), true);
}

TEST(ModelMetadata, KeyConstantsAreLlamaCppSpellings) {
  EXPECT_EQ(keys::kSepId, "tokenizer.ggml.seperator_token_id");  // llama.cpp's misspelling, kept
  EXPECT_EQ(keys::kChatTemplate, "tokenizer.chat_template");
  EXPECT_EQ(keys::kUnkId, "tokenizer.ggml.unknown_token_id");
}

}  // namespace
}  // namespace ggufkit
