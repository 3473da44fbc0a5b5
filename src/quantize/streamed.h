// Quantizing a model whose tensors are not in a file: convert's one pass to a preset
// (convert_quantized) plans the quantization on the metadata-only header of the file it would
// have written (GgufFile::parse with allow_metadata_only) and hands the tensors' bytes over as
// they are made.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>

#include "ggufkit/quantize.h"

namespace ggufkit::quantize_detail {

// Bytes of tensor `index` (its place in the header's tensors()) from `offset`.
using TensorBytes = std::function<Expected<void>(uint64_t offset, std::span<std::byte> out)>;
using IndexedTensorBytes = std::function<Expected<void>(size_t index, uint64_t offset, std::span<std::byte> out)>;

struct StreamedInput {
  const GgufFile* header = nullptr;  // metadata-only: what plan_quantize planned on
  // Each is called from one thread at a time, but the two may run at once: `copy` gives the tensors
  // copied as they are (the writer's thread), `fetch` whole steps of rows of the tensors quantized,
  // each tensor's rows in order (the conversion's thread).
  IndexedTensorBytes copy, fetch;
};

// quantize_model for a streamed input: the same bytes, written atomically to `output` (never one
// of `inputs`).
Expected<void> write_quantized_streamed(const StreamedInput& input, const QuantizePlan& plan,
                                        const std::filesystem::path& output, const QuantizeOptions& options,
                                        std::span<const std::filesystem::path> inputs);

}  // namespace ggufkit::quantize_detail
