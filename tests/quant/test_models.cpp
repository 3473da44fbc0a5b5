#include "test_models.h"

#include <cstring>
#include <random>
#include <vector>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "test_support.h"

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
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const auto add = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<std::byte> bytes(static_cast<size_t>(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float v = name.find("norm") != std::string::npos ? 1.0f + normal(rng) : normal(rng);
      std::memcpy(bytes.data() + i * 4, &v, sizeof v);
    }
    (void)b.add_tensor(name, TensorType::F32, dims, std::move(bytes));
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

