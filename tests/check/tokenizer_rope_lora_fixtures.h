// Small models for the tokenizer, RoPE and LoRA check tests: a correct SentencePiece model, a
// correct BPE model, a base model with an adapter for it; each test breaks one thing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/check.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace ggufkit::test {

inline constexpr int64_t kEmbedding = 64;   // 4 heads of 16
inline constexpr uint32_t kHeads = 4;

// A string array value from a vector of strings.
inline MetadataValue strings(const std::vector<std::string>& values) { return MetadataValue::string_array(values); }

inline void set(GgufBuilder& b, std::string_view key, MetadataValue value) {
  ASSERT_TRUE(b.set(key, std::move(value))) << key;
}

inline void add_zeros(GgufBuilder& b, std::string_view name, std::vector<int64_t> shape) {
  int64_t elements = 1;
  for (const int64_t n : shape) elements *= n;
  ASSERT_TRUE(b.add_tensor(name, TensorType::F32, shape, std::vector<std::byte>(static_cast<size_t>(elements) * 4)))
      << name;
}

// "llama" architecture keys that make a consistent model: context 2048, 4 heads of 16, full rotation.
inline void add_llama_hparams(GgufBuilder& b, std::string_view arch = "llama") {
  const std::string a(arch);
  set(b, "general.architecture", MetadataValue::string(arch));
  set(b, a + ".context_length", MetadataValue::of(uint32_t{2048}));
  set(b, a + ".embedding_length", MetadataValue::of(static_cast<uint32_t>(kEmbedding)));
  set(b, a + ".block_count", MetadataValue::of(uint32_t{1}));
  set(b, a + ".attention.head_count", MetadataValue::of(kHeads));
  set(b, a + ".rope.dimension_count", MetadataValue::of(uint32_t{16}));
  set(b, a + ".rope.freq_base", MetadataValue::of(10000.0f));
}

// The SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then "▁w<i>" words.
struct SpmVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
};
inline SpmVocab spm_vocab(size_t words = 40) {
  SpmVocab v;
  auto add = [&](std::string text, int32_t type) {
    v.scores.push_back(-static_cast<float>(v.tokens.size()));
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
  };
  add("<unk>", 2);
  add("<s>", 3);
  add("</s>", 3);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int i = 0; i < 256; ++i) add(std::string("<0x") + kHex[i >> 4] + kHex[i & 15] + ">", 6);
  for (size_t i = 0; i < words; ++i) add("\xE2\x96\x81w" + std::to_string(i), 1);
  return v;
}

inline void set_vocab(GgufBuilder& b, const SpmVocab& v) {
  set(b, "tokenizer.ggml.tokens", strings(v.tokens));
  set(b, "tokenizer.ggml.token_type", MetadataValue::array(v.types));
  set(b, "tokenizer.ggml.scores", MetadataValue::array(v.scores));
}

// A correct llama model with a SentencePiece vocabulary and embedding/output tensors to match.
inline GgufBuilder spm_model(const SpmVocab& v = spm_vocab()) {
  GgufBuilder b;
  add_llama_hparams(b);
  set(b, "general.name", MetadataValue::string("tiny-base"));
  set(b, "tokenizer.ggml.model", MetadataValue::string("llama"));
  set(b, "tokenizer.ggml.pre", MetadataValue::string("default"));
  set_vocab(b, v);
  set(b, "tokenizer.ggml.bos_token_id", MetadataValue::of(uint32_t{1}));
  set(b, "tokenizer.ggml.eos_token_id", MetadataValue::of(uint32_t{2}));
  set(b, "tokenizer.ggml.unknown_token_id", MetadataValue::of(uint32_t{0}));
  const auto n = static_cast<int64_t>(v.tokens.size());
  add_zeros(b, "token_embd.weight", {kEmbedding, n});
  add_zeros(b, "output.weight", {kEmbedding, n});
  return b;
}

// A correct BPE (gpt2) vocabulary file without tensors.
inline GgufBuilder bpe_model() {
  GgufBuilder b;
  add_llama_hparams(b);
  set(b, "tokenizer.ggml.model", MetadataValue::string("gpt2"));
  set(b, "tokenizer.ggml.pre", MetadataValue::string("llama-bpe"));
  set(b, "tokenizer.ggml.tokens", strings({"a", "b", "c", "ab", "abc", "<|end|>"}));
  set(b, "tokenizer.ggml.token_type", MetadataValue::array(std::vector<int32_t>{1, 1, 1, 1, 1, 3}));
  set(b, "tokenizer.ggml.merges", strings({"a b", "ab c"}));
  set(b, "tokenizer.ggml.eos_token_id", MetadataValue::of(uint32_t{5}));
  return b;
}

// The directories write_model made (one per test), removed when the test program ends.
struct TempDirs {
  std::map<std::string, std::filesystem::path> by_test;
  ~TempDirs() {
    std::error_code ignored;
    for (const auto& [test, dir] : by_test) std::filesystem::remove_all(dir, ignored);
  }
};
inline TempDirs temp_dirs;

// Writes the builder to a file in the running test's own directory.
inline std::filesystem::path write_model(const GgufBuilder& b, const std::string& suffix = "model") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto name = std::string("check-") + info->test_suite_name() + "-" + info->name();
  auto [it, is_new] = temp_dirs.by_test.try_emplace(name);
  if (is_new) it->second = temp_dir(name);
  const auto& dir = it->second;
  const auto path = dir / (suffix + ".gguf");
  WriteOptions options;
  options.sync = false;
  EXPECT_TRUE(b.write_file(path, options));
  return path;
}

inline CheckReport check_model(const GgufBuilder& b, const CheckOptions& options = {}) {
  auto report = check_file(write_model(b), options);
  EXPECT_TRUE(report) << (report ? "" : report.error().message);
  return report ? std::move(report).value() : CheckReport{};
}

// The findings whose code starts with `prefix` ("tokenizer.", "rope.", "lora.").
inline std::vector<Finding> findings_of(const CheckReport& report, std::string_view prefix) {
  std::vector<Finding> out;
  for (const Finding& f : report.findings) {
    if (f.code.starts_with(prefix)) out.push_back(f);
  }
  return out;
}

inline std::string describe_all(const std::vector<Finding>& findings) {
  std::string s;
  for (const Finding& f : findings) s += "\n  " + f.describe();
  return s;
}

// Exactly one finding under `prefix`, of this code and severity; returns it.
inline Finding expect_single(const CheckReport& report, std::string_view prefix, std::string_view code,
                             Severity severity) {
  const auto found = findings_of(report, prefix);
  EXPECT_EQ(found.size(), 1u) << describe_all(found);
  if (found.empty()) return {};
  EXPECT_EQ(found[0].code, code) << describe_all(found);
  EXPECT_EQ(found[0].severity, severity) << describe_all(found);
  EXPECT_FALSE(found[0].message.empty());
  return found[0];
}

inline void expect_none(const CheckReport& report, std::string_view prefix) {
  const auto found = findings_of(report, prefix);
  EXPECT_TRUE(found.empty()) << describe_all(found);
}

}  // namespace ggufkit::test
