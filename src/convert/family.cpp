// What the converter's families share: config.json read as the Python converter's hparams,
// gguf-py's way of adding keys, TextModel.set_gguf_parameters, llama 3's rope_freqs.
// Facts from llama.cpp's conversion/base.py (ModelBase, TextModel) and conversion/llama.py.
#include "convert/family.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "convert/checkpoint_files.h"
#include "ggufkit/conventions.h"

namespace ggufkit::convert_detail {
namespace {

constexpr std::string_view kConfigFile = "config.json";

}  // namespace

Error config_error(std::string key, std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, fmt::format("config.json: {}", key), std::move(message));
}

Error tensor_error(std::string_view name, std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(name), std::move(message));
}

Expected<std::optional<int64_t>> HfConfig::optional_int(const Json& object, const std::string& key) const {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<int64_t>{};
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() >= kMaxConfigValue) {
    return config_error(key, fmt::format("expected a positive integer below 2^31, found {}", it->dump()));
  }
  return std::optional<int64_t>{it->get<int64_t>()};
}

Expected<int64_t> HfConfig::required_int(const std::string& key) const {
  auto v = optional_int(root, key);
  if (!v) return std::move(v).error();
  if (!*v) return config_error(key, "missing");
  return **v;
}

Expected<std::optional<double>> HfConfig::optional_number(const Json& object, const std::string& key) const {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<double>{};
  if (!it->is_number()) return config_error(key, fmt::format("expected a number, found {}", it->dump()));
  return std::optional<double>{it->get<double>()};
}

const Json* HfConfig::find(std::initializer_list<std::string_view> keys) const {
  for (std::string_view key : keys) {
    const auto it = root.find(std::string(key));
    if (it != root.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

bool HfConfig::is_false(const std::string& key) const {
  const auto it = root.find(key);
  return it != root.end() && it->is_boolean() && !it->get<bool>();
}

Expected<Json> read_config_json(const std::filesystem::path& dir) {
  const auto path = dir / kConfigFile;
  auto text = read_checkpoint_text(dir, kConfigFile);
  if (!text) return std::move(text).error();
  if (!*text) return make_error(ErrorCode::io_error, std::nullopt, std::string(kConfigFile), fmt::format("cannot open {}", path.string()));
  Json root;
  try {
    root = Json::parse(**text);
  } catch (const Json::exception& e) {  // where and why: "parse error at line 1, column 9: ..."
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    return make_error(ErrorCode::bad_header, std::nullopt, std::string(kConfigFile), "not valid JSON: " + what);
  }
  if (!root.is_object()) {
    return make_error(ErrorCode::bad_header, std::nullopt, std::string(kConfigFile), "not a JSON object");
  }
  return root;
}

Expected<std::string> read_hf_class(const Json& root) {
  const Json& archs = root.value("architectures", Json::array());
  if (!archs.is_array() || archs.empty() || !archs[0].is_string()) {
    return config_error("architectures", "missing: the model's class (LlamaForCausalLM...) is not named");
  }
  return archs[0].get<std::string>();
}

namespace {

const ConfigClass* find_class(std::span<const ConfigClass> classes, std::string_view model_type) {
  for (const ConfigClass& k : classes) {
    if (k.model_type == model_type) return &k;
  }
  return nullptr;
}

bool absent(const Json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null();
}

// `object` as the config class's to_dict() has it.
void complete(Json& object, const ConfigClass& k) {
  for (const ConfigDefault& d : k.defaults) {
    const std::string key(d.key);
    if (!object.contains(key)) object[key] = d.integer ? Json(static_cast<int64_t>(d.value)) : Json(d.value);
  }
  const auto heads = object.find("num_attention_heads");
  if (k.kv_heads_from_heads && absent(object, "num_key_value_heads") && heads != object.end()) {
    object["num_key_value_heads"] = *heads;
  }
  const auto hidden = object.find("hidden_size");
  if (k.head_dim_from_hidden && absent(object, "head_dim") && heads != object.end() && hidden != object.end() &&
      heads->is_number_integer() && hidden->is_number_integer() && heads->get<int64_t>() > 0) {
    object["head_dim"] = hidden->get<int64_t>() / heads->get<int64_t>();
  }
  if (k.longrope_rename) {
    if (const auto rope = object.find("rope_scaling"); rope != object.end() && rope->is_object()) {
      if (const auto type = rope->find("type"); type != rope->end() && (*type == "su" || *type == "yarn")) *type = "longrope";
    }
  }
}

}  // namespace

Expected<HfConfig> read_config(Json root, std::span<const ConfigClass> classes) {
  HfConfig c;
  c.root = std::move(root);
  if (const auto it = c.root.find("_name_or_path"); it != c.root.end() && it->is_string()) c.name_or_path = it->get<std::string>();
  // AutoConfig: the class of model_type completes the file (a wrapper's text_config too).
  const auto type_it = c.root.find("model_type");
  const std::string model_type = type_it != c.root.end() && type_it->is_string() ? type_it->get<std::string>() : "";
  if (const ConfigClass* k = find_class(classes, model_type)) {
    complete(c.root, *k);
    if (!k->text_config_class.empty()) {
      if (const ConfigClass* text = find_class(classes, k->text_config_class)) {
        Json& text_config = c.root["text_config"];
        if (!text_config.is_object()) text_config = Json::object();
        complete(text_config, *text);
      }
    }
  }
  // TextModel.__init__: text_config's keys at the root, over the root's own.
  if (const auto it = c.root.find("text_config"); it != c.root.end() && it->is_object()) {
    const Json text_config = *it;
    for (const auto& [key, value] : text_config.items()) c.root[key] = value;
  }
  for (auto [field, key] : {std::pair{&c.block_count, "num_hidden_layers"}, {&c.n_embd, "hidden_size"},
                            {&c.n_ff, "intermediate_size"}, {&c.n_head, "num_attention_heads"}, {&c.vocab, "vocab_size"}}) {
    auto v = c.required_int(key);
    if (!v) return std::move(v).error();
    *field = *v;
  }
  // The mixture-of-experts sizes, when config.json has them.
  auto moe_size = [&](int64_t& field, std::initializer_list<std::string_view> keys) -> Expected<void> {
    const Json* v = c.find(keys);
    if (v == nullptr) return {};
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() >= kMaxConfigValue) {
      return config_error(std::string(*keys.begin()), fmt::format("expected a positive integer below 2^31, found {}", v->dump()));
    }
    field = v->get<int64_t>();
    return {};
  };
  if (auto r = moe_size(c.n_expert, {"num_local_experts", "num_experts", "n_routed_experts"}); !r) return std::move(r).error();
  if (auto r = moe_size(c.n_ff_expert, {"moe_intermediate_size"}); !r) return std::move(r).error();
  if (auto r = moe_size(c.n_ff_shared, {"shared_expert_intermediate_size"}); !r) return std::move(r).error();
  auto kv = c.optional_int("num_key_value_heads");
  if (!kv) return std::move(kv).error();
  c.has_head_kv = kv->has_value();
  c.n_head_kv = kv->value_or(c.n_head);
  if (c.n_head % c.n_head_kv != 0) {
    return config_error("num_key_value_heads", fmt::format("{} does not divide num_attention_heads ({})", c.n_head_kv, c.n_head));
  }
  auto hd = c.optional_int("head_dim");
  if (!hd) return std::move(hd).error();
  c.has_head_dim = hd->has_value();
  if (c.has_head_dim) {
    c.head_dim = **hd;
  } else if (c.n_embd % c.n_head != 0) {
    return config_error("num_attention_heads", fmt::format("{} does not divide hidden_size ({})", c.n_head, c.n_embd));
  } else {
    c.head_dim = c.n_embd / c.n_head;
  }
  // TextModel.__init__: rope_parameters, else rope_scaling; the global parameters mirrored in
  // when it is not split into full_attention / sliding_attention.
  Json rope = c.root.value("rope_parameters", Json());
  if (rope.is_null()) rope = c.root.value("rope_scaling", Json());
  if (rope.is_null()) rope = Json::object();
  if (!rope.is_object()) return config_error("rope_scaling", "expected an object");
  if (!rope.contains("full_attention") && !rope.contains("sliding_attention")) {
    if (const Json* local = c.find({"local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"})) {
      rope["sliding_attention"] = Json{{"rope_theta", *local}};
    }
    if (const Json* theta = c.find({"global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"});
        theta != nullptr && !rope.contains("rope_theta")) {
      rope["rope_theta"] = *theta;
    }
    if (!rope.contains("rope_type") && rope.contains("type") && !rope["type"].is_null()) rope["rope_type"] = rope["type"];
    if (const Json* partial = c.find({"partial_rotary_factor", "rope_pct", "rope_percent"}); partial != nullptr && !rope.contains("partial_rotary_factor")) {
      rope["partial_rotary_factor"] = *partial;
    }
    if (const Json* orig = c.find({"original_max_position_embeddings"}); orig != nullptr && !rope.contains("original_max_position_embeddings")) {
      rope["original_max_position_embeddings"] = *orig;
    }
  }
  c.rope_full = rope.contains("full_attention") ? rope["full_attention"] : rope;
  if (!c.rope_full.is_object()) return config_error("rope_parameters.full_attention", "expected an object");
  if (const auto it = rope.find("sliding_attention"); it != rope.end()) {
    if (!it->is_object()) return config_error("rope_parameters.sliding_attention", "expected an object");
    auto local = c.optional_number(*it, "rope_theta");
    if (!local) return std::move(local).error();
    c.local_rope_theta = *local;
  }
  c.rope = std::move(rope);
  return c;
}

int64_t dim_value(const HfConfig& c, Dim d) {
  switch (d) {
    case Dim::none: return 0;
    case Dim::vocab: return c.vocab;
    case Dim::embd: return c.n_embd;
    case Dim::ff: return c.n_ff;
    case Dim::ff2: return 2 * c.n_ff;
    case Dim::q_out: return c.n_head * c.head_dim;
    case Dim::kv_out: return c.n_head_kv * c.head_dim;
    case Dim::qkv_out: return (c.n_head + 2 * c.n_head_kv) * c.head_dim;
    case Dim::head_dim: return c.head_dim;
    case Dim::ff_expert: return c.n_ff_expert;
    case Dim::ff_expert2: return 2 * c.n_ff_expert;
    case Dim::ff_shared: return c.n_ff_shared;
    case Dim::one: return 1;
    case Dim::experts: return c.n_expert;
    case Dim::heads: return c.n_head;
  }
  return 0;
}

std::optional<std::pair<int64_t, std::string_view>> split_layer_name(std::string_view name) {
  constexpr std::string_view prefix = "model.layers.";
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9 || (dot > 1 && name[0] == '0')) return std::nullopt;
  int64_t layer = 0;
  for (char ch : name.substr(0, dot)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    layer = layer * 10 + (ch - '0');
  }
  return std::pair{layer, name.substr(dot + 1)};
}

void KeyWriter::set(std::string key, MetadataValue value) {
  for (auto& [k, v] : keys_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  keys_.emplace_back(std::move(key), std::move(value));
}

std::string KeyWriter::arch_key(std::string_view suffix) const { return fmt::format("{}.{}", arch_, suffix); }

namespace {

// A positive integer hparam, as the first of `keys` present: nothing when none is.
Expected<std::optional<int64_t>> find_int(const HfConfig& c, std::initializer_list<std::string_view> keys) {
  const Json* v = c.find(keys);
  if (v == nullptr) return std::optional<int64_t>{};
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() >= kMaxConfigValue) {
    return config_error(std::string(*keys.begin()), fmt::format("expected a non-negative integer below 2^31, found {}", v->dump()));
  }
  return std::optional<int64_t>{v->get<int64_t>()};
}

// The first of `keys` config.json gives, as find() picks it (for messages).
std::string_view found_name(const HfConfig& c, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    if (c.find({key}) != nullptr) return key;
  }
  return *keys.begin();
}

Expected<std::optional<double>> find_number(const HfConfig& c, std::initializer_list<std::string_view> keys) {
  const Json* v = c.find(keys);
  if (v == nullptr) return std::optional<double>{};
  if (!v->is_number()) return config_error(std::string(*keys.begin()), fmt::format("expected a number, found {}", v->dump()));
  return std::optional<double>{v->get<double>()};
}

}  // namespace

Expected<void> text_model_keys(const FamilyInput& in, KeyWriter& w) {
  const HfConfig& c = in.config;
  w.u32("block_count", c.block_count);
  struct IntKey {
    std::string_view suffix;
    std::initializer_list<std::string_view> names;
  };
  const IntKey sizes[] = {
      {"context_length", {"max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"}},
      {"embedding_length", {"hidden_size", "n_embd", "dim"}},
      {"feed_forward_length", {"prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"}},
      {"attention.head_count", {"num_attention_heads", "n_head", "n_heads"}},
      {"attention.head_count_kv", {"num_key_value_heads", "n_kv_heads"}},
  };
  for (const IntKey& k : sizes) {
    auto v = find_int(c, k.names);
    if (!v) return std::move(v).error();
    if (*v) w.u32(k.suffix, **v);
  }
  if (c.is_false("is_causal")) w.boolean("attention.causal", false);

  // Rope scaling; llama3 is a rope_freqs tensor instead (LlamaModel.generate_extra_tensors).
  const Json& rope = c.rope_full;
  if (const auto it = rope.find("rope_type"); it != rope.end() && it->is_string()) {
    const std::string type = it->get<std::string>();
    auto factor = c.optional_number(rope, "factor");
    if (!factor) return std::move(factor).error();
    if ((type == "linear" || type == "yarn") && *factor) {
      w.string("rope.scaling.type", type);
      w.f32("rope.scaling.factor", **factor);
      w.from_config("rope.scaling.factor", "rope_scaling.factor");
      if (type == "yarn") {
        auto orig = c.optional_int(rope, "original_max_position_embeddings");
        if (!orig) return std::move(orig).error();
        if (!*orig) return config_error("rope_scaling.original_max_position_embeddings", "missing (yarn needs it)");
        w.u32("rope.scaling.original_context_length", **orig);
        const std::pair<const char*, const char*> yarn_keys[] = {{"extrapolation_factor", "rope.scaling.yarn_ext_factor"},
                                                                 {"attention_factor", "rope.scaling.yarn_attn_factor"},
                                                                 {"beta_fast", "rope.scaling.yarn_beta_fast"},
                                                                 {"beta_slow", "rope.scaling.yarn_beta_slow"}};
        for (auto [hf, gguf] : yarn_keys) {
          auto v = c.optional_number(rope, hf);
          if (!v) return std::move(v).error();
          if (!*v && std::string_view(hf) == "attention_factor") {
            v = c.optional_number(rope, "attn_factor");
            if (!v) return std::move(v).error();
          }
          if (*v) w.f32(gguf, **v);
          w.from_config(gguf, std::string("rope_scaling.") + hf);
        }
      }
    } else if (type == "su" || type == "longrope") {
      w.string("rope.scaling.type", "longrope");
    }
  }
  auto theta = c.optional_number(rope, "rope_theta");
  if (!theta) return std::move(theta).error();
  if (*theta) w.f32("rope.freq_base", **theta);
  w.from_config("rope.freq_base", "rope_theta");
  if (c.local_rope_theta) w.f32("rope.freq_base_swa", *c.local_rope_theta);
  w.from_config("rope.freq_base_swa", "rope_local_base_freq");
  const std::initializer_list<std::string_view> kRmsEps = {"rms_norm_eps", "norm_eps"};
  auto rms_eps = find_number(c, kRmsEps);
  if (!rms_eps) return std::move(rms_eps).error();
  if (*rms_eps) w.f32("attention.layer_norm_rms_epsilon", **rms_eps);
  w.from_config("attention.layer_norm_rms_epsilon", found_name(c, kRmsEps));
  const std::initializer_list<std::string_view> kNormEps = {"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"};
  auto norm_eps = find_number(c, kNormEps);
  if (!norm_eps) return std::move(norm_eps).error();
  if (*norm_eps) w.f32("attention.layer_norm_epsilon", **norm_eps);
  w.from_config("attention.layer_norm_epsilon", found_name(c, kNormEps));
  auto experts = find_int(c, {"num_local_experts", "num_experts", "n_routed_experts"});
  if (!experts) return std::move(experts).error();
  if (*experts) w.u32("expert_count", **experts);
  auto used = find_int(c, {"num_experts_per_tok", "num_experts_per_token", "top_k_experts"});
  if (!used) return std::move(used).error();
  if (*used) w.u32("expert_used_count", **used);
  if (c.has_head_dim) {
    w.u32("attention.key_length", c.head_dim);
    w.u32("attention.value_length", c.head_dim);
  }
  w.set(std::string(keys::kFileType), MetadataValue::of(in.file_type));
  return {};
}

ConvertTensorPlan generated_tensor(std::string gguf_name, std::vector<float> values) {
  ConvertTensorPlan t;
  t.gguf_name = std::move(gguf_name);
  t.shape = {static_cast<int64_t>(values.size())};
  t.transform = ConvertTransform::generated;
  t.generated = std::move(values);
  return t;
}

Expected<void> llama_model_keys(const FamilyInput& in, KeyWriter& w) {
  if (auto r = text_model_keys(in, w); !r) return r;
  w.u32("vocab_size", in.config.vocab);
  w.u32("rope.dimension_count", in.config.head_dim);
  return {};
}

Expected<void> llama3_rope_freqs(const FamilyInput& in, KeyWriter&, std::vector<ConvertTensorPlan>& out) {
  const HfConfig& c = in.config;
  const auto it = c.rope_full.find("rope_type");
  if (it == c.rope_full.end() || !it->is_string()) return {};
  std::string type = it->get<std::string>();
  std::transform(type.begin(), type.end(), type.begin(), [](char ch) { return static_cast<char>(std::tolower(static_cast<unsigned char>(ch))); });
  if (type != "llama3") return {};
  double base = 10000.0, factor = 8.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
  for (auto [field, key] : {std::pair{&base, "rope_theta"}, {&factor, "factor"}, {&low, "low_freq_factor"},
                            {&high, "high_freq_factor"}, {&old_ctx, "original_max_position_embeddings"}}) {
    auto v = c.optional_number(c.rope_full, key);
    if (!v) return std::move(v).error();
    if (*v) *field = **v;
  }
  // In float32 as torch computes them.
  const auto dim = static_cast<float>(c.head_dim);
  const auto base_f = static_cast<float>(base);
  const auto low_wavelen = static_cast<float>(old_ctx / low);
  const auto high_wavelen = static_cast<float>(old_ctx / high);
  std::vector<float> factors;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const float freq = 1.0f / std::pow(base_f, static_cast<float>(i) / dim);
    const float wavelen = static_cast<float>(2 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const float smooth = (static_cast<float>(old_ctx) / wavelen - static_cast<float>(low)) / static_cast<float>(high - low);
      factors.push_back(1.0f / ((1.0f - smooth) / static_cast<float>(factor) + smooth));
    }
  }
  out.push_back(generated_tensor("rope_freqs.weight", std::move(factors)));
  return {};
}

}  // namespace ggufkit::convert_detail
