// gguf convert: a Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer files)
// to one GGUF file, as llama.cpp's convert_hf_to_gguf.py writes it, streamed tensor by tensor.
//
// The tensors are read from the mapped safetensors and converted a bounded run of rows at a time
// while the writer asks for them: memory holds a step of one tensor (a few MiB) plus fixed
// buffers, whatever the model's size. The output is written atomically.
//
// Supported architectures: one family per file in src/convert/families/ (llama/mistral, qwen2,
// qwen3, gemma, gemma2, gemma3, phi3, smollm3, granite, olmo2); convert_supported_architectures()
// lists the Hugging Face classes.
//
// What is reproduced of the Python converter, and what is not:
// - metadata keys, their types and their order (general.architecture, a key the family writes
//   while preparing tensors (Phi-3's rope attention factor), general.*, the family's keys as its
//   set_gguf_parameters writes them (a key written again replaced where it stands, as gguf-py
//   does), general.quantization_version, the tokenizer's keys).
// - config.json read as AutoConfig.to_dict() gives it to the Python converter: text_config merged
//   at the root, and the config class's defaults for keys config.json leaves out, for the
//   defaults that reach a key (each family's table).
// - general.name / basename / finetune / version / size_label / organization: gguf-py's
//   metadata.py heuristics on config.json's _name_or_path and the directory name, and the size
//   label from the parameter count; generation_config.json's sampling defaults as
//   general.sampling.* (top_k, top_p, temperature, repetition_penalty...). Not reproduced: the
//   model card (README.md front matter: license, tags, languages, base models, datasets...);
//   the title-casing of names is ASCII only.
// - tensor order: generated tensors first (rope_freqs, Phi-3's rope factors), then the shards in
//   file-name order, each shard's tensors in name order; a multimodal checkpoint's vision and
//   audio tensors are left out as TextModel.filter_tensors leaves them out.
// - types: 1-D tensors and *_norm.weight stay F32; other tensors get the output type; a quantized
//   output type falls back to F16 for tensors whose rows are not a multiple of its block size.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/quant.h"
#include "ggufkit/safetensors.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/value.h"

namespace ggufkit {

struct ConvertOptions : RunOptions {  // threads, cancel, progress, sync (threads.h)
  // The type of the weight matrices (the Python converter's --outtype, f16 by default): F32, F16,
  // BF16, Q8_0, or any type quantize() encodes without an importance matrix.
  TensorType out_type = TensorType::F16;
  // false: no tokenizer keys (tools that do not need a vocabulary). A model without them does not load in
  // llama.cpp.
  bool tokenizer = true;
  // convert_model only plans (and checks) the conversion; nothing is written.
  bool dry_run = false;
};

// How a tensor's values are changed on the way.
enum class ConvertTransform : uint8_t {
  none,
  permute_rope,   // rows regrouped per head as LlamaModel.permute (Q and K of llama)
  generated,      // computed by the converter (llama 3's rope_freqs, Phi-3's rope factors)
  norm_shift,     // 1 added to every value (Gemma's norms: HF computes x * (1 + w))
  stack_experts,  // one 3-D tensor of every expert's 2-D tensor (expert_sources), streamed row by row
  deinterleave,   // every `stride`-th value of each row from `offset` (gpt-oss's interleaved gate/up biases)
  mxfp4_repack,   // gpt-oss's MXFP4 blocks and scales as ggml MXFP4 blocks, bits moved, no value changed;
                  // rows every `stride`-th from `offset` (its interleaved gate/up rows)
  split_experts,  // a half of each expert's rows of a fused 3-D tensor (mlp.experts.gate_up_proj),
                  // from row `offset` of each expert
};
std::string_view convert_transform_name(ConvertTransform transform);

struct ConvertTensorPlan {
  std::string hf_name;                       // empty for generated tensors
  std::string gguf_name;
  std::vector<int64_t> shape;                // ggml order (ne0 first)
  const SafetensorsTensor* source = nullptr; // null for generated tensors
  TensorType type = TensorType::F32;         // in the output
  ConvertTransform transform = ConvertTransform::none;
  int64_t permute_heads = 0;                 // heads the rows are grouped in (permute_rope)
  std::vector<float> generated;              // the values of a generated tensor
  // stack_experts: each expert's checkpoint tensor, by expert (source is the first).
  std::vector<const SafetensorsTensor*> expert_sources;
  // mxfp4_repack: the scales of `source`'s blocks.
  const SafetensorsTensor* scales = nullptr;
  int64_t stride = 1, offset = 0;            // deinterleave, mxfp4_repack, split_experts
  uint64_t bytes = 0;                        // in the output, without padding
  std::string note;                          // why the type is not the output type, when it is not
};

struct ConvertPlan {
  std::string hf_architecture;   // config.json's architectures[0]
  std::string architecture;      // general.architecture
  // Every key in the order it is written.
  std::vector<std::pair<std::string, MetadataValue>> metadata;
  std::vector<ConvertTensorPlan> tensors;  // in write order
  std::vector<std::string> skipped;        // checkpoint tensors the converter drops (rotary_emb.inv_freq)
  uint64_t parameter_count = 0;
  uint64_t tensor_bytes = 0;               // padding included
  uint32_t file_type = 0;                  // general.file_type
  // The checkpoint; the plan's sources point into it.
  std::shared_ptr<const SafetensorsModel> model;
  // The checkpoint directory's files (all but .gguf files): the output never replaces one.
  std::vector<std::filesystem::path> inputs;
};

// The HF architectures the converter knows, in table order.
std::vector<std::string_view> convert_supported_architectures();
// Whether `type` can be an output type (see ConvertOptions::out_type).
bool convert_accepts_out_type(TensorType type);
// The llama_ftype general.file_type gets for an output type (ALL_F32 = 0, MOSTLY_F16 = 1, ...).
std::optional<uint32_t> convert_file_type(TensorType out_type);

// Reads config.json, the safetensors and (unless options.tokenizer is false) the tokenizer, and
// checks them against each other, then checks the metadata it would write as gguf check does: a
// float hyperparameter out of range, a RoPE base or factor that is not positive, a tokenizer error
// (a repeated piece, a NaN score) is refused (invalid_argument, naming config.json's field when the
// value came from there). Errors name the file, key or tensor concerned.
Expected<ConvertPlan> plan_convert(const std::filesystem::path& model_dir, const ConvertOptions& options = {});
// Writes a plan's GGUF to `output`, atomically.
Expected<void> write_converted(const ConvertPlan& plan, const std::filesystem::path& output,
                               const ConvertOptions& options = {});
// Both.
Expected<ConvertPlan> convert_model(const std::filesystem::path& model_dir, const std::filesystem::path& output,
                                    const ConvertOptions& options = {});

}  // namespace ggufkit
