// gguf convert: plan (config.json + safetensors + tokenizer checked against the architecture
// table) and streaming write. Facts from llama.cpp's convert_hf_to_gguf.py (conversion/base.py:
// TextModel.set_gguf_parameters, ModelBase.prepare_tensors and prepare_metadata; conversion/llama.py:
// LlamaModel) and gguf-py (constants.py, gguf_writer.py, metadata.py).
#include "ggufkit/convert.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include "convert/architectures.h"
#include "convert/checkpoint_files.h"
#include "convert/model_name.h"
#include "ggufkit/conventions.h"
#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/quantize.h"
#include "ggufkit/writer.h"
#include "quant/thread_pool.h"
#include "format/fp16.h"

namespace ggufkit {

using convert_detail::ArchitectureSpec;
using convert_detail::Dim;
using convert_detail::Presence;
using convert_detail::TensorRule;
using Json = nlohmann::json;  // (ggufkit::json is the library's JSON writer)

namespace {

constexpr int64_t kValuesPerStep = int64_t{1} << 20;  // values converted at a time (4 MiB of floats)
constexpr int64_t kValuesPerTask = int64_t{1} << 16;  // a thread's share of a step
constexpr int64_t kMaxConfigValue = int64_t{1} << 31; // bound on sizes read from config.json
constexpr std::string_view kConfigFile = "config.json";

Error config_error(std::string key, std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, fmt::format("config.json: {}", key), std::move(message));
}

Error tensor_error(std::string_view name, std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(name), std::move(message));
}

// config.json, read and checked.
struct HfConfig {
  Json root;
  int64_t block_count = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, vocab = 0;
  bool has_head_kv = false, has_head_dim = false;
  Json rope;  // rope_parameters / rope_scaling, the full_attention part when split

  // An optional positive integer key.
  Expected<std::optional<int64_t>> optional_int(const Json& object, const std::string& key) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return std::optional<int64_t>{};
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() >= kMaxConfigValue) {
      return config_error(key, fmt::format("expected a positive integer below 2^31, found {}", it->dump()));
    }
    return std::optional<int64_t>{it->get<int64_t>()};
  }
  Expected<int64_t> required_int(const std::string& key) const {
    auto v = optional_int(root, key);
    if (!v) return std::move(v).error();
    if (!*v) return config_error(key, "missing");
    return **v;
  }
  Expected<std::optional<double>> optional_number(const Json& object, const std::string& key) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return std::optional<double>{};
    if (!it->is_number()) return config_error(key, fmt::format("expected a number, found {}", it->dump()));
    return std::optional<double>{it->get<double>()};
  }
};

Expected<HfConfig> read_config(const std::filesystem::path& dir) {
  const auto path = dir / kConfigFile;
  auto text = convert_detail::read_checkpoint_text(dir, kConfigFile);
  if (!text) return std::move(text).error();
  if (!*text) return make_error(ErrorCode::io_error, std::nullopt, std::string(kConfigFile), fmt::format("cannot open {}", path.string()));
  HfConfig c;
  c.root = Json::parse(**text, nullptr, /*allow_exceptions=*/false);
  if (c.root.is_discarded() || !c.root.is_object()) {
    return make_error(ErrorCode::bad_header, std::nullopt, std::string(kConfigFile), "not a JSON object");
  }
  for (auto [field, key] : {std::pair{&c.block_count, "num_hidden_layers"}, {&c.n_embd, "hidden_size"},
                            {&c.n_ff, "intermediate_size"}, {&c.n_head, "num_attention_heads"}, {&c.vocab, "vocab_size"}}) {
    auto v = c.required_int(key);
    if (!v) return std::move(v).error();
    *field = *v;
  }
  auto kv = c.optional_int(c.root, "num_key_value_heads");
  if (!kv) return std::move(kv).error();
  c.has_head_kv = kv->has_value();
  c.n_head_kv = kv->value_or(c.n_head);
  if (c.n_head % c.n_head_kv != 0) {
    return config_error("num_key_value_heads", fmt::format("{} does not divide num_attention_heads ({})", c.n_head_kv, c.n_head));
  }
  auto hd = c.optional_int(c.root, "head_dim");
  if (!hd) return std::move(hd).error();
  c.has_head_dim = hd->has_value();
  if (c.has_head_dim) {
    c.head_dim = **hd;
  } else if (c.n_embd % c.n_head != 0) {
    return config_error("num_attention_heads", fmt::format("{} does not divide hidden_size ({})", c.n_head, c.n_embd));
  } else {
    c.head_dim = c.n_embd / c.n_head;
  }
  // As ModelBase.__init__: rope_parameters, else rope_scaling; the full-attention part when split.
  Json rope = c.root.value("rope_parameters", Json());
  if (rope.is_null()) rope = c.root.value("rope_scaling", Json());
  if (rope.is_null()) rope = Json::object();
  if (!rope.is_object()) return config_error("rope_scaling", "expected an object");
  if (rope.contains("full_attention")) {
    rope = rope["full_attention"];
    if (!rope.is_object()) return config_error("rope_parameters.full_attention", "expected an object");
  } else {
    for (const char* key : {"rope_theta", "original_max_position_embeddings"}) {
      if (!rope.contains(key) && c.root.contains(key)) rope[key] = c.root[key];
    }
    if (!rope.contains("rope_type") && rope.contains("type")) rope["rope_type"] = rope["type"];
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
    case Dim::q_out: return c.n_head * c.head_dim;
    case Dim::kv_out: return c.n_head_kv * c.head_dim;
    case Dim::head_dim: return c.head_dim;
  }
  return 0;
}

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

// LlamaModel.generate_extra_tensors: llama3 rope scaling factors, in float32 as torch computes them.
Expected<std::vector<float>> llama3_rope_factors(const HfConfig& c) {
  double base = 10000.0, factor = 8.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
  for (auto [field, key] : {std::pair{&base, "rope_theta"}, {&factor, "factor"}, {&low, "low_freq_factor"},
                            {&high, "high_freq_factor"}, {&old_ctx, "original_max_position_embeddings"}}) {
    auto v = c.optional_number(c.rope, key);
    if (!v) return std::move(v).error();
    if (*v) *field = **v;
  }
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
  return factors;
}

// Rule lookup: a checkpoint name to its rule and layer.
struct RuleMatch {
  const TensorRule* rule = nullptr;
  int64_t layer = -1;
};

std::optional<RuleMatch> match_rule(const ArchitectureSpec& spec, std::string_view name, int64_t block_count) {
  for (const TensorRule& r : spec.global_tensors) {
    if (r.hf_name == name) return RuleMatch{&r, -1};
  }
  constexpr std::string_view prefix = "model.layers.";
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9) return std::nullopt;
  int64_t layer = 0;
  for (char ch : name.substr(0, dot)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    layer = layer * 10 + (ch - '0');
  }
  if (layer >= block_count || (dot > 1 && name[0] == '0')) return std::nullopt;
  name.remove_prefix(dot + 1);
  for (const TensorRule& r : spec.layer_tensors) {
    if (r.hf_name == name) return RuleMatch{&r, layer};
  }
  return std::nullopt;
}

std::string gguf_name_of(const RuleMatch& m) {
  return m.layer < 0 ? std::string(m.rule->gguf_name) : fmt::format("blk.{}.{}", m.layer, m.rule->gguf_name);
}
std::string hf_name_of(const TensorRule& r, int64_t layer) {
  return layer < 0 ? std::string(r.hf_name) : fmt::format("model.layers.{}.{}", layer, r.hf_name);
}

// The output type of a tensor (ModelBase.prepare_tensors): 1-D tensors, norms and anything not a
// ".weight" stay F32; a quantized type falls back to F16 when rows do not fill its blocks.
TensorType choose_type(const ConvertTensorPlan& t, TensorType out_type, std::string& note) {
  if (t.shape.size() <= 1 || t.gguf_name.ends_with("_norm.weight") || !t.gguf_name.ends_with(".weight")) {
    if (out_type != TensorType::F32) note = "1-D or norm: kept F32";
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

Expected<void> add_model_keys(ConvertPlan& plan, const HfConfig& c, const ArchitectureSpec& spec) {
  const std::string arch(spec.gguf_name);
  auto key = [&](std::string_view suffix) { return fmt::format("{}.{}", arch, suffix); };
  auto u32 = [](int64_t v) { return MetadataValue::of(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return MetadataValue::of(static_cast<float>(v)); };

  add_key(plan, key("block_count"), u32(c.block_count));
  auto ctx = c.optional_int(c.root, "max_position_embeddings");
  if (!ctx) return std::move(ctx).error();
  if (*ctx) add_key(plan, key("context_length"), u32(**ctx));
  add_key(plan, key("embedding_length"), u32(c.n_embd));
  add_key(plan, key("feed_forward_length"), u32(c.n_ff));
  add_key(plan, key("attention.head_count"), u32(c.n_head));
  if (c.has_head_kv) add_key(plan, key("attention.head_count_kv"), u32(c.n_head_kv));

  // Rope scaling (TextModel.set_gguf_parameters); llama3 is a rope_freqs tensor instead.
  if (c.rope.contains("rope_type") && c.rope["rope_type"].is_string()) {
    std::string type = c.rope["rope_type"].get<std::string>();
    auto factor = c.optional_number(c.rope, "factor");
    if (!factor) return std::move(factor).error();
    if ((type == "linear" || type == "yarn") && *factor) {
      add_key(plan, key("rope.scaling.type"), MetadataValue::string(type));
      add_key(plan, key("rope.scaling.factor"), f32(**factor));
      if (type == "yarn") {
        auto orig = c.optional_int(c.rope, "original_max_position_embeddings");
        if (!orig) return std::move(orig).error();
        if (!*orig) return config_error("rope_scaling.original_max_position_embeddings", "missing (yarn needs it)");
        add_key(plan, key("rope.scaling.original_context_length"), u32(**orig));
        const std::pair<const char*, const char*> yarn_keys[] = {
            {"extrapolation_factor", "rope.scaling.yarn_ext_factor"},
            {"attention_factor", "rope.scaling.yarn_attn_factor"},
            {"beta_fast", "rope.scaling.yarn_beta_fast"},
            {"beta_slow", "rope.scaling.yarn_beta_slow"}};
        for (auto [hf, gguf] : yarn_keys) {
          auto v = c.optional_number(c.rope, hf);
          if (!v) return std::move(v).error();
          if (!*v && std::string_view(hf) == "attention_factor") {
            v = c.optional_number(c.rope, "attn_factor");
            if (!v) return std::move(v).error();
          }
          if (*v) add_key(plan, key(gguf), f32(**v));
        }
      }
    } else if (type == "su" || type == "longrope") {
      add_key(plan, key("rope.scaling.type"), MetadataValue::string("longrope"));
    }
  }
  auto theta = c.optional_number(c.rope, "rope_theta");
  if (!theta) return std::move(theta).error();
  if (*theta) add_key(plan, key("rope.freq_base"), f32(**theta));
  auto eps = c.optional_number(c.root, "rms_norm_eps");
  if (!eps) return std::move(eps).error();
  if (*eps) add_key(plan, key("attention.layer_norm_rms_epsilon"), f32(**eps));
  if (c.has_head_dim) {
    add_key(plan, key("attention.key_length"), u32(c.head_dim));
    add_key(plan, key("attention.value_length"), u32(c.head_dim));
  }
  add_key(plan, std::string(keys::kFileType), MetadataValue::of(plan.file_type));
  if (spec.writes_vocab_size) add_key(plan, key("vocab_size"), u32(c.vocab));
  if (spec.writes_rope_dimension_count) add_key(plan, key("rope.dimension_count"), u32(c.head_dim));
  return {};
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

// general.name and friends (Metadata.load's heuristics on _name_or_path, then the directory name).
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
  if (const auto it = c.root.find("_name_or_path"); it != c.root.end() && it->is_string()) {
    const std::string id = it->get<std::string>();
    if (std::count(id.begin(), id.end(), '/') <= 1) fill(model_name_parts(id, total));
  }
  std::filesystem::path folder = dir;
  if (folder.filename().empty()) folder = folder.parent_path();  // "dir/" names "dir"
  const std::string dir_name = std::filesystem::absolute(folder).lexically_normal().filename().string();
  fill(model_name_parts(dir_name, total));
  if (!meta.name) meta.name = dir_name;
  if (!meta.size_label && total > 0) meta.size_label = model_size_label(plan.parameter_count);

  add_key(plan, std::string(keys::kArchitecture), MetadataValue::string(plan.architecture));
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

Expected<void> plan_tensors(ConvertPlan& plan, const HfConfig& c, const ArchitectureSpec& spec,
                            const ConvertOptions& options) {
  // llama3 rope scaling: the generated rope_freqs tensor comes first (generate_extra_tensors).
  if (spec.llama3_rope_freqs && c.rope.contains("rope_type") && c.rope["rope_type"].is_string()) {
    std::string type = c.rope["rope_type"].get<std::string>();
    std::transform(type.begin(), type.end(), type.begin(), [](char ch) { return static_cast<char>(std::tolower(static_cast<unsigned char>(ch))); });
    if (type == "llama3") {
      auto factors = llama3_rope_factors(c);
      if (!factors) return std::move(factors).error();
      ConvertTensorPlan t;
      t.gguf_name = "rope_freqs.weight";
      t.shape = {static_cast<int64_t>(factors->size())};
      t.transform = ConvertTransform::rope_freqs;
      t.generated = std::move(*factors);
      plan.tensors.push_back(std::move(t));
    }
  }
  std::map<std::string, bool> seen;  // gguf names planned
  for (const SafetensorsTensor* source : tensors_in_python_order(*plan.model)) {
    const std::string& name = source->name;
    if (name.ends_with(".attention.masked_bias") || name.ends_with(".attention.bias") || name.ends_with(".rotary_emb.inv_freq")) {
      plan.skipped.push_back(name);
      continue;
    }
    const auto match = match_rule(spec, name, c.block_count);
    if (!match) {
      return tensor_error(name, fmt::format("not a tensor of {} that the converter knows (no GGUF name for it)", spec.hf_name));
    }
    const TensorRule& rule = *match->rule;
    if (!dtype_readable(source->dtype)) {
      return tensor_error(name, fmt::format("dtype {} is not supported (F32, F16, BF16, F64, integers, BOOL)",
                                            safetensors_dtype_name(source->dtype)));
    }
    std::vector<int64_t> expected{dim_value(c, rule.rows)};
    if (rule.cols != Dim::none) expected.push_back(dim_value(c, rule.cols));
    if (source->shape != expected) {
      return tensor_error(name, fmt::format("shape {} does not match config.json's {}", shape_text(source->shape),
                                            shape_text(expected)));
    }
    ConvertTensorPlan t;
    t.hf_name = name;
    t.gguf_name = gguf_name_of(*match);
    t.shape.assign(expected.rbegin(), expected.rend());
    t.source = source;
    t.transform = rule.transform;
    if (t.transform == ConvertTransform::permute_rope) {
      t.permute_heads = rule.kv_heads ? c.n_head_kv : c.n_head;
      if (c.head_dim % 2 != 0) return tensor_error(name, fmt::format("head_dim {} is odd: the rows cannot be permuted", c.head_dim));
    }
    seen[t.gguf_name] = true;
    plan.tensors.push_back(std::move(t));
  }
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
  for (const TensorRule& r : spec.global_tensors) {
    if (auto e = check(r, -1); !e) return e;
  }
  for (int64_t layer = 0; layer < c.block_count; ++layer) {
    for (const TensorRule& r : spec.layer_tensors) {
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

  // The checkpoint's own element type when the output keeps it (F32 -> F32, F16 -> F16,
  // BF16 -> BF16): the rows are copied, not widened and narrowed.
  static bool keeps_source_type(const ConvertTensorPlan& t) {
    if (t.source == nullptr || t.transform == ConvertTransform::rope_freqs) return false;
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
    if (keeps_source_type(t)) {
      quant::parallel_ranges(rows, threads, rows_per_task, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          copy_row(t, t.source->data.data() + static_cast<size_t>(source_row(t, first + r)) * dst_row,
                   encoded_.data() + static_cast<size_t>(r) * dst_row, static_cast<size_t>(dst_row));
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
        const int64_t from = source_row(t, first + r);
        if (t.transform == ConvertTransform::rope_freqs) {
          std::memcpy(dst, t.generated.data() + from * ne0, static_cast<size_t>(ne0) * 4);
          continue;
        }
        const uint32_t bytes = safetensors_dtype_bytes(t.source->dtype);
        const std::byte* src = t.source->data.data() + static_cast<size_t>(from * ne0) * bytes;
        if (source_type) {
          const std::span<const std::byte> row(src, static_cast<size_t>(ne0) * bytes);
          if (!dequantize(*source_type, row, std::span<float>(dst, static_cast<size_t>(ne0)))) failed = true;
        } else {
          widen(t.source->dtype, src, dst, ne0);
        }
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

}  // namespace

std::string_view convert_transform_name(ConvertTransform transform) {
  switch (transform) {
    case ConvertTransform::none: return "none";
    case ConvertTransform::permute_rope: return "permute_rope";
    case ConvertTransform::rope_freqs: return "rope_freqs";
  }
  return "unknown";
}

std::vector<std::string_view> convert_supported_architectures() {
  std::vector<std::string_view> names;
  for (const ArchitectureSpec& spec : convert_detail::architectures()) names.push_back(spec.hf_name);
  return names;
}

bool convert_accepts_out_type(TensorType type) {
  if (type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16) return true;
  const QuantCapabilities caps = quant_capabilities(type);
  return type_traits(type).quantized && caps.quantize && !caps.requires_imatrix;
}

std::optional<uint32_t> convert_file_type(TensorType out_type) { return file_type_for_type(out_type); }

Expected<ConvertPlan> plan_convert(const std::filesystem::path& model_dir, const ConvertOptions& options) {
  if (!convert_accepts_out_type(options.out_type)) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("cannot convert to {}", type_name(options.out_type)));
  }
  auto config = read_config(model_dir);
  if (!config) return std::move(config).error();
  const Json& archs = config->root.value("architectures", Json::array());
  if (!archs.is_array() || archs.empty() || !archs[0].is_string()) {
    return config_error("architectures", "missing: the model's class (LlamaForCausalLM...) is not named");
  }
  const std::string hf_arch = archs[0].get<std::string>();
  const ArchitectureSpec* spec = convert_detail::find_architecture(hf_arch);
  if (spec == nullptr) {
    return config_error("architectures", fmt::format("{} is not supported (supported: {})", hf_arch,
                                                     fmt::join(convert_supported_architectures(), ", ")));
  }
  ConvertPlan plan;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (entry.path().extension() != ".gguf") plan.inputs.push_back(entry.path());
  }
  plan.hf_architecture = hf_arch;
  plan.architecture = std::string(spec->gguf_name);
  plan.file_type = *convert_file_type(options.out_type);
  auto model = SafetensorsModel::open(model_dir);
  if (!model) return std::move(model).error();
  plan.model = std::make_shared<const SafetensorsModel>(std::move(*model));
  if (auto r = plan_tensors(plan, *config, *spec, options); !r) return std::move(r).error();
  add_general_keys(plan, *config, model_dir);
  if (auto r = add_model_keys(plan, *config, *spec); !r) return std::move(r).error();
  add_key(plan, std::string(keys::kQuantizationVersion), MetadataValue::of(kQuantizationVersionCurrent));
  if (options.tokenizer) {
    auto tokenizer = convert_hf_tokenizer(model_dir);
    if (!tokenizer) {
      Error e = std::move(tokenizer).error();
      e.message = fmt::format("tokenizer: {} (a model without a vocabulary does not load in llama.cpp)", e.message);
      return e;
    }
    for (auto& [key, value] : tokenizer->keys) add_key(plan, std::move(key), std::move(value));
  }
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
    const ConvertTensorPlan& t = plan.tensors[done - 1];
    if (t.source != nullptr) release_pages(t.source->data);
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
