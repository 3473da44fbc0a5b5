// The architecture tables: what llama.cpp's loader (src/models/<arch>.cpp, load_arch_tensors)
// creates for each architecture, row for row. Optional rows are its TENSOR_NOT_REQUIRED tensors.
#include "architecture_table.h"

#include <algorithm>
#include <array>
#include <initializer_list>

// The tables name only the fields that differ from ArchSpec's defaults; GCC warns about the
// fields designated initializers leave to their default member initializers.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ggufkit::check {
namespace {

constexpr Presence kOptional = Presence::optional;
constexpr Presence kRequired = Presence::required;

std::vector<TensorSpec> join(std::initializer_list<std::vector<TensorSpec>> parts) {
  std::vector<TensorSpec> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// llama.cpp's create_tensor_qkv: a fused attn_qkv (optional) or separate Q, K and V, each with
// an optional bias. `qkv` is the fused width, q + k + v.
std::vector<TensorSpec> attention_qkv(std::string_view q, std::string_view k, std::string_view v, std::string_view qkv,
                                      Presence separate = kRequired) {
  constexpr std::string_view fused = "blk.{}.attn_qkv.weight";
  return {
      {fused, {"n_embd", qkv}, kOptional},
      {"blk.{}.attn_qkv.bias", {qkv}, kOptional, When::always, {}, fused},
      {"blk.{}.attn_q.weight", {"n_embd", q}, separate, When::always, fused},
      {"blk.{}.attn_k.weight", {"n_embd", k}, separate, When::always, fused},
      {"blk.{}.attn_v.weight", {"n_embd", v}, separate, When::always, fused},
      {"blk.{}.attn_q.bias", {q}, kOptional, When::always, fused},
      {"blk.{}.attn_k.bias", {k}, kOptional, When::always, fused},
      {"blk.{}.attn_v.bias", {v}, kOptional, When::always, fused},
  };
}

// token_embd, output_norm and an output head that falls back to token_embd (tied embeddings).
std::vector<TensorSpec> embedding_and_tied_output() {
  return {
      {"token_embd.weight", {"n_embd", "n_vocab"}},
      {"output_norm.weight", {"n_embd"}},
      {"output.weight", {"n_embd", "n_vocab"}, kOptional},
  };
}

std::vector<TensorSpec> gated_ffn() {
  return {
      {"blk.{}.ffn_norm.weight", {"n_embd"}},
      {"blk.{}.ffn_gate.weight", {"n_embd", "n_ff"}},
      {"blk.{}.ffn_down.weight", {"n_ff", "n_embd"}},
      {"blk.{}.ffn_up.weight", {"n_embd", "n_ff"}},
  };
}

std::vector<TensorSpec> expert_ffn(std::string_view ff) {
  return {
      {"blk.{}.ffn_norm.weight", {"n_embd"}},
      {"blk.{}.ffn_gate_inp.weight", {"n_embd", "n_expert"}},
      {"blk.{}.ffn_gate_exps.weight", {"n_embd", ff, "n_expert"}},
      {"blk.{}.ffn_down_exps.weight", {ff, "n_embd", "n_expert"}},
      {"blk.{}.ffn_up_exps.weight", {"n_embd", ff, "n_expert"}},
  };
}

// Mistral models are stored as "llama" too; Mixtral is llama with experts.
ArchSpec llama() {
  constexpr auto dense = When::dense_ffn;
  constexpr auto moe = When::moe_ffn;
  return {
      .name = "llama",
      .tensors = join({
          embedding_and_tied_output(),
          {
              {"rope_freqs.weight", {"n_rot/2"}, kOptional, When::not_long_rope},
              {"rope_factors_long.weight", {"n_rot/2"}, kOptional, When::long_rope},
              {"rope_factors_short.weight", {"n_rot/2"}, kOptional, When::long_rope},
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          attention_qkv("head_k*n_head", "n_embd_k_gqa", "n_embd_v_gqa", "head_k*n_head+n_embd_k_gqa+n_embd_v_gqa"),
          {
              {"blk.{}.attn_output.weight", {"head_k*n_head", "n_embd"}},
              {"blk.{}.attn_output.bias", {"n_embd"}, kOptional},
              {"blk.{}.ffn_norm.weight", {"n_embd"}},
              {"blk.{}.ffn_gate.weight", {"n_embd", "n_ff"}, kRequired, dense},
              {"blk.{}.ffn_down.weight", {"n_ff", "n_embd"}, kRequired, dense},
              {"blk.{}.ffn_up.weight", {"n_embd", "n_ff"}, kRequired, dense},
              {"blk.{}.ffn_gate.bias", {"n_ff"}, kOptional, dense},
              {"blk.{}.ffn_down.bias", {"n_embd"}, kOptional, dense},
              {"blk.{}.ffn_up.bias", {"n_ff"}, kOptional, dense},
              {"blk.{}.ffn_gate_inp.weight", {"n_embd", "n_expert"}, kRequired, moe},
              {"blk.{}.ffn_gate_exps.weight", {"n_embd", "n_ff", "n_expert"}, kOptional, moe},
              {"blk.{}.ffn_down_exps.weight", {"n_ff", "n_embd", "n_expert"}, kRequired, moe},
              {"blk.{}.ffn_up_exps.weight", {"n_embd", "n_ff", "n_expert"}, kRequired, moe},
          },
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
      .optional_keys = {"vocab_size"},
  };
}

ArchSpec qwen2() {
  return {
      .name = "qwen2",
      .tensors = join({
          embedding_and_tied_output(),
          {
              {"output.bias", {"n_vocab"}, kOptional},
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          attention_qkv("n_embd", "n_embd_v_gqa", "n_embd_v_gqa", "n_embd+2*n_embd_v_gqa"),
          {{"blk.{}.attn_output.weight", {"n_embd", "n_embd"}}},
          gated_ffn(),
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
  };
}

ArchSpec qwen3() {
  return {
      .name = "qwen3",
      .tensors = join({
          embedding_and_tied_output(),
          {
              {"cls.output.weight", {"n_embd", "n_cls_out"}, kOptional},  // reranker head
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          attention_qkv("head_k*n_head", "n_embd_v_gqa", "n_embd_v_gqa", "head_k*n_head+2*n_embd_v_gqa"),
          {
              {"blk.{}.attn_output.weight", {"head_k*n_head", "n_embd"}},
              {"blk.{}.attn_k_norm.weight", {"head_k"}},
              {"blk.{}.attn_q_norm.weight", {"head_k"}},
          },
          gated_ffn(),
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
  };
}

ArchSpec qwen2moe() {
  return {
      .name = "qwen2moe",
      .tensors = join({
          {
              {"token_embd.weight", {"n_embd", "n_vocab"}},
              {"output_norm.weight", {"n_embd"}},
              {"output.weight", {"n_embd", "n_vocab"}},  // required: no tied embeddings here
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          attention_qkv("n_embd", "n_embd_v_gqa", "n_embd_v_gqa", "n_embd+2*n_embd_v_gqa"),
          {{"blk.{}.attn_output.weight", {"n_embd", "n_embd"}}},
          expert_ffn("n_ff_exp"),
          {
              {"blk.{}.ffn_gate_inp_shexp.weight", {"n_embd"}},
              {"blk.{}.ffn_gate_shexp.weight", {"n_embd", "n_ff_shexp"}},
              {"blk.{}.ffn_down_shexp.weight", {"n_ff_shexp", "n_embd"}},
              {"blk.{}.ffn_up_shexp.weight", {"n_embd", "n_ff_shexp"}},
          },
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count"},
      .optional_keys = {"expert_feed_forward_length", "expert_shared_feed_forward_length"},
      .defaults = {{"n_ff_exp", "n_ff/n_expert_used"}, {"n_ff_shexp", "n_ff"}},
      .needs_experts = true,
  };
}

ArchSpec qwen3moe() {
  return {
      .name = "qwen3moe",
      .tensors = join({
          embedding_and_tied_output(),
          {{"blk.{}.attn_norm.weight", {"n_embd"}}},
          attention_qkv("head_k*n_head", "n_embd_v_gqa", "n_embd_v_gqa", "head_k*n_head+2*n_embd_v_gqa"),
          {
              {"blk.{}.attn_output.weight", {"head_k*n_head", "n_embd"}},
              {"blk.{}.attn_k_norm.weight", {"head_k"}},
              {"blk.{}.attn_q_norm.weight", {"head_k"}},
          },
          expert_ffn("n_ff_exp"),
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count"},
      .optional_keys = {"expert_feed_forward_length"},
      .defaults = {{"n_ff_exp", "n_ff/n_expert_used"}},
      .needs_experts = true,
  };
}

// Gemma 2 always ties the output head to token_embd: an output.weight is one tensor too many.
ArchSpec gemma2() {
  return {
      .name = "gemma2",
      .tensors = join({
          {
              {"token_embd.weight", {"n_embd", "n_vocab"}},
              {"output_norm.weight", {"n_embd"}},
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          attention_qkv("head_k*n_head", "n_embd_k_gqa", "n_embd_v_gqa", "head_k*n_head+n_embd_k_gqa+n_embd_v_gqa"),
          {
              {"blk.{}.attn_output.weight", {"head_k*n_head", "n_embd"}},
              {"blk.{}.post_attention_norm.weight", {"n_embd"}},
          },
          gated_ffn(),
          {{"blk.{}.post_ffw_norm.weight", {"n_embd"}}},
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
      .optional_keys = {"attention.sliding_window_pattern", "rope.freq_base_swa", "attention.sliding_window", "attn_logit_softcapping",
                        "final_logit_softcapping"},
  };
}

ArchSpec gemma3() {
  return {
      .name = "gemma3",
      .tensors = join({
          embedding_and_tied_output(),
          {
              // Embedding-model projections; their widths come from keys gemma3 does not read.
              {"dense_2.weight", {"n_embd", "?"}, kOptional},
              {"dense_3.weight", {"?", "n_embd"}, kOptional},
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          attention_qkv("head_k*n_head", "n_embd_k_gqa", "n_embd_v_gqa", "head_k*n_head+n_embd_k_gqa+n_embd_v_gqa"),
          {
              {"blk.{}.attn_output.weight", {"head_k*n_head", "n_embd"}},
              {"blk.{}.post_attention_norm.weight", {"n_embd"}},
              {"blk.{}.attn_k_norm.weight", {"head_k"}},
              {"blk.{}.attn_q_norm.weight", {"head_k"}},
          },
          gated_ffn(),
          {{"blk.{}.post_ffw_norm.weight", {"n_embd"}}},
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
      .optional_keys = {"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
                        "final_logit_softcapping"},
  };
}

// Phi-3 has no ffn_gate: ffn_up holds gate and up together, twice n_ff wide.
ArchSpec phi3() {
  return {
      .name = "phi3",
      .tensors = join({
          embedding_and_tied_output(),
          {
              {"rope_factors_long.weight", {"n_rot/2"}, kOptional},
              {"rope_factors_short.weight", {"n_rot/2"}, kOptional},
              {"blk.{}.attn_norm.weight", {"n_embd"}},
          },
          // llama.cpp's phi3 loader takes Q, K and V as optional, but its graph needs them when
          // there is no fused attn_qkv.
          attention_qkv("n_embd", "n_embd_v_gqa", "n_embd_v_gqa", "n_embd+2*n_embd_v_gqa", Presence::needed_by_graph),
          {
              {"blk.{}.attn_output.weight", {"n_embd", "n_embd"}},
              {"blk.{}.ffn_norm.weight", {"n_embd"}},
              {"blk.{}.ffn_down.weight", {"n_ff", "n_embd"}},
              {"blk.{}.ffn_up.weight", {"n_embd", "2*n_ff"}},
          },
      }),
      .required_keys = {"attention.layer_norm_rms_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
      .optional_keys = {"attention.sliding_window"},
  };
}

ArchSpec gpt2() {
  return {
      .name = "gpt2",
      .tensors = {
          {"token_embd.weight", {"n_embd", "n_vocab"}},
          {"position_embd.weight", {"n_embd", "n_ctx"}},
          {"output_norm.weight", {"n_embd"}},
          {"output_norm.bias", {"n_embd"}},
          {"output.weight", {"n_embd", "n_vocab"}, kOptional},
          {"blk.{}.attn_norm.weight", {"n_embd"}},
          {"blk.{}.attn_norm.bias", {"n_embd"}},
          {"blk.{}.attn_qkv.weight", {"n_embd", "n_embd+2*n_embd_v_gqa"}},
          {"blk.{}.attn_qkv.bias", {"n_embd+2*n_embd_v_gqa"}},
          {"blk.{}.attn_output.weight", {"n_embd", "n_embd"}},
          {"blk.{}.attn_output.bias", {"n_embd"}},
          {"blk.{}.ffn_norm.weight", {"n_embd"}},
          {"blk.{}.ffn_norm.bias", {"n_embd"}},
          {"blk.{}.ffn_down.weight", {"n_ff", "n_embd"}},
          {"blk.{}.ffn_down.bias", {"n_embd"}},
          {"blk.{}.ffn_up.weight", {"n_embd", "n_ff"}},
          {"blk.{}.ffn_up.bias", {"n_ff"}},
      },
      .required_keys = {"attention.layer_norm_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
  };
}

ArchSpec bert() {
  return {
      .name = "bert",
      .tensors = join({
          {
              {"token_embd.weight", {"n_embd", "n_vocab"}},
              {"token_types.weight", {"n_embd", "n_token_types"}, kOptional},
              {"position_embd.weight", {"n_embd", "n_ctx"}},
              {"cls.weight", {"n_embd", "n_embd"}, kOptional},
              {"cls.bias", {"n_embd"}, kOptional},
              {"cls.output.weight", {"n_embd", "n_cls_out"}, kOptional},
              {"cls.output.bias", {"n_cls_out"}, kOptional},
              {"token_embd_norm.weight", {"n_embd"}},
              {"token_embd_norm.bias", {"n_embd"}},
          },
          attention_qkv("n_embd", "n_embd_v_gqa", "n_embd_v_gqa", "n_embd+2*n_embd_v_gqa"),
          {
              {"blk.{}.attn_output.weight", {"n_embd", "n_embd"}},
              {"blk.{}.attn_output.bias", {"n_embd"}, kOptional},
              {"blk.{}.attn_output_norm.weight", {"n_embd"}},
              {"blk.{}.attn_output_norm.bias", {"n_embd"}},
              {"blk.{}.ffn_up.weight", {"n_embd", "n_ff"}},
              {"blk.{}.ffn_up.bias", {"n_ff"}, kOptional},
              {"blk.{}.ffn_down.weight", {"n_ff", "n_embd"}},
              {"blk.{}.ffn_down.bias", {"n_embd"}, kOptional},
              {"blk.{}.layer_output_norm.weight", {"n_embd"}},
              {"blk.{}.layer_output_norm.bias", {"n_embd"}},
          },
      }),
      .required_keys = {"attention.layer_norm_epsilon"},
      .shape_keys = {"attention.head_count", "feed_forward_length"},
      .needs_token_types = true,
  };
}

// llama.cpp's LLM_ARCH_NAMES (src/llama-arch.cpp).
constexpr std::string_view kLlamaCppArchitectures[] = {
    "clip", "llama", "llama4", "deci", "falcon", "grok", "gpt2", "gptj", "gptneox", "mpt", "baichuan", "starcoder",
    "refact", "bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2", "jina-bert-v3",
    "eurobert", "bloom", "stablelm", "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen3moe", "qwen3next",
    "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen4exp", "phi2", "phi3", "phimoe", "plamo", "plamo2", "plamo3",
    "codeshell", "orion", "internlm2", "minicpm", "minicpm3", "gemma", "gemma2", "gemma3", "gemma3n", "gemma4",
    "gemma4-assistant", "gemma-embedding", "starcoder2", "mamba", "mamba2", "jamba", "falcon-h1", "xverse",
    "command-r", "cohere2", "cohere2moe", "dbrx", "olmo", "olmo2", "olmoe", "muse-glimmer", "openelm", "arctic",
    "deepseek", "deepseek2", "deepseek2-ocr", "deepseek32", "deepseek4", "chatglm", "glm4", "glm4moe", "glm-dsa",
    "bitnet", "t5", "t5encoder", "jais", "jais2", "nemotron", "nemotron_h", "nemotron_h_moe", "exaone", "exaone4",
    "exaone-moe", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "granite", "granitemoe", "granitehybrid", "graniteswitch",
    "granite_swa", "chameleon", "wavtokenizer-dec", "plm", "bailingmoe", "bailingmoe2", "bailingmoe3", "dots1",
    "dots3note", "arcee", "afmoe", "laguna", "ernie4_5", "ernie4_5-moe", "hunyuan-moe", "hunyuan-dense", "hunyuan_vl",
    "hy_v3", "smollm3", "gpt-oss", "lfm2", "lfm2moe", "dream", "smallthinker", "llada", "llada-moe", "seed_oss",
    "grovemoe", "apertus", "minimax-01", "minimax-m2", "minimax-m3", "cogvlm", "rnd1", "pangu-embedded", "mistral3",
    "eagle3", "dflash", "mistral4", "paddleocr", "mimo2", "step35", "llama-embed", "maincoder", "kimi-linear",
    "kimi-k3", "talkie", "mellum", "nanbeige", "qwen3tts", "pockettts",
};

constexpr ScaleSpec kScaledWeights[] = {
    {"blk.{}.attn_q.weight", "1"},          {"blk.{}.attn_k.weight", "1"},
    {"blk.{}.attn_v.weight", "1"},          {"blk.{}.attn_output.weight", "1"},
    {"blk.{}.attn_qkv.weight", "1"},        {"blk.{}.attn_gate.weight", "1"},
    {"blk.{}.ffn_gate.weight", "1"},        {"blk.{}.ffn_down.weight", "1"},
    {"blk.{}.ffn_up.weight", "1"},          {"blk.{}.ffn_gate_shexp.weight", "1"},
    {"blk.{}.ffn_down_shexp.weight", "1"},  {"blk.{}.ffn_up_shexp.weight", "1"},
    {"blk.{}.ffn_gate_exps.weight", "n_expert"}, {"blk.{}.ffn_down_exps.weight", "n_expert"},
    {"blk.{}.ffn_up_exps.weight", "n_expert"},   {"output.weight", "1"},
};

const std::vector<ArchSpec>& specs() {
  static const std::vector<ArchSpec> all = {llama(),    qwen2(),  qwen3(), qwen2moe(), qwen3moe(),
                                            gemma2(),   gemma3(), phi3(),  gpt2(),     bert()};
  return all;
}

}  // namespace

std::span<const ArchSpec> all_arch_specs() { return specs(); }

std::span<const ScaleSpec> scaled_weights() { return kScaledWeights; }

const ArchSpec* find_arch_spec(std::string_view arch) {
  for (const ArchSpec& spec : specs()) {
    if (spec.name == arch) return &spec;
  }
  return nullptr;
}

bool llama_cpp_knows_architecture(std::string_view arch) {
  return std::find(std::begin(kLlamaCppArchitectures), std::end(kLlamaCppArchitectures), arch) !=
         std::end(kLlamaCppArchitectures);
}

}  // namespace ggufkit::check
