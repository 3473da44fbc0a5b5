// Granite 3.x dense (conversion/granite.py's GraniteModel, a LlamaModel): llama's block and keys
// (q and k permuted), no key or value length (head_dim is dropped from the hparams first), and
// the four multipliers of its attention, embedding, residual and logits.
#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

// GraniteModel.set_gguf_parameters: LlamaModel's without head_dim, then each multiplier that is
// set and not zero.
Expected<void> keys(const FamilyInput& in, KeyWriter& w) {
  HfConfig without_head_dim = in.config;
  without_head_dim.root.erase("head_dim");
  without_head_dim.has_head_dim = false;
  without_head_dim.head_dim = in.config.n_embd / in.config.n_head;  // rope.dimension_count
  const FamilyInput llama_input{without_head_dim, in.dir, in.file_type};
  if (auto r = llama_model_keys(llama_input, w); !r) return r;
  for (auto [hf, gguf] : {std::pair{"attention_multiplier", "attention.scale"}, {"embedding_multiplier", "embedding_scale"},
                          {"residual_multiplier", "residual_scale"}, {"logits_scaling", "logit_scale"}}) {
    auto v = in.config.optional_number(hf);
    if (!v) return std::move(v).error();
    if (*v && **v != 0) w.f32(gguf, **v);
    w.from_config(gguf, hf);
  }
  return {};
}

constexpr std::string_view kClasses[] = {"GraniteForCausalLM"};
// GraniteConfig's defaults (AutoConfig.to_dict() has them): the four multipliers are always written.
constexpr ConfigDefault kDefaults[] = {
    {"embedding_multiplier", 1.0, false}, {"logits_scaling", 1.0, false},  {"residual_multiplier", 1.0, false},
    {"attention_multiplier", 1.0, false}, {"rms_norm_eps", 1e-6, false},   {"rope_theta", 10000.0, false},
    {"max_position_embeddings", 2048},    {"vocab_size", 32000},           {"hidden_size", 4096},
    {"intermediate_size", 11008},         {"num_hidden_layers", 32},       {"num_attention_heads", 32}};

constexpr ConfigClass kConfigClasses[] = {{.model_type = "granite", .defaults = kDefaults, .kv_heads_from_heads = true}};

}  // namespace

extern const Family kGraniteFamily{
    .gguf_name = "granite",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = llama_block(),
    .keys = keys,
    .tokenizer = {.recipe = TokenizerRecipe::llama},
    .config_classes = kConfigClasses,
};

}  // namespace ggufkit::convert_detail
