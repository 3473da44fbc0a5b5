// llama.cpp's layout of a Hugging Face llama, documented without the converter: a GGUF written by
// hand with our writer from the tiny checkpoint's weights (q and k rows permuted as
// convert_hf_to_gguf.py does, llama.* keys, the llama 2 vocabulary's tokenizer keys) gives, in
// llama.cpp (libllama through dlopen), the logits of the float64 reference pass of HF's
// LlamaForCausalLM within 1e-3 relative, at every position; without the permutation it does not.
// node-llama-cpp's JavaScript API loads the same file and predicts the reference's next tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>

#include "forward_check.h"
#include "llama_logits_oracle.h"
#include "reference_forward.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

// The bound: 1e-3 relative. Measured both as max |diff| / max |ref| over all logits and
// per value where |ref| is at least 1% of max |ref|.
constexpr double kRelativeTolerance = 1e-3;

struct Variant {
  const char* name;
  CheckpointDtype dtype;
  bool tied;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class LlamaCppLayout : public testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    std::string why;
    oracle_ = LlamaLogitsOracle::get(&why);
    if (oracle_ == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
    GGUFKIT_REQUIRE_SHARED();
    dir_ = temp_dir("forward-oracle");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  const LlamaLogitsOracle* oracle_ = nullptr;
  fs::path dir_;
};

TEST_P(LlamaCppLayout, LogitsOfEveryPositionMatchTheReference) {
  TinyLlamaConfig config;
  config.dtype = GetParam().dtype;
  config.tie_word_embeddings = GetParam().tied;
  config.seed = 7;
  const TinyLlama model = make_tiny_llama(config);
  const fs::path gguf = dir_ / "tiny.gguf";
  ASSERT_EQ(write_llama_gguf_by_hand(model, llama_spm_vocab_path(), gguf), "");

  const std::vector<int32_t> tokens = test_tokens(12, 3);
  const auto reference = reference_llama_logits(model, tokens);
  std::string error;
  const auto actual = oracle_->logits(gguf.string(), tokens, &error);
  ASSERT_EQ(actual.size(), tokens.size()) << error;
  expect_logits_near_reference(actual, reference, kRelativeTolerance, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(Variants, LlamaCppLayout,
                         testing::Values(Variant{"F32", CheckpointDtype::F32, false},
                                         Variant{"F32_tied", CheckpointDtype::F32, true},
                                         Variant{"BF16", CheckpointDtype::BF16, false},
                                         Variant{"F16_tied", CheckpointDtype::F16, true}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The comparison can fail: the same weights without the rope permutation of q and k (llama.cpp
// would rotate the wrong pairs) are far outside the tolerance after the first position (position 0
// is not rotated, so it agrees).
TEST(LlamaCppLayoutControl, WithoutThePermutationTheLogitsDiffer) {
  std::string why;
  const LlamaLogitsOracle* oracle = LlamaLogitsOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
  GGUFKIT_REQUIRE_SHARED();
  TinyLlamaConfig config;
  config.seed = 7;
  TinyLlama model = make_tiny_llama(config);
  const std::vector<int32_t> tokens = test_tokens(12, 3);
  const auto reference = reference_llama_logits(model, tokens);
  // Undo the permutation the writer applies by applying its inverse first.
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (const auto& [proj, heads] : {std::pair{"q_proj", config.num_attention_heads}, std::pair{"k_proj", config.num_key_value_heads}}) {
      HfTensor& w = model.tensors.at("model.layers." + std::to_string(layer) + ".self_attn." + proj + ".weight");
      // The permutation is an involution only for head_dim 4; invert it by searching its cycle.
      std::vector<float> inverse = w.values;
      std::vector<float> forward = permute_rope_rows(w.values, heads, config.head_dim(), config.hidden_size);
      while (forward != w.values) {
        inverse = forward;
        forward = permute_rope_rows(forward, heads, config.head_dim(), config.hidden_size);
      }
      w.values = inverse;
    }
  }
  const fs::path dir = temp_dir("forward-oracle-control");
  ASSERT_EQ(write_llama_gguf_by_hand(model, llama_spm_vocab_path(), dir / "unpermuted.gguf"), "");
  std::string error;
  const auto actual = oracle->logits((dir / "unpermuted.gguf").string(), tokens, &error);
  ASSERT_EQ(actual.size(), tokens.size()) << error;
  EXPECT_LE(logits_distance(actual[0], reference[0]).scaled, kRelativeTolerance);
  const double last_scaled = logits_distance(actual.back(), reference.back()).scaled;
  EXPECT_GT(last_scaled, 100 * kRelativeTolerance);
  std::cout << "[ measured ] unpermuted q, k: last position max|diff|/max|ref| " << last_scaled << "\n";
  fs::remove_all(dir);
}

// node-llama-cpp (getLlama, loadModel, createContext, controlledEvaluate) loads the hand-written
// file and its greedy next token at each position is the reference's most likely one (where the
// reference's top two are clearly apart).
TEST(NodeLlamaCpp, LoadsTheFileAndPredictsTheReferenceTokens) {
  if (const auto missing = node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  GGUFKIT_REQUIRE_SHARED();
  TinyLlamaConfig config;
  config.seed = 7;
  const TinyLlama model = make_tiny_llama(config);
  const fs::path dir = temp_dir("forward-node");
  ASSERT_EQ(write_llama_gguf_by_hand(model, llama_spm_vocab_path(), dir / "tiny.gguf"), "");
  const std::vector<int32_t> tokens = test_tokens(8, 5);
  const NextTokens next = run_node_next_tokens(dir / "tiny.gguf", tokens);
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
  std::cout << "[ measured ] node-llama-cpp's greedy tokens agree at " << compared << " of " << tokens.size()
            << " positions (the others are near ties)\n";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit::test
