// gguf check, arch.*: the tensors and hyperparameters of a model against what llama.cpp's loader
// for its architecture creates (architecture_table.cpp). Every finding here is something
// llama.cpp refuses or aborts on, said with the message it would give.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "architecture_table.h"
#include "check_internal.h"
#include "meta/float_ranges.h"

namespace ggufkit::check {
namespace {

// ---- expressions over the hyperparameters ----

using Variables = std::vector<std::pair<std::string_view, std::optional<int64_t>>>;

std::optional<int64_t> lookup(const Variables& vars, std::string_view name) {
  for (const auto& [n, v] : vars) {
    if (n == name) return v;
  }
  return std::nullopt;
}

void set_variable(Variables& vars, std::string_view name, std::optional<int64_t> value) {
  for (auto& [n, v] : vars) {
    if (n == name) {
      v = value;
      return;
    }
  }
  vars.emplace_back(name, value);
}

std::optional<int64_t> evaluate_factor(std::string_view factor, const Variables& vars) {
  if (factor.empty() || factor == "?") return std::nullopt;
  if (std::all_of(factor.begin(), factor.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    int64_t v = 0;
    for (char c : factor) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v)) return std::nullopt;
    }
    return v;
  }
  return lookup(vars, factor);
}

// The value of a table expression ("head_k*n_head+2*n_embd_v_gqa"); nullopt when it names an
// unknown size ("?", a hyperparameter the file does not give), divides by 0 or overflows.
std::optional<int64_t> evaluate(std::string_view expression, const Variables& vars) {
  int64_t sum = 0;
  size_t term_start = 0;
  while (term_start <= expression.size()) {
    size_t term_end = expression.find('+', term_start);
    if (term_end == std::string_view::npos) term_end = expression.size();
    const std::string_view term = expression.substr(term_start, term_end - term_start);
    int64_t product = 1;
    char op = '*';
    size_t factor_start = 0;
    while (factor_start <= term.size()) {
      size_t factor_end = term.find_first_of("*/", factor_start);
      if (factor_end == std::string_view::npos) factor_end = term.size();
      const auto value = evaluate_factor(term.substr(factor_start, factor_end - factor_start), vars);
      if (!value) return std::nullopt;
      if (op == '*') {
        if (__builtin_mul_overflow(product, *value, &product)) return std::nullopt;
      } else {
        if (*value == 0) return std::nullopt;
        product /= *value;
      }
      if (factor_end == term.size()) break;
      op = term[factor_end];
      factor_start = factor_end + 1;
    }
    if (__builtin_add_overflow(sum, product, &sum)) return std::nullopt;
    if (term_end == expression.size()) break;
    term_start = term_end + 1;
  }
  return sum;
}

size_t rank_of(const TensorSpec& spec) {
  size_t n = 0;
  while (n < spec.shape.size() && !spec.shape[n].empty()) ++n;
  return n;
}

std::string format_dims(std::span<const std::optional<int64_t>> dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += dims[i] ? fmt::format("{}", *dims[i]) : "?";
  }
  return out + "]";
}

std::string format_shape(const TensorInfo& t) {
  std::string out = "[";
  for (uint32_t i = 0; i < t.n_dims; ++i) out += fmt::format("{}{}", i ? ", " : "", t.ne[i]);
  return out + "]";
}

std::string format_expressions(const TensorSpec& spec) {
  std::string out = "[";
  for (size_t i = 0; i < rank_of(spec); ++i) out += fmt::format("{}{}", i ? ", " : "", spec.shape[i]);
  return out + "]";
}

// "2", "2-5", "2, 4, 7-9": the layers, compressed into runs.
std::string format_layers(const std::vector<uint32_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
    i = j + 1;
  }
  return out;
}

// ---- tensor names ----

// "blk.12.attn_q.weight" -> {"blk.{}.attn_q.weight", 12}; other names stay as they are.
struct ParsedName {
  std::string pattern;
  std::optional<uint32_t> layer;
};

ParsedName parse_name(std::string_view name) {
  constexpr std::string_view prefix = "blk.";
  if (name.starts_with(prefix)) {
    const size_t dot = name.find('.', prefix.size());
    const std::string_view digits = name.substr(prefix.size(), dot == std::string_view::npos ? 0 : dot - prefix.size());
    const bool canonical = !digits.empty() && digits.size() <= 6 && (digits == "0" || digits[0] != '0') &&
                           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (canonical) {  // llama.cpp prints the index with %d: "blk.01" is never one of its names
      uint32_t layer = 0;
      for (char c : digits) layer = layer * 10 + static_cast<uint32_t>(c - '0');
      return {fmt::format("blk.{{}}{}", name.substr(dot)), layer};
    }
  }
  return {std::string(name), std::nullopt};
}

std::string name_for_layer(std::string_view pattern, uint32_t layer) {
  const size_t at = pattern.find("{}");
  if (at == std::string_view::npos) return std::string(pattern);
  return fmt::format("{}{}{}", pattern.substr(0, at), layer, pattern.substr(at + 2));
}

bool is_per_layer(const TensorSpec& spec) { return spec.name.find("{}") != std::string_view::npos; }

// ---- hyperparameters ----

// A key that llama.cpp reads with get_key_or_arr: one value for every layer, or one per layer.
struct LayerValues {
  const KeyValue* kv = nullptr;
  std::vector<uint64_t> values;  // one entry for a scalar
  bool is_array = false;
  bool integers = true;  // false when the value (or an element) is not an integer

  bool present() const { return kv != nullptr; }
  std::optional<uint64_t> at(uint32_t layer) const {
    if (values.empty() || !integers) return std::nullopt;
    if (!is_array) return values[0];
    return layer < values.size() ? std::optional(values[layer]) : std::nullopt;
  }
  bool varies() const {
    return is_array && integers && std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end();
  }
};

std::optional<int64_t> to_signed(std::optional<uint64_t> v) {
  if (!v || *v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(*v);
}

class Hyperparameters {
 public:
  Hyperparameters(const ModelUnderCheck& model, const ArchSpec& spec) : model_(model), spec_(spec) {
    head_count = layer_values("attention.head_count");
    head_count_kv = layer_values("attention.head_count_kv");
    feed_forward_length = layer_values("feed_forward_length");
    expert_used_count = layer_values("expert_used_count");
    expert_feed_forward_length = layer_values("expert_feed_forward_length");
    block_count = scalar("block_count");
    if (block_count && *block_count >= 1 && *block_count <= kLlamaMaxLayers) valid_block_count = block_count;
  }

  std::string key(std::string_view suffix) const { return fmt::format("{}.{}", spec_.name, suffix); }
  const KeyValue* kv(std::string_view suffix) const { return model_.find(key(suffix)); }
  std::optional<uint64_t> offset(std::string_view suffix) const {
    const KeyValue* k = kv(suffix);
    return k ? std::optional(k->offset) : std::nullopt;
  }
  // An integer scalar; nullopt when absent, an array or not an integer.
  std::optional<uint64_t> scalar(std::string_view suffix) const {
    const KeyValue* k = kv(suffix);
    return k ? k->value.as_uint() : std::nullopt;
  }

  LayerValues layer_values(std::string_view suffix) const {
    LayerValues out;
    out.kv = kv(suffix);
    if (!out.kv) return out;
    if (const auto arr = out.kv->value.as_array()) {
      out.is_array = true;
      for (const ValueView e : arr->values()) {
        const auto v = e.as_uint();
        if (!v) {
          out.integers = false;
          break;
        }
        out.values.push_back(*v);
      }
    } else if (const auto v = out.kv->value.as_uint()) {
      out.values.push_back(*v);
    } else {
      out.integers = false;
    }
    return out;
  }

  // The loader's sizes for one layer. Architectures that size every layer from layer 0
  // (per_layer_shapes false) get layer 0's values for every layer, as llama.cpp does.
  Variables variables(uint32_t layer) const {
    if (!spec_.per_layer_shapes) layer = 0;
    Variables v;
    const auto n_embd = to_signed(scalar("embedding_length"));
    // A count of 0 is reported as a bad hyperparameter; the sizes it would give stay unknown so
    // that every attention tensor is not reported again.
    const auto positive = [](std::optional<int64_t> x) { return x && *x > 0 ? x : std::nullopt; };
    const auto n_head = positive(to_signed(head_count.at(layer)));
    const auto n_head_kv = head_count_kv.present() ? positive(to_signed(head_count_kv.at(layer))) : n_head;
    auto per_head = [&](std::string_view suffix) -> std::optional<int64_t> {
      if (const auto given = to_signed(scalar(suffix))) return given;
      if (!n_embd || !n_head) return std::nullopt;
      return *n_embd / *n_head;
    };
    const auto head_k = per_head("attention.key_length");
    const auto head_v = per_head("attention.value_length");
    auto product = [](std::optional<int64_t> a, std::optional<int64_t> b) -> std::optional<int64_t> {
      int64_t r = 0;
      if (!a || !b || __builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    };
    set_variable(v, "n_embd", n_embd);
    set_variable(v, "n_vocab", vocabulary_size());
    set_variable(v, "n_ctx", positive(to_signed(scalar("context_length"))));
    set_variable(v, "n_head", n_head);
    set_variable(v, "n_head_kv", n_head_kv);
    set_variable(v, "head_k", head_k);
    set_variable(v, "head_v", head_v);
    set_variable(v, "n_embd_k_gqa", product(head_k, n_head_kv));
    set_variable(v, "n_embd_v_gqa", product(head_v, n_head_kv));
    const auto n_rot = to_signed(scalar("rope.dimension_count"));
    set_variable(v, "n_rot", n_rot ? n_rot : head_k);
    set_variable(v, "n_ff", to_signed(feed_forward_length.at(layer)));
    set_variable(v, "n_expert", positive(expert_count()));  // 0 is reported where experts are needed
    set_variable(v, "n_expert_used", to_signed(expert_used_count.at(layer)).value_or(0));
    set_variable(v, "n_ff_exp", to_signed(expert_feed_forward_length.at(layer)));
    set_variable(v, "n_ff_shexp", to_signed(scalar("expert_shared_feed_forward_length")));
    const KeyValue* types = model_.find(kTokenTypeCountKey);
    set_variable(v, "n_token_types", types ? to_signed(types->value.as_uint()) : std::nullopt);
    set_variable(v, "n_cls_out", classifier_outputs());
    // The loader's fallbacks for sizes a file may leave out (or give as 0).
    for (const VariableDefault& d : spec_.defaults) {
      const auto given = lookup(v, d.variable);
      if (!given || *given == 0) set_variable(v, d.variable, evaluate(d.expression, v));
    }
    return v;
  }

  // llama.cpp's n_vocab: the tokenizer's token count, else {arch}.vocab_size (no_vocab models).
  std::optional<int64_t> vocabulary_size() const {
    if (const KeyValue* tokens = model_.find(keys::kTokens)) {
      if (const auto arr = tokens->value.as_array()) return to_signed(arr->size());
    }
    return to_signed(scalar("vocab_size"));
  }
  int64_t expert_count() const { return to_signed(scalar("expert_count")).value_or(0); }
  bool long_rope() const {
    const KeyValue* k = kv("rope.scaling.type");
    return k && k->value.as_string() == "longrope";
  }

  static constexpr std::string_view kTokenTypeCountKey = "tokenizer.ggml.token_type_count";

  std::optional<uint64_t> block_count;
  std::optional<uint64_t> valid_block_count;  // in 1..LLAMA_MAX_LAYERS
  LayerValues head_count, head_count_kv, feed_forward_length, expert_used_count, expert_feed_forward_length;

 private:
  std::optional<int64_t> classifier_outputs() const {
    const KeyValue* labels = kv("classifier.output_labels");
    const auto arr = labels ? labels->value.as_array() : std::nullopt;
    return arr && !arr->empty() ? to_signed(arr->size()) : std::optional<int64_t>(1);
  }

  const ModelUnderCheck& model_;
  const ArchSpec& spec_;
};

// ---- the types the loader reads keys as ----

// How llama.cpp's loader reads a key: get_key into a scalar of the type; get_key_or_arr into one
// value per layer (a uint32, or an array of uint32, int32 or bool); or the get_key_or_arr overload
// that takes a uint32 and ignores an array (sliding_window_pattern).
enum class KeyForm : uint8_t { scalar, per_layer, scalar_or_ignored_array };

struct LoaderKey {
  std::string_view suffix;
  ValueType type;
  KeyForm form = KeyForm::scalar;
};

// Every "{arch}.<suffix>" key the architecture pass checks the type of, with the type of the
// hparams field llama.cpp reads it into (src/llama-hparams.h). The rope.* keys are the RoPE pass's.
constexpr LoaderKey kLoaderKeys[] = {
    {"context_length", ValueType::UInt32},
    {"embedding_length", ValueType::UInt32},
    {"embedding_length_out", ValueType::UInt32},
    {"attention.causal", ValueType::Bool},
    {"pooling_type", ValueType::UInt32},
    {"block_count", ValueType::UInt32},
    {"nextn_predict_layers", ValueType::UInt32},
    {"expert_count", ValueType::UInt32},
    {"expert_used_count", ValueType::UInt32, KeyForm::per_layer},
    {"expert_group_count", ValueType::UInt32},
    {"expert_group_used_count", ValueType::UInt32},
    {"feed_forward_length", ValueType::UInt32, KeyForm::per_layer},
    {"attention.head_count", ValueType::UInt32, KeyForm::per_layer},
    {"attention.head_count_kv", ValueType::UInt32, KeyForm::per_layer},
    {"attention.key_length", ValueType::UInt32},
    {"attention.value_length", ValueType::UInt32},
    {"attention.key_length_swa", ValueType::UInt32},
    {"attention.value_length_swa", ValueType::UInt32},
    {"rope.dimension_count_swa", ValueType::UInt32},
    {"vocab_size", ValueType::UInt32},
    {"attention.layer_norm_rms_epsilon", ValueType::Float32},
    {"attention.layer_norm_epsilon", ValueType::Float32},
    {"expert_feed_forward_length", ValueType::UInt32, KeyForm::per_layer},
    {"expert_shared_feed_forward_length", ValueType::UInt32},
    {"attention.sliding_window", ValueType::UInt32},
    {"attention.sliding_window_pattern", ValueType::UInt32, KeyForm::scalar_or_ignored_array},
    {"rope.freq_base_swa", ValueType::Float32},
    {"attn_logit_softcapping", ValueType::Float32},
    {"final_logit_softcapping", ValueType::Float32},
};

// What load_hparams (src/llama-model.cpp) reads for every architecture before its own keys.
constexpr std::string_view kEveryArchitectureKeys[] = {
    "context_length",       "embedding_length",        "embedding_length_out",    "attention.causal",
    "pooling_type",         "block_count",             "nextn_predict_layers",    "expert_count",
    "expert_used_count",    "expert_group_count",      "expert_group_used_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",    "attention.value_length",
    "attention.key_length_swa", "attention.value_length_swa", "rope.dimension_count_swa",
};

const LoaderKey* find_loader_key(std::string_view suffix) {
  for (const LoaderKey& k : kLoaderKeys) {
    if (k.suffix == suffix) return &k;
  }
  return nullptr;
}

// ggml's names of the value types (gguf_type_name), as llama.cpp's messages print them.
std::string_view gguf_type_name(ValueType type) {
  switch (type) {
    case ValueType::UInt8: return "u8";
    case ValueType::Int8: return "i8";
    case ValueType::UInt16: return "u16";
    case ValueType::Int16: return "i16";
    case ValueType::UInt32: return "u32";
    case ValueType::Int32: return "i32";
    case ValueType::Float32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "str";
    case ValueType::Array: return "arr";
    case ValueType::UInt64: return "u64";
    case ValueType::Int64: return "i64";
    case ValueType::Float64: return "f64";
  }
  return "?";
}

// One key against the type the loader reads it as; false (after the finding) when it cannot.
bool key_type_ok(const KeyValue& kv, const LoaderKey& want, Findings& out) {
  const ValueType type = kv.value.type();
  if (type == ValueType::Array && want.form != KeyForm::scalar) {
    if (want.form == KeyForm::scalar_or_ignored_array) return true;
    const ValueType element = kv.value.as_array()->element_type();
    if (element == ValueType::UInt32 || element == ValueType::Int32 || element == ValueType::Bool) return true;
    const bool other_array = element == ValueType::UInt64 || element == ValueType::Float32 || element == ValueType::String;
    out.error("arch.wrong_type", kv.key, kv.offset,
              fmt::format("'{}' is an array of {}, but llama.cpp takes one uint32 per layer (an array of uint32, "
                          "int32 or bool) and refuses the file (\"{}\"); write the array as uint32",
                          kv.key, value_type_name(element),
                          other_array ? fmt::format("{} has wrong array element type {}", kv.key, gguf_type_name(element))
                                      : fmt::format("{} is not a string/float32/uint32/int32/uint64 array", kv.key)));
    return false;
  }
  if (type == want.type) return true;
  out.error("arch.wrong_type", kv.key, kv.offset,
            fmt::format("'{}' is {}, but llama.cpp reads it as a {} and refuses the file (\"key {} has wrong type {} "
                        "but expected type {}\"); set it again with gguf set --type {}",
                        kv.key, with_article(value_type_name(type)), value_type_name(want.type), kv.key,
                        gguf_type_name(type), gguf_type_name(want.type), value_type_name(want.type)));
  return false;
}

// The types of every key the loader reads for `arch`: those of every architecture, and with a
// table, the architecture's own. Returns the suffixes of the keys that failed, so that the range
// checks do not report them again.
std::vector<std::string_view> check_key_types(const ModelUnderCheck& model, std::string_view arch, const ArchSpec* spec,
                                              Findings& out) {
  std::vector<std::string_view> suffixes(std::begin(kEveryArchitectureKeys), std::end(kEveryArchitectureKeys));
  if (spec) {
    for (const auto* list : {&spec->required_keys, &spec->shape_keys, &spec->optional_keys}) {
      for (std::string_view suffix : *list) {
        if (std::find(suffixes.begin(), suffixes.end(), suffix) == suffixes.end()) suffixes.push_back(suffix);
      }
    }
  }
  std::vector<std::string_view> failed;
  for (std::string_view suffix : suffixes) {
    const LoaderKey* want = find_loader_key(suffix);
    const KeyValue* kv = model.find(fmt::format("{}.{}", arch, suffix));
    if (!want || !kv) continue;
    if (!key_type_ok(*kv, *want, out)) failed.push_back(suffix);
  }
  return failed;
}

constexpr std::string_view kReconvert =
    "the file was probably written by a converter for a different version or edited by hand; convert the model "
    "again or correct the key with gguf set";

void missing_key(const Hyperparameters& hp, std::string_view suffix, Findings& out, std::string_view arch) {
  out.error("arch.missing_hyperparameter", hp.key(suffix), std::nullopt,
            fmt::format("llama.cpp's {} loader requires '{}' and refuses the file without it (\"key not found in "
                        "model\"); {}",
                        arch, hp.key(suffix), kReconvert));
}

void bad_key(const Hyperparameters& hp, std::string_view suffix, Findings& out, std::string message) {
  out.error("arch.bad_hyperparameter", hp.key(suffix), hp.offset(suffix), std::move(message));
}

// Checks one get_key_or_arr key: an array must have one integer per layer.
void check_layer_array(const Hyperparameters& hp, std::string_view suffix, const LayerValues& values, bool shapes,
                       const ArchSpec& spec, Findings& out) {
  if (!values.present()) return;
  if (!values.integers) {
    bad_key(hp, suffix, out,
            fmt::format("'{}' must be an unsigned integer or an array of them, one per layer: llama.cpp refuses "
                        "other types; {}",
                        hp.key(suffix), kReconvert));
    return;
  }
  if (!values.is_array) return;
  if (hp.valid_block_count && values.values.size() != *hp.valid_block_count) {
    bad_key(hp, suffix, out,
            fmt::format("'{}' has {} entries but block_count is {}: llama.cpp refuses the file (\"wrong array "
                        "length\"); give one value per layer",
                        hp.key(suffix), values.values.size(), *hp.valid_block_count));
    return;
  }
  if (shapes && !spec.per_layer_shapes && values.varies()) {
    bad_key(hp, suffix, out,
            fmt::format("'{}' differs between layers, but llama.cpp's {} loader sizes every layer's tensors from "
                        "layer 0's value ({}): it refuses layers whose tensors follow their own value; this "
                        "architecture needs one value for all layers",
                        hp.key(suffix), spec.name, values.values[0]));
  }
}

void check_hyperparameters(const ModelUnderCheck& model, const ArchSpec& spec, const Hyperparameters& hp,
                           bool vocabulary_only, Findings& out) {
  const std::string_view arch = spec.name;
  // Wrong types first: a key llama.cpp cannot read is reported once, as that.
  const std::vector<std::string_view> mistyped = check_key_types(model, arch, &spec, out);
  const auto readable = [&](std::string_view suffix) {
    return std::find(mistyped.begin(), mistyped.end(), suffix) == mistyped.end();
  };
  // llama.cpp's load_hparams stops after the vocabulary for a vocabulary-only load: such files
  // need none of the model's keys, but the values they do give must still make sense.
  if (!vocabulary_only) {
    for (std::string_view suffix : {"context_length", "embedding_length", "block_count"}) {
      if (!hp.kv(suffix)) missing_key(hp, suffix, out, arch);
    }
    for (std::string_view suffix : spec.required_keys) {
      if (!hp.kv(suffix)) missing_key(hp, suffix, out, arch);
    }
    for (std::string_view suffix : spec.shape_keys) {
      if (hp.kv(suffix)) continue;
      out.error("arch.missing_hyperparameter", hp.key(suffix), std::nullopt,
                fmt::format("'{}' is absent: llama.cpp's {} loader then takes 0 and no tensor sized by it can "
                            "match, so it refuses the file; {}",
                            hp.key(suffix), arch, kReconvert));
    }
  }

  if (const auto n_ctx = hp.scalar("context_length"); n_ctx && *n_ctx == 0 && readable("context_length")) {
    bad_key(hp, "context_length", out,
            fmt::format("'{}' is 0: llama.cpp loads the model, but refuses a context of the default size, which is "
                        "this one (\"n_ctx and model->hparams.n_ctx_train cannot both be zero\"); set the context "
                        "length the model was trained with",
                        hp.key("context_length")));
  }
  if (hp.kv("block_count") && readable("block_count")) {
    if (!hp.block_count) {
      bad_key(hp, "block_count", out, fmt::format("'{}' is not an unsigned integer; {}", hp.key("block_count"), kReconvert));
    } else if (!hp.valid_block_count) {
      bad_key(hp, "block_count", out,
              fmt::format("'{}' is {}, outside 1-{} (LLAMA_MAX_LAYERS): llama.cpp aborts on it; {}",
                          hp.key("block_count"), *hp.block_count, kLlamaMaxLayers, kReconvert));
    }
  }
  const auto n_embd = hp.scalar("embedding_length");
  if (hp.kv("embedding_length") && readable("embedding_length") && n_embd.value_or(0) == 0) {
    bad_key(hp, "embedding_length", out,
            fmt::format("'{}' must be a positive integer: every tensor of the model is sized by it; {}",
                        hp.key("embedding_length"), kReconvert));
  }

  for (const auto& [suffix, values, shapes] : {std::tuple{"attention.head_count", &hp.head_count, true},
                                               std::tuple{"attention.head_count_kv", &hp.head_count_kv, true},
                                               std::tuple{"feed_forward_length", &hp.feed_forward_length, true},
                                               std::tuple{"expert_feed_forward_length", &hp.expert_feed_forward_length, true},
                                               std::tuple{"expert_used_count", &hp.expert_used_count, false}}) {
    if (readable(suffix)) check_layer_array(hp, suffix, *values, shapes, spec, out);
  }

  // Heads, layer by layer; the first bad layer is reported.
  const size_t layers = std::max({hp.head_count.values.size(), hp.head_count_kv.values.size(), size_t{1}});
  for (uint32_t il = 0; il < layers; ++il) {
    const auto n_head = hp.head_count.at(il);
    const auto n_head_kv = hp.head_count_kv.present() ? hp.head_count_kv.at(il) : n_head;
    const std::string where = hp.head_count.is_array || hp.head_count_kv.is_array ? fmt::format(" in layer {}", il) : "";
    if (n_head && *n_head == 0) {
      bad_key(hp, "attention.head_count", out,
              fmt::format("'{}' is 0{}: llama.cpp's {} loader needs attention heads to size the attention tensors; {}",
                          hp.key("attention.head_count"), where, arch, kReconvert));
      break;
    }
    if (n_head_kv && *n_head_kv == 0) {
      bad_key(hp, "attention.head_count_kv", out,
              fmt::format("'{}' is 0{}: {} needs at least one key/value head; {}", hp.key("attention.head_count_kv"),
                          where, arch, kReconvert));
      break;
    }
    if (n_head && n_head_kv && *n_head % *n_head_kv != 0) {
      bad_key(hp, "attention.head_count_kv", out,
              fmt::format("'{}' is {}{}, which does not divide head_count {}: grouped-query attention needs "
                          "head_count to be a multiple of head_count_kv; {}",
                          hp.key("attention.head_count_kv"), *n_head_kv, where, *n_head, kReconvert));
      break;
    }
  }
  const auto n_head0 = hp.head_count.at(0);
  if (!hp.kv("attention.key_length") && n_embd && *n_embd > 0 && n_head0 && *n_head0 > 0 && *n_embd % *n_head0 != 0) {
    bad_key(hp, "attention.head_count", out,
            fmt::format("embedding_length {} is not divisible by '{}' {} and there is no attention.key_length: "
                        "llama.cpp then takes heads {} wide, {} short of n_embd in all, and its attention shapes "
                        "cannot be right; give attention.key_length and value_length if the heads are really "
                        "that size, otherwise {}",
                        *n_embd, hp.key("attention.head_count"), *n_head0, *n_embd / *n_head0,
                        *n_embd % *n_head0, kReconvert));
  }

  // Experts (llama.cpp's asserts in load_hparams and the MoE loaders' checks).
  const auto n_expert = hp.scalar("expert_count");
  uint64_t used_max = 0;
  for (uint64_t v : hp.expert_used_count.values) used_max = std::max(used_max, v);
  if (n_expert && *n_expert > kLlamaMaxExperts) {
    bad_key(hp, "expert_count", out,
            fmt::format("'{}' is {}, more than llama.cpp's LLAMA_MAX_EXPERTS ({}): it aborts on the file; {}",
                        hp.key("expert_count"), *n_expert, kLlamaMaxExperts, kReconvert));
  }
  if (used_max > n_expert.value_or(0)) {
    bad_key(hp, "expert_used_count", out,
            fmt::format("'{}' is {} but expert_count is {}: a token cannot use more experts than the model has, and "
                        "llama.cpp aborts on the file; {}",
                        hp.key("expert_used_count"), used_max, n_expert.value_or(0), kReconvert));
  } else if (n_expert.value_or(0) > 0 && hp.expert_used_count.integers && used_max == 0) {
    if (hp.expert_used_count.present()) {
      bad_key(hp, "expert_used_count", out,
              fmt::format("'{}' is 0 while expert_count is {}: llama.cpp refuses a model whose experts are never "
                          "used; {}",
                          hp.key("expert_used_count"), *n_expert, kReconvert));
    } else if (!vocabulary_only) {
      out.error("arch.missing_hyperparameter", hp.key("expert_used_count"), std::nullopt,
                fmt::format("the model has {} experts but no '{}': llama.cpp takes 0 experts per token and aborts "
                            "on the file; set it to the number of experts each token uses",
                            *n_expert, hp.key("expert_used_count")));
    }
  }
  if (spec.needs_experts) {
    if (!hp.kv("expert_count")) {
      if (!vocabulary_only) missing_key(hp, "expert_count", out, arch);
    } else if (n_expert.value_or(0) == 0) {
      bad_key(hp, "expert_count", out,
              fmt::format("'{}' is 0, but {} is a mixture-of-experts architecture: llama.cpp refuses it (\"n_expert "
                          "must be > 0\"); {}",
                          hp.key("expert_count"), arch, kReconvert));
    }
  }
  if (spec.needs_token_types && !vocabulary_only) {
    const KeyValue* types = model.find(Hyperparameters::kTokenTypeCountKey);
    if (!types || types->value.as_uint().value_or(0) == 0) {
      out.error("arch.missing_hyperparameter", Hyperparameters::kTokenTypeCountKey,
                types ? std::optional(types->offset) : std::nullopt,
                fmt::format("{} models need a positive '{}' (usually 2): llama.cpp refuses the file (\"model needs "
                            "to define token type count\"); {}",
                            arch, Hyperparameters::kTokenTypeCountKey, kReconvert));
    }
  }
}

// ---- tensors ----

bool applies(When when, const Hyperparameters& hp) {
  switch (when) {
    case When::always: return true;
    case When::dense_ffn: return hp.expert_count() == 0;
    case When::moe_ffn: return hp.expert_count() > 0;
    case When::long_rope: return hp.long_rope();
    case When::not_long_rope: return !hp.long_rope();
  }
  return true;
}

class TensorPass {
 public:
  TensorPass(const ModelUnderCheck& model, const ArchSpec& spec, const Hyperparameters& hp, Findings& out)
      : model_(model), spec_(spec), hp_(hp), out_(out) {
    for (const TensorSpec& t : spec.tensors) {
      if (applies(t.when, hp)) expected_.emplace(t.name, &t);
    }
    for (const TensorInfo* t : model.tensors) present_.insert(t->name);
  }

  void run() {
    std::map<uint32_t, size_t> tensors_per_layer;
    std::map<uint32_t, size_t> beyond_block_count;
    const auto declared = hp_.valid_block_count;
    for (const TensorInfo* t : model_.tensors) {
      const ParsedName parsed = parse_name(t->name);
      if (parsed.layer) ++tensors_per_layer[*parsed.layer];
      if (parsed.layer && declared && *parsed.layer >= *declared) {
        ++beyond_block_count[*parsed.layer];
        continue;
      }
      check_tensor(*t, parsed);
    }

    // Required tensors. Without a usable block_count, the layers the file has are checked.
    const uint64_t layers = declared ? *declared : (tensors_per_layer.empty() ? 0 : tensors_per_layer.rbegin()->first + 1);
    std::vector<uint32_t> empty_layers;
    for (const TensorSpec& t : spec_.tensors) {
      if (!is_per_layer(t)) check_required(t, 0);
    }
    for (uint32_t il = 0; il < layers; ++il) {
      if (declared && !tensors_per_layer.contains(il)) {
        empty_layers.push_back(il);  // one finding for all of them, below
        continue;
      }
      for (const TensorSpec& t : spec_.tensors) {
        if (is_per_layer(t)) check_required(t, il);
      }
    }

    if (!beyond_block_count.empty()) {
      std::vector<uint32_t> extra;
      size_t count = 0;
      for (const auto& [layer, n] : beyond_block_count) {
        extra.push_back(layer);
        count += n;
      }
      out_.error("arch.block_count_mismatch", fmt::format("blk.{}", extra.front()), hp_.offset("block_count"),
                 fmt::format("'{}' is {}, but the file has {} tensors for layer(s) {}: llama.cpp reads the layers below "
                             "{} only and refuses the file (\"wrong number of tensors\"); if those layers belong to "
                             "the model, set {} to {}",
                             hp_.key("block_count"), *declared, count, format_layers(extra), *declared,
                             hp_.key("block_count"), extra.back() + 1));
    }
    if (!empty_layers.empty()) {
      const uint32_t have = tensors_per_layer.empty() ? 0 : tensors_per_layer.rbegin()->first + 1;
      out_.error("arch.block_count_mismatch", fmt::format("blk.{}", empty_layers.front()), hp_.offset("block_count"),
                 fmt::format("'{}' is {}, but layer(s) {} have no tensors: llama.cpp refuses the file (\"missing "
                             "tensor 'blk.{}.…'\"); if the model has {} layers, set {} to {}, otherwise the file "
                             "is truncated or a shard is missing",
                             hp_.key("block_count"), *declared, format_layers(empty_layers), empty_layers.front(),
                             have, hp_.key("block_count"), have));
    }
  }

 private:
  bool has(std::string_view name) const { return present_.contains(name); }

  const TensorSpec* expected(std::string_view pattern) const {
    const auto it = expected_.find(pattern);
    return it == expected_.end() ? nullptr : it->second;
  }

  // The scale spec for "<stem>.scale" or "<stem>.input_scale" when llama.cpp's generic pass
  // loads it: its weight "<stem>.weight" is one that pass scales, and the file has it.
  const ScaleSpec* scale_of_loaded_weight(std::string_view name) const {
    for (std::string_view suffix : {".scale", ".input_scale"}) {
      if (!name.ends_with(suffix)) continue;
      const std::string weight = fmt::format("{}.weight", name.substr(0, name.size() - suffix.size()));
      const std::string pattern = parse_name(weight).pattern;
      if (!has(weight) || !expected(pattern)) return nullptr;
      for (const ScaleSpec& scale : scaled_weights()) {
        if (scale.weight == pattern) return &scale;
      }
    }
    return nullptr;
  }

  void unexpected(const TensorInfo& t, std::string_view why) {
    out_.warning("arch.unexpected_tensor", t.name, t.info_offset,
                 fmt::format("{}: llama.cpp refuses files with tensors its loader does not create (\"wrong number of "
                             "tensors\"); the file was probably written for another architecture or a newer "
                             "llama.cpp, or the tensor should be removed",
                             why));
  }

  void check_tensor(const TensorInfo& t, const ParsedName& parsed) {
    const TensorSpec* spec = expected(parsed.pattern);
    if (!spec) {
      if (const ScaleSpec* scale = scale_of_loaded_weight(t.name)) {
        const TensorSpec scale_spec{.name = t.name, .shape = {scale->size}};
        check_shape(t, scale_spec, parsed.layer.value_or(0));
      } else {
        unexpected(t, fmt::format("'{}' is not a tensor llama.cpp's {} loader reads", t.name, spec_.name));
      }
      return;
    }
    const uint32_t layer = parsed.layer.value_or(0);
    if (!spec->replaced_by.empty()) {
      const std::string other = name_for_layer(spec->replaced_by, layer);
      if (has(other)) {
        unexpected(t, fmt::format("the file also has '{}', so llama.cpp's {} loader reads that and never '{}'", other,
                                  spec_.name, t.name));
        return;
      }
    }
    if (!spec->only_with.empty()) {
      const std::string other = name_for_layer(spec->only_with, layer);
      if (!has(other)) {
        unexpected(t, fmt::format("llama.cpp's {} loader reads '{}' only together with '{}', which the file lacks",
                                  spec_.name, t.name, other));
        return;
      }
    }
    check_shape(t, *spec, layer);
  }

  void check_shape(const TensorInfo& t, const TensorSpec& spec, uint32_t layer) {
    const Variables vars = hp_.variables(layer);
    const size_t rank = rank_of(spec);
    std::vector<std::optional<int64_t>> want;
    bool matches = true;
    for (size_t i = 0; i < kMaxDimensions; ++i) {
      const std::optional<int64_t> dim = i < rank ? evaluate(spec.shape[i], vars) : std::optional<int64_t>(1);
      if (i < rank) want.push_back(dim);
      if (dim && *dim != t.ne[i]) matches = false;  // an unknown size matches anything
    }
    if (matches) return;
    out_.error("arch.shape_mismatch", t.name, t.info_offset,
               fmt::format("'{}' has shape {}, but llama.cpp's {} loader expects {} = {} (ggml order, ne0 first) from "
                           "the file's hyperparameters and refuses the file (\"wrong shape\"); either the tensor or a "
                           "hyperparameter is wrong: {}",
                           t.name, format_shape(t), spec_.name, format_expressions(spec), format_dims(want),
                           kReconvert));
  }

  void check_required(const TensorSpec& spec, uint32_t layer) {
    if (spec.presence == Presence::optional || !applies(spec.when, hp_)) return;
    const std::string name = name_for_layer(spec.name, layer);
    if (has(name)) return;
    if (!spec.replaced_by.empty() && has(name_for_layer(spec.replaced_by, layer))) return;
    const Variables vars = hp_.variables(layer);
    std::vector<std::optional<int64_t>> want;
    for (size_t i = 0; i < rank_of(spec); ++i) want.push_back(evaluate(spec.shape[i], vars));
    const std::string alternative =
        spec.replaced_by.empty() ? "" : fmt::format(" (or the fused '{}')", name_for_layer(spec.replaced_by, layer));
    const std::string consequence =
        spec.presence == Presence::needed_by_graph
            ? fmt::format("which llama.cpp's {} model needs: llama.cpp loads the file but crashes when it evaluates "
                          "the model",
                          spec_.name)
            : fmt::format("which llama.cpp's {} loader requires: llama.cpp refuses the file (\"missing tensor "
                          "'{}'\")",
                          spec_.name, name);
    out_.error("arch.missing_tensor", name, std::nullopt,
               fmt::format("the file has no '{}'{} of shape {}, {}; the file was probably written by a converter for "
                           "a different model or version, or is incomplete",
                           name, alternative, format_dims(want), consequence));
  }

  const ModelUnderCheck& model_;
  const ArchSpec& spec_;
  const Hyperparameters& hp_;
  Findings& out_;
  std::map<std::string_view, const TensorSpec*, std::less<>> expected_;
  std::unordered_set<std::string_view> present_;
};

// The float hyperparameters llama.cpp asserts on or divides by, against meta/float_ranges.cpp's table.
void check_float_ranges(const ModelUnderCheck& model, std::string_view arch, Findings& out) {
  for (const meta::FloatRule& table_rule : meta::architecture_float_rules()) {
    const meta::FloatRule& rule = meta::architecture_float_rule(arch, table_rule);
    const KeyValue* kv = model.find(fmt::format("{}.{}", arch, rule.suffix));
    if (kv == nullptr) continue;
    const auto problem = meta::judge_float(rule, kv->key, kv->value);
    if (!problem) continue;
    if (problem->error) {
      out.error("arch.bad_hyperparameter", kv->key, kv->offset, fmt::format("{}; {}", problem->message, kReconvert));
    } else {
      out.warning("arch.implausible_hyperparameter", kv->key, kv->offset,
                  fmt::format("{}; {}", problem->message, kReconvert));
    }
  }
}

}  // namespace

void check_architecture(const ModelUnderCheck& model, Findings& out) {
  const KeyValue* arch_kv = model.find(keys::kArchitecture);
  const auto arch = arch_kv ? arch_kv->value.as_string() : std::nullopt;
  if (!arch) return;  // the metadata pass reports a missing or mistyped general.architecture
  const ArchSpec* spec = find_arch_spec(*arch);
  if (!spec) {
    if (llama_cpp_knows_architecture(*arch)) {
      check_key_types(model, *arch, nullptr, out);
      check_float_ranges(model, *arch, out);
    }
    out.info("arch.unknown_architecture", keys::kArchitecture, arch_kv->offset,
             llama_cpp_knows_architecture(*arch)
                 ? fmt::format("llama.cpp knows architecture '{}', but gguf check has no table for it yet: its "
                               "tensors and its own hyperparameters were not checked (the types of those every "
                               "architecture has were)",
                               *arch)
                 : fmt::format("llama.cpp does not know architecture '{}' and will refuse to load the file; its "
                               "tensors and hyperparameters were not checked",
                               *arch));
    return;
  }
  const bool vocabulary_only = model.tensors.empty();
  if (vocabulary_only) {
    out.info("arch.vocabulary_only", "", std::nullopt,
             fmt::format("the file has no tensors: it can serve as a vocabulary (llama.cpp's vocab_only load), not "
                         "as a {} model; only the hyperparameters it gives were checked",
                         *arch));
  }
  const Hyperparameters hp(model, *spec);
  check_hyperparameters(model, *spec, hp, vocabulary_only, out);
  check_float_ranges(model, *arch, out);
  if (vocabulary_only) return;
  TensorPass(model, *spec, hp, out).run();
}

}  // namespace ggufkit::check
