// Which bytes of each tensor type's blocks are multi-byte numbers, and swapping them (block_layout.h).
#include "ggufkit/block_layout.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "format/blocks.h"
#include "format/encoder.h"

namespace ggufkit {
namespace {

// Block layouts, from the block structs (format/blocks.h): the offset of each multi-byte field,
// its width and how many there are. Offsets are bytes into the block.
using namespace format;  // the Block* structs
constexpr SwapField kF16[] = {{0, 2, 1}};
constexpr SwapField kF32[] = {{0, 4, 1}};
constexpr SwapField kF64[] = {{0, 8, 1}};
// A uint16 scale first: q1_0, q2_0, q4_0, q8_0, iq2_s, iq3_s, iq4_nl.
constexpr SwapField kScaleFirst[] = {{offsetof(BlockQ4_0, d), 2, 1}};
// Two uint16 first: q4_1 (d, m), q8_1 (d, s), q4_K, q5_K (d, dmin).
constexpr SwapField kTwoScalesFirst[] = {{offsetof(BlockQ4_1, d), 2, 2}};
constexpr SwapField kQ5_0[] = {{offsetof(BlockQ5_0, d), 2, 1}, {offsetof(BlockQ5_0, qh), 4, 1}};
constexpr SwapField kQ5_1[] = {{offsetof(BlockQ5_1, d), 2, 2}, {offsetof(BlockQ5_1, qh), 4, 1}};
constexpr SwapField kQ2_K[] = {{offsetof(BlockQ2K, d), 2, 2}};
constexpr SwapField kQ3_K[] = {{offsetof(BlockQ3K, d), 2, 1}};
constexpr SwapField kQ6_K[] = {{offsetof(BlockQ6K, d), 2, 1}};
constexpr SwapField kQ8_K[] = {{offsetof(BlockQ8K, d), 4, 1}, {offsetof(BlockQ8K, bsums), 2, 16}};
constexpr SwapField kIQ2_XS[] = {{offsetof(BlockIQ2XS, d), 2, 1}, {offsetof(BlockIQ2XS, qs), 2, 32}};
constexpr SwapField kIQ3_XXS[] = {{offsetof(BlockIQ3XXS, d), 2, 1}, {offsetof(BlockIQ3XXS, scales_and_signs), 4, 8}};
constexpr SwapField kIQ1_S[] = {{offsetof(BlockIQ1S, d), 2, 1}, {offsetof(BlockIQ1S, qh), 2, 8}};
constexpr SwapField kIQ1_M[] = {{offsetof(BlockIQ1M, scales), 2, 4}};
constexpr SwapField kIQ4_XS[] = {{offsetof(BlockIQ4XS, d), 2, 2}};  // d, scales_h
constexpr SwapField kTQ1_0[] = {{offsetof(BlockTQ1_0, d), 2, 1}};
constexpr SwapField kTQ2_0[] = {{offsetof(BlockTQ2_0, d), 2, 1}};
static_assert(offsetof(BlockQ1_0, d) == 0 && offsetof(BlockQ2_0, d) == 0 && offsetof(BlockQ8_0, d) == 0 &&
              offsetof(BlockIQ2S, d) == 0 && offsetof(BlockIQ3S, d) == 0 && offsetof(BlockIQ4NL, d) == 0);
static_assert(offsetof(BlockQ8_1, s) == 2 && offsetof(BlockQ4K, dmin) == 2 && offsetof(BlockQ5K, dmin) == 2 &&
              offsetof(BlockQ2K, dmin) == offsetof(BlockQ2K, d) + 2 && offsetof(BlockIQ4XS, scales_h) == 2);

std::span<const SwapField> fields_of(TensorType type, bool& known) {
  known = true;
  switch (type) {
    case TensorType::F32: case TensorType::I32: return kF32;
    case TensorType::F16: case TensorType::BF16: case TensorType::I16: return kF16;
    case TensorType::F64: case TensorType::I64: return kF64;
    case TensorType::I8: case TensorType::MXFP4: case TensorType::NVFP4: return {};
    case TensorType::Q1_0: case TensorType::Q2_0: case TensorType::Q4_0: case TensorType::Q8_0:
    case TensorType::IQ2_S: case TensorType::IQ3_S: case TensorType::IQ4_NL:
      return kScaleFirst;
    case TensorType::Q4_1: case TensorType::Q8_1: case TensorType::Q4_K: case TensorType::Q5_K:
      return kTwoScalesFirst;
    case TensorType::Q5_0: return kQ5_0;
    case TensorType::Q5_1: return kQ5_1;
    case TensorType::Q2_K: return kQ2_K;
    case TensorType::Q3_K: return kQ3_K;
    case TensorType::Q6_K: return kQ6_K;
    case TensorType::Q8_K: return kQ8_K;
    case TensorType::IQ2_XS: return kIQ2_XS;
    case TensorType::IQ3_XXS: return kIQ3_XXS;
    case TensorType::IQ1_S: return kIQ1_S;
    case TensorType::IQ1_M: return kIQ1_M;
    case TensorType::IQ4_XS: return kIQ4_XS;
    case TensorType::TQ1_0: return kTQ1_0;
    case TensorType::TQ2_0: return kTQ2_0;
    case TensorType::IQ2_XXS: break;  // grid indices written as uint32 words, read back as bytes
  }
  known = false;
  return {};
}

// Whole blocks, layout known.
void swap_blocks(const BlockSwapLayout& layout, std::span<std::byte> data) {
  if (layout.fields.empty()) return;
  // Element types (one field filling the block): one tight loop over all elements.
  if (layout.fields.size() == 1 && layout.fields[0].offset == 0 &&
      layout.fields[0].width * layout.fields[0].count == layout.block_bytes) {
    const uint32_t width = layout.fields[0].width;
    format::byte_swap_run(data.data(), width, data.size() / width);
    return;
  }
  const uint64_t blocks = data.size() / layout.block_bytes;
  std::byte* block = data.data();
  for (uint64_t b = 0; b < blocks; ++b, block += layout.block_bytes) {
    for (const SwapField& f : layout.fields) format::byte_swap_run(block + f.offset, f.width, f.count);
  }
}

Error unknown_layout(TensorType type) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                    fmt::format("the byte layout of {} blocks is not known: cannot change their byte order",
                                type_name(type)));
}

}  // namespace

std::optional<BlockSwapLayout> block_swap_layout(TensorType type) {
  const TypeTraits* traits = find_type_traits(static_cast<uint32_t>(type));
  if (traits == nullptr || traits->status != TypeStatus::supported) return std::nullopt;
  bool known = false;
  const auto fields = fields_of(type, known);
  if (!known) return std::nullopt;
  return BlockSwapLayout{traits->block_bytes, fields};
}

Expected<void> swap_tensor_data(TensorType type, std::span<std::byte> data) {
  const auto layout = block_swap_layout(type);
  if (!layout) return unknown_layout(type);
  if (data.size() % layout->block_bytes != 0) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("{} bytes are not a whole number of {}-byte {} blocks", data.size(),
                                  layout->block_bytes, type_name(type)));
  }
  swap_blocks(*layout, data);
  return {};
}

Expected<void> copy_tensor_bytes(TensorType type, std::span<const std::byte> stored, uint64_t offset,
                                 std::span<std::byte> out, bool swap) {
  if (offset > stored.size() || out.size() > stored.size() - offset) {
    return make_error(ErrorCode::invalid_argument, offset, {},
                      fmt::format("bytes [{}, +{}) are outside the tensor's {} bytes", offset, out.size(), stored.size()));
  }
  if (out.empty()) return {};  // (an empty span may have no data pointer: memcpy must not see it)
  std::memcpy(out.data(), stored.data() + offset, out.size());
  if (!swap) return {};
  const auto layout = block_swap_layout(type);
  if (!layout) return unknown_layout(type);
  const uint64_t bb = layout->block_bytes;
  const uint64_t end = offset + out.size();
  const uint64_t first_whole = (offset + bb - 1) / bb * bb;
  const uint64_t last_whole = end / bb * bb;
  // A block cut by the range: swap a copy of the whole block, keep the part inside the range.
  std::vector<std::byte> block;
  const auto partial = [&](uint64_t block_start) {
    block.assign(stored.begin() + static_cast<ptrdiff_t>(block_start),
                 stored.begin() + static_cast<ptrdiff_t>(block_start + bb));
    swap_blocks(*layout, block);
    const uint64_t from = std::max(block_start, offset), to = std::min(block_start + bb, end);
    std::memcpy(out.data() + (from - offset), block.data() + (from - block_start), static_cast<size_t>(to - from));
  };
  if (first_whole > last_whole) {  // inside one block
    partial(offset / bb * bb);
    return {};
  }
  if (offset < first_whole) partial(first_whole - bb);
  swap_blocks(*layout, out.subspan(static_cast<size_t>(first_whole - offset), static_cast<size_t>(last_whole - first_whole)));
  if (last_whole < end) partial(last_whole);
  return {};
}

}  // namespace ggufkit
