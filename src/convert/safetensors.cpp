// The safetensors reader: the header JSON is parsed with nlohmann-json's SAX interface straight
// into tensor records (no DOM, so a 100 MB header costs its tensors, not a tree of it), then
// validated as the reference crate does; the tensors' data stay views into the file.
//
// Checks, in order, with the reference crate's (huggingface/safetensors, safetensors/src/tensor.rs
// at 24b0b28) name for each:
//   - at least 8 bytes (HeaderTooSmall);
//   - N <= 100'000'000 (HeaderTooLarge), then 8 + N <= file size (InvalidHeaderLength): before
//     any byte of the header is read;
//   - the header starts with '{' after any JSON whitespace (README "Format" says MUST begin with
//     '{'; the crate checks neither, and tests that leading whitespace is accepted);
//   - UTF-8 JSON (InvalidHeader, InvalidHeaderDeserialization): nlohmann's strict parser rejects
//     ill-formed UTF-8 in strings, comments and trailing bytes other than whitespace; NUL bytes
//     are rejected first (nlohmann's lexer would take one for the end of the input);
//   - the shape serde gives HashMetadata: an object of tensor entries {dtype, shape, data_offsets}
//     and an optional "__metadata__" of string values (null accepted, as Option<HashMap>);
//     unknown fields of a tensor entry are ignored (serde's default); dtype one of the crate's
//     names; shape and data_offsets arrays of non-negative integers fitting in u64 (usize), and
//     data_offsets exactly two;
//   - Metadata::validate, on the tensors sorted by data_offsets: each begins where the previous
//     ended, the first at 0, and end >= begin (InvalidOffset); the element count and bit size do
//     not overflow (ValidationOverflow); the bits make whole bytes (MisalignedSlice); end - begin
//     is that byte size (TensorInvalidInfo);
//   - the last end is exactly the data region's size (MetadataIncompleteBuffer).
// Stricter than the crate, for untrusted input and as the README asks: duplicate keys anywhere
// are rejected (serde keeps the last one silently); nesting is bounded (max_json_depth), as are
// dimensions per tensor (max_dimensions); dimensions and element counts must fit in int64 (the
// crate allows up to 2^64 - 1).
//
// Error offsets are file offsets: of the JSON key of the field at fault (the tensor's name for
// tensor-wide problems), of the byte where JSON parsing failed, 0 for the size field.
#include "ggufkit/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "convert/checkpoint_files.h"
#include "format/checked_math.h"

namespace ggufkit {

namespace {

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  uint32_t bits;
};

constexpr std::array<DtypeInfo, kSafetensorsDtypeCount> kDtypes{{
    {SafetensorsDtype::BOOL, "BOOL", 8},
    {SafetensorsDtype::F4, "F4", 4},
    {SafetensorsDtype::F6_E2M3, "F6_E2M3", 6},
    {SafetensorsDtype::F6_E3M2, "F6_E3M2", 6},
    {SafetensorsDtype::U8, "U8", 8},
    {SafetensorsDtype::I8, "I8", 8},
    {SafetensorsDtype::F8_E5M2, "F8_E5M2", 8},
    {SafetensorsDtype::F8_E4M3, "F8_E4M3", 8},
    {SafetensorsDtype::F8_E8M0, "F8_E8M0", 8},
    {SafetensorsDtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {SafetensorsDtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    {SafetensorsDtype::I16, "I16", 16},
    {SafetensorsDtype::U16, "U16", 16},
    {SafetensorsDtype::F16, "F16", 16},
    {SafetensorsDtype::BF16, "BF16", 16},
    {SafetensorsDtype::I32, "I32", 32},
    {SafetensorsDtype::U32, "U32", 32},
    {SafetensorsDtype::F32, "F32", 32},
    {SafetensorsDtype::C64, "C64", 64},
    {SafetensorsDtype::F64, "F64", 64},
    {SafetensorsDtype::I64, "I64", 64},
    {SafetensorsDtype::U64, "U64", 64},
}};

constexpr bool table_follows_enum() {
  for (size_t i = 0; i < kDtypes.size(); ++i) {
    if (static_cast<size_t>(kDtypes[i].dtype) != i || kDtypes[i].name.empty()) return false;
  }
  return true;
}
static_assert(table_follows_enum(), "kDtypes must list every SafetensorsDtype in enum order");

const DtypeInfo& dtype_info(SafetensorsDtype dtype) {
  const auto i = static_cast<size_t>(dtype);
  return kDtypes[i < kDtypes.size() ? i : static_cast<size_t>(SafetensorsDtype::F32)];
}

// Names from an untrusted file, quoted in messages: control bytes escaped, long names cut.
std::string quoted_text(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    out += (u < 0x20 || u == 0x7f) ? fmt::format("\\x{:02x}", u) : std::string(1, s[i]);
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "\"";
}

// A byte iterator over the JSON that publishes how far nlohmann's lexer has read, so the SAX
// handler knows where each event is. The lexer reads forward one byte at a time and never
// re-reads (its unget is internal), so at a key event the cursor is just past the key's
// closing quote.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, const char** cursor) : p_(p), cursor_(cursor) {}
  reference operator*() const { return *p_; }
  TrackingIterator& operator++() {
    *cursor_ = ++p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackingIterator& other) const { return p_ == other.p_; }
  bool operator!=(const TrackingIterator& other) const { return p_ != other.p_; }

 private:
  const char* p_;
  const char** cursor_;
};

// Where the key that ends just before `cursor` starts: the opening quote is the first quote,
// going back, not escaped by an odd run of backslashes (a JSON string holds no bare quote).
size_t key_start(std::string_view json, const char* cursor) {
  const auto end = static_cast<size_t>(cursor - json.data());
  if (end < 2) return 0;
  for (size_t j = end - 1; j-- > 0;) {
    if (json[j] != '"') continue;
    size_t backslashes = 0;
    while (backslashes < j && json[j - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return j;
  }
  return 0;
}

// nlohmann's messages start with "[json.exception.parse_error.101] parse error at ...".
std::string json_error_text(const std::exception& e) {
  std::string_view what = e.what();
  if (!what.empty() && what.front() == '[') {
    const size_t close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  return std::string(what);
}

// The header's tensor entries as written, before validation.
struct RawTensor {
  std::string name;
  uint64_t name_offset = 0;
  bool has_dtype = false;
  std::optional<SafetensorsDtype> dtype;
  uint64_t dtype_offset = 0;
  bool has_shape = false;
  std::vector<uint64_t> shape;
  uint64_t shape_offset = 0;
  bool has_data_offsets = false;
  std::vector<uint64_t> data_offsets;
  uint64_t data_offsets_offset = 0;
};

// Builds RawTensors and the metadata from nlohmann's SAX events; the first problem is kept in
// `error` and stops the parse (every handler returning false ends it).
class HeaderHandler {
 public:
  using json = nlohmann::json;

  HeaderHandler(std::string_view header, uint64_t base, const SafetensorsOptions& options)
      : json_(header), base_(base), options_(options), cursor_(header.data()) {}

  const char** cursor() { return &cursor_; }

  std::optional<Error> error;
  std::vector<RawTensor> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;

  // SAX interface.
  bool null() { return scalar("null"); }
  bool boolean(bool) { return scalar("a boolean"); }
  // nlohmann reports only numbers with a '-' as number_integer; "-0" included, which serde_json
  // reads as the float -0.0 and the crate rejects.
  bool number_integer(json::number_integer_t) { return scalar("a negative number"); }
  bool number_unsigned(json::number_unsigned_t v) { return number(v); }
  bool number_float(json::number_float_t, const std::string&) {
    return scalar("a fraction or a number of 2^64 or more");
  }
  bool binary(json::binary_t&) { return scalar("binary data"); }

  bool string(std::string& s) {
    if (frames_.empty()) return fail_not_object();
    switch (frames_.back()) {
      case Frame::ignored: return true;
      case Frame::shape:
      case Frame::data_offsets: return fail_array_element("a string");
      default: break;
    }
    switch (slot_) {
      case Slot::dtype: {
        RawTensor& t = tensors.back();
        t.dtype = safetensors_dtype_from_name(s);
        if (!t.dtype) {
          return fail(ErrorCode::safetensors_unknown_dtype, t.dtype_offset, t.name,
                      fmt::format("unknown dtype {}", quoted_text(s)));
        }
        return true;
      }
      case Slot::metadata_value: metadata.back().second = std::move(s); return true;
      case Slot::ignored: return true;
      default: return scalar("a string");
    }
  }

  bool start_object(std::size_t) {
    if (frames_.empty()) return push(Frame::header);
    switch (frames_.back()) {
      case Frame::ignored: return push(Frame::ignored);
      case Frame::shape:
      case Frame::data_offsets: return fail_array_element("an object");
      default: break;
    }
    switch (slot_) {
      case Slot::tensor: return push(Frame::tensor);
      case Slot::metadata: return push(Frame::metadata);
      case Slot::ignored: return push(Frame::ignored);
      default: return scalar("an object");
    }
  }

  bool start_array(std::size_t) {
    if (frames_.empty()) return fail_not_object();
    switch (frames_.back()) {
      case Frame::ignored: return push(Frame::ignored);
      case Frame::shape:
      case Frame::data_offsets: return fail_array_element("an array");
      default: break;
    }
    switch (slot_) {
      case Slot::shape: return push(Frame::shape);
      case Slot::data_offsets: return push(Frame::data_offsets);
      case Slot::ignored: return push(Frame::ignored);
      default: return scalar("an array");
    }
  }

  bool key(std::string& k) {
    const uint64_t offset = base_ + key_start(json_, cursor_);
    switch (frames_.back()) {
      case Frame::header: return header_key(std::move(k), offset);
      case Frame::tensor: return tensor_key(k, offset);
      case Frame::metadata: {
        if (!metadata_keys_.insert(k).second) {
          return fail(ErrorCode::safetensors_duplicate_key, offset, k, "__metadata__ key given twice");
        }
        last_key_offset_ = offset;
        metadata.emplace_back(std::move(k), std::string());
        slot_ = Slot::metadata_value;
        return true;
      }
      default: return true;  // inside an ignored value
    }
  }

  bool end_object() {
    const Frame closed = pop();
    if (closed == Frame::tensor) {
      const RawTensor& t = tensors.back();
      const char* missing = !t.dtype ? "dtype" : !t.has_shape ? "shape" : !t.has_data_offsets ? "data_offsets" : nullptr;
      if (missing != nullptr) {
        return fail(ErrorCode::bad_header, t.name_offset, t.name, fmt::format("tensor entry has no \"{}\"", missing));
      }
    }
    return true;
  }

  bool end_array() {
    const Frame closed = pop();
    if (closed == Frame::data_offsets && tensors.back().data_offsets.size() != 2) {
      const RawTensor& t = tensors.back();
      return fail(ErrorCode::bad_header, t.data_offsets_offset, t.name,
                  fmt::format("data_offsets has {} numbers, not 2 [begin, end]", t.data_offsets.size()));
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // position counts the bytes read, the offending one included (one past the end when the
    // input ends early).
    const uint64_t at = base_ + std::min<uint64_t>(position > 0 ? position - 1 : 0, json_.size());
    return fail(ErrorCode::bad_header, at, current_tensor_name(), "header is not valid JSON: " + json_error_text(e));
  }

 private:
  // What the open JSON containers are.
  enum class Frame : uint8_t { header, tensor, metadata, shape, data_offsets, ignored };
  // What the value after the last key is for.
  enum class Slot : uint8_t { none, tensor, metadata, metadata_value, dtype, shape, data_offsets, ignored };

  bool fail(ErrorCode code, uint64_t offset, std::string subject, std::string message) {
    if (!error) error = make_error(code, offset, std::move(subject), std::move(message));
    return false;
  }

  uint64_t here() const { return base_ + static_cast<uint64_t>(cursor_ - json_.data()); }

  std::string current_tensor_name() const {
    const bool in_tensor = std::find(frames_.begin(), frames_.end(), Frame::tensor) != frames_.end() ||
                           (frames_.size() == 1 && slot_ == Slot::tensor);
    return in_tensor && !tensors.empty() ? tensors.back().name : std::string();
  }

  bool push(Frame frame) {
    if (frames_.size() >= options_.max_json_depth) {
      return fail(ErrorCode::bad_header, here() - 1, current_tensor_name(),
                  fmt::format("JSON nested deeper than {} levels", options_.max_json_depth));
    }
    frames_.push_back(frame);
    slot_ = Slot::none;
    return true;
  }

  Frame pop() {
    const Frame closed = frames_.back();
    frames_.pop_back();
    // Back in an ignored value the slot does not matter; in an object it waits for a key.
    slot_ = !frames_.empty() && frames_.back() == Frame::ignored ? Slot::ignored : Slot::none;
    return closed;
  }

  bool fail_not_object() { return fail(ErrorCode::bad_header, base_, {}, "header is not a JSON object"); }

  bool fail_array_element(const char* kind) {
    const RawTensor& t = tensors.back();
    const bool shape = frames_.back() == Frame::shape;
    return fail(ErrorCode::bad_header, shape ? t.shape_offset : t.data_offsets_offset, t.name,
                fmt::format("{} holds {}, not a non-negative integer", shape ? "shape" : "data_offsets", kind));
  }

  // A value that is not what its place needs.
  bool scalar(const char* kind) {
    if (frames_.empty()) return fail_not_object();
    switch (frames_.back()) {
      case Frame::ignored: return true;
      case Frame::shape:
      case Frame::data_offsets: return fail_array_element(kind);
      default: break;
    }
    switch (slot_) {
      case Slot::ignored: return true;
      case Slot::metadata: {
        if (std::string_view(kind) == "null") return true;  // "__metadata__": null is Option::None
        return fail(ErrorCode::bad_header, metadata_offset_, std::string(kSafetensorsMetadataKey),
                    fmt::format("__metadata__ is {}, not an object of strings", kind));
      }
      case Slot::metadata_value:
        return fail(ErrorCode::bad_header, metadata_value_offset(), metadata.back().first,
                    fmt::format("__metadata__ value is {}, not a string", kind));
      case Slot::tensor: {
        const RawTensor& t = tensors.back();
        return fail(ErrorCode::bad_header, t.name_offset, t.name,
                    fmt::format("tensor entry is {}, not an object {{dtype, shape, data_offsets}}", kind));
      }
      case Slot::dtype: {
        const RawTensor& t = tensors.back();
        return fail(ErrorCode::bad_header, t.dtype_offset, t.name, fmt::format("dtype is {}, not a string", kind));
      }
      case Slot::shape: {
        const RawTensor& t = tensors.back();
        return fail(ErrorCode::bad_header, t.shape_offset, t.name, fmt::format("shape is {}, not an array", kind));
      }
      case Slot::data_offsets: {
        const RawTensor& t = tensors.back();
        return fail(ErrorCode::bad_header, t.data_offsets_offset, t.name,
                    fmt::format("data_offsets is {}, not an array", kind));
      }
      case Slot::none: break;
    }
    return fail(ErrorCode::bad_header, here(), current_tensor_name(), fmt::format("unexpected {}", kind));
  }

  bool number(uint64_t v) {
    if (frames_.empty()) return fail_not_object();
    switch (frames_.back()) {
      case Frame::ignored: return true;
      case Frame::shape: {
        RawTensor& t = tensors.back();
        if (t.shape.size() >= options_.max_dimensions) {
          return fail(ErrorCode::bad_header, t.shape_offset, t.name,
                      fmt::format("shape has more than {} dimensions", options_.max_dimensions));
        }
        t.shape.push_back(v);
        return true;
      }
      case Frame::data_offsets: {
        RawTensor& t = tensors.back();
        if (t.data_offsets.size() >= 2) {
          return fail(ErrorCode::bad_header, t.data_offsets_offset, t.name,
                      "data_offsets has more than 2 numbers [begin, end]");
        }
        t.data_offsets.push_back(v);
        return true;
      }
      default: return scalar("a number");
    }
  }

  uint64_t metadata_value_offset() const { return last_key_offset_; }

  bool header_key(std::string k, uint64_t offset) {
    last_key_offset_ = offset;
    if (k == kSafetensorsMetadataKey) {
      if (seen_metadata_) return fail(ErrorCode::safetensors_duplicate_key, offset, std::move(k), "__metadata__ given twice");
      seen_metadata_ = true;
      metadata_offset_ = offset;
      slot_ = Slot::metadata;
      return true;
    }
    if (!names_.insert(k).second) {
      return fail(ErrorCode::safetensors_duplicate_tensor, offset, std::move(k), "tensor name given twice in the header");
    }
    RawTensor& t = tensors.emplace_back();
    t.name = std::move(k);
    t.name_offset = offset;
    slot_ = Slot::tensor;
    return true;
  }

  bool tensor_key(const std::string& k, uint64_t offset) {
    RawTensor& t = tensors.back();
    auto field = [&](bool& seen, uint64_t& field_offset, Slot slot) {
      if (seen) return fail(ErrorCode::safetensors_duplicate_key, offset, t.name, fmt::format("field \"{}\" given twice", k));
      seen = true;
      field_offset = offset;
      slot_ = slot;
      return true;
    };
    if (k == "dtype") return field(t.has_dtype, t.dtype_offset, Slot::dtype);
    if (k == "shape") return field(t.has_shape, t.shape_offset, Slot::shape);
    if (k == "data_offsets") return field(t.has_data_offsets, t.data_offsets_offset, Slot::data_offsets);
    slot_ = Slot::ignored;  // serde ignores unknown fields
    return true;
  }

  std::string_view json_;
  uint64_t base_;
  const SafetensorsOptions& options_;
  const char* cursor_;
  std::vector<Frame> frames_;
  Slot slot_ = Slot::none;
  std::unordered_set<std::string> names_;
  std::unordered_set<std::string> metadata_keys_;
  bool seen_metadata_ = false;
  uint64_t metadata_offset_ = 0;
  uint64_t last_key_offset_ = 0;
};

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDtype dtype) { return dtype_info(dtype).name; }

std::optional<SafetensorsDtype> safetensors_dtype_from_name(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

uint32_t safetensors_dtype_bits(SafetensorsDtype dtype) { return dtype_info(dtype).bits; }

class SafetensorsParser {
 public:
  SafetensorsParser(std::span<const std::byte> bytes, const SafetensorsOptions& options)
      : bytes_(bytes), options_(options) {}

  Expected<void> run(SafetensorsFile& f) {
    f.bytes_ = bytes_;
    const uint64_t size = bytes_.size();
    if (size < kSafetensorsSizeFieldBytes) {
      return make_error(ErrorCode::safetensors_truncated, 0, {},
                        fmt::format("file of {} bytes is shorter than the 8-byte header size", size));
    }
    const uint64_t n = read_u64_le(bytes_.data());
    if (n > options_.max_header_bytes) {
      return make_error(ErrorCode::bad_header, 0, {},
                        fmt::format("header size {} is over the limit of {} bytes", n, options_.max_header_bytes));
    }
    if (n > size - kSafetensorsSizeFieldBytes) {
      return make_error(ErrorCode::safetensors_truncated, 0, {},
                        fmt::format("header of {} bytes runs past the end of the file ({} bytes)", n, size));
    }
    f.header_size_ = n;
    const std::string_view header = f.header_json();
    // The crate accepts leading JSON whitespace (test_whitespace_leading_padded_header: writers
    // may pad to align the data), so the README's "MUST begin with {" applies after it.
    const size_t first_token = std::min(header.find_first_not_of(" \t\n\r"), header.size());
    if (first_token == header.size() || header[first_token] != '{') {
      return make_error(ErrorCode::bad_header, kSafetensorsSizeFieldBytes + first_token, {},
                        "header does not start with '{' (after any whitespace)");
    }

    // nlohmann's lexer takes a NUL byte for the end of input; JSON never holds a raw one.
    if (const size_t nul = header.find('\0'); nul != std::string_view::npos) {
      return make_error(ErrorCode::bad_header, kSafetensorsSizeFieldBytes + nul, {}, "header holds a NUL byte");
    }
    HeaderHandler handler(header, kSafetensorsSizeFieldBytes, options_);
    const TrackingIterator first(header.data(), handler.cursor());
    const TrackingIterator last(header.data() + header.size(), handler.cursor());
    const bool parsed = nlohmann::json::sax_parse(first, last, &handler);
    if (handler.error) return *handler.error;
    if (!parsed) return make_error(ErrorCode::bad_header, kSafetensorsSizeFieldBytes, {}, "header is not valid JSON");

    f.metadata_ = std::move(handler.metadata);
    return place_tensors(f, handler.tensors);
  }

 private:
  // Metadata::validate and the final coverage check, on the tensors in data order.
  Expected<void> place_tensors(SafetensorsFile& f, std::vector<RawTensor>& raw) {
    std::vector<size_t> order(raw.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::tie(raw[a].data_offsets[0], raw[a].data_offsets[1]) <
             std::tie(raw[b].data_offsets[0], raw[b].data_offsets[1]);
    });

    uint64_t expected_begin = 0;
    for (const size_t i : order) {
      RawTensor& t = raw[i];
      const uint64_t begin = t.data_offsets[0];
      const uint64_t end = t.data_offsets[1];
      if (end < begin) {
        return make_error(ErrorCode::safetensors_bad_offsets, t.data_offsets_offset, t.name,
                          fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
      }
      if (begin < expected_begin) {
        return make_error(ErrorCode::safetensors_bad_offsets, t.data_offsets_offset, t.name,
                          fmt::format("data_offsets [{}, {}] overlap the previous tensor's data, which ends at {}",
                                      begin, end, expected_begin));
      }
      if (begin > expected_begin) {
        return make_error(ErrorCode::safetensors_bad_offsets, t.data_offsets_offset, t.name,
                          fmt::format("data_offsets [{}, {}] leave a hole of {} bytes after {}", begin, end,
                                      begin - expected_begin,
                                      expected_begin == 0 ? "the start of the data" : "the previous tensor's data"));
      }
      expected_begin = end;

      // As the crate: the product from the first dimension on, checked at each step (a zero
      // after an overflow does not save it); here within int64, as shapes are int64 for us.
      constexpr uint64_t kMaxCount = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      uint64_t elements = 1;
      for (const uint64_t d : t.shape) {
        const auto product = checked::mul(elements, d);
        if (d > kMaxCount || !product || *product > kMaxCount) {
          return make_error(ErrorCode::safetensors_shape_overflow, t.shape_offset, t.name,
                            fmt::format("shape {} has more elements than int64 holds", shape_text(t.shape)));
        }
        elements = *product;
      }
      const uint32_t bits = safetensors_dtype_bits(*t.dtype);
      const auto total_bits = checked::mul(elements, bits);
      if (!total_bits) {
        return make_error(ErrorCode::safetensors_shape_overflow, t.shape_offset, t.name,
                          fmt::format("shape {} of {} is more than 2^64 bits", shape_text(t.shape),
                                      safetensors_dtype_name(*t.dtype)));
      }
      if (*total_bits % 8 != 0) {
        return make_error(ErrorCode::tensor_size_mismatch, t.shape_offset, t.name,
                          fmt::format("shape {} of {} is {} bits, not a whole number of bytes", shape_text(t.shape),
                                      safetensors_dtype_name(*t.dtype), *total_bits));
      }
      if (end - begin != *total_bits / 8) {
        return make_error(ErrorCode::tensor_size_mismatch, t.data_offsets_offset, t.name,
                          fmt::format("data_offsets [{}, {}] hold {} bytes; shape {} of {} needs {}", begin, end,
                                      end - begin, shape_text(t.shape), safetensors_dtype_name(*t.dtype),
                                      *total_bits / 8));
      }
    }

    const uint64_t data_start = f.data_offset();
    const uint64_t data_size = bytes_.size() - data_start;
    if (expected_begin > data_size) {
      for (const size_t i : order) {
        const RawTensor& t = raw[i];
        if (t.data_offsets[1] > data_size) {
          return make_error(ErrorCode::safetensors_out_of_bounds, t.data_offsets_offset, t.name,
                            fmt::format("data ends at file offset {}, past the end of the file ({} bytes)",
                                        data_start + t.data_offsets[1], bytes_.size()));
        }
      }
    }
    if (expected_begin < data_size) {
      return make_error(ErrorCode::safetensors_bad_offsets, data_start + expected_begin, {},
                        fmt::format("{} bytes after the last tensor's data belong to no tensor",
                                    data_size - expected_begin));
    }

    f.tensors_.reserve(raw.size());
    for (const size_t i : order) {
      RawTensor& t = raw[i];
      SafetensorsTensor& out = f.tensors_.emplace_back();
      out.name = std::move(t.name);
      out.dtype = *t.dtype;
      out.shape.assign(t.shape.begin(), t.shape.end());  // each checked <= INT64_MAX above
      out.data_begin = t.data_offsets[0];
      out.data_end = t.data_offsets[1];
      out.data = bytes_.subspan(static_cast<size_t>(data_start + out.data_begin),
                                static_cast<size_t>(out.data_end - out.data_begin));
      out.header_offset = t.name_offset;
    }
    f.tensor_by_name_.resize(f.tensors_.size());
    std::iota(f.tensor_by_name_.begin(), f.tensor_by_name_.end(), size_t{0});
    std::sort(f.tensor_by_name_.begin(), f.tensor_by_name_.end(),
              [&](size_t a, size_t b) { return f.tensors_[a].name < f.tensors_[b].name; });
    return {};
  }

  static std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

  std::span<const std::byte> bytes_;
  const SafetensorsOptions& options_;
};

Expected<SafetensorsFile> SafetensorsFile::parse(std::span<const std::byte> bytes, const SafetensorsOptions& options) {
  SafetensorsFile f;
  SafetensorsParser parser(bytes, options);
  if (auto r = parser.run(f); !r) return std::move(r).error();
  return f;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path, const SafetensorsOptions& options) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return std::move(mapped).error();
  auto mapping = std::make_unique<MappedFile>(std::move(mapped).value());
  auto f = parse(mapping->bytes(), options);
  if (!f) return f;
  f->mapping_ = std::move(mapping);
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = std::lower_bound(tensor_by_name_.begin(), tensor_by_name_.end(), name,
                                   [&](size_t i, std::string_view n) { return tensors_[i].name < n; });
  if (it == tensor_by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

std::optional<std::string_view> SafetensorsFile::metadata_value(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

// ---- model.safetensors.index.json ----

namespace {

// Thrown from the index parser's callback to stop at the first problem; caught in parse().
struct IndexProblem {
  Error error;
};

bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

}  // namespace

std::vector<std::string> SafetensorsIndex::shard_files() const {
  std::vector<std::string> files;
  std::unordered_set<std::string_view> seen;
  for (const SafetensorsIndexEntry& e : weight_map) {
    if (seen.insert(e.shard).second) files.push_back(e.shard);
  }
  return files;
}

std::optional<std::string_view> SafetensorsIndex::shard_of(std::string_view tensor) const {
  for (const SafetensorsIndexEntry& e : weight_map) {
    if (e.tensor == tensor) return std::string_view(e.shard);
  }
  return std::nullopt;
}

Expected<SafetensorsIndex> SafetensorsIndex::parse(std::string_view json, const SafetensorsOptions& options) {
  using ordered_json = nlohmann::ordered_json;
  const char* cursor = json.data();
  // Keys of each open container (arrays get an unused set, so the stack follows the depth).
  std::vector<std::unordered_set<std::string>> keys;
  std::string top_level_key;
  std::vector<uint64_t> weight_map_offsets;
  const ordered_json::parser_callback_t watch = [&](int depth, nlohmann::json::parse_event_t event,
                                                   ordered_json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (static_cast<uint64_t>(depth) >= options.max_json_depth) {
          throw IndexProblem{make_error(ErrorCode::bad_header, static_cast<uint64_t>(cursor - json.data()) - 1, {},
                                        fmt::format("JSON nested deeper than {} levels", options.max_json_depth))};
        }
        keys.emplace_back();
        break;
      case Event::object_end:
      case Event::array_end: keys.pop_back(); break;
      case Event::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        const uint64_t offset = key_start(json, cursor);
        const bool in_weight_map = depth == 2 && top_level_key == "weight_map";
        if (!keys.back().insert(k).second) {
          throw IndexProblem{in_weight_map ? make_error(ErrorCode::safetensors_duplicate_tensor, offset, k,
                                                        "tensor listed twice in weight_map")
                                           : make_error(ErrorCode::safetensors_duplicate_key, offset, k, "key given twice")};
        }
        if (depth == 1) top_level_key = k;
        if (in_weight_map) weight_map_offsets.push_back(offset);
        break;
      }
      case Event::value: break;
    }
    return true;
  };

  if (const size_t nul = json.find('\0'); nul != std::string_view::npos) {
    return make_error(ErrorCode::bad_header, nul, {}, "index holds a NUL byte");
  }
  ordered_json doc;
  try {
    const TrackingIterator first(json.data(), &cursor);
    const TrackingIterator last(json.data() + json.size(), &cursor);
    doc = ordered_json::parse(first, last, watch);
  } catch (const IndexProblem& problem) {
    return problem.error;
  } catch (const nlohmann::json::parse_error& e) {
    return make_error(ErrorCode::bad_header, e.byte > 0 ? e.byte - 1 : 0, {}, "index is not valid JSON: " + json_error_text(e));
  } catch (const std::exception& e) {  // nlohmann's other exceptions (none expected when parsing)
    return make_error(ErrorCode::bad_header, std::nullopt, {}, "index is not valid JSON: " + json_error_text(e));
  }

  if (!doc.is_object()) return make_error(ErrorCode::bad_header, std::nullopt, {}, "index is not a JSON object");
  SafetensorsIndex index;
  if (const auto it = doc.find("metadata"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) return make_error(ErrorCode::bad_header, std::nullopt, "metadata", "index \"metadata\" is not an object");
    for (const auto& [k, v] : it->items()) {
      index.metadata.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  const auto map = doc.find("weight_map");
  if (map == doc.end() || !map->is_object()) {
    return make_error(ErrorCode::bad_header, std::nullopt, "weight_map", "index has no \"weight_map\" object");
  }
  size_t i = 0;
  for (const auto& [tensor, shard] : map->items()) {
    const uint64_t offset = i < weight_map_offsets.size() ? weight_map_offsets[i] : 0;
    ++i;
    if (!shard.is_string()) {
      return make_error(ErrorCode::bad_header, offset, tensor,
                        fmt::format("weight_map value is {}, not a shard file name", shard.type_name()));
    }
    std::string file = shard.get<std::string>();
    if (!is_plain_file_name(file)) {
      return make_error(ErrorCode::index_mismatch, offset, tensor,
                        fmt::format("shard {} is not a plain file name next to the index", quoted_text(file)));
    }
    index.weight_map.push_back({tensor, std::move(file), offset});
  }
  return index;
}

Expected<SafetensorsIndex> SafetensorsIndex::open(const std::filesystem::path& path, const SafetensorsOptions& options) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return std::move(mapped).error();
  if (mapped->size() > options.max_header_bytes) {
    return make_error(ErrorCode::bad_header, std::nullopt, {},
                      fmt::format("index of {} bytes is over the limit of {} bytes", mapped->size(), options.max_header_bytes));
  }
  const std::span<const std::byte> bytes = mapped->bytes();
  return parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), options);
}

// ---- SafetensorsModel ----

Expected<SafetensorsModel> SafetensorsModel::open(const std::filesystem::path& dir, const SafetensorsOptions& options) {
  SafetensorsModel model;
  const std::filesystem::path index_path = dir / kSafetensorsIndexFileName;
  std::error_code ec;
  if (std::filesystem::exists(index_path, ec)) {
    if (auto r = convert_detail::check_checkpoint_file(dir, index_path); !r) return std::move(r).error();
    auto index = SafetensorsIndex::open(index_path, options);
    if (!index) return with_file(std::move(index).error(), std::string(kSafetensorsIndexFileName));
    model.shard_files_ = index->shard_files();
    model.index_ = std::move(index).value();
  } else if (std::filesystem::exists(dir / kSafetensorsSingleFileName, ec)) {
    model.shard_files_.emplace_back(kSafetensorsSingleFileName);
  } else {
    return make_error(ErrorCode::io_error, std::nullopt, {},
                      fmt::format("{} has neither {} nor {}", dir.string(), kSafetensorsSingleFileName,
                                  kSafetensorsIndexFileName));
  }

  // Every shard is opened before any tensor pointer is taken: shards_ never reallocates after.
  model.shards_.reserve(model.shard_files_.size());
  for (const std::string& file : model.shard_files_) {
    if (auto r = convert_detail::check_checkpoint_file(dir, dir / file); !r) return std::move(r).error();
    auto shard = SafetensorsFile::open(dir / file, options);
    if (!shard) return with_file(std::move(shard).error(), file);
    model.shards_.push_back(std::move(shard).value());
  }
  for (size_t s = 0; s < model.shards_.size(); ++s) {
    for (const SafetensorsTensor& t : model.shards_[s].tensors()) model.tensors_.push_back({&t, s});
  }
  model.tensor_by_name_.resize(model.tensors_.size());
  std::iota(model.tensor_by_name_.begin(), model.tensor_by_name_.end(), size_t{0});
  std::stable_sort(model.tensor_by_name_.begin(), model.tensor_by_name_.end(), [&](size_t a, size_t b) {
    return model.tensors_[a].tensor->name < model.tensors_[b].tensor->name;
  });
  for (size_t i = 1; i < model.tensor_by_name_.size(); ++i) {
    const SafetensorsModelTensor& first = model.tensors_[model.tensor_by_name_[i - 1]];
    const SafetensorsModelTensor& again = model.tensors_[model.tensor_by_name_[i]];
    if (first.tensor->name == again.tensor->name) {
      return make_error(ErrorCode::safetensors_duplicate_tensor, again.tensor->header_offset, again.tensor->name,
                        fmt::format("{}: tensor also in {}", model.shard_files_[again.shard],
                                    model.shard_files_[first.shard]));
    }
  }

  if (model.index_) {
    std::unordered_map<std::string_view, const SafetensorsIndexEntry*> listed;
    for (const SafetensorsIndexEntry& e : model.index_->weight_map) listed.emplace(e.tensor, &e);
    for (const SafetensorsModelTensor& mt : model.tensors_) {
      const std::string& file = model.shard_files_[mt.shard];
      const auto it = listed.find(mt.tensor->name);
      if (it == listed.end()) {
        return make_error(ErrorCode::index_mismatch, mt.tensor->header_offset, mt.tensor->name,
                          fmt::format("{}: tensor not listed in {}", file, kSafetensorsIndexFileName));
      }
      if (it->second->shard != file) {
        return make_error(ErrorCode::index_mismatch, mt.tensor->header_offset, mt.tensor->name,
                          fmt::format("{}: tensor listed in {} for {}", file, kSafetensorsIndexFileName,
                                      it->second->shard));
      }
    }
    for (const SafetensorsIndexEntry& e : model.index_->weight_map) {
      if (model.find(e.tensor) == nullptr) {
        return make_error(ErrorCode::index_mismatch, e.offset, e.tensor,
                          fmt::format("{}: tensor listed for {}, which does not hold it", kSafetensorsIndexFileName,
                                      e.shard));
      }
    }
  }
  return model;
}

const SafetensorsModelTensor* SafetensorsModel::find(std::string_view name) const {
  const auto it = std::lower_bound(tensor_by_name_.begin(), tensor_by_name_.end(), name,
                                   [&](size_t i, std::string_view n) { return tensors_[i].tensor->name < n; });
  if (it == tensor_by_name_.end() || tensors_[*it].tensor->name != name) return nullptr;
  return &tensors_[*it];
}

}  // namespace ggufkit
