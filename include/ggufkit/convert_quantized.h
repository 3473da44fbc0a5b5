// gguf convert --outtype PRESET: a Hugging Face checkpoint converted and quantized in one pass
// (convert.h's converter feeding quantize.h's pipeline). Its own header, so that convert.h stays
// free of quantize.h's includes.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ggufkit/convert.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"

namespace ggufkit {

// One pass to a quantization preset (`gguf convert --outtype Q4_K_M`): the file `gguf convert
// --outtype INTERMEDIATE` then `gguf quantize` with the same QuantizeOptions would give, byte for
// byte, written once: the converted tensors go straight into quantize's streaming pipeline, in
// the intermediate type's exact values; nothing but the output touches the disk, and memory holds
// a few steps of rows as convert and quantize do.
struct ConvertQuantizedPlan {
  ConvertPlan convert;            // the conversion to the intermediate type
  TensorType intermediate = TensorType::F16;
  // The intermediate file's header (metadata-only: no tensor data), which `quantize` plans on.
  std::unique_ptr<const std::vector<std::byte>> header_bytes;
  std::unique_ptr<const GgufFile> header;
  QuantizePlan quantize;          // the output's tensors, in write order, pointing into `header`
};
// The converter's own output type `text` names, as --outtype reads it: a type spelled as ggml spells
// it (lower case: q8_0, q4_K, iq4_xs) that convert_accepts_out_type, or f32/f16/bf16 in any case.
// Anything else (Q8_0, Q4_K_M, 15) is not one, and may be a quantization preset
// (set_quantize_target): upper case is llama-quantize's spelling of its presets.
std::optional<TensorType> convert_own_out_type(std::string_view text);
// The intermediate type a user converts to before llama-quantize: the checkpoint's own float type,
// that of its first weight matrix in the converter's order (bf16 for a BF16 checkpoint, f32 for an
// F32 one, f16 for F16 and anything else), so that no value is rounded twice.
TensorType convert_intermediate_type(const ConvertPlan& plan);
// options.out_type is ignored: the intermediate is `intermediate`, or convert_intermediate_type.
Expected<ConvertQuantizedPlan> plan_convert_quantized(const std::filesystem::path& model_dir, const ConvertOptions& options,
                                                      const QuantizeOptions& quantize,
                                                      std::optional<TensorType> intermediate = std::nullopt);
// Writes it to `output`, atomically. `quantize` must be the options the plan was made with
// (its importance matrix still alive); threads, cancel, sync, output and progress come from `options`.
Expected<void> write_convert_quantized(const ConvertQuantizedPlan& plan, const std::filesystem::path& output,
                                       const ConvertOptions& options, const QuantizeOptions& quantize);

}  // namespace ggufkit
