// The safetensors reader on files written here (a header JSON and a data region, by a small
// writer below): every dtype, empty and scalar tensors, metadata, order by offsets, sharded
// models with their index; every malformed case rejected with the right code, subject and
// offset; every prefix of a valid file rejected without a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

using namespace std::string_literals;

#include "ggufkit/safetensors.h"
#include "test_support.h"

namespace ggufkit {
namespace {

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<std::byte> data;
};

std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

std::string shape_json(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// A header for `entries` with their data back to back in the given order; `metadata_json` is the
// "__metadata__" value when not empty.
std::string header_for(const std::vector<Entry>& entries, const std::string& metadata_json = "") {
  std::string out = "{";
  if (!metadata_json.empty()) out += "\"__metadata__\":" + metadata_json;
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    if (out.size() > 1) out += ",";
    out += json_string(e.name) + ":{\"dtype\":" + json_string(e.dtype) + ",\"shape\":" + shape_json(e.shape) +
           ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + e.data.size()) + "]}";
    offset += e.data.size();
  }
  return out + "}";
}

std::vector<std::byte> data_of(const std::vector<Entry>& entries) {
  std::vector<std::byte> out;
  for (const Entry& e : entries) out.insert(out.end(), e.data.begin(), e.data.end());
  return out;
}

// The 8-byte little-endian size (the header's length unless `declared` says otherwise), the
// header, the data.
std::vector<std::byte> file_bytes(const std::string& header, const std::vector<std::byte>& data,
                                  std::optional<uint64_t> declared = std::nullopt) {
  std::vector<std::byte> out(8);
  const uint64_t n = declared.value_or(header.size());
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  for (const char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<std::byte> file_for(const std::vector<Entry>& entries, const std::string& metadata_json = "") {
  return file_bytes(header_for(entries, metadata_json), data_of(entries));
}

// Distinct bytes, so a view at the wrong place shows.
std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((seed * 31 + i * 7 + 1) & 0xff);
  return out;
}

// Bits per element, from the crate's Dtype::bitsize.
const std::vector<std::pair<std::string, uint32_t>> kDtypeBits{
    {"BOOL", 8},    {"F4", 4},           {"F6_E2M3", 6},      {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
    {"F8_E5M2", 8}, {"F8_E4M3", 8},      {"F8_E8M0", 8},      {"F8_E4M3FNUZ", 8},         {"F8_E5M2FNUZ", 8},
    {"I16", 16},    {"U16", 16},         {"F16", 16},         {"BF16", 16},   {"I32", 32}, {"U32", 32},
    {"F32", 32},    {"C64", 64},         {"F64", 64},         {"I64", 64},    {"U64", 64},
};

// The file's views point into `bytes`: no temporaries.
SafetensorsFile parse_ok(std::vector<std::byte>&& bytes) = delete;
SafetensorsFile parse_ok(const std::vector<std::byte>& bytes) {
  auto f = SafetensorsFile::parse(bytes);
  EXPECT_TRUE(f) << f.error().describe();
  if (!f) std::abort();
  return std::move(f).value();
}

Error parse_error(const std::vector<std::byte>& bytes, const SafetensorsOptions& options = {}) {
  auto f = SafetensorsFile::parse(bytes, options);
  EXPECT_FALSE(f) << "accepted";
  return f ? Error{} : f.error();
}

// File offset of the n-th occurrence (0-based) of `needle` in the header.
uint64_t at(const std::string& header, const std::string& needle, int nth = 0) {
  size_t pos = header.find(needle);
  for (int i = 0; i < nth && pos != std::string::npos; ++i) pos = header.find(needle, pos + 1);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 8 + pos;
}

void expect_error(const Error& e, ErrorCode code, const std::string& subject, uint64_t offset) {
  EXPECT_EQ(e.code, code) << e.describe();
  EXPECT_EQ(e.subject, subject) << e.describe();
  EXPECT_EQ(e.offset, offset) << e.describe();
}

// Writes a header plus data as a file with `header` built from a raw JSON template.
std::vector<std::byte> raw_file(const std::string& header, size_t data_bytes) {
  return file_bytes(header, pattern(data_bytes, 5));
}

TEST(SafetensorsDtype, NamesAndSizesAreTheCrates) {
  ASSERT_EQ(kDtypeBits.size(), kSafetensorsDtypeCount);
  for (const auto& [name, bits] : kDtypeBits) {
    const auto dtype = safetensors_dtype_from_name(name);
    ASSERT_TRUE(dtype) << name;
    EXPECT_EQ(safetensors_dtype_name(*dtype), name);
    EXPECT_EQ(safetensors_dtype_bits(*dtype), bits) << name;
    EXPECT_EQ(safetensors_dtype_bytes(*dtype), bits % 8 == 0 ? bits / 8 : 0) << name;
  }
  EXPECT_FALSE(safetensors_dtype_from_name("f32"));
  EXPECT_FALSE(safetensors_dtype_from_name("Q4_0"));
  EXPECT_FALSE(safetensors_dtype_from_name(""));
}

TEST(Safetensors, EveryDtypeReadsBackZeroCopy) {
  std::vector<Entry> entries;
  uint8_t seed = 0;
  for (const auto& [name, bits] : kDtypeBits) {
    // Whole-byte types as a [3, 2] matrix; sub-byte ones as 4 elements (2 or 3 whole bytes).
    const std::vector<uint64_t> shape = bits % 8 == 0 ? std::vector<uint64_t>{3, 2} : std::vector<uint64_t>{4};
    const uint64_t elements = bits % 8 == 0 ? 6 : 4;
    entries.push_back({"t." + name, name, shape, pattern(elements * bits / 8, seed++)});
  }
  const auto bytes = file_for(entries);
  const SafetensorsFile f = parse_ok(bytes);
  ASSERT_EQ(f.tensors().size(), entries.size());
  const uint64_t data_start = 8 + header_for(entries).size();
  EXPECT_EQ(f.data_offset(), data_start);
  EXPECT_EQ(f.file_size(), bytes.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsTensor& t = f.tensors()[i];
    EXPECT_EQ(t.name, entries[i].name);
    EXPECT_EQ(safetensors_dtype_name(t.dtype), entries[i].dtype);
    EXPECT_EQ(t.shape, std::vector<int64_t>(entries[i].shape.begin(), entries[i].shape.end()));
    EXPECT_EQ(t.n_elements(), kDtypeBits[i].second % 8 == 0 ? 6 : 4);
    EXPECT_EQ(t.data_begin, offset);
    EXPECT_EQ(t.data_end, offset + entries[i].data.size());
    ASSERT_EQ(t.data.size(), entries[i].data.size());
    EXPECT_EQ(t.data.data(), bytes.data() + data_start + offset) << "a view into the caller's bytes";
    EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), entries[i].data.begin()));
    EXPECT_EQ(f.find(t.name), &t);
    offset += entries[i].data.size();
  }
  EXPECT_EQ(f.find("t.nothing"), nullptr);
  EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, OpenMapsTheFileAndReadsMetadata) {
  const std::vector<Entry> entries{{"w", "F32", {2, 2}, pattern(16, 1)}, {"b", "BF16", {2}, pattern(4, 2)}};
  const auto dir = test::temp_dir("safetensors-open");
  const auto path = dir / "m.safetensors";
  test::write_bytes(path, file_for(entries, R"({"format":"pt","note":"caf\u00e9 \"q\""})"));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0], (std::pair<std::string, std::string>{"format", "pt"}));
  EXPECT_EQ(f->metadata()[1].first, "note");
  EXPECT_EQ(f->metadata()[1].second, "caf\xc3\xa9 \"q\"");
  EXPECT_EQ(f->metadata_value("format"), "pt");
  EXPECT_FALSE(f->metadata_value("absent"));
  const SafetensorsTensor* b = f->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(std::equal(b->data.begin(), b->data.end(), entries[1].data.begin()));
  // The views point into the mapping, which moves with the SafetensorsFile.
  EXPECT_EQ(b->data.data(), f->bytes().data() + f->data_offset() + 16);
  f->prefetch(*b);  // a hint: only must not fail
  SafetensorsFile moved = std::move(f).value();
  EXPECT_TRUE(std::equal(moved.find("w")->data.begin(), moved.find("w")->data.end(), entries[0].data.begin()));
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, OpenReportsMissingFile) {
  auto f = SafetensorsFile::open(test::temp_dir("safetensors-missing") / "none.safetensors");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, ErrorCode::io_error);
}

TEST(Safetensors, EmptyScalarAndZeroTensorFiles) {
  const auto empty_bytes = file_bytes("{}", {});
  const SafetensorsFile empty = parse_ok(empty_bytes);
  EXPECT_TRUE(empty.tensors().empty());
  // Empty tensors take no bytes and sit at the offset where they are; a scalar has shape [].
  const std::vector<Entry> entries{{"none", "F16", {0, 5}, {}},
                                   {"scalar", "F32", {}, pattern(4, 3)},
                                   {"also_none", "I64", {7, 0}, {}},
                                   {"row", "U8", {3}, pattern(3, 4)}};
  const auto bytes = file_for(entries);
  const SafetensorsFile f = parse_ok(bytes);
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.find("none")->n_elements(), 0);
  EXPECT_TRUE(f.find("none")->data.empty());
  EXPECT_EQ(f.find("scalar")->n_elements(), 1);
  EXPECT_TRUE(f.find("scalar")->shape.empty());
  EXPECT_EQ(f.find("scalar")->data.size(), 4u);
  EXPECT_EQ(f.find("also_none")->data_begin, 4u);
  EXPECT_EQ(f.find("row")->data.size(), 3u);
  // Header-only metadata with null: accepted, no metadata.
  const auto null_metadata = file_bytes(R"({"__metadata__":null})", {});
  EXPECT_TRUE(parse_ok(null_metadata).metadata().empty());
}

TEST(Safetensors, TensorsComeInDataOrderWhateverTheHeaderOrder) {
  // Header lists c, a, b; data is a, b, c. Ties between empty tensors keep header order.
  const std::string header =
      R"({"c":{"dtype":"U8","shape":[2],"data_offsets":[5,7]},)"
      R"("e2":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
      R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("e1":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[1,5]}})";
  const auto bytes = raw_file(header, 7);
  const SafetensorsFile f = parse_ok(bytes);
  std::vector<std::string> names;
  for (const auto& t : f.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"e2", "e1", "a", "b", "c"}));
  EXPECT_EQ(f.find("c")->header_offset, at(header, "\"c\""));
  EXPECT_EQ(f.find("b")->header_offset, at(header, "\"b\""));
}

TEST(Safetensors, AcceptsPaddingEscapesAndUnknownFields) {
  // Trailing spaces (the README allows padding), an escaped name, and an unknown field (serde
  // ignores it) holding nested JSON.
  const std::string header =
      R"({"a\"b\u00e9":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":{"x":[1,[2,{"y":null}]],"s":"t"}}})"
      "        ";
  const auto bytes = raw_file(header, 4);
  const SafetensorsFile f = parse_ok(bytes);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].name, "a\"b\xc3\xa9");
  EXPECT_EQ(f.tensors()[0].header_offset, 9u);
  EXPECT_EQ(f.header_json(), header);
}

// The byte strings of the reference crate's own tests (safetensors/src/tensor.rs, mod tests), with
// the crate's verdict: accepted, or the error it gives and the code that corresponds here.
TEST(Safetensors, CrateTestVectors) {
  auto bytes_of = [](std::string_view s) {
    std::vector<std::byte> out(s.size());
    if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
    return out;
  };
  using namespace std::string_view_literals;
  struct Case {
    const char* crate_test;
    std::string_view serialized;
    std::optional<ErrorCode> code;  // nullopt: accepted
  };
  const std::string_view sixteen_zeros = "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"sv;
  const std::string header = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string with_extra = "<\0\0\0\0\0\0\0"s + header + std::string(sixteen_zeros) + "extra_bogus_data_for_polyglot_file";
  const std::string missing_two = "<\0\0\0\0\0\0\0"s + header + std::string(sixteen_zeros.substr(2));
  const std::string too_large = "<\0\0\0\0\xff\xff\xff"s + header + std::string(sixteen_zeros);
  const std::string overflow_a =
      "O\0\0\0\0\0\0\0"s + R"({"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})" +
      std::string(sixteen_zeros);
  const std::string overflow_b =
      "N\0\0\0\0\0\0\0"s + R"({"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}})" +
      std::string(sixteen_zeros);
  const std::string zero_sized = "<\0\0\0\0\0\0\0"s + R"({"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}})";
  const std::string invalid_info = "<\0\0\0\0\0\0\0"s + R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}})";
  const std::vector<Case> cases{
      {"test_metadata_incomplete_buffer (extra data)", with_extra, ErrorCode::safetensors_bad_offsets},
      {"test_metadata_incomplete_buffer (missing data)", missing_two, ErrorCode::safetensors_out_of_bounds},
      {"test_header_too_large", too_large, ErrorCode::bad_header},
      {"test_header_too_small", ""sv, ErrorCode::safetensors_truncated},
      {"test_invalid_header_length", "<\0\0\0\0\0\0\0"sv, ErrorCode::safetensors_truncated},
      {"test_invalid_header_non_utf8", "\x01\0\0\0\0\0\0\0\xff"sv, ErrorCode::bad_header},
      {"test_invalid_header_not_json", "\x01\0\0\0\0\0\0\0{"sv, ErrorCode::bad_header},
      {"test_whitespace_padded_header", "\x06\0\0\0\0\0\0\0{}\x0D\x20\x09\x0A"sv, std::nullopt},
      {"test_whitespace_leading_padded_header", "\x06\0\0\0\0\0\0\0\x09\x0A{}\x0D\x20"sv, std::nullopt},
      {"test_zero_sized_tensor", zero_sized, std::nullopt},
      {"test_invalid_info", invalid_info, ErrorCode::tensor_size_mismatch},
      {"test_validation_overflow (u64)", overflow_a, ErrorCode::safetensors_shape_overflow},
      {"test_validation_overflow (bits)", overflow_b, ErrorCode::safetensors_shape_overflow},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.crate_test);
    const auto bytes = bytes_of(c.serialized);
    auto f = SafetensorsFile::parse(bytes);
    if (!c.code) {
      ASSERT_TRUE(f) << f.error().describe();
      continue;
    }
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error().code, *c.code) << f.error().describe();
  }
  const auto zero_bytes = bytes_of(zero_sized);
  const SafetensorsFile zero = parse_ok(zero_bytes);
  ASSERT_EQ(zero.tensors().size(), 1u);
  EXPECT_EQ(zero.tensors()[0].shape, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(zero.tensors()[0].dtype, SafetensorsDtype::I32);
  EXPECT_TRUE(zero.tensors()[0].data.empty());
}

// ---- rejections ----

TEST(SafetensorsReject, HeaderSizeField) {
  for (size_t n = 0; n < 8; ++n) {
    const Error e = parse_error(std::vector<std::byte>(n));
    expect_error(e, ErrorCode::safetensors_truncated, "", 0);
  }
  // Declared larger than the file: checked before any header byte is read.
  expect_error(parse_error(file_bytes("{}", {}, 3)), ErrorCode::safetensors_truncated, "", 0);
  expect_error(parse_error(file_bytes("{}", {}, UINT64_MAX)), ErrorCode::bad_header, "", 0);
  // Over the crate's 100 MB limit, even when the file is big enough (here: the limit lowered).
  expect_error(parse_error(file_bytes("{}", {}, 100'000'001)), ErrorCode::bad_header, "", 0);
  SafetensorsOptions small;
  small.max_header_bytes = 10;
  const std::string header = header_for({{"w", "U8", {1}, pattern(1, 0)}});
  expect_error(parse_error(file_bytes(header, pattern(1, 0)), small), ErrorCode::bad_header, "", 0);
  // A header of length 0.
  expect_error(parse_error(file_bytes("", {})), ErrorCode::bad_header, "", 8);
}

TEST(SafetensorsReject, NotAJsonObject) {
  for (const std::string header : {"[]", "\"s\"", "1", "null", "x{}"}) {
    expect_error(parse_error(file_bytes(header, {})), ErrorCode::bad_header, "", 8);
  }
  // Leading whitespace is skipped (the crate accepts it), whitespace alone is not a header.
  expect_error(parse_error(file_bytes(" \n[]", {})), ErrorCode::bad_header, "", 8 + 2);
  expect_error(parse_error(file_bytes("   ", {})), ErrorCode::bad_header, "", 8 + 3);
  // Starts with '{' but is not valid JSON: error at the offending byte.
  struct Case {
    std::string header;
    uint64_t offset;
  };
  // An early end is reported at the end of the header.
  for (const Case& c : std::vector<Case>{{"{", 8 + 1},
                                         {"{\"a\":", 8 + 5},
                                         {"{} x", 8 + 3},
                                         {"{}{}", 8 + 2},
                                         {"{/*c*/}", 8 + 1},
                                         {"{\"\xff\":1}", 8 + 2},
                                         {"{\"a\xc3\":1}", 8 + 4},
                                         {std::string("{}\0", 3), 8 + 2}}) {
    const Error e = parse_error(file_bytes(c.header, {}));
    EXPECT_EQ(e.code, ErrorCode::bad_header) << e.describe();
    EXPECT_EQ(e.offset, c.offset) << e.describe();
  }
}

TEST(SafetensorsReject, WrongJsonShapesNameTheTensor) {
  struct Case {
    std::string header;
    std::string field;  // where the error must point
    ErrorCode code = ErrorCode::bad_header;
  };
  const std::vector<Case> cases{
      {R"({"w":1})", "\"w\""},
      {R"({"w":[1]})", "\"w\""},
      {R"({"w":{"dtype":1,"shape":[1],"data_offsets":[0,1]}})", "\"dtype\""},
      {R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,1]}})", "\"dtype\"", ErrorCode::safetensors_unknown_dtype},
      {R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", "\"dtype\"", ErrorCode::safetensors_unknown_dtype},
      {R"({"w":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[1e3],"data_offsets":[0,1000]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[null],"data_offsets":[0,1]}})", "\"shape\""},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,-1]}})", "\"data_offsets\""},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1.5]}})", "\"data_offsets\""},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,true]}})", "\"data_offsets\""},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[1]}})", "\"data_offsets\""},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "\"data_offsets\""},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":{"b":0}}})", "\"data_offsets\""},
      {R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "\"w\""},
      {R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", "\"w\""},
      {R"({"w":{"dtype":"U8","shape":[1]}})", "\"w\""},
      {R"({"w":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}})", "\"shape\"", ErrorCode::safetensors_duplicate_key},
      {R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}})",
       "\"w\"", ErrorCode::safetensors_duplicate_tensor},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    const Error e = parse_error(raw_file(c.header, 1));
    // Duplicates point at the second occurrence.
    const int nth = c.code == ErrorCode::safetensors_duplicate_key || c.code == ErrorCode::safetensors_duplicate_tensor ? 1 : 0;
    expect_error(e, c.code, "w", at(c.header, c.field, nth));
  }
}

TEST(SafetensorsReject, MetadataMustBeAnObjectOfStrings) {
  {
    const std::string header = R"({"__metadata__":{"a":"x","n":1}})";
    expect_error(parse_error(file_bytes(header, {})), ErrorCode::bad_header, "n", at(header, "\"n\""));
  }
  {
    const std::string header = R"({"__metadata__":{"a":"x","a":"y"}})";
    expect_error(parse_error(file_bytes(header, {})), ErrorCode::safetensors_duplicate_key, "a", at(header, "\"a\"", 1));
  }
  {
    const std::string header = R"({"__metadata__":["x"]})";
    expect_error(parse_error(file_bytes(header, {})), ErrorCode::bad_header, "__metadata__", 9);
  }
  {
    const std::string header = R"({"__metadata__":{},"__metadata__":{}})";
    expect_error(parse_error(file_bytes(header, {})), ErrorCode::safetensors_duplicate_key, "__metadata__",
                 at(header, "\"__metadata__\"", 1));
  }
}

TEST(SafetensorsReject, OffsetsMustTileTheDataExactly) {
  struct Case {
    std::string header;
    size_t data_bytes;
    std::string subject;
    ErrorCode code;
  };
  const std::vector<Case> cases{
      // b overlaps a.
      {R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6,
       "b", ErrorCode::safetensors_bad_offsets},
      // A hole between a and b.
      {R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[5,9]}})", 9,
       "b", ErrorCode::safetensors_bad_offsets},
      // The first tensor not at 0.
      {R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[1,5]}})", 5, "a", ErrorCode::safetensors_bad_offsets},
      // End before begin.
      {R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
       R"("c":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})",
       4, "c", ErrorCode::safetensors_bad_offsets},
      // Two tensors at the same place.
      {R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 4,
       "b", ErrorCode::safetensors_bad_offsets},
      // Size mismatch: 4 F32 need 16 bytes.
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 12, "a", ErrorCode::tensor_size_mismatch},
      {R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,6]}})", 6, "a", ErrorCode::tensor_size_mismatch},
      // Data past the end of the file (truncated data).
      {R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 6,
       "b", ErrorCode::safetensors_out_of_bounds},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    const Error e = parse_error(raw_file(c.header, c.data_bytes));
    // The error points at the tensor's data_offsets.
    const size_t entry = c.header.find("\"" + c.subject + "\"");
    expect_error(e, c.code, c.subject, 8 + c.header.find("\"data_offsets\"", entry));
  }
  // Bytes after the last tensor belong to no tensor: offset where they start, no subject.
  const std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  expect_error(parse_error(raw_file(header, 5)), ErrorCode::safetensors_bad_offsets, "", 8 + header.size() + 4);
  expect_error(parse_error(raw_file("{}", 1)), ErrorCode::safetensors_bad_offsets, "", 8 + 2);
}

TEST(SafetensorsReject, SubByteTensorsMustFillWholeBytes) {
  // 3 F4 elements are 12 bits; 3 F6 are 18 bits.
  for (const std::string dtype : {"F4", "F6_E2M3"}) {
    const std::string header = R"({"a":{"dtype":")" + dtype + R"(","shape":[3],"data_offsets":[0,2]}})";
    expect_error(parse_error(raw_file(header, 2)), ErrorCode::tensor_size_mismatch, "a", at(header, "\"shape\""));
  }
}

TEST(SafetensorsReject, HugeShapesOverflowCleanly) {
  for (const std::string shape : {"[9223372036854775808]", "[4294967296,4294967296]", "[3037000500,3037000500,0]",
                                  "[18446744073709551615,2]", "[4611686018427387904,2]"}) {
    SCOPED_TRACE(shape);
    const std::string header = R"({"a":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,0]}})";
    expect_error(parse_error(raw_file(header, 0)), ErrorCode::safetensors_shape_overflow, "a", at(header, "\"shape\""));
  }
  // Elements fit in int64, their bits do not fit in u64.
  const std::string header = R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})";
  expect_error(parse_error(raw_file(header, 0)), ErrorCode::safetensors_shape_overflow, "a", at(header, "\"shape\""));
  // A zero before the big dimensions: 0 elements, accepted (as the crate's checked fold).
  const auto zero_first =
      raw_file(R"({"a":{"dtype":"U8","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}})", 0);
  const SafetensorsFile f = parse_ok(zero_first);
  EXPECT_EQ(f.tensors()[0].n_elements(), 0);
  // data_offsets at the top of u64.
  const std::string top = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})";
  expect_error(parse_error(raw_file(top, 1)), ErrorCode::safetensors_bad_offsets, "a", at(top, "\"data_offsets\""));
}

TEST(SafetensorsReject, TooManyDimensions) {
  SafetensorsOptions options;
  options.max_dimensions = 4;
  const std::string header = R"({"a":{"dtype":"U8","shape":[1,1,1,1,1],"data_offsets":[0,1]}})";
  expect_error(parse_error(raw_file(header, 1), options), ErrorCode::bad_header, "a", at(header, "\"shape\""));
  EXPECT_TRUE(SafetensorsFile::parse(raw_file(header, 1)));  // within the default 64
}

TEST(SafetensorsReject, NestingBombs) {
  // Deep arrays in an ignored field, at the top, and deep objects: rejected at the limit, fast,
  // without recursion.
  const size_t depth = 1'000'000;
  const std::string prefix = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)";
  {
    const std::string header = prefix + std::string(depth, '[') + std::string(depth, ']') + "}}";
    const Error e = parse_error(raw_file(header, 1));
    EXPECT_EQ(e.code, ErrorCode::bad_header) << e.describe();
    EXPECT_EQ(e.subject, "a");
    // The 33rd container is the bomb's 31st '[' (after the header's and the tensor's objects).
    EXPECT_EQ(e.offset, 8 + prefix.size() + 30) << e.describe();
  }
  {
    std::string header = prefix;
    for (size_t i = 0; i < 100'000; ++i) header += "{\"k\":";
    header += "1";
    header += std::string(100'000, '}') + "}}";
    const Error e = parse_error(raw_file(header, 1));
    EXPECT_EQ(e.code, ErrorCode::bad_header) << e.describe();
    EXPECT_EQ(e.subject, "a");
  }
  {
    const std::string header = "{\"a\":" + std::string(depth, '[');
    const Error e = parse_error(raw_file(header, 0));
    EXPECT_EQ(e.code, ErrorCode::bad_header) << e.describe();
    EXPECT_EQ(e.subject, "a");
    EXPECT_EQ(e.offset, at(header, "\"a\""));  // the tensor entry is an array
  }
}

// What every rejection carries: a known code, a reason, an offset inside the input.
void expect_sound_error(const Error& e, size_t input_size) {
  EXPECT_NE(error_code_name(e.code), "unknown_error");
  EXPECT_NE(e.code, ErrorCode::io_error);
  EXPECT_FALSE(e.message.empty());
  EXPECT_LE(e.offset, input_size) << e.describe();
}

// Every prefix of a valid file is an error, never a crash; so is every single-byte change that
// breaks the file (and the ones that do not break it give views inside the file).
TEST(SafetensorsRobust, EveryTruncationAndByteFlipIsSafe) {
  const std::vector<Entry> entries{{"w", "F32", {2, 2}, pattern(16, 1)},
                                   {"e", "F16", {0}, {}},
                                   {"b", "F4", {4}, pattern(2, 2)}};
  const auto bytes = file_for(entries, R"({"k":"v"})");
  ASSERT_TRUE(SafetensorsFile::parse(bytes));
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A fresh buffer of exactly n bytes, so a read past it is caught by sanitizers.
    const std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    auto f = SafetensorsFile::parse(prefix);
    ASSERT_FALSE(f) << "a prefix of " << n << " bytes was accepted";
    expect_sound_error(f.error(), n);
  }
  std::mt19937 rng(7);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int k = 0; k < 4; ++k) {
      std::vector<std::byte> changed = bytes;
      changed[i] = static_cast<std::byte>(rng() & 0xff);
      auto f = SafetensorsFile::parse(changed);
      if (!f) {
        expect_sound_error(f.error(), changed.size());
        continue;
      }
      for (const SafetensorsTensor& t : f->tensors()) {
        EXPECT_GE(t.data.data(), changed.data() + f->data_offset());
        EXPECT_LE(t.data.data() + t.data.size(), changed.data() + changed.size());
        EXPECT_EQ(t.data.size(), t.data_end - t.data_begin);
      }
    }
  }
}

// ---- models: single file and shards with an index ----

class SafetensorsModelTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("safetensors-model"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& name, const std::vector<Entry>& entries) {
    test::write_bytes(dir_ / name, file_for(entries));
  }
  void write_text(const std::string& name, const std::string& text) {
    std::vector<std::byte> bytes;
    for (const char c : text) bytes.push_back(static_cast<std::byte>(c));
    test::write_bytes(dir_ / name, bytes);
  }
  // Two shards: a and b in the first, c in the second; the index lists them.
  void write_sharded() {
    write("model-00001-of-00002.safetensors", {{"a", "F32", {2}, pattern(8, 1)}, {"b", "U8", {3}, pattern(3, 2)}});
    write("model-00002-of-00002.safetensors", {{"c", "BF16", {2, 2}, pattern(8, 3)}});
    write_text(std::string(kSafetensorsIndexFileName), kIndex);
  }

  static constexpr const char* kIndex =
      R"({"metadata":{"total_size":19,"format":"pt"},"weight_map":{)"
      R"("c":"model-00002-of-00002.safetensors","a":"model-00001-of-00002.safetensors",)"
      R"("b":"model-00001-of-00002.safetensors"}})";

  std::filesystem::path dir_;
};

TEST_F(SafetensorsModelTest, SingleFile) {
  write("model.safetensors", {{"x", "I32", {2}, pattern(8, 9)}});
  auto m = SafetensorsModel::open(dir_);
  ASSERT_TRUE(m) << m.error().describe();
  EXPECT_FALSE(m->index());
  ASSERT_EQ(m->shards().size(), 1u);
  EXPECT_EQ(m->shard_files()[0], "model.safetensors");
  ASSERT_EQ(m->tensors().size(), 1u);
  EXPECT_EQ(m->find("x")->tensor->data.size(), 8u);
  EXPECT_EQ(m->find("y"), nullptr);
}

TEST_F(SafetensorsModelTest, ShardsFromTheIndex) {
  write_sharded();
  auto m = SafetensorsModel::open(dir_);
  ASSERT_TRUE(m) << m.error().describe();
  ASSERT_TRUE(m->index());
  // Shards in order of first appearance in weight_map.
  ASSERT_EQ(m->shard_files().size(), 2u);
  EXPECT_EQ(m->shard_files()[0], "model-00002-of-00002.safetensors");
  EXPECT_EQ(m->shard_files()[1], "model-00001-of-00002.safetensors");
  ASSERT_EQ(m->tensors().size(), 3u);
  EXPECT_EQ(m->tensors()[0].tensor->name, "c");
  EXPECT_EQ(m->tensors()[1].tensor->name, "a");
  EXPECT_EQ(m->tensors()[2].tensor->name, "b");
  const SafetensorsModelTensor* c = m->find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->shard, 0u);
  const auto expected = pattern(8, 3);
  EXPECT_TRUE(std::equal(c->tensor->data.begin(), c->tensor->data.end(), expected.begin()));
  EXPECT_EQ(m->find("b")->shard, 1u);
  const SafetensorsIndex& index = *m->index();
  EXPECT_EQ(index.metadata, (std::vector<std::pair<std::string, std::string>>{{"total_size", "19"}, {"format", "pt"}}));
  EXPECT_EQ(index.shard_of("a"), "model-00001-of-00002.safetensors");
  EXPECT_FALSE(index.shard_of("z"));
  EXPECT_EQ(index.weight_map[1].offset, std::string_view(kIndex).find("\"a\""));
  // The model moves with its views intact.
  SafetensorsModel moved = std::move(m).value();
  EXPECT_EQ(moved.find("c")->tensor, c->tensor);
}

TEST_F(SafetensorsModelTest, NoCheckpoint) {
  auto m = SafetensorsModel::open(dir_);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::io_error);
}

TEST_F(SafetensorsModelTest, IndexedTensorMissingFromItsShard) {
  write_sharded();
  // The index also lists d, which no shard holds.
  std::string index = kIndex;
  index.insert(index.find("\"c\":"), R"("d":"model-00002-of-00002.safetensors",)");
  write_text(std::string(kSafetensorsIndexFileName), index);
  auto m = SafetensorsModel::open(dir_);
  ASSERT_FALSE(m);
  expect_error(m.error(), ErrorCode::index_mismatch, "d", index.find("\"d\""));
}

TEST_F(SafetensorsModelTest, TensorInAnotherShardThanIndexed) {
  write_sharded();
  std::string index = kIndex;
  index.replace(index.find("\"b\":\"model-00001"), 16, "\"b\":\"model-00002");
  write_text(std::string(kSafetensorsIndexFileName), index);
  auto m = SafetensorsModel::open(dir_);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::index_mismatch) << m.error().describe();
  EXPECT_EQ(m.error().subject, "b");
}

TEST_F(SafetensorsModelTest, ShardTensorNotInTheIndex) {
  write_sharded();
  write("model-00002-of-00002.safetensors", {{"c", "BF16", {2, 2}, pattern(8, 3)}, {"extra", "U8", {1}, pattern(1, 0)}});
  auto m = SafetensorsModel::open(dir_);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::index_mismatch) << m.error().describe();
  EXPECT_EQ(m.error().subject, "extra");
}

TEST_F(SafetensorsModelTest, NameInTwoShards) {
  write_sharded();
  write("model-00002-of-00002.safetensors", {{"c", "BF16", {2, 2}, pattern(8, 3)}, {"a", "F32", {2}, pattern(8, 1)}});
  auto m = SafetensorsModel::open(dir_);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::safetensors_duplicate_tensor) << m.error().describe();
  EXPECT_EQ(m.error().subject, "a");
}

TEST_F(SafetensorsModelTest, MissingOrBrokenShard) {
  write_sharded();
  std::filesystem::remove(dir_ / "model-00002-of-00002.safetensors");
  auto missing = SafetensorsModel::open(dir_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::io_error);
  // The shard is named in the error's file, not pasted into its message.
  EXPECT_EQ(missing.error().file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(missing.error().message.find("model-00002-of-00002.safetensors"), std::string::npos) << missing.error().message;

  write_text("model-00002-of-00002.safetensors", "short");
  auto broken = SafetensorsModel::open(dir_);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, ErrorCode::safetensors_truncated);
  EXPECT_EQ(broken.error().file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(broken.error().offset, std::optional<uint64_t>(0));
}

TEST(SafetensorsIndexParse, Rejections) {
  struct Case {
    std::string json;
    ErrorCode code;
    std::string subject;
  };
  const std::vector<Case> cases{
      {"[]", ErrorCode::bad_header, ""},
      {"{\"weight_map\":", ErrorCode::bad_header, ""},
      {"{\"metadata\":{}}", ErrorCode::bad_header, "weight_map"},
      {"{\"weight_map\":[]}", ErrorCode::bad_header, "weight_map"},
      {"{\"metadata\":1,\"weight_map\":{}}", ErrorCode::bad_header, "metadata"},
      {"{\"weight_map\":{\"a\":1}}", ErrorCode::bad_header, "a"},
      {"{\"weight_map\":{\"a\":\"s\",\"a\":\"s\"}}", ErrorCode::safetensors_duplicate_tensor, "a"},
      {"{\"weight_map\":{},\"weight_map\":{}}", ErrorCode::safetensors_duplicate_key, "weight_map"},
      {"{\"weight_map\":{\"a\":\"../s\"}}", ErrorCode::index_mismatch, "a"},
      {"{\"weight_map\":{\"a\":\"/etc/passwd\"}}", ErrorCode::index_mismatch, "a"},
      {"{\"weight_map\":{\"a\":\"..\"}}", ErrorCode::index_mismatch, "a"},
      {"{\"weight_map\":{\"a\":\"\"}}", ErrorCode::index_mismatch, "a"},
      {"{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + ",\"weight_map\":{}}", ErrorCode::bad_header, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json.substr(0, 60));
    auto index = SafetensorsIndex::parse(c.json);
    ASSERT_FALSE(index);
    EXPECT_EQ(index.error().code, c.code) << index.error().describe();
    EXPECT_EQ(index.error().subject, c.subject) << index.error().describe();
  }
  // The duplicate's offset is its second occurrence.
  const std::string dup = R"({"weight_map":{"a":"s","a":"s"}})";
  EXPECT_EQ(SafetensorsIndex::parse(dup).error().offset, dup.rfind("\"a\""));
}

}  // namespace
}  // namespace ggufkit
