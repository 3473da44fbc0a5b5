#include "ggufkit/endian.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "ggufkit/writer.h"

#include "format/encoder.h"

namespace ggufkit {
namespace {

// Block layouts from ggml-common.h (QK_K = 256). Offsets are bytes into the block.
constexpr SwapField kF16[] = {{0, 2, 1}};
constexpr SwapField kF32[] = {{0, 4, 1}};
constexpr SwapField kF64[] = {{0, 8, 1}};
constexpr SwapField kScaleFirst[] = {{0, 2, 1}};            // q1_0, q2_0, q4_0, q8_0, iq2_s, iq3_s, iq4_nl
constexpr SwapField kTwoScalesFirst[] = {{0, 2, 2}};        // q4_1 (d, m), q8_1 (d, s), q4_K, q5_K (d, dmin)
constexpr SwapField kQ5_0[] = {{0, 2, 1}, {2, 4, 1}};       // d; qh stored and read as a uint32
constexpr SwapField kQ5_1[] = {{0, 2, 2}, {4, 4, 1}};       // d, m; qh as a uint32
constexpr SwapField kQ2_K[] = {{80, 2, 2}};                 // scales[16], qs[64], then d, dmin
constexpr SwapField kQ3_K[] = {{108, 2, 1}};                // hmask[32], qs[64], scales[12], d
constexpr SwapField kQ6_K[] = {{208, 2, 1}};                // ql[128], qh[64], scales[16], d
constexpr SwapField kQ8_K[] = {{0, 4, 1}, {260, 2, 16}};    // float d, qs[256], int16 bsums[16]
constexpr SwapField kIQ2_XS[] = {{0, 2, 1}, {2, 2, 32}};    // d, uint16 qs[32], scales[8]
constexpr SwapField kIQ3_XXS[] = {{0, 2, 1}, {66, 4, 8}};   // d, grid bytes[64], 8 uint32 scales-and-signs
constexpr SwapField kIQ1_S[] = {{0, 2, 1}, {34, 2, 8}};     // d, qs[32], uint16 qh[8]
constexpr SwapField kIQ1_M[] = {{48, 2, 4}};                // qs[32], qh[16], scales read as 4 uint16
constexpr SwapField kIQ4_XS[] = {{0, 2, 2}};                // d, uint16 scales_h, scales_l[4], qs[128]
constexpr SwapField kTQ1_0[] = {{52, 2, 1}};                // qs[48], qh[4], d
constexpr SwapField kTQ2_0[] = {{64, 2, 1}};                // qs[64], d

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
    size_t left = data.size() / width;
    std::byte* p = data.data();
    while (left > 0) {  // count is 32-bit: go in slices
      const auto n = static_cast<uint32_t>(std::min<size_t>(left, uint32_t{1} << 30));
      format::byte_swap_run(p, width, n);
      p += uint64_t{n} * width;
      left -= n;
    }
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

Expected<void> copy_tensor_native(const GgufFile& file, const TensorInfo& tensor, uint64_t offset,
                                  std::span<std::byte> out) {
  return copy_tensor_bytes(tensor.type, file.tensor_data(tensor), offset, out,
                           file.byte_order() != native_byte_order());
}

ConvertEndianPlan plan_convert_endian(const GgufFile& in, ByteOrder to) {
  ConvertEndianPlan plan;
  plan.from = in.byte_order();
  plan.to = to;
  plan.tensor_bytes = in.tensor_bytes();
  for (const TensorInfo& t : in.tensors()) {
    if (!byte_order_known(t.type)) plan.unsupported.push_back(fmt::format("{} ({})", t.name, type_name(t.type)));
  }
  return plan;
}

Expected<void> convert_endian(const GgufFile& in, const std::filesystem::path& out, ByteOrder to,
                              const ConvertEndianOptions& options) {
  const ConvertEndianPlan plan = plan_convert_endian(in, to);
  if (plan.swaps() && !plan.unsupported.empty()) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, plan.unsupported.front(),
                      fmt::format("{} tensor(s) have a type whose byte layout is not known, first {}: cannot convert",
                                  plan.unsupported.size(), plan.unsupported.front()));
  }
  GgufBuilder builder;
  if (auto r = builder.set_version(in.version()); !r) return r;
  for (const KeyValue& kv : in.metadata()) {
    if (auto r = builder.set(kv.key, MetadataValue::copy_of(kv.value)); !r) return r;
  }
  const uint64_t total = plan.tensor_bytes;
  auto done = std::make_shared<uint64_t>(0);
  for (const TensorInfo& t : in.tensors()) {
    const auto stored = in.tensor_data(t);
    const TensorType type = t.type;
    const bool swap = plan.swaps();
    TensorProducer producer = [stored, type, swap, done, total, &options](uint64_t offset, std::span<std::byte> chunk) {
      if (auto r = copy_tensor_bytes(type, stored, offset, chunk, swap); !r) return r;
      *done += chunk.size();
      if (options.progress) options.progress(*done, total);
      return Expected<void>{};
    };
    if (auto r = builder.add_tensor(t.name, t.type, t.shape(), std::move(producer)); !r) return r;
  }
  WriteOptions write_options;
  // Files without tensors: keep the source's header padding choice (as GgufBuilder::from_file).
  if (in.tensors().empty()) {
    write_options.pad_header_without_tensors = in.header_padded();
  }
  write_options.byte_order = to;
  write_options.sync = options.sync;
  write_options.chunk_bytes = std::max<size_t>(options.chunk_bytes, 1);
  return builder.write_file(out, write_options);
}

}  // namespace ggufkit
