// Metadata values as the reader hands them out: every one of the 13 value types through
// ValueView and ArrayView, built byte by byte with RawGguf so that the reader is checked against
// the format, not against our own writer.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/reader.h"
#include "ggufkit/value.h"
#include "raw_gguf.h"
#include "unit_helpers.h"

namespace ggufkit {
namespace {

using test::RawGguf;
namespace vt = test::gguf_type;

// A file holding one key of every scalar type, with values at the edges of their ranges.
RawGguf every_scalar_type() {
  RawGguf g;
  g.header(3, 0, 13);
  g.kv_u8("u8", 0xFE);
  g.kv_i8("i8", -128);
  g.kv_u16("u16", 0xBEEF);
  g.kv_i16("i16", -32768);
  g.kv_u32("u32", 0xDEADBEEF);
  g.kv_i32("i32", std::numeric_limits<int32_t>::min());
  g.kv_f32("f32", -1.5f);
  g.kv_bool("bool", 1);
  g.kv_string("string", "hello");
  g.kv_u32_array("array", {1, 2, 3});
  g.kv_u64("u64", 0xFEDCBA9876543210ull);
  g.kv_i64("i64", std::numeric_limits<int64_t>::min());
  g.kv_f64("f64", 0.1);
  return g;
}

ValueView value_of(const GgufFile& f, std::string_view key) {
  const auto v = f.get(key);
  EXPECT_TRUE(v.has_value()) << key;
  return v.value_or(ValueView());
}

TEST(Values, EveryScalarTypeHasItsTypeTag) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_EQ(f->metadata().size(), 13u);
  const std::pair<std::string_view, ValueType> expected[] = {
      {"u8", ValueType::UInt8},     {"i8", ValueType::Int8},     {"u16", ValueType::UInt16},
      {"i16", ValueType::Int16},    {"u32", ValueType::UInt32},  {"i32", ValueType::Int32},
      {"f32", ValueType::Float32},  {"bool", ValueType::Bool},   {"string", ValueType::String},
      {"array", ValueType::Array},  {"u64", ValueType::UInt64},  {"i64", ValueType::Int64},
      {"f64", ValueType::Float64}};
  for (size_t i = 0; i < std::size(expected); ++i) {
    EXPECT_EQ(f->metadata()[i].key, expected[i].first);  // file order kept
    EXPECT_EQ(f->metadata()[i].value.type(), expected[i].second) << expected[i].first;
  }
}

TEST(Values, GetReturnsEachScalarExactly) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "u8").get<uint8_t>(), uint8_t{0xFE});
  EXPECT_EQ(value_of(*f, "i8").get<int8_t>(), int8_t{-128});
  EXPECT_EQ(value_of(*f, "u16").get<uint16_t>(), uint16_t{0xBEEF});
  EXPECT_EQ(value_of(*f, "i16").get<int16_t>(), int16_t{-32768});
  EXPECT_EQ(value_of(*f, "u32").get<uint32_t>(), 0xDEADBEEFu);
  EXPECT_EQ(value_of(*f, "i32").get<int32_t>(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(value_of(*f, "f32").get<float>(), -1.5f);
  EXPECT_EQ(value_of(*f, "bool").get<bool>(), true);
  EXPECT_EQ(value_of(*f, "string").get<std::string_view>(), "hello");
  EXPECT_EQ(value_of(*f, "u64").get<uint64_t>(), 0xFEDCBA9876543210ull);
  EXPECT_EQ(value_of(*f, "i64").get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(value_of(*f, "f64").get<double>(), 0.1);
}

TEST(Values, GetOfAnotherTypeIsEmpty) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  // Exact-type access never converts, not even between types of the same width.
  EXPECT_FALSE(value_of(*f, "u32").get<int32_t>());
  EXPECT_FALSE(value_of(*f, "u32").get<uint64_t>());
  EXPECT_FALSE(value_of(*f, "i8").get<uint8_t>());
  EXPECT_FALSE(value_of(*f, "u8").get<bool>());
  EXPECT_FALSE(value_of(*f, "f32").get<double>());
  EXPECT_FALSE(value_of(*f, "f64").get<float>());
  EXPECT_FALSE(value_of(*f, "string").get<uint64_t>());
  EXPECT_FALSE(value_of(*f, "u64").get<std::string_view>());
  EXPECT_FALSE(value_of(*f, "array").get<uint32_t>());
}

TEST(Values, AsUintAcceptsEveryIntegerThatFits) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "u8").as_uint(), 0xFEu);
  EXPECT_EQ(value_of(*f, "u16").as_uint(), 0xBEEFu);
  EXPECT_EQ(value_of(*f, "u32").as_uint(), 0xDEADBEEFu);
  EXPECT_EQ(value_of(*f, "u64").as_uint(), 0xFEDCBA9876543210ull);
  // Negative signed values do not fit.
  EXPECT_FALSE(value_of(*f, "i8").as_uint());
  EXPECT_FALSE(value_of(*f, "i16").as_uint());
  EXPECT_FALSE(value_of(*f, "i32").as_uint());
  EXPECT_FALSE(value_of(*f, "i64").as_uint());
  // Not integers at all.
  EXPECT_FALSE(value_of(*f, "f32").as_uint());
  EXPECT_FALSE(value_of(*f, "f64").as_uint());
  EXPECT_FALSE(value_of(*f, "bool").as_uint());
  EXPECT_FALSE(value_of(*f, "string").as_uint());
  EXPECT_FALSE(value_of(*f, "array").as_uint());
}

TEST(Values, AsUintAcceptsNonNegativeSignedValues) {
  RawGguf g;
  g.header(3, 0, 4).kv_i8("i8", 7).kv_i16("i16", 300).kv_i32("i32", 70000).kv_i64("i64", int64_t{1} << 40);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "i8").as_uint(), 7u);
  EXPECT_EQ(value_of(*f, "i16").as_uint(), 300u);
  EXPECT_EQ(value_of(*f, "i32").as_uint(), 70000u);
  EXPECT_EQ(value_of(*f, "i64").as_uint(), uint64_t{1} << 40);
}

TEST(Values, AsIntAcceptsEveryIntegerThatFits) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "i8").as_int(), -128);
  EXPECT_EQ(value_of(*f, "i16").as_int(), -32768);
  EXPECT_EQ(value_of(*f, "i32").as_int(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(value_of(*f, "i64").as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(value_of(*f, "u8").as_int(), 0xFE);
  EXPECT_EQ(value_of(*f, "u16").as_int(), 0xBEEF);
  EXPECT_EQ(value_of(*f, "u32").as_int(), int64_t{0xDEADBEEF});
  // 0xFEDCBA9876543210 is above INT64_MAX.
  EXPECT_FALSE(value_of(*f, "u64").as_int());
  EXPECT_FALSE(value_of(*f, "f32").as_int());
  EXPECT_FALSE(value_of(*f, "bool").as_int());
  EXPECT_FALSE(value_of(*f, "string").as_int());
}

TEST(Values, AsIntAcceptsUint64UpToInt64Max) {
  RawGguf g;
  g.header(3, 0, 2).kv_u64("max", uint64_t{INT64_MAX}).kv_u64("above", uint64_t{INT64_MAX} + 1);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "max").as_int(), INT64_MAX);
  EXPECT_FALSE(value_of(*f, "above").as_int());
}

TEST(Values, AsDoubleConvertsEveryNumber) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "f32").as_double(), -1.5);
  EXPECT_EQ(value_of(*f, "f64").as_double(), 0.1);
  EXPECT_EQ(value_of(*f, "u8").as_double(), 254.0);
  EXPECT_EQ(value_of(*f, "i8").as_double(), -128.0);
  EXPECT_EQ(value_of(*f, "u16").as_double(), 48879.0);
  EXPECT_EQ(value_of(*f, "i16").as_double(), -32768.0);
  EXPECT_EQ(value_of(*f, "u32").as_double(), 3735928559.0);
  EXPECT_EQ(value_of(*f, "i32").as_double(), -2147483648.0);
  EXPECT_EQ(value_of(*f, "u64").as_double(), static_cast<double>(0xFEDCBA9876543210ull));
  EXPECT_EQ(value_of(*f, "i64").as_double(), -9223372036854775808.0);
  EXPECT_FALSE(value_of(*f, "bool").as_double());
  EXPECT_FALSE(value_of(*f, "string").as_double());
  EXPECT_FALSE(value_of(*f, "array").as_double());
}

TEST(Values, FloatSpecialValuesAreKeptBitForBit) {
  RawGguf g;
  g.header(3, 0, 4)
      .kv_f32("nan32", std::numeric_limits<float>::quiet_NaN())
      .kv_f32("neg_zero", -0.0f)
      .kv_f64("inf", -std::numeric_limits<double>::infinity())
      .kv_f32("denormal", std::numeric_limits<float>::denorm_min());
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_TRUE(std::isnan(*value_of(*f, "nan32").get<float>()));
  EXPECT_TRUE(std::signbit(*value_of(*f, "neg_zero").get<float>()));
  EXPECT_EQ(value_of(*f, "inf").get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(value_of(*f, "denormal").get<float>(), std::numeric_limits<float>::denorm_min());
}

TEST(Values, AsStringAndAsArrayOnlyForTheirTypes) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "string").as_string(), "hello");
  EXPECT_FALSE(value_of(*f, "u64").as_string());
  EXPECT_FALSE(value_of(*f, "array").as_string());
  ASSERT_TRUE(value_of(*f, "array").as_array());
  EXPECT_FALSE(value_of(*f, "string").as_array());
  EXPECT_FALSE(value_of(*f, "u32").as_array());
}

TEST(Values, EncodedIsTheValueBytesWithoutTheTypeTag) {
  const RawGguf g = every_scalar_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "u16").encoded().size(), 2u);
  EXPECT_EQ(value_of(*f, "f64").encoded().size(), 8u);
  EXPECT_EQ(value_of(*f, "bool").encoded().size(), 1u);
  EXPECT_EQ(value_of(*f, "string").encoded().size(), 8u + 5u);          // length + "hello"
  EXPECT_EQ(value_of(*f, "array").encoded().size(), 4u + 8u + 3u * 4u);  // type, count, 3 uint32
}

// llama.cpp reads a bool byte as `byte != 0`; so does the reader.
TEST(Values, BoolBytesOtherThanZeroAndOneReadAsTrue) {
  RawGguf g;
  g.header(3, 0, 4).kv_bool("zero", 0).kv_bool("one", 1).kv_bool("two", 2).kv_bool("ff", 0xFF);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "zero").get<bool>(), false);
  EXPECT_EQ(value_of(*f, "one").get<bool>(), true);
  EXPECT_EQ(value_of(*f, "two").get<bool>(), true);
  EXPECT_EQ(value_of(*f, "ff").get<bool>(), true);
}

TEST(Values, BoolArrayBytesOtherThanZeroAndOneReadAsTrue) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("flags", vt::kBool, 4).u8(0).u8(1).u8(2).u8(0x80);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const auto arr = value_of(*f, "flags").as_array();
  ASSERT_TRUE(arr);
  EXPECT_EQ(arr->get<bool>(0), false);
  EXPECT_EQ(arr->get<bool>(1), true);
  EXPECT_EQ(arr->get<bool>(2), true);
  EXPECT_EQ(arr->get<bool>(3), true);
  std::vector<bool> copied;
  ASSERT_TRUE(arr->copy_to(copied));
  EXPECT_EQ(copied, (std::vector<bool>{false, true, true, true}));
}

TEST(Values, StringsWithEmbeddedNulsComeBackWhole) {
  const std::string with_nuls("a\0b\0\0c", 6);
  RawGguf g;
  g.header(3, 0, 1).kv_string("nuls", with_nuls);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const auto s = value_of(*f, "nuls").as_string();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size(), 6u);
  EXPECT_EQ(*s, with_nuls);
}

TEST(Values, InvalidUtf8IsReturnedByteExact) {
  // A lone continuation byte, an overlong encoding, a surrogate and bytes never valid in UTF-8.
  const std::string invalid = "\x80 \xC0\xAF \xED\xA0\x80 \xFE\xFF";
  RawGguf g;
  g.header(3, 0, 2).kv_string("bad", invalid).kv_string_array("bad_array", {invalid, "ok"});
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, "bad").as_string(), invalid);
  const auto arr = value_of(*f, "bad_array").as_array();
  ASSERT_TRUE(arr);
  EXPECT_EQ(*arr->strings().begin(), invalid);
}

TEST(Values, KeysWithEmbeddedNulsAreDistinctKeys) {
  const std::string k1("a\0b", 3);
  const std::string k2("a\0c", 3);
  RawGguf g;
  g.header(3, 0, 2).kv_u8(k1, 1).kv_u8(k2, 2);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(value_of(*f, k1).get<uint8_t>(), 1);
  EXPECT_EQ(value_of(*f, k2).get<uint8_t>(), 2);
  EXPECT_FALSE(f->get("a"));
}

TEST(Values, EmptyString) {
  RawGguf g;
  g.header(3, 0, 1).kv_string("empty", "");
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const auto s = value_of(*f, "empty").as_string();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->empty());
}

// ---- Arrays of every element type ----

// Builds one array per fixed-size element type, each with three elements.
RawGguf arrays_of_every_fixed_type() {
  RawGguf g;
  g.header(3, 0, 11);
  g.kv_array_header("u8", vt::kUInt8, 3).u8(0).u8(0x7F).u8(0xFF);
  g.kv_array_header("i8", vt::kInt8, 3).i8(-1).i8(0).i8(127);
  g.kv_array_header("u16", vt::kUInt16, 3).u16(1).u16(0x1234).u16(0xFFFF);
  g.kv_array_header("i16", vt::kInt16, 3).i16(-2).i16(0).i16(32767);
  g.kv_array_header("u32", vt::kUInt32, 3).u32(3).u32(0x12345678).u32(0xFFFFFFFF);
  g.kv_array_header("i32", vt::kInt32, 3).i32(-3).i32(0).i32(INT32_MAX);
  g.kv_array_header("f32", vt::kFloat32, 3).f32(0.5f).f32(-2.0f).f32(1e30f);
  g.kv_array_header("bool", vt::kBool, 3).u8(1).u8(0).u8(1);
  g.kv_array_header("u64", vt::kUInt64, 3).u64(4).u64(0x0123456789ABCDEFull).u64(UINT64_MAX);
  g.kv_array_header("i64", vt::kInt64, 3).i64(-4).i64(0).i64(INT64_MAX);
  g.kv_array_header("f64", vt::kFloat64, 3).f64(0.25).f64(-1e300).f64(3.0);
  return g;
}

template <class T>
void expect_array(const GgufFile& f, std::string_view key, ValueType type, const std::vector<T>& expected) {
  SCOPED_TRACE(std::string(key));
  const auto arr = value_of(f, key).as_array();
  ASSERT_TRUE(arr);
  EXPECT_EQ(arr->element_type(), type);
  ASSERT_EQ(arr->size(), expected.size());
  EXPECT_FALSE(arr->empty());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(arr->get<T>(i), expected[i]) << "get<T>(" << i << ")";
    const auto at = arr->at(i);
    ASSERT_TRUE(at);
    EXPECT_EQ(at->type(), type);
    EXPECT_EQ(at->get<T>(), expected[i]) << "at(" << i << ")";
  }
  EXPECT_FALSE(arr->get<T>(expected.size())) << "index past the end";
  EXPECT_FALSE(arr->at(expected.size())) << "at() past the end";
  std::vector<T> copied;
  ASSERT_TRUE(arr->copy_to(copied));
  EXPECT_EQ(copied, expected);
  size_t i = 0;
  for (const ValueView v : arr->values()) {
    ASSERT_LT(i, expected.size());
    EXPECT_EQ(v.get<T>(), expected[i]) << "values()[" << i << "]";
    ++i;
  }
  EXPECT_EQ(i, expected.size());
  EXPECT_EQ(arr->values().size(), expected.size());
  EXPECT_EQ(arr->strings().begin(), arr->strings().end()) << "strings() of a non-string array is empty";
  EXPECT_EQ(arr->payload().size(), expected.size() * value_type_size(type));
}

TEST(ArrayValues, EveryFixedSizeElementType) {
  const RawGguf g = arrays_of_every_fixed_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  expect_array<uint8_t>(*f, "u8", ValueType::UInt8, {0, 0x7F, 0xFF});
  expect_array<int8_t>(*f, "i8", ValueType::Int8, {-1, 0, 127});
  expect_array<uint16_t>(*f, "u16", ValueType::UInt16, {1, 0x1234, 0xFFFF});
  expect_array<int16_t>(*f, "i16", ValueType::Int16, {-2, 0, 32767});
  expect_array<uint32_t>(*f, "u32", ValueType::UInt32, {3, 0x12345678, 0xFFFFFFFF});
  expect_array<int32_t>(*f, "i32", ValueType::Int32, {-3, 0, INT32_MAX});
  expect_array<float>(*f, "f32", ValueType::Float32, {0.5f, -2.0f, 1e30f});
  expect_array<bool>(*f, "bool", ValueType::Bool, {true, false, true});
  expect_array<uint64_t>(*f, "u64", ValueType::UInt64, {4, 0x0123456789ABCDEFull, UINT64_MAX});
  expect_array<int64_t>(*f, "i64", ValueType::Int64, {-4, 0, INT64_MAX});
  expect_array<double>(*f, "f64", ValueType::Float64, {0.25, -1e300, 3.0});
}

TEST(ArrayValues, ElementAccessOfAnotherTypeFails) {
  const RawGguf g = arrays_of_every_fixed_type();
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const auto arr = value_of(*f, "u32").as_array();
  ASSERT_TRUE(arr);
  EXPECT_FALSE(arr->get<int32_t>(0));
  EXPECT_FALSE(arr->get<uint64_t>(0));
  std::vector<int32_t> wrong;
  EXPECT_FALSE(arr->copy_to(wrong));
  // at() is typed by the array: its elements can still be converted.
  EXPECT_EQ(arr->at(1)->as_uint(), 0x12345678u);
}

TEST(ArrayValues, StringArrayThroughEveryAccessor) {
  RawGguf g;
  g.header(3, 0, 1).kv_string_array("words", {"alpha", "", std::string_view("n\0l", 3), "omega"});
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const auto arr = value_of(*f, "words").as_array();
  ASSERT_TRUE(arr);
  EXPECT_EQ(arr->element_type(), ValueType::String);
  ASSERT_EQ(arr->size(), 4u);
  const std::vector<std::string_view> expected = {"alpha", "", std::string_view("n\0l", 3), "omega"};

  std::vector<std::string_view> via_strings(arr->strings().begin(), arr->strings().end());
  EXPECT_EQ(via_strings, expected);
  EXPECT_EQ(arr->strings().size(), 4u);

  std::vector<std::string_view> via_values;
  for (const ValueView v : arr->values()) via_values.push_back(v.as_string().value_or("<not a string>"));
  EXPECT_EQ(via_values, expected);

  for (size_t i = 0; i < expected.size(); ++i) {
    const auto v = arr->at(i);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->type(), ValueType::String);
    EXPECT_EQ(v->as_string(), expected[i]) << i;
  }
  EXPECT_FALSE(arr->at(4));
  // Typed element access is for fixed-size types only.
  EXPECT_FALSE(arr->get<uint64_t>(0));
  std::vector<uint64_t> wrong;
  EXPECT_FALSE(arr->copy_to(wrong));
}

TEST(ArrayValues, EmptyArraysOfEveryElementType) {
  RawGguf g;
  g.header(3, 0, 13);
  for (uint32_t t = 0; t < 13; ++t) g.kv_array_header("empty" + std::to_string(t), t, 0);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  for (uint32_t t = 0; t < 13; ++t) {
    SCOPED_TRACE(t);
    const auto arr = value_of(*f, "empty" + std::to_string(t)).as_array();
    ASSERT_TRUE(arr);
    EXPECT_EQ(static_cast<uint32_t>(arr->element_type()), t);
    EXPECT_EQ(arr->size(), 0u);
    EXPECT_TRUE(arr->empty());
    EXPECT_TRUE(arr->payload().empty());
    EXPECT_FALSE(arr->at(0));
    EXPECT_EQ(arr->values().begin(), arr->values().end());
    EXPECT_EQ(arr->strings().begin(), arr->strings().end());
  }
  std::vector<uint32_t> u32s{1, 2};
  ASSERT_TRUE(value_of(*f, "empty4").as_array()->copy_to(u32s));
  EXPECT_TRUE(u32s.empty()) << "copy_to resizes the output to the array";
  std::vector<bool> bools{true};
  ASSERT_TRUE(value_of(*f, "empty7").as_array()->copy_to(bools));
  EXPECT_TRUE(bools.empty());
}

TEST(ArrayValues, ArrayOfArrays) {
  // [[1, 2], [], [3]] of uint16, then [["a"], ["b", "c"]] of strings.
  RawGguf g;
  g.header(3, 0, 2);
  g.kv_array_header("nested", vt::kArray, 3);
  g.array_header(vt::kUInt16, 2).u16(1).u16(2);
  g.array_header(vt::kUInt16, 0);
  g.array_header(vt::kUInt16, 1).u16(3);
  g.kv_array_header("nested_strings", vt::kArray, 2);
  g.array_header(vt::kString, 1).str("a");
  g.array_header(vt::kString, 2).str("b").str("c");
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();

  const auto outer = value_of(*f, "nested").as_array();
  ASSERT_TRUE(outer);
  EXPECT_EQ(outer->element_type(), ValueType::Array);
  ASSERT_EQ(outer->size(), 3u);
  std::vector<std::vector<uint16_t>> rows;
  for (const ValueView row : outer->values()) {
    const auto inner = row.as_array();
    ASSERT_TRUE(inner);
    std::vector<uint16_t> v;
    ASSERT_TRUE(inner->copy_to(v));
    rows.push_back(v);
  }
  EXPECT_EQ(rows, (std::vector<std::vector<uint16_t>>{{1, 2}, {}, {3}}));
  // at() on nested arrays walks the earlier elements.
  const auto third = outer->at(2);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->as_array()->get<uint16_t>(0), 3);
  EXPECT_EQ(third->encoded().size(), 12u + 2u);

  const auto strings = value_of(*f, "nested_strings").as_array();
  ASSERT_TRUE(strings);
  const auto second = strings->at(1);
  ASSERT_TRUE(second);
  const auto second_array = second->as_array();
  ASSERT_TRUE(second_array);
  std::vector<std::string_view> bc(second_array->strings().begin(), second_array->strings().end());
  EXPECT_EQ(bc, (std::vector<std::string_view>{"b", "c"}));
}

// `levels` arrays nested in each other, the innermost holding one uint8.
RawGguf nested_arrays(uint32_t levels, uint64_t* value_offset = nullptr) {
  RawGguf g;
  g.header(3, 0, 1).kv_header("deep", vt::kArray);
  if (value_offset) *value_offset = g.size();
  for (uint32_t i = 1; i < levels; ++i) g.array_header(vt::kArray, 1);
  g.array_header(vt::kUInt8, 1).u8(42);
  return g;
}

TEST(ArrayDepth, DefaultLimitAcceptsEightLevels) {
  const RawGguf g = nested_arrays(8);
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  // Walk down to the uint8 at the bottom.
  std::optional<ValueView> v = f->get("deep");
  for (int level = 0; level < 8; ++level) {
    ASSERT_TRUE(v && v->as_array()) << level;
    v = v->as_array()->at(0);
  }
  ASSERT_TRUE(v);
  EXPECT_EQ(v->get<uint8_t>(), 42);
}

TEST(ArrayDepth, DefaultLimitRejectsNineLevels) {
  uint64_t value_at = 0;
  const RawGguf g = nested_arrays(9, &value_at);
  // The array whose elements would be the ninth level is the eighth, 7 headers in.
  EXPECT_TRUE(test::FailsWith(GgufFile::parse(g.span()), ErrorCode::array_too_deep, value_at + 7 * 12, "deep",
                              {"8"}));
}

TEST(ArrayDepth, CustomLimit) {
  OpenOptions two_levels;
  two_levels.max_array_depth = 2;
  const RawGguf ok = nested_arrays(2);
  EXPECT_TRUE(GgufFile::parse(ok.span(), two_levels));

  uint64_t value_at = 0;
  const RawGguf too_deep = nested_arrays(3, &value_at);
  EXPECT_TRUE(test::FailsWith(GgufFile::parse(too_deep.span(), two_levels), ErrorCode::array_too_deep,
                              value_at + 12, "deep", {"2"}));
  // The same file with the default limit is fine.
  EXPECT_TRUE(GgufFile::parse(too_deep.span()));
}

TEST(ArrayDepth, LimitOfOneForbidsArraysOfArraysOnly) {
  OpenOptions flat;
  flat.max_array_depth = 1;
  const RawGguf plain = nested_arrays(1);
  EXPECT_TRUE(GgufFile::parse(plain.span(), flat));
  uint64_t value_at = 0;
  const RawGguf nested = nested_arrays(2, &value_at);
  EXPECT_TRUE(test::FailsWith(GgufFile::parse(nested.span(), flat), ErrorCode::array_too_deep, value_at, "deep",
                              {"1"}));
}

// ---- MetadataValue: the owning side ----

TEST(MetadataValues, OfProducesTheEncodingTheReaderReads) {
  EXPECT_EQ(MetadataValue::of(uint8_t{7}).view().get<uint8_t>(), 7);
  EXPECT_EQ(MetadataValue::of(int16_t{-9}).view().get<int16_t>(), -9);
  EXPECT_EQ(MetadataValue::of(2.5f).view().get<float>(), 2.5f);
  EXPECT_EQ(MetadataValue::of(true).view().get<bool>(), true);
  EXPECT_EQ(MetadataValue::of(true).encoded().size(), 1u);
  EXPECT_EQ(MetadataValue::string("x y").view().as_string(), "x y");
  EXPECT_EQ(MetadataValue::string("x y").encoded().size(), 8u + 3u);
}

TEST(MetadataValues, ArrayOfRejectsMixedElementTypes) {
  const MetadataValue elements[] = {MetadataValue::of(uint8_t{1}), MetadataValue::of(int8_t{1})};
  auto r = MetadataValue::array_of(ValueType::UInt8, elements);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  auto bad_type = MetadataValue::array_of(static_cast<ValueType>(13), {});
  ASSERT_FALSE(bad_type);
  EXPECT_EQ(bad_type.error().code, ErrorCode::invalid_argument);
}

TEST(MetadataValues, CopyOfIsByteExact) {
  RawGguf g;
  g.header(3, 0, 1).kv_string_array("a", {"x", "\xFF"});
  auto f = GgufFile::parse(g.span());
  ASSERT_TRUE(f) << f.error().describe();
  const ValueView v = value_of(*f, "a");
  const MetadataValue copy = MetadataValue::copy_of(v);
  EXPECT_EQ(copy.type(), ValueType::Array);
  ASSERT_EQ(copy.encoded().size(), v.encoded().size());
  EXPECT_TRUE(std::equal(copy.encoded().begin(), copy.encoded().end(), v.encoded().begin()));
}

TEST(ValueTypeNames, RoundTrip) {
  const std::string_view names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32", "float32",
                                    "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const uint32_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  for (uint32_t i = 0; i < 13; ++i) {
    const auto t = static_cast<ValueType>(i);
    EXPECT_EQ(value_type_name(t), names[i]);
    EXPECT_EQ(parse_value_type(names[i]), t);
    EXPECT_EQ(value_type_size(t), sizes[i]) << names[i];
  }
  EXPECT_FALSE(parse_value_type("float16"));
  EXPECT_EQ(value_type_size(static_cast<ValueType>(13)), 0u);
}

}  // namespace
}  // namespace ggufkit
