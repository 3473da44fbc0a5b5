// The byte layout of each tensor type's blocks: which bytes are multi-byte numbers (and so swap
// between little- and big-endian files), taken from ggml's block structs (src/format/blocks.h).
// fp16/fp32 scales, int16 sums, and the few byte arrays ggml fills and reads as 16- or 32-bit words
// (q5_0/q5_1 qh, iq1_m scales, iq3_xxs signs) swap; byte arrays stay as they are. A type is
// "known" when every field of its block is one of those. IQ2_XXS is not: ggml writes its grid
// indices as 32-bit words but reads them back byte by byte, so no byte order is defined for it.
// Removed type ids are not known either. File conversion is in endian.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ggufkit/error.h"
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

}  // namespace ggufkit
