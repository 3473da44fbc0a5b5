// Byte order: which bytes of each tensor type's blocks are multi-byte numbers (and so swap between
// little- and big-endian files), and conversion of whole files from one byte order to the other.
//
// A block's layout comes from ggml's block structs (ggml-common.h) and from how ggml's reference
// code stores each field: fp16/fp32 scales, int16 sums, and the few byte arrays ggml fills and reads
// as 16- or 32-bit words (q5_0/q5_1 qh, iq1_m scales, iq3_xxs signs) swap; byte arrays stay as they
// are. A type is "known" when every field of its block is one of those. IQ2_XXS is not: ggml
// writes its grid indices as 32-bit words but reads them back byte by byte, so no byte order is
// defined for it. Removed type ids are not known either.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit {

// `count` consecutive numbers of `width` bytes, starting `offset` bytes into a block.
struct SwapField {
  uint32_t offset;
  uint32_t width;
  uint32_t count;
};

struct BlockSwapLayout {
  uint32_t block_bytes;
  std::span<const SwapField> fields;  // empty for types made of single bytes (i8, mxfp4, nvfp4)
};

// nullopt when the type's byte layout is not known (iq2_xxs, removed or unknown ids).
std::optional<BlockSwapLayout> block_swap_layout(TensorType type);
inline bool byte_order_known(TensorType type) { return block_swap_layout(type).has_value(); }

// Swaps every multi-byte field of the whole blocks in `data`, in place: little-endian becomes
// big-endian and back. Errors: an unknown layout (invalid_argument), a size that is not a whole
// number of blocks (invalid_argument).
Expected<void> swap_tensor_data(TensorType type, std::span<std::byte> data);

// Copies bytes [offset, offset + out.size()) of a tensor whose bytes are `stored` (whole tensor),
// swapping them when `swap` is set. Any offset and length: blocks cut by the range are swapped
// through a copy of the block.
Expected<void> copy_tensor_bytes(TensorType type, std::span<const std::byte> stored, uint64_t offset,
                                 std::span<std::byte> out, bool swap);

// The tensor's bytes [offset, offset + out.size()) in the host's byte order, whatever the file's.
Expected<void> copy_tensor_native(const GgufFile& file, const TensorInfo& tensor, uint64_t offset,
                                  std::span<std::byte> out);

struct ConvertEndianOptions {
  bool sync = true;                         // fsync before the rename
  size_t chunk_bytes = size_t{4} << 20;     // bounds memory: tensor bytes pass through one buffer this size
  // Bytes of tensor data written so far, and in all (called after each chunk).
  std::function<void(uint64_t done, uint64_t total)> progress;
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
