// `gguf dump`: the JSON shape, complete and exact values (compared with the library's ValueViews),
// the text mode's shortening, and valid JSON for files whose strings are not UTF-8 or whose floats
// are NaN or infinite.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ggufkit/ggufkit.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::ArrayView;
using ggufkit::GgufBuilder;
using ggufkit::GgufFile;
using ggufkit::MetadataValue;
using ggufkit::ValueType;
using ggufkit::ValueView;
using ggufkit::test::CommandResult;
using ggufkit::test::run_gguf;
using ggufkit::test::sample_model;
using ggufkit::test::shared_dir;
using ggufkit::test::temp_dir;
using nlohmann::json;

// The same document with every floating-point number kept as the text the tool printed (a JSON
// string holding it), so that float32 values are read with strtof, straight from the text, and
// compared bit for bit without going through a double first.
class RawFloatParser : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  using Base::Base;
  bool number_float(double /*parsed*/, const std::string& text) {
    std::string copy = text;
    return Base::string(copy);
  }
};

json parse_keeping_float_text(const std::string& text) {
  json doc;
  RawFloatParser parser(doc);
  json::sax_parse(text, &parser);
  return doc;
}

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

GgufFile open_or_fail(const fs::path& path) {
  auto f = GgufFile::open(path);
  if (!f) throw std::runtime_error(f.error().describe());
  return std::move(f).value();
}

// Whether s is valid UTF-8, judged by nlohmann (which refuses to serialise anything else).
bool is_utf8(std::string_view s) {
  try {
    (void)json(std::string(s)).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// The JSON for a float: a number that reads back to the same bits, or "nan"/"inf"/"-inf".
// `text` is the same value from parse_keeping_float_text().
template <class F>
void expect_float(const json& j, const json& text, F expected, const std::string& where) {
  if (std::isnan(expected)) {
    EXPECT_EQ(j, "nan") << where;
  } else if (std::isinf(expected)) {
    EXPECT_EQ(j, expected > 0 ? "inf" : "-inf") << where;
  } else {
    ASSERT_TRUE(j.is_number()) << where << ": " << j.dump();
    using Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
    // An integer is converted exactly once; a float is read from its text with strtof/strtod.
    const std::string digits = text.is_string() ? text.get<std::string>() : text.dump();
    const F got = sizeof(F) == 4 ? static_cast<F>(std::strtof(digits.c_str(), nullptr))
                                 : static_cast<F>(std::strtod(digits.c_str(), nullptr));
    EXPECT_EQ(std::bit_cast<Bits>(got), std::bit_cast<Bits>(expected))
        << where << ": " << j.dump() << " reads back as " << got << ", the file holds " << expected;
  }
}

// Compares one JSON value with the value in the file, completely. Returns whether every string
// in it was valid UTF-8 (so whether the entry must be marked lossy).
bool expect_value(const json& j, const json& text, const ValueView& v, const std::string& where) {
  switch (v.type()) {
    case ValueType::UInt8: EXPECT_EQ(j, *v.get<uint8_t>()) << where; return true;
    case ValueType::Int8: EXPECT_EQ(j, *v.get<int8_t>()) << where; return true;
    case ValueType::UInt16: EXPECT_EQ(j, *v.get<uint16_t>()) << where; return true;
    case ValueType::Int16: EXPECT_EQ(j, *v.get<int16_t>()) << where; return true;
    case ValueType::UInt32: EXPECT_EQ(j, *v.get<uint32_t>()) << where; return true;
    case ValueType::Int32: EXPECT_EQ(j, *v.get<int32_t>()) << where; return true;
    case ValueType::UInt64: EXPECT_EQ(j, *v.get<uint64_t>()) << where; return true;
    case ValueType::Int64: EXPECT_EQ(j, *v.get<int64_t>()) << where; return true;
    case ValueType::Bool: EXPECT_EQ(j, *v.get<bool>()) << where; return true;
    case ValueType::Float32: expect_float(j, text, *v.get<float>(), where); return true;
    case ValueType::Float64: expect_float(j, text, *v.get<double>(), where); return true;
    case ValueType::String: {
      const std::string_view s = *v.as_string();
      EXPECT_TRUE(j.is_string()) << where;
      if (is_utf8(s)) {
        EXPECT_EQ(j, std::string(s)) << where;
        return true;
      }
      EXPECT_NE(j.get<std::string>().find(kReplacement), std::string::npos) << where << ": " << j.dump();
      return false;
    }
    case ValueType::Array: {
      const ArrayView a = *v.as_array();
      EXPECT_TRUE(j.is_array()) << where;
      EXPECT_EQ(j.size(), a.size()) << where;  // complete, never shortened
      if (j.size() != a.size()) return true;
      bool valid = true;
      size_t i = 0;
      for (const ValueView e : a.values()) {
        valid &= expect_value(j[i], text[i], e, fmt::format("{}[{}]", where, i));
        ++i;
      }
      return valid;
    }
  }
  ADD_FAILURE() << where << ": unknown type";
  return true;
}

// The whole `dump --json` document against the file.
void expect_dump_matches_file(const std::string& out, const GgufFile& file, bool with_tensors) {
  const json doc = json::parse(out);
  const json doc_text = parse_keeping_float_text(out);
  EXPECT_EQ(doc.at("version"), file.version());
  EXPECT_EQ(doc.at("alignment"), file.alignment());
  EXPECT_EQ(doc.at("data_offset"), file.data_offset());
  EXPECT_EQ(doc.at("byte_order"), std::string(ggufkit::byte_order_name(file.byte_order())));
  EXPECT_TRUE(doc.at("file").is_string());

  const json& metadata = doc.at("metadata");
  ASSERT_EQ(metadata.size(), file.metadata().size());
  const std::set<std::string> entry_fields = {"key",   "offset", "type",    "value",
                                              "array_type", "count", "lossy", "key_hex", "value_hex"};
  for (size_t i = 0; i < metadata.size(); ++i) {
    const json& e = metadata[i];
    const ggufkit::KeyValue& kv = file.metadata()[i];
    const std::string where = fmt::format("metadata[{}]", i);
    for (const auto& [field, _] : e.items()) EXPECT_TRUE(entry_fields.count(field)) << where << " has " << field;
    const bool key_valid = is_utf8(kv.key);
    EXPECT_EQ(e.at("offset"), kv.offset) << where;
    if (key_valid) {
      EXPECT_EQ(e.at("key"), std::string(kv.key)) << where;
    }
    EXPECT_EQ(e.contains("key_hex"), !key_valid) << where;
    EXPECT_EQ(e.at("type"), std::string(ggufkit::value_type_name(kv.value.type()))) << where;
    if (const auto arr = kv.value.as_array()) {
      EXPECT_EQ(e.at("array_type"), std::string(ggufkit::value_type_name(arr->element_type()))) << where;
      EXPECT_EQ(e.at("count"), arr->size()) << where;
    } else {
      EXPECT_FALSE(e.contains("array_type")) << where;
    }
    const bool valid = expect_value(e.at("value"), doc_text.at("metadata")[i].at("value"), kv.value, where + " " + std::string(kv.key));
    EXPECT_EQ(e.contains("value_hex"), !valid) << where;
    if (valid && key_valid) {
      EXPECT_FALSE(e.contains("lossy")) << where;
    } else {
      EXPECT_EQ(e.value("lossy", false), true) << where << " holds bytes that are not UTF-8";
    }
  }

  if (!with_tensors) {
    EXPECT_FALSE(doc.contains("tensors"));
    return;
  }
  const json& tensors = doc.at("tensors");
  ASSERT_EQ(tensors.size(), file.tensors().size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const json& t = tensors[i];
    const ggufkit::TensorInfo& info = file.tensors()[i];
    const std::string where = fmt::format("tensors[{}]", i);
    for (const auto& [field, _] : t.items()) {
      EXPECT_TRUE((std::set<std::string>{"name", "type", "shape", "offset", "size", "info_offset", "lossy", "name_hex"}.count(field)))
          << where << " has " << field;
    }
    if (is_utf8(info.name)) {
      EXPECT_EQ(t.at("name"), std::string(info.name)) << where;
      EXPECT_FALSE(t.contains("lossy")) << where;
    } else {
      // Whether such a tensor is marked lossy is TensorNameThatIsNotUtf8IsReplacedAndMarkedLossy's.
      EXPECT_NE(t.at("name").get<std::string>().find(kReplacement), std::string::npos) << where;
    }
    EXPECT_EQ(t.at("type"), std::string(ggufkit::type_name(info.type))) << where;
    EXPECT_EQ(t.at("shape").get<std::vector<int64_t>>(),
              std::vector<int64_t>(info.shape().begin(), info.shape().end()))
        << where;
    EXPECT_EQ(t.at("offset"), info.offset) << where;
    EXPECT_EQ(t.at("info_offset"), info.info_offset) << where;
    EXPECT_EQ(t.at("size"), info.size) << where;
  }
}

const json& entry_for(const json& doc, const std::string& key) {
  for (const json& e : doc.at("metadata")) {
    if (e.at("key") == key) return e;
  }
  throw std::runtime_error("no metadata entry " + key);
}

const json& tensor_for(const json& doc, const std::string& name) {
  for (const json& t : doc.at("tensors")) {
    if (t.at("name") == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

// ---------------------------------------------------------------------------------------------
// Real files.

TEST(CliDumpJson, SampleMatchesTheFileExactly) {
  const GgufFile file = open_or_fail(sample_model());
  const CommandResult r = run_gguf({"dump", "--json", sample_model().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_dump_matches_file(r.out, file, true);
  const json doc = json::parse(r.out);
  // tools/make_sample.cpp: 512 tokens, 64 wide; shapes in ggml order (ne0 first).
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.tokens").at("value").size(), 512u);
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.tokens").at("array_type"), "string");
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.scores").at("array_type"), "float32");
  EXPECT_EQ(tensor_for(doc, "token_embd.weight").at("shape"), json::array({64, 512}));
  EXPECT_EQ(tensor_for(doc, "blk.0.ffn_down.weight").at("shape"), json::array({192, 64}));
  EXPECT_EQ(tensor_for(doc, "token_embd.weight").at("type"), "f16");
}

TEST(CliDumpJson, TinyLlamaQ4KMMatchesTheFileExactly) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path path = *shared_dir() / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf";
  const GgufFile file = open_or_fail(path);
  const CommandResult r = run_gguf({"dump", "--json", path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_dump_matches_file(r.out, file, true);
  const json doc = json::parse(r.out);
  // The README: 4096 tokens, embedding 256, FF 768.
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.tokens").at("value").size(), 4096u);
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.scores").at("value").size(), 4096u);
  EXPECT_EQ(tensor_for(doc, "token_embd.weight").at("shape"), json::array({256, 4096}));
  EXPECT_EQ(tensor_for(doc, "blk.0.ffn_up.weight").at("shape"), json::array({256, 768}));
  EXPECT_EQ(tensor_for(doc, "blk.0.ffn_down.weight").at("shape"), json::array({768, 256}));
  size_t q4k = 0;
  for (const json& t : doc.at("tensors")) q4k += t.at("type") == "q4_K";
  EXPECT_EQ(q4k, 12u);
}

TEST(CliDumpJson, LlamaBpeVocabularyIsComplete) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path path = *shared_dir() / "corpus/vocab/ggml-vocab-llama-bpe.gguf";
  const CommandResult r = run_gguf({"dump", "--json", path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.tokens").at("value").size(), 128256u);
  EXPECT_EQ(entry_for(doc, "tokenizer.ggml.merges").at("value").size(), 280147u);
  EXPECT_TRUE(doc.at("tensors").empty());
}

TEST(CliDumpJson, NoTensorsLeavesTheTensorsOut) {
  const GgufFile file = open_or_fail(sample_model());
  const CommandResult r = run_gguf({"dump", "--json", "--no-tensors", sample_model().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_dump_matches_file(r.out, file, false);
}

// ---------------------------------------------------------------------------------------------
// Text mode.

std::string line_containing(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return {};
}

TEST(CliDumpText, ShortensLongArraysUnlessFull) {
  const GgufFile file = open_or_fail(sample_model());
  const auto tokens = ggufkit::ModelMetadata(file).tokens();
  ASSERT_TRUE(tokens);
  std::string last;
  for (const std::string_view t : tokens->strings()) last = std::string(t);
  const std::string quoted_last = "\"" + last + "\"";

  const CommandResult shortened = run_gguf({"dump", sample_model().string()});
  ASSERT_EQ(shortened.exit_code, 0) << shortened.err;
  const std::string short_line = line_containing(shortened.out, "tokenizer.ggml.tokens");
  ASSERT_FALSE(short_line.empty());
  EXPECT_NE(short_line.find("more"), std::string::npos) << short_line;
  EXPECT_EQ(short_line.find(quoted_last), std::string::npos) << "the last of 512 tokens is not shown";
  EXPECT_LT(short_line.size(), 400u);

  const CommandResult full = run_gguf({"dump", "--full", sample_model().string()});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const std::string full_line = line_containing(full.out, "tokenizer.ggml.tokens");
  EXPECT_NE(full_line.find(quoted_last), std::string::npos);
  EXPECT_EQ(full_line.find("more]"), std::string::npos);
  for (const std::string_view t : tokens->strings()) {
    EXPECT_NE(full_line.find(fmt::format("\"{}\"", t)), std::string::npos) << t;
  }
}

TEST(CliDumpText, ListsEveryEntryAndTensorUnlessNoTensors) {
  const GgufFile file = open_or_fail(sample_model());
  const CommandResult r = run_gguf({"dump", sample_model().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const ggufkit::KeyValue& kv : file.metadata()) {
    EXPECT_FALSE(line_containing(r.out, fmt::format(" {} ", kv.key)).empty()) << kv.key;
  }
  for (const ggufkit::TensorInfo& t : file.tensors()) {
    EXPECT_FALSE(line_containing(r.out, fmt::format(" {} ", t.name)).empty()) << t.name;
  }
  const CommandResult nt = run_gguf({"dump", "--no-tensors", sample_model().string()});
  ASSERT_EQ(nt.exit_code, 0) << nt.err;
  EXPECT_FALSE(line_containing(nt.out, "tokenizer.ggml.tokens").empty());
  for (const ggufkit::TensorInfo& t : file.tensors()) {
    EXPECT_TRUE(line_containing(nt.out, fmt::format(" {} ", t.name)).empty()) << t.name;
  }
}

// ---------------------------------------------------------------------------------------------
// Awkward values, in a file built for the test.

class CliDumpAwkward : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("cli-dump-awkward");
    path_ = dir_ / "awkward.gguf";
    GgufBuilder b;
    auto set = [&](std::string_view key, MetadataValue v) { ASSERT_TRUE(b.set(key, std::move(v))) << key; };
    constexpr float kInf32 = std::numeric_limits<float>::infinity();
    constexpr double kInf64 = std::numeric_limits<double>::infinity();
    set("general.architecture", MetadataValue::string("llama"));
    set("test.f32.nan", MetadataValue::of(std::numeric_limits<float>::quiet_NaN()));
    set("test.f32.inf", MetadataValue::of(kInf32));
    set("test.f32.neg_inf", MetadataValue::of(-kInf32));
    set("test.f64.nan", MetadataValue::of(std::numeric_limits<double>::quiet_NaN()));
    set("test.f64.inf", MetadataValue::of(kInf64));
    set("test.f64.neg_inf", MetadataValue::of(-kInf64));
    set("test.f32.array", MetadataValue::array(std::vector<float>{
                              1.5f, std::numeric_limits<float>::quiet_NaN(), -kInf32, kInf32, 0.1f, 1.0f / 3.0f,
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::lowest(), std::numeric_limits<float>::min(), 1e-5f,
                              16777217.0f, 1e20f, 3.0f}));
    set("test.f64.array", MetadataValue::array(std::vector<double>{
                              0.1, 1.0 / 3.0, std::numeric_limits<double>::denorm_min(),
                              std::numeric_limits<double>::max(), -kInf64, 2.0}));
    set("test.f32.negative_zero", MetadataValue::of(-0.0f));
    set("test.f64.negative_zero", MetadataValue::of(-0.0));
    set("test.u64.max", MetadataValue::of(std::numeric_limits<uint64_t>::max()));
    set("test.i64.min", MetadataValue::of(std::numeric_limits<int64_t>::min()));
    set("test.controls", MetadataValue::string(std::string_view("tab\there\nnew\x01line\x1f\x7f \"q\" \\ \0end", 30)));
    set("test.multibyte", MetadataValue::string("h\xC3\xA9llo \xE2\x96\x81 \xF0\x9D\x84\x9E"));
    set("test.invalid_utf8", MetadataValue::string("ok \xFF\xFE end"));
    set("test.overlong", MetadataValue::string("\xC0\x80"));
    set("test.surrogate", MetadataValue::string("\xED\xA0\x80"));
    set("test.cut_sequence", MetadataValue::string("abc\xE2\x82"));
    set("test.key.\xFF\xFE", MetadataValue::of(uint32_t{7}));
    set("test.strings", MetadataValue::string_array(std::vector<std::string>{"fine", "bad \x80", "also fine"}));
    set("test.long_string", MetadataValue::string(std::string(1000, 'x')));
    MetadataValue inner_a = MetadataValue::array(std::vector<int32_t>{1, 2, 3});
    MetadataValue inner_b = MetadataValue::array(std::vector<int32_t>{});
    const MetadataValue inners[] = {inner_a, inner_b};
    auto nested = MetadataValue::array_of(ValueType::Array, inners);
    ASSERT_TRUE(nested);
    set("test.nested", *nested);
    static const float kWeights[4] = {1, 2, 3, 4};
    const int64_t shape[] = {4};
    const std::span<const std::byte> weights(reinterpret_cast<const std::byte*>(kWeights), sizeof kWeights);
    ASSERT_TRUE(b.add_tensor("plain.weight", ggufkit::TensorType::F32, shape, weights));
    ASSERT_TRUE(b.add_tensor("bad\xFFname.weight", ggufkit::TensorType::F32, shape, weights));
    const auto written = b.write_file(path_, {.sync = false, .progress = {}});
    ASSERT_TRUE(written) << written.error().describe();
  }
  void TearDown() override { fs::remove_all(dir_); }

  json dump_json() {
    const CommandResult r = run_gguf({"dump", "--json", path_.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    out_ = r.out;
    return json::parse(r.out);  // nlohmann refuses invalid UTF-8 and invalid escapes
  }

  fs::path dir_;
  fs::path path_;
  std::string out_;
};

TEST_F(CliDumpAwkward, OutputIsValidJsonMatchingTheFile) {
  const json doc = dump_json();
  const GgufFile file = open_or_fail(path_);
  expect_dump_matches_file(out_, file, true);
}

TEST_F(CliDumpAwkward, NanAndInfinitiesAreStrings) {
  const json doc = dump_json();
  EXPECT_EQ(entry_for(doc, "test.f32.nan").at("value"), "nan");
  EXPECT_EQ(entry_for(doc, "test.f32.inf").at("value"), "inf");
  EXPECT_EQ(entry_for(doc, "test.f32.neg_inf").at("value"), "-inf");
  EXPECT_EQ(entry_for(doc, "test.f64.nan").at("value"), "nan");
  EXPECT_EQ(entry_for(doc, "test.f64.inf").at("value"), "inf");
  EXPECT_EQ(entry_for(doc, "test.f64.neg_inf").at("value"), "-inf");
  const json& arr = entry_for(doc, "test.f32.array").at("value");
  EXPECT_EQ(arr[1], "nan");
  EXPECT_EQ(arr[2], "-inf");
  EXPECT_EQ(arr[3], "inf");
  EXPECT_EQ(entry_for(doc, "test.f64.array").at("value")[4], "-inf");
}

// A JSON reader must get the float back: the same bits as float32 (denormals, extremes, values
// that are whole numbers), and a float even when the value is whole ("3.0", not the integer 3).
TEST_F(CliDumpAwkward, FloatsReadBackBitExactlyAndStayFloats) {
  const json doc = dump_json();
  const json doc_text = parse_keeping_float_text(out_);
  const GgufFile file = open_or_fail(path_);
  for (const char* key : {"test.f32.array", "test.f64.array", "test.f32.negative_zero", "test.f64.negative_zero"}) {
    SCOPED_TRACE(key);
    size_t index = 0;
    for (const json& e : doc.at("metadata")) {
      if (e.at("key") == key) break;
      ++index;
    }
    expect_value(doc.at("metadata")[index].at("value"), doc_text.at("metadata")[index].at("value"),
                 file.find(key)->value, key);
    const auto check_is_float = [&](const json& v) {
      if (v.is_number()) {
        EXPECT_TRUE(v.is_number_float()) << v.dump() << " reads back as an integer";
      }
    };
    const json& value = doc.at("metadata")[index].at("value");
    if (value.is_array()) {
      for (const json& v : value) check_is_float(v);
    } else {
      check_is_float(value);
    }
  }
  // The sign of zero survives.
  EXPECT_TRUE(std::signbit(entry_for(doc, "test.f32.negative_zero").at("value").get<double>()));
  EXPECT_TRUE(std::signbit(entry_for(doc, "test.f64.negative_zero").at("value").get<double>()));
}

TEST_F(CliDumpAwkward, SixtyFourBitIntegersAreExact) {
  const json doc = dump_json();
  EXPECT_EQ(entry_for(doc, "test.u64.max").at("value").get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(entry_for(doc, "test.i64.min").at("value").get<int64_t>(), std::numeric_limits<int64_t>::min());
}

TEST_F(CliDumpAwkward, ControlCharactersAreEscapedAndReadBackExactly) {
  const json doc = dump_json();
  const json& e = entry_for(doc, "test.controls");
  EXPECT_EQ(e.at("value"), std::string("tab\there\nnew\x01line\x1f\x7f \"q\" \\ \0end", 30));
  EXPECT_FALSE(e.contains("lossy"));
  const json& m = entry_for(doc, "test.multibyte");
  EXPECT_EQ(m.at("value"), "h\xC3\xA9llo \xE2\x96\x81 \xF0\x9D\x84\x9E");
  EXPECT_FALSE(m.contains("lossy"));
  // No raw control byte reaches the output: JSON forbids them inside strings.
  for (const char c : out_) {
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n') << "raw byte " << int(c);
  }
}

TEST_F(CliDumpAwkward, InvalidUtf8IsReplacedAndMarkedLossy) {
  const json doc = dump_json();
  const json& bad = entry_for(doc, "test.invalid_utf8");
  EXPECT_EQ(bad.at("value"), std::string("ok ") + kReplacement + kReplacement + " end");
  EXPECT_EQ(bad.value("lossy", false), true);
  for (const char* key : {"test.overlong", "test.surrogate", "test.cut_sequence"}) {
    const json& e = entry_for(doc, key);
    EXPECT_NE(e.at("value").get<std::string>().find(kReplacement), std::string::npos) << key;
    EXPECT_EQ(e.value("lossy", false), true) << key;
  }
  const json& strings = entry_for(doc, "test.strings");
  EXPECT_EQ(strings.at("value"), json::array({"fine", std::string("bad ") + kReplacement, "also fine"}));
  EXPECT_EQ(strings.value("lossy", false), true);
  // A key that is not UTF-8.
  const json& key = entry_for(doc, std::string("test.key.") + kReplacement + kReplacement);
  EXPECT_EQ(key.at("value"), 7);
  EXPECT_EQ(key.value("lossy", false), true);
  // Entries that are fine are not marked.
  EXPECT_FALSE(entry_for(doc, "general.architecture").contains("lossy"));
}

TEST_F(CliDumpAwkward, TensorNameThatIsNotUtf8IsReplacedAndMarkedLossy) {
  const json doc = dump_json();
  const json& t = tensor_for(doc, std::string("bad") + kReplacement + "name.weight");
  EXPECT_EQ(t.at("shape"), json::array({4}));
  EXPECT_EQ(t.value("lossy", false), true) << t.dump();
  EXPECT_FALSE(tensor_for(doc, "plain.weight").contains("lossy"));
}

TEST_F(CliDumpAwkward, NestedArraysAreComplete) {
  const json doc = dump_json();
  const json& e = entry_for(doc, "test.nested");
  EXPECT_EQ(e.at("array_type"), "array");
  EXPECT_EQ(e.at("value"), json::parse("[[1,2,3],[]]"));
}

TEST_F(CliDumpAwkward, TextModeShortensLongStringsUnlessFull) {
  const CommandResult shortened = run_gguf({"dump", path_.string()});
  ASSERT_EQ(shortened.exit_code, 0) << shortened.err;
  const std::string short_line = line_containing(shortened.out, "test.long_string");
  EXPECT_EQ(short_line.find(std::string(1000, 'x')), std::string::npos);
  EXPECT_LT(short_line.size(), 400u);
  const CommandResult full = run_gguf({"dump", "--full", path_.string()});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_NE(line_containing(full.out, "test.long_string").find(std::string(1000, 'x')), std::string::npos);
  // Control bytes are shown escaped, one entry per line.
  const std::string controls = line_containing(full.out, "test.controls");
  EXPECT_NE(controls.find("\\x01"), std::string::npos) << controls;
  EXPECT_NE(controls.find("\\n"), std::string::npos) << controls;
}

}  // namespace

namespace {

// Bytes from dump --json's hex.
std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// dump --json is lossless: a key, a string, a string array element and a tensor name that are not
// UTF-8 come with their exact bytes (key_hex, value_hex, name_hex) next to the U+FFFD text; every
// entry and tensor info carries its file offset; the file name and the byte order are given.
TEST(CliDump, JsonKeepsTheExactBytesAndTheOffsets) {
  const fs::path dir = ggufkit::test::temp_dir("dump-lossless");
  const fs::path path = dir / "odd.gguf";
  const std::string bad_key = "general.na\xffme";
  const std::string bad_string = "caf\xe9";  // Latin-1, not UTF-8
  const std::vector<std::string> tokens = {"ok", "\xc3\x28", "fine"};
  const std::string bad_tensor = "blk.0.\xfe.weight";
  {
    ggufkit::GgufBuilder b;
    ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
    ASSERT_TRUE(b.set(bad_key, ggufkit::MetadataValue::string("plain")));
    ASSERT_TRUE(b.set("general.description", ggufkit::MetadataValue::string(bad_string)));
    ASSERT_TRUE(b.set("tokenizer.ggml.tokens", ggufkit::MetadataValue::string_array(tokens)));
    const std::vector<float> data(4, 1.0f);
    const std::vector<int64_t> shape = {4};
    ASSERT_TRUE(b.add_tensor(bad_tensor, ggufkit::TensorType::F32, shape, std::as_bytes(std::span(data))));
    ASSERT_TRUE(b.write_file(path));
  }
  const CommandResult r = run_gguf({"dump", "--json", path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["file"], path.string());
  EXPECT_EQ(doc["byte_order"], "little");
  auto file = ggufkit::GgufFile::open(path);
  ASSERT_TRUE(file);
  ASSERT_EQ(doc["metadata"].size(), file->metadata().size());
  for (size_t i = 0; i < file->metadata().size(); ++i) {
    const ggufkit::KeyValue& kv = file->metadata()[i];
    const auto& e = doc["metadata"][i];
    SCOPED_TRACE(e["key"].get<std::string>());
    EXPECT_EQ(e["offset"], kv.offset);
    const bool key_bad = kv.key == bad_key;
    const bool value_bad = kv.key == "general.description" || kv.key == "tokenizer.ggml.tokens";
    EXPECT_EQ(e.contains("lossy"), key_bad || value_bad);
    EXPECT_EQ(e.contains("key_hex"), key_bad);
    EXPECT_EQ(e.contains("value_hex"), value_bad);
    if (key_bad) {
      EXPECT_EQ(unhex(e["key_hex"]), bad_key);
      EXPECT_EQ(e["key"], "general.na\xef\xbf\xbdme");
    }
    if (kv.key == "general.description") {
      EXPECT_EQ(unhex(e["value_hex"]), bad_string);
      EXPECT_EQ(e["value"], "caf\xef\xbf\xbd");
    }
    if (kv.key == "tokenizer.ggml.tokens") {
      ASSERT_EQ(e["value_hex"].size(), tokens.size());
      for (size_t t = 0; t < tokens.size(); ++t) EXPECT_EQ(unhex(e["value_hex"][t]), tokens[t]);
    }
  }
  ASSERT_EQ(doc["tensors"].size(), 1u);
  const auto& t = doc["tensors"][0];
  EXPECT_EQ(t["info_offset"], file->tensors()[0].info_offset);
  EXPECT_EQ(t["lossy"], true);
  EXPECT_EQ(unhex(t["name_hex"]), bad_tensor);
  EXPECT_EQ(t, nlohmann::json::parse(R"({"name":"blk.0.\ufffd.weight","type":"f32","shape":[4],"offset":0,"size":16,"info_offset":)" +
                                     std::to_string(file->tensors()[0].info_offset) +
                                     R"(,"lossy":true,"name_hex":")" +
                                     "626c6b2e302efe2e776569676874" + R"("})"));
  fs::remove_all(dir);
}

}  // namespace
