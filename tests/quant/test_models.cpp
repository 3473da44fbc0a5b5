#include "test_models.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace {

// Random weights: norm weights near 1, the others small, stored as F32, F16 or BF16.
struct RandomWeights {
  std::mt19937 rng{1234};
  std::normal_distribution<float> normal{0.0f, 0.05f};

  std::vector<std::byte> operator()(const std::string& name, int64_t n, ggufkit::TensorType type) {
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = name.find("norm") != std::string::npos ? 1.0f + normal(rng) : normal(rng);
    std::vector<std::byte> bytes(static_cast<size_t>(*ggufkit::row_size(type, n)));
    if (type == ggufkit::TensorType::F32) {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    } else {
      (void)ggufkit::quantize(type, values, bytes, n);
    }
    return bytes;
  }
};

int64_t elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

std::filesystem::path write_test_model(const std::filesystem::path& dir, const ModelShape& shape) {
  using namespace ggufkit;
  namespace fs = std::filesystem;
  const auto shared = ggufkit::test::shared_dir();
  if (!shared) return {};
  const auto tiny = GgufFile::open(*shared / "corpus/tiny-llama/tiny-llama-f32.gguf");
  if (!tiny) return {};
  GgufBuilder b;
  const std::string& a = shape.arch;
  constexpr uint32_t n_embd = 256, n_ff = 256, n_head = 8, n_head_kv = 2;
  // As many embedding rows as the vocabulary has tokens: llama.cpp loads and runs the model.
  const auto tokens = tiny->get("tokenizer.ggml.tokens");
  const auto token_array = tokens ? tokens->as_array() : std::nullopt;
  if (!token_array) return {};
  const auto n_vocab = static_cast<int64_t>(token_array->size());
  (void)b.set("general.architecture", MetadataValue::string(a));
  (void)b.set("general.name", MetadataValue::string(shape.label()));
  (void)b.set(a + ".context_length", MetadataValue::of<uint32_t>(512));
  (void)b.set(a + ".embedding_length", MetadataValue::of<uint32_t>(n_embd));
  (void)b.set(a + ".feed_forward_length", MetadataValue::of<uint32_t>(n_ff));
  (void)b.set(a + ".block_count", MetadataValue::of<uint32_t>(shape.n_layer));
  (void)b.set(a + ".attention.head_count", MetadataValue::of<uint32_t>(n_head));
  (void)b.set(a + ".attention.head_count_kv", MetadataValue::of<uint32_t>(n_head_kv));
  (void)b.set(a + ".attention.layer_norm_rms_epsilon", MetadataValue::of<float>(1e-5f));
  (void)b.set(a + ".attention.layer_norm_epsilon", MetadataValue::of<float>(1e-5f));
  (void)b.set(a + ".rope.dimension_count", MetadataValue::of<uint32_t>(n_embd / n_head));
  if (shape.n_expert > 0) {
    (void)b.set(a + ".expert_count", MetadataValue::of<uint32_t>(shape.n_expert));
    (void)b.set(a + ".expert_used_count", MetadataValue::of<uint32_t>(2));
  }
  (void)b.set("general.file_type", MetadataValue::of<uint32_t>(0));
  for (const KeyValue& kv : tiny->metadata()) {
    if (kv.key.starts_with("tokenizer.")) (void)b.set(kv.key, MetadataValue::copy_of(kv.value));
  }
  RandomWeights weights;
  const auto add = [&](const std::string& name, std::vector<int64_t> dims) {
    (void)b.add_tensor(name, TensorType::F32, dims, weights(name, elements(dims), TensorType::F32));
  };
  const int64_t kv_width = n_embd / n_head * n_head_kv, e = shape.n_expert;
  add("token_embd.weight", {n_embd, n_vocab});
  add("output_norm.weight", {n_embd});
  if (a == "falcon") add("output_norm.bias", {n_embd});
  if (shape.output) add("output.weight", {n_embd, n_vocab});
  for (uint32_t il = 0; il < shape.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {n_embd});
    if (a == "falcon") {
      add(p + "attn_norm.bias", {n_embd});
      add(p + "attn_qkv.weight", {n_embd, n_embd + 2 * kv_width});
    } else {
      add(p + "attn_q.weight", {n_embd, n_embd});
      add(p + "attn_k.weight", {n_embd, kv_width});
      add(p + "attn_v.weight", {n_embd, kv_width});
      add(p + "ffn_norm.weight", {n_embd});
    }
    add(p + "attn_output.weight", {n_embd, n_embd});
    if (e > 0) {
      add(p + "ffn_gate_inp.weight", {n_embd, e});
      add(p + "ffn_gate_exps.weight", {n_embd, n_ff, e});
      add(p + "ffn_up_exps.weight", {n_embd, n_ff, e});
      add(p + "ffn_down_exps.weight", {n_ff, n_embd, e});
    } else {
      if (a != "falcon") add(p + "ffn_gate.weight", {n_embd, n_ff});
      add(p + "ffn_up.weight", {n_embd, n_ff});
      add(p + "ffn_down.weight", {n_ff, n_embd});
    }
  }
  const fs::path path = dir / (shape.label() + ".gguf");
  if (!b.write_file(path)) return {};
  return path;
}


std::string test_name(std::string label) {
  std::replace(label.begin(), label.end(), '-', '_');
  return label;
}

std::string ConvertedMoe::label() const {
  return family + "-" + std::to_string(n_expert) + "x-" + std::string(ggufkit::type_name(type));
}

std::filesystem::path write_converted_moe(const std::filesystem::path& dir, const ConvertedMoe& model) {
  using namespace ggufkit;
  const bool mixtral = model.family == "mixtral", qwen2 = model.family == "qwen2moe", qwen3 = model.family == "qwen3moe";
  if (!mixtral && !qwen2 && !qwen3) return {};
  const std::string a = mixtral ? "llama" : model.family;
  // Mixtral: 8 heads over 2 kv heads; Qwen1.5-MoE: as many kv heads as heads; Qwen3-MoE: 4 heads
  // of 128 over 1 kv head (q wider than the embedding).
  constexpr uint32_t n_layer = 2, n_embd = 256, n_ff_exp = 256, n_ff_shexp = 512, n_vocab = 512;
  const uint32_t n_head = qwen3 ? 4 : 8, n_head_kv = mixtral ? 2 : qwen2 ? 8 : 1;
  const uint32_t head_dim = qwen3 ? 128 : n_embd / n_head;
  const int64_t q_out = int64_t{n_head} * head_dim, kv_out = int64_t{n_head_kv} * head_dim, e = model.n_expert;
  GgufBuilder b;
  const auto u32 = [&](const std::string& key, uint32_t v) { (void)b.set(key, MetadataValue::of<uint32_t>(v)); };
  const auto str = [&](const std::string& key, std::string_view v) { (void)b.set(key, MetadataValue::string(v)); };
  // The keys the converter writes: TextModel's, the family's, the tokenizer's.
  str("general.architecture", a);
  str("general.type", "model");
  str("general.name", model.label());
  u32("general.file_type", model.type == TensorType::BF16 ? 32 : 1);
  u32("general.quantization_version", 2);
  u32(a + ".block_count", n_layer);
  u32(a + ".context_length", 4096);
  u32(a + ".embedding_length", n_embd);
  u32(a + ".feed_forward_length", mixtral ? n_ff_exp : 1024);
  u32(a + ".attention.head_count", n_head);
  u32(a + ".attention.head_count_kv", n_head_kv);
  (void)b.set(a + ".rope.freq_base", MetadataValue::of<float>(mixtral ? 1e6f : 1e4f));
  (void)b.set(a + ".attention.layer_norm_rms_epsilon", MetadataValue::of<float>(mixtral ? 1e-5f : 1e-6f));
  if (qwen3) {
    u32(a + ".attention.key_length", head_dim);
    u32(a + ".attention.value_length", head_dim);
  }
  u32(a + ".expert_count", model.n_expert);
  u32(a + ".expert_used_count", 2);
  if (mixtral) {
    u32(a + ".vocab_size", n_vocab);
    u32(a + ".rope.dimension_count", head_dim);
  } else {
    u32(a + ".expert_feed_forward_length", n_ff_exp);
    if (qwen2) u32(a + ".expert_shared_feed_forward_length", n_ff_shexp);
  }
  // A vocabulary of its own: SentencePiece's <unk> <s> </s> for Mixtral, GPT-2 BPE for Qwen.
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;
  std::vector<float> scores;
  for (uint32_t i = 0; i < n_vocab; ++i) {
    const bool control = mixtral ? i < 3 : i + 2 >= n_vocab;
    tokens.push_back(mixtral && i < 3 ? std::string(i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>")
                     : control       ? "<|endoftext" + std::to_string(i) + "|>"
                                     : "t" + std::to_string(i));
    token_types.push_back(control ? (mixtral && i == 0 ? 2 : 3) : 1);
    scores.push_back(-static_cast<float>(i));
  }
  str("tokenizer.ggml.model", mixtral ? "llama" : "gpt2");
  str("tokenizer.ggml.pre", mixtral ? "default" : "qwen2");
  (void)b.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  if (mixtral) (void)b.set("tokenizer.ggml.scores", MetadataValue::array(scores));
  (void)b.set("tokenizer.ggml.token_type", MetadataValue::array(token_types));
  if (!mixtral) (void)b.set("tokenizer.ggml.merges", MetadataValue::string_array(std::vector<std::string>{"t 1", "t1 0", "t 2"}));
  u32("tokenizer.ggml.bos_token_id", mixtral ? 1 : n_vocab - 2);
  u32("tokenizer.ggml.eos_token_id", mixtral ? 2 : n_vocab - 2);
  if (!mixtral) u32("tokenizer.ggml.padding_token_id", n_vocab - 2);
  (void)b.set("tokenizer.ggml.add_bos_token", MetadataValue::of<bool>(mixtral));

  RandomWeights weights;
  const auto add = [&](const std::string& name, std::vector<int64_t> dims, bool router = false) {
    // 1-D tensors (norms, biases) and routers stay F32, as the converter writes them.
    const TensorType type = dims.size() == 1 || router ? TensorType::F32 : model.type;
    (void)b.add_tensor(name, type, dims, weights(name, elements(dims), type));
  };
  add("token_embd.weight", {n_embd, n_vocab});
  for (uint32_t il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {n_embd});
    add(p + "attn_q.weight", {n_embd, q_out});
    if (qwen2) add(p + "attn_q.bias", {q_out});
    if (qwen3) add(p + "attn_q_norm.weight", {head_dim});
    add(p + "attn_k.weight", {n_embd, kv_out});
    if (qwen2) add(p + "attn_k.bias", {kv_out});
    if (qwen3) add(p + "attn_k_norm.weight", {head_dim});
    add(p + "attn_v.weight", {n_embd, kv_out});
    if (qwen2) add(p + "attn_v.bias", {kv_out});
    add(p + "attn_output.weight", {q_out, n_embd});
    add(p + "ffn_norm.weight", {n_embd});
    add(p + "ffn_gate_inp.weight", {n_embd, e}, true);
    // The experts stacked as the converter stacks them: Mixtral's w1, w2, w3; Qwen's down, gate, up.
    const auto gate = [&] { add(p + "ffn_gate_exps.weight", {n_embd, n_ff_exp, e}); };
    const auto up = [&] { add(p + "ffn_up_exps.weight", {n_embd, n_ff_exp, e}); };
    const auto down = [&] { add(p + "ffn_down_exps.weight", {n_ff_exp, n_embd, e}); };
    if (mixtral) {
      gate(), down(), up();
    } else {
      down(), gate(), up();
    }
    if (qwen2) {
      add(p + "ffn_gate_shexp.weight", {n_embd, n_ff_shexp});
      add(p + "ffn_up_shexp.weight", {n_embd, n_ff_shexp});
      add(p + "ffn_down_shexp.weight", {n_ff_shexp, n_embd});
      add(p + "ffn_gate_inp_shexp.weight", {n_embd, 1}, true);
    }
  }
  add("output_norm.weight", {n_embd});
  if (!qwen3) add("output.weight", {n_embd, n_vocab});
  const std::filesystem::path path = dir / (model.label() + ".gguf");
  if (!b.write_file(path)) return {};
  return path;
}
