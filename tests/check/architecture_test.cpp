// gguf check, arch.*: for every architecture the pass knows, a small model laid out as llama.cpp's
// loader creates it passes; then one mutation at a time gives exactly the expected finding. The
// shared corpus (tiny-llama in every type, real vocabularies) passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <set>

#include "architecture_models.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using namespace arch_test;
namespace fs = std::filesystem;

class EveryArchitecture : public testing::TestWithParam<NamedModel> {};

TEST_P(EveryArchitecture, ModelAsLlamaCppBuildsItPasses) {
  const auto findings = check_model(GetParam().make());
  EXPECT_TRUE(findings.empty()) << describe_all(findings);
}

TEST_P(EveryArchitecture, DroppedTensorIsMissing) {
  Model m = GetParam().make();
  const std::string victim = "blk.1.attn_output.weight";  // every architecture here has it
  ASSERT_TRUE(m.drop(victim));
  expect_single(check_model(m), "arch.missing_tensor", Severity::error, victim);
}

TEST_P(EveryArchitecture, DroppedEmbeddingIsMissing) {
  Model m = GetParam().make();
  ASSERT_TRUE(m.drop("token_embd.weight"));
  expect_single(check_model(m), "arch.missing_tensor", Severity::error, "token_embd.weight");
}

TEST_P(EveryArchitecture, WrongShapeIsNamedWithBothShapes) {
  Model m = GetParam().make();
  const std::string victim = "blk.0.attn_output.weight";
  Shape* shape = m.shape_of(victim);
  ASSERT_NE(shape, nullptr);
  const Shape right = *shape;
  (*shape)[1] += 8;  // ne1 is n_embd for every architecture
  const auto findings = check_model(m);
  expect_single(findings, "arch.shape_mismatch", Severity::error, victim);
  if (findings.size() == 1) {
    EXPECT_NE(findings[0].message.find(fmt_shape(right)), std::string::npos) << findings[0].message;
    EXPECT_NE(findings[0].message.find(fmt_shape(*shape)), std::string::npos) << findings[0].message;
    EXPECT_TRUE(findings[0].offset.has_value());
  }
}

TEST_P(EveryArchitecture, ExtraTensorIsUnexpected) {
  Model m = GetParam().make();
  m.add("blk.0.ffn_mystery.weight", {kEmbd});
  expect_single(check_model(m), "arch.unexpected_tensor", Severity::warning, "blk.0.ffn_mystery.weight");
}

TEST_P(EveryArchitecture, BlockCountTooSmall) {
  Model m = GetParam().make();
  m.set_u32("block_count", 1);
  expect_single(check_model(m), "arch.block_count_mismatch", Severity::error, "blk.1");
}

TEST_P(EveryArchitecture, BlockCountTooLarge) {
  Model m = GetParam().make();
  m.set_u32("block_count", 3);
  expect_single(check_model(m), "arch.block_count_mismatch", Severity::error, "blk.2");
}

TEST_P(EveryArchitecture, BlockCountOverLlamaMaxLayers) {
  Model m = GetParam().make();
  m.set_u32("block_count", 513);
  expect_single(check_model(m), "arch.bad_hyperparameter", Severity::error, m.arch + ".block_count");
}

TEST_P(EveryArchitecture, ZeroHeads) {
  Model m = GetParam().make();
  m.set_u32("attention.head_count", 0);
  m.remove_key(m.arch + ".attention.head_count_kv");
  const auto findings = check_model(m);
  // Sizes derived from the head count become unknown: only the head count itself is reported.
  expect_single(findings, "arch.bad_hyperparameter", Severity::error, m.arch + ".attention.head_count");
}

TEST_P(EveryArchitecture, MissingRequiredKey) {
  Model m = GetParam().make();
  m.remove_key(m.arch + ".context_length");
  expect_single(check_model(m), "arch.missing_hyperparameter", Severity::error, m.arch + ".context_length");

  Model no_eps = GetParam().make();
  const std::string eps = no_eps.arch == "gpt2" || no_eps.arch == "bert" ? ".attention.layer_norm_epsilon"
                                                                          : ".attention.layer_norm_rms_epsilon";
  no_eps.remove_key(no_eps.arch + eps);
  expect_single(check_model(no_eps), "arch.missing_hyperparameter", Severity::error, no_eps.arch + eps);
}

// Each key the loader reads, in a type it does not read it as: exactly one finding, with llama.cpp's
// words; the checks of the key's value do not report it again.
TEST_P(EveryArchitecture, KeysOfAnotherTypeAreWhatTheLoaderRefuses) {
  const std::string a = GetParam().make().arch;
  struct Case {
    std::string suffix;
    MetadataValue value;
    std::string message;
  };
  const std::string eps = a == "gpt2" || a == "bert" ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
  const std::vector<Case> cases = {
      {"context_length", MetadataValue::of(float{kCtx}),
       "'" + a + ".context_length' is a float32, but llama.cpp reads it as a uint32 and refuses the file (\"key " + a +
           ".context_length has wrong type f32 but expected type u32\"); set it again with gguf set --type uint32"},
      {"block_count", MetadataValue::of(int32_t{kLayers}),
       "'" + a + ".block_count' is an int32, but llama.cpp reads it as a uint32 and refuses the file (\"key " + a +
           ".block_count has wrong type i32 but expected type u32\"); set it again with gguf set --type uint32"},
      {"embedding_length", MetadataValue::of(uint64_t{kEmbd}),
       "'" + a + ".embedding_length' is a uint64, but llama.cpp reads it as a uint32 and refuses the file (\"key " + a +
           ".embedding_length has wrong type u64 but expected type u32\"); set it again with gguf set --type uint32"},
      {"attention.head_count", MetadataValue::array(std::vector<float>(kLayers, float{kHeads})),
       "'" + a + ".attention.head_count' is an array of float32, but llama.cpp takes one uint32 per layer (an array of "
           "uint32, int32 or bool) and refuses the file (\"" + a +
           ".attention.head_count has wrong array element type f32\"); write the array as uint32"},
      {"attention.head_count", MetadataValue::string("4"),
       "'" + a + ".attention.head_count' is a string, but llama.cpp reads it as a uint32 and refuses the file (\"key " +
           a + ".attention.head_count has wrong type str but expected type u32\"); set it again with gguf set --type "
           "uint32"},
      {eps, MetadataValue::of(1e-5),
       "'" + a + "." + eps + "' is a float64, but llama.cpp reads it as a float32 and refuses the file (\"key " + a + "." +
           eps + " has wrong type f64 but expected type f32\"); set it again with gguf set --type float32"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.suffix);
    Model m = GetParam().make();
    m.set(a + "." + c.suffix, c.value);
    const auto findings = check_model(m);
    expect_single(findings, "arch.wrong_type", Severity::error, a + "." + c.suffix);
    if (findings.size() == 1) {
      EXPECT_EQ(findings[0].message, c.message);
      EXPECT_TRUE(findings[0].offset.has_value());
    }
  }
}

TEST_P(EveryArchitecture, ZeroContextLength) {
  Model m = GetParam().make();
  m.set_u32("context_length", 0);
  const auto findings = check_model(m);
  expect_single(findings, "arch.bad_hyperparameter", Severity::error, m.arch + ".context_length");
  if (!findings.empty()) {
    EXPECT_NE(findings[0].message.find("n_ctx and model->hparams.n_ctx_train cannot both be zero"), std::string::npos);
  }
}

TEST_P(EveryArchitecture, VocabularyOnlyCopyHasOneInfoAndNoTensorChecks) {
  Model m = GetParam().make();
  m.tensors.clear();
  m.remove_key(m.arch + ".feed_forward_length");  // keys a model needs are not needed here
  expect_single(check_model(m), "arch.vocabulary_only", Severity::info, "");
}

// Issue 29: check --strict passed an epsilon of -1, 0, NaN, inf or 1e30; llama.cpp aborts on -1 and NaN.
constexpr std::string_view kReconvertAdvice =
    "the file was probably written by a converter for a different version or edited by hand; convert the model "
    "again or correct the key with gguf set";
constexpr std::string_view kEpsilonAborts =
    "llama.cpp aborts on a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm operations), and an "
    "infinite one turns every normalized activation into 0";
constexpr std::string_view kEpsilonImplausible =
    "an epsilon is a small positive number (1e-5, 1e-6): at 0 a row of zeros is divided by zero, and above 0.1 it "
    "swamps the variance it is added to";

TEST_P(EveryArchitecture, EpsilonsOutsideTheirRange) {
  const std::string a = GetParam().make().arch;
  const std::string key =
      a + (a == "gpt2" || a == "bert" ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon");
  struct Case {
    float value;
    std::string text;
    bool error;
  };
  const Case cases[] = {{-1.0f, "-1", true},
                        {std::numeric_limits<float>::quiet_NaN(), "nan", true},
                        {std::numeric_limits<float>::infinity(), "inf", true},
                        {0.0f, "0", false},
                        {1e30f, "1e+30", false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Model m = GetParam().make();
    m.set(key, MetadataValue::of(c.value));
    const auto findings = check_model(m);
    ASSERT_EQ(findings.size(), 1u) << describe_all(findings);
    EXPECT_EQ(findings[0].code, c.error ? "arch.bad_hyperparameter" : "arch.implausible_hyperparameter");
    EXPECT_EQ(findings[0].severity, c.error ? Severity::error : Severity::warning);
    EXPECT_EQ(findings[0].subject, key);
    EXPECT_EQ(findings[0].message, fmt::format("'{}' is {}, outside {}: {}; {}", key, c.text, c.error ? "[0, inf)" : "(0, 0.1]",
                                               c.error ? kEpsilonAborts : kEpsilonImplausible, kReconvertAdvice));
    EXPECT_TRUE(findings[0].offset.has_value());
  }
  for (float good : {1e-5f, 1e-6f, 1e-12f, 0.1f}) {
    Model m = GetParam().make();
    m.set(key, MetadataValue::of(good));
    EXPECT_EQ(describe_all(check_model(m)), "") << good;
  }
}

std::string architecture_name(const testing::TestParamInfo<NamedModel>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Architectures, EveryArchitecture, testing::ValuesIn(all_models()), architecture_name);

// ---- attention heads ----

TEST(ArchitectureHeads, KvHeadsNotDividingHeads) {
  Model m = llama_model();
  m.set_u32("attention.head_count_kv", 3);  // 4 % 3 != 0; the tensors follow the key
  for (uint32_t il = 0; il < kLayers; ++il) {
    for (const char* t : {"attn_k.weight", "attn_v.weight"}) {
      *m.shape_of("blk." + std::to_string(il) + "." + t) = {kEmbd, 3 * kHeadDim};
    }
  }
  expect_single(check_model(m), "arch.bad_hyperparameter", Severity::error, "llama.attention.head_count_kv");
}

TEST(ArchitectureHeads, EmbeddingNotDivisibleByHeads) {
  Model m = llama_model();
  m.set_u32("attention.head_count", 5);
  m.remove_key("llama.attention.head_count_kv");
  m.remove_key("llama.rope.dimension_count");
  const auto findings = check_model(m);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].code, "arch.bad_hyperparameter") << describe_all(findings);
  EXPECT_EQ(findings[0].subject, "llama.attention.head_count");
}

TEST(ArchitectureHeads, PerLayerKvArrayThatAgreesPasses) {
  Model m = llama_model();
  m.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<uint32_t>{2, 2}));
  m.set("llama.attention.head_count", MetadataValue::array(std::vector<uint32_t>{4, 4}));
  m.set("llama.feed_forward_length", MetadataValue::array(std::vector<uint32_t>{64, 64}));
  const auto findings = check_model(m);
  EXPECT_TRUE(findings.empty()) << describe_all(findings);
}

TEST(ArchitectureHeads, PerLayerArrayOfWrongLength) {
  Model m = llama_model();
  m.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<uint32_t>{2, 2, 2}));
  expect_single(check_model(m), "arch.bad_hyperparameter", Severity::error, "llama.attention.head_count_kv");
}

// llama.cpp's llama loader sizes every layer from layer 0's counts: a per-layer array that varies is
// reported, and the layer that follows its own count does not match what llama.cpp expects.
TEST(ArchitectureHeads, PerLayerKvArrayThatVaries) {
  Model m = llama_model();
  m.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<uint32_t>{2, 1}));
  *m.shape_of("blk.1.attn_k.weight") = {kEmbd, kHeadDim};
  *m.shape_of("blk.1.attn_v.weight") = {kEmbd, kHeadDim};
  const auto findings = check_model(m);
  std::multiset<std::pair<std::string, std::string>> got;
  for (const Finding& f : findings) got.insert({f.code, f.subject});
  const std::multiset<std::pair<std::string, std::string>> want = {
      {"arch.bad_hyperparameter", "llama.attention.head_count_kv"},
      {"arch.shape_mismatch", "blk.1.attn_k.weight"},
      {"arch.shape_mismatch", "blk.1.attn_v.weight"}};
  EXPECT_EQ(got, want) << describe_all(findings);
}

TEST(ArchitectureHeads, KeyLengthSizesTheHeads) {
  Model m = qwen3_model();
  m.remove_key("qwen3.attention.key_length");  // heads fall back to 32 / 4 = 8 wide
  m.remove_key("qwen3.attention.value_length");
  const auto findings = check_model(m);
  std::set<std::string> subjects;
  for (const Finding& f : findings) {
    EXPECT_EQ(f.code, "arch.shape_mismatch") << f.describe();
    subjects.insert(f.subject);
  }
  EXPECT_TRUE(subjects.contains("blk.0.attn_q.weight"));
  EXPECT_TRUE(subjects.contains("blk.1.attn_q_norm.weight"));
}

// ---- optional tensors and alternatives ----

TEST(ArchitectureOptional, LlamaOptionalTensorsAreFineEitherWay) {
  Model m = llama_model();
  m.add("output.weight", {kEmbd, kVocab});
  m.add("rope_freqs.weight", {kHeadDim / 2});
  m.add("blk.0.attn_q.bias", {kQ});
  m.add("blk.1.ffn_up.bias", {kFf});
  m.add("blk.0.attn_output.bias", {kEmbd});
  m.add("blk.0.attn_q.scale", {1});  // llama.cpp's generic per-weight scales
  const auto findings = check_model(m);
  EXPECT_TRUE(findings.empty()) << describe_all(findings);
}

TEST(ArchitectureOptional, ScalesOnlyNextToWeightsLlamaCppScales) {
  Model m = mixtral_model();
  m.add("blk.0.attn_q.input_scale", {1});
  m.add("blk.1.ffn_up_exps.scale", {kExperts});  // one per expert
  EXPECT_TRUE(check_model(m).empty()) << describe_all(check_model(m));

  Model norm_scale = llama_model();
  norm_scale.add("blk.0.attn_norm.scale", {1});  // norms are never scaled
  expect_single(check_model(norm_scale), "arch.unexpected_tensor", Severity::warning, "blk.0.attn_norm.scale");

  Model wrong = mixtral_model();
  wrong.add("blk.1.ffn_up_exps.scale", {1});
  expect_single(check_model(wrong), "arch.shape_mismatch", Severity::error, "blk.1.ffn_up_exps.scale");
}

TEST(ArchitectureOptional, OptionalTensorWithWrongShapeIsStillChecked) {
  Model m = llama_model();
  m.add("output.weight", {kEmbd, kVocab + 1});
  expect_single(check_model(m), "arch.shape_mismatch", Severity::error, "output.weight");
}

TEST(ArchitectureOptional, LlamaWithFusedQkvPasses) {
  Model m = llama_model();
  for (uint32_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    ASSERT_TRUE(m.drop(p + "attn_q.weight") && m.drop(p + "attn_k.weight") && m.drop(p + "attn_v.weight"));
    m.add(p + "attn_qkv.weight", {kEmbd, kQ + 2 * kKv});
  }
  const auto findings = check_model(m);
  EXPECT_TRUE(findings.empty()) << describe_all(findings);
}

TEST(ArchitectureOptional, FusedAndSeparateQkvTogether) {
  Model m = llama_model();
  m.add("blk.0.attn_qkv.weight", {kEmbd, kQ + 2 * kKv});
  const auto findings = check_model(m);
  ASSERT_EQ(findings.size(), 3u) << describe_all(findings);  // Q, K and V are never read
  for (const Finding& f : findings) EXPECT_EQ(f.code, "arch.unexpected_tensor");
}

TEST(ArchitectureOptional, Qwen2moeNeedsItsOwnOutputHead) {
  Model m = qwen2moe_model();
  ASSERT_TRUE(m.drop("output.weight"));
  expect_single(check_model(m), "arch.missing_tensor", Severity::error, "output.weight");
}

TEST(ArchitectureOptional, Gemma2NeverReadsAnOutputHead) {
  Model m = gemma2_model();
  m.add("output.weight", {kEmbd, kVocab});
  expect_single(check_model(m), "arch.unexpected_tensor", Severity::warning, "output.weight");
}

TEST(ArchitectureOptional, RopeFreqsOnlyWhereTheLoaderReadsThem) {
  Model m = qwen2_model();
  m.add("rope_freqs.weight", {kHeadDim / 2});
  expect_single(check_model(m), "arch.unexpected_tensor", Severity::warning, "rope_freqs.weight");
}

TEST(ArchitectureOptional, LayerNamesAreExact) {
  Model m = llama_model();
  m.add("blk.01.attn_norm.weight", {kEmbd});  // llama.cpp writes layer numbers with %d
  expect_single(check_model(m), "arch.unexpected_tensor", Severity::warning, "blk.01.attn_norm.weight");
}

// ---- experts ----

TEST(ArchitectureExperts, MixtralPasses) {
  const auto findings = check_model(mixtral_model());
  EXPECT_TRUE(findings.empty()) << describe_all(findings);
}

TEST(ArchitectureExperts, DenseTensorInMixtralIsUnexpected) {
  Model m = mixtral_model();
  m.add("blk.0.ffn_up.weight", {kEmbd, kFf});
  expect_single(check_model(m), "arch.unexpected_tensor", Severity::warning, "blk.0.ffn_up.weight");
}

TEST(ArchitectureExperts, MoreUsedExpertsThanExperts) {
  Model m = qwen2moe_model();
  m.set_u32("expert_used_count", kExperts + 1);
  expect_single(check_model(m), "arch.bad_hyperparameter", Severity::error, "qwen2moe.expert_used_count");
}

TEST(ArchitectureExperts, WrongExpertCountInShapes) {
  Model m = qwen3moe_model();
  *m.shape_of("blk.1.ffn_down_exps.weight") = {kFf / kExpertsUsed, kEmbd, kExperts + 1};
  expect_single(check_model(m), "arch.shape_mismatch", Severity::error, "blk.1.ffn_down_exps.weight");
}

TEST(ArchitectureExperts, ExpertsWithoutUsedCount) {
  Model m = mixtral_model();
  m.remove_key("llama.expert_used_count");
  expect_single(check_model(m), "arch.missing_hyperparameter", Severity::error, "llama.expert_used_count");
}

TEST(ArchitectureExperts, MoeArchitectureWithZeroExperts) {
  Model m = qwen2moe_model();
  m.set_u32("expert_count", 0);
  m.set_u32("expert_used_count", 0);
  expect_single(check_model(m), "arch.bad_hyperparameter", Severity::error, "qwen2moe.expert_count");
}

TEST(ArchitectureExperts, MoeArchitectureWithoutExperts) {
  Model m = qwen3moe_model();
  m.remove_key("qwen3moe.expert_count");
  m.remove_key("qwen3moe.expert_used_count");
  const auto findings = check_model(m);
  ASSERT_FALSE(findings.empty());
  std::set<std::string> subjects;
  for (const Finding& f : findings) {
    if (f.code == "arch.missing_hyperparameter") subjects.insert(f.subject);
  }
  EXPECT_TRUE(subjects.contains("qwen3moe.expert_count")) << describe_all(findings);
}

TEST(ArchitectureExperts, BertNeedsTokenTypes) {
  Model m = bert_model();
  m.remove_key("tokenizer.ggml.token_type_count");
  expect_single(check_model(m), "arch.missing_hyperparameter", Severity::error, "tokenizer.ggml.token_type_count");
}

// ---- what is not checked ----

// Soft-caps and scales: llama.cpp divides by the caps (gemma2 whatever they are), multiplies by the scales.
TEST(ArchitectureFloats, SoftcapsAndScalesOutsideTheirRange) {
  struct Case {
    std::string suffix;
    float value;
    std::string severity_code_message;
  };
  const std::string softcap_error =
      "llama.cpp divides the scores by the cap before the tanh and multiplies them by it after: NaN or an infinity "
      "makes every logit NaN";
  const std::string softcap_warning =
      "a cap is a positive number (gemma's 30 and 50): gemma2 divides by it whatever it is, so 0 divides by zero, "
      "and a negative cap is a sign error";
  const std::string scale_error =
      "llama.cpp multiplies activations by it (and granite divides its logits by logit_scale): NaN or an infinity "
      "makes the output NaN";
  const std::string scale_warning = "a scale is positive (0 means not applied): a negative one flips the sign of what it scales";
  const std::string advice(kReconvertAdvice);
  const Case cases[] = {
      {"final_logit_softcapping", 0.0f,
       "warning arch.implausible_hyperparameter 'gemma2.final_logit_softcapping' is 0, outside (0, inf): " + softcap_warning},
      {"attn_logit_softcapping", -50.0f,
       "warning arch.implausible_hyperparameter 'gemma2.attn_logit_softcapping' is -50, outside (0, inf): " + softcap_warning},
      {"attn_logit_softcapping", std::numeric_limits<float>::quiet_NaN(),
       "error arch.bad_hyperparameter 'gemma2.attn_logit_softcapping' is nan, outside (-inf, inf): " + softcap_error},
      {"final_logit_softcapping", -std::numeric_limits<float>::infinity(),
       "error arch.bad_hyperparameter 'gemma2.final_logit_softcapping' is -inf, outside (-inf, inf): " + softcap_error},
      {"logit_scale", std::numeric_limits<float>::infinity(),
       "error arch.bad_hyperparameter 'gemma2.logit_scale' is inf, outside (-inf, inf): " + scale_error},
      {"expert_weights_scale", -1.0f,
       "warning arch.implausible_hyperparameter 'gemma2.expert_weights_scale' is -1, outside [0, inf): " + scale_warning},
      {"embedding_scale", std::numeric_limits<float>::quiet_NaN(),
       "error arch.bad_hyperparameter 'gemma2.embedding_scale' is nan, outside (-inf, inf): " + scale_error},
      {"residual_scale", -0.5f,
       "warning arch.implausible_hyperparameter 'gemma2.residual_scale' is -0.5, outside [0, inf): " + scale_warning},
      {"attention.scale", std::numeric_limits<float>::infinity(),
       "error arch.bad_hyperparameter 'gemma2.attention.scale' is inf, outside (-inf, inf): " + scale_error},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.suffix);
    Model m = gemma2_model();
    m.set("gemma2." + c.suffix, MetadataValue::of(c.value));
    std::string all;
    for (const Finding& f : check_model(m)) {
      all += fmt::format("{} {} {}\n", severity_name(f.severity), f.code, f.message);
      EXPECT_EQ(f.subject, "gemma2." + c.suffix);
    }
    EXPECT_EQ(all, c.severity_code_message + "; " + advice + "\n");
  }
  // gemma2's own values, and a scale of 0 (not applied), pass.
  Model m = gemma2_model();
  m.set("gemma2.attn_logit_softcapping", MetadataValue::of(50.0f));
  m.set("gemma2.final_logit_softcapping", MetadataValue::of(30.0f));
  m.set("gemma2.expert_weights_scale", MetadataValue::of(0.0f));
  m.set("gemma2.logit_scale", MetadataValue::of(0.0625f));
  EXPECT_EQ(describe_all(check_model(m)), "");
}

// Issue 29 review: granite's graph divides its logits by logit_scale whatever it is (models/granite.cpp),
// so 0 passed --strict and divided by zero. For it (and granitemoe, minicpm, granite_swa, graniteswitch)
// 0 and negatives are errors; command-r and cohere2 skip a 0, and keep the table's rule.
TEST(ArchitectureFloats, GraniteDividesByItsLogitScale) {
  const auto findings_with = [](const std::string& arch, std::optional<float> scale) {
    Model m = llama_model();  // llama's tensors and hyperparameters under `arch`'s name
    m.arch = arch;
    for (auto& [key, value] : m.keys) {
      if (key.starts_with("llama.")) key = arch + key.substr(5);
    }
    m.set("general.architecture", MetadataValue::string(arch));
    if (scale) m.set(arch + ".logit_scale", MetadataValue::of(*scale));
    std::string all;
    for (const Finding& f : check_model(m)) all += fmt::format("{} {} {}: {}\n", severity_name(f.severity), f.code, f.subject, f.message);
    return all;
  };
  const std::string why =
      "granite's graph divides its logits by logit_scale whatever it is: 0 divides by zero, NaN or an infinity makes "
      "every logit NaN, and a negative one flips them";
  for (const std::string arch : {"granite", "granitemoe", "minicpm"}) {
    SCOPED_TRACE(arch);
    // No table for the architecture's tensors: the one info, with a valid scale.
    const std::string fine = fmt::format(
        "info arch.unknown_architecture general.architecture: llama.cpp knows architecture '{}', but gguf check has no "
        "table for it yet: its tensors and its own hyperparameters were not checked (the types of those every "
        "architecture has were)\n", arch);
    EXPECT_EQ(findings_with(arch, 8.0f), fine);
    for (const float bad : {0.0f, -8.0f}) {
      EXPECT_EQ(findings_with(arch, bad),
                fmt::format("error arch.bad_hyperparameter {0}.logit_scale: '{0}.logit_scale' is {1}, outside (0, inf): {2}; {3}\n",
                            arch, bad, why, kReconvertAdvice) + fine);
    }
  }
  // command-r multiplies by it, and skips a 0.
  EXPECT_EQ(findings_with("command-r", 0.0f), findings_with("command-r", 0.0625f));
}

TEST(ArchitectureScope, UnknownArchitectureGetsOneInfo) {
  for (const char* arch : {"falcon", "no-such-architecture"}) {
    Model m = llama_model();
    m.set("general.architecture", MetadataValue::string(arch));
    m.add("blk.0.whatever", {3});
    expect_single(check_model(m), "arch.unknown_architecture", Severity::info, "general.architecture");
  }
}

// An architecture's own keys are checked where its loader reads them, and only there.
TEST(ArchitectureScope, KeysOnlySomeArchitecturesReadAreTypedForThem) {
  Model gemma = gemma2_model();
  gemma.set("gemma2.final_logit_softcapping", MetadataValue::of(30.0));
  expect_single(check_model(gemma), "arch.wrong_type", Severity::error, "gemma2.final_logit_softcapping");
  Model sliding = gemma2_model();
  sliding.set("gemma2.attention.sliding_window_pattern", MetadataValue::array(std::vector<float>{1.0f, 0.0f}));
  EXPECT_TRUE(check_model(sliding).empty()) << "the loader ignores an array there";
  Model llama = llama_model();
  llama.set("llama.final_logit_softcapping", MetadataValue::of(30.0));  // llama's loader never reads it
  EXPECT_TRUE(check_model(llama).empty());
}

// An architecture without a table still gets the types of the keys every architecture reads.
TEST(ArchitectureScope, KnownArchitectureWithoutATableHasItsCommonKeysTyped) {
  Model m = llama_model();
  m.set("general.architecture", MetadataValue::string("falcon"));
  m.set("falcon.context_length", MetadataValue::of(2048.0f));
  m.set("falcon.attention.layer_norm_epsilon", MetadataValue::of(1e-5));  // falcon's own: not in a table here
  const auto findings = check_model(m);
  ASSERT_EQ(findings.size(), 2u) << describe_all(findings);
  EXPECT_EQ(findings[0].code, "arch.wrong_type");
  EXPECT_EQ(findings[0].subject, "falcon.context_length");
  EXPECT_EQ(findings[1].code, "arch.unknown_architecture");
}

TEST(ArchitectureScope, VocabularyOnlyStillChecksTheValuesItGives) {
  Model m = llama_model();
  m.tensors.clear();
  m.set_u32("attention.head_count", 0);
  const auto findings = check_model(m);
  ASSERT_EQ(findings.size(), 2u) << describe_all(findings);
  EXPECT_EQ(findings[0].code, "arch.vocabulary_only");
  EXPECT_EQ(findings[1].code, "arch.bad_hyperparameter");
}

// ---- the shared corpus ----

std::vector<fs::path> corpus_under(const std::string& dir) {
  std::vector<fs::path> out;
  for (const fs::path& p : test::corpus_files()) {
    if (p.parent_path().filename() == dir) out.push_back(p);
  }
  return out;
}

TEST(ArchitectureCorpus, TinyLlamaHasNoArchErrorsOrWarnings) {
  GGUFKIT_REQUIRE_SHARED();
  const auto files = corpus_under("tiny-llama");
  ASSERT_FALSE(files.empty());
  for (const fs::path& p : files) {
    const auto report = check_file(p);
    ASSERT_TRUE(report) << p << ": " << report.error().describe();
    const auto findings = arch_findings(*report);
    EXPECT_TRUE(findings.empty()) << p.filename() << describe_all(findings);
  }
}

TEST(ArchitectureCorpus, VocabulariesHaveNoArchErrors) {
  GGUFKIT_REQUIRE_SHARED();
  const auto files = corpus_under("vocab");
  ASSERT_FALSE(files.empty());
  for (const fs::path& p : files) {
    const auto report = check_file(p);
    ASSERT_TRUE(report) << p << ": " << report.error().describe();
    const auto findings = arch_findings(*report);
    for (const Finding& f : findings) EXPECT_NE(f.severity, Severity::error) << p.filename() << ": " << f.describe();
    // One info each: a vocabulary, or an architecture without a table (falcon).
    ASSERT_EQ(findings.size(), 1u) << p.filename() << describe_all(findings);
    EXPECT_TRUE(findings[0].code == "arch.vocabulary_only" || findings[0].code == "arch.unknown_architecture");
  }
}

}  // namespace
}  // namespace ggufkit
