// The writer: encoding checked byte for byte against RawGguf (which shares no code with it),
// metadata editing, tensor arguments, producers, padding, atomic file writes and round trips.

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "raw_gguf.h"
#include "test_support.h"
#include "unit_helpers.h"

namespace ggufkit {
namespace {

using test::FailsWith;
using test::RawGguf;
namespace vt = test::gguf_type;
namespace gt = test::ggml_type;
namespace fs = std::filesystem;

std::vector<std::byte> write_to_memory(const GgufBuilder& b, const WriteOptions& options = {}) {
  MemorySink sink;
  auto r = b.write(sink, options);
  EXPECT_TRUE(r) << r.error().describe();
  return sink.data;
}

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(static_cast<uint8_t>(seed + i * 7 + 1) | 1);
  return v;
}

WriteOptions no_sync() {
  WriteOptions o;
  o.sync = false;
  return o;
}

// Files in `dir` whose names mark them as the writer's temporary files.
std::vector<std::string> temp_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) out.push_back(name);
  }
  return out;
}

// ---- Encoding, checked against independently built bytes ----

TEST(WriterEncoding, HeaderAndMetadataMatchTheFormatByteForByte) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
  ASSERT_TRUE(b.set("u32", MetadataValue::of(uint32_t{0xDEADBEEF})));
  ASSERT_TRUE(b.set("i8", MetadataValue::of(int8_t{-2})));
  ASSERT_TRUE(b.set("flag", MetadataValue::of(true)));
  ASSERT_TRUE(b.set("f64", MetadataValue::of(0.5)));
  ASSERT_TRUE(b.set("ids", MetadataValue::array(std::vector<int32_t>{1, -1})));
  ASSERT_TRUE(b.set("words", MetadataValue::string_array(std::vector<std::string>{"a", "bc"})));

  RawGguf expected;
  expected.header(3, 0, 7)
      .kv_string("general.architecture", "llama")
      .kv_u32("u32", 0xDEADBEEF)
      .kv_i8("i8", -2)
      .kv_bool("flag", 1)
      .kv_f64("f64", 0.5)
      .kv_i32_array("ids", {1, -1})
      .kv_string_array("words", {"a", "bc"})
      .pad_to(32);
  EXPECT_EQ(write_to_memory(b), expected.bytes());
}

TEST(WriterEncoding, TensorInfosAndDataMatchTheFormatByteForByte) {
  const auto a = pattern(12, 1);  // 3 float32: padded to 32
  const auto c = pattern(36, 2);  // 4 x 9 int8: padded to 64
  GgufBuilder b;
  ASSERT_TRUE(b.set("general.name", MetadataValue::string("t")));
  const int64_t a_shape[] = {3};
  const int64_t c_shape[] = {4, 9};
  ASSERT_TRUE(b.add_tensor("a", TensorType::F32, a_shape, a));
  ASSERT_TRUE(b.add_tensor("c", TensorType::I8, c_shape, c));

  RawGguf expected;
  expected.header(3, 2, 1).kv_string("general.name", "t");
  expected.tensor_info("a", {3}, gt::kF32, 0).tensor_info("c", {4, 9}, gt::kI8, 32).pad_to(32);
  expected.raw(a).pad_to(32).raw(c).pad_to(32);
  EXPECT_EQ(write_to_memory(b), expected.bytes());
  EXPECT_EQ(b.file_bytes(), expected.size());
}

TEST(WriterEncoding, VersionTwo) {
  GgufBuilder b;
  ASSERT_TRUE(b.set_version(2));
  EXPECT_EQ(b.version(), 2u);
  RawGguf expected;
  expected.header(2, 0, 0).pad_to(32);
  EXPECT_EQ(write_to_memory(b), expected.bytes());
}

TEST(WriterEncoding, EmptyBuilderWithAndWithoutHeaderPadding) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("k", MetadataValue::of(uint8_t{1})));  // 24 + 14 = 38 bytes of header
  WriteOptions padded;
  WriteOptions unpadded;
  unpadded.pad_header_without_tensors = false;
  EXPECT_EQ(write_to_memory(b, padded).size(), 64u);
  EXPECT_EQ(write_to_memory(b, unpadded).size(), 38u);
  EXPECT_EQ(b.header_bytes(padded), 64u);
  EXPECT_EQ(b.header_bytes(unpadded), 38u);
  EXPECT_EQ(b.file_bytes(unpadded), 38u);
}

// ---- Every value type written and read back ----

TEST(WriterValues, EveryValueTypeReadsBackIdentical) {
  std::vector<std::pair<std::string, MetadataValue>> values = {
      {"u8", MetadataValue::of(uint8_t{200})},
      {"i8", MetadataValue::of(int8_t{-100})},
      {"u16", MetadataValue::of(uint16_t{60000})},
      {"i16", MetadataValue::of(int16_t{-30000})},
      {"u32", MetadataValue::of(uint32_t{4000000000u})},
      {"i32", MetadataValue::of(int32_t{-2000000000})},
      {"f32", MetadataValue::of(3.25f)},
      {"bool", MetadataValue::of(false)},
      {"string", MetadataValue::string(std::string("with\0nul \xFF", 10))},
      {"u64", MetadataValue::of(uint64_t{UINT64_MAX})},
      {"i64", MetadataValue::of(int64_t{INT64_MIN})},
      {"f64", MetadataValue::of(-2.0e-300)},
      {"arr_u8", MetadataValue::array(std::vector<uint8_t>{1, 2, 255})},
      {"arr_i8", MetadataValue::array(std::vector<int8_t>{-1, 1})},
      {"arr_u16", MetadataValue::array(std::vector<uint16_t>{65535})},
      {"arr_i16", MetadataValue::array(std::vector<int16_t>{-5, 5})},
      {"arr_u32", MetadataValue::array(std::vector<uint32_t>{7, 8, 9})},
      {"arr_i32", MetadataValue::array(std::vector<int32_t>{INT32_MIN})},
      {"arr_f32", MetadataValue::array(std::vector<float>{0.5f, -0.25f})},
      {"arr_bool", MetadataValue::array(std::vector<bool>{true, false, true})},
      {"arr_u64", MetadataValue::array(std::vector<uint64_t>{1, UINT64_MAX})},
      {"arr_i64", MetadataValue::array(std::vector<int64_t>{-7})},
      {"arr_f64", MetadataValue::array(std::vector<double>{1e10, -1e-10})},
      {"arr_string", MetadataValue::string_array(std::vector<std::string>{"x", "", "zz"})},
      {"arr_empty", MetadataValue::array(std::vector<uint32_t>{})},
  };
  std::vector<MetadataValue> rows = {MetadataValue::array(std::vector<uint16_t>{1, 2}),
                                     MetadataValue::array(std::vector<uint16_t>{3})};
  auto nested = MetadataValue::array_of(ValueType::Array, rows);
  ASSERT_TRUE(nested) << nested.error().describe();
  values.emplace_back("arr_nested", std::move(nested).value());

  GgufBuilder b;
  for (const auto& [key, value] : values) ASSERT_TRUE(b.set(key, value)) << key;
  EXPECT_EQ(b.metadata_count(), values.size());
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_EQ(f->metadata().size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const KeyValue& kv = f->metadata()[i];
    SCOPED_TRACE(values[i].first);
    EXPECT_EQ(kv.key, values[i].first);
    EXPECT_EQ(kv.value.type(), values[i].second.type());
    ASSERT_EQ(kv.value.encoded().size(), values[i].second.encoded().size());
    EXPECT_TRUE(std::equal(kv.value.encoded().begin(), kv.value.encoded().end(), values[i].second.encoded().begin()));
  }
  // And a few through the typed accessors, so that equal bytes also mean the right values.
  EXPECT_EQ(f->get("u16")->get<uint16_t>(), 60000);
  EXPECT_EQ(f->get("i64")->get<int64_t>(), INT64_MIN);
  EXPECT_EQ(f->get("f32")->get<float>(), 3.25f);
  EXPECT_EQ(f->get("bool")->get<bool>(), false);
  EXPECT_EQ(f->get("string")->as_string(), std::string_view("with\0nul \xFF", 10));
  std::vector<bool> flags;
  ASSERT_TRUE(f->get("arr_bool")->as_array()->copy_to(flags));
  EXPECT_EQ(flags, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(f->get("arr_nested")->as_array()->at(1)->as_array()->get<uint16_t>(0), 3);
  EXPECT_TRUE(f->get("arr_empty")->as_array()->empty());
}

TEST(WriterValues, SpanArraysAndStringViewArrays) {
  const uint32_t raw[] = {10, 20, 30};
  const std::string_view words[] = {"one", "two"};
  GgufBuilder b;
  ASSERT_TRUE(b.set("span", MetadataValue::array(std::span<const uint32_t>(raw))));
  ASSERT_TRUE(b.set("words", MetadataValue::string_array(std::span<const std::string_view>(words))));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  std::vector<uint32_t> got;
  ASSERT_TRUE(f->get("span")->as_array()->copy_to(got));
  EXPECT_EQ(got, (std::vector<uint32_t>{10, 20, 30}));
  const auto arr = f->get("words")->as_array();
  EXPECT_EQ(std::vector<std::string_view>(arr->strings().begin(), arr->strings().end()),
            (std::vector<std::string_view>{"one", "two"}));
}

TEST(WriterValues, CopiedValuesKeepTheirBytes) {
  // copy_of() of a view from a file, written again, gives the same encoding.
  RawGguf g;
  g.header(3, 0, 2).kv_bool("odd_bool", 7).kv_string_array("s", {"\xC0\xAF", ""});
  auto src = GgufFile::parse(g.span());
  ASSERT_TRUE(src) << src.error().describe();
  GgufBuilder b;
  for (const KeyValue& kv : src->metadata()) ASSERT_TRUE(b.set(kv.key, MetadataValue::copy_of(kv.value)));
  RawGguf expected;
  expected.header(3, 0, 2).kv_bool("odd_bool", 7).kv_string_array("s", {"\xC0\xAF", ""}).pad_to(32);
  EXPECT_EQ(write_to_memory(b), expected.bytes());
}

// ---- Metadata editing ----

TEST(WriterMetadata, SetReplacesInPlaceAndKeepsOrder) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("first", MetadataValue::of(uint8_t{1})));
  ASSERT_TRUE(b.set("second", MetadataValue::of(uint8_t{2})));
  ASSERT_TRUE(b.set("third", MetadataValue::of(uint8_t{3})));
  ASSERT_TRUE(b.set("second", MetadataValue::string("replaced")));  // another type, same place
  EXPECT_EQ(b.metadata_count(), 3u);
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->metadata()[0].key, "first");
  EXPECT_EQ(f->metadata()[1].key, "second");
  EXPECT_EQ(f->metadata()[1].value.as_string(), "replaced");
  EXPECT_EQ(f->metadata()[2].key, "third");
}

TEST(WriterMetadata, RemoveAndFind) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("a", MetadataValue::of(uint8_t{1})));
  ASSERT_TRUE(b.set("b", MetadataValue::of(uint8_t{2})));
  ASSERT_TRUE(b.set("c", MetadataValue::of(uint8_t{3})));
  ASSERT_NE(b.find("b"), nullptr);
  EXPECT_EQ(b.find("b")->view().get<uint8_t>(), 2);
  EXPECT_TRUE(b.remove("b"));
  EXPECT_FALSE(b.remove("b"));
  EXPECT_FALSE(b.remove("missing"));
  EXPECT_EQ(b.find("b"), nullptr);
  EXPECT_EQ(b.metadata_count(), 2u);
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "a");
  EXPECT_EQ(f->metadata()[1].key, "c");
}

TEST(WriterMetadata, EmptyKeyIsRefused) {
  GgufBuilder b;
  auto r = b.set("", MetadataValue::of(uint8_t{1}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::empty_key);
  EXPECT_EQ(b.metadata_count(), 0u);
}

// A default MetadataValue says "uint8" but holds no byte: written as is, the record would be one
// byte short and every later record misread. The builder must refuse it or write a valid file.
TEST(WriterMetadata, DefaultConstructedValueNeverMakesACorruptFile) {
  GgufBuilder b;
  auto set = b.set("empty.value", MetadataValue{});
  if (!set) {
    EXPECT_EQ(set.error().code, ErrorCode::invalid_argument) << set.error().describe();
    return;
  }
  ASSERT_TRUE(b.set("after", MetadataValue::of(uint32_t{7})));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << "the builder accepted the value but wrote an unreadable file: " << f.error().describe();
  EXPECT_EQ(f->get("after")->get<uint32_t>(), 7u);
}

TEST(WriterMetadata, AlignmentMustBeAUint32PowerOfTwo) {
  GgufBuilder b;
  EXPECT_EQ(b.alignment(), 32u);
  ASSERT_TRUE(b.set_alignment(64));
  EXPECT_EQ(b.alignment(), 64u);

  const std::pair<const char*, MetadataValue> bad[] = {
      {"zero", MetadataValue::of(uint32_t{0})},
      {"three", MetadataValue::of(uint32_t{3})},
      {"uint64", MetadataValue::of(uint64_t{32})},
      {"int32", MetadataValue::of(int32_t{32})},
      {"string", MetadataValue::string("32")},
  };
  for (const auto& [what, value] : bad) {
    SCOPED_TRACE(what);
    auto r = b.set("general.alignment", value);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::bad_alignment);
    EXPECT_EQ(r.error().subject, "general.alignment");
    EXPECT_EQ(b.alignment(), 64u) << "a refused value leaves the old one";
  }
  EXPECT_FALSE(b.set_alignment(0));
  EXPECT_FALSE(b.set_alignment(48));
  EXPECT_TRUE(b.set_alignment(1));
  EXPECT_EQ(b.alignment(), 1u);
}

// `levels` arrays nested in each other (the outermost included), the innermost holding one uint8.
MetadataValue nested_value(uint32_t levels) {
  MetadataValue v = MetadataValue::array(std::vector<uint8_t>{42});
  for (uint32_t i = 1; i < levels; ++i) v = MetadataValue::array_of(ValueType::Array, std::span(&v, 1)).value();
  return v;
}

// Issue 29: the builder wrote a value nested deeper than the reader reads, and then no verb could
// open the file again (rm included). The one limit is format.h's, for both.
TEST(WriterMetadata, ArraysNestedDeeperThanTheReaderReadsAreRefused) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("deep", nested_value(kMaxArrayDepth))) << "the deepest value the reader reads";
  const Error e = b.set("deeper", nested_value(kMaxArrayDepth + 1)).error();
  EXPECT_EQ(e.describe(), "'deeper': arrays nested more than 8 deep");
  EXPECT_EQ(e.code, ErrorCode::array_too_deep);
  EXPECT_EQ(b.metadata_count(), 1u);
  // An empty array of arrays at the last level is refused as the reader refuses it.
  const MetadataValue empty_arrays = MetadataValue::array_of(ValueType::Array, {}).value();
  MetadataValue v = empty_arrays;
  for (uint32_t i = 1; i < kMaxArrayDepth; ++i) v = MetadataValue::array_of(ValueType::Array, std::span(&v, 1)).value();
  EXPECT_EQ(b.set("deep", v).error().describe(), "'deep': arrays nested more than 8 deep");
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->metadata().size(), 1u);
  EXPECT_TRUE(std::ranges::equal(f->get("deep")->encoded(), nested_value(kMaxArrayDepth).encoded()));
}

// The other limits of a value, with small ones (the real ones take a GiB to reach).
TEST(WriterMetadata, ValueLimitsAreTheReaders) {
  const ValueLimits small{.max_string_length = 3, .max_array_elements = 2, .max_array_depth = 2};
  const auto message = [&](const MetadataValue& v) {
    auto r = check_value_limits(v.view(), small);
    return r ? std::string("ok") : fmt::format("{} {}", error_code_name(r.error().code), r.error().describe());
  };
  EXPECT_EQ(message(MetadataValue::string("abc")), "ok");
  EXPECT_EQ(message(MetadataValue::string("abcd")), "string_too_long the string has 4 bytes, more than the 3 byte limit");
  EXPECT_EQ(message(MetadataValue::string_array(std::vector<std::string>{"a", "abcd"})),
            "string_too_long string 1 of the array has 4 bytes, more than the 3 byte limit");
  EXPECT_EQ(message(MetadataValue::array(std::vector<uint8_t>{1, 2})), "ok");
  EXPECT_EQ(message(MetadataValue::array(std::vector<uint8_t>{1, 2, 3})),
            "array_too_long array of 3 elements, more than the limit of 2");
  EXPECT_EQ(message(nested_value(2)), "ok");
  EXPECT_EQ(message(nested_value(3)), "array_too_deep arrays nested more than 2 deep");
  const MetadataValue long_inner = MetadataValue::string_array(std::vector<std::string>{"abcd"});
  EXPECT_EQ(message(MetadataValue::array_of(ValueType::Array, std::span(&long_inner, 1)).value()),
            "string_too_long string 0 of the array has 4 bytes, more than the 3 byte limit");
  EXPECT_EQ(message(MetadataValue::of(1.5f)), "ok");
}

// ---- add_tensor arguments ----

TEST(WriterTensorArguments, DuplicateName) {
  GgufBuilder b;
  const auto data = pattern(32, 0);
  const int64_t shape[] = {8};
  ASSERT_TRUE(b.add_tensor("w", TensorType::F32, shape, data));
  EXPECT_TRUE(FailsWith(b.add_tensor("w", TensorType::F32, shape, data), ErrorCode::duplicate_tensor, std::nullopt, "w"));
  EXPECT_EQ(b.tensor_count(), 1u);
}

// The reader ends names at a NUL as llama.cpp does, and refuses two equal up to it.
TEST(WriterTensorArguments, NamesEqualUpToANulAreDuplicates) {
  GgufBuilder b;
  const auto data = pattern(32, 0);
  const int64_t shape[] = {8};
  ASSERT_TRUE(b.add_tensor(std::string("w\0x", 3), TensorType::F32, shape, data));
  EXPECT_EQ(b.add_tensor(std::string("w\0y", 3), TensorType::F32, shape, data).error().message,
            "a tensor has the same name up to a NUL byte, which llama.cpp treats as the end of a name");
  EXPECT_EQ(b.add_tensor("w", TensorType::F32, shape, data).error().code, ErrorCode::duplicate_tensor);
  EXPECT_EQ(b.tensor_count(), 1u);
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
}

TEST(WriterTensorArguments, NameOf64BytesIsRefused63Accepted) {
  GgufBuilder b;
  const auto data = pattern(32, 0);
  const int64_t shape[] = {8};
  const std::string n63(63, 'x');
  const std::string n64(64, 'x');
  EXPECT_TRUE(FailsWith(b.add_tensor(n64, TensorType::F32, shape, data), ErrorCode::tensor_name_too_long, std::nullopt, n64,
                        {"63"}));
  EXPECT_TRUE(b.add_tensor(n63, TensorType::F32, shape, data));
  EXPECT_EQ(b.tensor_count(), 1u);
}

TEST(WriterTensorArguments, BlockSizeMismatch) {
  GgufBuilder b;
  const auto data = pattern(36, 0);
  const int64_t shape[] = {33};
  EXPECT_TRUE(FailsWith(b.add_tensor("q", TensorType::Q4_0, shape, data), ErrorCode::block_size_mismatch, std::nullopt, "q",
                        {"33", "32"}));
  EXPECT_EQ(b.tensor_count(), 0u);
}

TEST(WriterTensorArguments, DataSizeMismatch) {
  GgufBuilder b;
  const int64_t shape[] = {64};  // q4_0: 2 blocks of 18 bytes = 36
  const auto short_data = pattern(35, 0);
  const auto long_data = pattern(37, 0);
  EXPECT_TRUE(FailsWith(b.add_tensor("q", TensorType::Q4_0, shape, short_data), ErrorCode::invalid_argument, std::nullopt, "q",
                        {"35", "36"}));
  EXPECT_TRUE(FailsWith(b.add_tensor("q", TensorType::Q4_0, shape, long_data), ErrorCode::invalid_argument, std::nullopt, "q",
                        {"37", "36"}));
  const auto right_size = pattern(36, 0);
  EXPECT_TRUE(b.add_tensor("q", TensorType::Q4_0, shape, right_size));
}

TEST(WriterTensorArguments, FiveDimensions) {
  GgufBuilder b;
  const int64_t shape[] = {1, 1, 1, 1, 1};
  const auto data = pattern(4, 0);
  EXPECT_TRUE(FailsWith(b.add_tensor("t", TensorType::F32, shape, data), ErrorCode::bad_dimension_count, std::nullopt,
                        "t"));
}

TEST(WriterTensorArguments, NegativeDimension) {
  GgufBuilder b;
  const int64_t shape[] = {4, -1};
  EXPECT_TRUE(FailsWith(b.add_tensor("t", TensorType::F32, shape, std::span<const std::byte>{}), ErrorCode::bad_shape, std::nullopt, "t"));
}

TEST(WriterTensorArguments, RemovedTypes) {
  GgufBuilder b;
  const int64_t shape[] = {256};
  const auto data = pattern(256, 0);
  for (uint32_t id : {4u, 31u, 38u}) {
    SCOPED_TRACE(id);
    EXPECT_TRUE(FailsWith(b.add_tensor("t", static_cast<TensorType>(id), shape, data),
                          ErrorCode::removed_tensor_type, std::nullopt, "t"));
  }
  EXPECT_EQ(b.tensor_count(), 0u);
}

TEST(WriterTensorArguments, UnknownTypes) {
  GgufBuilder b;
  const int64_t shape[] = {256};
  const auto data = pattern(256, 0);
  for (uint32_t id : {43u, 1000u}) {
    SCOPED_TRACE(id);
    EXPECT_TRUE(FailsWith(b.add_tensor("t", static_cast<TensorType>(id), shape, data),
                          ErrorCode::unknown_tensor_type, std::nullopt, "t", {std::to_string(id)}));
  }
  EXPECT_EQ(b.tensor_count(), 0u);
}

TEST(WriterTensorArguments, EmptyProducerIsRefused) {
  GgufBuilder b;
  const int64_t shape[] = {8};
  EXPECT_TRUE(FailsWith(b.add_tensor("t", TensorType::F32, shape, TensorProducer{}), ErrorCode::invalid_argument, std::nullopt,
                        "t"));
}

// ---- Tensor data: spans, producers, alignment, padding ----

TEST(WriterTensors, SpanDataReadsBack) {
  const auto w = pattern(64 * 2 / 32 * 18, 3);  // q4_0 [64, 2]
  GgufBuilder b;
  const int64_t shape[] = {64, 2};
  ASSERT_TRUE(b.add_tensor("blk.0.w", TensorType::Q4_0, shape, w));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  const TensorInfo* t = f->find_tensor("blk.0.w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, TensorType::Q4_0);
  EXPECT_EQ(t->n_dims, 2u);
  EXPECT_EQ(t->ne[0], 64);
  EXPECT_EQ(t->ne[1], 2);
  const auto data = f->tensor_data(*t);
  EXPECT_EQ(std::vector<std::byte>(data.begin(), data.end()), w);
}

TEST(WriterTensors, ProducerIsCalledInOrderedChunks) {
  const auto expected = pattern(64, 9);
  std::vector<std::pair<uint64_t, size_t>> calls;
  GgufBuilder b;
  const int64_t shape[] = {64};
  ASSERT_TRUE(b.add_tensor("t", TensorType::I8, shape, [&](uint64_t offset, std::span<std::byte> out) -> Expected<void> {
    calls.emplace_back(offset, out.size());
    std::copy_n(expected.begin() + static_cast<ptrdiff_t>(offset), out.size(), out.begin());
    return {};
  }));
  WriteOptions options;
  options.chunk_bytes = 7;
  const auto bytes = write_to_memory(b, options);

  std::vector<std::pair<uint64_t, size_t>> want;
  for (uint64_t off = 0; off < 64; off += 7) want.emplace_back(off, std::min<uint64_t>(7, 64 - off));
  EXPECT_EQ(calls, want);  // 0,7,...,63: nine chunks of 7 and one of 1
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  const auto data = f->tensor_data(f->tensors()[0]);
  EXPECT_EQ(std::vector<std::byte>(data.begin(), data.end()), expected);
}

TEST(WriterTensors, EachProducerStartsAtOffsetZero) {
  std::vector<std::pair<char, uint64_t>> calls;
  auto producer_for = [&](char tag) {
    return [&calls, tag](uint64_t offset, std::span<std::byte> out) -> Expected<void> {
      calls.emplace_back(tag, offset);
      for (std::byte& x : out) x = static_cast<std::byte>(tag);
      return {};
    };
  };
  GgufBuilder b;
  const int64_t shape[] = {40};
  ASSERT_TRUE(b.add_tensor("a", TensorType::I8, shape, producer_for('a')));
  ASSERT_TRUE(b.add_tensor("b", TensorType::I8, shape, producer_for('b')));
  WriteOptions options;
  options.chunk_bytes = 16;
  const auto bytes = write_to_memory(b, options);
  EXPECT_EQ(calls, (std::vector<std::pair<char, uint64_t>>{{'a', 0}, {'a', 16}, {'a', 32}, {'b', 0}, {'b', 16}, {'b', 32}}));
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  for (const TensorInfo& t : f->tensors()) {
    for (std::byte x : f->tensor_data(t)) ASSERT_EQ(static_cast<char>(x), t.name[0]);
  }
}

// Movement inside each tensor: after every chunk, (index, bytes of it written, its size), then
// the tensor's own progress call; views report too.
TEST(WriterTensors, TensorProgressReportsEveryChunkInOrder) {
  const auto view = pattern(20, 3);
  GgufBuilder b;
  const int64_t shape40[] = {40};
  const int64_t shape20[] = {20};
  ASSERT_TRUE(b.add_tensor("a", TensorType::I8, shape40, [](uint64_t, std::span<std::byte> out) -> Expected<void> {
    std::fill(out.begin(), out.end(), std::byte{1});
    return {};
  }));
  ASSERT_TRUE(b.add_tensor("v", TensorType::I8, shape20, view));
  std::vector<std::string> calls;
  WriteOptions options;
  options.chunk_bytes = 16;
  options.tensor_progress = [&](size_t index, uint64_t done, uint64_t size) {
    calls.push_back(std::to_string(index) + ":" + std::to_string(done) + "/" + std::to_string(size));
  };
  options.progress = [&](size_t done, size_t all) { calls.push_back(std::to_string(done) + " of " + std::to_string(all)); };
  const auto bytes = write_to_memory(b, options);
  EXPECT_EQ(calls, (std::vector<std::string>{"0:16/40", "0:32/40", "0:40/40", "1 of 2", "1:20/20", "2 of 2"}));
  EXPECT_EQ(bytes, write_to_memory(b));  // reporting changes no byte
}

TEST(WriterTensors, ProducerAndSpanTensorsMix) {
  const auto span_data = pattern(20, 4);
  GgufBuilder b;
  const int64_t shape[] = {20};
  ASSERT_TRUE(b.add_tensor("span", TensorType::I8, shape, span_data));
  ASSERT_TRUE(b.add_tensor("prod", TensorType::I8, shape, [](uint64_t offset, std::span<std::byte> out) -> Expected<void> {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(offset + i);
    return {};
  }));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  const auto s = f->tensor_data(*f->find_tensor("span"));
  EXPECT_EQ(std::vector<std::byte>(s.begin(), s.end()), span_data);
  const auto p = f->tensor_data(*f->find_tensor("prod"));
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(static_cast<size_t>(p[i]), i);
}

TEST(WriterTensors, ProducerErrorAbortsTheWrite) {
  int calls = 0;
  GgufBuilder b;
  const int64_t shape[] = {64};
  ASSERT_TRUE(b.add_tensor("t", TensorType::I8, shape, [&](uint64_t offset, std::span<std::byte>) -> Expected<void> {
    ++calls;
    if (offset >= 16) return make_error(ErrorCode::io_error, 1234, "t", "source went away");
    return {};
  }));
  WriteOptions options;
  options.chunk_bytes = 16;
  MemorySink sink;
  auto r = b.write(sink, options);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::io_error);
  EXPECT_EQ(r.error().offset, 1234u);
  EXPECT_EQ(r.error().message, "source went away");
  EXPECT_EQ(calls, 2) << "no call after the failing one";
  EXPECT_LT(sink.data.size(), b.file_bytes()) << "the write stopped early";
}

TEST(WriterTensors, SinkErrorAbortsTheWrite) {
  struct FailingSink final : ByteSink {
    int writes = 0;
    Expected<void> write(std::span<const std::byte>) override {
      if (++writes == 2) return make_error(ErrorCode::io_error, 0, {}, "disk full");
      return {};
    }
  } sink;
  GgufBuilder b;
  const int64_t shape[] = {8};
  const auto t_data = pattern(32, 0);
  const auto u_data = pattern(32, 1);
  ASSERT_TRUE(b.add_tensor("t", TensorType::F32, shape, t_data));
  ASSERT_TRUE(b.add_tensor("u", TensorType::F32, shape, u_data));
  auto r = b.write(sink);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "disk full");
  EXPECT_EQ(sink.writes, 2);
}

TEST(WriterTensors, CustomAlignment64) {
  GgufBuilder b;
  ASSERT_TRUE(b.set_alignment(64));
  const int64_t s3[] = {3};
  const int64_t s20[] = {20};
  const auto a = pattern(12, 1);
  const auto b_data = pattern(80, 2);
  const auto c = pattern(12, 3);
  ASSERT_TRUE(b.add_tensor("a", TensorType::F32, s3, a));
  ASSERT_TRUE(b.add_tensor("b", TensorType::F32, s20, b_data));
  ASSERT_TRUE(b.add_tensor("c", TensorType::F32, s3, c));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensors()[0].offset, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 64u);
  EXPECT_EQ(f->tensors()[2].offset, 192u);  // 80 bytes padded to 128
  EXPECT_EQ(bytes.size(), f->data_offset() + 256);
  EXPECT_EQ(bytes.size(), b.file_bytes());
}

TEST(WriterTensors, PaddingBytesAreZero) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("general.name", MetadataValue::string("pad")));
  const int64_t s5[] = {5};
  const auto a = pattern(5, 1);
  ASSERT_TRUE(b.add_tensor("a", TensorType::I8, s5, a));
  ASSERT_TRUE(b.add_tensor("b", TensorType::I8, s5, [](uint64_t, std::span<std::byte> out) -> Expected<void> {
    std::fill(out.begin(), out.end(), std::byte{0xFF});
    return {};
  }));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_LT(f->header_size(), f->data_offset()) << "the fixture must need header padding";
  auto all_zero = [&](uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to; ++i) {
      if (bytes[i] != std::byte{0}) return false;
    }
    return true;
  };
  EXPECT_TRUE(all_zero(f->header_size(), f->data_offset())) << "padding after the tensor infos";
  const uint64_t d = f->data_offset();
  EXPECT_TRUE(all_zero(d + 5, d + 32)) << "padding after tensor a";
  EXPECT_TRUE(all_zero(d + 32 + 5, d + 64)) << "padding after tensor b";
  EXPECT_EQ(bytes.size(), d + 64);
}

TEST(WriterTensors, EmptyTensorTakesNoRoom) {
  GgufBuilder b;
  const int64_t empty[] = {0, 4};
  const int64_t s8[] = {8};
  ASSERT_TRUE(b.add_tensor("empty", TensorType::F32, empty, std::span<const std::byte>{}));
  const auto next = pattern(32, 0);
  ASSERT_TRUE(b.add_tensor("next", TensorType::F32, s8, next));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->find_tensor("empty")->size, 0u);
  EXPECT_EQ(f->find_tensor("next")->offset, 0u);
}

TEST(WriterTensors, SizesPredictedBeforeWriting) {
  GgufBuilder b;
  ASSERT_TRUE(b.set("k", MetadataValue::string("v")));
  const int64_t shape[] = {256, 3};
  const auto q = pattern(3 * 144, 0);
  ASSERT_TRUE(b.add_tensor("q", TensorType::Q4_K, shape, q));
  const auto bytes = write_to_memory(b);
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(b.header_bytes(), f->data_offset());
  EXPECT_EQ(b.file_bytes(), bytes.size());
  EXPECT_EQ(f->tensors()[0].size, 432u);
}

// ---- write_file ----

TEST(WriterFiles, WritesAndReplaces) {
  const auto dir = test::temp_dir("writer-files");
  const fs::path target = dir / "model.gguf";
  {
    std::ofstream(target) << "old contents";
  }
  GgufBuilder b;
  ASSERT_TRUE(b.set("general.name", MetadataValue::string("new")));
  auto r = b.write_file(target);  // default options: synced
  ASSERT_TRUE(r) << r.error().describe();
  auto f = GgufFile::open(target);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->get("general.name")->as_string(), "new");
  EXPECT_TRUE(temp_files_in(dir).empty());
  EXPECT_EQ(fs::file_size(target), b.file_bytes());
  fs::remove_all(dir);
}

TEST(WriterFiles, ProducerErrorLeavesTheTargetUntouched) {
  const auto dir = test::temp_dir("writer-atomic");
  const fs::path target = dir / "model.gguf";
  const std::string old_contents = "the previous model";
  {
    std::ofstream(target) << old_contents;
  }
  GgufBuilder b;
  const int64_t shape[] = {1 << 20};
  ASSERT_TRUE(b.add_tensor("t", TensorType::I8, shape, [](uint64_t offset, std::span<std::byte> out) -> Expected<void> {
    if (offset > 0) return make_error(ErrorCode::invalid_argument, 0, "t", "quantization failed");
    std::fill(out.begin(), out.end(), std::byte{1});
    return {};
  }));
  WriteOptions options = no_sync();
  options.chunk_bytes = 4096;
  auto r = b.write_file(target, options);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "quantization failed");
  std::ifstream in(target);
  const std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(now, old_contents);
  EXPECT_TRUE(temp_files_in(dir).empty()) << testing::PrintToString(temp_files_in(dir));
  fs::remove_all(dir);
}

TEST(WriterFiles, ProducerErrorCreatesNoFile) {
  const auto dir = test::temp_dir("writer-atomic-new");
  const fs::path target = dir / "new.gguf";
  GgufBuilder b;
  const int64_t shape[] = {8};
  ASSERT_TRUE(b.add_tensor("t", TensorType::I8, shape, [](uint64_t, std::span<std::byte>) -> Expected<void> {
    return make_error(ErrorCode::io_error, 0, "t", "nope");
  }));
  ASSERT_FALSE(b.write_file(target, no_sync()));
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(fs::is_empty(dir)) << testing::PrintToString(temp_files_in(dir));
  fs::remove_all(dir);
}

TEST(WriterFiles, MissingDirectoryIsAnIoError) {
  const auto dir = test::temp_dir("writer-missing");
  GgufBuilder b;
  auto r = b.write_file(dir / "no" / "such" / "dir" / "x.gguf", no_sync());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::io_error);
  EXPECT_NE(r.error().message.find("No such file"), std::string::npos) << r.error().message;
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// A directory (or device, FIFO, socket) under the target's name is refused before anything is
// written (OutputPolicy), whatever `overwrite` says.
TEST(WriterFiles, TargetThatIsADirectoryIsRefused) {
  const auto dir = test::temp_dir("writer-target-dir");
  fs::create_directory(dir / "model.gguf");
  fs::create_directory(dir / "model.gguf" / "inside");  // rename() cannot replace a non-empty directory
  GgufBuilder b;
  auto r = b.write_file(dir / "model.gguf", no_sync());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::output_not_regular);
  EXPECT_EQ(r.error().file, (dir / "model.gguf").string());
  EXPECT_EQ(r.error().message, "is a directory: refusing to replace it with a file");
  EXPECT_FALSE(r.error().offset);
  EXPECT_TRUE(fs::is_directory(dir / "model.gguf" / "inside"));
  EXPECT_TRUE(temp_files_in(dir).empty()) << testing::PrintToString(temp_files_in(dir));
  fs::remove_all(dir);
}

TEST(WriterFiles, ParentThatIsAFileIsAnIoError) {
  const auto dir = test::temp_dir("writer-notdir");
  {
    std::ofstream(dir / "plain") << "x";
  }
  GgufBuilder b;
  auto r = b.write_file(dir / "plain" / "x.gguf", no_sync());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::io_error);
  fs::remove_all(dir);
}

TEST(WriterFiles, ReadOnlyDirectoryIsAnIoError) {
  const auto dir = test::temp_dir("writer-readonly");
  const fs::path ro = dir / "ro";
  fs::create_directory(ro);
  ::chmod(ro.c_str(), 0555);
  // Root ignores directory permissions; only test what the OS would enforce.
  const fs::path probe = ro / "probe";
  if (FILE* p = std::fopen(probe.c_str(), "w")) {
    std::fclose(p);
    fs::remove(probe);
    ::chmod(ro.c_str(), 0755);
    fs::remove_all(dir);
    GTEST_SKIP() << "this user can write into a 0555 directory (root?); nothing to test";
  }
  GgufBuilder b;
  auto r = b.write_file(ro / "x.gguf", no_sync());
  ::chmod(ro.c_str(), 0755);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::io_error);
  EXPECT_TRUE(fs::is_empty(ro));
  fs::remove_all(dir);
}

// ---- Round trips through from_file ----

void expect_byte_identical_round_trip(const RawGguf& g) {
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const GgufBuilder b = GgufBuilder::from_file(*f);
  EXPECT_EQ(b.metadata_count(), f->metadata().size());
  EXPECT_EQ(b.tensor_count(), f->tensors().size());
  EXPECT_EQ(b.version(), f->version());
  const auto out = write_to_memory(b, b.suggested_options());
  EXPECT_EQ(out.size(), g.size());
  EXPECT_TRUE(out == g.bytes()) << "the rewritten bytes differ from the source";
  EXPECT_EQ(b.file_bytes(b.suggested_options()), g.size());
}

TEST(WriterRoundTrip, NoTensorsPadded) {
  RawGguf g;
  g.header(3, 0, 3).kv_string("general.architecture", "llama").kv_u32("llama.block_count", 2);
  g.kv_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "a"}).pad_to(32);
  expect_byte_identical_round_trip(g);
}

TEST(WriterRoundTrip, NoTensorsUnpadded) {
  RawGguf g;
  g.header(3, 0, 2).kv_string("general.architecture", "llama").kv_u8("x", 1);
  ASSERT_NE(g.size() % 32, 0u);
  expect_byte_identical_round_trip(g);
}

TEST(WriterRoundTrip, NoTensorsHeaderExactlyAligned) {
  RawGguf g;
  g.header(3, 0, 1).kv_string("k", std::string(64 - 24 - 8 - 1 - 4 - 8, 'v'));
  ASSERT_EQ(g.size() % 32, 0u);
  expect_byte_identical_round_trip(g);
}

TEST(WriterRoundTrip, NoTensorsCustomAlignmentPadded) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("general.alignment", 256).pad_to(256);
  expect_byte_identical_round_trip(g);
}

TEST(WriterRoundTrip, WithTensors) {
  RawGguf g;
  g.header(3, 3, 2).kv_string("general.architecture", "llama").kv_bool("odd", 3);
  g.tensor_info("token_embd.weight", {64, 2}, gt::kQ8_0, 0);
  g.tensor_info("one", {1}, gt::kF32, 160);  // 4 blocks of 34 bytes, padded to 160
  g.tensor_info_claiming("zero_dims", 0, {}, gt::kF32, 192);
  g.pad_to(32);
  g.raw(pattern(4 * 34, 5)).pad_to(32).f32(1.0f).pad_to(32).f32(2.0f).pad_to(32);
  expect_byte_identical_round_trip(g);
}

TEST(WriterRoundTrip, VersionTwoWithCustomAlignment) {
  RawGguf g;
  g.header(2, 2, 1).kv_u32("general.alignment", 16);
  g.tensor_info("a", {3}, gt::kF16, 0).tensor_info("b", {9}, gt::kI8, 16).pad_to(16);
  g.raw(pattern(6, 1)).pad_to(16).raw(pattern(9, 2)).pad_to(16);
  expect_byte_identical_round_trip(g);
}

// Files llama.cpp accepts that no writer lays out this way come back normalised (writer.h):
// the output is the canonical layout of the same metadata and tensor bytes.
void expect_normalised_round_trip(const RawGguf& source, const RawGguf& canonical) {
  auto f = GgufFile::parse(source.span());
  ASSERT_TRUE(f) << f.error().describe();
  const GgufBuilder b = GgufBuilder::from_file(*f);
  const auto out = write_to_memory(b, b.suggested_options());
  EXPECT_TRUE(out == canonical.bytes()) << "the rewritten bytes are not the canonical layout";
  auto again = GgufFile::parse(out);
  ASSERT_TRUE(again) << again.error().describe();
  ASSERT_EQ(again->tensors().size(), f->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const auto a = f->tensor_data(f->tensors()[i]);
    const auto c = again->tensor_data(again->tensors()[i]);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), c.begin(), c.end())) << "tensor bytes changed";
  }
}

// llama.cpp accepts a file whose last tensor is not followed by padding (its loader only checks
// that each tensor's bytes lie inside the file); the rewrite pads it.
TEST(WriterRoundTrip, LastTensorWithoutTrailingPaddingGetsPadded) {
  RawGguf g, canonical;
  g.header(3, 1, 0).tensor_info("a", {3}, gt::kF32, 0).pad_to(32).f32(1).f32(2).f32(3);
  canonical.header(3, 1, 0).tensor_info("a", {3}, gt::kF32, 0).pad_to(32).f32(1).f32(2).f32(3).pad_to(32);
  expect_normalised_round_trip(g, canonical);
}

// Bytes after the header of a file without tensors that are not a whole padding: llama.cpp
// accepts the file (checked against libggml-base.so); the rewrite drops them.
TEST(WriterRoundTrip, NoTensorsPartialPaddingIsDropped) {
  RawGguf g, canonical;
  g.header(3, 0, 1).kv_u8("k", 1).zeros(5);  // 38 bytes of header, 5 of the 26 padding bytes
  canonical.header(3, 0, 1).kv_u8("k", 1);
  expect_normalised_round_trip(g, canonical);
}

// Padding bytes that are not zero: llama.cpp never reads them; the rewrite zeroes them.
TEST(WriterRoundTrip, NonZeroPaddingIsZeroed) {
  RawGguf g, canonical;
  g.header(3, 1, 0).tensor_info("a", {3}, gt::kF32, 0).pad_to(32, 0xAA).f32(1).f32(2).f32(3).pad_to(32, 0xBB);
  canonical.header(3, 1, 0).tensor_info("a", {3}, gt::kF32, 0).pad_to(32).f32(1).f32(2).f32(3).pad_to(32);
  expect_normalised_round_trip(g, canonical);
}

TEST(WriterRoundTrip, RewriteFileToDisk) {
  RawGguf g;
  g.header(3, 1, 1).kv_string("general.name", "disk").tensor_info("a", {8}, gt::kF32, 0).pad_to(32);
  g.raw(pattern(32, 1));
  const auto dir = test::temp_dir("writer-rewrite");
  test::write_bytes(dir / "in.gguf", g.bytes());
  auto f = GgufFile::open(dir / "in.gguf");
  ASSERT_TRUE(f) << f.error().describe();
  auto r = rewrite_file(*f, dir / "out.gguf", /*sync=*/false);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(test::read_bytes(dir / "out.gguf"), g.bytes());
  EXPECT_TRUE(temp_files_in(dir).empty());
  fs::remove_all(dir);
}

TEST(WriterRoundTrip, RewriteOverItsOwnSource) {
  // The source stays mapped while the new file is renamed over it.
  RawGguf g;
  g.header(3, 1, 1).kv_string("general.name", "self").tensor_info("a", {8}, gt::kF32, 0).pad_to(32);
  g.raw(pattern(32, 7));
  const auto dir = test::temp_dir("writer-rewrite-self");
  const fs::path path = dir / "m.gguf";
  test::write_bytes(path, g.bytes());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_TRUE(rewrite_file(*f, path, /*sync=*/false));
  EXPECT_EQ(test::read_bytes(path), g.bytes());
  fs::remove_all(dir);
}

TEST(WriterRoundTrip, EditedCopyKeepsTensorData) {
  RawGguf g;
  g.header(3, 1, 2).kv_string("general.name", "before").kv_u8("drop.me", 1);
  g.tensor_info("a", {8}, gt::kF32, 0).pad_to(32).raw(pattern(32, 3));
  auto src = GgufFile::parse(g.span());
  ASSERT_TRUE(src) << src.error().describe();
  GgufBuilder b = GgufBuilder::from_file(*src);
  ASSERT_TRUE(b.set("general.name", MetadataValue::string("after")));
  ASSERT_TRUE(b.remove("drop.me"));
  ASSERT_TRUE(b.set_alignment(128));
  const auto bytes = write_to_memory(b, b.suggested_options());
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->get("general.name")->as_string(), "after");
  EXPECT_FALSE(f->get("drop.me"));
  EXPECT_EQ(f->data_offset() % 128, 0u);
  const auto data = f->tensor_data(f->tensors()[0]);
  EXPECT_EQ(std::vector<std::byte>(data.begin(), data.end()), pattern(32, 3));
}

}  // namespace
}  // namespace ggufkit

namespace ggufkit {
namespace {

using test::RawGguf;

// A file opened past its problems keeps a bad general.alignment (0 here); the reader lays it out at
// 32, and so does a builder made from it: no exception, no division by zero, the same bytes back.
TEST(WriterFromFile, BadAlignmentKeptFromAFileOpenedPastProblemsCountsAs32) {
  RawGguf g;
  g.header(3, 1, 1).kv_u32("general.alignment", 0).tensor_info("t", {8}, 0, 0).pad_to(32);
  g.fill(32, 0x3f);
  OpenOptions options;
  size_t problems = 0;
  options.on_problem = [&](const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::bad_alignment);
    ++problems;
    return true;
  };
  const auto file = GgufFile::parse(g.span(), options);
  ASSERT_TRUE(file) << file.error().describe();
  EXPECT_EQ(problems, 1u);
  EXPECT_EQ(file->alignment(), 32u);
  const GgufBuilder b = GgufBuilder::from_file(*file);
  EXPECT_EQ(b.alignment(), 32u);
  EXPECT_EQ(b.file_bytes(b.suggested_options()), g.size());
  MemorySink sink;
  ASSERT_TRUE(b.write(sink, b.suggested_options()));
  EXPECT_EQ(sink.data, g.bytes());
}

}  // namespace
}  // namespace ggufkit
