// "Did you mean": edit distance, the nearest name with its closeness bound, and the keys llama.cpp
// and gguf-py know (the generated table).
#include <gtest/gtest.h>

#include "ggufkit/conventions.h"
#include "ggufkit/nearest.h"

namespace ggufkit {
namespace {

TEST(Nearest, EditDistanceCountsTranspositionsAsOne) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "ab"), 2u);
  EXPECT_EQ(edit_distance("length", "lenght"), 1u);
  EXPECT_EQ(edit_distance("name", "nmae"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("info", "infos"), 1u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // optimal string alignment, not full Damerau
}

TEST(Nearest, NearestNameWithinAQuarterOfTheWord) {
  const std::vector<std::string> verbs = {"info", "dump", "get", "set", "rm", "rename", "quantize"};
  EXPECT_EQ(nearest_name("infos", verbs), "info");
  EXPECT_EQ(nearest_name("quantise", verbs), "quantize");
  EXPECT_EQ(nearest_name("renam", verbs), "rename");
  EXPECT_EQ(nearest_name("frobnicate", verbs), std::nullopt);
  EXPECT_EQ(nearest_name("xx", verbs), std::nullopt);
  EXPECT_EQ(nearest_name("gett", verbs), "get");
  EXPECT_EQ(nearest_name("xet", verbs), "get");  // a tie (1 from get and from set): the earlier
  const std::vector<std::string_view> presets = {"Q4_0", "Q4_K_S", "Q4_K_M", "Q5_K_M"};
  EXPECT_EQ(nearest_name("Q4KM", presets, {.fold = true}), "Q4_K_M");
  EXPECT_EQ(nearest_name("q4-k-m", presets, {.fold = true}), "Q4_K_M");
  EXPECT_EQ(nearest_name("Q4KM", presets), std::nullopt);  // 2 edits from Q4_K_M, the bound for 4 letters is 1
  EXPECT_EQ(did_you_mean(std::string("x")), " (did you mean x?)");
  EXPECT_EQ(did_you_mean(std::nullopt), "");
}

TEST(KnownKeys, TheKeysLlamaCppAndGgufPyName) {
  EXPECT_TRUE(is_known_key("general.name", "llama"));
  EXPECT_TRUE(is_known_key("llama.context_length", "llama"));
  EXPECT_FALSE(is_known_key("llama.context_length", ""));  // {arch} needs the architecture
  EXPECT_FALSE(is_known_key("qwen2.context_length", "llama"));
  EXPECT_TRUE(is_known_key("general.base_model.12.repo_url", "llama"));
  EXPECT_FALSE(is_known_key("general.base_model.x.repo_url", "llama"));
  EXPECT_TRUE(is_known_key("tokenizer.chat_template.tool_use", "llama"));
  EXPECT_TRUE(is_known_key("gemma3.dense_2_feat_in", "gemma3"));
  EXPECT_TRUE(is_known_key("split.count", ""));
  EXPECT_TRUE(is_known_key("adapter.lora.alpha", ""));
  EXPECT_FALSE(is_known_key("llama.context_lenght", "llama"));

  EXPECT_EQ(known_key_namespace("llama.context_lenght", "llama"), "llama");
  EXPECT_EQ(known_key_namespace("general.nmae", "llama"), "general");
  EXPECT_EQ(known_key_namespace("tokenizer.x", ""), "tokenizer");
  EXPECT_EQ(known_key_namespace("qwen2.x", "llama"), "");
  EXPECT_EQ(known_key_namespace("mine.x", "llama"), "");
  EXPECT_EQ(known_key_namespace("general", "llama"), "");

  EXPECT_EQ(nearest_known_key("llama.context_lenght", "llama"), "llama.context_length");
  EXPECT_EQ(nearest_known_key("general.nmae", "llama"), "general.name");
  EXPECT_EQ(nearest_known_key("tokenizer.chat_templte", "llama"), "tokenizer.chat_template");
  EXPECT_EQ(nearest_known_key("general.base_model.3.nmae", "llama"), "general.base_model.3.name");
  EXPECT_EQ(nearest_known_key("llama.rope.freq_bse", "llama"), "llama.rope.freq_base");
  EXPECT_EQ(nearest_known_key("llama.something_else", "llama"), std::nullopt);
}

}  // namespace
}  // namespace ggufkit
