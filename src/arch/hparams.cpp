// The hyperparameters llama.cpp derives for memory (llama_model_base::load_hparams, the
// architecture's load_arch_hparams, llama_hparams' accessors), read as strictly as llama.cpp reads
// them: a uint32 key must be a uint32 (GGUFMeta's get_kv refuses any other type), a per-layer key
// is a uint32 or an array of block_count int32/uint32 (get_key_or_arr).
#include <ggufkit/arch.h>

#include <fmt/format.h>

#include <algorithm>

namespace ggufkit::arch {
namespace {

constexpr uint32_t kMaxLayers = 512;  // LLAMA_MAX_LAYERS

Error bad(std::string key, std::string message) {
  return make_error(ErrorCode::bad_hyperparameter, std::nullopt, std::move(key), std::move(message));
}

class Keys {
 public:
  Keys(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
  bool has(std::string_view suffix) const { return file_.get(key(suffix)).has_value(); }
  std::optional<ValueView> value(std::string_view suffix) const { return file_.get(key(suffix)); }

  // A key of exactly type T (llama.cpp's GGUFMeta refuses any other): nullopt when absent.
  template <class T>
  Expected<std::optional<T>> typed(std::string_view suffix) const {
    const std::string k = key(suffix);
    const auto v = file_.get(k);
    if (!v) return std::optional<T>{};
    const auto x = v->get<T>();
    if (!x) {
      return bad(k, fmt::format("is a {}, llama.cpp reads a {}", value_type_name(v->type()),
                                value_type_name(value_type_of<T>::value)));
    }
    return std::optional<T>(*x);
  }
  Expected<std::optional<uint32_t>> u32(std::string_view suffix) const { return typed<uint32_t>(suffix); }
  Expected<std::optional<bool>> boolean(std::string_view suffix) const { return typed<bool>(suffix); }
  Expected<uint32_t> required_u32(std::string_view suffix) const {
    auto v = u32(suffix);
    if (!v) return v.error();
    if (!*v) return bad(key(suffix), "is missing; llama.cpp requires it");
    return **v;
  }
  // get_key_or_arr: a uint32 for every layer, or an array of exactly n int32/uint32.
  Expected<bool> per_layer(std::string_view suffix, uint32_t n, std::vector<uint32_t>& out) const {
    const std::string k = key(suffix);
    const auto v = file_.get(k);
    if (!v) return false;
    if (v->type() != ValueType::Array) {
      const auto x = v->get<uint32_t>();
      if (!x) return bad(k, fmt::format("is a {}, llama.cpp reads a uint32 or a per-layer array", value_type_name(v->type())));
      out.assign(n, *x);
      return true;
    }
    const auto a = v->as_array();
    if (!a || a->size() != n) {
      return bad(k, fmt::format("has {} elements, llama.cpp expects one per layer ({})", a ? a->size() : 0, n));
    }
    out.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      if (a->element_type() == ValueType::UInt32) {
        out[i] = *a->get<uint32_t>(i);
      } else if (a->element_type() == ValueType::Int32) {
        const int32_t x = *a->get<int32_t>(i);
        if (x < 0) return bad(k, fmt::format("element {} is negative ({})", i, x));
        out[i] = static_cast<uint32_t>(x);
      } else {
        return bad(k, fmt::format("is an array of {}, llama.cpp reads int32 or uint32", value_type_name(a->element_type())));
      }
    }
    return true;
  }

 private:
  const GgufFile& file_;
  std::string arch_;
};

#define GGUFKIT_TRY(var, expr)            \
  auto var##_result = (expr);             \
  if (!var##_result) return var##_result.error(); \
  auto var = std::move(*var##_result)

// llama_hparams::set_swa_pattern.
void set_swa_pattern(std::vector<Layer>& layers, uint32_t period, bool dense_first) {
  for (uint32_t il = 0; il < layers.size(); ++il) {
    layers[il].swa = period == 0 || (dense_first ? il % period != 0 : il % period < period - 1);
  }
}

// The sliding-window part of load_arch_hparams.
Expected<void> apply_swa(const Architecture& a, const Keys& keys, Hyperparameters& hp) {
  const SwaRule& rule = a.swa;
  if (rule.when == SwaWhen::never) return {};
  GGUFKIT_TRY(window, keys.u32("attention.sliding_window"));
  bool on = false;
  switch (rule.when) {
    case SwaWhen::never: break;
    case SwaWhen::always: on = true; break;
    case SwaWhen::window_positive: on = window && *window > 0; break;
    case SwaWhen::unless_window_zero: on = !(window && *window == 0); break;
    case SwaWhen::layer_count: on = hp.layers.size() == rule.layer_count; break;
    case SwaWhen::per_layer_array: on = true; break;
  }
  if (!on) {
    // exaone4 reads the window even without sliding layers; it changes nothing without them.
    return {};
  }
  if (rule.window_forced) {
    hp.n_swa = rule.default_window;
  } else if (window) {
    hp.n_swa = *window;
  } else if (rule.default_window != 0) {
    hp.n_swa = rule.default_window;
  } else {
    return bad(keys.key("attention.sliding_window"), "is missing; llama.cpp requires it for this architecture");
  }
  hp.swa_type = rule.type;
  // sliding_window_pattern: a uint32 period. An array is skipped (llama.cpp's get_key_or_arr into
  // a scalar ignores it); another scalar type is refused, as llama.cpp refuses it.
  uint32_t period = rule.period;
  if (const auto p = keys.value("attention.sliding_window_pattern"); p && p->type() != ValueType::Array) {
    GGUFKIT_TRY(value, keys.u32("attention.sliding_window_pattern"));
    period = *value;
  }
  set_swa_pattern(hp.layers, period, rule.dense_first);
  if (!hp.any_swa()) hp.swa_type = SwaType::none;
  return {};
}

// The recurrent layers and their state rows (llama_hparams::n_embd_r / n_embd_s, is_recr).
Expected<void> apply_recurrent(const Architecture& a, const Keys& keys, Hyperparameters& hp) {
  if (a.memory != Memory::recurrent && a.memory != Memory::hybrid) return {};
  const uint32_t n_layer = static_cast<uint32_t>(hp.layers.size());
  if (a.memory == Memory::recurrent) {
    for (Layer& l : hp.layers) l.recurrent = true;
  } else if (a.state == State::shortconv) {
    for (Layer& l : hp.layers) l.recurrent = l.n_head_kv == 0;  // LFM2: the layers without KV heads
  } else {
    const auto v = keys.value("attention.recurrent_layers");
    if (v && v->type() == ValueType::Array) {
      const auto arr = v->as_array();
      if (!arr || arr->size() != n_layer || arr->element_type() != ValueType::Bool) {
        return bad(keys.key("attention.recurrent_layers"),
                   fmt::format("is not an array of {} bools, one per layer", n_layer));
      }
      for (uint32_t il = 0; il < n_layer; ++il) hp.layers[il].recurrent = *arr->get<bool>(il);
    } else {
      GGUFKIT_TRY(interval, keys.u32("full_attention_interval"));
      const uint32_t every = interval.value_or(4);
      if (every == 0) return bad(keys.key("full_attention_interval"), "is 0");
      for (uint32_t il = 0; il < n_layer; ++il) hp.layers[il].recurrent = (il + 1) % every != 0;
    }
  }
  if (a.state == State::shortconv) {
    GGUFKIT_TRY(l_cache, keys.required_u32("shortconv.l_cache"));
    hp.n_embd_r = uint64_t{hp.n_embd} * (l_cache > 0 ? l_cache - 1 : 0);
    hp.n_embd_s = 0;
  }
  if (a.state == State::ssm) {
    GGUFKIT_TRY(d_conv, keys.required_u32("ssm.conv_kernel"));
    GGUFKIT_TRY(d_inner, keys.required_u32("ssm.inner_size"));
    GGUFKIT_TRY(d_state, keys.required_u32("ssm.state_size"));
    GGUFKIT_TRY(n_group, keys.required_u32("ssm.group_count"));
    // Mamba's conv state (the first column is shifted out, not kept) and its SSM state.
    hp.n_embd_r = uint64_t{d_conv > 0 ? d_conv - 1 : 0} * (uint64_t{d_inner} + 2ull * n_group * d_state);
    hp.n_embd_s = uint64_t{d_state} * d_inner;
  }
  return {};
}

}  // namespace

uint64_t Hyperparameters::n_embd_v_gqa_max() const {
  uint64_t m = 0;
  for (const Layer& l : layers) m = std::max(m, l.n_embd_v_gqa());
  return m;
}

bool Hyperparameters::any_swa() const {
  return std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return l.swa; });
}

Expected<Hyperparameters> derive_hyperparameters(const GgufFile& file, const DeriveOptions& options) {
  const auto arch_value = file.get("general.architecture");
  if (!arch_value) return bad("general.architecture", "is missing");
  const auto arch_name = arch_value->get<std::string_view>();
  if (!arch_name) return bad("general.architecture", "is not a string");
  Hyperparameters hp;
  hp.architecture = std::string(*arch_name);
  hp.entry = find_architecture(*arch_name);
  if (hp.entry == nullptr && !options.assume_dense) {
    return make_error(ErrorCode::unknown_architecture, std::nullopt, "general.architecture",
                      fmt::format("architecture '{}' is not in the registry (--assume-dense estimates every "
                                  "layer as full attention)",
                                  *arch_name));
  }
  hp.assumed_dense = hp.entry == nullptr;
  const Keys keys(file, hp.architecture);

  GGUFKIT_TRY(n_ctx_train, keys.required_u32("context_length"));
  GGUFKIT_TRY(n_embd, keys.required_u32("embedding_length"));
  GGUFKIT_TRY(n_layer, keys.required_u32("block_count"));
  if (n_layer == 0 || n_layer > kMaxLayers) {
    return bad(keys.key("block_count"), fmt::format("is {}; llama.cpp accepts 1 to {}", n_layer, kMaxLayers));
  }
  if (hp.entry != nullptr) {
    for (std::string_view suffix : hp.entry->required_keys) {
      if (!keys.has(suffix)) return bad(keys.key(suffix), "is missing; llama.cpp requires it for this architecture");
    }
  }
  hp.n_ctx_train = n_ctx_train;
  hp.n_embd = n_embd;
  GGUFKIT_TRY(n_nextn, keys.u32("nextn_predict_layers"));
  hp.n_layer_nextn = n_nextn.value_or(0);
  if (hp.n_layer_nextn > n_layer) {
    return bad(keys.key("nextn_predict_layers"), fmt::format("is {}, above block_count {}", hp.n_layer_nextn, n_layer));
  }
  GGUFKIT_TRY(causal, keys.boolean("attention.causal"));
  hp.causal = causal.value_or(true);

  const auto tokens = file.get("tokenizer.ggml.tokens");
  const auto token_array = tokens ? tokens->as_array() : std::nullopt;
  if (!token_array || token_array->element_type() != ValueType::String) {
    return bad("tokenizer.ggml.tokens", "is missing or not an array of strings: the output buffer is sized by it");
  }
  if (token_array->size() > UINT32_MAX) return bad("tokenizer.ggml.tokens", "has more than 2^32 tokens");
  hp.n_vocab = static_cast<uint32_t>(token_array->size());

  std::vector<uint32_t> widths;
  const auto widest = [&](std::string_view suffix, uint32_t& out) -> Expected<void> {
    auto found = keys.per_layer(suffix, n_layer, widths);
    if (!found) return found.error();
    if (*found) out = *std::max_element(widths.begin(), widths.end());
    return {};
  };
  if (auto r = widest("feed_forward_length", hp.n_ff); !r) return r.error();
  if (auto r = widest("expert_used_count", hp.n_expert_used); !r) return r.error();
  if (auto r = widest("expert_feed_forward_length", hp.n_ff_exp); !r) return r.error();
  GGUFKIT_TRY(n_expert, keys.u32("expert_count"));
  hp.n_expert = n_expert.value_or(0);

  std::vector<uint32_t> n_head(n_layer, 0), n_head_kv;
  GGUFKIT_TRY(found_heads, keys.per_layer("attention.head_count", n_layer, n_head));
  (void)found_heads;
  n_head_kv = n_head;  // head_count_kv defaults to head_count
  GGUFKIT_TRY(found_kv, keys.per_layer("attention.head_count_kv", n_layer, n_head_kv));
  (void)found_kv;

  // Head sizes: n_embd / n_head(0) unless key_length / value_length say otherwise.
  uint32_t head_k = 0, head_v = 0;
  if (n_head[0] > 0) {
    head_k = head_v = n_embd / n_head[0];
    GGUFKIT_TRY(k, keys.u32("attention.key_length"));
    GGUFKIT_TRY(v, keys.u32("attention.value_length"));
    if (k) head_k = *k;
    if (v) head_v = *v;
  }
  GGUFKIT_TRY(k_swa, keys.u32("attention.key_length_swa"));
  GGUFKIT_TRY(v_swa, keys.u32("attention.value_length_swa"));
  const Memory memory = hp.entry != nullptr ? hp.entry->memory : Memory::kv_cache;
  if (memory == Memory::kv_cache || memory == Memory::hybrid) {
    for (uint32_t il = 0; il < n_layer && memory == Memory::kv_cache; ++il) {
      if (n_head[il] == 0) {
        return bad(keys.key("attention.head_count"),
                   il == 0 && !keys.has("attention.head_count") ? "is missing; an attention model needs it"
                                                                : fmt::format("is 0 for layer {}", il));
      }
    }
    if (head_k == 0 && n_head[0] > 0) return bad(keys.key("attention.key_length"), "is 0");
  }
  GGUFKIT_TRY(k_mla, keys.u32("attention.key_length_mla"));
  GGUFKIT_TRY(v_mla, keys.u32("attention.value_length_mla"));
  hp.mla = k_mla.value_or(0) != 0 && v_mla.value_or(0) != 0;

  hp.layers.resize(n_layer);
  for (uint32_t il = 0; il < n_layer; ++il) {
    Layer& l = hp.layers[il];
    l.n_head = n_head[il];
    l.n_head_kv = n_head_kv[il];
    l.head_k = head_k;
    l.head_v = head_v;
  }
  if (hp.entry != nullptr) {
    if (auto r = apply_swa(*hp.entry, keys, hp); !r) return r.error();
    if (auto r = apply_recurrent(*hp.entry, keys, hp); !r) return r.error();
  }
  for (Layer& l : hp.layers) {
    if (l.swa) {
      l.head_k = k_swa.value_or(head_k);
      l.head_v = v_swa.value_or(head_v);
    }
  }
  return hp;
}

}  // namespace ggufkit::arch
