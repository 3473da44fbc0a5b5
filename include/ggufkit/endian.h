// Byte order of whole files: tensor bytes in the host's order, and conversion of a file from one
// byte order to the other. Which bytes of a block swap is the format's (block_layout.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ggufkit/block_layout.h"
#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "ggufkit/sink.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit {

// The tensor's bytes [offset, offset + out.size()) in the host's byte order, whatever the file's.
Expected<void> copy_tensor_native(const GgufFile& file, const TensorInfo& tensor, uint64_t offset,
                                  std::span<std::byte> out);

struct ConvertEndianOptions {
  bool sync = true;                         // fsync before the rename
  size_t chunk_bytes = size_t{4} << 20;     // bounds memory: tensor bytes pass through one buffer this size
  // Bytes of tensor data written so far, and in all (called after each chunk).
  std::function<void(uint64_t done, uint64_t total)> progress;
  // What the output may replace (sink.h); the input file is never replaced.
  OutputPolicy output{};
  // Set from another thread (a signal handler) to stop: ErrorCode::cancelled, nothing written.
  const std::atomic<bool>* cancel = nullptr;
};

struct ConvertEndianPlan {
  ByteOrder from = ByteOrder::little;
  ByteOrder to = ByteOrder::little;
  uint64_t tensor_bytes = 0;    // bytes of tensor data to copy (and swap)
  uint64_t file_bytes = 0;      // size of the output file
  std::vector<std::string> unsupported;  // "name (type)" of tensors whose layout is not known
  bool swaps() const { return from != to; }
};

// What convert_endian would do. The plan lists every unsupported tensor (convert_endian refuses
// the file when there is one and the byte order changes).
ConvertEndianPlan plan_convert_endian(const GgufFile& in, ByteOrder to);

// Writes `in` in byte order `to` to `out`, atomically (temporary file, renamed at the end):
// metadata values, header and tensor infos re-encoded, tensor data swapped per type, streamed in
// bounded memory. Same order as `in`: a plain copy. `out` must not be the file `in` maps.
Expected<void> convert_endian(const GgufFile& in, const std::filesystem::path& out, ByteOrder to,
                              const ConvertEndianOptions& options = {});

}  // namespace ggufkit
