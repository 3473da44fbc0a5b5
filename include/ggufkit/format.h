// The GGUF format's constants, declared once: the magic, the versions, the limits llama.cpp's
// gguf.cpp enforces, the byte orders, and the keys whose meaning is part of the file layout rather
// than of a model (alignment, split shards, the quantization version). Nothing here does I/O.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ggufkit {

inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kGgufVersionLatest = 3;
inline constexpr uint32_t kDefaultAlignment = 32;                // GGUF_DEFAULT_ALIGNMENT
inline constexpr uint64_t kMaxStringLength = uint64_t{1} << 30;  // llama.cpp's GGUF_MAX_STRING_LENGTH
inline constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30; // llama.cpp's GGUF_MAX_ARRAY_ELEMENTS
// Arrays of arrays: at most this many levels, the outermost array included. ggufkit's own limit
// (llama.cpp reads no nested arrays, gguf-py writes any depth): the reader refuses a deeper value
// and the writer refuses to build one, so nothing ggufkit writes is a file it then cannot read.
inline constexpr uint32_t kMaxArrayDepth = 8;
// The tensor and key/value counts the reader accepts (more is corruption, never a real file).
inline constexpr uint64_t kMaxHeaderCount = uint64_t{1} << 32;
inline constexpr size_t kMaxTensorNameBytes = 63;                // GGML_MAX_NAME - 1
inline constexpr uint32_t kMaxDimensions = 4;                    // GGML_MAX_DIMS
inline constexpr uint32_t kQuantizationVersionCurrent = 2;       // GGML_QNT_VERSION: today's block layouts
inline constexpr uint32_t kMaxShards = UINT16_MAX;               // split.count is a uint16

// The byte order a GGUF file was written in. Little-endian is the norm; big-endian files exist for
// s390x (gguf-py's gguf_convert_endian.py writes them).
enum class ByteOrder : uint8_t { little, big };

// The byte order of the machine running this code.
constexpr ByteOrder native_byte_order() {
  return std::endian::native == std::endian::big ? ByteOrder::big : ByteOrder::little;
}
constexpr std::string_view byte_order_name(ByteOrder order) { return order == ByteOrder::big ? "big" : "little"; }

namespace keys {
// Keys that change how the file itself is laid out or read, whatever the model.
inline constexpr std::string_view kAlignment = "general.alignment";                      // uint32, a power of two
inline constexpr std::string_view kQuantizationVersion = "general.quantization_version";  // uint32
inline constexpr std::string_view kSplitNo = "split.no";                                 // uint16, 0-based
inline constexpr std::string_view kSplitCount = "split.count";                           // uint16
inline constexpr std::string_view kSplitTensorsCount = "split.tensors.count";            // int32, all shards
}  // namespace keys

}  // namespace ggufkit
