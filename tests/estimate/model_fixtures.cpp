#include "model_fixtures.h"

#include <ggufkit/writer.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace ggufkit::test {
namespace {

// The tensor type of a weight: Q4_K where rows allow it, Q8_0 else, F32 for vectors (as a
// Q4_K_M-like mix; the size is what matters).
TensorType type_for(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return TensorType::F32;
  if (shape[0] % 256 == 0) return TensorType::Q4_K;
  if (shape[0] % 32 == 0) return TensorType::Q8_0;
  return TensorType::F16;
}

class FileWriter final : public ByteSink {
 public:
  explicit FileWriter(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot create " + path.string());
  }
  ~FileWriter() override { ::close(fd_); }
  Expected<void> write(std::span<const std::byte> bytes) override {
    if (::write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      return make_error(ErrorCode::io_error, std::nullopt, {}, "short write");
    }
    return {};
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

const std::vector<ModelShape>& grid_models() {
  static const std::vector<ModelShape> models = [] {
    std::vector<ModelShape> m;
    m.push_back({.name = "Llama-3.1-8B", .arch = "llama", .n_vocab = 128256, .n_embd = 4096, .n_layer = 32,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 14336});
    m.push_back({.name = "Mixtral-8x7B", .arch = "llama", .n_vocab = 32000, .n_embd = 4096, .n_layer = 32,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 14336, .ctx_train = 32768, .n_expert = 8, .n_expert_used = 2});
    m.push_back({.name = "Qwen2.5-7B", .arch = "qwen2", .n_vocab = 152064, .n_embd = 3584, .n_layer = 28,
                 .n_head = 28, .n_head_kv = 4, .n_ff = 18944, .ctx_train = 32768, .qkv_bias = true});
    m.push_back({.name = "Qwen3-8B", .arch = "qwen3", .n_vocab = 151936, .n_embd = 4096, .n_layer = 36,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 12288, .ctx_train = 40960, .head_dim = 128});
    m.push_back({.name = "Qwen3-30B-A3B", .arch = "qwen3moe", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48,
                 .n_head = 32, .n_head_kv = 4, .n_ff = 6144, .ctx_train = 40960, .head_dim = 128, .n_expert = 128,
                 .n_expert_used = 8, .n_ff_exp = 768, .tied = false});
    m.push_back({.name = "Gemma-2-9B", .arch = "gemma2", .n_vocab = 256000, .n_embd = 3584, .n_layer = 42,
                 .n_head = 16, .n_head_kv = 8, .n_ff = 14336, .ctx_train = 8192, .head_dim = 256,
                 .sliding_window = 4096, .tied = true});
    m.push_back({.name = "Gemma-3-27B", .arch = "gemma3", .n_vocab = 262208, .n_embd = 5376, .n_layer = 62,
                 .n_head = 32, .n_head_kv = 16, .n_ff = 21504, .head_dim = 128, .sliding_window = 1024,
                 .tied = true});
    m.push_back({.name = "gpt-oss-20b", .arch = "gpt-oss", .n_vocab = 201088, .n_embd = 2880, .n_layer = 24,
                 .n_head = 64, .n_head_kv = 8, .n_ff = 0, .head_dim = 64, .n_expert = 32, .n_expert_used = 4,
                 .n_ff_exp = 2880, .sliding_window = 128});
    m.push_back({.name = "Phi-3-mini-4k", .arch = "phi3", .n_vocab = 32064, .n_embd = 3072, .n_layer = 32,
                 .n_head = 32, .n_head_kv = 32, .n_ff = 8192, .ctx_train = 4096});
    m.push_back({.name = "Command-R7B", .arch = "cohere2", .n_vocab = 256000, .n_embd = 4096, .n_layer = 32,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 14336, .sliding_window = 4096, .tied = true});
    m.push_back({.name = "DeepSeek-V2-Lite", .arch = "deepseek2", .n_vocab = 102400, .n_embd = 2048, .n_layer = 27,
                 .n_head = 16, .n_head_kv = 1, .n_ff = 10944, .ctx_train = 163840, .n_expert = 64,
                 .n_expert_used = 6, .n_ff_exp = 1408, .n_expert_shared = 2, .n_dense_lead = 1,
                 .kv_lora_rank = 512, .rope_dim = 64, .key_length_mla = 192, .value_length_mla = 128});
    m.push_back({.name = "Mistral-Small-3.1-24B", .arch = "mistral3", .n_vocab = 131072, .n_embd = 5120, .n_layer = 40,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 32768, .head_dim = 128});
    m.push_back({.name = "SmolLM3-3B", .arch = "smollm3", .n_vocab = 128256, .n_embd = 2048, .n_layer = 36,
                 .n_head = 16, .n_head_kv = 4, .n_ff = 11008, .ctx_train = 65536, .tied = true});
    m.push_back({.name = "Granite-3.3-8B", .arch = "granite", .n_vocab = 49159, .n_embd = 4096, .n_layer = 40,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 12800, .tied = true});
    m.push_back({.name = "bge-small-en-v1.5", .arch = "bert", .n_vocab = 30522, .n_embd = 384, .n_layer = 12,
                 .n_head = 12, .n_head_kv = 12, .n_ff = 1536, .ctx_train = 512, .tied = true});
    m.push_back({.name = "nomic-embed-text-v1.5", .arch = "nomic-bert", .n_vocab = 30522, .n_embd = 768,
                 .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072, .ctx_train = 2048, .tied = true});
    m.push_back({.name = "Gemma-7B", .arch = "gemma", .n_vocab = 256000, .n_embd = 3072, .n_layer = 28, .n_head = 16,
                 .n_head_kv = 16, .n_ff = 24576, .ctx_train = 8192, .head_dim = 256, .tied = true});
    m.push_back({.name = "Seed-OSS-36B", .arch = "seed_oss", .n_vocab = 155136, .n_embd = 5120, .n_layer = 64,
                 .n_head = 80, .n_head_kv = 8, .n_ff = 27648, .ctx_train = 524288, .head_dim = 128});
    // EXAONE-4.0-32B: 3 sliding-window layers of 4 (its 64 layers select the window in llama.cpp).
    m.push_back({.name = "EXAONE-4.0-32B", .arch = "exaone4", .n_vocab = 102400, .n_embd = 5120, .n_layer = 64,
                 .n_head = 40, .n_head_kv = 8, .n_ff = 27392, .head_dim = 128, .sliding_window = 4096, .tied = true});
    // Olmo-3-7B, stored as olmo2 with a sliding window (3 layers of 4).
    m.push_back({.name = "Olmo-3-7B", .arch = "olmo2", .n_vocab = 100278, .n_embd = 4096, .n_layer = 32, .n_head = 32,
                 .n_head_kv = 32, .n_ff = 11008, .ctx_train = 65536, .sliding_window = 4096});
    m.push_back({.name = "GLM-4-9B-0414", .arch = "glm4", .n_vocab = 151552, .n_embd = 4096, .n_layer = 40, .n_head = 32,
                 .n_head_kv = 2, .n_ff = 13696, .ctx_train = 32768, .head_dim = 128});
    m.push_back({.name = "c4ai-command-r-v01", .arch = "command-r", .n_vocab = 256000, .n_embd = 8192, .n_layer = 40,
                 .n_head = 64, .n_head_kv = 64, .n_ff = 22528, .tied = true});
    m.push_back({.name = "LFM2-1.2B", .arch = "lfm2", .n_vocab = 65536, .n_embd = 2048, .n_layer = 16, .n_head = 32,
                 .n_head_kv = 8, .n_ff = 8192, .ctx_train = 128000, .attention_layers = {2, 5, 8, 10, 12, 14},
                 .shortconv_l_cache = 3, .tied = true});
    m.push_back({.name = "ERNIE-4.5-0.3B", .arch = "ernie4_5", .n_vocab = 103424, .n_embd = 1024, .n_layer = 18,
                 .n_head = 16, .n_head_kv = 2, .n_ff = 3072, .head_dim = 128, .tied = true});
    // ERNIE-4.5-21B-A3B: a dense first layer, then experts with two shared ones in every layer.
    m.push_back({.name = "ERNIE-4.5-21B-A3B", .arch = "ernie4_5-moe", .n_vocab = 103424, .n_embd = 2560,
                 .n_layer = 28, .n_head = 20, .n_head_kv = 4, .n_ff = 12288, .head_dim = 128, .n_expert = 64,
                 .n_expert_used = 6, .n_ff_exp = 1536, .n_ff_shexp = 3072, .n_dense_lead = 1, .tied = true});
    // granite-3.1-3b-a800m: the experts' width is feed_forward_length.
    m.push_back({.name = "Granite-3.1-3B-A800M", .arch = "granitemoe", .n_vocab = 49155, .n_embd = 1536,
                 .n_layer = 32, .n_head = 24, .n_head_kv = 8, .n_ff = 512, .n_expert = 40, .n_expert_used = 8,
                 .tied = true});
    m.push_back({.name = "Hunyuan-A13B", .arch = "hunyuan-moe", .n_vocab = 128167, .n_embd = 4096, .n_layer = 32,
                 .n_head = 32, .n_head_kv = 8, .n_ff = 3072, .ctx_train = 32768, .head_dim = 128, .n_expert = 64,
                 .n_expert_used = 8, .n_ff_exp = 3072, .n_expert_shared = 1, .tied = true});
    // GLM-4.5-Air: 46 layers and a NextN (multi-token prediction) block.
    m.push_back({.name = "GLM-4.5-Air", .arch = "glm4moe", .n_vocab = 151552, .n_embd = 4096, .n_layer = 47,
                 .n_head = 96, .n_head_kv = 8, .n_ff = 10944, .head_dim = 128, .n_expert = 128, .n_expert_used = 8,
                 .n_ff_exp = 1408, .n_expert_shared = 1, .n_dense_lead = 1, .n_nextn = 1, .qkv_bias = true});
    m.push_back({.name = "MiniMax-M2", .arch = "minimax-m2", .n_vocab = 200064, .n_embd = 3072, .n_layer = 62,
                 .n_head = 48, .n_head_kv = 8, .n_ff = 1536, .ctx_train = 196608, .head_dim = 128, .n_expert = 256,
                 .n_expert_used = 8, .n_ff_exp = 1536});
    m.push_back({.name = "Mamba2-2.7B", .arch = "mamba2", .n_vocab = 50288, .n_embd = 2560, .n_layer = 64,
                 .n_head = 0, .n_head_kv = 0, .n_ff = 0, .ctx_train = 1048576, .ssm_conv = 4, .ssm_inner = 5120,
                 .ssm_state = 128, .ssm_dt_rank = 80, .ssm_groups = 1});
    // Qwen3-Next-80B's attention and gated DeltaNet shapes with a dense feed-forward (qwen35).
    m.push_back({.name = "Qwen3.5-hybrid", .arch = "qwen35", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48,
                 .n_head = 16, .n_head_kv = 2, .n_ff = 5120, .ctx_train = 262144, .head_dim = 256, .ssm_conv = 4,
                 .ssm_inner = 4096, .ssm_state = 128, .ssm_dt_rank = 32, .ssm_groups = 16});
    // Llama-4-Scout-17B-16E: every layer MoE (interleave step 1) with a shared expert, chunked
    // attention of 8192 tokens in 3 layers of 4 (context_length lowered from its 10M).
    m.push_back({.name = "Llama-4-Scout", .arch = "llama4", .n_vocab = 202048, .n_embd = 5120, .n_layer = 48,
                 .n_head = 40, .n_head_kv = 8, .n_ff = 16384, .head_dim = 128, .n_expert = 16, .n_expert_used = 1,
                 .n_ff_exp = 8192, .n_ff_shexp = 8192, .sliding_window = 8192});
    // Qwen3-Next-80B-A3B's shapes as qwen35moe: 512 experts of 512, 10 used, one shared.
    m.push_back({.name = "Qwen3.5-MoE-hybrid", .arch = "qwen35moe", .n_vocab = 151936, .n_embd = 2048,
                 .n_layer = 48, .n_head = 16, .n_head_kv = 2, .n_ff = 5120, .ctx_train = 262144, .head_dim = 256,
                 .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512, .n_ff_shexp = 512, .ssm_conv = 4,
                 .ssm_inner = 4096, .ssm_state = 128, .ssm_dt_rank = 32, .ssm_groups = 16});
    return m;
  }();
  return models;
}

const ModelShape& grid_model(const std::string& name) {
  for (const auto& m : grid_models()) {
    if (m.name == name) return m;
  }
  throw std::runtime_error("no grid model " + name);
}

GgufBuilder sparse_model_builder(const ModelShape& s) {
  GgufBuilder b;
  const std::string& a = s.arch;
  const auto u32 = [&](const std::string& key, uint32_t v) { (void)b.set(key, MetadataValue::of<uint32_t>(v)); };
  const auto f32 = [&](const std::string& key, float v) { (void)b.set(key, MetadataValue::of<float>(v)); };
  (void)b.set("general.architecture", MetadataValue::string(a));
  u32(a + ".context_length", s.ctx_train);
  u32(a + ".embedding_length", s.n_embd);
  u32(a + ".block_count", s.n_layer);
  u32(a + ".feed_forward_length", s.n_ff);
  if (s.n_head != 0) {
    u32(a + ".attention.head_count", s.n_head);
    u32(a + ".attention.head_count_kv", s.n_head_kv);
  }
  if (!s.attention_layers.empty()) {
    std::vector<int32_t> kv_heads(s.n_layer, 0);
    for (uint32_t il : s.attention_layers) kv_heads[il] = static_cast<int32_t>(s.n_head_kv);
    (void)b.set(a + ".attention.head_count_kv", MetadataValue::array(kv_heads));
    u32(a + ".shortconv.l_cache", s.shortconv_l_cache);
  }
  f32(a + ".rope.freq_base", 10000.0f);
  const bool bert = a == "bert" || a == "nomic-bert";
  const bool layer_norm = a == "cohere2" || a == "command-r" || bert;
  f32(a + (layer_norm ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon"), 1e-6f);
  if (a == "cohere2" || a == "granite" || a == "granitemoe" || a == "command-r") f32(a + ".logit_scale", 0.25f);
  if (bert) {
    (void)b.set(a + ".attention.causal", MetadataValue::of(false));
    u32(a + ".pooling_type", 2);
    u32("tokenizer.ggml.token_type_count", 2);
    if (a == "nomic-bert") u32(a + ".moe_every_n_layers", 0);
  }
  uint32_t head_k = s.head_dim != 0 ? s.head_dim : s.n_head != 0 ? s.n_embd / s.n_head : 0;
  uint32_t head_v = head_k;
  if (s.kv_lora_rank != 0) {  // MLA as the current converter writes it: the compressed cache row
    head_k = s.kv_lora_rank + s.rope_dim;
    head_v = s.kv_lora_rank;
    u32(a + ".attention.kv_lora_rank", s.kv_lora_rank);
    if (s.q_lora_rank != 0) u32(a + ".attention.q_lora_rank", s.q_lora_rank);
    u32(a + ".attention.key_length_mla", s.key_length_mla);
    u32(a + ".attention.value_length_mla", s.value_length_mla);
    u32(a + ".rope.dimension_count", s.rope_dim);
    u32(a + ".leading_dense_block_count", s.n_dense_lead);
    u32(a + ".expert_shared_count", s.n_expert_shared);
  }
  if (s.head_dim != 0 || s.kv_lora_rank != 0) {
    u32(a + ".attention.key_length", head_k);
    u32(a + ".attention.value_length", head_v);
  }
  if (s.n_expert != 0) {
    u32(a + ".expert_count", s.n_expert);
    u32(a + ".expert_used_count", s.n_expert_used);
    if (s.n_ff_exp != 0) u32(a + ".expert_feed_forward_length", s.n_ff_exp);
  }
  if (s.n_ff_shexp != 0) u32(a + ".expert_shared_feed_forward_length", s.n_ff_shexp);
  if (s.n_dense_lead != 0 && s.kv_lora_rank == 0) u32(a + ".leading_dense_block_count", s.n_dense_lead);
  if (a == "ernie4_5-moe" || a == "llama4") u32(a + ".interleave_moe_layer_step", 1);
  if (s.n_nextn != 0) u32(a + ".nextn_predict_layers", s.n_nextn);
  if (a == "glm4moe") u32(a + ".expert_shared_count", s.n_expert_shared);
  if (a == "minimax-m2") u32(a + ".expert_gating_func", 2);  // sigmoid
  if (s.sliding_window != 0) u32(a + ".attention.sliding_window", s.sliding_window);
  if (s.ssm_conv != 0) {
    u32(a + ".ssm.conv_kernel", s.ssm_conv);
    u32(a + ".ssm.inner_size", s.ssm_inner);
    u32(a + ".ssm.state_size", s.ssm_state);
    u32(a + ".ssm.time_step_rank", s.ssm_dt_rank);
    u32(a + ".ssm.group_count", s.ssm_groups);
  }
  if (a == "qwen35" || a == "qwen35moe") {
    (void)b.set(a + ".rope.dimension_sections", MetadataValue::array(std::vector<int32_t>{11, 11, 10, 0}));
    u32(a + ".full_attention_interval", 4);
  }
  if (s.swa_pattern != 0) u32(a + ".attention.sliding_window_pattern", s.swa_pattern);

  std::vector<std::string> tokens;
  tokens.reserve(s.n_vocab);
  for (uint32_t i = 0; i < s.n_vocab; ++i) tokens.push_back("t" + std::to_string(i));
  (void)b.set("tokenizer.ggml.model", MetadataValue::string("gpt2"));
  (void)b.set("tokenizer.ggml.pre", MetadataValue::string("default"));
  (void)b.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  (void)b.set("tokenizer.ggml.merges", MetadataValue::string_array(std::vector<std::string>{"t 1"}));
  u32("tokenizer.ggml.bos_token_id", s.n_vocab - 1);
  u32("tokenizer.ggml.eos_token_id", s.n_vocab - 1);

  const auto never = [](uint64_t, std::span<std::byte>) -> Expected<void> {
    return make_error(ErrorCode::io_error, std::nullopt, {}, "a sparse fixture has no data");
  };
  const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    if (auto r = b.add_tensor(name, type_for(shape), shape, TensorProducer(never)); !r) {
      throw std::runtime_error(name + ": " + r.error().describe());
    }
  };
  const int64_t E = s.n_embd, V = s.n_vocab;
  add("token_embd.weight", {E, V});
  if (a == "lfm2") {
    add("token_embd_norm.weight", {E});
  } else if (bert) {
    if (a == "bert") add("position_embd.weight", {E, s.ctx_train});
    add("token_embd_norm.weight", {E});
    add("token_embd_norm.bias", {E});
  } else {
    add("output_norm.weight", {E});
  }
  if (!s.tied) add("output.weight", {E, V});
  const int64_t q = int64_t{s.n_head} * head_k, kv = int64_t{s.n_head_kv} * head_k;
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const bool post_norms = a == "exaone4" || a == "olmo2";  // no pre-norms, post-norms instead
    if (!bert && !post_norms) add(p + "attn_norm.weight", {E});
    if (a == "lfm2") {
      add(p + "ffn_norm.weight", {E});
      add(p + "ffn_gate.weight", {E, s.n_ff});
      add(p + "ffn_down.weight", {s.n_ff, E});
      add(p + "ffn_up.weight", {E, s.n_ff});
      if (std::find(s.attention_layers.begin(), s.attention_layers.end(), il) != s.attention_layers.end()) {
        add(p + "attn_q_norm.weight", {head_k});
        add(p + "attn_k_norm.weight", {head_k});
        add(p + "attn_q.weight", {E, q});
        add(p + "attn_k.weight", {E, kv});
        add(p + "attn_v.weight", {E, kv});
        add(p + "attn_output.weight", {E, E});
      } else {
        add(p + "shortconv.conv.weight", {s.shortconv_l_cache, E});
        add(p + "shortconv.in_proj.weight", {E, 3 * E});
        add(p + "shortconv.out_proj.weight", {E, E});
      }
      continue;
    }
    const int64_t conv_dim = int64_t{s.ssm_inner} + 2 * int64_t{s.ssm_groups} * s.ssm_state;
    if (a == "mamba2") {
      add(p + "ssm_in.weight", {E, s.ssm_inner + conv_dim + s.ssm_dt_rank});
      add(p + "ssm_conv1d.weight", {s.ssm_conv, conv_dim});
      add(p + "ssm_conv1d.bias", {conv_dim});
      add(p + "ssm_dt.bias", {s.ssm_dt_rank});
      add(p + "ssm_a", {1, s.ssm_dt_rank});
      add(p + "ssm_d", {1, s.ssm_dt_rank});
      add(p + "ssm_norm.weight", {s.ssm_inner / s.ssm_groups, s.ssm_groups});
      add(p + "ssm_out.weight", {s.ssm_inner, E});
      continue;
    }
    if (a == "qwen35" || a == "qwen35moe") {
      add(p + "post_attention_norm.weight", {E});
      if ((il + 1) % 4 == 0) {
        add(p + "attn_q.weight", {E, 2 * q});
        add(p + "attn_k.weight", {E, kv});
        add(p + "attn_v.weight", {E, kv});
        add(p + "attn_output.weight", {q, E});
        add(p + "attn_q_norm.weight", {head_k});
        add(p + "attn_k_norm.weight", {head_k});
      } else {
        const int64_t key_dim = int64_t{s.ssm_state} * s.ssm_groups, value_dim = int64_t{s.ssm_state} * s.ssm_dt_rank;
        add(p + "attn_qkv.weight", {E, 2 * key_dim + value_dim});
        add(p + "attn_gate.weight", {E, value_dim});
        add(p + "ssm_conv1d.weight", {s.ssm_conv, 2 * key_dim + value_dim});
        add(p + "ssm_dt.bias", {s.ssm_dt_rank});
        add(p + "ssm_a", {s.ssm_dt_rank});
        add(p + "ssm_beta.weight", {E, s.ssm_dt_rank});
        add(p + "ssm_alpha.weight", {E, s.ssm_dt_rank});
        add(p + "ssm_norm.weight", {s.ssm_state});
        add(p + "ssm_out.weight", {value_dim, E});
      }
      if (a == "qwen35moe") {
        const int64_t X = s.n_expert, ff = s.n_ff_exp, sh = s.n_ff_shexp;
        add(p + "ffn_gate_inp.weight", {E, X});
        add(p + "ffn_gate_exps.weight", {E, ff, X});
        add(p + "ffn_up_exps.weight", {E, ff, X});
        add(p + "ffn_down_exps.weight", {ff, E, X});
        add(p + "ffn_gate_inp_shexp.weight", {E});
        add(p + "ffn_gate_shexp.weight", {E, sh});
        add(p + "ffn_up_shexp.weight", {E, sh});
        add(p + "ffn_down_shexp.weight", {sh, E});
        continue;
      }
      add(p + "ffn_gate.weight", {E, s.n_ff});
      add(p + "ffn_up.weight", {E, s.n_ff});
      add(p + "ffn_down.weight", {s.n_ff, E});
      continue;
    }
    if (bert) {
      add(p + "attn_q.weight", {E, q});
      add(p + "attn_k.weight", {E, kv});
      add(p + "attn_v.weight", {E, kv});
      add(p + "attn_output.weight", {q, E});
      add(p + "attn_output_norm.weight", {E});
      add(p + "attn_output_norm.bias", {E});
      add(p + "ffn_up.weight", {E, s.n_ff});
      if (a == "nomic-bert") add(p + "ffn_gate.weight", {E, s.n_ff});
      add(p + "ffn_down.weight", {s.n_ff, E});
      add(p + "layer_output_norm.weight", {E});
      add(p + "layer_output_norm.bias", {E});
      continue;
    }
    if (a == "deepseek2") {
      const int64_t nope = s.key_length_mla - s.rope_dim;
      add(p + "attn_kv_a_norm.weight", {s.kv_lora_rank});
      add(p + "attn_q.weight", {E, int64_t{s.n_head} * s.key_length_mla});
      add(p + "attn_kv_a_mqa.weight", {E, s.kv_lora_rank + s.rope_dim});
      add(p + "attn_k_b.weight", {nope, s.kv_lora_rank, s.n_head});
      add(p + "attn_v_b.weight", {s.kv_lora_rank, s.value_length_mla, s.n_head});
      add(p + "attn_output.weight", {int64_t{s.n_head} * s.value_length_mla, E});
    } else if (a == "phi3") {
      add(p + "attn_qkv.weight", {E, q + 2 * kv});
      add(p + "attn_output.weight", {q, E});
    } else {
      add(p + "attn_q.weight", {E, q});
      add(p + "attn_k.weight", {E, kv});
      add(p + "attn_v.weight", {E, kv});
      if (s.qkv_bias || a == "gpt-oss") {
        add(p + "attn_q.bias", {q});
        add(p + "attn_k.bias", {kv});
        add(p + "attn_v.bias", {kv});
      }
      add(p + "attn_output.weight", {q, E});
    }
    if (a == "qwen3" || a == "qwen3moe" || a == "gemma3" || a == "exaone4" || a == "hunyuan-moe") {
      add(p + "attn_q_norm.weight", {head_k});
      add(p + "attn_k_norm.weight", {head_k});
    }
    if (a == "olmo2" || a == "minimax-m2") {
      add(p + "attn_q_norm.weight", {q});
      add(p + "attn_k_norm.weight", {kv});
    }
    if (il + s.n_nextn >= s.n_layer && s.n_nextn != 0) {
      add(p + "nextn.eh_proj.weight", {2 * E, E});
      add(p + "nextn.enorm.weight", {E});
      add(p + "nextn.hnorm.weight", {E});
      add(p + "nextn.shared_head_norm.weight", {E});
    }
    if (a == "gemma2" || a == "gemma3" || a == "gpt-oss" || a == "seed_oss" || a == "glm4" || a == "glm4moe" ||
        post_norms) {
      add(p + "post_attention_norm.weight", {E});
    }
    if (a == "gemma2" || a == "gemma3" || a == "glm4" || post_norms) add(p + "post_ffw_norm.weight", {E});
    if (a == "gpt-oss") {
      add(p + "attn_sinks.weight", {s.n_head});
      add(p + "attn_output.bias", {E});
    }
    if (a != "cohere2" && a != "command-r" && a != "gpt-oss" && a != "seed_oss" && a != "glm4moe" && !post_norms) {
      add(p + "ffn_norm.weight", {E});
    }
    const bool moe = s.n_expert != 0 && il >= s.n_dense_lead;
    if (!moe) {
      if (a == "phi3" || a == "glm4") {
        add(p + "ffn_up.weight", {E, 2 * int64_t{s.n_ff}});
      } else {
        add(p + "ffn_gate.weight", {E, s.n_ff});
        add(p + "ffn_up.weight", {E, s.n_ff});
      }
      add(p + "ffn_down.weight", {s.n_ff, E});
      continue;
    }
    const int64_t ff = s.n_ff_exp != 0 ? s.n_ff_exp : s.n_ff, X = s.n_expert;
    add(p + "ffn_gate_inp.weight", {E, X});
    add(p + "ffn_gate_exps.weight", {E, ff, X});
    add(p + "ffn_up_exps.weight", {E, ff, X});
    add(p + "ffn_down_exps.weight", {ff, E, X});
    if (a == "minimax-m2" || a == "glm4moe") add(p + "exp_probs_b.bias", {X});
    if (a == "gpt-oss") {
      add(p + "ffn_gate_inp.bias", {X});
      add(p + "ffn_gate_exps.bias", {ff, X});
      add(p + "ffn_up_exps.bias", {ff, X});
      add(p + "ffn_down_exps.bias", {E, X});
    }
    if (s.n_expert_shared != 0 || s.n_ff_shexp != 0) {
      const int64_t sh = s.n_ff_shexp != 0 ? int64_t{s.n_ff_shexp} : ff * s.n_expert_shared;
      add(p + "ffn_gate_shexp.weight", {E, sh});
      add(p + "ffn_up_shexp.weight", {E, sh});
      add(p + "ffn_down_shexp.weight", {sh, E});
    }
  }
  return b;
}

void write_sparse(const GgufBuilder& b, const std::filesystem::path& path) {
  FileWriter out(path);
  if (auto r = b.write_header(out); !r) throw std::runtime_error(path.string() + ": " + r.error().describe());
  if (::ftruncate(out.fd(), static_cast<off_t>(b.file_bytes())) != 0) {
    throw std::runtime_error("cannot extend " + path.string());
  }
}

void write_sparse_model(const ModelShape& shape, const std::filesystem::path& path) {
  write_sparse(sparse_model_builder(shape), path);
}

}  // namespace ggufkit::test
