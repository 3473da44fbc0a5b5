// JSON output of a whole file (`gguf dump --json`), and the primitives it is built from.
// Conventions: 64-bit integers are exact JSON integers; floats print the shortest text that reads
// back to the same float32 (or float64), always with a '.' or an exponent (1.0, -0.0, 1e+20);
// NaN and infinities are the strings "nan", "inf", "-inf"; bytes that are not UTF-8 become U+FFFD
// and the entry is marked "lossy": true.
#pragma once

#include <string>
#include <string_view>

#include "ggufkit/reader.h"

namespace ggufkit {

struct JsonDumpOptions {
  bool metadata = true;
  bool tensors = true;
};

void append_dump_json(std::string& out, const GgufFile& file, const JsonDumpOptions& options = {});

namespace json {
// Appends s as a JSON string literal. Returns false when s was not valid UTF-8 (replaced bytes).
bool append_string(std::string& out, std::string_view s);
void append_float(std::string& out, float v);
void append_double(std::string& out, double v);
// Appends the value as JSON (arrays in full). Returns false when a string in it was not UTF-8.
bool append_value(std::string& out, const ValueView& value);
}  // namespace json

}  // namespace ggufkit
