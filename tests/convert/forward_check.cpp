#include "forward_check.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>

#include <nlohmann/json.hpp>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "reference_forward.h"
#include "test_support.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> float_bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace

std::vector<float> permute_rope_rows(const std::vector<float>& weight, int64_t n_heads, int64_t head_dim,
                                     int64_t in_features) {
  std::vector<float> out(weight.size());
  const int64_t half = head_dim / 2;
  for (int64_t head = 0; head < n_heads; ++head) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t from = head * head_dim + j * half + i;
        const int64_t to = head * head_dim + 2 * i + j;
        std::memcpy(&out[static_cast<size_t>(to * in_features)], &weight[static_cast<size_t>(from * in_features)],
                    static_cast<size_t>(in_features) * sizeof(float));
      }
    }
  }
  return out;
}

std::string write_llama_gguf_by_hand(const TinyLlama& model, const fs::path& vocab_gguf, const fs::path& out) {
  auto vocab = GgufFile::open(vocab_gguf);
  if (!vocab) return "cannot open " + vocab_gguf.string() + ": " + vocab.error().describe();
  const TinyLlamaConfig& c = model.config;
  GgufBuilder b;
  auto u32 = [](int64_t v) { return MetadataValue::of(static_cast<uint32_t>(v)); };
  std::vector<std::pair<std::string, MetadataValue>> keys = {
      {"general.architecture", MetadataValue::string("llama")},
      {"general.name", MetadataValue::string("tiny random llama")},
      {"llama.block_count", u32(c.num_hidden_layers)},
      {"llama.context_length", u32(c.max_position_embeddings)},
      {"llama.embedding_length", u32(c.hidden_size)},
      {"llama.feed_forward_length", u32(c.intermediate_size)},
      {"llama.attention.head_count", u32(c.num_attention_heads)},
      {"llama.attention.head_count_kv", u32(c.num_key_value_heads)},
      {"llama.rope.freq_base", MetadataValue::of(static_cast<float>(c.rope_theta))},
      {"llama.attention.layer_norm_rms_epsilon", MetadataValue::of(static_cast<float>(c.rms_norm_eps))},
      {"general.file_type", u32(0)},  // LLAMA_FTYPE_ALL_F32
      {"llama.vocab_size", u32(c.vocab_size)},
      {"llama.rope.dimension_count", u32(c.head_dim())},
  };
  for (auto& [key, value] : keys) {
    if (auto r = b.set(key, std::move(value)); !r) return r.error().describe();
  }
  for (const KeyValue& kv : vocab->metadata()) {
    if (!kv.key.starts_with("tokenizer.")) continue;
    if (auto r = b.set(kv.key, MetadataValue::copy_of(kv.value)); !r) return r.error().describe();
  }

  // PyTorch [out, in] row-major is ggml's [in, out]: the bytes stay, the shape is reversed.
  auto add = [&](const std::string& name, const HfTensor& t, std::vector<float> values) -> std::string {
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());
    auto r = b.add_tensor(name, TensorType::F32, std::span<const int64_t>(shape), float_bytes(values));
    return r ? "" : r.error().describe();
  };
  std::string err;
  auto copy = [&](const std::string& gguf_name, const std::string& hf_name) {
    if (err.empty()) err = add(gguf_name, model.at(hf_name), model.at(hf_name).values);
  };
  copy("token_embd.weight", "model.embed_tokens.weight");
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string hf = "model.layers." + std::to_string(layer) + ".";
    const std::string blk = "blk." + std::to_string(layer) + ".";
    copy(blk + "attn_norm.weight", hf + "input_layernorm.weight");
    const HfTensor& q = model.at(hf + "self_attn.q_proj.weight");
    const HfTensor& k = model.at(hf + "self_attn.k_proj.weight");
    if (err.empty()) err = add(blk + "attn_q.weight", q, permute_rope_rows(q.values, c.num_attention_heads, c.head_dim(), c.hidden_size));
    if (err.empty()) err = add(blk + "attn_k.weight", k, permute_rope_rows(k.values, c.num_key_value_heads, c.head_dim(), c.hidden_size));
    copy(blk + "attn_v.weight", hf + "self_attn.v_proj.weight");
    copy(blk + "attn_output.weight", hf + "self_attn.o_proj.weight");
    copy(blk + "ffn_norm.weight", hf + "post_attention_layernorm.weight");
    copy(blk + "ffn_gate.weight", hf + "mlp.gate_proj.weight");
    copy(blk + "ffn_down.weight", hf + "mlp.down_proj.weight");
    copy(blk + "ffn_up.weight", hf + "mlp.up_proj.weight");
  }
  copy("output_norm.weight", "model.norm.weight");
  if (!c.tie_word_embeddings) copy("output.weight", "lm_head.weight");
  if (!err.empty()) return err;
  WriteOptions options;
  options.sync = false;
  if (auto r = b.write_file(out, options); !r) return r.error().describe();
  return {};
}

fs::path llama_spm_vocab_path() {
  const auto shared = shared_dir();
  return shared ? *shared / "corpus/vocab/ggml-vocab-llama-spm.gguf" : fs::path();
}

std::vector<int32_t> test_tokens(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens{1};
  while (tokens.size() < count) tokens.push_back(static_cast<int32_t>(3 + rng() % (32000 - 3)));
  return tokens;
}

void expect_logits_near_reference(const std::vector<std::vector<float>>& actual,
                                  const std::vector<std::vector<double>>& reference, double tolerance,
                                  const std::string& label) {
  ASSERT_EQ(actual.size(), reference.size());
  double worst_scaled = 0, worst_relative = 0;
  for (size_t t = 0; t < actual.size(); ++t) {
    const LogitsDistance d = logits_distance(actual[t], reference[t]);
    EXPECT_LE(d.scaled, tolerance) << "position " << t << ": " << describe(d);
    EXPECT_LE(d.max_relative, tolerance) << "position " << t << ": " << describe(d);
    worst_scaled = std::max(worst_scaled, d.scaled);
    worst_relative = std::max(worst_relative, d.max_relative);
  }
  std::cout << "[ measured ] " << label << ": max|diff|/max|ref| " << worst_scaled << ", per-value relative "
            << worst_relative << " over " << actual.size() << " positions\n";
}

NextTokens run_node_next_tokens(const fs::path& model, const std::vector<int32_t>& tokens) {
  std::string list;
  for (const int32_t t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  NextTokens r{run_node_script("convert/llama_next_tokens.mjs", {model.string(), list}), {}, {}};
  if (r.run.status != 0) return r;
  // The JSON line is the last line of the output (llama.cpp may log before it).
  const size_t at = r.run.out.rfind("{\"next\"");
  if (at == std::string::npos) return r;
  const auto json = nlohmann::json::parse(r.run.out.substr(at), nullptr, false);
  if (json.is_discarded()) return r;
  for (const auto& position : json["next"]) {
    r.greedy.push_back(position["token"].is_number() ? position["token"].get<int32_t>() : -1);
    const auto& top = position["top"];
    r.top_probability.push_back(top.empty() ? -1.0 : top[0][1].get<double>());
  }
  return r;
}

}  // namespace ggufkit::test
