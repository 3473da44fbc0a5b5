// ggml_n_dims for a tensor read from a file: its dimensions up to the last one larger than 1 (at
// least one). llama_model_quantize decides what it may quantize by it, and writes every tensor's
// info with that many dimensions (a {n, 1} tensor comes out as {n}).
#pragma once

#include <span>

#include "ggufkit/reader.h"

namespace ggufkit::quantize_detail {

inline int ggml_dims(const TensorInfo& t) {
  for (int d = kMaxDimensions - 1; d > 0; --d) {
    if (t.ne[static_cast<size_t>(d)] > 1) return d + 1;
  }
  return 1;
}

// The shape llama.cpp writes for the tensor.
inline std::span<const int64_t> written_shape(const TensorInfo& t) {
  return {t.ne.data(), static_cast<size_t>(ggml_dims(t))};
}

}  // namespace ggufkit::quantize_detail
