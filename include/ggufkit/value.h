// Metadata values. A ValueView is a lazy, non-owning view of a value as it is encoded in the file:
// nothing is decoded or allocated until asked for. A MetadataValue owns an encoded value (for writing).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/format.h"

namespace ggufkit {

static_assert(std::endian::native == std::endian::little, "ggufkit reads little-endian GGUF on little-endian hosts");

// GGUF metadata value type ids (gguf_type).
enum class ValueType : uint32_t {
  UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};
inline constexpr uint32_t kValueTypeIdLimit = 13;

// "uint8", "int8", ... "float64": the names the JSON output uses.
std::string_view value_type_name(ValueType type);
std::optional<ValueType> parse_value_type(std::string_view name);
// Encoded size of a fixed-size type; 0 for String and Array.
uint32_t value_type_size(ValueType type);
inline bool is_fixed_size(ValueType type) { return value_type_size(type) != 0; }

// The C++ type that holds each fixed-size value type exactly.
template <class T> struct value_type_of;
template <> struct value_type_of<uint8_t>  { static constexpr ValueType value = ValueType::UInt8; };
template <> struct value_type_of<int8_t>   { static constexpr ValueType value = ValueType::Int8; };
template <> struct value_type_of<uint16_t> { static constexpr ValueType value = ValueType::UInt16; };
template <> struct value_type_of<int16_t>  { static constexpr ValueType value = ValueType::Int16; };
template <> struct value_type_of<uint32_t> { static constexpr ValueType value = ValueType::UInt32; };
template <> struct value_type_of<int32_t>  { static constexpr ValueType value = ValueType::Int32; };
template <> struct value_type_of<float>    { static constexpr ValueType value = ValueType::Float32; };
template <> struct value_type_of<bool>     { static constexpr ValueType value = ValueType::Bool; };
template <> struct value_type_of<uint64_t> { static constexpr ValueType value = ValueType::UInt64; };
template <> struct value_type_of<int64_t>  { static constexpr ValueType value = ValueType::Int64; };
template <> struct value_type_of<double>   { static constexpr ValueType value = ValueType::Float64; };

namespace detail {
template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint64_t load_u64(const std::byte* p) { return load<uint64_t>(p); }
}  // namespace detail

class ArrayView;
class ValueView;

// Forward range over the elements of a string array, yielding string_views into the file.
class StringRange {
 public:
  class iterator {
   public:
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    iterator() = default;
    iterator(const std::byte* p, uint64_t left) : p_(p), left_(left) {}
    std::string_view operator*() const {
      const uint64_t n = detail::load_u64(p_);
      return {reinterpret_cast<const char*>(p_ + 8), static_cast<size_t>(n)};
    }
    iterator& operator++() {
      p_ += 8 + detail::load_u64(p_);
      --left_;
      return *this;
    }
    iterator operator++(int) { iterator t = *this; ++*this; return t; }
    bool operator==(const iterator& o) const { return left_ == o.left_; }

   private:
    const std::byte* p_ = nullptr;
    uint64_t left_ = 0;
  };
  StringRange() = default;
  StringRange(const std::byte* p, uint64_t count) : p_(p), count_(count) {}
  iterator begin() const { return {p_, count_}; }
  iterator end() const { return {p_, 0}; }
  uint64_t size() const { return count_; }

 private:
  const std::byte* p_ = nullptr;
  uint64_t count_ = 0;
};

// A view of one encoded value (without its type tag). Valid while the file or MetadataValue
// that holds the bytes lives. Views over a validated file never read outside their bytes.
class ValueView {
 public:
  ValueView() = default;
  ValueView(ValueType type, std::span<const std::byte> encoded) : type_(type), bytes_(encoded) {}

  ValueType type() const { return type_; }
  // The value's bytes exactly as stored: length prefix + bytes for strings, element type,
  // count and elements for arrays.
  std::span<const std::byte> encoded() const { return bytes_; }

  // Exact-type access: get<uint32_t>() on a uint32 value, get<std::string_view>() on a string.
  template <class T>
  std::optional<T> get() const {
    if constexpr (std::is_same_v<T, std::string_view>) {
      return as_string();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (type_ != ValueType::Bool || bytes_.empty()) return std::nullopt;
      return bytes_[0] != std::byte{0};  // as llama.cpp: any non-zero byte is true
    } else {
      if (type_ != value_type_of<T>::value || bytes_.size() < sizeof(T)) return std::nullopt;
      return detail::load<T>(bytes_.data());
    }
  }

  std::optional<std::string_view> as_string() const;
  std::optional<ArrayView> as_array() const;
  // Any integer type whose value fits (a uint32 context length, an int32 token id...).
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  // Any integer or floating-point type, converted to double.
  std::optional<double> as_double() const;

 private:
  ValueType type_ = ValueType::UInt8;
  std::span<const std::byte> bytes_;
};

// Forward range over every element of an array as a ValueView (works for all element types,
// nested arrays included).
class ValueRange {
 public:
  class iterator {
   public:
    using value_type = ValueView;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    iterator() = default;
    iterator(ValueType t, const std::byte* p, const std::byte* end, uint64_t left)
        : type_(t), p_(p), end_(end), left_(left) {}
    ValueView operator*() const;
    iterator& operator++();
    iterator operator++(int) { iterator t = *this; ++*this; return t; }
    bool operator==(const iterator& o) const { return left_ == o.left_; }

   private:
    ValueType type_ = ValueType::UInt8;
    const std::byte* p_ = nullptr;
    const std::byte* end_ = nullptr;
    uint64_t left_ = 0;
  };
  ValueRange() = default;
  ValueRange(ValueType t, std::span<const std::byte> payload, uint64_t count)
      : type_(t), payload_(payload), count_(count) {}
  iterator begin() const { return {type_, payload_.data(), payload_.data() + payload_.size(), count_}; }
  iterator end() const { return {type_, nullptr, nullptr, 0}; }
  uint64_t size() const { return count_; }

 private:
  ValueType type_ = ValueType::UInt8;
  std::span<const std::byte> payload_;
  uint64_t count_ = 0;
};

class ArrayView {
 public:
  ArrayView() = default;
  ArrayView(ValueType element_type, uint64_t count, std::span<const std::byte> payload)
      : element_type_(element_type), count_(count), payload_(payload) {}

  ValueType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The elements' bytes, after the 12-byte array header.
  std::span<const std::byte> payload() const { return payload_; }

  // Element i of a fixed-size array of exactly type T; nullopt on type mismatch or i out of range.
  template <class T>
  std::optional<T> get(uint64_t i) const {
    if (element_type_ != value_type_of<T>::value || i >= count_) return std::nullopt;
    if constexpr (std::is_same_v<T, bool>) {
      return payload_[i] != std::byte{0};
    } else {
      return detail::load<T>(payload_.data() + i * sizeof(T));
    }
  }
  // Copies all elements of a fixed-size array of exactly type T; false on mismatch.
  template <class T>
  bool copy_to(std::vector<T>& out) const {
    if (element_type_ != value_type_of<T>::value) return false;
    out.resize(static_cast<size_t>(count_));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = payload_[i] != std::byte{0};
    } else if (count_ != 0) {
      std::memcpy(out.data(), payload_.data(), out.size() * sizeof(T));
    }
    return true;
  }

  // The strings of a string array, lazily; an empty range for other element types.
  StringRange strings() const {
    return element_type_ == ValueType::String ? StringRange(payload_.data(), count_) : StringRange();
  }
  // Every element as a ValueView. O(1) per step.
  ValueRange values() const { return {element_type_, payload_, count_}; }
  // Element i as a ValueView: O(1) for fixed-size elements, O(i) for strings and nested arrays.
  std::optional<ValueView> at(uint64_t i) const;

 private:
  ValueType element_type_ = ValueType::UInt8;
  uint64_t count_ = 0;
  std::span<const std::byte> payload_;
};

// The limits check_limits() applies: the reader's (format.h); smaller ones for tests.
struct ValueLimits {
  uint64_t max_string_length = kMaxStringLength;
  uint64_t max_array_elements = kMaxArrayElements;
  uint32_t max_array_depth = kMaxArrayDepth;
};
Expected<void> check_value_limits(const ValueView& value, const ValueLimits& limits = {});

// An owned, encoded value: what the writer writes. Built from C++ values or copied from a view.
class MetadataValue {
 public:
  MetadataValue() = default;

  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  static MetadataValue of(T v) {
    MetadataValue m;
    m.type_ = value_type_of<T>::value;
    if constexpr (std::is_same_v<T, bool>) {
      m.bytes_.push_back(std::byte{v ? uint8_t{1} : uint8_t{0}});
    } else {
      m.bytes_.resize(sizeof(T));
      std::memcpy(m.bytes_.data(), &v, sizeof(T));
    }
    return m;
  }
  static MetadataValue string(std::string_view s);
  // A string of `length` bytes written in place by `fill` (a file read straight into the value, with
  // no copy between); `fill`'s error is returned, and a length over kMaxStringLength is refused.
  static Expected<MetadataValue> string_filled(uint64_t length,
                                               const std::function<Expected<void>(std::span<char>)>& fill);
  template <class T>
  static MetadataValue array(std::span<const T> values) {
    MetadataValue m = array_header(value_type_of<T>::value, values.size());
    const size_t at = m.bytes_.size();
    m.bytes_.resize(at + values.size() * value_type_size(value_type_of<T>::value));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) m.bytes_[at + i] = std::byte{values[i] ? uint8_t{1} : uint8_t{0}};
    } else if (!values.empty()) {
      std::memcpy(m.bytes_.data() + at, values.data(), values.size() * sizeof(T));
    }
    return m;
  }
  template <class T>
  static MetadataValue array(const std::vector<T>& values) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(values.begin(), values.end());
      MetadataValue m = array(std::span<const uint8_t>(bytes));
      m.set_array_element_type(ValueType::Bool);
      return m;
    } else {
      return array(std::span<const T>(values));
    }
  }
  static MetadataValue string_array(std::span<const std::string_view> values);
  static MetadataValue string_array(const std::vector<std::string>& values);
  // An array whose elements are given values, all of the same type (arrays of arrays too).
  static Expected<MetadataValue> array_of(ValueType element_type, std::span<const MetadataValue> elements);
  // A byte-exact copy of a value read from a file.
  static MetadataValue copy_of(const ValueView& view);

  ValueType type() const { return type_; }
  ValueView view() const { return {type_, bytes_}; }
  std::span<const std::byte> encoded() const { return bytes_; }
  // False for a default-constructed value (no bytes) or bytes that do not encode the type.
  bool well_formed() const;
  // Whether a well-formed value is one the reader accepts: strings (values and array elements) of
  // at most kMaxStringLength bytes, arrays of at most kMaxArrayElements, arrays of arrays at most
  // kMaxArrayDepth levels (format.h). Otherwise the reader's error (string_too_long, array_too_long,
  // array_too_deep) with `key` as its subject. The builder and the editor check every value so.
  Expected<void> check_limits(std::string_view key = {}) const;

 private:
  static MetadataValue array_header(ValueType element_type, uint64_t count);
  void set_array_element_type(ValueType t);
  ValueType type_ = ValueType::UInt8;
  std::vector<std::byte> bytes_;
};

}  // namespace ggufkit
