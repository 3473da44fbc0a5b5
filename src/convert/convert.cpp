// gguf convert: plan (config.json + safetensors + tokenizer checked against the architecture
// table) and streaming write. Facts from llama.cpp's convert_hf_to_gguf.py (conversion/base.py:
// TextModel.set_gguf_parameters, ModelBase.prepare_tensors and prepare_metadata; conversion/llama.py:
// LlamaModel) and gguf-py (constants.py, gguf_writer.py, metadata.py).
#include "ggufkit/convert.h"
#include "ggufkit/convert_quantized.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include "convert/family.h"
#include "convert/checkpoint_files.h"
#include "convert/model_name.h"
#include "ggufkit/check.h"
#include "ggufkit/conventions.h"
#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/quantize.h"
#include "ggufkit/writer.h"
#include "quant/thread_pool.h"
#include "quantize/streamed.h"
#include "format/fp16.h"

namespace ggufkit {

using convert_detail::Dim;
using convert_detail::Family;
using convert_detail::FamilyInput;
using convert_detail::HfConfig;
using convert_detail::KeyWriter;
using convert_detail::config_error;
using convert_detail::dim_value;
using convert_detail::tensor_error;
using convert_detail::Presence;
using convert_detail::TensorRule;
using Json = nlohmann::json;  // (ggufkit::json is the library's JSON writer)

namespace {

constexpr int64_t kValuesPerStep = int64_t{1} << 20;  // values converted at a time (4 MiB of floats)
constexpr int64_t kValuesPerTask = int64_t{1} << 16;  // a thread's share of a step
constexpr uint32_t kMostlyMxfp4Moe = 38;                // llama_ftype LLAMA_FTYPE_MOSTLY_MXFP4_MOE
std::string shape_text(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

bool dtype_readable(SafetensorsDtype d) {
  switch (d) {
    case SafetensorsDtype::F32: case SafetensorsDtype::F16: case SafetensorsDtype::BF16: case SafetensorsDtype::F64:
    case SafetensorsDtype::BOOL: case SafetensorsDtype::U8: case SafetensorsDtype::I8: case SafetensorsDtype::U16:
    case SafetensorsDtype::I16: case SafetensorsDtype::U32: case SafetensorsDtype::I32: case SafetensorsDtype::U64:
    case SafetensorsDtype::I64:
      return true;
    default:
      return false;
  }
}

template <class T>
T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Widens `count` elements of `dtype` to float32, as torch's .to(torch.float32) does. (F32, F16
// and BF16 go through the library's kernels: TensorStream::kernel_type.)
void widen(SafetensorsDtype dtype, const std::byte* src, float* dst, int64_t count) {
  const auto n = static_cast<size_t>(count);
  switch (dtype) {
    case SafetensorsDtype::F64: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<double>(src + 8 * i)); return;
    case SafetensorsDtype::BOOL: for (size_t i = 0; i < n; ++i) dst[i] = src[i] != std::byte{0} ? 1.0f : 0.0f; return;
    case SafetensorsDtype::U8: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<uint8_t>(src + i)); return;
    case SafetensorsDtype::I8: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<int8_t>(src + i)); return;
    case SafetensorsDtype::U16: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<uint16_t>(src + 2 * i)); return;
    case SafetensorsDtype::I16: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<int16_t>(src + 2 * i)); return;
    case SafetensorsDtype::U32: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<uint32_t>(src + 4 * i)); return;
    case SafetensorsDtype::I32: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<int32_t>(src + 4 * i)); return;
    case SafetensorsDtype::U64: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<uint64_t>(src + 8 * i)); return;
    case SafetensorsDtype::I64: for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_le<int64_t>(src + 8 * i)); return;
    default: return;  // refused when planning
  }
}

// `+ 1` on a norm as torch computes it: in float32 for F32 and BF16 sources (the converter widens
// BF16 first), in float16 for F16 ones (the sum rounded to half).
void shift_norm(SafetensorsDtype dtype, float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    values[i] += 1.0f;
    if (dtype == SafetensorsDtype::F16) values[i] = format::fp16_to_fp32(format::fp32_to_fp16(values[i]));
  }
}

// Rule lookup: a checkpoint name to its rule and layer.
struct RuleMatch {
  const TensorRule* rule = nullptr;
  int64_t layer = -1;
  int64_t expert = -1;  // a stack_experts rule's expert
};

// An expert's index in `name`, matched against a stack_experts rule's "prefix{}suffix".
std::optional<int64_t> match_expert(std::string_view pattern, std::string_view name, int64_t n_expert) {
  const size_t hole = pattern.find("{}");
  const std::string_view before = pattern.substr(0, hole), after = pattern.substr(hole + 2);
  if (name.size() <= before.size() + after.size() || !name.starts_with(before) || !name.ends_with(after)) return std::nullopt;
  const std::string_view digits = name.substr(before.size(), name.size() - before.size() - after.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int64_t expert = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return std::nullopt;
    expert = expert * 10 + (ch - '0');
  }
  return expert < n_expert ? std::optional<int64_t>{expert} : std::nullopt;
}

std::optional<RuleMatch> match_rule(const Family& family, std::string_view name, int64_t block_count, int64_t n_expert) {
  for (const TensorRule& r : family.global_tensors) {
    if (r.hf_name == name) return RuleMatch{&r, -1};
  }
  const auto split = convert_detail::split_layer_name(name);
  if (!split || split->first >= block_count) return std::nullopt;
  const auto [layer, rest] = *split;
  name = rest;
  for (const TensorRule& r : family.layer_tensors) {
    if (r.transform == ConvertTransform::stack_experts) {
      if (const auto expert = match_expert(r.hf_name, name, n_expert)) return RuleMatch{&r, layer, *expert};
    } else if (r.hf_name == name) {
      return RuleMatch{&r, layer};
    }
  }
  return std::nullopt;
}

std::string gguf_name_of(const RuleMatch& m) {
  return m.layer < 0 ? std::string(m.rule->gguf_name) : fmt::format("blk.{}.{}", m.layer, m.rule->gguf_name);
}
std::string hf_name_of(const TensorRule& r, int64_t layer, int64_t expert = -1) {
  std::string name(r.hf_name);
  if (const size_t hole = name.find("{}"); hole != std::string::npos) name.replace(hole, 2, std::to_string(std::max<int64_t>(expert, 0)));
  return layer < 0 ? name : fmt::format("model.layers.{}.{}", layer, name);
}

// The output type of a tensor (ModelBase.prepare_tensors): 1-D tensors, norms and anything not a
// ".weight" stay F32; a quantized type falls back to F16 when rows do not fill its blocks.
TensorType choose_type(const ConvertTensorPlan& t, TensorType out_type, std::string& note) {
  if (t.shape.size() <= 1 || t.gguf_name.ends_with("_norm.weight") || !t.gguf_name.ends_with(".weight")) {
    if (out_type != TensorType::F32) {
      note = t.shape.size() <= 1 ? "1-D: kept F32" : t.gguf_name.ends_with("_norm.weight") ? "norm: kept F32" : "not a weight: kept F32";
    }
    return TensorType::F32;
  }
  if (t.transform == ConvertTransform::mxfp4_repack) return TensorType::MXFP4;  // written as the checkpoint has it
  // The routers (ffn_gate_inp, ffn_gate_inp_shexp) are always F32, as llama-quantize keeps them.
  if (t.gguf_name.ends_with(".ffn_gate_inp.weight") || t.gguf_name.ends_with(".ffn_gate_inp_shexp.weight")) {
    if (out_type != TensorType::F32) note = "expert router: kept F32";
    return TensorType::F32;
  }
  const TypeTraits& traits = type_traits(out_type);
  if (traits.quantized && t.shape[0] % traits.block_size != 0) {
    note = fmt::format("rows of {} not a multiple of {}'s block of {}: F16", t.shape[0], traits.name, traits.block_size);
    return TensorType::F16;
  }
  return out_type;
}

void add_key(ConvertPlan& plan, std::string key, MetadataValue value) {
  plan.metadata.emplace_back(std::move(key), std::move(value));
}

// generation_config.json's sampling defaults as general.sampling.* (gguf-py's Metadata.load and
// set_gguf_meta_model): a missing or unreadable file adds nothing, as there; a value of the wrong
// JSON type is left out (the Python writer would fail on it).
void add_sampling_keys(ConvertPlan& plan, const std::filesystem::path& dir) {
  // Read as every checkpoint file is (checkpoint_files.h); one that may not be read adds nothing.
  const auto content = convert_detail::read_checkpoint_text(dir, "generation_config.json");
  if (!content || !*content) return;
  const Json config = Json::parse(**content, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return;
  enum class Kind { text, integer, real };
  struct Sampling {
    const char* key;
    const char* field;
    const char* alternative;  // another name for the field, read when the first is absent
    Kind kind;
  };
  static constexpr Sampling kSampling[] = {
      {"sequence", "sequence", nullptr, Kind::text},
      {"top_k", "top_k", nullptr, Kind::integer},
      {"top_p", "top_p", nullptr, Kind::real},
      {"min_p", "min_p", nullptr, Kind::real},
      {"xtc_probability", "xtc_probability", nullptr, Kind::real},
      {"xtc_threshold", "xtc_threshold", nullptr, Kind::real},
      {"temp", "temperature", nullptr, Kind::real},
      {"penalty_last_n", "penalty_last_n", nullptr, Kind::integer},
      {"penalty_repeat", "penalty_repeat", "repetition_penalty", Kind::real},
      {"mirostat", "mirostat", nullptr, Kind::integer},
      {"mirostat_tau", "mirostat_tau", nullptr, Kind::real},
      {"mirostat_eta", "mirostat_eta", nullptr, Kind::real},
  };
  for (const Sampling& s : kSampling) {
    auto it = config.find(s.field);
    if (it == config.end() && s.alternative != nullptr) it = config.find(s.alternative);
    if (it == config.end() || it->is_null()) continue;
    const std::string key = std::string("general.sampling.") + s.key;
    if (s.kind == Kind::text && it->is_string()) {
      add_key(plan, key, MetadataValue::string(it->get<std::string>()));
    } else if (s.kind == Kind::integer && it->is_number_integer() && it->get<int64_t>() >= INT32_MIN &&
               it->get<int64_t>() <= INT32_MAX) {
      add_key(plan, key, MetadataValue::of(static_cast<int32_t>(it->get<int64_t>())));
    } else if (s.kind == Kind::real && it->is_number()) {
      add_key(plan, key, MetadataValue::of(static_cast<float>(it->get<double>())));
    }
  }
}

// gguf.size_label of GGUFWriter.get_total_parameter_count: "8x7.2B" for a mixture of experts (the
// experts' count, the shared parameters and one expert's), else "1.1B".
std::string size_label(const ConvertPlan& plan) {
  uint64_t shared = 0, per_expert = 0, expert_sum = 0, expert_tensors = 0;
  for (const ConvertTensorPlan& t : plan.tensors) {
    uint64_t size = 1;
    for (const int64_t d : t.shape) size *= static_cast<uint64_t>(d);
    if (t.gguf_name.find("_exps.") != std::string::npos && t.shape.size() >= 3) {
      const auto count = static_cast<uint64_t>(t.gguf_name.ends_with(".bias") ? t.shape[1] : t.shape[2]);
      per_expert += size / count;
      expert_sum += count;
      ++expert_tensors;
    } else {
      shared += size;
    }
  }
  if (expert_tensors == 0 || expert_sum / expert_tensors == 0) return model_size_label(plan.parameter_count);
  return fmt::format("{}x{}", expert_sum / expert_tensors, model_size_label(shared + per_expert));
}

// general.name and friends (Metadata.load's heuristics on _name_or_path, then the directory name),
// after general.architecture (GGUFWriter's first key) and what tensor preparation wrote.
void add_general_keys(ConvertPlan& plan, const HfConfig& c, const std::filesystem::path& dir) {
  const auto total = static_cast<int64_t>(plan.parameter_count);
  ModelNameParts meta;
  auto fill = [&](const ModelNameParts& p) {
    for (auto [field, value] : {std::pair{&meta.name, &p.name}, {&meta.organization, &p.organization},
                                {&meta.basename, &p.basename}, {&meta.finetune, &p.finetune},
                                {&meta.version, &p.version}, {&meta.size_label, &p.size_label}}) {
      if (!*field && *value) *field = *value;
    }
  };
  if (c.name_or_path) {  // config.json's own, as gguf-py's Metadata reads the file
    const std::string& id = *c.name_or_path;
    if (std::count(id.begin(), id.end(), '/') <= 1) fill(model_name_parts(id, total));
  }
  std::filesystem::path folder = dir;
  if (folder.filename().empty()) folder = folder.parent_path();  // "dir/" names "dir"
  const std::string dir_name = std::filesystem::absolute(folder).lexically_normal().filename().string();
  fill(model_name_parts(dir_name, total));
  if (!meta.name) meta.name = dir_name;
  if (!meta.size_label && total > 0) meta.size_label = size_label(plan);

  add_key(plan, "general.type", MetadataValue::string("model"));
  add_sampling_keys(plan, dir);
  add_key(plan, std::string(keys::kName), MetadataValue::string(*meta.name));
  if (meta.version) add_key(plan, "general.version", MetadataValue::string(*meta.version));
  if (meta.organization) add_key(plan, "general.organization", MetadataValue::string(*meta.organization));
  if (meta.finetune) add_key(plan, "general.finetune", MetadataValue::string(*meta.finetune));
  if (meta.basename) add_key(plan, "general.basename", MetadataValue::string(*meta.basename));
  if (meta.size_label) add_key(plan, "general.size_label", MetadataValue::string(*meta.size_label));
}

// The checkpoint's tensors in the Python converter's order: shards by file name, names sorted.
std::vector<const SafetensorsTensor*> tensors_in_python_order(const SafetensorsModel& model) {
  std::vector<std::pair<std::string_view, const SafetensorsTensor*>> all;
  for (const SafetensorsModelTensor& t : model.tensors()) all.emplace_back(model.shard_files()[t.shard], t.tensor);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->name < b.second->name;
  });
  std::vector<const SafetensorsTensor*> out;
  for (const auto& [shard, t] : all) out.push_back(t);
  return out;
}

// TextModel.filter_tensors: the tensors of a multimodal checkpoint's vision and audio parts.
bool is_multimodal_tensor(std::string_view name) {
  for (std::string_view prefix : {"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.", "sound_encoder.",
                                  "sound_projection.", "speech_embeddings."}) {
    if (name.starts_with(prefix)) return true;
  }
  for (std::string_view part : {"visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.",
                                "projector.", "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
                                "patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector."}) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

// The text model's tensors of a multimodal checkpoint under their plain names, as gguf-py's tensor
// name map knows both (Gemma3ForConditionalGeneration: language_model.model.layers.0... or
// model.language_model.layers.0...).
std::string text_model_name(std::string_view name) {
  for (auto [from, to] : {std::pair<std::string_view, std::string_view>{"model.language_model.", "model."},
                          {"language_model.model.", "model."},
                          {"language_model.lm_head.", "lm_head."}}) {
    if (name.starts_with(from)) return std::string(to) + std::string(name.substr(from.size()));
  }
  return std::string(name);
}

// The experts of each layer, gathered as the checkpoint's tensors are read: when a layer has every
// expert of every stack_experts rule, its stacked tensors are planned there, in the table's order
// (the Python converter's modify_tensors yields them when the last one arrives).
class ExpertStacks {
 public:
  ExpertStacks(const Family& family, const HfConfig& c) : c_(c) {
    for (const TensorRule& r : family.layer_tensors) {
      if (r.transform == ConvertTransform::stack_experts) rules_.push_back(&r);
    }
  }

  Expected<void> add(ConvertPlan& plan, const RuleMatch& m, const SafetensorsTensor* source, const std::vector<int64_t>& shape) {
    Layer& layer = layers_[m.layer];
    if (layer.sources.empty()) layer.sources.assign(rules_.size() * static_cast<size_t>(c_.n_expert), nullptr);
    const auto rule = static_cast<size_t>(std::find(rules_.begin(), rules_.end(), m.rule) - rules_.begin());
    layer.sources[rule * static_cast<size_t>(c_.n_expert) + static_cast<size_t>(m.expert)] = source;
    layer.shapes.resize(rules_.size());
    layer.shapes[rule] = shape;
    if (++layer.count < layer.sources.size()) return {};
    for (size_t k = 0; k < rules_.size(); ++k) {
      ConvertTensorPlan t;
      t.hf_name = hf_name_of(*rules_[k], m.layer);
      t.gguf_name = gguf_name_of(RuleMatch{rules_[k], m.layer});
      t.shape.assign(layer.shapes[k].rbegin(), layer.shapes[k].rend());
      t.shape.push_back(c_.n_expert);
      t.transform = ConvertTransform::stack_experts;
      t.expert_sources.assign(layer.sources.begin() + static_cast<std::ptrdiff_t>(k * static_cast<size_t>(c_.n_expert)),
                              layer.sources.begin() + static_cast<std::ptrdiff_t>((k + 1) * static_cast<size_t>(c_.n_expert)));
      t.source = t.expert_sources.front();
      for (const SafetensorsTensor* s : t.expert_sources) {
        if (s->dtype != t.source->dtype) {
          return tensor_error(s->name, fmt::format("dtype {} differs from the other experts' {}", safetensors_dtype_name(s->dtype),
                                                   safetensors_dtype_name(t.source->dtype)));
        }
      }
      plan.tensors.push_back(std::move(t));
    }
    layers_.erase(m.layer);
    done_.insert(m.layer);
    return {};
  }

  // Every layer's experts were all there (the Python converter refuses "Unprocessed experts").
  Expected<void> finish(std::map<std::string, bool>& seen) const {
    for (const auto& [index, layer] : layers_) {
      for (size_t i = 0; i < layer.sources.size(); ++i) {
        if (layer.sources[i] == nullptr) {
          const auto n = static_cast<size_t>(c_.n_expert);
          return tensor_error(hf_name_of(*rules_[i / n], index, static_cast<int64_t>(i % n)),
                              "missing from the checkpoint (the other experts of its layer are there)");
        }
      }
    }
    for (const int64_t layer : done_) {
      for (const TensorRule* r : rules_) seen[gguf_name_of(RuleMatch{r, layer})] = true;
    }
    return {};
  }

 private:
  struct Layer {
    std::vector<const SafetensorsTensor*> sources;  // by rule, then expert
    std::vector<std::vector<int64_t>> shapes;       // by rule: one expert's HF shape
    size_t count = 0;
  };
  const HfConfig& c_;
  std::vector<const TensorRule*> rules_;
  std::map<int64_t, Layer> layers_;
  std::set<int64_t> done_;
};

Expected<void> plan_tensors(ConvertPlan& plan, const FamilyInput& in, KeyWriter& keys, const Family& family,
                            const ConvertOptions& options) {
  const HfConfig& c = in.config;
  // Generated tensors come first (generate_extra_tensors).
  if (family.extra_tensors != nullptr) {
    if (auto r = family.extra_tensors(in, keys, plan.tensors); !r) return r;
  }
  std::optional<int64_t> embedding_rows;
  if (family.embedding_rows != nullptr) {
    auto rows = family.embedding_rows(in);
    if (!rows) return std::move(rows).error();
    embedding_rows = *rows;
  }
  std::map<std::string, bool> seen;  // gguf names planned
  ExpertStacks experts(family, c);
  for (const SafetensorsTensor* source : in.tensors) {
    const std::string& original = source->name;
    if (family.consumed != nullptr && family.consumed(original)) continue;
    if (original.ends_with(".attention.masked_bias") || original.ends_with(".attention.bias") ||
        original.ends_with(".rotary_emb.inv_freq") || is_multimodal_tensor(original) ||
        std::find(family.dropped.begin(), family.dropped.end(), original) != family.dropped.end()) {
      plan.skipped.push_back(original);
      continue;
    }
    const std::string name = text_model_name(original);
    const auto match = match_rule(family, name, c.block_count, c.n_expert);
    if (!match) {
      return tensor_error(original, fmt::format("not a tensor of {} that the converter knows (no GGUF name for it)", plan.hf_architecture));
    }
    const TensorRule& rule = *match->rule;
    if (!dtype_readable(source->dtype)) {
      const std::string_view dtype = safetensors_dtype_name(source->dtype);
      return tensor_error(original, fmt::format("dtype {} is not supported{} (F32, F16, BF16, F64, integers, BOOL)", dtype,
                                                dtype.starts_with("F8") ? ": an FP8 checkpoint; convert its BF16 or F16 release" : ""));
    }
    std::vector<int64_t> expected{dim_value(c, rule.rows)};
    if (rule.cols != Dim::none) expected.push_back(dim_value(c, rule.cols));
    if (rule.experts != Dim::none) expected.insert(expected.begin(), dim_value(c, rule.experts));
    if (source->shape != expected) {
      return tensor_error(original, fmt::format("shape {} does not match config.json's {}", shape_text(source->shape),
                                                shape_text(expected)));
    }
    if (rule.transform == ConvertTransform::stack_experts) {
      if (auto r = experts.add(plan, *match, source, expected); !r) return r;
      continue;
    }
    // The rule, and the rules after it for the same checkpoint tensor (a tensor split in parts:
    // gpt-oss's interleaved gate/up biases), each one output tensor.
    const auto table = match->layer < 0 ? family.global_tensors : family.layer_tensors;
    for (const TensorRule* part = &rule; part != table.data() + table.size() && part->hf_name == rule.hf_name; ++part) {
      ConvertTensorPlan t;
      t.hf_name = original;
      t.gguf_name = gguf_name_of(RuleMatch{part, match->layer});
      t.shape.assign(expected.rbegin(), expected.rend());
      if (embedding_rows && t.gguf_name == "token_embd.weight" && *embedding_rows < t.shape[1]) {
        t.shape[1] = *embedding_rows;  // the first rows: the real vocabulary (Gemma3Model.modify_tensors)
      }
      t.source = source;
      t.transform = part->transform;
      if (t.transform == ConvertTransform::permute_rope) {
        t.permute_heads = part->kv_heads ? c.n_head_kv : c.n_head;
        if (c.head_dim % 2 != 0) return tensor_error(original, fmt::format("head_dim {} is odd: the rows cannot be permuted", c.head_dim));
      }
      if (t.transform == ConvertTransform::split_experts) {  // each expert's first or second half of rows
        if (t.shape[1] % 2 != 0) return tensor_error(original, fmt::format("{} rows per expert cannot be split in two", t.shape[1]));
        t.shape[1] /= 2;
        t.offset = part->part * t.shape[1];
      }
      if (t.transform == ConvertTransform::deinterleave) {  // every second value, from the part's own
        if (t.shape[0] % 2 != 0) return tensor_error(original, fmt::format("rows of {} values cannot be split in two", t.shape[0]));
        t.shape[0] /= 2;
        t.stride = 2;
        t.offset = part->part;
      }
      seen[t.gguf_name] = true;
      plan.tensors.push_back(std::move(t));
    }
  }
  if (auto r = experts.finish(seen); !r) return r;
  // Every required tensor is there; lm_head may be absent only with tied embeddings.
  const bool tied_explicitly_off = c.root.contains("tie_word_embeddings") && c.root["tie_word_embeddings"] == false;
  auto check = [&](const TensorRule& r, int64_t layer) -> Expected<void> {
    const RuleMatch m{&r, layer};
    if (seen.contains(gguf_name_of(m))) return {};
    if (r.presence == Presence::required || (r.presence == Presence::output && tied_explicitly_off)) {
      return tensor_error(hf_name_of(r, layer), r.presence == Presence::output
                                                    ? "missing (config.json says tie_word_embeddings is false)"
                                                    : "missing from the checkpoint");
    }
    return {};
  };
  for (const TensorRule& r : family.global_tensors) {
    if (auto e = check(r, -1); !e) return e;
  }
  for (int64_t layer = 0; layer < c.block_count; ++layer) {
    for (const TensorRule& r : family.layer_tensors) {
      if (auto e = check(r, layer); !e) return e;
    }
  }
  for (ConvertTensorPlan& t : plan.tensors) {
    t.type = choose_type(t, options.out_type, t.note);
    uint64_t rows = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) rows *= static_cast<uint64_t>(t.shape[i]);
    t.bytes = *row_size(t.type, t.shape[0]) * rows;
    uint64_t elements = rows * static_cast<uint64_t>(t.shape[0]);
    plan.parameter_count += elements;
    plan.tensor_bytes += (t.bytes + 31) / 32 * 32;
  }
  return {};
}

// Converts the rows of the tensors the writer asks for, a step of rows at a time.
class TensorStream {
 public:
  TensorStream(const ConvertPlan& plan, const ConvertOptions& options) : plan_(plan), options_(options) {}

  Expected<void> read(size_t index, uint64_t offset, std::span<std::byte> out) {
    const ConvertTensorPlan& t = plan_.tensors[index];
    const uint64_t dst_row = *row_size(t.type, t.shape[0]);
    while (!out.empty()) {
      if (index != index_ || offset < step_begin_ || offset >= step_end_) {
        if (options_.cancel != nullptr && options_.cancel->load()) return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled");
        const int64_t rows_per_step = std::max<int64_t>(1, kValuesPerStep / t.shape[0]);
        const auto first = static_cast<int64_t>(offset / dst_row) / rows_per_step * rows_per_step;
        const int64_t rows = std::min(rows_per_step, total_rows(t) - first);
        if (auto r = convert_rows(t, first, rows, dst_row); !r) return r;
        index_ = index;
        step_begin_ = static_cast<uint64_t>(first) * dst_row;
        step_end_ = step_begin_ + static_cast<uint64_t>(rows) * dst_row;
      }
      const uint64_t at = offset - step_begin_;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), step_end_ - offset));
      std::memcpy(out.data(), encoded_.data() + at, n);
      out = out.subspan(n);
      offset += n;
    }
    return {};
  }

 private:
  static int64_t total_rows(const ConvertTensorPlan& t) {
    int64_t rows = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
    return rows;
  }

  // The checkpoint row output row `row` comes from (LlamaModel.permute: within each head, the
  // two halves of the rotary dimensions are interleaved).
  static int64_t source_row(const ConvertTensorPlan& t, int64_t row) {
    if (t.transform != ConvertTransform::permute_rope) return row;
    const int64_t rows_per_head = total_rows(t) / t.permute_heads;
    const int64_t half = rows_per_head / 2;
    const int64_t head = row / rows_per_head, within = row % rows_per_head;
    return head * rows_per_head + (within % 2) * half + within / 2;
  }

  // How many of the at most `limit` output rows from `row` on follow each other in one checkpoint
  // tensor (then they are copied or converted in one call): all of them for a plain tensor, those
  // of the same expert for stacked and split experts, one for a permuted or interleaved tensor.
  static int64_t contiguous_rows(const ConvertTensorPlan& t, int64_t row, int64_t limit) {
    switch (t.transform) {
      case ConvertTransform::none:
        return limit;
      case ConvertTransform::stack_experts:
      case ConvertTransform::split_experts:
        return std::min(limit, t.shape[1] - row % t.shape[1]);
      default:
        return 1;
    }
  }

  // Where output row `row` starts in the checkpoint, rows of `row_bytes` there: a stacked
  // tensor's rows come expert after expert, each from that expert's tensor.
  static const std::byte* row_data(const ConvertTensorPlan& t, int64_t row, size_t row_bytes) {
    if (t.transform == ConvertTransform::stack_experts) {
      const int64_t per_expert = t.shape[1];
      return t.expert_sources[static_cast<size_t>(row / per_expert)]->data.data() + static_cast<size_t>(row % per_expert) * row_bytes;
    }
    if (t.transform == ConvertTransform::split_experts) {  // expert e's rows [offset, offset + rows) of its 2 * rows
      const int64_t per_expert = t.shape[1];
      const int64_t from = row / per_expert * 2 * per_expert + t.offset + row % per_expert;
      return t.source->data.data() + static_cast<size_t>(from) * row_bytes;
    }
    return t.source->data.data() + static_cast<size_t>(source_row(t, row)) * row_bytes;
  }

  // One row of an MXFP4 tensor from gpt-oss's blocks and scales: per 32 values, the scale byte (an
  // E8M0 exponent, as ggml keeps it) and 16 bytes of 4-bit codes. The checkpoint packs values 2j
  // and 2j + 1 in byte j (low nibble first); ggml packs values j and j + 16. The codes themselves
  // are the same. Row r of an expert is the checkpoint's row r * stride + offset (gpt-oss
  // interleaves the gate and up rows).
  static void repack_mxfp4_row(const ConvertTensorPlan& t, int64_t row, std::byte* out) {
    const int64_t n_blocks = t.shape[0] / 32;
    const int64_t rows = t.shape[1];
    const int64_t source_rows = t.scales->shape[1];
    const int64_t expert = row / rows;
    const int64_t from = expert * source_rows + (row % rows) * t.stride + t.offset;
    const auto* blocks = reinterpret_cast<const uint8_t*>(t.source->data.data()) + from * n_blocks * 16;
    const auto* scales = reinterpret_cast<const uint8_t*>(t.scales->data.data()) + from * n_blocks;
    auto* dst = reinterpret_cast<uint8_t*>(out);
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t codes[32];
      for (int j = 0; j < 16; ++j) {
        codes[2 * j] = blocks[b * 16 + j] & 0x0F;
        codes[2 * j + 1] = static_cast<uint8_t>(blocks[b * 16 + j] >> 4);
      }
      dst[b * 17] = scales[b];
      for (int j = 0; j < 16; ++j) dst[b * 17 + 1 + j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
    }
  }

  // The checkpoint's own element type when the output keeps it (F32 -> F32, F16 -> F16,
  // BF16 -> BF16): the rows are copied, not widened and narrowed.
  static bool keeps_source_type(const ConvertTensorPlan& t) {
    if (t.source == nullptr || (t.transform != ConvertTransform::none && t.transform != ConvertTransform::permute_rope &&
                                t.transform != ConvertTransform::stack_experts && t.transform != ConvertTransform::split_experts)) {
      return false;
    }
    switch (t.source->dtype) {
      case SafetensorsDtype::F32: return t.type == TensorType::F32;
      case SafetensorsDtype::F16: return t.type == TensorType::F16;
      case SafetensorsDtype::BF16: return t.type == TensorType::BF16;
      default: return false;
    }
  }

  // One row as the converter writes it: a bfloat16 row goes through float32 and back, which
  // changes nothing but a signalling NaN (it comes back quiet); other rows are copied as they are.
  static void copy_row(const ConvertTensorPlan& t, const std::byte* src, std::byte* dst, size_t bytes) {
    std::memcpy(dst, src, bytes);
    if (t.type != TensorType::BF16) return;
    for (size_t i = 0; i < bytes; i += 2) {
      uint16_t h;
      std::memcpy(&h, dst + i, 2);
      h = (h & 0x7FFFu) > 0x7F80u ? static_cast<uint16_t>(h | 64u) : h;
      std::memcpy(dst + i, &h, 2);
    }
  }

  // The ggml type a checkpoint dtype's values are stored as, for the library's (SIMD) kernels.
  static std::optional<TensorType> kernel_type(SafetensorsDtype dtype) {
    switch (dtype) {
      case SafetensorsDtype::F32: return TensorType::F32;
      case SafetensorsDtype::F16: return TensorType::F16;
      case SafetensorsDtype::BF16: return TensorType::BF16;
      default: return std::nullopt;
    }
  }

  // Rows [first, first + rows) of the output, converted on every thread the options allow, in
  // runs of whole rows (the bytes do not depend on the thread count).
  Expected<void> convert_rows(const ConvertTensorPlan& t, int64_t first, int64_t rows, uint64_t dst_row) {
    const int64_t ne0 = t.shape[0];
    encoded_.resize(static_cast<size_t>(static_cast<uint64_t>(rows) * dst_row));
    const int64_t rows_per_task = std::max<int64_t>(1, kValuesPerTask / ne0);
    const unsigned threads = options_.threads.count;
    if (t.transform == ConvertTransform::mxfp4_repack) {
      quant::parallel_ranges(rows, threads, rows_per_task, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) repack_mxfp4_row(t, first + r, encoded_.data() + static_cast<size_t>(r) * dst_row);
      });
      return {};
    }
    if (keeps_source_type(t)) {
      quant::parallel_ranges(rows, threads, rows_per_task, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin, n = 0; r < end; r += n) {
          n = contiguous_rows(t, first + r, end - r);
          copy_row(t, row_data(t, first + r, static_cast<size_t>(dst_row)), encoded_.data() + static_cast<size_t>(r) * dst_row,
                   static_cast<size_t>(n) * static_cast<size_t>(dst_row));
        }
      });
      return {};
    }
    const bool float_output = t.type == TensorType::F32 || t.type == TensorType::F16 || t.type == TensorType::BF16;
    const std::optional<TensorType> source_type =
        t.source != nullptr ? kernel_type(t.source->dtype) : std::optional<TensorType>{};
    floats_.resize(static_cast<size_t>(rows * ne0));
    std::atomic<bool> failed{false};
    quant::parallel_ranges(rows, threads, rows_per_task, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float* dst = floats_.data() + r * ne0;
        // A run of rows that follow each other in the checkpoint is widened in one call.
        if (const int64_t n = contiguous_rows(t, first + r, end - r); n > 1 && t.stride == 1 && t.transform != ConvertTransform::generated) {
          const uint32_t bytes = safetensors_dtype_bytes(t.source->dtype);
          const std::byte* src = row_data(t, first + r, static_cast<size_t>(ne0) * bytes);
          const auto values = static_cast<size_t>(n * ne0);
          if (source_type) {
            if (!dequantize(*source_type, std::span<const std::byte>(src, values * bytes), std::span<float>(dst, values))) failed = true;
          } else {
            widen(t.source->dtype, src, dst, n * ne0);
          }
          r += n - 1;
          continue;
        }
        const int64_t from = source_row(t, first + r);
        if (t.transform == ConvertTransform::generated) {
          std::memcpy(dst, t.generated.data() + from * ne0, static_cast<size_t>(ne0) * 4);
          continue;
        }
        const uint32_t bytes = safetensors_dtype_bytes(t.source->dtype);
        const int64_t width = ne0 * t.stride;  // values of the checkpoint's row
        const std::byte* src = row_data(t, first + r, static_cast<size_t>(width) * bytes);
        std::vector<float> wide(t.stride > 1 ? static_cast<size_t>(width) : 0);
        float* into = t.stride > 1 ? wide.data() : dst;
        if (source_type) {
          const std::span<const std::byte> row(src, static_cast<size_t>(width) * bytes);
          if (!dequantize(*source_type, row, std::span<float>(into, static_cast<size_t>(width)))) failed = true;
        } else {
          widen(t.source->dtype, src, into, width);
        }
        for (int64_t i = 0; t.stride > 1 && i < ne0; ++i) dst[i] = wide[static_cast<size_t>(i * t.stride + t.offset)];
        if (t.transform == ConvertTransform::norm_shift) shift_norm(t.source->dtype, dst, ne0);
      }
      if (float_output) {
        const std::span<const float> values(floats_.data() + begin * ne0, static_cast<size_t>((end - begin) * ne0));
        const std::span<std::byte> out(encoded_.data() + static_cast<size_t>(begin) * dst_row,
                                       static_cast<size_t>(end - begin) * dst_row);
        if (!quantize(t.type, values, out, ne0)) failed = true;
      }
    });
    if (failed) return tensor_error(t.gguf_name, "conversion failed");
    if (float_output) return {};
    return quantize(t.type, floats_, encoded_, ne0, {}, options_.threads);
  }

  const ConvertPlan& plan_;
  const ConvertOptions& options_;
  size_t index_ = SIZE_MAX;
  uint64_t step_begin_ = 0, step_end_ = 0;
  std::vector<float> floats_;
  std::vector<std::byte> encoded_;
};

// Drops the pages of a tensor's source from the process (file-backed: read again if needed).
void release_pages(std::span<const std::byte> data) {
  if (data.empty()) return;
  static const auto page = static_cast<uintptr_t>(std::max(1L, ::sysconf(_SC_PAGESIZE)));
  const auto begin = reinterpret_cast<uintptr_t>(data.data());
  const uintptr_t from = (begin + page - 1) / page * page;
  const uintptr_t to = (begin + data.size()) / page * page;
  if (to > from) (void)::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

// After a tensor is written, its checkpoint pages leave the process.
void release_source_pages(const ConvertTensorPlan& t) {
  if (t.source != nullptr) release_pages(t.source->data);
  if (t.scales != nullptr) release_pages(t.scales->data);
  for (const SafetensorsTensor* expert : t.expert_sources) release_pages(expert->data);
}

}  // namespace

std::string_view convert_transform_name(ConvertTransform transform) {
  switch (transform) {
    case ConvertTransform::none: return "none";
    case ConvertTransform::permute_rope: return "permute_rope";
    case ConvertTransform::generated: return "generated";
    case ConvertTransform::norm_shift: return "norm_shift";
    case ConvertTransform::stack_experts: return "stack_experts";
    case ConvertTransform::deinterleave: return "deinterleave";
    case ConvertTransform::mxfp4_repack: return "mxfp4_repack";
    case ConvertTransform::split_experts: return "split_experts";
  }
  return "unknown";
}

std::vector<std::string_view> convert_supported_architectures() {
  std::vector<std::string_view> names;
  for (const Family* family : convert_detail::families()) names.insert(names.end(), family->hf_classes.begin(), family->hf_classes.end());
  return names;
}

bool convert_accepts_out_type(TensorType type) {
  if (type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16) return true;
  const QuantCapabilities caps = quant_capabilities(type);
  return type_traits(type).quantized && caps.quantize && !caps.requires_imatrix;
}

std::optional<uint32_t> convert_file_type(TensorType out_type) { return file_type_for_type(out_type); }

namespace {

// What gguf check would find in the converted file's header, before anything is written: the
// checks that judge values the converter copies from the checkpoint (the float hyperparameters'
// ranges, meta/float_ranges.cpp; the RoPE base and factor; with a tokenizer, the tokenizer pass's
// errors: duplicate pieces, NaN scores...). Such a file is refused, naming config.json's field when
// the value came from there: a model llama.cpp aborts on or computes NaN with is no conversion.
bool refused_by_convert(const Finding& f, bool tokenizer) {
  if (f.severity == Severity::info) return false;
  if (f.code == "arch.bad_hyperparameter" || f.code == "arch.implausible_hyperparameter" ||
      f.code == "rope.bad_freq_base" || f.code == "rope.bad_scaling_factor" || f.code == "rope.bad_value" ||
      f.code == "rope.implausible_value") {
    return true;
  }
  return tokenizer && f.severity == Severity::error && f.code.starts_with("tokenizer.");
}

// The header of the file a plan writes (padded; no tensor data).
Expected<void> planned_header(const ConvertPlan& plan, GgufBuilder& header, MemorySink& bytes) {
  for (const auto& [key, value] : plan.metadata) {
    if (auto r = header.set(key, value); !r) return r;
  }
  const TensorProducer none = [](uint64_t, std::span<std::byte>) -> Expected<void> { return {}; };
  for (const ConvertTensorPlan& t : plan.tensors) {
    if (auto r = header.add_tensor(t.gguf_name, t.type, t.shape, none); !r) return r;
  }
  return header.write_header(bytes);
}

Expected<void> check_planned_metadata(const ConvertPlan& plan, const std::map<std::string, std::string>& sources,
                                      bool tokenizer) {
  GgufBuilder header;
  MemorySink bytes;
  if (auto r = planned_header(plan, header, bytes); !r) return r;
  for (const Finding& f : check_bytes(bytes.data).findings) {
    if (!refused_by_convert(f, tokenizer)) continue;
    const std::string found = fmt::format("{} {}: {}", severity_name(f.severity), f.code, f.message);
    const auto source = sources.find(f.subject);
    const MetadataValue* value = header.find(f.subject);
    if (source == sources.end() || value == nullptr || !value->view().get<float>()) {
      return make_error(ErrorCode::invalid_argument, std::nullopt, f.subject,
                        fmt::format("the converted file would not pass gguf check, which finds: {}", found));
    }
    return config_error(source->second, fmt::format("{} would be written as {}, and gguf check finds: {}",
                                                    *value->view().get<float>(), f.subject, found));
  }
  return {};
}

}  // namespace

Expected<ConvertPlan> plan_convert(const std::filesystem::path& model_dir, const ConvertOptions& options) {
  if (!convert_accepts_out_type(options.out_type)) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("cannot convert to {}", type_name(options.out_type)));
  }
  // config.json, read once; the class first: it decides the family, whose defaults complete it.
  auto config_json = convert_detail::read_config_json(model_dir);
  if (!config_json) return std::move(config_json).error();
  auto hf_class = convert_detail::read_hf_class(*config_json);
  if (!hf_class) return std::move(hf_class).error();
  const Family* family = convert_detail::find_family(*hf_class);
  if (family == nullptr) {
    return config_error("architectures", fmt::format("{} is not supported (supported: {})", *hf_class,
                                                     fmt::join(convert_supported_architectures(), ", ")));
  }
  auto config = convert_detail::read_config(*config_json, family->config_classes);
  if (!config) return std::move(config).error();
  ConvertPlan plan;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (entry.path().extension() != ".gguf") plan.inputs.push_back(entry.path());
  }
  plan.hf_architecture = *hf_class;
  plan.architecture = std::string(family->gguf_name);
  plan.file_type = *convert_file_type(options.out_type);
  auto model = SafetensorsModel::open(model_dir);
  if (!model) return std::move(model).error();
  plan.model = std::make_shared<const SafetensorsModel>(std::move(*model));
  // ModelBase.prepare_metadata: an MXFP4 checkpoint (gpt-oss) kept as it is is MOSTLY_MXFP4_MOE.
  if (const auto q = config->root.find("quantization_config"); q != config->root.end() && q->is_object() &&
      q->value("quant_method", Json()) == "mxfp4" && (plan.file_type == 0 || plan.file_type == 1 || plan.file_type == 32)) {
    plan.file_type = kMostlyMxfp4Moe;
  }
  const std::vector<const SafetensorsTensor*> ordered = tensors_in_python_order(*plan.model);
  const FamilyInput in{*config, model_dir, plan.file_type, ordered};
  // The order of gguf-py's writer: general.architecture when it is made, what prepare_tensors
  // adds (Phi-3's rope attention factor), the general.* metadata, set_gguf_parameters.
  KeyWriter writer(plan.metadata, plan.architecture);
  writer.set(std::string(keys::kArchitecture), MetadataValue::string(plan.architecture));
  if (auto r = plan_tensors(plan, in, writer, *family, options); !r) return std::move(r).error();
  add_general_keys(plan, *config, model_dir);
  if (auto r = family->keys(in, writer); !r) return std::move(r).error();
  add_key(plan, std::string(keys::kQuantizationVersion), MetadataValue::of(kQuantizationVersionCurrent));
  if (options.tokenizer) {
    auto tokenizer = convert_detail::convert_hf_tokenizer(model_dir, family->tokenizer, *config_json);
    if (!tokenizer) {
      Error e = std::move(tokenizer).error();
      e.message = fmt::format("tokenizer: {} (a model without a vocabulary does not load in llama.cpp)", e.message);
      return e;
    }
    for (auto& [key, value] : tokenizer->keys) writer.set(std::move(key), std::move(value));
  }
  if (auto r = check_planned_metadata(plan, writer.sources(), options.tokenizer); !r) return std::move(r).error();
  return plan;
}

Expected<void> write_converted(const ConvertPlan& plan, const std::filesystem::path& output, const ConvertOptions& options) {
  GgufBuilder builder;
  for (const auto& [key, value] : plan.metadata) {
    if (auto r = builder.set(key, value); !r) return r;
  }
  TensorStream stream(plan, options);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const ConvertTensorPlan& t = plan.tensors[i];
    auto producer = [&stream, i](uint64_t offset, std::span<std::byte> out) { return stream.read(i, offset, out); };
    if (auto r = builder.add_tensor(t.gguf_name, t.type, t.shape, TensorProducer(producer)); !r) return r;
  }
  WriteOptions write_options;
  write_options.sync = options.sync;
  write_options.output = options.output;
  write_options.cancel = options.cancel;
  write_options.output.inputs.insert(write_options.output.inputs.end(), plan.inputs.begin(), plan.inputs.end());
  write_options.progress = [&](size_t done, size_t all) {
    release_source_pages(plan.tensors[done - 1]);
    if (options.progress) options.progress(done, all);
  };
  write_options.tensor_progress = options.tensor_progress;
  return builder.write_file(output, write_options);
}

Expected<ConvertPlan> convert_model(const std::filesystem::path& model_dir, const std::filesystem::path& output,
                                    const ConvertOptions& options) {
  auto plan = plan_convert(model_dir, options);
  if (!plan || options.dry_run) return plan;
  if (auto r = write_converted(*plan, output, options); !r) return std::move(r).error();
  return plan;
}

}  // namespace ggufkit

namespace ggufkit {

std::optional<TensorType> convert_own_out_type(std::string_view text) {
  const auto type = parse_tensor_type(text);
  if (!type || !convert_accepts_out_type(*type)) return std::nullopt;
  const bool float_type = *type == TensorType::F32 || *type == TensorType::F16 || *type == TensorType::BF16;
  if (!float_type && text != type_name(*type)) return std::nullopt;
  return type;
}

TensorType convert_intermediate_type(const ConvertPlan& plan) {
  for (const ConvertTensorPlan& t : plan.tensors) {
    if (t.source == nullptr || t.shape.size() < 2 || t.type == TensorType::F32) continue;  // norms, generated
    switch (t.source->dtype) {
      case SafetensorsDtype::BF16: return TensorType::BF16;
      case SafetensorsDtype::F32: return TensorType::F32;
      default: return TensorType::F16;
    }
  }
  return TensorType::F16;
}

Expected<ConvertQuantizedPlan> plan_convert_quantized(const std::filesystem::path& model_dir, const ConvertOptions& options,
                                                      const QuantizeOptions& quantize,
                                                      std::optional<TensorType> intermediate) {
  if (quantize.keep_split) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "a conversion has no shards to keep (keep_split)");
  }
  ConvertOptions first = options;
  first.out_type = intermediate.value_or(TensorType::F16);
  if (first.out_type != TensorType::F16 && first.out_type != TensorType::BF16 && first.out_type != TensorType::F32) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("the intermediate type must be f32, f16 or bf16, not {}", type_name(first.out_type)));
  }
  auto convert = plan_convert(model_dir, first);
  if (!convert) return std::move(convert).error();
  if (const TensorType chosen = convert_intermediate_type(*convert); !intermediate && chosen != first.out_type) {
    first.out_type = chosen;  // planned again: general.file_type and the tensors' types follow it
    convert = plan_convert(model_dir, first);
    if (!convert) return std::move(convert).error();
  }
  ConvertQuantizedPlan plan;
  plan.intermediate = first.out_type;
  GgufBuilder builder;
  MemorySink bytes;
  if (auto r = planned_header(*convert, builder, bytes); !r) return std::move(r).error();
  plan.header_bytes = std::make_unique<const std::vector<std::byte>>(std::move(bytes.data));
  auto header = GgufFile::parse(*plan.header_bytes, {.allow_metadata_only = true});
  if (!header) return std::move(header).error();
  plan.header = std::make_unique<const GgufFile>(std::move(*header));
  auto quantized = plan_quantize(*plan.header, quantize);
  if (!quantized) {
    Error e = std::move(quantized).error();
    e.offset.reset();  // a place in the header of a file that is never written
    return e;
  }
  plan.quantize = std::move(*quantized);
  plan.convert = std::move(*convert);
  return plan;
}

Expected<void> write_convert_quantized(const ConvertQuantizedPlan& plan, const std::filesystem::path& output,
                                       const ConvertOptions& options, const QuantizeOptions& quantize) {
  // Two streams: the writer's thread asks for the tensors copied as they are, the quantizer's
  // driver thread for the rows it quantizes; each keeps its own step of converted rows.
  TensorStream copied(plan.convert, options), fetched(plan.convert, options);
  quantize_detail::StreamedInput input;
  input.header = plan.header.get();
  input.copy = [&copied](size_t index, uint64_t offset, std::span<std::byte> out) { return copied.read(index, offset, out); };
  input.fetch = [&fetched](size_t index, uint64_t offset, std::span<std::byte> out) { return fetched.read(index, offset, out); };
  QuantizeOptions run = quantize;
  static_cast<RunOptions&>(run) = options;  // threads, cancel, progress, sync, output
  const std::span<const TensorInfo> infos = plan.header->tensors();
  run.progress = [&](size_t done, size_t all) {
    const auto index = static_cast<size_t>(plan.quantize.tensors[done - 1].tensor - infos.data());
    release_source_pages(plan.convert.tensors[index]);
    if (options.progress) options.progress(done, all);
  };
  return quantize_detail::write_quantized_streamed(input, plan.quantize, output, run, plan.convert.inputs);
}

}  // namespace ggufkit
