// Phi-3, Phi-3.5, Phi-4 and Phi-4-mini (conversion/phi.py's Phi3MiniModel, a TextModel):
// - q, k and v stay fused (attn_qkv), as do the gate and up projections (ffn_up: gate rows first);
//   NEOX rope in llama.cpp, so nothing is permuted;
// - its own keys (not TextModel's): the partial rotary dimensions, the original context, a
//   sliding window of 0 when there is none;
// - long-context checkpoints: rope_factors_long and rope_factors_short tensors (first in the file)
//   and the rope attention factor, a key written while the tensors are prepared;
// - its own SentencePiece variant, or GPT-2 BPE for Phi-4's GPT2Tokenizer.
#include <cmath>

#include <fmt/format.h>

#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight", Dim::qkv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none},
    {"mlp.gate_up_proj.weight", "ffn_up.weight", Dim::ff2, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

Expected<double> number_at(const HfConfig& c, const Json& object, const char* key, const char* where) {
  auto v = c.optional_number(object, key);
  if (!v) return std::move(v).error();
  if (!*v) return config_error(where, "missing");
  return **v;
}

Expected<int64_t> context_length(const HfConfig& c) {
  const Json* v = c.find({"n_positions", "max_position_embeddings"});
  if (v == nullptr || !v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() >= kMaxConfigValue) {
    return config_error("max_position_embeddings", "missing, or not a positive integer");
  }
  return v->get<int64_t>();
}

// int(partial_rotary_factor * n_embd) // n_head
int64_t rope_dims(const HfConfig& c) {
  double partial = 1.0;
  if (const auto it = c.rope_full.find("partial_rotary_factor"); it != c.rope_full.end() && it->is_number()) partial = it->get<double>();
  return static_cast<int64_t>(partial * static_cast<double>(c.n_embd)) / c.n_head;
}

// The rope type as Phi3Config leaves it: "su" and "yarn" are renamed "longrope".
std::string rope_type(const HfConfig& c) {
  std::string type;
  if (const auto it = c.rope_full.find("rope_type"); it != c.rope_full.end() && it->is_string()) type = it->get<std::string>();
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return type == "su" || type == "yarn" ? "longrope" : type;
}

Expected<void> keys(const FamilyInput& in, KeyWriter& w) {
  const HfConfig& c = in.config;
  auto ctx = context_length(c);
  if (!ctx) return std::move(ctx).error();
  auto orig = c.optional_int(c.rope_full, "original_max_position_embeddings");
  if (!orig) return std::move(orig).error();
  if (!*orig) return config_error("original_max_position_embeddings", "missing");
  w.u32("context_length", *ctx);
  w.u32("rope.scaling.original_context_length", **orig);
  w.u32("embedding_length", c.n_embd);
  w.u32("feed_forward_length", c.n_ff);
  w.u32("block_count", c.block_count);
  w.u32("attention.head_count", c.n_head);
  w.u32("attention.head_count_kv", c.n_head_kv);
  auto eps = number_at(c, c.root, "rms_norm_eps", "rms_norm_eps");
  if (!eps) return std::move(eps).error();
  w.f32("attention.layer_norm_rms_epsilon", *eps);
  w.from_config("attention.layer_norm_rms_epsilon", "rms_norm_eps");
  w.u32("rope.dimension_count", rope_dims(c));
  auto theta = number_at(c, c.rope_full, "rope_theta", "rope_theta");
  if (!theta) return std::move(theta).error();
  w.f32("rope.freq_base", *theta);
  w.from_config("rope.freq_base", "rope_theta");
  w.set("general.file_type", MetadataValue::of(in.file_type));
  auto window = c.optional_int("sliding_window");
  if (!window) return std::move(window).error();
  w.u32("attention.sliding_window", window->value_or(0));
  return {};
}

// The factors of a rope_scaling list, as float32.
Expected<std::vector<float>> factors(const Json& list, const char* key) {
  std::vector<float> out;
  for (const Json& v : list) {
    if (!v.is_number()) return config_error(fmt::format("rope_scaling.{}", key), "expected a list of numbers");
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

// Phi3MiniModel.generate_extra_tensors: for long-context checkpoints, the attention factor of the
// scaled context and the long and short rope factors.
Expected<void> rope_factors(const FamilyInput& in, KeyWriter& w, std::vector<ConvertTensorPlan>& out) {
  const HfConfig& c = in.config;
  const auto long_it = c.rope_full.find("long_factor");
  if (long_it == c.rope_full.end() || long_it->is_null() || (long_it->is_array() && long_it->empty())) return {};
  auto ctx = context_length(c);
  if (!ctx) return std::move(ctx).error();
  auto orig = c.optional_int(c.rope_full, "original_max_position_embeddings");
  if (!orig) return std::move(orig).error();
  if (!*orig) return config_error("original_max_position_embeddings", "missing");
  const double scale = static_cast<double>(*ctx) / static_cast<double>(**orig);
  const std::string type = rope_type(c);
  if (type.empty()) return config_error("rope_scaling.type", "missing (long_factor needs it)");
  if (type != "longrope") return config_error("rope_scaling.type", fmt::format("{} is not supported with long_factor", type));
  const double attn_factor = scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(**orig))) : 1.0;
  w.f32("rope.scaling.attn_factor", attn_factor);
  const auto short_it = c.rope_full.find("short_factor");
  if (!long_it->is_array() || short_it == c.rope_full.end() || !short_it->is_array()) {
    return config_error("rope_scaling", "long_factor and short_factor must both be lists");
  }
  auto long_factors = factors(*long_it, "long_factor");
  if (!long_factors) return std::move(long_factors).error();
  auto short_factors = factors(*short_it, "short_factor");
  if (!short_factors) return std::move(short_factors).error();
  const int64_t dims = rope_dims(c);
  if (long_factors->size() != short_factors->size() || dims % 2 != 0 || static_cast<int64_t>(long_factors->size()) != dims / 2) {
    return config_error("rope_scaling", fmt::format("long_factor ({}) and short_factor ({}) must both have {} values",
                                                    long_factors->size(), short_factors->size(), static_cast<double>(dims) / 2));
  }
  out.push_back(generated_tensor("rope_factors_long.weight", std::move(*long_factors)));
  out.push_back(generated_tensor("rope_factors_short.weight", std::move(*short_factors)));
  return {};
}

constexpr std::string_view kClasses[] = {"Phi3ForCausalLM"};
// Phi3Config's defaults (AutoConfig.to_dict() has them).
constexpr ConfigDefault kDefaults[] = {
    {"vocab_size", 32064},          {"hidden_size", 3072},  {"intermediate_size", 8192},
    {"num_hidden_layers", 32},      {"num_attention_heads", 32},
    {"max_position_embeddings", 4096}, {"original_max_position_embeddings", 4096},
    {"rms_norm_eps", 1e-5, false},  {"rope_theta", 10000.0, false}};

constexpr ConfigClass kConfigClasses[] = {{.model_type = "phi3", .defaults = kDefaults, .kv_heads_from_heads = true, .longrope_rename = true}};

}  // namespace

extern const Family kPhi3Family{
    .gguf_name = "phi3",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kLayer,
    .keys = keys,
    .tokenizer = {.recipe = TokenizerRecipe::phi3},
    .extra_tensors = rope_factors,
    .config_classes = kConfigClasses,
};

}  // namespace ggufkit::convert_detail
