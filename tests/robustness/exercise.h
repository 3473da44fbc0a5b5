// What a consumer does with a parsed file, with every answer cross-checked: the shared core of the
// libFuzzer target (fuzz/fuzz_reader.cpp) and of the robustness tests (tests/robustness/).
//
// exercise_file() walks all metadata (every typed getter, every array through values(),
// strings(), at(), get<T>(i) and copy_to), the JSON dump, ModelMetadata, summarize(), every
// tensor's data span, and a write + re-parse round trip. check_parse_error() checks what a
// rejection must carry. Neither throws nor aborts: they record what they find in a Findings, and
// the caller decides (the fuzzer traps, the tests fail).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ggufkit/ggufkit.h"

#if defined(__SANITIZE_ADDRESS__)
#define GGUFKIT_ROBUST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GGUFKIT_ROBUST_ASAN 1
#endif
#endif
#if defined(GGUFKIT_ROBUST_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace ggufkit::robust {

// The inconsistencies found; keeps the first few messages and counts the rest.
class Findings {
 public:
  void fail(std::string what) {
    if (messages_.size() < kKept) messages_.push_back(std::move(what));
    ++count_;
  }
  bool ok() const { return count_ == 0; }
  size_t count() const { return count_; }
  std::string report() const {
    std::string out;
    for (const std::string& m : messages_) out += m + "\n";
    if (count_ > messages_.size()) out += fmt::format("... and {} more\n", count_ - messages_.size());
    return out;
  }

 private:
  static constexpr size_t kKept = 12;
  std::vector<std::string> messages_;
  size_t count_ = 0;
};

// Records a finding when `cond` is false; the message is only formatted then.
#define GGUFKIT_ROBUST_EXPECT(findings, cond, ...)                                      \
  do {                                                                                  \
    if (!(cond)) (findings).fail(fmt::format("{}: ", #cond) + fmt::format(__VA_ARGS__)); \
  } while (0)

// Reads of tensor bytes go here so the compiler cannot drop them.
inline volatile unsigned char touched_byte_sink = 0;
inline void touch(std::byte b) { touched_byte_sink = touched_byte_sink ^ static_cast<unsigned char>(b); }

// Calls f(std::type_identity<T>{}) with the C++ type of a fixed-size GGUF value type.
template <class F>
void with_fixed_type(ValueType type, F&& f) {
  switch (type) {
    case ValueType::UInt8: f(std::type_identity<uint8_t>{}); break;
    case ValueType::Int8: f(std::type_identity<int8_t>{}); break;
    case ValueType::UInt16: f(std::type_identity<uint16_t>{}); break;
    case ValueType::Int16: f(std::type_identity<int16_t>{}); break;
    case ValueType::UInt32: f(std::type_identity<uint32_t>{}); break;
    case ValueType::Int32: f(std::type_identity<int32_t>{}); break;
    case ValueType::Float32: f(std::type_identity<float>{}); break;
    case ValueType::Bool: f(std::type_identity<bool>{}); break;
    case ValueType::UInt64: f(std::type_identity<uint64_t>{}); break;
    case ValueType::Int64: f(std::type_identity<int64_t>{}); break;
    case ValueType::Float64: f(std::type_identity<double>{}); break;
    case ValueType::String:
    case ValueType::Array: break;
  }
}

// Equality that treats two NaNs with the same bits as equal.
template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else {
    return a == b;
  }
}

inline bool within(std::span<const std::byte> inner, std::span<const std::byte> outer) {
  return inner.data() >= outer.data() && inner.size() <= outer.size() &&
         static_cast<size_t>(inner.data() - outer.data()) <= outer.size() - inner.size();
}

inline bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::UInt8: case ValueType::Int8: case ValueType::UInt16: case ValueType::Int16:
    case ValueType::UInt32: case ValueType::Int32: case ValueType::UInt64: case ValueType::Int64:
      return true;
    default:
      return false;
  }
}

// Where a value is ("key 3[17][2]"); only spelled out when something is wrong there.
struct Where {
  const Where* parent = nullptr;
  uint64_t index = 0;     // element index when parent is set, key index otherwise
  std::string str() const {
    return parent ? fmt::format("{}[{}]", parent->str(), index) : fmt::format("key {}", index);
  }
};

void check_value(Findings& out, const ValueView& value, std::span<const std::byte> container, uint32_t depth,
                 const Where& where);

// How many typed getters answer; exactly one must for a fixed-size value, none otherwise.
inline int typed_getters_answering(const ValueView& v) {
  int n = 0;
  n += v.get<uint8_t>().has_value();
  n += v.get<int8_t>().has_value();
  n += v.get<uint16_t>().has_value();
  n += v.get<int16_t>().has_value();
  n += v.get<uint32_t>().has_value();
  n += v.get<int32_t>().has_value();
  n += v.get<float>().has_value();
  n += v.get<bool>().has_value();
  n += v.get<uint64_t>().has_value();
  n += v.get<int64_t>().has_value();
  n += v.get<double>().has_value();
  return n;
}

inline void check_numeric_conversions(Findings& out, const ValueView& v, const Where& where) {
  const ValueType t = v.type();
  const auto as_uint = v.as_uint();
  const auto as_int = v.as_int();
  const auto as_double = v.as_double();
  if (is_integer_type(t)) {
    GGUFKIT_ROBUST_EXPECT(out, as_uint || as_int, "{}: an integer fits neither uint64 nor int64", where.str());
    GGUFKIT_ROBUST_EXPECT(out, as_double.has_value(), "{}: integer without as_double", where.str());
    if (as_uint && as_int) {
      GGUFKIT_ROBUST_EXPECT(out, *as_int >= 0 && static_cast<uint64_t>(*as_int) == *as_uint,
                            "{}: as_uint {} and as_int {} disagree", where.str(), *as_uint, *as_int);
    }
    with_fixed_type(t, [&]<class T>(std::type_identity<T>) {
      const T exact = *v.get<T>();
      if constexpr (std::is_signed_v<T>) {
        GGUFKIT_ROBUST_EXPECT(out, as_int && *as_int == static_cast<int64_t>(exact), "{}: as_int differs from get", where.str());
        GGUFKIT_ROBUST_EXPECT(out, as_uint.has_value() == (exact >= 0), "{}: as_uint of {} is wrong", where.str(), exact);
      } else {
        GGUFKIT_ROBUST_EXPECT(out, as_uint && *as_uint == static_cast<uint64_t>(exact), "{}: as_uint differs from get", where.str());
        GGUFKIT_ROBUST_EXPECT(out, as_int.has_value() == (static_cast<uint64_t>(exact) <= uint64_t{INT64_MAX}),
                              "{}: as_int of {} is wrong", where.str(), exact);
      }
      GGUFKIT_ROBUST_EXPECT(out, as_double && *as_double == static_cast<double>(exact), "{}: as_double differs", where.str());
    });
  } else if (t == ValueType::Float32 || t == ValueType::Float64) {
    GGUFKIT_ROBUST_EXPECT(out, !as_uint && !as_int, "{}: a float converts to an integer", where.str());
    const double exact = t == ValueType::Float32 ? static_cast<double>(*v.get<float>()) : *v.get<double>();
    GGUFKIT_ROBUST_EXPECT(out, as_double && (same_bits(*as_double, exact) || (std::isnan(*as_double) && std::isnan(exact))),
                          "{}: as_double differs from get", where.str());
  } else {
    GGUFKIT_ROBUST_EXPECT(out, !as_uint && !as_int && !as_double, "{}: a {} converts to a number", where.str(),
                          value_type_name(t));
  }
}

// Indices at() and get<T>(i) are probed at: both ends and the middle (at() is O(i) for strings).
inline std::vector<uint64_t> probe_indices(uint64_t n) {
  std::vector<uint64_t> idx;
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, n / 2, n >= 2 ? n - 2 : 0, n >= 1 ? n - 1 : 0}) {
    if (i < n && std::find(idx.begin(), idx.end(), i) == idx.end()) idx.push_back(i);
  }
  return idx;
}

inline void check_array(Findings& out, const ArrayView& arr, uint32_t depth, const Where& where) {
  const ValueType elem = arr.element_type();
  const uint64_t n = arr.size();
  const std::span<const std::byte> payload = arr.payload();
  GGUFKIT_ROBUST_EXPECT(out, static_cast<uint32_t>(elem) < kValueTypeIdLimit, "{}: element type {}", where.str(),
                        static_cast<uint32_t>(elem));
  GGUFKIT_ROBUST_EXPECT(out, arr.empty() == (n == 0), "{}: empty() disagrees with size()", where.str());
  if (is_fixed_size(elem)) {
    GGUFKIT_ROBUST_EXPECT(out, payload.size() == n * value_type_size(elem), "{}: {} elements of {} in {} bytes", where.str(),
                          n, value_type_name(elem), payload.size());
  }

  // values(): contiguous elements that exactly cover the payload.
  const std::vector<uint64_t> probes = probe_indices(n);
  std::vector<ValueView> probed;
  uint64_t count = 0;
  uint64_t used = 0;
  for (const ValueView e : arr.values()) {
    const Where elem_where{&where, count};
    if (e.type() != elem) out.fail(fmt::format("{}: element has type {}", elem_where.str(), value_type_name(e.type())));
    if (e.encoded().data() != payload.data() + used || used + e.encoded().size() > payload.size() ||
        e.encoded().empty()) {
      out.fail(fmt::format("{}: element bytes not where the previous one ended", elem_where.str()));
      return;  // the iteration itself is lost; stop before walking off
    }
    used += e.encoded().size();
    if (std::find(probes.begin(), probes.end(), count) != probes.end()) probed.push_back(e);
    check_value(out, e, payload, depth + 1, elem_where);
    if (++count > n) break;
  }
  GGUFKIT_ROBUST_EXPECT(out, count == n, "{}: values() gave {} of {} elements", where.str(), count, n);
  GGUFKIT_ROBUST_EXPECT(out, used == payload.size(), "{}: elements cover {} of {} payload bytes", where.str(), used,
                        payload.size());

  // strings(): the same strings as values(), and nothing for other element types.
  const StringRange strings = arr.strings();
  if (elem == ValueType::String) {
    GGUFKIT_ROBUST_EXPECT(out, strings.size() == n, "{}: strings().size() {}", where.str(), strings.size());
    auto values_it = arr.values().begin();
    uint64_t i = 0;
    for (const std::string_view s : strings) {
      if (i >= n) break;
      const auto expected = (*values_it).as_string();
      if (!expected || *expected != s) {
        out.fail(fmt::format("{}[{}]: strings() and values() disagree", where.str(), i));
        break;
      }
      ++values_it;
      ++i;
    }
    GGUFKIT_ROBUST_EXPECT(out, i == n, "{}: strings() gave {} of {} strings", where.str(), i, n);
  } else {
    GGUFKIT_ROBUST_EXPECT(out, strings.size() == 0 && strings.begin() == strings.end(),
                          "{}: strings() of a {} array is not empty", where.str(), value_type_name(elem));
  }

  // at(i): the same bytes as the i-th element of values(); nothing past the end.
  for (size_t k = 0; k < probed.size(); ++k) {
    const auto e = arr.at(probes[k]);
    GGUFKIT_ROBUST_EXPECT(out, e && e->type() == elem && e->encoded().data() == probed[k].encoded().data() &&
                                   e->encoded().size() == probed[k].encoded().size(),
                          "{}: at({}) differs from values()", where.str(), probes[k]);
  }
  GGUFKIT_ROBUST_EXPECT(out, !arr.at(n).has_value(), "{}: at(size()) answers", where.str());
  GGUFKIT_ROBUST_EXPECT(out, !arr.at(std::numeric_limits<uint64_t>::max()).has_value(), "{}: at(max) answers", where.str());

  // get<T>(i) and copy_to for the element type; both refuse every other type.
  if (is_fixed_size(elem)) {
    with_fixed_type(elem, [&]<class T>(std::type_identity<T>) {
      std::vector<T> copy;
      const bool copied = arr.copy_to(copy);
      GGUFKIT_ROBUST_EXPECT(out, copied && copy.size() == n, "{}: copy_to gave {} of {} elements", where.str(), copy.size(), n);
      for (size_t k = 0; k < probed.size(); ++k) {
        const uint64_t i = probes[k];
        const auto got = arr.get<T>(i);
        const auto via_view = probed[k].get<T>();
        GGUFKIT_ROBUST_EXPECT(out, got && via_view && same_bits(*got, *via_view), "{}: get({}) differs from values()",
                              where.str(), i);
        if (copied && i < copy.size() && got) {
          const T copied_value = copy[static_cast<size_t>(i)];
          GGUFKIT_ROBUST_EXPECT(out, same_bits(copied_value, *got), "{}: copy_to[{}] differs from get", where.str(), i);
        }
      }
      GGUFKIT_ROBUST_EXPECT(out, !arr.get<T>(n).has_value(), "{}: get(size()) answers", where.str());
    });
  }
  if (elem != ValueType::UInt8) {
    std::vector<uint8_t> wrong;
    GGUFKIT_ROBUST_EXPECT(out, !arr.copy_to(wrong) && !arr.get<uint8_t>(0), "{}: uint8 access to a {} array", where.str(),
                          value_type_name(elem));
  }
  if (elem != ValueType::Float64) {
    std::vector<double> wrong;
    GGUFKIT_ROBUST_EXPECT(out, !arr.copy_to(wrong) && !arr.get<double>(0), "{}: float64 access to a {} array", where.str(),
                          value_type_name(elem));
  }
}

inline void check_value(Findings& out, const ValueView& value, std::span<const std::byte> container, uint32_t depth,
                        const Where& where) {
  const ValueType t = value.type();
  const std::span<const std::byte> enc = value.encoded();
  if (static_cast<uint32_t>(t) >= kValueTypeIdLimit) {
    out.fail(fmt::format("{}: value type id {}", where.str(), static_cast<uint32_t>(t)));
    return;
  }
  if (!within(enc, container)) {
    out.fail(fmt::format("{}: the value's bytes lie outside the file", where.str()));
    return;
  }
  if (depth > 16) {
    out.fail(fmt::format("{}: arrays nested {} deep", where.str(), depth));
    return;
  }
  const int getters = typed_getters_answering(value);
  if (is_fixed_size(t)) {
    GGUFKIT_ROBUST_EXPECT(out, getters == 1, "{}: {} typed getters answer", where.str(), getters);
    GGUFKIT_ROBUST_EXPECT(out, enc.size() == value_type_size(t), "{}: a {} in {} bytes", where.str(), value_type_name(t),
                          enc.size());
  } else {
    GGUFKIT_ROBUST_EXPECT(out, getters == 0, "{}: {} typed getters answer for a {}", where.str(), getters, value_type_name(t));
  }
  check_numeric_conversions(out, value, where);

  const auto s = value.as_string();
  GGUFKIT_ROBUST_EXPECT(out, s.has_value() == (t == ValueType::String), "{}: as_string on a {}", where.str(),
                        value_type_name(t));
  const auto s2 = value.get<std::string_view>();
  GGUFKIT_ROBUST_EXPECT(out, s.has_value() == s2.has_value() && (!s || *s == *s2), "{}: get<string_view> differs", where.str());
  if (s) {
    GGUFKIT_ROBUST_EXPECT(out, enc.size() == 8 + s->size() && s->data() == reinterpret_cast<const char*>(enc.data()) + 8,
                          "{}: string of {} bytes in {} encoded bytes", where.str(), s->size(), enc.size());
  }

  const auto arr = value.as_array();
  GGUFKIT_ROBUST_EXPECT(out, arr.has_value() == (t == ValueType::Array), "{}: as_array on a {}", where.str(),
                        value_type_name(t));
  if (arr) {
    GGUFKIT_ROBUST_EXPECT(out, arr->payload().data() == enc.data() + 12 && arr->payload().size() + 12 == enc.size(),
                          "{}: array payload is not the bytes after the 12-byte header", where.str());
    check_array(out, *arr, depth, where);
  }
}

// The JSON dump parses, has one entry per key and tensor, and says what the file says. (It is
// made of json::append_value and json::append_string, so this checks those too.)
inline void check_dump_json(Findings& out, const GgufFile& f) {
  std::string text;
  append_dump_json(text, f);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    out.fail(fmt::format("append_dump_json is not valid JSON: {}", e.what()));
    return;
  }
  try {
    GGUFKIT_ROBUST_EXPECT(out, doc.at("version") == f.version(), "json version");
    GGUFKIT_ROBUST_EXPECT(out, doc.at("alignment") == f.alignment(), "json alignment");
    GGUFKIT_ROBUST_EXPECT(out, doc.at("data_offset") == f.data_offset(), "json data_offset");
    GGUFKIT_ROBUST_EXPECT(out, doc.at("file_size") == f.file_size(), "json file_size");
    const auto& md = doc.at("metadata");
    GGUFKIT_ROBUST_EXPECT(out, md.size() == f.metadata().size(), "json has {} metadata entries", md.size());
    for (size_t i = 0; i < std::min(md.size(), f.metadata().size()); ++i) {
      const KeyValue& kv = f.metadata()[i];
      const auto& e = md[i];
      GGUFKIT_ROBUST_EXPECT(out, e.at("type") == value_type_name(kv.value.type()), "json type of key {}", i);
      const bool lossy = e.contains("lossy") && e.at("lossy") == true;
      if (!lossy) {
        GGUFKIT_ROBUST_EXPECT(out, e.at("key") == std::string(kv.key), "json key {} differs without lossy", i);
        if (const auto s = kv.value.as_string()) {
          GGUFKIT_ROBUST_EXPECT(out, e.at("value") == std::string(*s), "json string value of key {} differs", i);
        }
      }
      if (const auto arr = kv.value.as_array()) {
        GGUFKIT_ROBUST_EXPECT(out, e.at("count") == arr->size() && e.at("value").size() == arr->size(),
                              "json array count of key {}", i);
        GGUFKIT_ROBUST_EXPECT(out, e.at("array_type") == value_type_name(arr->element_type()), "json array type {}", i);
      } else if (const auto u = kv.value.as_uint(); u && kv.value.type() != ValueType::Bool) {
        GGUFKIT_ROBUST_EXPECT(out, e.at("value") == *u, "json integer value of key {}", i);
      } else if (const auto n = kv.value.as_int()) {
        GGUFKIT_ROBUST_EXPECT(out, e.at("value") == *n, "json integer value of key {}", i);
      }
    }
    const auto& ts = doc.at("tensors");
    GGUFKIT_ROBUST_EXPECT(out, ts.size() == f.tensors().size(), "json has {} tensors", ts.size());
    for (size_t i = 0; i < std::min(ts.size(), f.tensors().size()); ++i) {
      const TensorInfo& t = f.tensors()[i];
      const auto& e = ts[i];
      GGUFKIT_ROBUST_EXPECT(out, e.at("type") == type_name(t.type), "json tensor {} type", i);
      GGUFKIT_ROBUST_EXPECT(out, e.at("offset") == t.offset && e.at("size") == t.size, "json tensor {} place", i);
      GGUFKIT_ROBUST_EXPECT(out, e.at("shape").size() == t.n_dims, "json tensor {} shape", i);
      // Names that are not UTF-8 come out with U+FFFD and the entry marked lossy; others exactly.
      std::string name_json;
      const bool lossy = e.contains("lossy") && e.at("lossy") == true;
      if (json::append_string(name_json, t.name)) {
        GGUFKIT_ROBUST_EXPECT(out, !lossy && e.at("name") == std::string(t.name), "json tensor {} name", i);
      } else {
        GGUFKIT_ROBUST_EXPECT(out, lossy, "json tensor {}: a name that is not UTF-8 is not marked lossy", i);
      }
    }
  } catch (const std::exception& e) {
    out.fail(fmt::format("append_dump_json lacks a field: {}", e.what()));
  }
}

inline void check_conventions(Findings& out, const GgufFile& f) {
  const ModelMetadata m(f);
  const auto arch = m.architecture();
  const auto arch_value = f.get(keys::kArchitecture);
  GGUFKIT_ROBUST_EXPECT(out, arch == (arch_value ? arch_value->as_string() : std::nullopt), "architecture()");
  const auto ctx_key = m.arch_key("context_length");
  GGUFKIT_ROBUST_EXPECT(out, ctx_key.has_value() == arch.has_value(), "arch_key without an architecture");
  if (ctx_key && arch) GGUFKIT_ROBUST_EXPECT(out, *ctx_key == std::string(*arch) + ".context_length", "arch_key");
  if (const auto tokens = m.tokens()) {
    GGUFKIT_ROBUST_EXPECT(out, f.get(keys::kTokens)->type() == ValueType::Array, "tokens() of a non-array");
  }
  // The rest must simply answer (or not) without crashing; touch every answer.
  size_t answers = 0;
  for (const auto& o : {m.name(), m.type(), m.tokenizer_model(), m.tokenizer_pre(), m.chat_template(),
                        m.chat_template("tool_use"), m.rope_scaling_type(), m.arch_string("rope.scaling.type")}) {
    answers += o.has_value() ? o->size() : 0;
  }
  for (const auto& o : {m.file_type(), m.quantization_version(), m.context_length(), m.embedding_length(),
                        m.block_count(), m.feed_forward_length(), m.head_count(), m.head_count_kv(), m.key_length(),
                        m.value_length(), m.expert_count(), m.expert_used_count(), m.vocab_size(),
                        m.rope_dimension_count(), m.rope_scaling_original_context_length(), m.bos_token_id(),
                        m.eos_token_id(), m.unknown_token_id(), m.separator_token_id(), m.padding_token_id(),
                        m.eot_token_id(), m.uint("general.alignment")}) {
    answers += o.value_or(0) & 1;
  }
  for (const auto& o : {m.rms_norm_epsilon(), m.rope_freq_base(), m.rope_scaling_factor(), m.number("general.alignment")}) {
    answers += o.has_value();
  }
  for (const auto& o : {m.add_bos_token(), m.add_eos_token(), m.boolean("general.alignment")}) answers += o.value_or(false);
  for (const auto& o : {m.tokens(), m.token_types(), m.scores(), m.merges()}) answers += o ? o->size() & 1 : 0;
  if (const auto ft = m.file_type(); ft && *ft <= UINT32_MAX) {
    if (const FileTypeInfo* info = find_file_type(static_cast<uint32_t>(*ft))) answers += info->name.size();
  }
  touch(static_cast<std::byte>(answers));
}

inline void check_summary(Findings& out, const GgufFile& f) {
  const FileSummary s = summarize(f);
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  for (const TensorInfo& t : f.tensors()) {
    parameters += static_cast<uint64_t>(t.n_elements());
    bytes += t.size;
  }
  GGUFKIT_ROBUST_EXPECT(out, s.parameters == parameters, "summary parameters {} vs {}", s.parameters, parameters);
  GGUFKIT_ROBUST_EXPECT(out, s.tensor_bytes == bytes && f.tensor_bytes() == bytes, "summary bytes");
  uint64_t tensors = 0;
  for (size_t i = 0; i < s.types.size(); ++i) {
    tensors += s.types[i].tensors;
    if (i > 0) GGUFKIT_ROBUST_EXPECT(out, s.types[i - 1].elements >= s.types[i].elements, "summary order at {}", i);
    for (size_t j = 0; j < i; ++j) GGUFKIT_ROBUST_EXPECT(out, s.types[j].type != s.types[i].type, "type listed twice");
  }
  GGUFKIT_ROBUST_EXPECT(out, tensors == f.tensors().size(), "summary counts {} tensors", tensors);
  if (parameters == 0) {
    GGUFKIT_ROBUST_EXPECT(out, s.bits_per_weight == 0.0, "bits per weight without parameters");
  } else {
    GGUFKIT_ROBUST_EXPECT(out, std::isfinite(s.bits_per_weight) && s.bits_per_weight >= 0.0, "bits per weight");
  }
}

inline void check_tensors(Findings& out, const GgufFile& f) {
  const std::span<const std::byte> bytes = f.bytes();
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    const std::string where = fmt::format("tensor {}", i);
    GGUFKIT_ROBUST_EXPECT(out, t.name.size() <= kMaxTensorNameBytes, "{}: name of {} bytes", where, t.name.size());
    GGUFKIT_ROBUST_EXPECT(out, f.find_tensor(t.name) == &t, "{}: find_tensor finds another", where);
    GGUFKIT_ROBUST_EXPECT(out, t.info_offset < f.header_size(), "{}: info offset {}", where, t.info_offset);
    const TypeTraits* traits = find_type_traits(static_cast<uint32_t>(t.type));
    if (traits == nullptr || traits->status != TypeStatus::supported || traits->block_size == 0) {
      out.fail(fmt::format("{}: accepted type id {}", where, static_cast<uint32_t>(t.type)));
      continue;
    }
    GGUFKIT_ROBUST_EXPECT(out, t.n_dims <= kMaxDimensions && t.shape().size() == t.n_dims, "{}: {} dims", where, t.n_dims);
    bool shape_ok = true;
    for (uint32_t d = 0; d < kMaxDimensions; ++d) {
      shape_ok &= t.ne[d] >= 0 && (d < t.n_dims || t.ne[d] == 1);
    }
    GGUFKIT_ROBUST_EXPECT(out, shape_ok, "{}: shape", where);
    if (!shape_ok) continue;
    // Size from the shape, computed here with overflow checks: rows times row size (nothing at
    // all when a dimension is 0, however large the others).
    const bool empty = std::find(t.ne.begin(), t.ne.end(), int64_t{0}) != t.ne.end();
    const auto row = row_size(t.type, t.ne[0]);
    uint64_t rows = 1;
    bool overflow = !empty && !row.has_value();
    for (uint32_t d = 1; d < kMaxDimensions; ++d) {
      overflow |= __builtin_mul_overflow(rows, static_cast<uint64_t>(t.ne[d]), &rows);
    }
    uint64_t size = 0;
    if (!empty) overflow |= !row || __builtin_mul_overflow(*row, rows, &size);
    GGUFKIT_ROBUST_EXPECT(out, (empty || !overflow) && size == t.size, "{}: size {} for shape and type ({})", where,
                          t.size, size);
    GGUFKIT_ROBUST_EXPECT(out, t.offset == expected_offset, "{}: offset {} (expected {})", where, t.offset,
                          expected_offset);
    expected_offset = t.offset + (t.size + f.alignment() - 1) / f.alignment() * f.alignment();

    const std::span<const std::byte> data = f.tensor_data(t);
    GGUFKIT_ROBUST_EXPECT(out, data.size() == t.size && within(data, bytes), "{}: data span outside the file", where);
    GGUFKIT_ROBUST_EXPECT(out, data.data() == bytes.data() + f.data_offset() + t.offset, "{}: data span placement", where);
    GGUFKIT_ROBUST_EXPECT(out, (f.data_offset() + t.offset) % f.alignment() == 0, "{}: data not aligned", where);
    if (!data.empty() && within(data, bytes)) {
      touch(data.front());
      touch(data.back());
    }
  }
}

// GgufBuilder::from_file + write, then parse what was written: the same header, byte for byte,
// and the same tensor bytes.
inline void check_round_trip(Findings& out, const GgufFile& f) {
  const GgufBuilder builder = GgufBuilder::from_file(f);
  GGUFKIT_ROBUST_EXPECT(out, builder.metadata_count() == f.metadata().size(), "builder has {} keys",
                        builder.metadata_count());
  GGUFKIT_ROBUST_EXPECT(out, builder.tensor_count() == f.tensors().size(), "builder has {} tensors",
                        builder.tensor_count());
  GGUFKIT_ROBUST_EXPECT(out, builder.alignment() == f.alignment() && builder.version() == f.version(),
                        "builder alignment/version");
  const WriteOptions options = builder.suggested_options();
  MemorySink sink;
  const uint64_t expected_size = builder.file_bytes(options);
  sink.data.reserve(static_cast<size_t>(std::min<uint64_t>(expected_size, uint64_t{1} << 31)));
  const auto written = builder.write(sink, options);
  if (!written) {
    out.fail("write failed: " + written.error().describe());
    return;
  }
  GGUFKIT_ROBUST_EXPECT(out, sink.data.size() == expected_size, "wrote {} bytes, file_bytes says {}",
                        sink.data.size(), expected_size);
  // An exact-size copy, so a read past the end of what was written is caught too.
  const std::vector<std::byte> copy(sink.data.begin(), sink.data.end());
  const auto again = GgufFile::parse(copy);
  if (!again) {
    out.fail("re-parse of the written file failed: " + again.error().describe());
    return;
  }
  const GgufFile& g = *again;
  if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size()) {
    out.fail(fmt::format("round trip changed the counts: {} keys, {} tensors -> {} keys, {} tensors",
                         f.metadata().size(), f.tensors().size(), g.metadata().size(), g.tensors().size()));
    return;
  }
  GGUFKIT_ROBUST_EXPECT(out, g.version() == f.version() && g.alignment() == f.alignment(), "round trip version");
  GGUFKIT_ROBUST_EXPECT(out, g.header_size() == f.header_size() && g.data_offset() == f.data_offset(),
                        "round trip header size {} -> {}, data offset {} -> {}", f.header_size(), g.header_size(),
                        f.data_offset(), g.data_offset());
  if (!f.tensors().empty()) {
    GGUFKIT_ROBUST_EXPECT(out, builder.header_bytes(options) == g.data_offset(), "header_bytes {} vs data offset {}",
                          builder.header_bytes(options), g.data_offset());
  }
  if (g.header_size() == f.header_size()) {
    GGUFKIT_ROBUST_EXPECT(out, std::memcmp(g.bytes().data(), f.bytes().data(), static_cast<size_t>(f.header_size())) == 0,
                          "the rewritten header differs from the original");
  }
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const KeyValue& a = f.metadata()[i];
    const KeyValue& b = g.metadata()[i];
    GGUFKIT_ROBUST_EXPECT(out, a.key == b.key && a.value.type() == b.value.type() &&
                                   a.value.encoded().size() == b.value.encoded().size() &&
                                   std::memcmp(a.value.encoded().data(), b.value.encoded().data(),
                                               a.value.encoded().size()) == 0,
                          "round trip changed key {}", i);
  }
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& a = f.tensors()[i];
    const TensorInfo& b = g.tensors()[i];
    GGUFKIT_ROBUST_EXPECT(out, a.name == b.name && a.type == b.type && a.n_dims == b.n_dims && a.ne == b.ne &&
                                   a.offset == b.offset && a.size == b.size,
                          "round trip changed tensor {}", i);
    const auto data_a = f.tensor_data(a);
    const auto data_b = g.tensor_data(b);
    GGUFKIT_ROBUST_EXPECT(out, data_a.size() == data_b.size() &&
                                   (data_a.empty() || std::memcmp(data_a.data(), data_b.data(), data_a.size()) == 0),
                          "round trip changed the data of tensor {}", i);
  }
}

// Everything a consumer may do with a parsed file. `input` is the buffer it was parsed from.
inline void exercise_file(Findings& out, const GgufFile& f, std::span<const std::byte> input) {
  GGUFKIT_ROBUST_EXPECT(out, f.bytes().data() == input.data() && f.file_size() == input.size(), "bytes() is not the input");
  GGUFKIT_ROBUST_EXPECT(out, f.version() == 2 || f.version() == 3, "version {}", f.version());
  GGUFKIT_ROBUST_EXPECT(out, f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0, "alignment {}",
                        f.alignment());
  GGUFKIT_ROBUST_EXPECT(out, f.header_size() <= f.data_offset() && f.data_offset() <= f.file_size(),
                        "header size {}, data offset {}, file size {}", f.header_size(), f.data_offset(), f.file_size());
  if (f.tensors().empty()) {
    GGUFKIT_ROBUST_EXPECT(out, f.data_offset() == f.header_size(), "data offset without tensors");
  } else {
    GGUFKIT_ROBUST_EXPECT(out, f.data_offset() - f.header_size() < f.alignment() && f.data_offset() % f.alignment() == 0,
                          "data offset {} is not the header end {} aligned to {}", f.data_offset(), f.header_size(),
                          f.alignment());
  }
  // Views of a big-endian file point into its byte-swapped copy of the header.
  const std::span<const std::byte> header =
      f.byte_order() == ByteOrder::big ? f.header_view()
                                       : input.first(static_cast<size_t>(std::min<uint64_t>(f.header_size(), input.size())));
  GGUFKIT_ROBUST_EXPECT(out, f.header_view().size() == f.header_size(), "header_view() of {} bytes", f.header_view().size());

  const auto alignment_value = f.get(keys::kAlignment);
  GGUFKIT_ROBUST_EXPECT(out, f.alignment() == (alignment_value ? alignment_value->get<uint32_t>().value_or(0) : kDefaultAlignment),
                        "alignment() disagrees with general.alignment");
  GGUFKIT_ROBUST_EXPECT(out, f.find("") == nullptr, "find(\"\") answers");
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const KeyValue& kv = f.metadata()[i];
    const Where where{nullptr, i};
    GGUFKIT_ROBUST_EXPECT(out, !kv.key.empty(), "{}: empty key", where.str());
    GGUFKIT_ROBUST_EXPECT(out, f.find(kv.key) == &kv, "{}: find() gives another record", where.str());
    const auto got = f.get(kv.key);
    GGUFKIT_ROBUST_EXPECT(out, got && got->encoded().data() == kv.value.encoded().data(), "{}: get() differs", where.str());
    GGUFKIT_ROBUST_EXPECT(out, kv.offset < f.header_size(), "{}: offset {}", where.str(), kv.offset);
    const std::span<const std::byte> key_bytes(reinterpret_cast<const std::byte*>(kv.key.data()), kv.key.size());
    GGUFKIT_ROBUST_EXPECT(out, within(key_bytes, header), "{}: key outside the header", where.str());
    check_value(out, kv.value, header, 0, where);
  }
  check_tensors(out, f);
  check_summary(out, f);
  check_conventions(out, f);
  check_dump_json(out, f);
  check_round_trip(out, f);
}

// What every rejection must carry: a known code, a sentence, and an offset inside the input.
inline void check_parse_error(Findings& out, const Error& e, uint64_t input_size) {
  const std::string_view name = error_code_name(e.code);
  GGUFKIT_ROBUST_EXPECT(out, !name.empty() && name != "unknown_error", "code {}", static_cast<int>(e.code));
  // Parsing bytes in memory cannot fail with an I/O error or a caller's bad argument.
  GGUFKIT_ROBUST_EXPECT(out, e.code != ErrorCode::io_error && e.code != ErrorCode::invalid_argument, "parse gave {}", name);
  GGUFKIT_ROBUST_EXPECT(out, !e.message.empty(), "{} without a message", name);
  const std::string described = e.describe();
  GGUFKIT_ROBUST_EXPECT(out, !described.empty() && described.find(e.message) != std::string::npos,
                        "describe() '{}' lacks the message", described);
  // A parse error always says where it is.
  GGUFKIT_ROBUST_EXPECT(out, e.offset.has_value(), "{} without an offset ({})", name, described);
  GGUFKIT_ROBUST_EXPECT(out, e.offset.value_or(0) <= input_size, "{} at offset {} past the end of a {} byte input ({})",
                        name, e.offset.value_or(0), input_size, described);
}

// Stricter options never accept more: a file accepted with max_array_depth 1 is accepted with the
// default, and one the default accepts fails with the strict options only for nesting.
inline void check_option_monotonicity(Findings& out, std::span<const std::byte> input, bool default_ok) {
  OpenOptions strict;
  strict.max_array_depth = 1;
  const auto r = GgufFile::parse(input, strict);
  if (r) {
    GGUFKIT_ROBUST_EXPECT(out, default_ok, "accepted with max_array_depth 1 but not with the default");
  } else if (default_ok) {
    GGUFKIT_ROBUST_EXPECT(out, r.error().code == ErrorCode::array_too_deep,
                          "the default accepts, max_array_depth 1 says {}", r.error().describe());
  }
}

// Parsing that collects problems (gguf check's mode) agrees with the default: it accepts what the
// default accepts, with no problems; what the default rejects it rejects or notes problems about.
// The files it accepts in spite of problems stay safe to walk. Then gguf check itself: it always
// returns, with an error for every input the default rejects, each finding complete.
inline void check_collecting_problems(Findings& out, std::span<const std::byte> input, bool default_ok) {
  std::vector<Error> problems;
  OpenOptions options;
  options.on_problem = [&](const Error& e) {
    problems.push_back(e);
    return true;
  };
  const auto f = GgufFile::parse(input, options);
  if (default_ok) {
    GGUFKIT_ROBUST_EXPECT(out, f.has_value() && problems.empty(), "collecting problems rejects or notes {} problems "
                          "in a file the default accepts", problems.size());
  } else {
    GGUFKIT_ROBUST_EXPECT(out, !f || !problems.empty(), "a rejected file parses without problems when collecting");
  }
  for (const Error& e : problems) check_parse_error(out, e, input.size());
  if (f) {
    for (const TensorInfo& t : f->tensors()) {
      const auto data = f->tensor_data(t);
      GGUFKIT_ROBUST_EXPECT(out, data.empty() || within(data, input), "tensor data outside the input");
      GGUFKIT_ROBUST_EXPECT(out, t.n_elements() >= 0, "negative element count");
    }
  }
  const CheckReport report = check_bytes(input);
  GGUFKIT_ROBUST_EXPECT(out, default_ok || report.count(Severity::error) > 0, "check finds no error in a rejected file");
  for (const Finding& finding : report.findings) {
    GGUFKIT_ROBUST_EXPECT(out, !finding.code.empty() && !finding.message.empty(), "finding without code or message");
    GGUFKIT_ROBUST_EXPECT(out, !finding.offset || *finding.offset <= input.size(), "finding {} at offset {} past the end",
                          finding.code, *finding.offset);
  }
}

// Parses `input` and exercises the result or checks the error. The one entry point of the fuzzer.
inline void parse_and_exercise(Findings& out, std::span<const std::byte> input) {
  const auto f = GgufFile::parse(input);
  if (f) {
    exercise_file(out, *f, input);
  } else {
    check_parse_error(out, f.error(), input.size());
  }
  check_option_monotonicity(out, input, f.has_value());
  check_collecting_problems(out, input, f.has_value());
}

}  // namespace ggufkit::robust
