// gguf check, RoPE pass: the {arch}.rope.* keys as llama.cpp's load_hparams (llama-model.cpp)
// reads them, and what ggml's rope kernels assert about the rotated dimensions.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "check_internal.h"
#include "meta/float_ranges.h"

namespace ggufkit::check {
namespace {

// llama_rope_scaling_type names; llama.cpp aborts on any other (GGML_ASSERT in load_hparams).
constexpr std::array<std::string_view, 4> kScalingTypes = {"none", "linear", "yarn", "longrope"};

// Architectures for which llama.cpp requires rope.dimension_count to equal the head size.
constexpr std::array<std::string_view, 4> kFullRotationArchitectures = {"llama", "deci", "falcon", "llama-embed"};

struct ArchKeys {
  const ModelUnderCheck& model;
  std::string arch;

  std::string name(std::string_view suffix) const { return arch + "." + std::string(suffix); }
  const KeyValue* find(std::string_view suffix) const { return model.find(name(suffix)); }
};

// A key llama.cpp reads as float32: its value, or an error finding when it has another type.
std::optional<float> float32_key(const ArchKeys& keys, std::string_view suffix, Findings& out) {
  const KeyValue* kv = keys.find(suffix);
  if (!kv) return std::nullopt;
  const auto value = kv->value.get<float>();
  if (!value) {
    out.error("rope.wrong_type", kv->key, kv->offset,
              fmt::format("{} is a {}; llama.cpp reads it as float32 and refuses the file with any other type; "
                          "write it as float32",
                          kv->key, value_type_name(kv->value.type())));
  }
  return value;
}

// A key llama.cpp reads as uint32.
std::optional<uint32_t> uint32_key(const ArchKeys& keys, std::string_view suffix, Findings& out) {
  const KeyValue* kv = keys.find(suffix);
  if (!kv) return std::nullopt;
  const auto value = kv->value.get<uint32_t>();
  if (!value) {
    out.error("rope.wrong_type", kv->key, kv->offset,
              fmt::format("{} is a {}; llama.cpp reads it as uint32 and refuses the file with any other type; "
                          "write it as uint32",
                          kv->key, value_type_name(kv->value.type())));
  }
  return value;
}

// The bases and factors trained models have, generously: outside them a warning (rope.implausible_value).
// Bases run from 10000 to a few 1e7 (rope_theta); factors (context extension) from 1 to a few dozen.
constexpr meta::FloatInterval kPlausibleFreqBase{1, 1e10};
constexpr meta::FloatInterval kPlausibleScalingFactor{1.0 / 1024, 1024};

void warn_implausible(const KeyValue& kv, float value, const meta::FloatInterval& range, std::string_view why,
                      Findings& out) {
  if (range.contains(value)) return;
  out.warning("rope.implausible_value", kv.key, kv.offset,
              fmt::format("'{}' is {}, outside {}: {}", kv.key, value, range.text(), why));
}

void check_freq_base(const ArchKeys& keys, std::string_view suffix, Findings& out) {
  const auto base = float32_key(keys, suffix, out);
  if (!base) return;
  const KeyValue* kv = keys.find(suffix);
  if (std::isfinite(*base) && *base > 0.0f) {
    return warn_implausible(*kv, *base, kPlausibleFreqBase,
                            "no trained model has such a RoPE base (10000 to a few 1e7); set the model's rope_theta", out);
  }
  out.error("rope.bad_freq_base", kv->key, kv->offset,
            fmt::format("{} is {}; RoPE needs a positive base (10000 is the usual default, newer models use "
                        "larger ones); set the model's rope_theta",
                        kv->key, *base));
}

// Scaling type, factor and original context length.
void check_scaling(const ArchKeys& keys, Findings& out) {
  std::string_view type = "linear";  // llama.cpp's default when the key is absent
  const KeyValue* type_kv = keys.find("rope.scaling.type");
  if (type_kv) {
    const auto value = type_kv->value.as_string();
    if (!value) {
      out.error("rope.wrong_type", type_kv->key, type_kv->offset,
                fmt::format("{} is a {}; llama.cpp reads it as a string and refuses the file otherwise",
                            type_kv->key, value_type_name(type_kv->value.type())));
      return;
    }
    if (std::find(kScalingTypes.begin(), kScalingTypes.end(), *value) == kScalingTypes.end()) {
      out.error("rope.unknown_scaling_type", type_kv->key, type_kv->offset,
                fmt::format("RoPE scaling type '{}' is not one llama.cpp knows (none, linear, yarn, longrope) "
                            "and it aborts while loading; use one of those",
                            *value));
      return;
    }
    type = *value;
  }

  // The factor; older files spell it rope.scale_linear, which llama.cpp reads when the new key is absent.
  std::string_view factor_suffix = "rope.scaling.factor";
  if (!keys.find(factor_suffix) && keys.find("rope.scale_linear")) factor_suffix = "rope.scale_linear";
  const KeyValue* factor_kv = keys.find(factor_suffix);
  const auto factor = float32_key(keys, factor_suffix, out);
  if (factor && !(std::isfinite(*factor) && *factor >= 0.0f)) {
    out.error("rope.bad_scaling_factor", factor_kv->key, factor_kv->offset,
              fmt::format("{} is {}; a RoPE scaling factor must be positive (context extension / original "
                          "context); llama.cpp would scale positions by its inverse",
                          factor_kv->key, *factor));
    return;
  }
  if (factor && *factor > 0.0f) {
    warn_implausible(*factor_kv, *factor, kPlausibleScalingFactor,
                     "a RoPE scaling factor is the context extension (2 to a few dozen); set the model's rope_scaling "
                     "parameters",
                     out);
  }
  // longrope takes its factors from the rope_factors_long/short tensors, not from this key.
  const bool scaling_declared = type_kv && type != "none";
  const bool factor_unreadable = factor_kv && !factor;  // already reported as rope.wrong_type
  if (scaling_declared && type != "longrope" && !factor_unreadable && (!factor || *factor == 0.0f)) {
    out.warning("rope.missing_scaling_factor", type_kv->key, type_kv->offset,
                fmt::format("RoPE scaling '{}' is declared without a factor (or with 0); llama.cpp then applies "
                            "no scaling at all; write {} (the context extension, e.g. 4.0)",
                            type, keys.name("rope.scaling.factor")));
  }

  const KeyValue* original_kv = keys.find("rope.scaling.original_context_length");
  const auto original = uint32_key(keys, "rope.scaling.original_context_length", out);
  const KeyValue* context_kv = keys.find("context_length");
  const auto context = context_kv ? context_kv->value.as_uint() : std::nullopt;
  const bool scaling_on = scaling_declared && (type == "longrope" || (factor && *factor != 0.0f && *factor != 1.0f));
  if (!scaling_on || !original || !context) return;
  if (*original > *context) {
    out.warning("rope.original_context_too_long", original_kv->key, original_kv->offset,
                fmt::format("RoPE scaling '{}' extends the context from {} tokens, but {} is only {}; the "
                            "extended context should be longer than the original one: one of the two lengths "
                            "is wrong",
                            type, *original, context_kv->key, *context));
  } else if (*original == *context) {
    out.info("rope.original_context_too_long", original_kv->key, original_kv->offset,
             fmt::format("RoPE scaling '{}' extends the context from {} tokens, and {} is the same, so the file "
                         "does not advertise the extended length; llama.cpp still applies the scaling beyond {} "
                         "tokens when run with a longer context (-c)",
                         type, *original, context_kv->key, *original));
  }
}

// The rotated dimensions: even, at most the head size (exactly it for some architectures).
void check_dimension_count(const ArchKeys& keys, Findings& out) {
  const KeyValue* kv = keys.find("rope.dimension_count");
  const auto n_rot = uint32_key(keys, "rope.dimension_count", out);
  if (!n_rot) return;
  if (*n_rot % 2 != 0) {
    out.error("rope.bad_dimension_count", kv->key, kv->offset,
              fmt::format("{} is {}; RoPE rotates pairs of dimensions and ggml's rope kernels assert an even "
                          "count; use the model's rotary dimension (head size times partial_rotary_factor)",
                          kv->key, *n_rot));
    return;
  }
  // The head size as llama.cpp derives it: key_length, else embedding_length / head_count.
  const ModelMetadata meta = keys.model.meta();
  std::optional<uint64_t> head_size = meta.key_length();
  std::string head_size_source = keys.name("attention.key_length");
  if (!head_size) {
    const auto embedding = meta.embedding_length();
    const auto heads = meta.head_count();
    if (!embedding || !heads || *heads == 0) return;
    head_size = *embedding / *heads;
    head_size_source = fmt::format("{} / {} = {} / {}", keys.name("embedding_length"),
                                   keys.name("attention.head_count"), *embedding, *heads);
  }
  if (*n_rot > *head_size) {
    out.error("rope.bad_dimension_count", kv->key, kv->offset,
              fmt::format("{} is {} but the head size ({}) is {}; RoPE cannot rotate more dimensions than a head "
                          "has and ggml's rope kernels assert it; use the model's rotary dimension",
                          kv->key, *n_rot, head_size_source, *head_size));
  } else if (*n_rot != *head_size &&
             std::find(kFullRotationArchitectures.begin(), kFullRotationArchitectures.end(), keys.arch) !=
                 kFullRotationArchitectures.end()) {
    out.error("rope.bad_dimension_count", kv->key, kv->offset,
              fmt::format("{} is {} but '{}' models rotate the whole head ({}: {}); llama.cpp refuses the file "
                          "('invalid n_rot'); set it to the head size",
                          kv->key, *n_rot, keys.arch, head_size_source, *head_size));
  }
}

}  // namespace

void check_rope(const ModelUnderCheck& model, Findings& out) {
  const auto arch = model.meta().architecture();
  if (!arch) return;
  const ArchKeys keys{model, std::string(*arch)};
  check_freq_base(keys, "rope.freq_base", out);
  check_freq_base(keys, "rope.freq_base_swa", out);
  check_scaling(keys, out);
  float32_key(keys, "rope.scaling.attn_factor", out);  // its type: llama.cpp reads it as float32
  for (const meta::FloatRule& rule : meta::rope_float_rules()) {  // the ranges (meta/float_ranges.cpp)
    const KeyValue* kv = keys.find(rule.suffix);
    const auto problem = kv ? meta::judge_float(rule, kv->key, kv->value) : std::nullopt;
    if (!problem) continue;
    out.add(problem->error ? Severity::error : Severity::warning, problem->error ? "rope.bad_value" : "rope.implausible_value",
            kv->key, kv->offset, fmt::format("{}; set the model's rope_scaling parameters", problem->message));
  }
  check_dimension_count(keys, out);
}

}  // namespace ggufkit::check
