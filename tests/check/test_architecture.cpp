// gguf check, arch.*: for every architecture the pass knows, a small model laid out as llama.cpp's
// loader creates it (written here from llama.cpp's src/models/<arch>.cpp, not from our table)
// passes; then one mutation at a time gives exactly the expected finding. The shared corpus
// (tiny-llama in every type, real vocabularies) passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "ggufkit/check.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

// Tiny dimensions: n_embd 32, 4 heads of 8, 2 key/value heads, n_ff 64, 16 tokens, 2 layers.
constexpr int64_t kEmbd = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kFf = 64, kVocab = 16, kCtx = 64;
constexpr int64_t kQ = kHeads * kHeadDim, kKv = kKvHeads * kHeadDim;
constexpr uint32_t kLayers = 2;

using Shape = std::vector<int64_t>;

struct Model {
  std::string arch;
  std::vector<std::pair<std::string, MetadataValue>> keys;
  std::vector<std::pair<std::string, Shape>> tensors;

  void set(const std::string& key, MetadataValue value) {
    for (auto& [k, v] : keys) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
    keys.emplace_back(key, std::move(value));
  }
  void set_u32(const std::string& suffix, uint32_t v) { set(arch + "." + suffix, MetadataValue::of(v)); }
  void remove_key(const std::string& key) {
    std::erase_if(keys, [&](const auto& kv) { return kv.first == key; });
  }
  void add(const std::string& name, Shape shape) { tensors.emplace_back(name, std::move(shape)); }
  void add_layers(const std::vector<std::pair<std::string, Shape>>& per_layer) {
    for (uint32_t il = 0; il < kLayers; ++il) {
      for (const auto& [suffix, shape] : per_layer) add("blk." + std::to_string(il) + "." + suffix, shape);
    }
  }
  bool drop(const std::string& name) {
    return std::erase_if(tensors, [&](const auto& t) { return t.first == name; }) == 1;
  }
  Shape* shape_of(const std::string& name) {
    for (auto& [n, s] : tensors) {
      if (n == name) return &s;
    }
    return nullptr;
  }
};

std::vector<std::string> token_list(int64_t n) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) out.push_back("t" + std::to_string(i));
  return out;
}

// The keys llama.cpp's load_hparams reads for every architecture, and a 16-token vocabulary.
Model base_model(const std::string& arch, bool rms_norm = true) {
  Model m;
  m.arch = arch;
  m.set("general.architecture", MetadataValue::string(arch));
  m.set_u32("context_length", kCtx);
  m.set_u32("embedding_length", kEmbd);
  m.set_u32("block_count", kLayers);
  m.set_u32("feed_forward_length", kFf);
  m.set_u32("attention.head_count", kHeads);
  m.set(arch + (rms_norm ? ".attention.layer_norm_rms_epsilon" : ".attention.layer_norm_epsilon"),
        MetadataValue::of(1e-5f));
  m.set("tokenizer.ggml.model", MetadataValue::string("gpt2"));
  m.set("tokenizer.ggml.tokens", MetadataValue::string_array(token_list(kVocab)));
  return m;
}

// llama.cpp src/models/llama.cpp, dense: tied output (no output.weight).
Model llama_model() {
  Model m = base_model("llama");
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.set_u32("rope.dimension_count", kHeadDim);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_q.weight", {kEmbd, kQ}},
                {"attn_k.weight", {kEmbd, kKv}},
                {"attn_v.weight", {kEmbd, kKv}},
                {"attn_output.weight", {kQ, kEmbd}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_gate.weight", {kEmbd, kFf}},
                {"ffn_down.weight", {kFf, kEmbd}},
                {"ffn_up.weight", {kEmbd, kFf}}});
  return m;
}

// src/models/qwen2.cpp: Q, K and V with biases, an untied output head.
Model qwen2_model() {
  Model m = base_model("qwen2");
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add("output.weight", {kEmbd, kVocab});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_q.weight", {kEmbd, kEmbd}},
                {"attn_q.bias", {kEmbd}},
                {"attn_k.weight", {kEmbd, kKv}},
                {"attn_k.bias", {kKv}},
                {"attn_v.weight", {kEmbd, kKv}},
                {"attn_v.bias", {kKv}},
                {"attn_output.weight", {kEmbd, kEmbd}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_gate.weight", {kEmbd, kFf}},
                {"ffn_down.weight", {kFf, kEmbd}},
                {"ffn_up.weight", {kEmbd, kFf}}});
  return m;
}

// src/models/qwen3.cpp with a head size (key_length 16) that is not n_embd / n_head.
constexpr int64_t kQwen3Head = 16;
Model qwen3_model() {
  Model m = base_model("qwen3");
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.set_u32("attention.key_length", kQwen3Head);
  m.set_u32("attention.value_length", kQwen3Head);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_q.weight", {kEmbd, kHeads * kQwen3Head}},
                {"attn_k.weight", {kEmbd, kKvHeads * kQwen3Head}},
                {"attn_v.weight", {kEmbd, kKvHeads * kQwen3Head}},
                {"attn_output.weight", {kHeads * kQwen3Head, kEmbd}},
                {"attn_q_norm.weight", {kQwen3Head}},
                {"attn_k_norm.weight", {kQwen3Head}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_gate.weight", {kEmbd, kFf}},
                {"ffn_down.weight", {kFf, kEmbd}},
                {"ffn_up.weight", {kEmbd, kFf}}});
  return m;
}

constexpr int64_t kExperts = 4, kExpertsUsed = 2, kExpertFf = 16, kSharedFf = 24;

// src/models/qwen2moe.cpp: routed experts of expert_feed_forward_length, a shared expert.
Model qwen2moe_model() {
  Model m = base_model("qwen2moe");
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.set_u32("expert_count", kExperts);
  m.set_u32("expert_used_count", kExpertsUsed);
  m.set_u32("expert_feed_forward_length", kExpertFf);
  m.set_u32("expert_shared_feed_forward_length", kSharedFf);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add("output.weight", {kEmbd, kVocab});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_q.weight", {kEmbd, kEmbd}},
                {"attn_k.weight", {kEmbd, kKv}},
                {"attn_v.weight", {kEmbd, kKv}},
                {"attn_output.weight", {kEmbd, kEmbd}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_gate_inp.weight", {kEmbd, kExperts}},
                {"ffn_gate_exps.weight", {kEmbd, kExpertFf, kExperts}},
                {"ffn_down_exps.weight", {kExpertFf, kEmbd, kExperts}},
                {"ffn_up_exps.weight", {kEmbd, kExpertFf, kExperts}},
                {"ffn_gate_inp_shexp.weight", {kEmbd}},
                {"ffn_gate_shexp.weight", {kEmbd, kSharedFf}},
                {"ffn_down_shexp.weight", {kSharedFf, kEmbd}},
                {"ffn_up_shexp.weight", {kEmbd, kSharedFf}}});
  return m;
}

// src/models/qwen3moe.cpp without expert_feed_forward_length: experts are n_ff / n_expert_used wide.
Model qwen3moe_model() {
  Model m = base_model("qwen3moe");
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.set_u32("expert_count", kExperts);
  m.set_u32("expert_used_count", kExpertsUsed);
  constexpr int64_t ff = kFf / kExpertsUsed;
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_q.weight", {kEmbd, kQ}},
                {"attn_k.weight", {kEmbd, kKv}},
                {"attn_v.weight", {kEmbd, kKv}},
                {"attn_output.weight", {kQ, kEmbd}},
                {"attn_q_norm.weight", {kHeadDim}},
                {"attn_k_norm.weight", {kHeadDim}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_gate_inp.weight", {kEmbd, kExperts}},
                {"ffn_gate_exps.weight", {kEmbd, ff, kExperts}},
                {"ffn_down_exps.weight", {ff, kEmbd, kExperts}},
                {"ffn_up_exps.weight", {kEmbd, ff, kExperts}}});
  return m;
}

std::vector<std::pair<std::string, Shape>> gemma_layer(bool qk_norm) {
  std::vector<std::pair<std::string, Shape>> layer = {{"attn_norm.weight", {kEmbd}},
                                                      {"attn_q.weight", {kEmbd, kQ}},
                                                      {"attn_k.weight", {kEmbd, kKv}},
                                                      {"attn_v.weight", {kEmbd, kKv}},
                                                      {"attn_output.weight", {kQ, kEmbd}},
                                                      {"post_attention_norm.weight", {kEmbd}},
                                                      {"ffn_norm.weight", {kEmbd}},
                                                      {"ffn_gate.weight", {kEmbd, kFf}},
                                                      {"ffn_up.weight", {kEmbd, kFf}},
                                                      {"ffn_down.weight", {kFf, kEmbd}},
                                                      {"post_ffw_norm.weight", {kEmbd}}};
  if (qk_norm) {
    layer.push_back({"attn_q_norm.weight", {kHeadDim}});
    layer.push_back({"attn_k_norm.weight", {kHeadDim}});
  }
  return layer;
}

// src/models/gemma2.cpp and gemma3.cpp: post-norms, explicit head sizes, tied output.
Model gemma_model(const std::string& arch) {
  Model m = base_model(arch);
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.set_u32("attention.key_length", kHeadDim);
  m.set_u32("attention.value_length", kHeadDim);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add_layers(gemma_layer(arch == "gemma3"));
  return m;
}

// src/models/phi3.cpp: fused QKV, ffn_up twice n_ff wide (gate and up), rope factor tensors.
Model phi3_model() {
  Model m = base_model("phi3");
  m.set_u32("attention.head_count_kv", kKvHeads);
  m.set_u32("rope.dimension_count", kHeadDim);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("output_norm.weight", {kEmbd});
  m.add("output.weight", {kEmbd, kVocab});
  m.add("rope_factors_long.weight", {kHeadDim / 2});
  m.add("rope_factors_short.weight", {kHeadDim / 2});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_qkv.weight", {kEmbd, kEmbd + 2 * kKv}},
                {"attn_output.weight", {kEmbd, kEmbd}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_down.weight", {kFf, kEmbd}},
                {"ffn_up.weight", {kEmbd, 2 * kFf}}});
  return m;
}

// src/models/gpt2.cpp: learned positions, layer norms with biases, fused QKV, all heads kv heads.
Model gpt2_model() {
  Model m = base_model("gpt2", false);
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("position_embd.weight", {kEmbd, kCtx});
  m.add("output_norm.weight", {kEmbd});
  m.add("output_norm.bias", {kEmbd});
  m.add("output.weight", {kEmbd, kVocab});
  m.add_layers({{"attn_norm.weight", {kEmbd}},
                {"attn_norm.bias", {kEmbd}},
                {"attn_qkv.weight", {kEmbd, 3 * kEmbd}},
                {"attn_qkv.bias", {3 * kEmbd}},
                {"attn_output.weight", {kEmbd, kEmbd}},
                {"attn_output.bias", {kEmbd}},
                {"ffn_norm.weight", {kEmbd}},
                {"ffn_norm.bias", {kEmbd}},
                {"ffn_down.weight", {kFf, kEmbd}},
                {"ffn_down.bias", {kEmbd}},
                {"ffn_up.weight", {kEmbd, kFf}},
                {"ffn_up.bias", {kFf}}});
  return m;
}

// src/models/bert.cpp: token types, embedding norm, post-norms with biases, no output head.
Model bert_model() {
  Model m = base_model("bert", false);
  m.set("tokenizer.ggml.token_type_count", MetadataValue::of(uint32_t{2}));
  m.add("token_embd.weight", {kEmbd, kVocab});
  m.add("token_types.weight", {kEmbd, 2});
  m.add("position_embd.weight", {kEmbd, kCtx});
  m.add("token_embd_norm.weight", {kEmbd});
  m.add("token_embd_norm.bias", {kEmbd});
  m.add_layers({{"attn_q.weight", {kEmbd, kEmbd}},
                {"attn_q.bias", {kEmbd}},
                {"attn_k.weight", {kEmbd, kEmbd}},
                {"attn_k.bias", {kEmbd}},
                {"attn_v.weight", {kEmbd, kEmbd}},
                {"attn_v.bias", {kEmbd}},
                {"attn_output.weight", {kEmbd, kEmbd}},
                {"attn_output.bias", {kEmbd}},
                {"attn_output_norm.weight", {kEmbd}},
                {"attn_output_norm.bias", {kEmbd}},
                {"ffn_up.weight", {kEmbd, kFf}},
                {"ffn_up.bias", {kFf}},
                {"ffn_down.weight", {kFf, kEmbd}},
                {"ffn_down.bias", {kEmbd}},
                {"layer_output_norm.weight", {kEmbd}},
                {"layer_output_norm.bias", {kEmbd}}});
  return m;
}

GgufBuilder builder_of(const Model& m) {
  GgufBuilder b;
  for (const auto& [key, value] : m.keys) EXPECT_TRUE(b.set(key, value)) << key;
  for (const auto& [name, shape] : m.tensors) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    EXPECT_TRUE(b.add_tensor(name, TensorType::F32, shape, std::vector<std::byte>(static_cast<size_t>(n) * 4)))
        << name;
  }
  return b;
}

// "[32, 40]": a shape as messages print it (ggml order).
std::string fmt_shape(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::vector<std::byte> bytes_of(const Model& m) {
  MemorySink sink;
  const auto written = builder_of(m).write(sink);
  EXPECT_TRUE(written) << written.error().describe();
  return std::move(sink.data);
}

std::vector<Finding> arch_findings(const CheckReport& report) {
  std::vector<Finding> out;
  for (const Finding& f : report.findings) {
    if (f.code.starts_with("arch.")) out.push_back(f);
  }
  return out;
}

std::vector<Finding> check_model(const Model& m) {
  const auto bytes = bytes_of(m);
  return arch_findings(check_bytes(bytes));
}

std::string describe_all(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings) out += "\n  " + f.describe();
  return out;
}

// Exactly one arch.* finding, with this code, severity and subject.
void expect_single(const std::vector<Finding>& findings, std::string_view code, Severity severity,
                   std::string_view subject) {
  ASSERT_EQ(findings.size(), 1u) << describe_all(findings);
  EXPECT_EQ(findings[0].code, code) << describe_all(findings);
  EXPECT_EQ(findings[0].severity, severity) << describe_all(findings);
  EXPECT_EQ(findings[0].subject, subject) << describe_all(findings);
  EXPECT_FALSE(findings[0].message.empty());
}

struct NamedModel {
  std::string name;
  Model (*make)();
};

Model gemma2_model() { return gemma_model("gemma2"); }
Model gemma3_model() { return gemma_model("gemma3"); }

const std::vector<NamedModel>& all_models() {
  static const std::vector<NamedModel> models = {
      {"llama", llama_model},   {"qwen2", qwen2_model},   {"qwen3", qwen3_model}, {"qwen2moe", qwen2moe_model},
      {"qwen3moe", qwen3moe_model}, {"gemma2", gemma2_model}, {"gemma3", gemma3_model}, {"phi3", phi3_model},
      {"gpt2", gpt2_model},     {"bert", bert_model},
  };
  return models;
}

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

TEST_P(EveryArchitecture, VocabularyOnlyCopyHasOneInfoAndNoTensorChecks) {
  Model m = GetParam().make();
  m.tensors.clear();
  m.remove_key(m.arch + ".feed_forward_length");  // keys a model needs are not needed here
  expect_single(check_model(m), "arch.vocabulary_only", Severity::info, "");
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

// Mixtral: llama with experts instead of the dense feed-forward.
Model mixtral_model() {
  Model m = llama_model();
  m.set_u32("expert_count", kExperts);
  m.set_u32("expert_used_count", kExpertsUsed);
  for (uint32_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    for (const char* t : {"ffn_gate.weight", "ffn_down.weight", "ffn_up.weight"}) EXPECT_TRUE(m.drop(p + t));
    m.add(p + "ffn_gate_inp.weight", {kEmbd, kExperts});
    m.add(p + "ffn_gate_exps.weight", {kEmbd, kFf, kExperts});
    m.add(p + "ffn_down_exps.weight", {kFf, kEmbd, kExperts});
    m.add(p + "ffn_up_exps.weight", {kEmbd, kFf, kExperts});
  }
  return m;
}

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

TEST(ArchitectureScope, UnknownArchitectureGetsOneInfo) {
  for (const char* arch : {"falcon", "no-such-architecture"}) {
    Model m = llama_model();
    m.set("general.architecture", MetadataValue::string(arch));
    m.add("blk.0.whatever", {3});
    expect_single(check_model(m), "arch.unknown_architecture", Severity::info, "general.architecture");
  }
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
