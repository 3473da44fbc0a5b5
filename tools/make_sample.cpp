// Writes the sample model kept in samples/: a tiny llama-architecture model with random weights
// and a small SentencePiece-style vocabulary, made with ggufkit's own writer. Deterministic.
//   make-sample OUT.gguf
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ggufkit/writer.h"

using namespace ggufkit;

namespace {

constexpr uint32_t kVocab = 512, kEmbd = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kFf = 192, kCtx = 256;
constexpr uint32_t kHeadDim = kEmbd / kHeads;

// SplitMix64: a fixed, portable sequence.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f; }
};

// float -> IEEE half, round to nearest even (values here are small and normal).
uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // flush tiny values to zero
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

std::vector<std::byte> f16_tensor(Rng& rng, size_t n, float scale) {
  std::vector<std::byte> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = to_half(rng.uniform() * scale);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

std::vector<std::byte> ones_f32(size_t n) {
  std::vector<std::byte> out(n * 4);
  const float one = 1.0f;
  for (size_t i = 0; i < n; ++i) std::memcpy(out.data() + 4 * i, &one, 4);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make-sample OUT.gguf\n");
    return 2;
  }
  GgufBuilder b;
  auto must = [](Expected<void> r) {
    if (!r) {
      std::fprintf(stderr, "make-sample: %s\n", r.error().describe().c_str());
      std::exit(1);
    }
  };
  must(b.set("general.architecture", MetadataValue::string("llama")));
  must(b.set("general.type", MetadataValue::string("model")));
  must(b.set("general.name", MetadataValue::string("ggufkit tiny sample")));
  must(b.set("general.license", MetadataValue::string("CC0-1.0")));
  must(b.set("general.file_type", MetadataValue::of<uint32_t>(1)));  // MOSTLY_F16
  must(b.set("llama.context_length", MetadataValue::of<uint32_t>(kCtx)));
  must(b.set("llama.embedding_length", MetadataValue::of<uint32_t>(kEmbd)));
  must(b.set("llama.block_count", MetadataValue::of<uint32_t>(kLayers)));
  must(b.set("llama.feed_forward_length", MetadataValue::of<uint32_t>(kFf)));
  must(b.set("llama.attention.head_count", MetadataValue::of<uint32_t>(kHeads)));
  must(b.set("llama.attention.head_count_kv", MetadataValue::of<uint32_t>(kKvHeads)));
  must(b.set("llama.attention.layer_norm_rms_epsilon", MetadataValue::of<float>(1e-5f)));
  must(b.set("llama.rope.dimension_count", MetadataValue::of<uint32_t>(kHeadDim)));
  must(b.set("llama.rope.freq_base", MetadataValue::of<float>(10000.0f)));
  must(b.set("llama.vocab_size", MetadataValue::of<uint32_t>(kVocab)));

  // Vocabulary: specials, the 256 byte tokens, then made-up word pieces.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  for (int i = 0; i < 256; ++i) {
    tokens.push_back(fmt::format("<0x{:02X}>", i));
    types.push_back(6);  // byte
  }
  static const char* kPieces[] = {"a", "e", "i", "o", "u", "n", "s", "t", "r", "l", "th", "in", "er", "an", "on"};
  // Every text once: llama.cpp aborts on a vocabulary where two ids share a text.
  std::set<std::string> seen(tokens.begin(), tokens.end());
  for (size_t i = 0; tokens.size() < kVocab; ++i) {
    const std::string piece = std::string(kPieces[i % 15]) + (i >= 15 ? kPieces[(i / 15) % 15] : "");
    std::string token = (i % 2 ? "\xE2\x96\x81" : "") + piece + (i >= 225 ? std::to_string(i) : "");  // U+2581 word start
    if (seen.contains(token)) token += std::to_string(i);
    seen.insert(token);
    tokens.push_back(std::move(token));
    types.push_back(1);  // normal
  }
  std::vector<float> scores(kVocab);
  for (uint32_t i = 0; i < kVocab; ++i) scores[i] = i < 259 ? 0.0f : -static_cast<float>(i - 259);
  must(b.set("tokenizer.ggml.model", MetadataValue::string("llama")));
  must(b.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens)));
  must(b.set("tokenizer.ggml.scores", MetadataValue::array(scores)));
  must(b.set("tokenizer.ggml.token_type", MetadataValue::array(types)));
  must(b.set("tokenizer.ggml.bos_token_id", MetadataValue::of<uint32_t>(1)));
  must(b.set("tokenizer.ggml.eos_token_id", MetadataValue::of<uint32_t>(2)));
  must(b.set("tokenizer.ggml.unknown_token_id", MetadataValue::of<uint32_t>(0)));
  must(b.set("tokenizer.ggml.add_bos_token", MetadataValue::of(true)));
  must(b.set("tokenizer.chat_template",
             MetadataValue::string("{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>\n{% endfor %}"
                                   "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")));

  // Tensor bytes must outlive the builder's write: keep them all here.
  Rng rng{20261130};
  std::vector<std::vector<std::byte>> storage;
  auto add = [&](const std::string& name, TensorType type, std::vector<int64_t> shape, std::vector<std::byte> bytes) {
    storage.push_back(std::move(bytes));
    must(b.add_tensor(name, type, shape, storage.back()));
  };
  storage.reserve(64);
  const float w = 1.0f / std::sqrt(static_cast<float>(kEmbd));
  add("token_embd.weight", TensorType::F16, {kEmbd, kVocab}, f16_tensor(rng, size_t{kEmbd} * kVocab, 1.0f));
  add("output_norm.weight", TensorType::F32, {kEmbd}, ones_f32(kEmbd));
  for (uint32_t l = 0; l < kLayers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    add(p + "attn_norm.weight", TensorType::F32, {kEmbd}, ones_f32(kEmbd));
    add(p + "attn_q.weight", TensorType::F16, {kEmbd, kEmbd}, f16_tensor(rng, size_t{kEmbd} * kEmbd, w));
    add(p + "attn_k.weight", TensorType::F16, {kEmbd, kKvHeads * kHeadDim},
        f16_tensor(rng, size_t{kEmbd} * kKvHeads * kHeadDim, w));
    add(p + "attn_v.weight", TensorType::F16, {kEmbd, kKvHeads * kHeadDim},
        f16_tensor(rng, size_t{kEmbd} * kKvHeads * kHeadDim, w));
    add(p + "attn_output.weight", TensorType::F16, {kEmbd, kEmbd}, f16_tensor(rng, size_t{kEmbd} * kEmbd, w));
    add(p + "ffn_norm.weight", TensorType::F32, {kEmbd}, ones_f32(kEmbd));
    add(p + "ffn_gate.weight", TensorType::F16, {kEmbd, kFf}, f16_tensor(rng, size_t{kEmbd} * kFf, w));
    add(p + "ffn_up.weight", TensorType::F16, {kEmbd, kFf}, f16_tensor(rng, size_t{kEmbd} * kFf, w));
    add(p + "ffn_down.weight", TensorType::F16, {kFf, kEmbd}, f16_tensor(rng, size_t{kFf} * kEmbd, w));
  }
  must(b.write_file(argv[1]));
  return 0;
}
