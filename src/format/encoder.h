// The one GGUF header encoder, with the byte order as a field (as LLVM's DataExtractor takes
// IsLittleEndian): the writer (both byte orders), metadata edits, split and endian conversion all
// encode headers through it. Also the one byte-swap helper of the library.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ggufkit/format.h"
#include "ggufkit/value.h"

namespace ggufkit::format {

// `v` with its bytes in the opposite order (any trivially copyable type of 1 to 8 bytes).
template <class T>
T byte_swap(T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  if constexpr (sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return std::bit_cast<T>(__builtin_bswap16(std::bit_cast<uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(__builtin_bswap32(std::bit_cast<uint32_t>(v)));
  } else {
    static_assert(sizeof(T) == 8);
    return std::bit_cast<T>(__builtin_bswap64(std::bit_cast<uint64_t>(v)));
  }
}

// Reverses `count` consecutive numbers of `width` bytes each, in place (a tight loop for 2, 4 and 8).
inline void byte_swap_run(std::byte* p, size_t width, uint64_t count) {
  const auto each = [&]<class U>(U) {
    for (uint64_t i = 0; i < count; ++i, p += sizeof(U)) {
      U v;
      std::memcpy(&v, p, sizeof v);
      v = byte_swap(v);
      std::memcpy(p, &v, sizeof v);
    }
  };
  switch (width) {
    case 1: return;
    case 2: return each(uint16_t{});
    case 4: return each(uint32_t{});
    case 8: return each(uint64_t{});
    default:
      for (uint64_t i = 0; i < count; ++i, p += width) std::reverse(p, p + width);
  }
}

// Appends GGUF header records to a byte vector in one byte order. Values handed to it are
// ValueView encodings, which are always little-endian (a big-endian file is read through a swapped
// copy), so for a big-endian header every multi-byte field of a value is reversed on the way.
class Encoder {
 public:
  Encoder(std::vector<std::byte>& out, ByteOrder order)
      : out_(out), order_(order), swap_numbers_(order != native_byte_order()), swap_values_(order != ByteOrder::little) {}

  ByteOrder order() const { return order_; }
  size_t size() const { return out_.size(); }

  void bytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void bytes(std::string_view s) { bytes(std::as_bytes(std::span(s.data(), s.size()))); }

  template <class T>
  void num(T v) {
    static_assert(std::is_arithmetic_v<T>);
    if (swap_numbers_) v = byte_swap(v);
    bytes(std::as_bytes(std::span(&v, 1)));
  }

  // A GGUF string: its uint64 length, then its bytes.
  void str(std::string_view s) {
    num<uint64_t>(s.size());
    bytes(s);
  }

  // magic, version, tensor count, metadata count.
  void preamble(uint32_t version, uint64_t tensor_count, uint64_t kv_count) {
    bytes(std::string_view(kGgufMagic, sizeof kGgufMagic));
    num<uint32_t>(version);
    num<uint64_t>(tensor_count);
    num<uint64_t>(kv_count);
  }

  // A value's encoding (little-endian, well formed), without its type id.
  void value(ValueType type, std::span<const std::byte> little_endian) {
    if (!swap_values_) {
      bytes(little_endian);
    } else {
      value_swapped(type, little_endian);
    }
  }

  // A metadata record: key, type id, value.
  void kv(std::string_view key, ValueType type, std::span<const std::byte> little_endian) {
    str(key);
    num<uint32_t>(static_cast<uint32_t>(type));
    value(type, little_endian);
  }

  // A tensor info record: name, dimension count, dimensions, type id, offset in the data section.
  void tensor_info(std::string_view name, std::span<const int64_t> ne, int32_t type, uint64_t offset) {
    str(name);
    num<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) num<int64_t>(d);
    num<int32_t>(type);
    num<uint64_t>(offset);
  }

 private:
  // Appends `in` (a well-formed little-endian encoding) with every multi-byte field reversed;
  // returns how many bytes of `in` the value took.
  size_t value_swapped(ValueType type, std::span<const std::byte> in) {
    const auto swapped_run = [&](size_t at, size_t width, uint64_t count) {
      const size_t start = out_.size();
      const size_t n = static_cast<size_t>(count) * width;
      out_.insert(out_.end(), in.begin() + static_cast<ptrdiff_t>(at), in.begin() + static_cast<ptrdiff_t>(at + n));
      byte_swap_run(out_.data() + start, width, count);
      return at + n;
    };
    if (is_fixed_size(type)) return swapped_run(0, value_type_size(type), 1);
    if (type == ValueType::String) {
      const uint64_t n = detail::load_u64(in.data());
      swapped_run(0, 8, 1);
      bytes(in.subspan(8, static_cast<size_t>(n)));
      return 8 + static_cast<size_t>(n);
    }
    const auto elem = static_cast<ValueType>(detail::load<uint32_t>(in.data()));
    const uint64_t count = detail::load_u64(in.data() + 4);
    swapped_run(0, 4, 1);
    size_t at = swapped_run(4, 8, 1);
    if (is_fixed_size(elem)) return swapped_run(at, value_type_size(elem), count);
    for (uint64_t i = 0; i < count; ++i) at += value_swapped(elem, in.subspan(at));
    return at;
  }

  std::vector<std::byte>& out_;
  ByteOrder order_;
  bool swap_numbers_;  // numbers given in the machine's order
  bool swap_values_;   // value encodings given little-endian
};

}  // namespace ggufkit::format
