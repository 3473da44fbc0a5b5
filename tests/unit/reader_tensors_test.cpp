// The reader's checks of tensor infos and of the data section: names, shapes, types, block sizes,
// offsets, bounds; truncation inside a tensor info; and the happy paths (v2, custom alignment,
// files without tensors, lookups).

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "ggufkit/reader.h"
#include "raw_gguf.h"
#include "test_support.h"
#include "unit_helpers.h"

namespace ggufkit {
namespace {

using test::FailsWith;
using test::parse;
using test::RawGguf;
namespace gt = test::ggml_type;

constexpr uint64_t kFirstInfoAt = 24;  // with no metadata, tensor infos start after the header

// Offsets inside a tensor info record named `name` with `n_dims` dimensions, starting at `at`.
struct InfoLayout {
  uint64_t at;
  size_t name_size;
  uint32_t n_dims;
  uint64_t n_dims_field() const { return at + 8 + name_size; }
  uint64_t ne_field(uint32_t d) const { return n_dims_field() + 4 + 8 * uint64_t{d}; }
  uint64_t type_field() const { return ne_field(n_dims); }
  uint64_t offset_field() const { return type_field() + 4; }
};

// Lowercase search, for messages that name a ggml type in whatever case.
bool mentions_ignoring_case(const std::string& message, std::string_view word) {
  std::string m = message;
  std::string w(word);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return m.find(w) != std::string::npos;
}

// ---- Names ----

TEST(ReaderTensorNames, SixtyThreeBytesIsAccepted) {
  const std::string name(63, 'n');
  RawGguf g;
  g.header(3, 1, 0).tensor_info(name, {8}, gt::kF32, 0).pad_to(32).zeros(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_NE(f->find_tensor(name), nullptr);
  EXPECT_EQ(f->find_tensor(name)->name.size(), 63u);
}

TEST(ReaderTensorNames, SixtyFourBytesIsRejected) {
  const std::string name(64, 'n');
  RawGguf g;
  g.header(3, 1, 0).tensor_info(name, {8}, gt::kF32, 0).pad_to(32).zeros(32);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::tensor_name_too_long, kFirstInfoAt, name, {"64 bytes", "63"}));
}

TEST(ReaderTensorNames, DuplicateNamePointsAtTheSecond) {
  RawGguf g;
  g.header(3, 3, 0).tensor_info("a", {8}, gt::kF32, 0).tensor_info("b", {8}, gt::kF32, 32);
  const uint64_t third_at = g.size();
  g.tensor_info("a", {8}, gt::kF32, 64).pad_to(32).zeros(96);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::duplicate_tensor, third_at, "a", {"tensor 2"}));
}

// ggml keeps tensor names as C strings: llama.cpp cuts a name at its first NUL and then finds
// "a\0x" and "a\0y" to be the same tensor "a" (checked against libggml-base.so, which rejects the
// file with "duplicate tensor name 'a'"). A reader that makes llama.cpp's checks must reject it too.
TEST(ReaderTensorNames, NamesEqualUpToANulAreDuplicates) {
  RawGguf g;
  g.header(3, 2, 0).tensor_info(std::string("a\0x", 3), {8}, gt::kF32, 0);
  const uint64_t second_at = g.size();
  g.tensor_info(std::string("a\0y", 3), {8}, gt::kF32, 32).pad_to(32).zeros(64);
  auto f = parse(g);
  ASSERT_FALSE(f) << "llama.cpp rejects this file";
  EXPECT_EQ(f.error().code, ErrorCode::duplicate_tensor) << f.error().describe();
  EXPECT_EQ(f.error().offset, second_at);
}

TEST(ReaderTensorNames, EmptyNameIsAccepted) {
  // llama.cpp has no rule against empty tensor names; neither does the reader.
  RawGguf g;
  g.header(3, 1, 0).tensor_info("", {8}, gt::kF32, 0).pad_to(32).zeros(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_NE(f->find_tensor(""), nullptr);
}

// ---- Dimensions and shapes ----

TEST(ReaderTensorShapes, FiveDimensions) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info_claiming("t", 5, {1, 1, 1, 1, 1}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 5};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_dimension_count, t.n_dims_field(), "t", {"5 dimensions", "4"}));
}

TEST(ReaderTensorShapes, DimensionCountAllOnes) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info_claiming("t", 0xFFFFFFFF, {8}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 0};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_dimension_count, t.n_dims_field(), "t", {"4294967295"}));
}

TEST(ReaderTensorShapes, ZeroDimensionsIsAOneElementTensor) {
  // llama.cpp reads n_dims 0 as a tensor of shape [1, 1, 1, 1].
  RawGguf g;
  g.header(3, 1, 0).tensor_info_claiming("scalar", 0, {}, gt::kF32, 0).pad_to(32).f32(2.5f).pad_to(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  const TensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.n_dims, 0u);
  EXPECT_TRUE(t.shape().empty());
  EXPECT_EQ(t.ne, (std::array<int64_t, 4>{1, 1, 1, 1}));
  EXPECT_EQ(t.n_elements(), 1);
  EXPECT_EQ(t.size, 4u);
  EXPECT_EQ(f->tensor_data(t).size(), 4u);
}

TEST(ReaderTensorShapes, NegativeDimension) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {4, -1}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 2};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_shape, t.ne_field(1), "t", {"dimension 1", "-1"}));
}

TEST(ReaderTensorShapes, MostNegativeFirstDimension) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {INT64_MIN}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 1};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_shape, t.ne_field(0), "t", {"dimension 0", "-9223372036854775808"}));
}

TEST(ReaderTensorShapes, ZeroDimensionIsAnEmptyTensor) {
  RawGguf g;
  g.header(3, 2, 0).tensor_info("empty", {0, 4}, gt::kF32, 0).tensor_info("next", {8}, gt::kF32, 0);
  g.pad_to(32).zeros(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  const TensorInfo* empty = f->find_tensor("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->n_elements(), 0);
  EXPECT_EQ(empty->size, 0u);
  EXPECT_TRUE(f->tensor_data(*empty).empty());
  // An empty tensor takes no room: the next one starts at the same offset.
  EXPECT_EQ(f->find_tensor("next")->offset, 0u);
  EXPECT_EQ(f->tensor_bytes(), 32u);
}

TEST(ReaderTensorShapes, ZeroDimensionWithHugeOthersIsNotAnOverflow) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {INT64_MAX, 0, INT64_MAX}, gt::kF32, 0).pad_to(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors()[0].size, 0u);
}

TEST(ReaderTensorShapes, ElementCountOverflow) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {int64_t{1} << 32, int64_t{1} << 32}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 2};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::shape_overflow, t.n_dims_field(), "t", {"4294967296", "elements"}));
}

TEST(ReaderTensorShapes, ElementCountOverflowInTheLastDimension) {
  // 2^16 in each of four dimensions: 2^64 elements.
  RawGguf g;
  const int64_t d = int64_t{1} << 16;
  g.header(3, 1, 0).tensor_info("t", {d, d, d, d}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 4};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::shape_overflow, t.n_dims_field(), "t", {"65536"}));
}

TEST(ReaderTensorShapes, ByteSizeOverflow) {
  // 2^62 elements is representable; 2^62 float32 values are 2^64 bytes, which is not.
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {int64_t{1} << 62}, gt::kF32, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 1};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::shape_overflow, t.n_dims_field(), "t", {"size in bytes"}));
}

TEST(ReaderTensorShapes, ByteSizeOverflowOfFloat64) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {int64_t{1} << 40, int64_t{1} << 21}, gt::kF64, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 2};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::shape_overflow, t.n_dims_field(), "t", {"size in bytes"}));
}

// ---- Types ----

class ReaderUnknownTensorType : public ::testing::TestWithParam<int32_t> {};

TEST_P(ReaderUnknownTensorType, IsRejected) {
  const int32_t id = GetParam();
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {8}, id, 0).pad_to(32).zeros(32);
  const InfoLayout t{kFirstInfoAt, 1, 1};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unknown_tensor_type, t.type_field(), "t",
                        {"type id " + std::to_string(id)}));
}

INSTANTIATE_TEST_SUITE_P(Ids, ReaderUnknownTensorType, ::testing::Values(-1, 43, 1000, INT32_MIN, INT32_MAX),
                         [](const auto& p) {
                           return p.param < 0 ? "minus" + std::to_string(-int64_t{p.param}) : std::to_string(p.param);
                         });

struct RemovedType {
  int32_t id;
  const char* name;  // ggml's name of the removed type
};

class ReaderRemovedTensorType : public ::testing::TestWithParam<RemovedType> {};

TEST_P(ReaderRemovedTensorType, IsRejectedByName) {
  const RemovedType r = GetParam();
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {256}, r.id, 0).pad_to(32).zeros(256);
  const InfoLayout t{kFirstInfoAt, 1, 1};
  auto f = parse(g);
  EXPECT_TRUE(FailsWith(f, ErrorCode::removed_tensor_type, t.type_field(), "t", {std::to_string(r.id)}));
  if (!f) {
    EXPECT_TRUE(mentions_ignoring_case(f.error().message, r.name)) << f.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(Ids, ReaderRemovedTensorType,
                         ::testing::Values(RemovedType{4, "q4_2"}, RemovedType{5, "q4_3"},
                                           RemovedType{31, "q4_0_4_4"}, RemovedType{32, "q4_0_4_8"},
                                           RemovedType{33, "q4_0_8_8"}, RemovedType{36, "iq4_nl_4_4"},
                                           RemovedType{37, "iq4_nl_4_8"}, RemovedType{38, "iq4_nl_8_8"}),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(ReaderTensorTypes, FirstDimensionNotAMultipleOfTheBlockSize) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {33}, gt::kQ4_0, 0).pad_to(32).zeros(64);
  const InfoLayout t{kFirstInfoAt, 1, 1};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::block_size_mismatch, t.n_dims_field(), "t", {"33", "q4_0", "32"}));
}

TEST(ReaderTensorTypes, KQuantNeedsMultiplesOf256) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {128, 2}, gt::kQ4_K, 0).pad_to(32).zeros(160);
  const InfoLayout t{kFirstInfoAt, 1, 2};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::block_size_mismatch, t.n_dims_field(), "t", {"128", "256"}));
}

TEST(ReaderTensorTypes, OnlyTheFirstDimensionMustBeAMultiple) {
  RawGguf g;
  g.header(3, 1, 0).tensor_info("t", {64, 3}, gt::kQ4_0, 0).pad_to(32);
  const uint64_t data_at = g.size();
  g.zeros(3 * 2 * 18).pad_to(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors()[0].type, TensorType::Q4_0);
  EXPECT_EQ(f->tensors()[0].size, 108u);  // 6 blocks of 18 bytes
  EXPECT_EQ(f->data_offset(), data_at);
}

// ---- Offsets and the data section ----

// Tensors of 8 float32 (32 bytes, one alignment unit each) at the given offsets, followed by
// enough data for all of them when placed contiguously.
RawGguf f32x8_tensors(std::initializer_list<uint64_t> offsets, std::vector<uint64_t>* offset_fields) {
  RawGguf g;
  g.header(3, static_cast<int64_t>(offsets.size()), 0);
  char name = 'a';
  for (uint64_t off : offsets) {
    const uint64_t at = g.size();
    if (offset_fields) offset_fields->push_back(InfoLayout{at, 1, 1}.offset_field());
    g.tensor_info(std::string(1, name++), {8}, gt::kF32, off);
  }
  g.pad_to(32).zeros(32 * offsets.size() + 64);
  return g;
}

TEST(ReaderTensorOffsets, ContiguousTensorsAreAccepted) {
  const RawGguf g = f32x8_tensors({0, 32, 64}, nullptr);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensor_bytes(), 96u);
}

TEST(ReaderTensorOffsets, OffsetNotAligned) {
  std::vector<uint64_t> fields;
  const RawGguf g = f32x8_tensors({0, 33}, &fields);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, fields[1], "b", {"33", "alignment 32"}));
}

TEST(ReaderTensorOffsets, OffsetOutOfOrder) {
  std::vector<uint64_t> fields;
  const RawGguf g = f32x8_tensors({0, 32, 0}, &fields);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, fields[2], "c", {"out of order", "expected 64"}));
}

TEST(ReaderTensorOffsets, GapBetweenTensors) {
  std::vector<uint64_t> fields;
  const RawGguf g = f32x8_tensors({0, 64}, &fields);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, fields[1], "b", {"gap", "expected 32"}));
}

TEST(ReaderTensorOffsets, OverlappingTensors) {
  // "a" is 64 bytes; "b" starts inside it.
  RawGguf g;
  g.header(3, 2, 0).tensor_info("a", {16}, gt::kF32, 0);
  const uint64_t b_at = g.size();
  g.tensor_info("b", {8}, gt::kF32, 32).pad_to(32).zeros(128);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, InfoLayout{b_at, 1, 1}.offset_field(), "b",
                        {"overlaps", "expected 64"}));
}

TEST(ReaderTensorOffsets, FirstTensorOffsetNotZero) {
  std::vector<uint64_t> fields;
  const RawGguf g = f32x8_tensors({32, 64}, &fields);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, fields[0], "a", {"32", "expected 0"}));
}

TEST(ReaderTensorOffsets, OffsetsFollowPaddedSizes) {
  // 3 float32 = 12 bytes, padded to 32: the next tensor must be at 32, not 12.
  RawGguf g;
  g.header(3, 2, 0).tensor_info("a", {3}, gt::kF32, 0);
  const uint64_t b_at = g.size();
  g.tensor_info("b", {3}, gt::kF32, 12).pad_to(32).zeros(64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, InfoLayout{b_at, 1, 1}.offset_field(), "b",
                        {"12", "alignment 32"}));
}

TEST(ReaderTensorOffsets, HugeOffset) {
  RawGguf g;
  g.header(3, 1, 0);
  const uint64_t field = InfoLayout{g.size(), 1, 1}.offset_field();
  g.tensor_info("a", {8}, gt::kF32, 0xFFFFFFFFFFFFFFE0ull).pad_to(32).zeros(32);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, field, "a", {"18446744073709551584"}));
}

TEST(ReaderTensorData, DataPastTheEndOfTheFile) {
  RawGguf g;
  g.header(3, 1, 0);
  const uint64_t field = InfoLayout{g.size(), 1, 1}.offset_field();
  g.tensor_info("a", {8}, gt::kF32, 0).pad_to(32).zeros(16);  // 16 of 32 bytes
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::data_out_of_bounds, field, "a", {"past the end", "+32"}));
}

TEST(ReaderTensorData, SecondTensorPastTheEnd) {
  std::vector<uint64_t> fields;
  RawGguf g;
  g.header(3, 2, 0);
  fields.push_back(InfoLayout{g.size(), 1, 1}.offset_field());
  g.tensor_info("a", {8}, gt::kF32, 0);
  fields.push_back(InfoLayout{g.size(), 1, 1}.offset_field());
  g.tensor_info("b", {8}, gt::kF32, 32).pad_to(32).zeros(32 + 31);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::data_out_of_bounds, fields[1], "b", {"past the end"}));
}

TEST(ReaderTensorData, LastTensorNeedsNoTrailingPadding) {
  // The data of the last tensor ends the file; its padding is not required.
  RawGguf g;
  g.header(3, 1, 0).tensor_info("a", {3}, gt::kF32, 0).pad_to(32).f32(1).f32(2).f32(3);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->data_offset() + 12, f->file_size());
}

TEST(ReaderTensorData, DataSectionStartPastTheEnd) {
  // An empty tensor needs no data, but the data section still starts at the aligned offset.
  RawGguf g;
  g.header(3, 1, 0).tensor_info("a", {0}, gt::kF32, 0);
  const uint64_t header_end = g.size();
  ASSERT_NE(header_end % 32, 0u);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::data_out_of_bounds, header_end, "", {"data section"}));
}

// ---- Truncation inside a tensor info ----

TEST(ReaderTensorTruncation, InTheNameLength) {
  // Two tensors claimed; the first info is long enough that the count check passes.
  RawGguf g;
  g.header(3, 2, 0).tensor_info("a.rather.long.tensor.name", {8}, gt::kF32, 0);
  const uint64_t second_at = g.size();
  g.u32(1);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, second_at, "", {"name of tensor 1"}));
}

TEST(ReaderTensorTruncation, InTheNameBytes) {
  RawGguf g;
  g.header(3, 1, 0).str_claiming(40, "blk.0.attn_q.weigh").zeros(4);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kFirstInfoAt + 8, "", {"name of tensor 0", "40 bytes"}));
}

TEST(ReaderTensorTruncation, InTheDimensionCount) {
  RawGguf g;
  g.header(3, 1, 0).str("blk.0.attn_q.wei").u16(2);
  const InfoLayout t{kFirstInfoAt, 16, 0};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, t.n_dims_field(), "blk.0.attn_q.wei", {"dimension count"}));
}

TEST(ReaderTensorTruncation, InADimension) {
  RawGguf g;
  g.header(3, 1, 0).str("t").u32(2).i64(8).u32(4);
  const InfoLayout t{kFirstInfoAt, 1, 2};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, t.ne_field(1), "t", {"dimension"}));
}

TEST(ReaderTensorTruncation, InTheType) {
  RawGguf g;
  g.header(3, 1, 0).str("tensor").u32(1).i64(8).u16(0);
  const InfoLayout t{kFirstInfoAt, 6, 1};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, t.type_field(), "tensor", {"tensor type"}));
}

TEST(ReaderTensorTruncation, InTheOffset) {
  RawGguf g;
  g.header(3, 1, 0).str("t").u32(1).i64(8).i32(gt::kF32).u32(0);
  const InfoLayout t{kFirstInfoAt, 1, 1};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, t.offset_field(), "t", {"offset"}));
}

TEST(ReaderTensorTruncation, AfterMetadataBeforeTheInfos) {
  // Metadata complete, but the tensor infos it promises are cut after their name.
  RawGguf g;
  g.header(3, 1, 1).kv_string("general.architecture", "llama");
  const uint64_t info_at = g.size();
  g.str("token_embd.weight");
  const InfoLayout t{info_at, 17, 0};
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, t.n_dims_field(), "token_embd.weight", {"dimension count"}));
}

// ---- Happy paths ----

TEST(ReaderHappy, VersionTwoWithTensors) {
  RawGguf g;
  g.header(2, 2, 1).kv_string("general.architecture", "llama");
  g.tensor_info("a", {8}, gt::kF32, 0).tensor_info("b", {4, 2}, gt::kF16, 32).pad_to(32);
  const uint64_t data_at = g.size();
  for (int i = 0; i < 8; ++i) g.f32(static_cast<float>(i));
  for (int i = 0; i < 8; ++i) g.u16(static_cast<uint16_t>(0x3C00 + i));
  g.pad_to(32);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->data_offset(), data_at);
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo& b = f->tensors()[1];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.type, TensorType::F16);
  EXPECT_EQ(b.n_dims, 2u);
  EXPECT_EQ(std::vector<int64_t>(b.shape().begin(), b.shape().end()), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(b.n_elements(), 8);
  EXPECT_EQ(b.size, 16u);
  EXPECT_EQ(b.offset, 32u);
  const auto data = f->tensor_data(b);
  ASSERT_EQ(data.size(), 16u);
  EXPECT_EQ(data.data(), g.span().data() + data_at + 32);
  EXPECT_EQ(static_cast<uint8_t>(data[0]), 0x00);
  EXPECT_EQ(static_cast<uint8_t>(data[1]), 0x3C);
}

TEST(ReaderHappy, InfoOffsetsPointAtEachRecord) {
  RawGguf g;
  g.header(3, 2, 0);
  const uint64_t a_at = g.size();
  g.tensor_info("a", {8}, gt::kF32, 0);
  const uint64_t b_at = g.size();
  g.tensor_info("bb", {8}, gt::kF32, 32);
  const uint64_t end = g.size();
  g.pad_to(32).zeros(64);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors()[0].info_offset, a_at);
  EXPECT_EQ(f->tensors()[1].info_offset, b_at);
  EXPECT_EQ(f->header_size(), end);
}

TEST(ReaderHappy, CustomAlignmentIsRespected) {
  RawGguf g;
  g.header(3, 2, 1).kv_u32("general.alignment", 64);
  g.tensor_info("a", {3}, gt::kF32, 0).tensor_info("b", {16}, gt::kF32, 64).pad_to(64);
  const uint64_t data_at = g.size();
  g.f32(1).f32(2).f32(3).pad_to(64);
  for (int i = 0; i < 16; ++i) g.f32(static_cast<float>(i));

  // Through a real file, so that the mapping is page-aligned and addresses can be checked too.
  const auto dir = test::temp_dir("reader-align64");
  test::write_bytes(dir / "a64.gguf", g.bytes());
  auto f = GgufFile::open(dir / "a64.gguf");
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset(), data_at);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
    const auto data = f->tensor_data(t);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data.data()) % 64, 0u) << t.name;
    EXPECT_EQ(static_cast<uint64_t>(data.data() - f->bytes().data()), data_at + t.offset) << t.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(ReaderHappy, AlignmentOf64RejectsOffsetsAlignedOnlyTo32) {
  RawGguf g;
  g.header(3, 2, 1).kv_u32("general.alignment", 64).tensor_info("a", {8}, gt::kF32, 0);
  const uint64_t b_at = g.size();
  g.tensor_info("b", {8}, gt::kF32, 32).pad_to(64).zeros(128);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_tensor_offset, InfoLayout{b_at, 1, 1}.offset_field(), "b",
                        {"alignment 64"}));
}

TEST(ReaderHappy, NoTensorsMeansDataOffsetIsHeaderSize) {
  RawGguf g;
  g.header(3, 0, 1).kv_string("general.name", "abc");  // 24 + 8+12+4+8+3 = 59, not aligned
  const uint64_t header_end = g.size();
  ASSERT_NE(header_end % 32, 0u);
  auto unpadded = parse(g);
  ASSERT_TRUE(unpadded) << unpadded.error().describe();
  EXPECT_EQ(unpadded->header_size(), header_end);
  EXPECT_EQ(unpadded->data_offset(), header_end);

  // llama.cpp pads even without tensors; the padding does not move the data offset.
  g.pad_to(32);
  auto padded = parse(g);
  ASSERT_TRUE(padded) << padded.error().describe();
  EXPECT_EQ(padded->header_size(), header_end);
  EXPECT_EQ(padded->data_offset(), header_end);
  EXPECT_EQ(padded->file_size(), 64u);
}

TEST(ReaderHappy, FindTensorHitAndMiss) {
  const RawGguf g = f32x8_tensors({0, 32, 64}, nullptr);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  const TensorInfo* b = f->find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "b");
  EXPECT_EQ(b->offset, 32u);
  EXPECT_EQ(b, &f->tensors()[1]);
  EXPECT_EQ(f->find_tensor("d"), nullptr);
  EXPECT_EQ(f->find_tensor(""), nullptr);
  EXPECT_EQ(f->find_tensor("B"), nullptr);
  EXPECT_EQ(f->find_tensor("bb"), nullptr);
}

}  // namespace
}  // namespace ggufkit
