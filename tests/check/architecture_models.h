// Small models laid out as llama.cpp's loader creates them, one per architecture gguf check
// knows, written here from llama.cpp's src/models/<arch>.cpp (not from our table), and helpers to
// check them. Shared by test_architecture.cpp and test_architecture_oracle.cpp.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ggufkit/check.h"
#include "ggufkit/writer.h"

namespace ggufkit::arch_test {

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

inline std::vector<std::string> token_list(int64_t n) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) {
    std::string token = "t";  // not "t" + to_string(i): GCC 12 warns falsely (-Wrestrict) on that
    token += std::to_string(i);
    out.push_back(std::move(token));
  }
  return out;
}

// The keys llama.cpp's load_hparams reads for every architecture, and a 16-token vocabulary.
inline Model base_model(const std::string& arch, bool rms_norm = true) {
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
inline Model llama_model() {
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
inline Model qwen2_model() {
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
inline Model qwen3_model() {
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
inline Model qwen2moe_model() {
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
inline Model qwen3moe_model() {
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

inline std::vector<std::pair<std::string, Shape>> gemma_layer(bool qk_norm) {
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
inline Model gemma_model(const std::string& arch) {
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
inline Model phi3_model() {
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
inline Model gpt2_model() {
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
inline Model bert_model() {
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

inline GgufBuilder builder_of(const Model& m) {
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
inline std::string fmt_shape(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

inline std::vector<std::byte> bytes_of(const Model& m) {
  MemorySink sink;
  const auto written = builder_of(m).write(sink);
  EXPECT_TRUE(written) << written.error().describe();
  return std::move(sink.data);
}

inline std::vector<Finding> arch_findings(const CheckReport& report) {
  std::vector<Finding> out;
  for (const Finding& f : report.findings) {
    if (f.code.starts_with("arch.")) out.push_back(f);
  }
  return out;
}

inline std::vector<Finding> check_model(const Model& m) {
  const auto bytes = bytes_of(m);
  return arch_findings(check_bytes(bytes));
}

inline std::string describe_all(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings) out += "\n  " + f.describe();
  return out;
}

// Exactly one arch.* finding, with this code, severity and subject.
inline void expect_single(const std::vector<Finding>& findings, std::string_view code, Severity severity,
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

inline Model gemma2_model() { return gemma_model("gemma2"); }
inline Model gemma3_model() { return gemma_model("gemma3"); }

inline const std::vector<NamedModel>& all_models() {
  static const std::vector<NamedModel> models = {
      {"llama", llama_model},   {"qwen2", qwen2_model},   {"qwen3", qwen3_model}, {"qwen2moe", qwen2moe_model},
      {"qwen3moe", qwen3moe_model}, {"gemma2", gemma2_model}, {"gemma3", gemma3_model}, {"phi3", phi3_model},
      {"gpt2", gpt2_model},     {"bert", bert_model},
  };
  return models;
}

// Mixtral: llama with experts instead of the dense feed-forward.
inline Model mixtral_model() {
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

}  // namespace ggufkit::arch_test
