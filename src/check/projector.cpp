// gguf check, mmproj.*: a multimodal projector (general.type "mmproj", general.architecture
// "clip") as llama.cpp's loader for them reads it (tools/mtmd/clip.cpp, clip_model_loader and its
// load_hparams): the encoder flags, each encoder's projector type and the hyperparameters it
// requires. The loader reads values with gguf_get_val_<type>, which aborts the program on any other
// type, so a wrong type is an error as much as a missing key.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "check_internal.h"
#include "meta/float_ranges.h"

namespace ggufkit::check {
namespace {

// PROJECTOR_TYPE_NAMES (tools/mtmd/clip-impl.h): every projector the loader knows.
constexpr std::string_view kProjectorTypes[] = {
    "mlp", "ldp", "ldpv2", "resampler", "adapter", "qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger",
    "step3vl", "gemma3", "gemma3nv", "gemma3na", "gemma4v", "gemma4a", "gemma4uv", "gemma4ua", "phi4",
    "idefics3", "pixtral", "ultravox", "internvl", "llama4", "qwen2a", "qwen3a", "glma", "qwen2.5o", "voxtral",
    "meralion", "musicflamingo", "lfm2", "kimivl", "paddleocr", "lightonocr", "cogvlm", "janus_pro", "dots_ocr",
    "dots3note_v", "dots3note_a", "deepseekocr", "deepseekocr2", "deepseek4v", "lfm2a", "glm4v", "youtuvl",
    "yasa2", "kimik25", "nemotron_v2_vl", "exaone4_5", "hunyuanvl", "minicpmv4_6", "granite_speech", "mimovl",
    "minimax_m3", "granite4_vision", "mimo_audio", "parakeet", "qwen3tts_spkenc", "qwen3tts_gen",
    "pockettts_spkenc", "pockettts_gen", "muse-glimmer",
};

bool known_projector(std::string_view name) {
  return std::ranges::find(kProjectorTypes, name) != std::end(kProjectorTypes);
}

// One encoder of the file: its flag, its key prefix, and what load_hparams requires of it.
struct Encoder {
  std::string_view flag;        // clip.has_<...>_encoder
  std::string_view prefix;      // clip.<prefix>.embedding_length ...
  std::string_view what;        // for messages
  std::vector<std::string_view> extra_required;  // full key names, uint32
};

const std::vector<Encoder>& encoders() {
  static const std::vector<Encoder> all = {
      {"clip.has_vision_encoder", "vision", "vision encoder", {"clip.vision.image_size", "clip.vision.patch_size"}},
      {"clip.has_audio_encoder", "audio", "audio encoder", {"clip.audio.num_mel_bins"}},
      {"clip.has_gen_audio_encoder", "gen.audio", "audio generation encoder", {}},
  };
  return all;
}

// The accessor llama.cpp's loader would call for `type`, as named in the abort message.
std::string_view accessor(ValueType type) {
  switch (type) {
    case ValueType::Bool: return "gguf_get_val_bool";
    case ValueType::UInt32: return "gguf_get_val_u32";
    case ValueType::Float32: return "gguf_get_val_f32";
    case ValueType::String: return "gguf_get_val_str";
    default: return "gguf_get_val";
  }
}

// A key the loader reads as `type`: reports it missing (when required) or of another type. Returns
// the key when it can be read.
const KeyValue* typed_key(const ModelUnderCheck& model, std::string_view key, ValueType type, bool required,
                          std::string_view what, Findings& out) {
  const KeyValue* kv = model.find(key);
  if (!kv) {
    if (required) {
      out.error("mmproj.missing_key", key, std::nullopt,
                fmt::format("the {} needs '{}' and llama.cpp's projector loader refuses the file without it "
                            "(\"Key not found: {}\"); convert the projector again",
                            what, key, key));
    }
    return nullptr;
  }
  if (kv->value.type() != type) {
    out.error("mmproj.wrong_type", key, kv->offset,
              fmt::format("'{}' is {} but llama.cpp's projector loader reads it with {}, which aborts the "
                          "program on any type but {}; set it as {}",
                          key, with_article(value_type_name(kv->value.type())), accessor(type), value_type_name(type),
                          with_article(value_type_name(type))));
    return nullptr;
  }
  return kv;
}

void check_encoder(const ModelUnderCheck& model, const Encoder& e, Findings& out) {
  // The projector type: clip.projector_type, else the encoder's own key (files with two encoders).
  const std::string own_type_key = fmt::format("clip.{}.projector_type", e.prefix);
  const KeyValue* type_kv = typed_key(model, "clip.projector_type", ValueType::String, false, e.what, out);
  if (!type_kv || type_kv->value.as_string().value_or("").empty()) {
    type_kv = typed_key(model, own_type_key, ValueType::String, false, e.what, out);
  }
  const std::string projector = type_kv ? std::string(type_kv->value.as_string().value_or("")) : std::string();
  if (!known_projector(projector)) {
    out.error("mmproj.unknown_projector", type_kv ? std::string_view(type_kv->key) : std::string_view(own_type_key),
              type_kv ? std::optional<uint64_t>(type_kv->offset) : std::nullopt,
              projector.empty()
                  ? fmt::format("the {} has no projector type (clip.projector_type or {}): llama.cpp refuses the "
                                "file (\"unknown projector type\"); convert the projector again",
                                e.what, own_type_key)
                  : fmt::format("projector type '{}' is not one llama.cpp knows: it refuses the file (\"unknown "
                                "projector type: {}\"); the projector may need a newer llama.cpp",
                                projector, projector));
  }
  const auto key = [&](std::string_view suffix) { return fmt::format("clip.{}.{}", e.prefix, suffix); };
  for (std::string_view suffix : {"embedding_length", "attention.head_count", "feed_forward_length", "block_count",
                                  "projection_dim"}) {
    const std::string name = key(suffix);
    const KeyValue* kv = typed_key(model, name, ValueType::UInt32, true, e.what, out);
    if (kv && suffix != "projection_dim" && kv->value.as_uint().value_or(0) == 0) {
      out.error("mmproj.bad_hyperparameter", name, kv->offset,
                fmt::format("'{}' is 0: the {} cannot be built from it; convert the projector again", name, e.what));
    }
  }
  typed_key(model, key("attention.layer_norm_epsilon"), ValueType::Float32, true, e.what, out);
  typed_key(model, key("attention.head_count_kv"), ValueType::UInt32, false, e.what, out);
  typed_key(model, key("attention.head_dim"), ValueType::UInt32, false, e.what, out);
  for (std::string_view name : e.extra_required) {
    const KeyValue* kv = typed_key(model, name, ValueType::UInt32, true, e.what, out);
    if (kv && name.ends_with("patch_size") && kv->value.as_uint().value_or(0) == 0) {
      out.error("mmproj.bad_hyperparameter", name, kv->offset,
                fmt::format("'{}' is 0: images are cut into patches of that size, and llama.cpp divides by it; "
                            "convert the projector again",
                            name));
    }
  }
}

}  // namespace

bool is_projector(const ModelUnderCheck& model) {
  const auto type = model.meta().type();
  const auto arch = model.meta().architecture();
  return (type && *type == "mmproj") || (arch && *arch == "clip");
}

void check_projector(const ModelUnderCheck& model, Findings& out) {
  bool any = false;
  for (const Encoder& e : encoders()) {
    const KeyValue* flag = typed_key(model, e.flag, ValueType::Bool, false, "projector", out);
    if (!flag || !flag->value.get<bool>().value_or(false)) continue;
    any = true;
    check_encoder(model, e, out);
  }
  // The floats clip asserts on or divides by, against meta/float_ranges.cpp's table.
  for (const meta::FloatRule& rule : meta::projector_float_rules()) {
    const KeyValue* kv = model.find(fmt::format("clip.{}", rule.suffix));
    const auto problem = kv ? meta::judge_float(rule, kv->key, kv->value) : std::nullopt;
    if (!problem) continue;
    out.add(problem->error ? Severity::error : Severity::warning,
            problem->error ? "mmproj.bad_hyperparameter" : "mmproj.implausible_hyperparameter", kv->key, kv->offset,
            fmt::format("{}; convert the projector again", problem->message));
  }
  if (!any) {
    out.error("mmproj.no_encoder", "", std::nullopt,
              "the projector declares no encoder (clip.has_vision_encoder, clip.has_audio_encoder or "
              "clip.has_gen_audio_encoder true): llama.cpp loads nothing from it; convert the projector again");
  }
}

}  // namespace ggufkit::check
