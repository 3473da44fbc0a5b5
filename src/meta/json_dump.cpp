#include "ggufkit/json.h"

#include <cmath>

#include <fmt/format.h>

#include "ggufkit/text.h"

namespace ggufkit {
namespace json {
bool append_string(std::string& out, std::string_view s) {
  bool valid = true;
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      // Copy a run of plain ASCII at once.
      size_t j = i + 1;
      while (j < s.size()) {
        const auto d = static_cast<unsigned char>(s[j]);
        if (d < 0x20 || d >= 0x7F || d == '"' || d == '\\') break;
        ++j;
      }
      out.append(s.data() + i, j - i);
      i = j;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default: out += fmt::format("\\u{:04x}", c);
      }
      ++i;
      continue;
    }
    char32_t cp = 0;
    const size_t n = utf8_sequence(s, i, cp);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      valid = false;
      ++i;
    } else if (is_terminal_control(cp)) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));  // C1, bidi: escaped, never raw
      i += n;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  out += '"';
  return valid;
}

template <class F>
static void append_floating(std::string& out, F v) {
  if (std::isnan(v)) {
    out += "\"nan\"";
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"inf\"" : "\"-inf\"";
  } else {
    // The shortest text that reads back exactly, always spelled as a float ("1.0", "-0.0") so
    // that JSON readers do not turn it into an integer and lose the sign of zero.
    const size_t start = out.size();
    fmt::format_to(std::back_inserter(out), "{}", v);
    if (out.find_first_of(".e", start) == std::string::npos) out += ".0";
  }
}

void append_float(std::string& out, float v) { append_floating(out, v); }
void append_double(std::string& out, double v) { append_floating(out, v); }

bool append_value(std::string& out, const ValueView& value) {
  auto it = std::back_inserter(out);
  switch (value.type()) {
    case ValueType::UInt8: fmt::format_to(it, "{}", *value.get<uint8_t>()); return true;
    case ValueType::Int8: fmt::format_to(it, "{}", *value.get<int8_t>()); return true;
    case ValueType::UInt16: fmt::format_to(it, "{}", *value.get<uint16_t>()); return true;
    case ValueType::Int16: fmt::format_to(it, "{}", *value.get<int16_t>()); return true;
    case ValueType::UInt32: fmt::format_to(it, "{}", *value.get<uint32_t>()); return true;
    case ValueType::Int32: fmt::format_to(it, "{}", *value.get<int32_t>()); return true;
    case ValueType::UInt64: fmt::format_to(it, "{}", *value.get<uint64_t>()); return true;
    case ValueType::Int64: fmt::format_to(it, "{}", *value.get<int64_t>()); return true;
    case ValueType::Float32: append_float(out, *value.get<float>()); return true;
    case ValueType::Float64: append_double(out, *value.get<double>()); return true;
    case ValueType::Bool: out += *value.get<bool>() ? "true" : "false"; return true;
    case ValueType::String: return append_string(out, value.as_string().value_or(""));
    case ValueType::Array: {
      bool valid = true;
      out += '[';
      bool first = true;
      const auto arr = value.as_array();
      if (arr && arr->element_type() == ValueType::String) {
        for (std::string_view s : arr->strings()) {
          if (!first) out += ',';
          first = false;
          valid &= append_string(out, s);
        }
      } else if (arr) {
        for (const ValueView e : arr->values()) {
          if (!first) out += ',';
          first = false;
          valid &= append_value(out, e);
        }
      }
      out += ']';
      return valid;
    }
  }
  return true;
}

}  // namespace json

namespace {

// Lower-case hex of the bytes: what a lossy string was, exactly.
std::string hex_of(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// The exact bytes of a value whose strings were not all UTF-8: a string's hex, or for an array of
// strings every element's (arrays of arrays: nested the same way); nothing for other values.
void write_value_hex(json::Writer& w, const ValueView& value) {
  if (value.type() == ValueType::String) {
    w.value(hex_of(value.as_string().value_or("")));
    return;
  }
  const auto arr = value.as_array();
  w.begin_array();
  if (arr && arr->element_type() == ValueType::String) {
    for (std::string_view s : arr->strings()) w.value(hex_of(s));
  } else if (arr && arr->element_type() == ValueType::Array) {
    for (const ValueView e : arr->values()) write_value_hex(w, e);
  }
  w.end_array();
}

}  // namespace

void write_dump_tensor(json::Writer& w, const TensorInfo& t, std::optional<uint32_t> shard) {
  w.take_lossy();
  w.begin_object().member("name", t.name);
  const bool lossy = w.take_lossy();
  w.member("type", type_name(t.type)).key("shape").array(t.shape());
  if (shard) w.member("shard", *shard);
  w.member("offset", t.offset).member("size", t.size).member("info_offset", t.info_offset);
  if (lossy) w.member("lossy", true).member("name_hex", hex_of(t.name));
  w.end_object();
}

void write_dump_entry(json::Writer& w, const KeyValue& kv) {
  w.take_lossy();
  w.begin_object().member("key", kv.key);
  const bool lossy_key = w.take_lossy();
  w.member("offset", kv.offset).member("type", value_type_name(kv.value.type()));
  if (const auto arr = kv.value.as_array()) {
    w.member("array_type", value_type_name(arr->element_type())).member("count", arr->size());
  }
  w.member("value", kv.value);
  const bool lossy_value = w.take_lossy();
  if (lossy_key || lossy_value) w.member("lossy", true);
  if (lossy_key) w.member("key_hex", hex_of(kv.key));
  if (lossy_value) {
    w.key("value_hex");
    write_value_hex(w, kv.value);
  }
  w.end_object();
}

void append_dump_members(json::Writer& w, const GgufFile& file, const JsonDumpOptions& options) {
  if (!options.file.empty()) w.member("file", options.file);
  w.member("version", file.version())
      .member("byte_order", byte_order_name(file.byte_order()))
      .member("alignment", file.alignment())
      .member("data_offset", file.data_offset())
      .member("file_size", file.file_size())
      .member("tensor_data", file.has_tensor_data());
  if (options.metadata) {
    w.key("metadata").begin_array();
    for (const KeyValue& kv : file.metadata()) write_dump_entry(w, kv);
    w.end_array();
  }
  if (options.tensors) {
    w.key("tensors").begin_array();
    for (const TensorInfo& t : file.tensors()) write_dump_tensor(w, t);
    w.end_array();
  }
}

void append_dump_json(std::string& out, const GgufFile& file, const JsonDumpOptions& options) {
  json::Writer w(out);
  w.begin_object();
  append_dump_members(w, file, options);
  w.end_object();
  out += '\n';
}

}  // namespace ggufkit
