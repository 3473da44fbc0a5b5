// The one printer behind the text and the JSON output of the report verbs (info, check, diff,
// hash --check, dump), after llvm-readobj's ScopedPrinter / JSONScopedPrinter: a verb states its
// result once, in the order people read it, and the printer --json chose lays it out. Every fact
// a verb shows people is a field, so the JSON cannot leave out what the text says.
//
// A result is made of
//   objects and arrays: JSON structure (the text layout ignores them);
//   lines:              text layout, "LABEL" then the texts of the fields stated until end_line()
//                       (JSON ignores them); a line none of whose fields has text is not printed;
//   fields:             a JSON member (an element inside an array) and, when given, its text: in
//                       the current line, or a line of its own outside one;
//   text:               people only: punctuation inside a line, or a heading line of its own.
//
//   Printer& p = ...;
//   p.begin_object();
//   p.begin_line("  format        ");
//   p.field("version", 3, "GGUF v3");
//   p.field("alignment", 32, ", alignment 32");
//   p.end_line();
//   p.end_object();
//   // text: "  format        GGUF v3, alignment 32\n"   JSON: {"version":3,"alignment":32}
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ggufkit/json.h"

namespace gguf_cli {

class Printer {
 public:
  virtual ~Printer() = default;

  // Text when `json` is false, else one JSON document (and a newline); both appended to `out`.
  static std::unique_ptr<Printer> make(bool json, std::string& out);
  virtual bool json() const = 0;

  // JSON: an object or an array, the member `key` of the object it is in (an element in an array).
  virtual Printer& begin_object(std::string_view key = {}) = 0;
  virtual Printer& end_object() = 0;
  virtual Printer& begin_array(std::string_view key = {}) = 0;
  virtual Printer& end_array() = 0;

  // Text: one line that starts with `label` (verbatim: the verb pads it).
  virtual Printer& begin_line(std::string_view label = {}) = 0;
  virtual Printer& end_line() = 0;

  // A field whose JSON value `write` writes; `text` is what people see of it (none: JSON only).
  virtual Printer& field_with(std::string_view key, const std::function<void(ggufkit::json::Writer&)>& write,
                              std::optional<std::string_view> text) = 0;
  // A field whose JSON value is `value` (anything json::Writer::value takes: numbers, strings,
  // booleans, optionals as null, ValueView).
  template <class T>
  Printer& field(std::string_view key, const T& value, std::optional<std::string_view> text = std::nullopt) {
    return field_with(key, [&](ggufkit::json::Writer& w) { w.value(value); }, text);
  }
  // A field whose JSON value is an array of the values of a range.
  template <class R>
  Printer& array_field(std::string_view key, const R& values, std::optional<std::string_view> text = std::nullopt) {
    return field_with(key, [&](ggufkit::json::Writer& w) { w.array(values); }, text);
  }

  // People only: in a line, appended to it; outside one, a line of its own ("" is a blank line).
  virtual Printer& text(std::string_view s) = 0;
};

}  // namespace gguf_cli
