// The reader's checks of the key/value records: key strings, value types, strings, arrays,
// general.alignment, and truncation inside each kind of record.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/reader.h"
#include "raw_gguf.h"
#include "unit_helpers.h"

namespace ggufkit {
namespace {

using test::FailsWith;
using test::parse;
using test::RawGguf;
namespace vt = test::gguf_type;

constexpr uint64_t kFirstKvAt = 24;  // right after magic, version and the two counts
constexpr uint64_t kOneGiB = uint64_t{1} << 30;

// ---- Keys ----

TEST(ReaderKeys, KeyLengthUint64Max) {
  RawGguf g;
  g.header(3, 0, 1).u64(UINT64_MAX).zeros(32);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::string_too_long, kFirstKvAt, "",
                        {"18446744073709551615", "1073741824"}));
}

TEST(ReaderKeys, KeyLengthJustOverOneGiB) {
  RawGguf g;
  g.header(3, 0, 1).u64(kOneGiB + 1).zeros(32);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::string_too_long, kFirstKvAt, "", {"1073741825", "1073741824"}));
}

TEST(ReaderKeys, KeyLengthOfExactlyOneGiBIsOnlyTruncated) {
  // The limit itself is allowed; this file just does not hold that many bytes.
  RawGguf g;
  g.header(3, 0, 1).u64(kOneGiB).zeros(32);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kFirstKvAt + 8, "", {"1073741824"}));
}

TEST(ReaderKeys, KeyLengthPastTheEnd) {
  RawGguf g;
  g.header(3, 0, 1).str_claiming(100, "general.na");
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kFirstKvAt + 8, "", {"100 bytes", "key"}));
}

TEST(ReaderKeys, EmptyKey) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("", 7);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::empty_key, kFirstKvAt, "", {"empty key"}));
}

TEST(ReaderKeys, EmptyKeyAfterAGoodOne) {
  RawGguf g;
  g.header(3, 0, 2).kv_u32("good", 1);
  const uint64_t second = g.size();
  g.kv_u32("", 7);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::empty_key, second, "", {"pair 1"}));
}

TEST(ReaderKeys, DuplicateKeyPointsAtTheSecond) {
  RawGguf g;
  g.header(3, 0, 3).kv_u32("general.alignment", 32).kv_string("general.name", "x");
  const uint64_t second = g.size();
  g.kv_u32("general.alignment", 64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::duplicate_key, second, "general.alignment", {"2"}));
}

TEST(ReaderKeys, DuplicateKeyWithAnotherTypeIsStillADuplicate) {
  RawGguf g;
  g.header(3, 0, 2).kv_string("k", "text");
  const uint64_t second = g.size();
  g.kv_u8("k", 1);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::duplicate_key, second, "k", {"1"}));
}

TEST(ReaderKeys, FirstOfSeveralDuplicatesIsReported) {
  // "b" repeats at index 2, "a" at index 3: the earliest repeat in file order wins.
  RawGguf g;
  g.header(3, 0, 4).kv_u8("a", 1).kv_u8("b", 2);
  const uint64_t b_again = g.size();
  g.kv_u8("b", 3).kv_u8("a", 4);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::duplicate_key, b_again, "b", {"2"}));
}

// OpenOptions::on_problem: called once per recoverable problem, in file order; true goes on (the
// file opens, find() gives the first of repeated keys), false makes that problem the open's error.
TEST(ReaderKeys, ProblemHandlerDecidesWhetherToGoOn) {
  RawGguf g;
  g.header(3, 0, 4).kv_u8("a", 1).kv_u8("b", 2);
  const uint64_t b_again = g.size();
  g.kv_u8("b", 3);
  const uint64_t a_again = g.size();
  g.kv_u8("a", 4);

  std::vector<std::pair<ErrorCode, uint64_t>> seen;
  OpenOptions go_on;
  go_on.on_problem = [&](const Error& e) {
    seen.emplace_back(e.code, e.offset.value_or(UINT64_MAX));
    return true;
  };
  const auto all = parse(g, go_on);
  ASSERT_TRUE(all.has_value()) << all.error().describe();
  EXPECT_EQ(seen, (std::vector<std::pair<ErrorCode, uint64_t>>{{ErrorCode::duplicate_key, b_again},
                                                               {ErrorCode::duplicate_key, a_again}}));
  EXPECT_EQ(all->metadata().size(), 4u);
  EXPECT_EQ(all->get("b")->get<uint8_t>(), uint8_t{2});

  seen.clear();
  OpenOptions stop;
  stop.on_problem = [&](const Error& e) {
    seen.emplace_back(e.code, e.offset.value_or(UINT64_MAX));
    return false;
  };
  EXPECT_TRUE(FailsWith(parse(g, stop), ErrorCode::duplicate_key, b_again, "b", {"2"}));
  EXPECT_EQ(seen, (std::vector<std::pair<ErrorCode, uint64_t>>{{ErrorCode::duplicate_key, b_again}}));
}

TEST(ReaderKeys, FindHitAndMiss) {
  RawGguf g;
  g.header(3, 0, 3).kv_u8("zeta", 1).kv_u8("alpha", 2).kv_u8("mid", 3);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  const KeyValue* alpha = f->find("alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(alpha->key, "alpha");
  EXPECT_EQ(alpha->value.get<uint8_t>(), 2);
  EXPECT_EQ(alpha->offset, kFirstKvAt + (8 + 4 + 4 + 1));  // after "zeta"'s record
  EXPECT_EQ(f->find("zeta")->offset, kFirstKvAt);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_EQ(f->find("alph"), nullptr);
  EXPECT_EQ(f->find("alphaa"), nullptr);
  EXPECT_EQ(f->find(""), nullptr);
  EXPECT_FALSE(f->get("missing"));
  EXPECT_EQ(f->get("mid")->get<uint8_t>(), 3);
  // metadata() stays in file order, not lookup order.
  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->metadata()[0].key, "zeta");
  EXPECT_EQ(f->metadata()[2].key, "mid");
}

// ---- Value types ----

TEST(ReaderValueTypes, TypeThirteen) {
  RawGguf g;
  g.header(3, 0, 1).kv_header("k", 13).u64(0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_value_type, kFirstKvAt + 8 + 1, "k", {"13"}));
}

TEST(ReaderValueTypes, TypeAllOnes) {
  RawGguf g;
  g.header(3, 0, 1).kv_header("k", 0xFFFFFFFF).u64(0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_value_type, kFirstKvAt + 8 + 1, "k", {"4294967295"}));
}

TEST(ReaderValueTypes, ArrayElementTypeThirteen) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", 13, 1).u64(0);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_value_type, value_at, "arr", {"element type 13"}));
}

TEST(ReaderValueTypes, ArrayElementTypeAllOnes) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", 0xFFFFFFFF, 0).u64(0);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_value_type, value_at, "arr", {"4294967295"}));
}

TEST(ReaderValueTypes, UnknownElementTypeInsideANestedArray) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kArray, 1);
  const uint64_t inner_at = g.size();
  g.array_header(200, 0).zeros(8);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_value_type, inner_at, "arr", {"200"}));
}

// ---- Arrays ----

TEST(ReaderArrays, CountJustOverTwoToTheThirty) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kUInt8, kOneGiB + 1).zeros(64);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::array_too_long, value_at + 4, "arr", {"1073741825", "1073741824"}));
}

TEST(ReaderArrays, CountUint64Max) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kUInt64, UINT64_MAX).zeros(64);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::array_too_long, value_at + 4, "arr", {"18446744073709551615"}));
}

TEST(ReaderArrays, CountOfExactlyTwoToTheThirtyIsOnlyTruncated) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kUInt8, kOneGiB).zeros(64);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at + 12, "arr", {"1073741824"}));
}

TEST(ReaderArrays, ElementBytesPastTheEnd) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kUInt64, 1000).u64(1).u64(2);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at + 12, "arr", {"1000", "uint64", "8000 bytes"}));
}

TEST(ReaderArrays, LargestCountTimesLargestElementPastTheEnd) {
  // 2^30 float64 elements: 8 GiB claimed by a tiny file.
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kFloat64, kOneGiB).zeros(64);
  const uint64_t value_at = kFirstKvAt + 8 + 3 + 4;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at + 12, "arr", {"8589934592"}));
}

TEST(ReaderArrays, StringArrayWhoseStringRunsPastTheEnd) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("tokens", vt::kString, 3).str("ok");
  const uint64_t second_at = g.size();
  g.str_claiming(50, "short").zeros(16);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, second_at + 8, "tokens", {"string 1", "50 bytes"}));
}

TEST(ReaderArrays, StringArrayWithMoreStringsThanBytes) {
  // Each string needs at least its 8-byte length: 1000 strings cannot fit in 40 bytes.
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("tokens", vt::kString, 1000);
  const uint64_t payload_at = g.size();
  g.str("a").str("b").zeros(22);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, payload_at, "tokens", {"1000 strings"}));
}

TEST(ReaderArrays, StringArrayLengthFieldCutShort) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("tokens", vt::kString, 2).str("abcdefgh");
  const uint64_t second_at = g.size();
  g.u32(1);  // half of the second string's length
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, second_at, "tokens", {"string 1"}));
}

TEST(ReaderArrays, StringArrayElementOverOneGiB) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("tokens", vt::kString, 2).str("x");
  const uint64_t second_at = g.size();
  g.u64(kOneGiB + 1).zeros(16);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::string_too_long, second_at, "tokens", {"string 1", "1073741825"}));
}

TEST(ReaderArrays, ArrayOfArraysWithMoreArraysThanBytes) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("nested", vt::kArray, 100);
  const uint64_t payload_at = g.size();
  g.array_header(vt::kUInt8, 0).zeros(12);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, payload_at, "nested", {"100 arrays"}));
}

TEST(ReaderArrays, NestedArrayHeaderCutShort) {
  // The first inner array is long enough for the outer count to look plausible.
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("nested", vt::kArray, 2).array_header(vt::kUInt8, 20).zeros(20);
  const uint64_t second_at = g.size();
  g.array_header(vt::kUInt8, 0).drop(4);  // 8 of its 12 bytes
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, second_at, "nested", {"array header"}));
}

TEST(ReaderArrays, NestedArrayElementsCutShort) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("nested", vt::kArray, 2).array_header(vt::kUInt8, 1).u8(5);
  const uint64_t second_at = g.size();
  g.array_header(vt::kUInt32, 4).u32(1);  // 4 bytes of 16
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, second_at + 12, "nested", {"uint32"}));
}

// ---- general.alignment ----

struct WrongAlignmentType {
  const char* name;
  void (*write)(RawGguf&);
  const char* type_name;
};

class ReaderAlignmentType : public ::testing::TestWithParam<WrongAlignmentType> {};

TEST_P(ReaderAlignmentType, RejectsAlignmentOfAnotherType) {
  RawGguf g;
  g.header(3, 0, 2).kv_string("general.name", "x");
  const uint64_t alignment_at = g.size();
  GetParam().write(g);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_alignment, alignment_at, "general.alignment",
                        {"uint32", GetParam().type_name}));
}

INSTANTIATE_TEST_SUITE_P(
    Types, ReaderAlignmentType,
    ::testing::Values(
        WrongAlignmentType{"int32", [](RawGguf& g) { g.kv_i32("general.alignment", 32); }, "int32"},
        WrongAlignmentType{"uint64", [](RawGguf& g) { g.kv_u64("general.alignment", 32); }, "uint64"},
        WrongAlignmentType{"string", [](RawGguf& g) { g.kv_string("general.alignment", "32"); }, "string"},
        WrongAlignmentType{"uint16", [](RawGguf& g) { g.kv_u16("general.alignment", 32); }, "uint16"},
        WrongAlignmentType{"array", [](RawGguf& g) { g.kv_u32_array("general.alignment", {32}); }, "array"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(ReaderAlignment, Zero) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("general.alignment", 0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_alignment, kFirstKvAt, "general.alignment",
                        {"alignment 0", "power of two"}));
}

TEST(ReaderAlignment, Three) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("general.alignment", 3);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_alignment, kFirstKvAt, "general.alignment",
                        {"alignment 3", "power of two"}));
}

TEST(ReaderAlignment, NotAPowerOfTwoButEven) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("general.alignment", 96);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_alignment, kFirstKvAt, "general.alignment", {"96"}));
}

TEST(ReaderAlignment, TwoToTheThirtyOneWithoutTensorsIsValid) {
  RawGguf g;
  g.header(3, 0, 1).kv_u32("general.alignment", 0x80000000u);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->alignment(), 0x80000000u);
  // Without tensors the data section is not padded: it starts where the header ends.
  EXPECT_EQ(f->data_offset(), f->header_size());
  EXPECT_EQ(f->header_size(), g.size());
}

TEST(ReaderAlignment, TwoToTheThirtyOneWithATensorPutsTheDataPastTheEnd) {
  RawGguf g;
  g.header(3, 1, 1).kv_u32("general.alignment", 0x80000000u).tensor_info("t", {8}, test::ggml_type::kF32, 0);
  const uint64_t header_end = g.size();
  g.pad_to(64).zeros(32);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::data_out_of_bounds, header_end, "", {"data section", "past the end"}));
}

TEST(ReaderAlignment, OneIsValid) {
  RawGguf g;
  g.header(3, 1, 1).kv_u32("general.alignment", 1).tensor_info("t", {3}, test::ggml_type::kI8, 0);
  const uint64_t header_end = g.size();
  g.raw("abc");
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->alignment(), 1u);
  EXPECT_EQ(f->data_offset(), header_end);
  const auto data = f->tensor_data(f->tensors()[0]);
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(static_cast<char>(data[2]), 'c');
}

// ---- Truncation inside each kind of metadata record ----

TEST(ReaderTruncation, InTheKeyLength) {
  // Two pairs claimed; the first is long enough that the count check passes.
  RawGguf g;
  g.header(3, 0, 2).kv_string("a.fairly.long.key.name", "value");
  const uint64_t second_at = g.size();
  g.u32(5);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, second_at, "", {"key/value pair 1"}));
}

TEST(ReaderTruncation, InTheKeyBytes) {
  RawGguf g;
  g.header(3, 0, 1).str_claiming(20, "general.archit");
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kFirstKvAt + 8, "", {"20 bytes"}));
}

TEST(ReaderTruncation, InTheValueType) {
  RawGguf g;
  g.header(3, 0, 1).str("general.arch").u16(8);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kFirstKvAt + 8 + 12, "general.arch", {"value type"}));
}

struct FixedType {
  uint32_t id;
  const char* name;
  uint32_t size;
};

class ReaderTruncatedValue : public ::testing::TestWithParam<FixedType> {};

TEST_P(ReaderTruncatedValue, FixedSizeValueCutShort) {
  const FixedType t = GetParam();
  RawGguf g;
  g.header(3, 0, 1).kv_header("key", t.id);
  const uint64_t value_at = g.size();
  g.zeros(t.size - 1);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at, "key",
                        {t.name, std::to_string(t.size) + " bytes"}));
}

INSTANTIATE_TEST_SUITE_P(
    AllFixedTypes, ReaderTruncatedValue,
    ::testing::Values(FixedType{vt::kUInt8, "uint8", 1}, FixedType{vt::kInt8, "int8", 1},
                      FixedType{vt::kUInt16, "uint16", 2}, FixedType{vt::kInt16, "int16", 2},
                      FixedType{vt::kUInt32, "uint32", 4}, FixedType{vt::kInt32, "int32", 4},
                      FixedType{vt::kFloat32, "float32", 4}, FixedType{vt::kBool, "bool", 1},
                      FixedType{vt::kUInt64, "uint64", 8}, FixedType{vt::kInt64, "int64", 8},
                      FixedType{vt::kFloat64, "float64", 8}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(ReaderTruncation, InAStringValueLength) {
  RawGguf g;
  g.header(3, 0, 1).kv_header("general.name", vt::kString);
  const uint64_t value_at = g.size();
  g.u32(3);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at, "general.name", {"string"}));
}

TEST(ReaderTruncation, InAStringValueBytes) {
  RawGguf g;
  g.header(3, 0, 1).kv_header("general.name", vt::kString);
  const uint64_t value_at = g.size();
  g.str_claiming(10, "abc");
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at + 8, "general.name", {"10 bytes", "string"}));
}

TEST(ReaderTruncation, InAnArrayHeader) {
  RawGguf g;
  g.header(3, 0, 1).kv_header("arr", vt::kArray);
  const uint64_t value_at = g.size();
  g.u32(vt::kUInt8).u32(0);  // 8 of the 12 header bytes
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, value_at, "arr", {"array header", "12 bytes"}));
}

TEST(ReaderTruncation, InArrayElements) {
  RawGguf g;
  g.header(3, 0, 1).kv_array_header("arr", vt::kUInt32, 4);
  const uint64_t elements_at = g.size();
  g.u32(1).u32(2).u16(3);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, elements_at, "arr", {"4 uint32", "16 bytes"}));
}

TEST(ReaderTruncation, InTheLastPairOfMany) {
  RawGguf g;
  g.header(3, 0, 3).kv_u32("first", 1).kv_u32("second", 2);
  const uint64_t third_value_at = g.size() + 8 + 5 + 4;
  g.kv_header("third", vt::kUInt64).u32(0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, third_value_at, "third", {"uint64"}));
}

}  // namespace
}  // namespace ggufkit
