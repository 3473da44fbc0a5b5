// The tokenizer and RoPE passes on the shared corpus: real llama.cpp vocabularies and the
// tiny-llama model in every type. llama.cpp loads all of them, so neither pass may report an error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "check/check_internal.h"
#include "tokenizer_rope_lora_fixtures.h"

namespace ggufkit {
namespace {

TEST(CheckTokenizerRopeCorpus, NoTokenizerOrRopeErrorsOnTheCorpus) {
  GGUFKIT_REQUIRE_SHARED();
  const auto files = test::corpus_files();
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    const auto report = check_file(path);
    ASSERT_TRUE(report) << path;
    for (const Finding& f : report->findings) {
      if (!f.code.starts_with("tokenizer.") && !f.code.starts_with("rope.")) continue;
      EXPECT_NE(f.severity, Severity::error) << path << ": " << f.describe();
    }
  }
}

TEST(CheckTokenizerRopeCorpus, ChatTemplatesOfTheCorpusAreFingerprinted) {
  GGUFKIT_REQUIRE_SHARED();
  for (const auto& path : test::corpus_files()) {
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file) << path;
    const auto report = check_file(path);
    ASSERT_TRUE(report) << path;
    const bool has_template = file->find("tokenizer.chat_template") != nullptr;
    const auto it = std::find_if(report->findings.begin(), report->findings.end(),
                                 [](const Finding& f) { return f.code == "tokenizer.chat_template"; });
    EXPECT_EQ(it != report->findings.end(), has_template) << path;
    if (has_template && it != report->findings.end()) {
      EXPECT_EQ(it->offset, file->find("tokenizer.chat_template")->offset) << path;
    }
  }
}

// The tokenizer pass alone on the largest vocabulary, timed (printed, not asserted).
TEST(CheckTokenizerRopeCorpus, TokenizerPassOnTheLargestVocabulary) {
  GGUFKIT_REQUIRE_SHARED();
  std::filesystem::path largest;
  uintmax_t largest_size = 0;
  for (const auto& path : test::corpus_files()) {
    if (path.parent_path().filename() != "vocab") continue;
    const auto size = std::filesystem::file_size(path);
    if (size > largest_size) {
      largest_size = size;
      largest = path;
    }
  }
  ASSERT_FALSE(largest.empty());
  auto file = GgufFile::open(largest);
  ASSERT_TRUE(file);
  check::ModelUnderCheck model;
  model.metadata = &*file;
  for (const TensorInfo& t : file->tensors()) model.tensors.push_back(&t);

  // The best of five runs: the machine is shared.
  double best_ms = 0;
  for (int run = 0; run < 5; ++run) {
    check::Findings findings;
    const auto start = std::chrono::steady_clock::now();
    check::check_tokenizer(model, findings);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    best_ms = run == 0 ? ms : std::min(best_ms, ms);
    for (const Finding& f : findings.all()) EXPECT_NE(f.severity, Severity::error) << f.describe();
  }
  const auto tokens = file->get("tokenizer.ggml.tokens")->as_array()->size();
  std::printf("tokenizer pass on %s (%llu tokens): %.1f ms (best of 5)\n", largest.filename().c_str(),
              static_cast<unsigned long long>(tokens), best_ms);
}

}  // namespace
}  // namespace ggufkit
