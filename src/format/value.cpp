#include "ggufkit/value.h"

#include <array>
#include <limits>

#include <fmt/format.h>

#include "ggufkit/format.h"

namespace ggufkit {
namespace {

constexpr std::array<std::string_view, kValueTypeIdLimit> kNames = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
    "string", "array", "uint64", "int64", "float64"};
constexpr std::array<uint32_t, kValueTypeIdLimit> kSizes = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

constexpr size_t kArrayHeaderBytes = 12;  // element type (u32) + count (u64)

// Size of the encoded value at p, which must lie inside [p, end). Views only exist over values
// the reader validated, so this never fails there; the bound keeps it safe regardless.
uint64_t encoded_size(ValueType type, const std::byte* p, const std::byte* end) {
  const uint64_t avail = static_cast<uint64_t>(end - p);
  if (is_fixed_size(type)) return value_type_size(type);
  if (type == ValueType::String) {
    if (avail < 8) return avail;
    const uint64_t n = detail::load_u64(p);
    return n > avail - 8 ? avail : 8 + n;
  }
  if (avail < kArrayHeaderBytes) return avail;
  const auto elem = static_cast<ValueType>(detail::load<uint32_t>(p));
  const uint64_t count = detail::load_u64(p + 4);
  if (static_cast<uint32_t>(elem) >= kValueTypeIdLimit) return avail;
  if (is_fixed_size(elem)) {
    const uint64_t sz = value_type_size(elem);
    if (count > (avail - kArrayHeaderBytes) / sz) return avail;
    return kArrayHeaderBytes + count * sz;
  }
  uint64_t used = kArrayHeaderBytes;
  for (uint64_t i = 0; i < count && used < avail; ++i) used += encoded_size(elem, p + used, end);
  return used;
}

// The reader's checks (reader.cpp's skip_value) on a value in memory; the same messages.
Expected<void> check_limits(const ValueView& v, uint32_t depth, const ValueLimits& limits) {
  const auto too_long = [&](uint64_t n, std::string_view what) {
    return make_error(ErrorCode::string_too_long, std::nullopt, {},
                      fmt::format("{} has {} bytes, more than the {} byte limit", what, n, limits.max_string_length));
  };
  if (v.type() == ValueType::String) {
    const uint64_t n = v.as_string().value_or(std::string_view()).size();
    return n > limits.max_string_length ? Expected<void>(too_long(n, "the string")) : Expected<void>();
  }
  if (v.type() != ValueType::Array) return {};
  const std::optional<ArrayView> a = v.as_array();
  if (!a) return {};
  if (a->size() > limits.max_array_elements) {
    return make_error(ErrorCode::array_too_long, std::nullopt, {},
                      fmt::format("array of {} elements, more than the limit of {}", a->size(), limits.max_array_elements));
  }
  if (a->element_type() == ValueType::String) {
    uint64_t i = 0;
    for (std::string_view s : a->strings()) {
      if (s.size() > limits.max_string_length) return too_long(s.size(), fmt::format("string {} of the array", i));
      ++i;
    }
    return {};
  }
  if (a->element_type() != ValueType::Array) return {};
  if (depth + 1 >= limits.max_array_depth) {
    return make_error(ErrorCode::array_too_deep, std::nullopt, {},
                      fmt::format("arrays nested more than {} deep", limits.max_array_depth));
  }
  for (const ValueView& e : a->values()) {
    if (auto r = check_limits(e, depth + 1, limits); !r) return r;
  }
  return {};
}

}  // namespace

Expected<void> check_value_limits(const ValueView& value, const ValueLimits& limits) {
  return check_limits(value, 0, limits);
}

Expected<void> MetadataValue::check_limits(std::string_view key) const {
  auto r = check_value_limits(view());
  if (r) return r;
  Error e = std::move(r).error();
  e.subject = std::string(key);
  return e;
}

std::string_view value_type_name(ValueType type) {
  const auto i = static_cast<uint32_t>(type);
  return i < kValueTypeIdLimit ? kNames[i] : std::string_view("unknown");
}

std::optional<ValueType> parse_value_type(std::string_view name) {
  for (uint32_t i = 0; i < kValueTypeIdLimit; ++i) {
    if (kNames[i] == name) return static_cast<ValueType>(i);
  }
  return std::nullopt;
}

uint32_t value_type_size(ValueType type) {
  const auto i = static_cast<uint32_t>(type);
  return i < kValueTypeIdLimit ? kSizes[i] : 0;
}

std::optional<std::string_view> ValueView::as_string() const {
  if (type_ != ValueType::String || bytes_.size() < 8) return std::nullopt;
  const uint64_t n = detail::load_u64(bytes_.data());
  if (n > bytes_.size() - 8) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(bytes_.data() + 8), static_cast<size_t>(n));
}

std::optional<ArrayView> ValueView::as_array() const {
  if (type_ != ValueType::Array || bytes_.size() < kArrayHeaderBytes) return std::nullopt;
  const auto elem = static_cast<ValueType>(detail::load<uint32_t>(bytes_.data()));
  const uint64_t count = detail::load_u64(bytes_.data() + 4);
  return ArrayView(elem, count, bytes_.subspan(kArrayHeaderBytes));
}

std::optional<uint64_t> ValueView::as_uint() const {
  switch (type_) {
    case ValueType::UInt8: return *get<uint8_t>();
    case ValueType::UInt16: return *get<uint16_t>();
    case ValueType::UInt32: return *get<uint32_t>();
    case ValueType::UInt64: return *get<uint64_t>();
    case ValueType::Int8:
    case ValueType::Int16:
    case ValueType::Int32:
    case ValueType::Int64: {
      const int64_t v = *as_int();
      if (v < 0) return std::nullopt;
      return static_cast<uint64_t>(v);
    }
    default: return std::nullopt;
  }
}

std::optional<int64_t> ValueView::as_int() const {
  switch (type_) {
    case ValueType::Int8: return *get<int8_t>();
    case ValueType::Int16: return *get<int16_t>();
    case ValueType::Int32: return *get<int32_t>();
    case ValueType::Int64: return *get<int64_t>();
    case ValueType::UInt8:
    case ValueType::UInt16:
    case ValueType::UInt32:
    case ValueType::UInt64: {
      const uint64_t v = *as_uint();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default: return std::nullopt;
  }
}

std::optional<double> ValueView::as_double() const {
  switch (type_) {
    case ValueType::Float32: return *get<float>();
    case ValueType::Float64: return *get<double>();
    case ValueType::UInt8:
    case ValueType::UInt16:
    case ValueType::UInt32:
    case ValueType::UInt64: return static_cast<double>(*as_uint());
    case ValueType::Int8:
    case ValueType::Int16:
    case ValueType::Int32:
    case ValueType::Int64: return static_cast<double>(*as_int());
    default: return std::nullopt;
  }
}

ValueView ValueRange::iterator::operator*() const {
  const uint64_t n = encoded_size(type_, p_, end_);
  return ValueView(type_, std::span<const std::byte>(p_, static_cast<size_t>(n)));
}

ValueRange::iterator& ValueRange::iterator::operator++() {
  p_ += encoded_size(type_, p_, end_);
  --left_;
  return *this;
}

std::optional<ValueView> ArrayView::at(uint64_t i) const {
  if (i >= count_) return std::nullopt;
  if (is_fixed_size(element_type_)) {
    const uint64_t sz = value_type_size(element_type_);
    return ValueView(element_type_, payload_.subspan(static_cast<size_t>(i * sz), sz));
  }
  auto it = values().begin();
  for (uint64_t k = 0; k < i; ++k) ++it;
  return *it;
}

// ---- MetadataValue ----

namespace {
void append_u64(std::vector<std::byte>& out, uint64_t v) {
  const size_t at = out.size();
  out.resize(at + 8);
  std::memcpy(out.data() + at, &v, 8);
}
void append_u32(std::vector<std::byte>& out, uint32_t v) {
  const size_t at = out.size();
  out.resize(at + 4);
  std::memcpy(out.data() + at, &v, 4);
}
void append_str(std::vector<std::byte>& out, std::string_view s) {
  append_u64(out, s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}
}  // namespace

MetadataValue MetadataValue::string(std::string_view s) {
  MetadataValue m;
  m.type_ = ValueType::String;
  m.bytes_.reserve(8 + s.size());
  append_str(m.bytes_, s);
  return m;
}

Expected<MetadataValue> MetadataValue::string_filled(uint64_t length,
                                                    const std::function<Expected<void>(std::span<char>)>& fill) {
  if (length > kMaxStringLength) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("{} bytes, more than the {} byte limit of a string", length, kMaxStringLength));
  }
  MetadataValue m;
  m.type_ = ValueType::String;
  m.bytes_.resize(8 + length);
  std::memcpy(m.bytes_.data(), &length, 8);
  if (auto r = fill({reinterpret_cast<char*>(m.bytes_.data() + 8), static_cast<size_t>(length)}); !r) {
    return std::move(r).error();
  }
  return m;
}

MetadataValue MetadataValue::array_header(ValueType element_type, uint64_t count) {
  MetadataValue m;
  m.type_ = ValueType::Array;
  append_u32(m.bytes_, static_cast<uint32_t>(element_type));
  append_u64(m.bytes_, count);
  return m;
}

void MetadataValue::set_array_element_type(ValueType t) {
  const auto v = static_cast<uint32_t>(t);
  std::memcpy(bytes_.data(), &v, 4);
}

MetadataValue MetadataValue::string_array(std::span<const std::string_view> values) {
  MetadataValue m = array_header(ValueType::String, values.size());
  for (std::string_view s : values) append_str(m.bytes_, s);
  return m;
}

MetadataValue MetadataValue::string_array(const std::vector<std::string>& values) {
  MetadataValue m = array_header(ValueType::String, values.size());
  for (const std::string& s : values) append_str(m.bytes_, s);
  return m;
}

Expected<MetadataValue> MetadataValue::array_of(ValueType element_type, std::span<const MetadataValue> elements) {
  if (static_cast<uint32_t>(element_type) >= kValueTypeIdLimit) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "unknown array element type");
  }
  MetadataValue m = array_header(element_type, elements.size());
  for (const MetadataValue& e : elements) {
    if (e.type_ != element_type) {
      return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                        "array elements must all have the array's element type");
    }
    m.bytes_.insert(m.bytes_.end(), e.bytes_.begin(), e.bytes_.end());
  }
  return m;
}

bool MetadataValue::well_formed() const {
  if (static_cast<uint32_t>(type_) >= kValueTypeIdLimit || bytes_.empty()) return false;
  const std::byte* p = bytes_.data();
  return encoded_size(type_, p, p + bytes_.size()) == bytes_.size() &&
         (type_ != ValueType::String || detail::load_u64(p) == bytes_.size() - 8);
}

MetadataValue MetadataValue::copy_of(const ValueView& view) {
  MetadataValue m;
  m.type_ = view.type();
  m.bytes_.assign(view.encoded().begin(), view.encoded().end());
  return m;
}

}  // namespace ggufkit
