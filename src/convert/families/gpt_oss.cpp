// gpt-oss (conversion/gpt_oss.py's GptOssModel, a TextModel): GptOssForCausalLM, "gpt-oss".
// - The experts stay MXFP4: each layer's *_blocks and *_scales become ggml MXFP4 tensors, bits
//   moved and no value changed, written before every other tensor as the Python converter writes
//   them (generate_extra_tensors); the gate and up rows, interleaved in gate_up_proj, are split
//   even/odd, and so are their biases. The file type is then MOSTLY_MXFP4_MOE.
// - Attention sinks, biases everywhere, a router with a bias, a norm after attention; NEOX rope.
// - TextModel's keys, then the sliding window and the experts' feed-forward size.
// A checkpoint whose experts are not MXFP4 (dequantized to BF16) is not supported yet.
#include <fmt/format.h>

#include "convert/family.h"

namespace ggufkit::convert_detail {
namespace {

constexpr TensorRule kLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::embd, Dim::none},
    {"mlp.experts.down_proj_bias", "ffn_down_exps.bias", Dim::experts, Dim::embd},
    {"mlp.experts.gate_up_proj_bias", "ffn_gate_exps.bias", Dim::experts, Dim::ff2, Presence::required, ConvertTransform::deinterleave},
    {"mlp.experts.gate_up_proj_bias", "ffn_up_exps.bias", Dim::experts, Dim::ff2, Presence::required, ConvertTransform::deinterleave,
     false, 1},
    {"mlp.router.bias", "ffn_gate_inp.bias", Dim::experts, Dim::none},
    {"mlp.router.weight", "ffn_gate_inp.weight", Dim::experts, Dim::embd},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", Dim::embd, Dim::none},
    {"self_attn.k_proj.bias", "attn_k.bias", Dim::kv_out, Dim::none},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv_out, Dim::embd},
    {"self_attn.o_proj.bias", "attn_output.bias", Dim::embd, Dim::none},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::embd, Dim::q_out},
    {"self_attn.q_proj.bias", "attn_q.bias", Dim::q_out, Dim::none},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q_out, Dim::embd},
    {"self_attn.sinks", "attn_sinks.weight", Dim::heads, Dim::none},
    {"self_attn.v_proj.bias", "attn_v.bias", Dim::kv_out, Dim::none},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv_out, Dim::embd},
};

bool is_mxfp4_part(std::string_view name) { return name.ends_with("_blocks") || name.ends_with("_scales"); }

// One MXFP4 tensor of `rows` rows per expert (every `stride`-th checkpoint row from `offset`).
Expected<ConvertTensorPlan> mxfp4_tensor(const HfConfig& c, int64_t layer, std::string_view gguf, const SafetensorsTensor& blocks,
                                         const SafetensorsTensor& scales, int64_t rows, int64_t stride, int64_t offset) {
  const int64_t source_rows = rows * stride;
  const int64_t cols = gguf == "ffn_down_exps.weight" ? c.n_ff : c.n_embd;
  const std::vector<int64_t> want_blocks{c.n_expert, source_rows, cols / 32, 16}, want_scales{c.n_expert, source_rows, cols / 32};
  for (auto [t, want] : {std::pair{&blocks, &want_blocks}, {&scales, &want_scales}}) {
    if (t->dtype != SafetensorsDtype::U8) {
      return tensor_error(t->name, fmt::format("dtype {}: MXFP4 blocks and scales are U8", safetensors_dtype_name(t->dtype)));
    }
    if (t->shape != *want || cols % 32 != 0) {
      return tensor_error(t->name, fmt::format("shape [{}] does not match config.json's [{}]", fmt::join(t->shape, ", "),
                                               fmt::join(*want, ", ")));
    }
  }
  ConvertTensorPlan t;
  t.hf_name = blocks.name;
  t.gguf_name = fmt::format("blk.{}.{}", layer, gguf);
  t.shape = {cols, rows, c.n_expert};
  t.transform = ConvertTransform::mxfp4_repack;
  t.source = &blocks;
  t.scales = &scales;
  t.stride = stride;
  t.offset = offset;
  return t;
}

// GptOssModel.generate_extra_tensors: in the checkpoint's order, each *_scales after its *_blocks
// makes the layer's down tensor, or its gate and up tensors.
Expected<void> mxfp4_experts(const FamilyInput& in, KeyWriter&, std::vector<ConvertTensorPlan>& out) {
  const HfConfig& c = in.config;
  const SafetensorsTensor* blocks = nullptr;
  std::vector<int64_t> layers_done;
  for (const SafetensorsTensor* t : in.tensors) {
    if (t->name.ends_with("mlp.experts.down_proj_blocks") || t->name.ends_with("mlp.experts.gate_up_proj_blocks")) {
      blocks = t;
      continue;
    }
    const bool down = t->name.ends_with("mlp.experts.down_proj_scales");
    if (!down && !t->name.ends_with("mlp.experts.gate_up_proj_scales")) continue;
    const auto split = split_layer_name(t->name);
    const std::string blocks_name = t->name.substr(0, t->name.size() - std::string_view("_scales").size()) + "_blocks";
    if (!split || split->first >= c.block_count) return tensor_error(t->name, "not a tensor of a layer config.json has");
    const int64_t layer = split->first;
    if (blocks == nullptr || blocks->name != blocks_name) return tensor_error(blocks_name, "missing, or not right before its scales");
    struct Part {
      std::string_view gguf;
      int64_t rows, stride, offset;  // rows per expert, taken every stride-th from offset
    };
    const Part down_part[] = {{"ffn_down_exps.weight", c.n_embd, 1, 0}};
    const Part gate_up_parts[] = {{"ffn_gate_exps.weight", c.n_ff, 2, 0}, {"ffn_up_exps.weight", c.n_ff, 2, 1}};
    for (const Part& part : down ? std::span<const Part>(down_part) : std::span<const Part>(gate_up_parts)) {
      auto tensor = mxfp4_tensor(c, layer, part.gguf, *blocks, *t, part.rows, part.stride, part.offset);
      if (!tensor) return std::move(tensor).error();
      out.push_back(std::move(*tensor));
    }
    layers_done.push_back(layer);
    blocks = nullptr;
  }
  // Every layer's experts: down, and gate with up.
  for (int64_t layer = 0; layer < c.block_count; ++layer) {
    if (std::count(layers_done.begin(), layers_done.end(), layer) != 2) {
      return tensor_error(fmt::format("model.layers.{}.mlp.experts", layer),
                          "the MXFP4 experts (down_proj_blocks/scales and gate_up_proj_blocks/scales) are missing; "
                          "a checkpoint whose experts are not MXFP4 is not supported yet");
    }
  }
  return {};
}

// GptOssModel.set_gguf_parameters: TextModel's, the sliding window, the experts' size.
Expected<void> keys(const FamilyInput& in, KeyWriter& w) {
  if (auto r = text_model_keys(in, w); !r) return r;
  auto window = in.config.required_int("sliding_window");
  if (!window) return std::move(window).error();
  w.u32("attention.sliding_window", *window);
  w.u32("expert_feed_forward_length", in.config.n_ff);
  return {};
}

constexpr std::string_view kClasses[] = {"GptOssForCausalLM"};

}  // namespace

extern const Family kGptOssFamily{
    .gguf_name = "gpt-oss",
    .hf_classes = kClasses,
    .global_tensors = kDecoderGlobals,
    .layer_tensors = kLayer,
    .keys = keys,
    .tokenizer = {.recipe = TokenizerRecipe::gpt2},
    .extra_tensors = mxfp4_experts,
    .consumed = is_mxfp4_part,
};

}  // namespace ggufkit::convert_detail
