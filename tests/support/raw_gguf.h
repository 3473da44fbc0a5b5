// A builder of raw GGUF bytes for test fixtures.
//
// It shares nothing with ggufkit's writer (it includes no ggufkit header) so that a bug in the
// writer cannot hide the same bug in the reader, and so that it can write what the writer never
// would: any magic, version, count, length, type id, shape or offset. Every multi-byte number is
// written little-endian byte by byte, whatever the host.
//
// Fixtures record the offsets they want to assert on with size() before appending a record:
//
//   RawGguf g;
//   g.header(3, /*n_tensors=*/0, /*n_kv=*/2);
//   g.kv_u32("a", 1);
//   const uint64_t second = g.size();
//   g.kv_u32("a", 2);               // duplicate key: the reader should point at `second`
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ggufkit::test {

// GGUF value type ids, as plain numbers so that fixtures can also write ids that do not exist.
namespace gguf_type {
inline constexpr uint32_t kUInt8 = 0;
inline constexpr uint32_t kInt8 = 1;
inline constexpr uint32_t kUInt16 = 2;
inline constexpr uint32_t kInt16 = 3;
inline constexpr uint32_t kUInt32 = 4;
inline constexpr uint32_t kInt32 = 5;
inline constexpr uint32_t kFloat32 = 6;
inline constexpr uint32_t kBool = 7;
inline constexpr uint32_t kString = 8;
inline constexpr uint32_t kArray = 9;
inline constexpr uint32_t kUInt64 = 10;
inline constexpr uint32_t kInt64 = 11;
inline constexpr uint32_t kFloat64 = 12;
}  // namespace gguf_type

// ggml tensor type ids used by fixtures (plain numbers, for the same reason).
namespace ggml_type {
inline constexpr int32_t kF32 = 0;
inline constexpr int32_t kF16 = 1;
inline constexpr int32_t kQ4_0 = 2;
inline constexpr int32_t kQ8_0 = 8;
inline constexpr int32_t kQ4_K = 12;
inline constexpr int32_t kI8 = 24;
inline constexpr int32_t kF64 = 28;
}  // namespace ggml_type

class RawGguf {
 public:
  // ---- Primitives ----

  // Current length: the offset the next byte will have.
  uint64_t size() const { return bytes_.size(); }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  std::span<const std::byte> span() const { return bytes_; }

  RawGguf& u8(uint8_t v) { return le(v, 1); }
  RawGguf& i8(int8_t v) { return le(static_cast<uint8_t>(v), 1); }
  RawGguf& u16(uint16_t v) { return le(v, 2); }
  RawGguf& i16(int16_t v) { return le(static_cast<uint16_t>(v), 2); }
  RawGguf& u32(uint32_t v) { return le(v, 4); }
  RawGguf& i32(int32_t v) { return le(static_cast<uint32_t>(v), 4); }
  RawGguf& u64(uint64_t v) { return le(v, 8); }
  RawGguf& i64(int64_t v) { return le(static_cast<uint64_t>(v), 8); }
  RawGguf& f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return u32(bits);
  }
  RawGguf& f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return u64(bits);
  }
  // Raw bytes, no length prefix.
  RawGguf& raw(std::string_view s) {
    for (char c : s) bytes_.push_back(static_cast<std::byte>(static_cast<unsigned char>(c)));
    return *this;
  }
  RawGguf& raw(std::span<const std::byte> b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  RawGguf& fill(uint64_t n, uint8_t value) {
    bytes_.insert(bytes_.end(), static_cast<size_t>(n), std::byte{value});
    return *this;
  }
  RawGguf& zeros(uint64_t n) { return fill(n, 0); }
  // Pads with `value` up to the next multiple of `alignment` (a no-op when already aligned).
  RawGguf& pad_to(uint64_t alignment, uint8_t value = 0) {
    const uint64_t rem = size() % alignment;
    return rem == 0 ? *this : fill(alignment - rem, value);
  }
  // Drops the last n bytes: the easiest way to cut a record in the middle.
  RawGguf& drop(uint64_t n) {
    bytes_.resize(static_cast<size_t>(n > size() ? 0 : size() - n));
    return *this;
  }
  // Overwrites already written bytes, for fixtures that patch a field after the fact.
  RawGguf& patch_u32(uint64_t at, uint32_t v) { return patch(at, v, 4); }
  RawGguf& patch_u64(uint64_t at, uint64_t v) { return patch(at, v, 8); }

  // ---- GGUF strings ----

  // A well-formed string: u64 length, then the bytes.
  RawGguf& str(std::string_view s) { return u64(s.size()).raw(s); }
  // A string whose length field says `claimed_length` whatever follows.
  RawGguf& str_claiming(uint64_t claimed_length, std::string_view actual_bytes) {
    return u64(claimed_length).raw(actual_bytes);
  }

  // ---- Header ----

  RawGguf& magic(std::string_view m = "GGUF") { return raw(m); }
  // Magic, version, tensor count, key/value count (both signed 64-bit, as GGUF stores them).
  RawGguf& header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    return magic().u32(version).i64(n_tensors).i64(n_kv);
  }

  // ---- Metadata records ----

  // Key and type id; the caller appends the value.
  RawGguf& kv_header(std::string_view key, uint32_t type_id) { return str(key).u32(type_id); }
  RawGguf& kv_u8(std::string_view key, uint8_t v) { return kv_header(key, gguf_type::kUInt8).u8(v); }
  RawGguf& kv_i8(std::string_view key, int8_t v) { return kv_header(key, gguf_type::kInt8).i8(v); }
  RawGguf& kv_u16(std::string_view key, uint16_t v) { return kv_header(key, gguf_type::kUInt16).u16(v); }
  RawGguf& kv_i16(std::string_view key, int16_t v) { return kv_header(key, gguf_type::kInt16).i16(v); }
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return kv_header(key, gguf_type::kUInt32).u32(v); }
  RawGguf& kv_i32(std::string_view key, int32_t v) { return kv_header(key, gguf_type::kInt32).i32(v); }
  RawGguf& kv_f32(std::string_view key, float v) { return kv_header(key, gguf_type::kFloat32).f32(v); }
  // A bool stored as any byte, 0 and 1 or not.
  RawGguf& kv_bool(std::string_view key, uint8_t byte) { return kv_header(key, gguf_type::kBool).u8(byte); }
  RawGguf& kv_string(std::string_view key, std::string_view v) { return kv_header(key, gguf_type::kString).str(v); }
  RawGguf& kv_u64(std::string_view key, uint64_t v) { return kv_header(key, gguf_type::kUInt64).u64(v); }
  RawGguf& kv_i64(std::string_view key, int64_t v) { return kv_header(key, gguf_type::kInt64).i64(v); }
  RawGguf& kv_f64(std::string_view key, double v) { return kv_header(key, gguf_type::kFloat64).f64(v); }

  // An array header (element type id, u64 count); the caller appends the elements.
  RawGguf& array_header(uint32_t element_type, uint64_t count) { return u32(element_type).u64(count); }
  // Key, array type, and array header in one go.
  RawGguf& kv_array_header(std::string_view key, uint32_t element_type, uint64_t count) {
    return kv_header(key, gguf_type::kArray).array_header(element_type, count);
  }
  RawGguf& kv_string_array(std::string_view key, std::initializer_list<std::string_view> values) {
    kv_array_header(key, gguf_type::kString, values.size());
    for (std::string_view s : values) str(s);
    return *this;
  }
  RawGguf& kv_u32_array(std::string_view key, std::initializer_list<uint32_t> values) {
    kv_array_header(key, gguf_type::kUInt32, values.size());
    for (uint32_t v : values) u32(v);
    return *this;
  }
  RawGguf& kv_i32_array(std::string_view key, std::initializer_list<int32_t> values) {
    kv_array_header(key, gguf_type::kInt32, values.size());
    for (int32_t v : values) i32(v);
    return *this;
  }
  RawGguf& kv_f32_array(std::string_view key, std::initializer_list<float> values) {
    kv_array_header(key, gguf_type::kFloat32, values.size());
    for (float v : values) f32(v);
    return *this;
  }

  // ---- Tensor infos ----

  // n_dims is written as the number of dimensions given.
  RawGguf& tensor_info(std::string_view name, std::initializer_list<int64_t> ne, int32_t type, uint64_t offset) {
    return tensor_info_claiming(name, static_cast<uint32_t>(ne.size()), ne, type, offset);
  }
  // n_dims written as given, independent of how many dimensions follow.
  RawGguf& tensor_info_claiming(std::string_view name, uint32_t n_dims, std::initializer_list<int64_t> ne,
                                int32_t type, uint64_t offset) {
    str(name).u32(n_dims);
    for (int64_t d : ne) i64(d);
    return i32(type).u64(offset);
  }

 private:
  RawGguf& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  RawGguf& patch(uint64_t at, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.at(static_cast<size_t>(at) + i) = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
    return *this;
  }

  std::vector<std::byte> bytes_;
};

}  // namespace ggufkit::test
