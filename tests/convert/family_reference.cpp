#include "family_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace ggufkit::test {
namespace {

using Json = nlohmann::ordered_json;
using Vector = std::vector<double>;

enum class Cls { llama, gemma, gemma2, gemma3, phi3, granite, olmo2, smollm3, mixtral, qwen2moe, qwen3moe, mistral, ministral3 };
enum class Activation { silu, gelu_tanh, gelu_erf };
// Where a block's norms are: llama's pre-norms; Gemma 2/3's pre-norms plus post-norms on both
// branch outputs; OLMo 2's post-norms only.
enum class Layout { pre_norm, sandwich, post_norm };
enum class QkNorm { none, per_head, whole };

// One rotary embedding as HF builds it: inv_freq, the attention factor multiplying cos and sin,
// and how many leading dims of each head it rotates.
struct Rope {
  double theta = 10000.0;
  Vector inv_freq;               // rot_dim / 2 entries
  double attention_factor = 1.0;
  int64_t rot_dim = 0;
  std::string what;              // for describe_hf_semantics
};

// A sparse mixture-of-experts feed-forward (Mixtral's block_sparse_moe, Qwen's mlp): its tensor
// prefix within a block, the expert tensors' names, how many experts each token takes and whether
// their weights are renormalized, whether a gated shared expert is added (Qwen2-MoE).
struct Moe {
  bool on = false;
  std::string prefix;                    // "block_sparse_moe." or "mlp."
  std::string gate, up, down;            // "w1", "w3", "w2" or "gate_proj", "up_proj", "down_proj"
  int64_t experts = 0, top_k = 0;
  bool renormalize = false;
  bool shared_expert = false;
};

struct Semantics {
  Cls cls = Cls::llama;
  std::string hf_class;
  std::string root;              // "model." or "language_model.model."
  std::string lm_head;           // the untied output's name
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ff = 0;
  double eps = 1e-6;
  bool gemma_norm = false;       // x * (1 + w)
  bool fused = false;            // Phi-3's qkv_proj and gate_up_proj
  bool tied = false;
  Activation act = Activation::silu;
  Layout layout = Layout::pre_norm;
  QkNorm qk_norm = QkNorm::none;
  double embed_scale = 1.0;
  double attn_scale = 0.0;
  double attn_softcap = 0.0;     // 0: none
  double final_softcap = 0.0;
  double residual_multiplier = 1.0;
  double logits_divisor = 1.0;
  int64_t window = 0;
  std::vector<bool> sliding;     // per layer
  std::vector<bool> use_rope;    // per layer
  Rope global_rope, local_rope;  // local: the sliding layers' (Gemma 3)
  bool local_rope_differs = false;
  Moe moe;
  // Ministral 3's llama 4 attention scaling: queries (after rope) times
  // 1 + beta * ln(1 + floor(position / original)); beta 0: none.
  double llama4_beta = 0.0;
  double llama4_original = 0.0;
};

const Json* member(const Json& j, const std::string& key) {
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}
bool present(const Json& j, const std::string& key) {
  const Json* v = member(j, key);
  return v != nullptr && !v->is_null();
}
double number(const Json& j, const std::string& key, std::optional<double> fallback = std::nullopt) {
  const Json* v = member(j, key);
  if (v != nullptr && v->is_number()) return v->get<double>();
  if (v != nullptr && !v->is_null()) throw std::invalid_argument("config.json: " + key + " is not a number");
  if (fallback) return *fallback;
  throw std::invalid_argument("config.json: " + key + " is required by the reference");
}
int64_t integer(const Json& j, const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
  const Json* v = member(j, key);
  if (v != nullptr && v->is_number_integer()) return v->get<int64_t>();
  if (v != nullptr && !v->is_null()) throw std::invalid_argument("config.json: " + key + " is not an integer");
  if (fallback) return *fallback;
  throw std::invalid_argument("config.json: " + key + " is required by the reference");
}
// An optional number: absent or null is nullopt (HF's None).
std::optional<double> optional_number(const Json& j, const std::string& key, std::optional<double> fallback) {
  const Json* v = member(j, key);
  if (v == nullptr) return fallback;
  if (v->is_null()) return std::nullopt;
  return v->get<double>();
}

Activation activation(const std::string& name) {
  if (name == "silu" || name == "swish") return Activation::silu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new") return Activation::gelu_tanh;
  if (name == "gelu") return Activation::gelu_erf;
  throw std::invalid_argument("config.json: activation " + name + " is not modelled by the reference");
}

// HF's rotary embedding for `rope_scaling` (null: the default one), rope_init_fn's inv_freq and
// attention factor (modeling_rope_utils.py), for a sequence of `seq_len` tokens.
Rope make_rope(const Json& c, double theta, const Json* rope_scaling, int64_t rot_dim, int64_t seq_len) {
  Rope r;
  r.theta = theta;
  r.rot_dim = rot_dim;
  const int64_t pairs = rot_dim / 2;
  for (int64_t i = 0; i < pairs; ++i) r.inv_freq.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dim)));
  std::ostringstream what;
  what << "theta " << theta << ", " << rot_dim << " rotated dims";
  if (rope_scaling == nullptr || rope_scaling->is_null()) {
    r.what = what.str();
    return r;
  }
  std::string type;
  if (present(*rope_scaling, "rope_type")) type = (*rope_scaling)["rope_type"].get<std::string>();
  else if (present(*rope_scaling, "type")) type = (*rope_scaling)["type"].get<std::string>();
  if (type == "default") {
    r.what = what.str();
    return r;
  }
  if (type == "linear") {
    const double factor = number(*rope_scaling, "factor");
    for (double& f : r.inv_freq) f /= factor;
    what << ", linear scaling " << factor;
  } else if (type == "longrope" || type == "su") {
    // _compute_longrope_parameters (Phi-3): factor from the config's max / original positions.
    const double max_pos = number(c, "max_position_embeddings");
    double original = max_pos;
    double factor = number(*rope_scaling, "factor", 1.0);
    if (present(c, "original_max_position_embeddings")) {
      original = number(c, "original_max_position_embeddings");
      factor = max_pos / original;
    }
    if (present(*rope_scaling, "attention_factor")) {
      r.attention_factor = number(*rope_scaling, "attention_factor");
    } else {
      r.attention_factor = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(original));
    }
    const bool long_context = static_cast<double>(seq_len) > original;
    const Json& ext = (*rope_scaling)[long_context ? "long_factor" : "short_factor"];
    if (!ext.is_array() || static_cast<int64_t>(ext.size()) != pairs) {
      throw std::invalid_argument("config.json: rope_scaling's factor lists must have rot_dim / 2 entries");
    }
    for (int64_t i = 0; i < pairs; ++i) r.inv_freq[static_cast<size_t>(i)] /= ext[static_cast<size_t>(i)].get<double>();
    what << ", longrope " << (long_context ? "long" : "short") << " factors, attention factor " << r.attention_factor;
  } else if (type == "yarn") {
    const YarnRope yarn = yarn_rope(c, *rope_scaling, theta, rot_dim);
    r.inv_freq = yarn.inv_freq;
    r.attention_factor = yarn.attention_factor;
    what << ", yarn factor " << yarn.factor << " (pairs <= " << yarn.low << " plain, >= " << yarn.high
         << " interpolated), attention factor " << yarn.attention_factor;
  } else {
    throw std::invalid_argument("config.json: rope type " + type + " is not modelled by the reference");
  }
  r.what = what.str();
  return r;
}

Semantics semantics(const Json& config, int64_t seq_len) {
  Semantics s;
  const Json* architectures = member(config, "architectures");
  if (architectures == nullptr || !architectures->is_array() || architectures->empty()) {
    throw std::invalid_argument("config.json has no architectures");
  }
  s.hf_class = (*architectures)[0].get<std::string>();
  s.root = "model.";
  s.lm_head = "lm_head.weight";
  const Json* text = &config;
  if (s.hf_class == "LlamaForCausalLM") s.cls = Cls::llama;
  else if (s.hf_class == "GemmaForCausalLM") s.cls = Cls::gemma;
  else if (s.hf_class == "Gemma2ForCausalLM") s.cls = Cls::gemma2;
  else if (s.hf_class == "Gemma3ForCausalLM") s.cls = Cls::gemma3;
  else if (s.hf_class == "Gemma3ForConditionalGeneration") {
    s.cls = Cls::gemma3;
    // The text model is config.text_config (a Gemma3TextConfig: its defaults for absent keys); the
    // weights are language_model.model.* (transformers < 4.52's layout, Google's checkpoints) or
    // model.language_model.* (later versions'); reference_hf_logits picks the one present.
    text = member(config, "text_config");
    if (text == nullptr || !text->is_object()) throw std::invalid_argument("config.json: no text_config");
    s.root = "language_model.model.";
    s.lm_head = "language_model.lm_head.weight";
  } else if (s.hf_class == "Phi3ForCausalLM") s.cls = Cls::phi3;
  else if (s.hf_class == "GraniteForCausalLM") s.cls = Cls::granite;
  else if (s.hf_class == "Olmo2ForCausalLM") s.cls = Cls::olmo2;
  else if (s.hf_class == "SmolLM3ForCausalLM") s.cls = Cls::smollm3;
  else if (s.hf_class == "MixtralForCausalLM") s.cls = Cls::mixtral;
  else if (s.hf_class == "Qwen2MoeForCausalLM") s.cls = Cls::qwen2moe;
  else if (s.hf_class == "Qwen3MoeForCausalLM") s.cls = Cls::qwen3moe;
  else if (s.hf_class == "Ministral3ForCausalLM") s.cls = Cls::ministral3;
  else if (s.hf_class == "Mistral3ForConditionalGeneration") {
    // The text model is config.text_config: MistralModel (model_type mistral, Mistral Small 3.x) or
    // Ministral3Model (ministral3); weights model.language_model.* and lm_head.weight (transformers
    // >= 4.52), or language_model.model.* and language_model.lm_head.weight before.
    text = member(config, "text_config");
    if (text == nullptr || !text->is_object()) throw std::invalid_argument("config.json: no text_config");
    const std::string text_type = text->value("model_type", std::string("mistral"));
    if (text_type == "mistral") s.cls = Cls::mistral;
    else if (text_type == "ministral3") s.cls = Cls::ministral3;
    else throw std::invalid_argument("the reference does not model a Mistral3ForConditionalGeneration of text model " + text_type);
    s.root = "model.language_model.";
  } else throw std::invalid_argument("the reference does not model " + s.hf_class);
  const Json& c = *text;
  const bool gemma = s.cls == Cls::gemma || s.cls == Cls::gemma2 || s.cls == Cls::gemma3;

  // Sizes: the ones the tiny checkpoints always write are required; Gemma 3's head counts and
  // head_dim have Gemma3TextConfig's defaults (gemma-3-4b's text_config leaves them out).
  s.vocab = integer(c, "vocab_size", s.cls == Cls::gemma3 ? std::optional<int64_t>(262208) : std::nullopt);
  s.hidden = integer(c, "hidden_size");
  s.layers = integer(c, "num_hidden_layers");
  s.ff = integer(c, "intermediate_size");
  s.heads = integer(c, "num_attention_heads", s.cls == Cls::gemma3 ? std::optional<int64_t>(8) : std::nullopt);
  // (MixtralConfig's and MistralConfig's 8, Qwen2MoeConfig's 16, Qwen3MoeConfig's 4 when absent;
  // Ministral 3's written.)
  const int64_t kv_default = s.cls == Cls::gemma3 || s.cls == Cls::qwen3moe   ? 4
                             : s.cls == Cls::gemma || s.cls == Cls::qwen2moe   ? 16
                             : s.cls == Cls::mixtral || s.cls == Cls::mistral ? 8
                                                                               : s.heads;
  s.kv_heads = s.cls == Cls::ministral3 ? integer(c, "num_key_value_heads") : integer(c, "num_key_value_heads", kv_default);
  if (gemma) s.head_dim = integer(c, "head_dim", 256);
  else if (s.cls == Cls::granite || s.cls == Cls::smollm3) s.head_dim = s.hidden / s.heads;  // no head_dim attribute
  else s.head_dim = integer(c, "head_dim", s.hidden / s.heads);

  switch (s.cls) {
    case Cls::phi3: case Cls::olmo2: case Cls::mixtral: s.eps = number(c, "rms_norm_eps", 1e-5); break;
    case Cls::ministral3: s.eps = number(c, "rms_norm_eps"); break;
    default: s.eps = number(c, "rms_norm_eps", 1e-6); break;
  }
  s.gemma_norm = gemma;
  s.fused = s.cls == Cls::phi3;
  s.layout = s.cls == Cls::gemma2 || s.cls == Cls::gemma3 ? Layout::sandwich : s.cls == Cls::olmo2 ? Layout::post_norm : Layout::pre_norm;
  s.qk_norm = s.cls == Cls::gemma3 || s.cls == Cls::qwen3moe ? QkNorm::per_head : s.cls == Cls::olmo2 ? QkNorm::whole : QkNorm::none;

  // Tied output: the class's default (Gemma's and SmolLM3's True, the others' False).
  const bool tie_default = gemma || s.cls == Cls::smollm3;
  const Json& tie_source = s.hf_class == "Gemma3ForConditionalGeneration" ? config : c;
  s.tied = present(tie_source, "tie_word_embeddings") ? tie_source["tie_word_embeddings"].get<bool>() : tie_default;

  // Activation: GemmaMLP reads hidden_act, Gemma2/3MLP hidden_activation, the others hidden_act.
  if (s.cls == Cls::gemma2 || s.cls == Cls::gemma3) {
    s.act = activation(present(c, "hidden_activation") ? c["hidden_activation"].get<std::string>() : "gelu_pytorch_tanh");
  } else if (s.cls == Cls::gemma) {
    s.act = activation(present(c, "hidden_act") ? c["hidden_act"].get<std::string>() : "gelu_pytorch_tanh");
  } else {
    s.act = activation(present(c, "hidden_act") ? c["hidden_act"].get<std::string>() : "silu");
  }

  if (gemma) s.embed_scale = std::sqrt(static_cast<double>(s.hidden));
  s.attn_scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  if (s.cls == Cls::gemma2 || s.cls == Cls::gemma3) s.attn_scale = 1.0 / std::sqrt(number(c, "query_pre_attn_scalar", 256.0));
  if (s.cls == Cls::granite) {
    s.embed_scale = number(c, "embedding_multiplier", 1.0);
    s.attn_scale = number(c, "attention_multiplier", 1.0);
    s.residual_multiplier = number(c, "residual_multiplier", 1.0);
    s.logits_divisor = number(c, "logits_scaling", 1.0);
  }
  if (s.cls == Cls::gemma2) {
    s.attn_softcap = optional_number(c, "attn_logit_softcapping", 50.0).value_or(0.0);
    s.final_softcap = optional_number(c, "final_logit_softcapping", 30.0).value_or(0.0);
  }
  if (s.cls == Cls::gemma3) {
    s.attn_softcap = optional_number(c, "attn_logit_softcapping", std::nullopt).value_or(0.0);
    s.final_softcap = optional_number(c, "final_logit_softcapping", std::nullopt).value_or(0.0);
  }

  // Sliding-window layers.
  s.sliding.assign(static_cast<size_t>(s.layers), false);
  const Json* layer_types = member(c, "layer_types");
  const bool has_layer_types = layer_types != nullptr && layer_types->is_array();
  if (has_layer_types && static_cast<int64_t>(layer_types->size()) != s.layers) {
    throw std::invalid_argument("config.json: layer_types must have num_hidden_layers entries");
  }
  auto from_layer_types = [&] {
    for (int64_t i = 0; i < s.layers; ++i) s.sliding[static_cast<size_t>(i)] = (*layer_types)[static_cast<size_t>(i)] == "sliding_attention";
  };
  if (s.cls == Cls::gemma2) {
    s.window = integer(c, "sliding_window", 4096);
    if (has_layer_types) from_layer_types();
    else for (int64_t i = 0; i < s.layers; ++i) s.sliding[static_cast<size_t>(i)] = (i + 1) % 2 != 0;
  } else if (s.cls == Cls::gemma3) {
    s.window = integer(c, "sliding_window", 4096);
    if (has_layer_types) from_layer_types();
    else {
      const int64_t pattern = integer(c, "sliding_window_pattern", 6);
      for (int64_t i = 0; i < s.layers; ++i) s.sliding[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
    }
  } else if (s.cls == Cls::phi3) {
    // Phi3Attention passes config.sliding_window to every layer's attention.
    if (present(c, "sliding_window")) {
      s.window = integer(c, "sliding_window");
      s.sliding.assign(static_cast<size_t>(s.layers), true);
    }
  } else if (s.cls == Cls::smollm3) {
    if (present(c, "sliding_window") && c.value("use_sliding_window", false) && has_layer_types) {
      s.window = integer(c, "sliding_window");
      from_layer_types();
    }
  } else if (s.cls == Cls::mixtral || s.cls == Cls::mistral || s.cls == Cls::ministral3) {
    // MixtralAttention, MistralAttention and Ministral3Attention pass config.sliding_window (None in
    // Mixtral's, Mistral Small 3's and Ministral 3's checkpoints) to every layer.
    if (present(c, "sliding_window")) {
      s.window = integer(c, "sliding_window");
      s.sliding.assign(static_cast<size_t>(s.layers), true);
    }
  } else if (s.cls == Cls::qwen2moe || s.cls == Cls::qwen3moe) {
    if (c.value("use_sliding_window", false)) {
      throw std::invalid_argument("config.json: use_sliding_window is not modelled by the reference for " + s.hf_class);
    }
  }

  // The mixture of experts: HF's sparse block computes softmax(router logits) over every expert
  // (in float32: here float64), keeps the top num_experts_per_tok, renormalizes them to sum 1
  // (Mixtral always, Qwen when norm_topk_prob), and sums the chosen experts' SwiGLU outputs so
  // weighted; Qwen2-MoE adds its shared expert times sigmoid(shared_expert_gate(x)).
  if (s.cls == Cls::mixtral) {
    s.moe = {true, "block_sparse_moe.", "w1", "w3", "w2", integer(c, "num_local_experts", 8), integer(c, "num_experts_per_tok", 2),
             true, false};
  } else if (s.cls == Cls::qwen2moe || s.cls == Cls::qwen3moe) {
    const bool qwen2 = s.cls == Cls::qwen2moe;
    s.moe = {true, "mlp.", "gate_proj", "up_proj", "down_proj", integer(c, "num_experts", qwen2 ? 60 : 128),
             integer(c, "num_experts_per_tok", qwen2 ? 4 : 8), c.value("norm_topk_prob", false), qwen2};
    // A layer is sparse when it is not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0;
    // llama.cpp's qwen2moe and qwen3moe graphs have experts in every layer, so the reference
    // models only that.
    const Json* dense = member(c, "mlp_only_layers");
    if ((dense != nullptr && dense->is_array() && !dense->empty()) || integer(c, "decoder_sparse_step", 1) != 1) {
      throw std::invalid_argument("config.json: dense layers (mlp_only_layers, decoder_sparse_step) are not modelled by the reference");
    }
  }
  if (s.moe.on && (s.moe.top_k < 1 || s.moe.top_k > s.moe.experts)) {
    throw std::invalid_argument("config.json: num_experts_per_tok must be between 1 and the number of experts");
  }

  // Rope.
  s.use_rope.assign(static_cast<size_t>(s.layers), true);
  if (s.cls == Cls::smollm3) {
    const Json* no_rope = member(c, "no_rope_layers");
    const int64_t interval = integer(c, "no_rope_layer_interval", 4);
    for (int64_t i = 0; i < s.layers; ++i) {
      s.use_rope[static_cast<size_t>(i)] = no_rope != nullptr && no_rope->is_array() ? (*no_rope)[static_cast<size_t>(i)].get<int>() != 0
                                                                                    : (i + 1) % interval != 0;
    }
  }
  const double theta_default = s.cls == Cls::gemma3 || s.cls == Cls::mixtral ? 1e6 : s.cls == Cls::smollm3 ? 2e6 : 10000.0;
  double theta = number(c, "rope_theta", theta_default);
  int64_t rot_dim = s.head_dim;
  if (s.cls == Cls::phi3) rot_dim = static_cast<int64_t>(static_cast<double>(s.head_dim) * number(c, "partial_rotary_factor", 1.0));
  const Json* rope_scaling = member(c, "rope_scaling");
  // transformers 5's configs: rope_parameters, rope_theta within (Ministral3Config has no other).
  if (const Json* parameters = member(c, "rope_parameters"); parameters != nullptr && parameters->is_object()) {
    rope_scaling = parameters;
    theta = number(*parameters, "rope_theta", s.cls == Cls::ministral3 ? std::nullopt : std::optional<double>(theta));
  } else if (s.cls == Cls::ministral3) {
    throw std::invalid_argument("config.json: Ministral3ForCausalLM needs rope_parameters");
  }
  if (s.cls == Cls::ministral3) {
    // Ministral3Attention reads both with .get(): a config without them fails in HF.
    s.llama4_beta = number(*rope_scaling, "llama_4_scaling_beta");
    s.llama4_original = number(*rope_scaling, "original_max_position_embeddings");
  }
  s.global_rope = make_rope(c, theta, rope_scaling, rot_dim, seq_len);
  s.local_rope = s.global_rope;
  if (s.cls == Cls::gemma3) {
    s.local_rope = make_rope(c, number(c, "rope_local_base_freq", 10000.0), nullptr, rot_dim, seq_len);
    s.local_rope_differs = true;
  }
  return s;
}

// RMSNorm over x[begin, begin + n), in place: x / sqrt(mean(x^2) + eps) * w (or * (1 + w)).
void rms_norm_in_place(double* x, size_t n, const HfTensor& weight, double eps, bool plus_one) {
  if (weight.values.size() != n) throw std::invalid_argument("the reference: a norm weight's size differs");
  double mean_square = 0;
  for (size_t i = 0; i < n; ++i) mean_square += x[i] * x[i];
  mean_square /= static_cast<double>(n);
  const double scale = 1.0 / std::sqrt(mean_square + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * (plus_one ? 1.0 + weight.values[i] : weight.values[i]);
}
}  // namespace

Vector reference_linear(const HfTensor& weight, const Vector& x, int64_t row_begin, int64_t row_end) {
  const auto in_features = static_cast<size_t>(weight.shape.at(1));
  if (x.size() != in_features) throw std::invalid_argument("the reference: a linear layer's input size differs");
  if (row_end < 0) row_end = weight.shape.at(0);
  Vector y(static_cast<size_t>(row_end - row_begin), 0.0);
  for (int64_t o = row_begin; o < row_end; ++o) {
    const float* row = weight.values.data() + static_cast<size_t>(o) * in_features;
    double sum = 0;
    for (size_t i = 0; i < in_features; ++i) sum += static_cast<double>(row[i]) * x[i];
    y[static_cast<size_t>(o - row_begin)] = sum;
  }
  return y;
}

Vector reference_rms_norm(Vector x, const HfTensor& weight, double eps, bool plus_one) {
  rms_norm_in_place(x.data(), x.size(), weight, eps, plus_one);
  return x;
}

namespace {


// rotate_half on the first rot_dim dims of one head: element i pairs with i + rot_dim / 2.
void apply_rope(double* head, const Rope& rope, int64_t position) {
  const int64_t half = rope.rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * rope.inv_freq[static_cast<size_t>(i)];
    const double c = std::cos(angle) * rope.attention_factor;
    const double s = std::sin(angle) * rope.attention_factor;
    const double first = head[i];
    const double second = head[i + half];
    head[i] = first * c - second * s;
    head[i + half] = second * c + first * s;
  }
}

// ggml's CPU GELU (tanh approximation) with GGML_GELU_FP16: |x| >= 10 exactly 0 or x, otherwise
// the half-precision table entry of the half-rounded input, the entry being the float32 GELU
// rounded to half.
double ggml_cpu_gelu(double x) {
  const auto xf = static_cast<float>(x);
  if (xf <= -10.0f) return 0.0;
  if (xf >= 10.0f) return xf;
  const float h = f16_bits_to_float(float_to_f16_bits(xf));
  const float k = 0.79788456080286535587989211986876f;  // SQRT_2_OVER_PI
  const float g = 0.5f * h * (1.0f + std::tanh(k * h * (1.0f + 0.044715f * h * h)));
  return f16_bits_to_float(float_to_f16_bits(g));
}

double act(Activation a, double x, GeluEvaluation gelu) {
  if (a == Activation::gelu_tanh && gelu == GeluEvaluation::ggml_cpu_fp16_table) return ggml_cpu_gelu(x);
  switch (a) {
    case Activation::silu: return x / (1.0 + std::exp(-x));
    case Activation::gelu_tanh: {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case Activation::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
  }
  return x;
}

const HfTensor& tensor(const std::map<std::string, HfTensor>& tensors, const std::string& name) {
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw std::invalid_argument("the reference: the checkpoint has no " + name);
  return it->second;
}

// A linear layer NAME.weight, plus NAME.bias when the checkpoint has one (Qwen2-MoE's q, k, v).
Vector linear_with_bias(const std::map<std::string, HfTensor>& tensors, const std::string& name, const Vector& x) {
  Vector y = reference_linear(tensor(tensors, name + ".weight"), x);
  if (const auto it = tensors.find(name + ".bias"); it != tensors.end()) {
    if (it->second.values.size() != y.size()) throw std::invalid_argument("the reference: " + name + ".bias's size differs");
    for (size_t i = 0; i < y.size(); ++i) y[i] += it->second.values[i];
  }
  return y;
}

// down(act(gate(h)) * up(h)).
Vector gated_mlp(const HfTensor& gate_w, const HfTensor& up_w, const HfTensor& down_w, const Vector& h, Activation a,
                 GeluEvaluation gelu) {
  const Vector gate = reference_linear(gate_w, h);
  Vector up = reference_linear(up_w, h);
  for (size_t i = 0; i < up.size(); ++i) up[i] *= act(a, gate[i], gelu);
  return reference_linear(down_w, up);
}

// Rows [row_begin, row_end) of expert e's matrix in a fused 3-D tensor [experts, rows, cols].
HfTensor expert_rows(const HfTensor& fused, const std::string& name, int64_t e, int64_t row_begin, int64_t row_end) {
  if (fused.shape.size() != 3 || e >= fused.shape[0] || row_end > fused.shape[1]) {
    throw std::invalid_argument("the reference: " + name + " is not [experts, rows, cols] with expert " + std::to_string(e));
  }
  const int64_t cols = fused.shape[2];
  const auto begin = fused.values.begin() + static_cast<std::ptrdiff_t>((e * fused.shape[1] + row_begin) * cols);
  return HfTensor{{row_end - row_begin, cols}, std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>((row_end - row_begin) * cols))};
}

// Expert e's SwiGLU output: from its own tensors (experts.E.gate_proj.weight, ...), or from the
// fused 3-D tensors transformers 5 stores (Qwen3MoeExperts: experts.gate_up_proj, expert e's gate
// rows then its up rows, and experts.down_proj; with or without ".weight").
Vector expert_output(const Moe& moe, const std::string& p, int64_t e, const Vector& h, Activation a, GeluEvaluation gelu,
                     const std::map<std::string, HfTensor>& tensors) {
  const std::string x = p + "experts." + std::to_string(e) + ".";
  if (tensors.contains(x + moe.gate + ".weight")) {
    return gated_mlp(tensor(tensors, x + moe.gate + ".weight"), tensor(tensors, x + moe.up + ".weight"),
                     tensor(tensors, x + moe.down + ".weight"), h, a, gelu);
  }
  auto fused = [&](const std::string& kind) -> const HfTensor& {
    const std::string name = p + "experts." + kind;
    return tensors.contains(name) ? tensor(tensors, name) : tensor(tensors, name + ".weight");
  };
  if (moe.gate != "gate_proj" || !(tensors.contains(p + "experts.gate_up_proj") || tensors.contains(p + "experts.gate_up_proj.weight"))) {
    throw std::invalid_argument("the reference: the checkpoint has no " + x + moe.gate + ".weight, nor fused experts");
  }
  const HfTensor& gate_up = fused("gate_up_proj");
  const HfTensor& down = fused("down_proj");
  const int64_t ff = gate_up.shape.at(1) / 2;
  return gated_mlp(expert_rows(gate_up, p + "experts.gate_up_proj", e, 0, ff), expert_rows(gate_up, p + "experts.gate_up_proj", e, ff, 2 * ff),
                   expert_rows(down, p + "experts.down_proj", e, 0, down.shape.at(1)), h, a, gelu);
}

// The sparse feed-forward of one position of one block (see Moe), recording the choice of experts
// in `routing` when given.
Vector moe_feed_forward(const Moe& moe, const std::string& block, const Vector& h, Activation a, GeluEvaluation gelu,
                        const std::map<std::string, HfTensor>& tensors, ReferenceRouting* routing, int64_t layer, size_t position) {
  const std::string p = block + moe.prefix;
  const Vector logits = reference_linear(tensor(tensors, p + "gate.weight"), h);
  if (static_cast<int64_t>(logits.size()) != moe.experts) {
    throw std::invalid_argument("the reference: " + p + "gate.weight has not one row per expert");
  }
  const double top = *std::max_element(logits.begin(), logits.end());
  Vector probs(logits.size());
  double total = 0;
  for (size_t e = 0; e < logits.size(); ++e) total += (probs[e] = std::exp(logits[e] - top));
  for (double& q : probs) q /= total;
  std::vector<int64_t> order(probs.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int64_t>(e);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a_, int64_t b_) { return probs[static_cast<size_t>(a_)] > probs[static_cast<size_t>(b_)]; });
  const std::vector<int64_t> chosen(order.begin(), order.begin() + moe.top_k);
  double chosen_total = 0;
  for (const int64_t e : chosen) chosen_total += probs[static_cast<size_t>(e)];
  if (routing != nullptr) {
    auto& layers = routing->chosen;
    if (layers.size() <= static_cast<size_t>(layer)) layers.resize(static_cast<size_t>(layer) + 1);
    auto& positions = layers[static_cast<size_t>(layer)];
    if (positions.size() <= position) positions.resize(position + 1);
    positions[position] = chosen;
    if (moe.top_k < moe.experts) {
      const double margin = probs[static_cast<size_t>(order[static_cast<size_t>(moe.top_k) - 1])] -
                            probs[static_cast<size_t>(order[static_cast<size_t>(moe.top_k)])];
      if (margin < routing->min_margin) {
        routing->min_margin = margin;
        routing->min_margin_layer = layer;
        routing->min_margin_position = position;
      }
    }
  }
  Vector out(h.size(), 0.0);
  for (const int64_t e : chosen) {
    const double weight = probs[static_cast<size_t>(e)] / (moe.renormalize ? chosen_total : 1.0);
    const Vector y = expert_output(moe, p, e, h, a, gelu, tensors);
    for (size_t i = 0; i < out.size(); ++i) out[i] += weight * y[i];
  }
  if (moe.shared_expert) {
    const Vector y = gated_mlp(tensor(tensors, p + "shared_expert.gate_proj.weight"), tensor(tensors, p + "shared_expert.up_proj.weight"),
                               tensor(tensors, p + "shared_expert.down_proj.weight"), h, a, gelu);
    const double gate = 1.0 / (1.0 + std::exp(-reference_linear(tensor(tensors, p + "shared_expert_gate.weight"), h).at(0)));
    for (size_t i = 0; i < out.size(); ++i) out[i] += gate * y[i];
  }
  return out;
}

}  // namespace

YarnRope yarn_rope(const Json& config, const Json& parameters, double theta, int64_t dim) {
  YarnRope y;
  const double original = present(parameters, "original_max_position_embeddings") ? number(parameters, "original_max_position_embeddings")
                                                                                  : number(config, "max_position_embeddings");
  y.factor = present(parameters, "factor") ? number(parameters, "factor") : number(config, "max_position_embeddings") / original;
  auto get_mscale = [](double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; };
  const double mscale = number(parameters, "mscale", 0.0);
  const double mscale_all_dim = number(parameters, "mscale_all_dim", 0.0);
  if (present(parameters, "attention_factor")) y.attention_factor = number(parameters, "attention_factor");
  else if (mscale != 0.0 && mscale_all_dim != 0.0) y.attention_factor = get_mscale(y.factor, mscale) / get_mscale(y.factor, mscale_all_dim);
  else y.attention_factor = get_mscale(y.factor, 1.0);
  // (`or` in HF: absent, null and 0 all take the default.)
  double beta_fast = number(parameters, "beta_fast", 32.0);
  double beta_slow = number(parameters, "beta_slow", 1.0);
  if (beta_fast == 0.0) beta_fast = 32.0;
  if (beta_slow == 0.0) beta_slow = 1.0;
  const bool truncate = !present(parameters, "truncate") || parameters["truncate"].get<bool>();
  auto correction_dim = [&](double rotations) {
    return static_cast<double>(dim) * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
  };
  y.low = correction_dim(beta_fast);
  y.high = correction_dim(beta_slow);
  if (truncate) {
    y.low = std::floor(y.low);
    y.high = std::ceil(y.high);
  }
  y.low = std::max(y.low, 0.0);
  y.high = std::min(y.high, static_cast<double>(dim - 1));
  if (y.low == y.high) y.high += 0.001;
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double plain = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    const double extrapolation = 1.0 - std::clamp((static_cast<double>(i) - y.low) / (y.high - y.low), 0.0, 1.0);
    y.inv_freq.push_back(plain / y.factor * (1.0 - extrapolation) + plain * extrapolation);
  }
  return y;
}

bool hf_uses_gelu(const Json& config) { return semantics(config, 1).act != Activation::silu; }

std::vector<std::vector<double>> reference_hf_logits(const Json& config, const std::map<std::string, HfTensor>& tensors,
                                                     const std::vector<int32_t>& tokens, GeluEvaluation gelu,
                                                     ReferenceRouting* routing) {
  const size_t n_tokens = tokens.size();
  if (routing != nullptr) *routing = ReferenceRouting{};
  Semantics s = semantics(config, static_cast<int64_t>(n_tokens));
  // A multimodal checkpoint's text model under the other of its two layouts.
  if (!tensors.contains(s.root + "embed_tokens.weight")) {
    if (s.root == "language_model.model.") {
      s.root = "model.language_model.";
      s.lm_head = "lm_head.weight";
    } else if (s.root == "model.language_model.") {
      s.root = "language_model.model.";
      s.lm_head = "language_model.lm_head.weight";
    }
  }
  const auto hidden = static_cast<size_t>(s.hidden);
  const int64_t hd = s.head_dim;
  const int64_t q_out = s.heads * hd;
  const int64_t kv_out = s.kv_heads * hd;
  const int64_t heads_per_kv = s.heads / s.kv_heads;
  auto T = [&](const std::string& name) -> const HfTensor& { return tensor(tensors, name); };

  const HfTensor& embed = T(s.root + "embed_tokens.weight");
  std::vector<Vector> x(n_tokens, Vector(hidden));
  for (size_t t = 0; t < n_tokens; ++t) {
    const float* row = embed.values.data() + static_cast<size_t>(tokens[t]) * hidden;
    for (size_t i = 0; i < hidden; ++i) x[t][i] = static_cast<double>(row[i]) * s.embed_scale;
  }

  for (int64_t layer = 0; layer < s.layers; ++layer) {
    const std::string p = s.root + "layers." + std::to_string(layer) + ".";
    const bool sliding = s.sliding[static_cast<size_t>(layer)];
    const Rope& rope = sliding ? s.local_rope : s.global_rope;

    // Attention.
    std::vector<Vector> q(n_tokens), k(n_tokens), v(n_tokens);
    for (size_t t = 0; t < n_tokens; ++t) {
      const Vector h = s.layout == Layout::post_norm ? x[t] : reference_rms_norm(x[t], T(p + "input_layernorm.weight"), s.eps, s.gemma_norm);
      if (s.fused) {
        const HfTensor& qkv = T(p + "self_attn.qkv_proj.weight");
        q[t] = reference_linear(qkv, h, 0, q_out);
        k[t] = reference_linear(qkv, h, q_out, q_out + kv_out);
        v[t] = reference_linear(qkv, h, q_out + kv_out, q_out + 2 * kv_out);
      } else {
        q[t] = linear_with_bias(tensors, p + "self_attn.q_proj", h);
        k[t] = linear_with_bias(tensors, p + "self_attn.k_proj", h);
        v[t] = linear_with_bias(tensors, p + "self_attn.v_proj", h);
      }
      if (s.qk_norm == QkNorm::whole) {
        rms_norm_in_place(q[t].data(), q[t].size(), T(p + "self_attn.q_norm.weight"), s.eps, s.gemma_norm);
        rms_norm_in_place(k[t].data(), k[t].size(), T(p + "self_attn.k_norm.weight"), s.eps, s.gemma_norm);
      } else if (s.qk_norm == QkNorm::per_head) {
        for (int64_t h2 = 0; h2 < s.heads; ++h2) {
          rms_norm_in_place(&q[t][static_cast<size_t>(h2 * hd)], static_cast<size_t>(hd), T(p + "self_attn.q_norm.weight"), s.eps, s.gemma_norm);
        }
        for (int64_t h2 = 0; h2 < s.kv_heads; ++h2) {
          rms_norm_in_place(&k[t][static_cast<size_t>(h2 * hd)], static_cast<size_t>(hd), T(p + "self_attn.k_norm.weight"), s.eps, s.gemma_norm);
        }
      }
      if (s.use_rope[static_cast<size_t>(layer)]) {
        const auto position = static_cast<int64_t>(t);
        for (int64_t h2 = 0; h2 < s.heads; ++h2) apply_rope(&q[t][static_cast<size_t>(h2 * hd)], rope, position);
        for (int64_t h2 = 0; h2 < s.kv_heads; ++h2) apply_rope(&k[t][static_cast<size_t>(h2 * hd)], rope, position);
      }
      if (s.llama4_beta != 0.0) {
        const double scale = 1.0 + s.llama4_beta * std::log(1.0 + std::floor(static_cast<double>(t) / s.llama4_original));
        for (double& value : q[t]) value *= scale;
      }
    }
    std::vector<Vector> branch(n_tokens);
    for (size_t t = 0; t < n_tokens; ++t) {
      Vector attended(static_cast<size_t>(q_out), 0.0);
      // Visible keys: causal, and within the window on sliding layers (t - s < window).
      const size_t first = sliding && static_cast<int64_t>(t) >= s.window ? t - static_cast<size_t>(s.window) + 1 : 0;
      for (int64_t head = 0; head < s.heads; ++head) {
        const auto q_at = static_cast<size_t>(head * hd);
        const auto kv_at = static_cast<size_t>((head / heads_per_kv) * hd);
        Vector scores(t + 1 - first);
        for (size_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += q[t][q_at + static_cast<size_t>(d)] * k[j][kv_at + static_cast<size_t>(d)];
          double score = dot * s.attn_scale;
          if (s.attn_softcap > 0) score = s.attn_softcap * std::tanh(score / s.attn_softcap);
          scores[j - first] = score;
        }
        const double top = *std::max_element(scores.begin(), scores.end());
        double total = 0;
        for (double& score : scores) total += (score = std::exp(score - top));
        for (size_t j = first; j <= t; ++j) {
          const double weight = scores[j - first] / total;
          for (int64_t d = 0; d < hd; ++d) attended[q_at + static_cast<size_t>(d)] += weight * v[j][kv_at + static_cast<size_t>(d)];
        }
      }
      branch[t] = reference_linear(T(p + "self_attn.o_proj.weight"), attended);
    }
    for (size_t t = 0; t < n_tokens; ++t) {
      Vector out = branch[t];
      if (s.layout != Layout::pre_norm) out = reference_rms_norm(out, T(p + "post_attention_layernorm.weight"), s.eps, s.gemma_norm);
      for (size_t i = 0; i < hidden; ++i) x[t][i] += s.residual_multiplier * out[i];

      // MLP.
      Vector h;
      switch (s.layout) {
        case Layout::pre_norm: h = reference_rms_norm(x[t], T(p + "post_attention_layernorm.weight"), s.eps, s.gemma_norm); break;
        case Layout::sandwich: h = reference_rms_norm(x[t], T(p + "pre_feedforward_layernorm.weight"), s.eps, s.gemma_norm); break;
        case Layout::post_norm: h = x[t]; break;
      }
      Vector down;
      if (s.moe.on) {
        down = moe_feed_forward(s.moe, p, h, s.act, gelu, tensors, routing, layer, t);
      } else if (s.fused) {
        const HfTensor& gate_up = T(p + "mlp.gate_up_proj.weight");
        const Vector gate = reference_linear(gate_up, h, 0, s.ff);
        Vector up = reference_linear(gate_up, h, s.ff, 2 * s.ff);
        for (size_t i = 0; i < up.size(); ++i) up[i] *= act(s.act, gate[i], gelu);
        down = reference_linear(T(p + "mlp.down_proj.weight"), up);
      } else {
        down = gated_mlp(T(p + "mlp.gate_proj.weight"), T(p + "mlp.up_proj.weight"), T(p + "mlp.down_proj.weight"), h, s.act, gelu);
      }
      if (s.layout != Layout::pre_norm) down = reference_rms_norm(down, T(p + "post_feedforward_layernorm.weight"), s.eps, s.gemma_norm);
      for (size_t i = 0; i < hidden; ++i) x[t][i] += s.residual_multiplier * down[i];
    }
  }

  const HfTensor& head = s.tied ? embed : T(s.lm_head);
  std::vector<Vector> logits(n_tokens);
  for (size_t t = 0; t < n_tokens; ++t) {
    logits[t] = reference_linear(head, reference_rms_norm(x[t], T(s.root + "norm.weight"), s.eps, s.gemma_norm));
    for (double& l : logits[t]) {
      l /= s.logits_divisor;
      if (s.final_softcap > 0) l = s.final_softcap * std::tanh(l / s.final_softcap);
    }
  }
  return logits;
}

std::string describe_hf_semantics(const Json& config) {
  const Semantics s = semantics(config, 12);
  std::ostringstream out;
  out << s.hf_class << ": " << s.layers << " layers, attention scale " << s.attn_scale;
  if (s.attn_softcap > 0) out << ", attention soft cap " << s.attn_softcap;
  if (s.final_softcap > 0) out << ", final soft cap " << s.final_softcap;
  if (s.embed_scale != 1.0) out << ", embeddings x " << s.embed_scale;
  if (s.residual_multiplier != 1.0) out << ", residual x " << s.residual_multiplier;
  if (s.logits_divisor != 1.0) out << ", logits / " << s.logits_divisor;
  out << (s.tied ? ", tied output" : ", untied output");
  if (s.moe.on) {
    out << "; " << s.moe.experts << " experts, top " << s.moe.top_k << " of softmax(router), "
        << (s.moe.renormalize ? "renormalized to sum 1" : "not renormalized");
    if (s.moe.shared_expert) out << ", + shared expert x sigmoid(shared_expert_gate)";
  }
  if (s.llama4_beta != 0.0) {
    out << "; queries x (1 + " << s.llama4_beta << " ln(1 + floor(position / " << s.llama4_original << "))) (llama 4 scaling)";
  }
  out << "; rope " << s.global_rope.what;
  if (s.local_rope_differs) out << " (sliding layers: " << s.local_rope.what << ")";
  out << "; layers:";
  for (int64_t i = 0; i < s.layers; ++i) {
    out << " " << i << "=" << (s.sliding[static_cast<size_t>(i)] ? "sliding(" + std::to_string(s.window) + ")" : "global")
        << (s.use_rope[static_cast<size_t>(i)] ? "" : "/no-rope");
  }
  return out.str();
}

}  // namespace ggufkit::test
