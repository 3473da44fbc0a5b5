// Tensor data conversion: dequantize any ggml type to float32 and quantize float32 to the types
// ggml can encode. Bit-exact with ggml: dequantize gives what ggml's to_float gives for the same
// bytes, quantize gives the bytes ggml_quantize_chunk writes for the same floats (and importance
// matrix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ggufkit/error.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/threads.h"

namespace ggufkit {

struct QuantCapabilities {
  bool dequantize = false;        // to float32
  bool quantize = false;          // from float32 (with or without an importance matrix)
  bool accepts_imatrix = false;   // quantize uses an importance matrix when given one
  bool requires_imatrix = false;  // quantize refuses to run without one
};

QuantCapabilities quant_capabilities(TensorType type);


// `src` holds a whole number of blocks of `type`; `dst` receives one float per element.
Expected<void> dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst,
                          Threads threads = {});

// Quantizes rows of `n_per_row` floats (src.size() / n_per_row rows) into dst, which must hold
// exactly that many rows of row_size(type, n_per_row) bytes. `imatrix`, when not empty, holds
// n_per_row importance weights, as ggml_quantize_chunk's `imatrix` argument.
Expected<void> quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst, int64_t n_per_row,
                        std::span<const float> imatrix = {}, Threads threads = {});

}  // namespace ggufkit
