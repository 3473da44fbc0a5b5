// Tensors out to NumPy: one .npy file per tensor, streamed in bounded memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "ggufkit/sink.h"

namespace ggufkit {

enum class ExtractType {
  f32,  // dequantized to float32 (exactly ggml's to_float)
  f16,  // dequantized, then rounded to float16
  raw,  // the stored bytes: native dtype for plain types, uint8 rows of blocks otherwise (as gguf-py)
};

// The .npy dtype and shape (NumPy order: ggml's shape reversed) a tensor extracts to.
struct NpyLayout {
  std::string descr;            // "<f4", "<f2", "|u1", "<i4", ...
  std::vector<int64_t> shape;
};
Expected<NpyLayout> npy_layout(const TensorInfo& tensor, ExtractType type);

// A complete .npy v1.0 header (magic, version, length, dict, padding to 64 bytes).
std::string npy_header(const NpyLayout& layout);

// Writes the tensor as a .npy file at `out`, atomically (a crash leaves no half file under that
// name); `sync` also flushes it to the disk before the rename (the default of every writer).
// `output`: what the .npy may replace (sink.h); the model's file is never replaced. `cancel`, when
// set (from a signal handler), stops it until the rename: ErrorCode::cancelled, nothing written.
Expected<void> extract_npy(const GgufFile& file, const TensorInfo& tensor, ExtractType type,
                           const std::filesystem::path& out, bool sync = true, const OutputPolicy& output = {},
                           const std::atomic<bool>* cancel = nullptr);

}  // namespace ggufkit
