// JSON output of a whole file (`gguf dump --json`), and the primitives it is built from.
// Conventions: 64-bit integers are exact JSON integers; floats print the shortest text that reads
// back to the same float32 (or float64), always with a '.' or an exponent (1.0, -0.0, 1e+20);
// NaN and infinities are the strings "nan", "inf", "-inf"; bytes that are not UTF-8 become U+FFFD
// and the entry is marked "lossy": true.
#pragma once

#include <optional>
#include <ranges>
#include <string>
#include <type_traits>
#include <utility>
#include <string_view>

#include "ggufkit/reader.h"

namespace ggufkit {

struct JsonDumpOptions {
  bool metadata = true;
  bool tensors = true;
  std::string file{};  // the file's name as the caller has it ("file"; left out when empty)
};

void append_dump_json(std::string& out, const GgufFile& file, const JsonDumpOptions& options = {});

namespace json {
// Appends s as a JSON string literal. Returns false when s was not valid UTF-8 (replaced bytes).
bool append_string(std::string& out, std::string_view s);
void append_float(std::string& out, float v);
void append_double(std::string& out, double v);
// Appends the value as JSON (arrays in full). Returns false when a string in it was not UTF-8.
bool append_value(std::string& out, const ValueView& value);

// The one way ggufkit and its CLI build JSON: compact, appended to a string, commas and nesting
// kept track of, every string escaped by append_string, every float by append_float/append_double.
//   Writer w(out); w.begin_object(); w.key("ok"); w.value(true); w.end_object();  // {"ok":true}
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  Writer& begin_object() { return open('{'); }
  Writer& end_object() { return close('}'); }
  Writer& begin_array() { return open('['); }
  Writer& end_array() { return close(']'); }
  // An object member's name; its value follows.
  Writer& key(std::string_view k) {
    separate();
    note(append_string(out_, k));
    out_ += ':';
    after_key_ = true;
    return *this;
  }

  Writer& value(std::string_view s) { return scalar([&] { note(append_string(out_, s)); }); }
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(bool b) { return raw(b ? "true" : "false"); }
  Writer& value(double d) { return scalar([&] { append_double(out_, d); }); }
  Writer& value(float f) { return scalar([&] { append_float(out_, f); }); }
  Writer& value(const ValueView& v) { return scalar([&] { note(append_value(out_, v)); }); }
  template <class T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  Writer& value(T n) {
    return raw(std::to_string(n));
  }
  Writer& null() { return raw("null"); }
  // The value, or null when there is none.
  template <class T>
  Writer& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }
  // An array of the values of a range (a shape, a list of names).
  template <class R>
    requires std::ranges::input_range<R> && (!std::is_convertible_v<const R&, std::string_view>)
  Writer& array(const R& values) {
    begin_array();
    for (const auto& v : values) value(v);
    return end_array();
  }
  // Text that is already JSON.
  Writer& raw(std::string_view json) {
    return scalar([&] { out_ += json; });
  }
  // Whether a string written since the last call was not valid UTF-8 (its bad bytes became
  // U+FFFD); clears the flag, so a caller can mark the entry it just wrote "lossy".
  bool take_lossy() { return std::exchange(lossy_, false); }
  // key(k) then value(v).
  template <class T>
  Writer& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

 private:
  Writer& open(char c) {
    separate();
    out_ += c;
    first_ = true;
    return *this;
  }
  Writer& close(char c) {
    out_ += c;
    first_ = false;
    return *this;
  }
  template <class F>
  Writer& scalar(F&& emit) {
    separate();
    emit();
    first_ = false;
    return *this;
  }
  void note(bool valid) { lossy_ |= !valid; }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) out_ += ',';
    first_ = false;
  }

  std::string& out_;
  bool first_ = true;
  bool after_key_ = false;
  bool lossy_ = false;
};
}  // namespace json

// One entry of a dump's "metadata" array: key, type, array_type and count for arrays, the value in
// full, and "lossy": true when a string in it is not UTF-8.
void write_dump_entry(json::Writer& w, const KeyValue& kv);
// One entry of a dump's "tensors" array: name, type, shape, the shard index when `shard` is given,
// offset, size, and "lossy": true when the name is not UTF-8.
void write_dump_tensor(json::Writer& w, const TensorInfo& t, std::optional<uint32_t> shard = std::nullopt);

// The members of append_dump_json's object, into an object the caller has opened (split models
// add their shards to it: split.h).
void append_dump_members(json::Writer& w, const GgufFile& file, const JsonDumpOptions& options = {});

}  // namespace ggufkit
