// The evidence that `gguf convert` computes, for each model family beyond llama, what the Hugging
// Face model computes: a tiny random checkpoint of the family (family_checkpoint.h: the class's
// tensor names and shapes, its config.json, its tokenizer files) goes through
// `gguf convert DIR OUT.gguf --outtype f32`; llama.cpp (libllama through dlopen) loads the result
// and its logits at every position of a 12-token sequence equal those of the float64 reference
// pass of the HF class (family_reference.h) within 1e-3 relative (Gemma 2/3: see tolerance_for).
// The families: Gemma, Gemma 2, Gemma 3 (Gemma3ForCausalLM and Gemma3ForConditionalGeneration's
// text part), Phi-3 (Phi-3-mini-4k, longrope Phi-3-mini-128k, partial-rotary Phi-4-mini), Granite,
// OLMo 2, SmolLM3, Mistral Small 3.1 (Mistral3ForConditionalGeneration's text part), Ministral 3
// (yarn rope_parameters; Ministral3ShortOriginalContext makes its yarn and llama 4 scaling bite),
// and the mixtures of experts Mixtral, Qwen2-MoE and Qwen3-MoE (experts one tensor each, or fused as
// transformers 5 stores them), whose reference routing is checked to be clear-cut first (see
// check_routing).
//
// Two more tests per family make a failure say where it comes from:
//   HandLaidFamily: the same checkpoint laid out by hand as convert_hf_to_gguf.py lays it out
//     (family_layout.h) gives the reference's logits in llama.cpp: the reference and the test
//     model are right, whatever the converter does;
//   ConvertedFamily.TensorsAreThoseOfTheHandLaidLayout: the converted file's tensors, one by one,
//     are the hand-laid file's (name, F32, shape, bytes), and so are the keys llama.cpp reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "family_checkpoint.h"
#include "family_layout.h"
#include "family_reference.h"
#include "ggufkit/reader.h"
#include "llama_logits_oracle.h"
#include "reference_forward.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {

void PrintTo(TinyFamily family, std::ostream* os) { *os << family_id(family); }

namespace {

namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 1e-3;
constexpr size_t kTokens = 12;
constexpr uint32_t kTokenSeed = 3;

// How close llama.cpp's logits must be to the reference: max|diff| / max|ref| within `scaled`, and
// max |diff| / |ref| over the values whose |ref| is at least `floor` of max|ref| within `per_value`.
struct Tolerance {
  double scaled;
  double per_value;
  double floor;
};

// 1e-3 for both, as the llama test, except where llama.cpp's CPU GELU is in the way. It rounds the
// GELU's input and output to half precision (ggml_vec_geglu_f32, GGML_GELU_FP16); the reference
// then evaluates the GELU the same way (GeluEvaluation::ggml_cpu_fp16_table), which is exact for
// Gemma (1e-7 measured), but an input that rounds to the other half value in llama.cpp's float32
// than in float64 changes a GELU output by one half ulp, and Gemma 2/3's post-norms scale each
// branch output back to unit size, so these flips reach the logits: up to 3e-4 of max|logit| and
// 1.7e-3 of a logit above 10% of the max (measured over 12 seeds of each variant; 1.6e-2 on the
// smallest logits; against the exact-GELU reference up to 9e-4 of max|logit|). Any semantic
// mistake moves the logits by more than 1e-2 (FamilyReference.EveryKnobOfTheTinyCheckpointsMatters).
Tolerance tolerance_for(TinyFamily family) {
  switch (family) {
    case TinyFamily::gemma2:
    case TinyFamily::gemma3:
    case TinyFamily::gemma3_vision:
    case TinyFamily::gemma3_vision_new_names: return {kRelativeTolerance, 5e-3, 0.1};
    default: return {kRelativeTolerance, kRelativeTolerance, 0.01};
  }
}

// Every position's logits against the reference. On failure, one message naming the family,
// which positions differ and by how much, and the semantics the reference used. `exact` is the
// reference with HF's exact GELU, reported alongside.
void expect_family_logits(const std::vector<std::vector<float>>& actual, const std::vector<std::vector<double>>& reference,
                          const std::vector<std::vector<double>>& exact, const TinyHfModel& model, const std::string& what) {
  const std::string label = family_label(model.family) + ", " + what;
  ASSERT_EQ(actual.size(), reference.size()) << label << ": llama.cpp gave logits for " << actual.size() << " positions, not "
                                             << reference.size();
  const Tolerance tol = tolerance_for(model.family);
  double worst_scaled = 0, worst_relative = 0, worst_exact = 0;
  std::ostringstream bad;
  int n_bad = 0;
  for (size_t t = 0; t < actual.size(); ++t) {
    const LogitsDistance d = logits_distance(actual[t], reference[t], tol.floor);
    worst_scaled = std::max(worst_scaled, d.scaled);
    worst_relative = std::max(worst_relative, d.max_relative);
    worst_exact = std::max(worst_exact, logits_distance(actual[t], exact[t], tol.floor).scaled);
    if (!(d.scaled <= tol.scaled && d.max_relative <= tol.per_value)) {
      ++n_bad;
      bad << "\n  position " << t << ": " << describe(d);
    }
  }
  std::cout << "[ measured ] " << label << ": max|diff|/max|ref| " << worst_scaled << ", per-value relative " << worst_relative
            << " (values above " << tol.floor << " of the max) over " << actual.size() << " positions";
  if (hf_uses_gelu(model.config)) std::cout << "; against the exact-GELU reference " << worst_exact;
  std::cout << "\n";
  EXPECT_EQ(n_bad, 0) << label << ": llama.cpp's logits differ from the Hugging Face reference at " << n_bad << " of "
                      << actual.size() << " positions (tolerance " << tol.scaled << " of max|logit|, " << tol.per_value
                      << " per value):" << bad.str() << "\n  the reference computed: " << describe_hf_semantics(model.config);
}

// A mixture of experts' reference routing must be clear-cut: the probability of the last expert a
// position takes at least kMinRoutingMargin above that of the first one it leaves out, so that
// llama.cpp's float32 router takes the same experts and a logits difference means a conversion or
// semantic difference, never a coin toss. (llama.cpp's logits of these checkpoints are within
// 3e-7 of the float64 reference's, its router probabilities likewise: 1e-5 is a hundredfold
// margin; the tiny checkpoints' smallest gaps are 1.3e-4 to 4e-3.) Reports how many of the
// experts each layer used.
constexpr double kMinRoutingMargin = 1e-5;

void check_routing(const ReferenceRouting& routing, const TinyHfModel& model) {
  if (routing.chosen.empty()) return;
  std::cout << "[ measured ] " << family_label(model.family) << ": experts used per layer:";
  for (const auto& layer : routing.chosen) {
    std::set<int64_t> used;
    for (const auto& position : layer) used.insert(position.begin(), position.end());
    std::cout << " " << used.size();
  }
  std::cout << "; smallest routing margin " << routing.min_margin << "\n";
  EXPECT_GE(routing.min_margin, kMinRoutingMargin)
      << family_label(model.family) << ": the reference's choice of experts is nearly tied at layer " << routing.min_margin_layer
      << ", position " << routing.min_margin_position << " (probability gap " << routing.min_margin
      << "): llama.cpp may take another expert; change the checkpoint's seed";
}

// The logits of llama.cpp for `gguf` against both references.
void check_logits(const LlamaLogitsOracle& oracle, const std::filesystem::path& gguf, const TinyHfModel& model,
                  const std::string& what) {
  const std::vector<int32_t> tokens = model.test_tokens(kTokens, kTokenSeed);
  ReferenceRouting routing;
  const auto reference = reference_family_logits(model, tokens, GeluEvaluation::ggml_cpu_fp16_table, &routing);
  check_routing(routing, model);
  const auto exact = hf_uses_gelu(model.config) ? reference_family_logits(model, tokens) : reference;
  std::string error;
  const auto actual = oracle.logits(gguf.string(), tokens, &error);
  ASSERT_EQ(actual.size(), tokens.size()) << family_label(model.family) << ": llama.cpp cannot run the file " << what << ": " << error;
  expect_family_logits(actual, reference, exact, model, what);
}

class FamilyTest : public testing::TestWithParam<TinyFamily> {
 protected:
  void SetUp() override {
    model_ = make_tiny_family(GetParam());
    if (const std::string missing = model_.tokenizer_missing(); !missing.empty()) GTEST_SKIP() << "skipped: " << missing;
    dir_ = temp_dir("family-logits-" + family_id(GetParam()));
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string label() const { return family_label(GetParam()); }

  // Writes the checkpoint and converts it; the GGUF path, or empty after a failure (reported).
  fs::path convert() {
    const fs::path checkpoint = dir_ / "checkpoint";
    const std::string written = write_hf_checkpoint(model_, checkpoint);
    EXPECT_EQ(written, "") << label() << ": cannot write the checkpoint";
    if (!written.empty()) return {};
    const fs::path out = dir_ / "converted.gguf";
    const CommandResult r = run_gguf({"convert", checkpoint.string(), out.string(), "--outtype", "f32"});
    EXPECT_EQ(r.exit_code, 0) << label() << ": gguf convert failed (exit " << r.exit_code << "):\n" << r.out << r.err;
    return r.exit_code == 0 ? out : fs::path();
  }
  fs::path lay_out_by_hand() {
    const fs::path out = dir_ / "by-hand.gguf";
    const std::string written = write_family_gguf_by_hand(model_, out);
    EXPECT_EQ(written, "") << label() << ": cannot write the hand-laid GGUF";
    return written.empty() ? out : fs::path();
  }
  // The shared corpus vocabulary the hand layout of a BPE family needs.
  bool hand_layout_unavailable(std::string* why) const {
    if (!model_.pieces.empty()) return false;
    if (!shared_dir()) {
      *why = no_shared_message();
      return true;
    }
    return false;
  }

  TinyHfModel model_;
  fs::path dir_;
};

using ConvertedFamily = FamilyTest;
using HandLaidFamily = FamilyTest;

TEST_P(ConvertedFamily, LlamaCppLogitsMatchTheReference) {
  std::string why;
  const LlamaLogitsOracle* oracle = LlamaLogitsOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
  const fs::path gguf = convert();
  if (gguf.empty()) return;
  check_logits(*oracle, gguf, model_, "converted by gguf convert");
}

TEST_P(HandLaidFamily, LlamaCppLogitsMatchTheReference) {
  std::string why;
  const LlamaLogitsOracle* oracle = LlamaLogitsOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
  if (hand_layout_unavailable(&why)) GTEST_SKIP() << why;
  const fs::path gguf = lay_out_by_hand();
  if (gguf.empty()) return;
  check_logits(*oracle, gguf, model_, "laid out by hand");
}

// Before any logits: the converted file's tensors are the hand-laid file's (same name, F32, same
// shape, same bytes), in whatever order, and the keys llama.cpp reads have the same type and value.
TEST_P(ConvertedFamily, TensorsAreThoseOfTheHandLaidLayout) {
  std::string why;
  if (hand_layout_unavailable(&why)) GTEST_SKIP() << why;
  const fs::path gguf = convert();
  if (gguf.empty()) return;
  const fs::path expected_path = lay_out_by_hand();
  if (expected_path.empty()) return;
  auto converted = GgufFile::open(gguf);
  ASSERT_TRUE(converted) << label() << ": " << converted.error().describe();
  auto expected = GgufFile::open(expected_path);
  ASSERT_TRUE(expected) << label() << ": " << expected.error().describe();
  std::vector<std::string> extra;
  for (const TensorInfo& got : converted->tensors()) {
    if (expected->find_tensor(got.name) == nullptr) extra.emplace_back(got.name);
  }
  EXPECT_TRUE(extra.empty()) << label() << ": the converted file has tensors the layout does not: " << testing::PrintToString(extra);
  for (const TensorInfo& want : expected->tensors()) {
    const TensorInfo* got = converted->find_tensor(want.name);
    if (got == nullptr) {
      ADD_FAILURE() << label() << ": the converted file lacks " << want.name;
      continue;
    }
    EXPECT_EQ(got->type, TensorType::F32) << label() << ": " << want.name;
    EXPECT_EQ(got->ne, want.ne) << label() << ": " << want.name << "'s shape";
    if (got->type != TensorType::F32 || got->ne != want.ne) continue;
    const auto a = converted->tensor_data(*got);
    const auto b = expected->tensor_data(want);
    if (a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin())) continue;
    // Where the values differ (the first one, and how many).
    size_t first = 0, count = 0;
    const size_t n = std::min(a.size(), b.size()) / sizeof(float);
    float first_got = 0, first_want = 0;
    for (size_t i = 0; i < n; ++i) {
      float x, y;
      std::memcpy(&x, a.data() + i * sizeof(float), sizeof(float));
      std::memcpy(&y, b.data() + i * sizeof(float), sizeof(float));
      if (std::memcmp(&x, &y, sizeof(float)) != 0) {
        if (count++ == 0) {
          first = i;
          first_got = x;
          first_want = y;
        }
      }
    }
    // (In a stacked tensor of experts, which expert's.)
    const int64_t per_expert = want.ne[0] * want.ne[1];
    const std::string expert = want.n_dims == 3 ? " (expert " + std::to_string(static_cast<int64_t>(first) / per_expert) + ")" : "";
    ADD_FAILURE() << label() << ": " << want.name << ": " << count << " of " << n << " values differ; the first at " << first
                  << expert << ": converted " << first_got << ", expected " << first_want;
  }
  const std::string arch = family_gguf_arch(GetParam());
  for (const KeyValue& kv : expected->metadata()) {
    if (!kv.key.starts_with(arch + ".") && kv.key != "general.architecture" && kv.key != "general.file_type") continue;
    const auto got = converted->get(kv.key);
    if (!got.has_value()) {
      ADD_FAILURE() << label() << ": the converted file lacks " << kv.key;
      continue;
    }
    const auto want = expected->get(kv.key);
    EXPECT_TRUE(std::ranges::equal(got->encoded(), want->encoded()))
        << label() << ": " << kv.key << " differs (type or value) from the layout's";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ConvertedFamily, testing::ValuesIn(kAllTinyFamilies),
                         [](const auto& param_info) { return family_id(param_info.param); });
INSTANTIATE_TEST_SUITE_P(Families, HandLaidFamily, testing::ValuesIn(kAllTinyFamilies),
                         [](const auto& param_info) { return family_id(param_info.param); });

// The family reference on a llama config is reference_forward.h's pass (itself checked against
// llama.cpp): the shared machinery (norms, rope, GQA, attention) of both is the same.
TEST(FamilyReference, OnALlamaConfigItIsTheLlamaReference) {
  for (const bool tied : {false, true}) {
    TinyLlamaConfig config;
    config.vocab_size = 512;
    config.tie_word_embeddings = tied;
    config.seed = 9;
    const TinyLlama model = make_tiny_llama(config);
    std::vector<int32_t> tokens{1};
    for (int32_t i = 0; i < 9; ++i) tokens.push_back(3 + (i * 97) % 500);
    const auto want = reference_llama_logits(model, tokens);
    const auto got = reference_hf_logits(nlohmann::ordered_json::parse(config_json(config)), model.tensors, tokens);
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < got.size(); ++t) {
      ASSERT_EQ(got[t].size(), want[t].size());
      for (size_t i = 0; i < got[t].size(); ++i) ASSERT_NEAR(got[t][i], want[t][i], 1e-9) << "tied " << tied << ", position " << t;
    }
  }
}

// Each semantic knob of the tiny checkpoints moves the reference's logits well beyond the
// tolerance: switched off, the logits change by more than 10x the tolerance somewhere. So a
// converter (or llama.cpp) that ignores one cannot pass the logits test by luck.
TEST(FamilyReference, EveryKnobOfTheTinyCheckpointsMatters) {
  struct Knob {
    TinyFamily family;
    const char* what;
    void (*change)(nlohmann::ordered_json&);
  };
  const Knob knobs[] = {
      {TinyFamily::gemma2, "attn_logit_softcapping", [](nlohmann::ordered_json& c) { c["attn_logit_softcapping"] = nullptr; }},
      {TinyFamily::gemma2, "final_logit_softcapping", [](nlohmann::ordered_json& c) { c["final_logit_softcapping"] = nullptr; }},
      {TinyFamily::gemma2, "sliding_window", [](nlohmann::ordered_json& c) { c["sliding_window"] = 4096; }},
      {TinyFamily::gemma3, "sliding_window", [](nlohmann::ordered_json& c) { c["sliding_window"] = 4096; }},
      {TinyFamily::gemma3, "rope_local_base_freq", [](nlohmann::ordered_json& c) { c["rope_local_base_freq"] = 1000000.0; }},
      {TinyFamily::gemma3, "rope_theta (the global layer's)", [](nlohmann::ordered_json& c) { c["rope_theta"] = 10000.0; }},
      {TinyFamily::gemma3_vision, "rope_scaling (linear 8 on the global layer)",
       [](nlohmann::ordered_json& c) { c["text_config"]["rope_scaling"] = nullptr; }},
      {TinyFamily::phi3_longrope, "rope_scaling (longrope)", [](nlohmann::ordered_json& c) { c["rope_scaling"] = nullptr; }},
      {TinyFamily::phi4_mini, "partial_rotary_factor",
       [](nlohmann::ordered_json& c) {
         c["partial_rotary_factor"] = 1.0;
         c["rope_scaling"] = nullptr;
       }},
      {TinyFamily::granite, "embedding_multiplier", [](nlohmann::ordered_json& c) { c["embedding_multiplier"] = 1.0; }},
      {TinyFamily::granite, "attention_multiplier", [](nlohmann::ordered_json& c) { c["attention_multiplier"] = 0.25; }},
      {TinyFamily::granite, "residual_multiplier", [](nlohmann::ordered_json& c) { c["residual_multiplier"] = 1.0; }},
      {TinyFamily::granite, "logits_scaling", [](nlohmann::ordered_json& c) { c["logits_scaling"] = 1.0; }},
      {TinyFamily::smollm3, "no_rope_layers", [](nlohmann::ordered_json& c) { c["no_rope_layers"] = {1, 1, 1, 1}; }},
      // The routing: llama.cpp hard-codes each architecture's choice (renormalize for llama and
      // qwen3moe, not for qwen2moe), so the tiny configs hold the values where HF agrees with it.
      {TinyFamily::mixtral, "num_experts_per_tok", [](nlohmann::ordered_json& c) { c["num_experts_per_tok"] = 1; }},
      {TinyFamily::qwen2moe, "norm_topk_prob (false)", [](nlohmann::ordered_json& c) { c["norm_topk_prob"] = true; }},
      {TinyFamily::qwen3moe, "norm_topk_prob (true)", [](nlohmann::ordered_json& c) { c["norm_topk_prob"] = false; }},
      {TinyFamily::qwen3moe, "num_experts_per_tok", [](nlohmann::ordered_json& c) { c["num_experts_per_tok"] = 3; }},
      {TinyFamily::mistral3_vision, "rope_theta (1e9)", [](nlohmann::ordered_json& c) { c["text_config"]["rope_theta"] = 10000.0; }},
      // (Ministral 3's yarn moves its 12-token logits by ~1e-3 only, and its llama 4 scaling is 1
      // below position 16384: Ministral3ShortOriginalContext makes them bite.)
  };
  // Each family's checkpoint and unchanged logits, made once for all its knobs.
  struct Base {
    TinyHfModel model;
    std::vector<int32_t> tokens;
    std::vector<std::vector<double>> logits;
  };
  std::map<TinyFamily, Base> bases;
  for (const Knob& knob : knobs) {
    auto it = bases.find(knob.family);
    if (it == bases.end()) {
      Base b{make_tiny_family(knob.family), {}, {}};
      b.tokens = b.model.test_tokens(kTokens, kTokenSeed);
      b.logits = reference_family_logits(b.model, b.tokens);
      it = bases.emplace(knob.family, std::move(b)).first;
    }
    const Base& b = it->second;
    const auto& base = b.logits;
    nlohmann::ordered_json config = b.model.config;
    knob.change(config);
    const auto changed = reference_hf_logits(config, b.model.tensors, b.tokens);
    double worst = 0;
    for (size_t t = 0; t < base.size(); ++t) {
      std::vector<float> as_float(changed[t].begin(), changed[t].end());
      worst = std::max(worst, logits_distance(as_float, base[t]).scaled);
    }
    EXPECT_GT(worst, 10 * kRelativeTolerance) << family_label(knob.family) << ": without " << knob.what
                                              << " the logits move by " << worst << " only";
  }
}

// Ministral 3's own rope_parameters barely reach 12 positions: yarn changes only the frequencies of
// pairs 3 to 7 (the correction dims of 32 and 1 rotations in 16384 positions are 2 and 5), which
// turn by less than 0.07 rad by position 11, moving the logits by ~1e-3 of their size; llama 4's
// attention scaling is 1 below position 16384. The same checkpoint with
// original_max_position_embeddings 4 makes both bite (llama.cpp takes it as its yarn original
// context and as the scaling's floor): every pair but the first interpolated by 16, queries times
// 1 + 0.1 ln 2 from position 4 and 1 + 0.1 ln 3 from 8. Converted and run by llama.cpp, against the
// reference (each of the two moving its logits well beyond the tolerance first).
TEST(Ministral3ShortOriginalContext, LlamaCppLogitsMatchTheReference) {
  std::string why;
  const LlamaLogitsOracle* oracle = LlamaLogitsOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
  TinyHfModel model = make_tiny_family(TinyFamily::ministral3);
  model.config["rope_parameters"]["original_max_position_embeddings"] = 4;
  const std::vector<int32_t> tokens = model.test_tokens(kTokens, kTokenSeed);
  const auto reference = reference_family_logits(model, tokens);
  for (const auto& [what, change] : {std::pair<const char*, void (*)(nlohmann::ordered_json&)>{
                                         "yarn", [](nlohmann::ordered_json& c) { c["rope_parameters"]["rope_type"] = "default"; }},
                                     {"llama_4_scaling_beta", [](nlohmann::ordered_json& c) { c["rope_parameters"]["llama_4_scaling_beta"] = 0; }}}) {
    nlohmann::ordered_json config = model.config;
    change(config);
    const auto changed = reference_hf_logits(config, model.tensors, tokens);
    double worst = 0;
    for (size_t t = 0; t < reference.size(); ++t) {
      worst = std::max(worst, logits_distance(std::vector<float>(changed[t].begin(), changed[t].end()), reference[t]).scaled);
    }
    EXPECT_GT(worst, 10 * kRelativeTolerance) << "Ministral 3, original_max_position_embeddings 4: without " << what
                                              << " the logits move by " << worst << " only";
  }
  const fs::path dir = temp_dir("family-logits-ministral3-short");
  const fs::path checkpoint = dir / "checkpoint", out = dir / "converted.gguf";
  ASSERT_EQ(write_hf_checkpoint(model, checkpoint), "");
  const CommandResult r = run_gguf({"convert", checkpoint.string(), out.string(), "--outtype", "f32"});
  ASSERT_EQ(r.exit_code, 0) << "gguf convert failed:\n" << r.out << r.err;
  check_logits(*oracle, out, model, "converted by gguf convert, original_max_position_embeddings 4");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ggufkit::test
