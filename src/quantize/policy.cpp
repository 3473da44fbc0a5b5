// Which tensors llama.cpp quantizes, to what, and in which order it writes them
// (src/llama-quant.cpp and src/llama-model-loader.h of llama.cpp 80fb11ac, as behaviour).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "ggufkit/endian.h"
#include "ggufkit/quantize.h"
#include "preset_rules.h"
#include "quantize/tensor_dims.h"

namespace ggufkit {
namespace {

// Substrings that keep a weight out of quantization, whatever the preset.
constexpr std::string_view kNeverQuantized[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
    "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd"};
// Whole names that stay as they are.
constexpr std::string_view kNeverQuantizedNames[] = {"position_embd.weight", "token_types.weight"};

// When a row is not a whole number of blocks of the target type: llama.cpp's fallback types.
struct Fallback {
  TensorType from, to;
};
constexpr Fallback kFallbacks[] = {
    {TensorType::IQ1_S, TensorType::IQ4_NL},  {TensorType::IQ1_M, TensorType::IQ4_NL},
    {TensorType::IQ2_XXS, TensorType::IQ4_NL}, {TensorType::IQ2_XS, TensorType::IQ4_NL},
    {TensorType::IQ2_S, TensorType::IQ4_NL},  {TensorType::IQ3_XXS, TensorType::IQ4_NL},
    {TensorType::IQ3_S, TensorType::IQ4_NL},  {TensorType::IQ4_XS, TensorType::IQ4_NL},
    {TensorType::Q2_0, TensorType::Q4_0},     {TensorType::Q2_K, TensorType::Q4_0},
    {TensorType::Q3_K, TensorType::Q4_0},     {TensorType::TQ1_0, TensorType::Q4_0},
    {TensorType::TQ2_0, TensorType::Q4_0},    {TensorType::Q4_K, TensorType::Q5_0},
    {TensorType::Q5_K, TensorType::Q5_1},     {TensorType::Q6_K, TensorType::Q8_0},
};

}  // namespace

bool preset_requires_importance_matrix(uint32_t file_type) {
  const auto main = file_type_default_type(file_type);
  return main && preset_rules::needs_importance_matrix("blk.0.attn_q.weight", *main, file_type);
}

bool tensor_allows_quantization(std::string_view name, const TensorInfo& tensor, const QuantizeOptions& options) {
  if (options.only_copy) return false;
  if (quantize_detail::ggml_dims(tensor) < 2) return false;  // 2-D and 3-D (experts) only
  if (!name.ends_with("weight")) return false;
  if (!options.quantize_output_tensor && name == "output.weight") return false;
  return std::ranges::none_of(kNeverQuantized, [&](std::string_view s) { return name.find(s) != std::string_view::npos; }) &&
         std::ranges::find(kNeverQuantizedNames, name) == std::end(kNeverQuantizedNames);
}

namespace {

// llama.cpp's fallback, and F16 when even that does not fit.
TensorType with_fallback(TensorType target, const TensorInfo& t, std::string& note) {
  const auto fits = [&](TensorType type) { return t.ne[0] % type_traits(type).block_size == 0; };
  if (fits(target)) return target;
  // Types of 32-element blocks have nothing smaller to fall back to: F16, as when a fallback fails.
  TensorType chosen = target;
  for (const Fallback& f : kFallbacks) {
    if (f.from == target) chosen = f.to;
  }
  if (!fits(chosen)) chosen = TensorType::F16;
  note = std::string("rows of ") + std::to_string(t.ne[0]) + " do not fit " + std::string(type_name(target)) +
         " blocks: " + std::string(type_name(chosen));
  return chosen;
}

// llama.cpp writes tensors ordered by layer ("blk.N."; others first), then by name.
int layer_of(std::string_view name) {
  int layer = -1;
  const std::string s(name);
  std::sscanf(s.c_str(), "blk.%d.", &layer);
  return layer;
}

}  // namespace

namespace {

struct SourceTensor {
  const GgufFile* file;
  const TensorInfo* info;
  std::span<const std::byte> data;
  uint32_t shard = 0;  // the input shard it is in
};

bool is_token_embedding(std::string_view name) {
  return name == "token_embd.weight" || name == "per_layer_token_embd.weight";
}

// The importance weights of a tensor to convert, as llama_model_quantize picks them: the entry of
// the tensor's name, which must hold ne[0] weights per expert (a mismatch is an error, except for
// the token embeddings, which then get none). An IQ1/IQ2/IQ3_XXS target without weights is an error.
Expected<void> attach_importance(TensorPlan& p, const ImportanceMatrix& matrix, uint32_t file_type) {
  const TensorInfo& t = *p.tensor;
  if (const ImportanceEntry* e = matrix.find(t.name)) {
    const auto wanted = static_cast<uint64_t>(t.ne[0]) * static_cast<uint64_t>(t.ne[2]);
    if (e->values.size() == wanted) {
      p.importance = e->values;
    } else if (!is_token_embedding(t.name)) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("the importance matrix has {} weights for this tensor, which needs {} "
                                    "(ne[0] x experts): was it computed for another model?",
                                    e->values.size(), wanted));
    }
  }
  if (p.importance.empty() && preset_rules::needs_importance_matrix(t.name, p.target, file_type)) {
    return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                      fmt::format("the importance matrix has no weights for this tensor, and {} needs them "
                                  "(llama.cpp refuses too: the result would be garbage)", type_name(p.target)));
  }
  return {};
}

// COPY's general.file_type, as llama_model_loader sets ml.ftype: the input's key, else a guess from
// the tensor type most tensors have (the first to reach the highest count in weights_map's order,
// by layer and name), marked with LLAMA_FTYPE_GUESSED.
uint32_t copied_file_type(const GgufFile& metadata, std::span<const TensorPlan> tensors) {
  if (const KeyValue* kv = metadata.find(keys::kFileType); kv != nullptr) {
    if (const auto v = kv->value.as_uint(); v && *v <= UINT32_MAX) return static_cast<uint32_t>(*v);
  }
  std::map<TensorType, size_t> count;
  size_t most = 0;
  std::optional<TensorType> type_max;
  std::vector<const TensorInfo*> order;
  for (const TensorPlan& p : tensors) order.push_back(p.tensor);
  std::ranges::stable_sort(order, [](const TensorInfo* a, const TensorInfo* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  for (const TensorInfo* t : order) {
    const TensorType type = t->type;
    if (++count[type] > most) {
      most = count[type];
      type_max = type;
    }
  }
  constexpr uint32_t kGuessed = 1024;
  using T = TensorType;
  constexpr T kGuessable[] = {T::F32,   T::F16,     T::BF16,   T::Q4_0,    T::Q4_1,   T::Q5_0,   T::Q5_1,
                              T::Q8_0,  T::Q2_K,    T::Q3_K,   T::Q4_K,    T::Q5_K,   T::Q6_K,   T::TQ1_0,
                              T::TQ2_0, T::IQ2_XXS, T::IQ2_XS, T::IQ2_S,   T::IQ3_XXS, T::IQ1_S, T::IQ1_M,
                              T::IQ4_NL, T::IQ4_XS, T::IQ3_S,  T::NVFP4,   T::Q1_0,   T::Q2_0};
  uint32_t guess = 0;  // LLAMA_FTYPE_ALL_F32 for any other type
  if (type_max && std::ranges::find(kGuessable, *type_max) != std::end(kGuessable)) {
    guess = file_type_for_type(*type_max).value_or(0);
  }
  return guess | kGuessed;
}

Expected<QuantizePlan> plan_tensors(const GgufFile& metadata, std::span<const SourceTensor> tensors,
                                    const QuantizeOptions& options) {
  const auto default_type = options.only_copy ? std::optional(TensorType::F32) : file_type_default_type(options.file_type);
  if (!default_type) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      "file type " + std::to_string(options.file_type) + " has no quantization type");
  }
  const ImportanceMatrix* importance =
      options.importance != nullptr && !options.importance->entries.empty() ? options.importance : nullptr;
  if (importance != nullptr) {
    for (const ImportanceEntry& e : importance->entries) {
      if (!std::ranges::all_of(e.values, [](float v) { return std::isfinite(v); })) {
        return make_error(ErrorCode::invalid_argument, std::nullopt, e.name, "the importance matrix holds a value that is not finite");
      }
    }
  }
  QuantizePlan plan;
  for (const SourceTensor& source : tensors) {
    TensorPlan p{source.info, source.file, source.data, source.info->type, false, 0, {}, 0, {}};
    if (options.keep_split) {
      p.shard = source.shard;
      plan.shard_count = std::max(plan.shard_count, source.shard + 1);
    }
    plan.tensors.push_back(std::move(p));
  }
  // llama.cpp's order, which is also the order the preset rules count attn_v and ffn tensors in:
  // by layer and name, or with keep_split by shard and place in the shard.
  if (options.keep_split) {
    std::stable_sort(plan.tensors.begin(), plan.tensors.end(), [](const TensorPlan& a, const TensorPlan& b) {
      return a.shard != b.shard ? a.shard < b.shard : a.tensor->offset < b.tensor->offset;
    });
  } else {
    std::stable_sort(plan.tensors.begin(), plan.tensors.end(), [](const TensorPlan& a, const TensorPlan& b) {
      const int la = layer_of(a.tensor->name), lb = layer_of(b.tensor->name);
      return la != lb ? la < lb : a.tensor->name < b.tensor->name;
    });
  }
  plan.file_type = options.only_copy ? copied_file_type(metadata, plan.tensors) : options.file_type;
  // The preset rules apply to quantized file types only (F16, BF16, F32 convert every tensor).
  std::optional<preset_rules::TypeChooser> chooser;
  if (!options.pure && !options.only_copy && type_traits(*default_type).quantized) {
    std::vector<const TensorInfo*> infos;
    for (const TensorPlan& p : plan.tensors) infos.push_back(p.tensor);
    auto facts = preset_rules::model_facts(metadata, infos, options.metadata_overrides);
    if (!facts) return facts.error();
    facts->importance_matrix = importance != nullptr;
    chooser.emplace(options.file_type, *default_type, std::move(*facts));
  }
  // Compiled once; a bad pattern is the caller's error, not an exception.
  std::vector<std::pair<std::regex, TensorType>> patterns;
  for (const TensorTypeOverride& o : options.tensor_types) {
    try {
      patterns.emplace_back(std::regex(o.pattern), o.type);
    } catch (const std::regex_error& e) {
      return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("--tensor-type '{}': {}", o.pattern, e.what()));
    }
  }
  const auto first_pattern = [&](std::string_view name) -> std::optional<TensorType> {
    const std::string s(name);
    for (const auto& [re, type] : patterns) {
      if (std::regex_search(s, re)) return type;
    }
    return std::nullopt;
  };
  const bool tied_embeddings = std::ranges::none_of(plan.tensors, [](const TensorPlan& p) { return p.tensor->name == "output.weight"; });
  for (TensorPlan& p : plan.tensors) {
    const TensorInfo& t = *p.tensor;
    if (tensor_allows_quantization(t.name, t, options)) {
      // llama_tensor_get_type's order: the embedding and output types first (no fallback), then
      // the --tensor-type patterns, then the preset's rules.
      const bool token_embd = is_token_embedding(t.name);
      // per_layer_token_embd is a table of its own: a --tensor-type naming it wins over
      // --token-embedding-type.
      const bool named = t.name == "per_layer_token_embd.weight" && first_pattern(t.name);
      if (options.token_embedding_type && token_embd && !named) {
        p.target = *options.token_embedding_type;
        p.note = "--token-embedding-type";
      } else if (options.output_tensor_type && t.name == "output.weight") {
        p.target = *options.output_tensor_type;
        p.note = "--output-tensor-type";
      } else if (!type_traits(*default_type).quantized) {
        p.target = *default_type;
      } else {
        TensorType wanted = *default_type;
        if (const auto manual = first_pattern(t.name)) {
          wanted = *manual;
          p.note = "--tensor-type";
        } else if (chooser && options.output_tensor_type && tied_embeddings && token_embd) {
          // The preset gives a token_embd that doubles as the output the output's type.
          wanted = *options.output_tensor_type;
          p.note = "--output-tensor-type";
        } else if (chooser) {
          auto chosen = chooser->choose(t);
          if (!chosen) return chosen.error();
          wanted = *chosen;
          if (wanted != *default_type) p.note = "preset rule";
        }
        std::string fallback;
        p.target = type_traits(wanted).quantized ? with_fallback(wanted, t, fallback) : wanted;
        if (!fallback.empty()) p.note = fallback;
      }
      if (importance == nullptr && preset_rules::needs_importance_matrix(t.name, p.target, options.file_type) &&
          options.dry_run) {
        p.note = "needs an importance matrix (--imatrix)";
      } else if (importance == nullptr && preset_rules::needs_importance_matrix(t.name, p.target, options.file_type)) {
        return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                          fmt::format("the tensor would be {}, which needs an importance matrix (--imatrix)",
                                      type_name(p.target)));
      }
      p.convert = p.target != t.type;
      if (p.convert && importance != nullptr) {
        if (auto r = attach_importance(p, *importance, options.file_type); !r) return r.error();
      }
    }
    const uint64_t rows = t.ne[0] == 0 ? 0 : static_cast<uint64_t>(t.n_elements() / t.ne[0]);
    p.bytes = *row_size(p.target, t.ne[0]) * rows;
    plan.tensor_bytes += (p.bytes + metadata.alignment() - 1) / metadata.alignment() * metadata.alignment();
  }
  return plan;
}

}  // namespace

Expected<QuantizePlan> plan_quantize(const GgufFile& input, const QuantizeOptions& options) {
  std::vector<SourceTensor> tensors;
  for (const TensorInfo& t : input.tensors()) tensors.push_back({&input, &t, input.tensor_data(t)});
  auto plan = plan_tensors(input, tensors, options);
  if (plan) plan->byte_order = input.byte_order();
  return plan;
}

Expected<QuantizePlan> plan_quantize(const SplitModel& input, const QuantizeOptions& options) {
  // Copied tensors keep their bytes: every shard must be in the output's byte order.
  const auto order = input.byte_order();
  if (!order) return order.error();
  std::vector<SourceTensor> tensors;
  for (const ModelTensor& t : input.tensors()) tensors.push_back({&input.shard_of(t), t.info, t.data, t.shard});
  auto plan = plan_tensors(input.metadata_file(), tensors, options);
  if (plan) plan->byte_order = *order;
  return plan;
}

Expected<TensorTypeOverride> parse_tensor_type_override(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("'{}' is not PATTERN=TYPE", text));
  }
  if (eq == 0) return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("'{}': no tensor pattern", text));
  const auto type = parse_tensor_type(text.substr(eq + 1));
  if (!type) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("'{}': '{}' is not a tensor type", text, text.substr(eq + 1)));
  }
  TensorTypeOverride o;
  o.pattern = std::string(text.substr(0, eq));
  // llama-quantize lower-cases the pattern (tensor names are lower case).
  std::ranges::transform(o.pattern, o.pattern.begin(), [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  o.type = *type;
  return o;
}

Expected<MetadataOverride> parse_metadata_override(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("--override-kv '{}': {}", text, why));
  };
  const auto eq = text.find('=');
  // llama_model_kv_override holds keys and strings in 128-byte arrays.
  if (eq == std::string_view::npos || eq >= 128) return bad("not KEY=TYPE:VALUE");
  MetadataOverride o;
  o.key = std::string(text.substr(0, eq));
  const std::string rest(text.substr(eq + 1));
  // As llama.cpp: atol/atof read what number they can (nothing gives 0).
  if (rest.starts_with("int:")) {
    // Written as u32 of the absolute value, as llama_model_quantize does.
    const long long v = std::atoll(rest.c_str() + 4);
    o.value = MetadataValue::of<uint32_t>(static_cast<uint32_t>(v < 0 ? -static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v)));
  } else if (rest.starts_with("float:")) {
    o.value = MetadataValue::of<float>(static_cast<float>(std::atof(rest.c_str() + 6)));
  } else if (rest.starts_with("bool:")) {
    const std::string_view v = std::string_view(rest).substr(5);
    if (v != "true" && v != "false") return bad("a bool is true or false");
    o.value = MetadataValue::of<bool>(v == "true");
  } else if (rest.starts_with("str:")) {
    if (rest.size() - 4 > 127) return bad("a string value is at most 127 bytes");
    o.value = MetadataValue::string(std::string_view(rest).substr(4));
  } else {
    return bad("the type is int, float, bool or str");
  }
  return o;
}

}  // namespace ggufkit

namespace ggufkit {

QuantizeSizes quantize_sizes(const QuantizePlan& plan) {
  QuantizeSizes s;
  for (const TensorPlan& p : plan.tensors) {
    s.elements += static_cast<uint64_t>(p.tensor->n_elements());
    s.source_bytes += p.data.size();
    s.output_bytes += p.bytes;
    ++(p.convert ? s.converted : s.copied);
  }
  return s;
}

bool set_quantize_target(std::string_view text, QuantizeOptions& options) {
  const auto upper = [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); };
  const bool copy = text.size() == 4 && std::equal(text.begin(), text.end(), "COPY", [&](char a, char b) { return upper(a) == b; });
  std::optional<uint32_t> file_type;
  if (copy) {
    file_type = 0;  // llama-quantize's COPY is ALL_F32 with only_copy
  } else if (!text.empty() && text.size() <= 4 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    uint32_t id = 0;
    for (const char c : text) id = id * 10 + static_cast<uint32_t>(c - '0');
    if (find_file_type(id) != nullptr) file_type = id;
  } else if (const auto t = parse_tensor_type(text)) {
    file_type = file_type_for_type(*t);
  } else {
    file_type = parse_file_type(text);
  }
  if (!file_type || !file_type_default_type(*file_type)) return false;
  options.file_type = *file_type;
  options.only_copy = copy;
  return true;
}

}  // namespace ggufkit
