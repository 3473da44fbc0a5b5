// The Gemma family (conversion/gemma.py): GemmaForCausalLM ("gemma"), Gemma2ForCausalLM ("gemma2"),
// Gemma3ForCausalLM and the text model of Gemma3ForConditionalGeneration ("gemma3").
// - Every *norm.weight gets + 1: HF's Gemma RMSNorm computes x * (1 + w), llama.cpp x * w.
// - No lm_head: the output is the token embedding (GemmaModel and Gemma2Model drop lm_head.weight).
// - NEOX rope in llama.cpp: q and k are not permuted.
// - Gemma 2: soft-capping of attention and final logits, a sliding window; Gemma 3: q and k norms,
//   a local rope base for the sliding layers, the embedding cut to the real vocabulary.
// - SentencePiece tokenizer.model (Gemma 3: tokenizer.json's BPE when there is none), no space
//   prefix; Gemma's end-of-turn token 107.
#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kGlobals[] = {
    {"model.embed_tokens.weight", "token_embd.weight", Dim::vocab, Dim::embd},
    {"model.norm.weight", "output_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
};

// Gemma3Model keeps an lm_head a checkpoint has (tied ones have none).
constexpr TensorRule kGemma3Globals[] = {
    {"model.embed_tokens.weight", "token_embd.weight", Dim::vocab, Dim::embd},
    {"model.norm.weight", "output_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"lm_head.weight", "output.weight", Dim::vocab, Dim::embd, Presence::output},
};

constexpr TensorRule kGemmaLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

// Gemma 2 and 3: a norm before and after each of attention and feed-forward.
constexpr TensorRule kGemma2Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

constexpr TensorRule kGemma3Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::head_dim, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::head_dim, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", Dim::embd, Dim::none, Presence::required, ConvertTransform::norm_shift},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ff, Dim::embd},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ff, Dim::embd},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::embd, Dim::ff},
};

// A config.json value the Python class reads with hparams[key]: an error when absent.
Expected<int64_t> required(const HfConfig& c, const char* key) { return c.required_int(key); }

Expected<double> required_number(const HfConfig& c, const char* key) {
  auto v = c.optional_number(key);
  if (!v) return std::move(v).error();
  if (!*v) return config_error(key, "missing");
  return **v;
}

// GemmaModel.set_gguf_parameters (Gemma2Model's starts the same): its own order, not TextModel's.
Expected<void> gemma_common_keys(const FamilyInput& in, KeyWriter& w) {
  const HfConfig& c = in.config;
  auto ctx = required(c, "max_position_embeddings");
  if (!ctx) return std::move(ctx).error();
  w.u32("context_length", *ctx);
  w.u32("embedding_length", c.n_embd);
  w.u32("block_count", c.block_count);
  w.u32("feed_forward_length", c.n_ff);
  w.u32("attention.head_count", c.n_head);
  w.u32("attention.head_count_kv", c.n_head_kv);
  auto eps = required_number(c, "rms_norm_eps");
  if (!eps) return std::move(eps).error();
  w.f32("attention.layer_norm_rms_epsilon", *eps);
  w.from_config("attention.layer_norm_rms_epsilon", "rms_norm_eps");
  if (!c.has_head_dim) return config_error("head_dim", "missing");
  w.u32("attention.key_length", c.head_dim);
  w.u32("attention.value_length", c.head_dim);
  w.set("general.file_type", MetadataValue::of(in.file_type));
  return {};
}

Expected<void> gemma2_keys(const FamilyInput& in, KeyWriter& w) {
  if (auto r = gemma_common_keys(in, w); !r) return r;
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    auto v = required_number(in.config, key);
    if (!v) return std::move(v).error();
    w.f32(key, *v);
    w.from_config(key, key);
  }
  auto window = required(in.config, "sliding_window");
  if (!window) return std::move(window).error();
  w.u32("attention.sliding_window", *window);
  return {};
}

// Gemma3Model.set_gguf_parameters: TextModel's, then its own with Gemma 3's defaults (a key written
// again is replaced where it stands).
Expected<void> gemma3_keys(const FamilyInput& in, KeyWriter& w) {
  const HfConfig& c = in.config;
  if (auto r = text_model_keys(in, w); !r) return r;
  auto number_or = [&](const Json& object, const char* key, double fallback) -> Expected<double> {
    auto v = c.optional_number(object, key);
    if (!v) return std::move(v).error();
    return v->value_or(fallback);
  };
  auto ctx = c.optional_int("max_position_embeddings");
  if (!ctx) return std::move(ctx).error();
  w.u32("context_length", ctx->value_or(131072));
  auto heads = c.optional_int("num_attention_heads");
  if (!heads) return std::move(heads).error();
  w.u32("attention.head_count", heads->value_or(8));
  auto eps = number_or(c.root, "rms_norm_eps", 1e-6);
  if (!eps) return std::move(eps).error();
  w.f32("attention.layer_norm_rms_epsilon", *eps);
  w.from_config("attention.layer_norm_rms_epsilon", "rms_norm_eps");
  w.u32("attention.key_length", c.head_dim);
  w.u32("attention.value_length", c.head_dim);
  auto theta = number_or(c.rope_full, "rope_theta", 1000000.0);
  if (!theta) return std::move(theta).error();
  w.f32("rope.freq_base", *theta);
  w.from_config("rope.freq_base", "rope_theta");
  if (c.root.contains("attn_logit_softcapping") && !c.root["attn_logit_softcapping"].is_null()) {
    return config_error("attn_logit_softcapping", "set, but Gemma 3 has no attention soft-capping (the Python converter refuses it too)");
  }
  auto final_cap = c.optional_number("final_logit_softcapping");
  if (!final_cap) return std::move(final_cap).error();
  if (*final_cap && **final_cap != 0) w.f32("final_logit_softcapping", **final_cap);
  w.from_config("final_logit_softcapping", "final_logit_softcapping");
  const auto pattern = c.root.find("sliding_window_pattern");
  if (pattern == c.root.end() || *pattern != Json(1)) {
    auto window = required(c, "sliding_window");
    if (!window) return std::move(window).error();
    w.u32("attention.sliding_window", *window);
  }
  auto kv = c.optional_int("num_key_value_heads");
  if (!kv) return std::move(kv).error();
  w.u32("attention.head_count_kv", kv->value_or(4));
  return {};
}

// Gemma3Model.modify_tensors: token_embd keeps the rows of the real vocabulary, tokenizer.model's
// (padded to config.json's vocab_size: every row) or tokenizer.json's vocabulary and added tokens.
Expected<std::optional<int64_t>> gemma3_embedding_rows(const FamilyInput& in) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(in.dir / "tokenizer.model", ec)) return std::optional<int64_t>{};
  auto count = hf_tokenizer_json_token_count(in.dir);
  if (!count) return std::move(count).error();
  if (!*count) return std::optional<int64_t>{};
  return std::optional<int64_t>{static_cast<int64_t>(**count)};
}

constexpr std::string_view kGemmaClasses[] = {"GemmaForCausalLM"};
constexpr std::string_view kGemma2Classes[] = {"Gemma2ForCausalLM"};
constexpr std::string_view kGemma3Classes[] = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"};
constexpr std::string_view kLmHead[] = {"lm_head.weight"};
// The config classes (transformers 4.57: GemmaConfig, Gemma2Config, Gemma3TextConfig, and
// Gemma3Config whose text_config is a Gemma3TextConfig): the text_config of a
// Gemma3ForConditionalGeneration lists only what differs from them. (sliding_window_pattern is no
// attribute: absent stays absent.)
constexpr ConfigDefault kGemmaDefaults[] = {
    {"vocab_size", 256000},          {"hidden_size", 3072},       {"intermediate_size", 24576},
    {"num_hidden_layers", 28},       {"num_attention_heads", 16}, {"num_key_value_heads", 16},
    {"head_dim", 256},               {"max_position_embeddings", 8192},
    {"rms_norm_eps", 1e-6, false},   {"rope_theta", 10000.0, false}};
constexpr ConfigDefault kGemma2Defaults[] = {
    {"vocab_size", 256000},          {"hidden_size", 2304},       {"intermediate_size", 9216},
    {"num_hidden_layers", 26},       {"num_attention_heads", 8},  {"num_key_value_heads", 4},
    {"head_dim", 256},               {"max_position_embeddings", 8192},
    {"rms_norm_eps", 1e-6, false},   {"rope_theta", 10000.0, false},
    {"query_pre_attn_scalar", 256},  {"sliding_window", 4096},
    {"attn_logit_softcapping", 50.0, false}, {"final_logit_softcapping", 30.0, false}};
constexpr ConfigDefault kGemma3Defaults[] = {
    {"vocab_size", 262208},          {"hidden_size", 2304},       {"intermediate_size", 9216},
    {"num_hidden_layers", 26},       {"num_attention_heads", 8},  {"num_key_value_heads", 4},
    {"head_dim", 256},               {"max_position_embeddings", 131072},
    {"rms_norm_eps", 1e-6, false},   {"rope_theta", 1000000.0, false},
    {"query_pre_attn_scalar", 256},  {"sliding_window", 4096},    {"rope_local_base_freq", 10000.0, false}};
constexpr ConfigClass kGemmaClasses_[] = {{.model_type = "gemma", .defaults = kGemmaDefaults}};
constexpr ConfigClass kGemma2Classes_[] = {{.model_type = "gemma2", .defaults = kGemma2Defaults}};
constexpr ConfigClass kGemma3Classes_[] = {{.model_type = "gemma3_text", .defaults = kGemma3Defaults},
                                           {.model_type = "gemma3", .text_config_class = "gemma3_text"}};

}  // namespace

extern const Family kGemmaFamily{
    .gguf_name = "gemma",
    .hf_classes = kGemmaClasses,
    .global_tensors = kGlobals,
    .layer_tensors = kGemmaLayer,
    .keys = gemma_common_keys,
    // GemmaModel.set_vocab: CodeGemma's fill-in-the-middle ids (67, 69, 68, 70: no GGUF key in
    // gguf-py, so only eot 107 is written), no second chat template, no space prefix.
    .tokenizer = {.recipe = TokenizerRecipe::sentencepiece,
                  .extra_special_types = {"prefix", "suffix", "middle", "fsep", "eot"},
                  .extra_special_ids = {{"prefix", 67u}, {"suffix", 69u}, {"middle", 68u}, {"fsep", 70u}, {"eot", 107u}},
                  .extra_chat_template = false,
                  .add_space_prefix = false},
    .config_classes = kGemmaClasses_,
    .dropped = kLmHead,
};

extern const Family kGemma2Family{
    .gguf_name = "gemma2",
    .hf_classes = kGemma2Classes,
    .global_tensors = kGlobals,
    .layer_tensors = kGemma2Layer,
    .keys = gemma2_keys,
    .tokenizer = {.recipe = TokenizerRecipe::sentencepiece, .add_space_prefix = false},
    .config_classes = kGemma2Classes_,
    .dropped = kLmHead,
};

extern const Family kGemma3Family{
    .gguf_name = "gemma3",
    .hf_classes = kGemma3Classes,
    .global_tensors = kGemma3Globals,
    .layer_tensors = kGemma3Layer,
    .keys = gemma3_keys,
    // Gemma3Model.set_vocab: no space prefix after a SentencePiece vocabulary only.
    .tokenizer = {.recipe = TokenizerRecipe::sentencepiece_or_gpt2, .add_space_prefix = false},
    .config_classes = kGemma3Classes_,
    .embedding_rows = gemma3_embedding_rows,
};

}  // namespace ggufkit::convert_detail
