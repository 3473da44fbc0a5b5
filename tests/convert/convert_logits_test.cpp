// Issue 7's evidence: a tiny random llama checkpoint written here as safetensors (config.json, the
// llama 2 tokenizer files) goes through `gguf convert DIR OUT.gguf --outtype f32`; llama.cpp
// (libllama through dlopen) loads the result and its logits at every position equal those of the
// float64 reference pass of HF's LlamaForCausalLM within 1e-3 relative; node-llama-cpp's
// JavaScript API loads it and predicts the reference's next tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>

#include "forward_check.h"
#include "ggufkit/reader.h"
#include "llama_logits_oracle.h"
#include "reference_forward.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 1e-3;

struct Variant {
  const char* name;
  CheckpointDtype dtype;
  bool tied;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class ConvertedTinyLlamaBase : public testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(llama2_tokenizer_dir() / "tokenizer.json")) {
      GTEST_SKIP() << "skipped: the llama 2 tokenizer files are not installed (" << llama2_tokenizer_dir().string()
                   << "; scripts/install-oracle.sh)";
    }
    dir_ = temp_dir("convert-logits");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Writes the checkpoint and converts it; the path of the GGUF file.
  fs::path convert(const TinyLlama& model) {
    const fs::path checkpoint = dir_ / "checkpoint";
    EXPECT_EQ(write_checkpoint(model, checkpoint), "");
    const fs::path out = dir_ / "tiny.gguf";
    const CommandResult r = run_gguf({"convert", checkpoint.string(), out.string(), "--outtype", "f32"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return out;
  }
  fs::path dir_;
};
class ConvertedTinyLlama : public ConvertedTinyLlamaBase, public testing::WithParamInterface<Variant> {};
using ConvertedTinyLlamaForNode = ConvertedTinyLlamaBase;

TEST_P(ConvertedTinyLlama, LlamaCppLogitsMatchTheReference) {
  std::string why;
  const LlamaLogitsOracle* oracle = LlamaLogitsOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
  TinyLlamaConfig config;
  config.dtype = GetParam().dtype;
  config.tie_word_embeddings = GetParam().tied;
  config.seed = 11;
  const TinyLlama model = make_tiny_llama(config);
  const fs::path gguf = convert(model);
  if (HasFailure()) return;

  const std::vector<int32_t> tokens = test_tokens(12, 3);
  const auto reference = reference_llama_logits(model, tokens);
  std::string error;
  const auto actual = oracle->logits(gguf.string(), tokens, &error);
  ASSERT_EQ(actual.size(), tokens.size()) << error;
  expect_logits_near_reference(actual, reference, kRelativeTolerance, std::string("converted ") + GetParam().name);
}

// Before any logits: every tensor of the converted file is the one llama.cpp's layout wants, the
// hand-laid file's (same name, F32, same shape, same bytes; q and k permuted), whatever the order.
// A layout mistake shows here by tensor name, where the logits test only says the numbers differ.
TEST_P(ConvertedTinyLlama, TensorsAreThoseOfTheHandLaidLayout) {
  GGUFKIT_REQUIRE_SHARED();
  TinyLlamaConfig config;
  config.dtype = GetParam().dtype;
  config.tie_word_embeddings = GetParam().tied;
  config.seed = 11;
  const TinyLlama model = make_tiny_llama(config);
  const fs::path gguf = convert(model);
  if (HasFailure()) return;
  const fs::path expected_path = dir_ / "by-hand.gguf";
  ASSERT_EQ(write_llama_gguf_by_hand(model, llama_spm_vocab_path(), expected_path), "");
  auto converted = GgufFile::open(gguf);
  ASSERT_TRUE(converted) << converted.error().describe();
  auto expected = GgufFile::open(expected_path);
  ASSERT_TRUE(expected) << expected.error().describe();
  EXPECT_EQ(converted->tensors().size(), expected->tensors().size());
  for (const TensorInfo& want : expected->tensors()) {
    const TensorInfo* got = converted->find_tensor(want.name);
    ASSERT_NE(got, nullptr) << "the converted file lacks " << want.name;
    EXPECT_EQ(got->type, TensorType::F32) << want.name;
    EXPECT_EQ(got->n_dims, want.n_dims) << want.name;
    EXPECT_EQ(got->ne, want.ne) << want.name;
    const auto a = converted->tensor_data(*got);
    const auto b = expected->tensor_data(want);
    EXPECT_TRUE(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin())) << want.name << ": the bytes differ";
  }
  for (const char* key : {"general.architecture", "llama.block_count", "llama.embedding_length", "llama.attention.head_count",
                          "llama.attention.head_count_kv", "llama.rope.dimension_count", "llama.feed_forward_length"}) {
    const auto got = converted->get(key);
    const auto want = expected->get(key);
    ASSERT_TRUE(got.has_value()) << "the converted file lacks " << key;
    EXPECT_TRUE(std::ranges::equal(got->encoded(), want->encoded())) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvertedTinyLlama,
                         testing::Values(Variant{"F32", CheckpointDtype::F32, false},
                                         Variant{"BF16_tied", CheckpointDtype::BF16, true},
                                         Variant{"F16", CheckpointDtype::F16, false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// One variant only (node's start-up costs seconds): the BF16 checkpoint with tied embeddings, whose
// GGUF has no output.weight.
TEST_F(ConvertedTinyLlamaForNode, NodeLlamaCppLoadsItAndPredictsTheReferenceTokens) {
  if (const auto missing = node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  TinyLlamaConfig config;
  config.dtype = CheckpointDtype::BF16;
  config.tie_word_embeddings = true;
  config.seed = 11;
  const TinyLlama model = make_tiny_llama(config);
  const fs::path gguf = convert(model);
  if (HasFailure()) return;

  const std::vector<int32_t> tokens = test_tokens(8, 5);
  const NextTokens next = run_node_next_tokens(gguf, tokens);
  const NodeRun& run = next.run;
  if (run.status == 3) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported";
  ASSERT_EQ(run.status, 0) << run.out;
  ASSERT_EQ(next.greedy.size(), tokens.size()) << run.out;
  const auto reference = reference_llama_logits(model, tokens);
  int compared = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<double> sorted = reference[t];
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] < 1e-2 * std::fabs(sorted[0])) continue;  // a near tie: either is right
    const auto best = std::max_element(reference[t].begin(), reference[t].end()) - reference[t].begin();
    EXPECT_EQ(next.greedy[t], best) << "position " << t;
    ++compared;
  }
  EXPECT_GE(compared, 4);
}

}  // namespace
}  // namespace ggufkit::test
