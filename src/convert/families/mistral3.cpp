// Mistral Small 3.x and Ministral 3 (conversion/mistral3.py's Mistral3Model, which hands everything
// to its LlamaModel): Mistral3ForConditionalGeneration (its text model; the vision tower and
// projector left out) and Ministral3ForCausalLM, general.architecture "mistral3". Llama's block
// and keys (q and k permuted); a ministral3 config (model_type, after text_config is merged) also
// writes its yarn log multiplier and attention temperature scale. Its tokenizer.json is tekken's.
#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

// Ministral3Model.set_gguf_parameters: LlamaModel's, then for ministral3 the two yarn extras.
Expected<void> keys(const FamilyInput& in, KeyWriter& w) {
  if (auto r = llama_model_keys(in, w); !r) return r;
  const HfConfig& c = in.config;
  const auto type = c.root.find("model_type");
  if (type == c.root.end() || *type != "ministral3") return {};
  const auto rope_type = c.rope_full.find("rope_type");
  if (rope_type == c.rope_full.end() || *rope_type != "yarn") {
    return config_error("rope_parameters.rope_type", "ministral3 needs yarn rope parameters");
  }
  for (auto [hf, gguf] : {std::pair{"mscale_all_dim", "rope.scaling.yarn_log_multiplier"},
                          {"llama_4_scaling_beta", "attention.temperature_scale"}}) {
    auto v = c.optional_number(c.rope_full, hf);
    if (!v) return std::move(v).error();
    if (!*v) return config_error(std::string("rope_parameters.") + hf, "missing (ministral3 needs it)");
    w.f32(gguf, **v);
  }
  return {};
}

constexpr std::string_view kClasses[] = {"Mistral3ForConditionalGeneration", "Ministral3ForCausalLM"};

}  // namespace

extern const Family kMistral3Family{
    .gguf_name = "mistral3",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = llama_block(),
    .keys = keys,
    .tokenizer = {.recipe = TokenizerRecipe::llama},
    .extra_tensors = llama3_rope_freqs,
};

}  // namespace ggufkit::convert_detail
