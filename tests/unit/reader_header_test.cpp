// The reader's checks of the fixed header: magic, version, counts. Every fixture is built byte by
// byte; every rejection is checked for its code, offset, subject and message.

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

constexpr uint64_t kVersionAt = 4;
constexpr uint64_t kTensorCountAt = 8;
constexpr uint64_t kKvCountAt = 16;

// ---- Magic ----

TEST(ReaderHeader, EmptyFile) {
  const RawGguf g;
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, 0, "", {"magic", "4 bytes"}));
}

TEST(ReaderHeader, FileShorterThanTheMagic) {
  RawGguf g;
  g.raw("GGU");
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, 0, "", {"magic", "file size 3"}));
}

TEST(ReaderHeader, BadMagic) {
  RawGguf g;
  g.magic("GGML").u32(3).i64(0).i64(0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_magic, 0, "", {"GGML", "GGUF"}));
}

TEST(ReaderHeader, BadMagicWithUnprintableBytesIsEscaped) {
  RawGguf g;
  g.raw(std::string_view("\x7F" "ELF", 4)).zeros(60);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_magic, 0, "", {"\\x7f", "ELF"}));
}

TEST(ReaderHeader, LowercaseMagicIsNotGguf) {
  RawGguf g;
  g.magic("gguf").u32(3).i64(0).i64(0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_magic, 0, "", {"gguf"}));
}

TEST(ReaderHeader, MagicOnlyVersionMissing) {
  RawGguf g;
  g.magic().u16(3);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kVersionAt, "", {"version"}));
}

// ---- Version ----

TEST(ReaderHeader, VersionZero) {
  RawGguf g;
  g.header(0, 0, 0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unsupported_version, kVersionAt, "", {"version 0"}));
}

TEST(ReaderHeader, VersionOne) {
  RawGguf g;
  g.header(1, 0, 0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unsupported_version, kVersionAt, "", {"v1"}));
}

TEST(ReaderHeader, VersionFour) {
  RawGguf g;
  g.header(4, 0, 0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unsupported_version, kVersionAt, "", {"version 4", "3"}));
}

TEST(ReaderHeader, VersionAllOnes) {
  RawGguf g;
  g.header(0xFFFFFFFF, 0, 0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unsupported_version, kVersionAt, "", {"4294967295"}));
}

TEST(ReaderHeader, BigEndianV2) {
  // A big-endian writer stores version 2 as 00 00 00 02, and the counts big-endian too: an empty
  // big-endian file, read (no longer rejected with big_endian).
  RawGguf g;
  g.magic().u32(0x02000000).zeros(16);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->byte_order(), ByteOrder::big);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_TRUE(f->metadata().empty());
}

TEST(ReaderHeader, BigEndianV3) {
  RawGguf g;
  g.magic().u32(0x03000000).zeros(16);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->byte_order(), ByteOrder::big);
  EXPECT_EQ(f->version(), 3u);
}

TEST(ReaderHeader, BigEndianV1IsUnsupportedLikeLittleEndianV1) {
  RawGguf g;
  g.magic().u32(0x01000000).zeros(16);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unsupported_version, kVersionAt, "", {"v1"}));
}

TEST(ReaderHeader, ByteSwappedVersionThatIsNoVersionAtAll) {
  // Low 16 bits zero like a byte-swapped version, but 0x00010000 swapped is 256: corrupt, not big-endian.
  RawGguf g;
  g.magic().u32(0x00010000).zeros(16);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::unsupported_version, kVersionAt, "", {"0x10000"}));
}

TEST(ReaderHeader, VersionTwoIsRead) {
  RawGguf g;
  g.header(2, 0, 1).kv_u32("general.quantization_version", 2);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->metadata().size(), 1u);
}

// ---- Counts ----

TEST(ReaderHeader, TruncatedInTheTensorCount) {
  RawGguf g;
  g.magic().u32(3).u32(0);  // half of the tensor count
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kTensorCountAt, "", {"count", "16 bytes"}));
}

TEST(ReaderHeader, TruncatedInTheKvCount) {
  // The reader reads both counts as one 16-byte record, so the offset is that of the record.
  RawGguf g;
  g.magic().u32(3).i64(0).u32(0);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kTensorCountAt, "", {"count", "file size 20"}));
}

TEST(ReaderHeader, HeaderOnlyIsAnEmptyFile) {
  RawGguf g;
  g.header(3, 0, 0);
  auto f = parse(g);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->header_size(), 24u);
  EXPECT_EQ(f->data_offset(), 24u);
  EXPECT_EQ(f->file_size(), 24u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->tensor_bytes(), 0u);
}

TEST(ReaderHeader, NegativeTensorCount) {
  RawGguf g;
  g.header(3, -1, 0).zeros(64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kTensorCountAt, "", {"-1 tensors"}));
}

TEST(ReaderHeader, NegativeKvCount) {
  RawGguf g;
  g.header(3, 0, -1).zeros(64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kKvCountAt, "", {"-1 metadata entries"}));
}

TEST(ReaderHeader, MinimumTensorCount) {
  RawGguf g;
  g.header(3, INT64_MIN, 0).zeros(64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kTensorCountAt, "", {"-9223372036854775808"}));
}

TEST(ReaderHeader, TensorCountInt64Max) {
  RawGguf g;
  g.header(3, INT64_MAX, 0).zeros(64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kTensorCountAt, "", {"9223372036854775807 tensors"}));
}

TEST(ReaderHeader, KvCountInt64Max) {
  RawGguf g;
  g.header(3, 0, INT64_MAX).zeros(64);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kKvCountAt, "", {"9223372036854775807"}));
}

// Counts whose product with a plausible record size wraps around to a small number: a reader
// that multiplies before comparing would accept them.
TEST(ReaderHeader, TensorCountWhoseByteSizeWraps) {
  // 768614336404564651 * 24 == 2^64 + 8; 2^61 * 8, 16, 24 and 32 == 0 mod 2^64.
  for (const int64_t count : {int64_t{768614336404564651}, int64_t{1} << 61, int64_t{1} << 62}) {
    SCOPED_TRACE(count);
    RawGguf g;
    g.header(3, count, 0).zeros(64);
    EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kTensorCountAt, "", {std::to_string(count)}));
  }
}

TEST(ReaderHeader, KvCountWhoseByteSizeWraps) {
  // 1317624576693539402 * 14 == 12 mod 2^64.
  for (const int64_t count : {int64_t{1317624576693539402}, int64_t{1} << 61, int64_t{1} << 62}) {
    SCOPED_TRACE(count);
    RawGguf g;
    g.header(3, 0, count).zeros(64);
    EXPECT_TRUE(FailsWith(parse(g), ErrorCode::bad_count, kKvCountAt, "", {std::to_string(count)}));
  }
}

// A plausible count the rest of the file cannot hold reads as a cut-off file, not corruption.
TEST(ReaderHeader, SmallTensorCountTheFileCannotHold) {
  // One tensor info needs at least 24 bytes; 4 follow.
  RawGguf g;
  g.header(3, 1, 0).zeros(4);
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kTensorCountAt, "", {"1 tensors", "24 bytes", "file size 28"}));
}

TEST(ReaderHeader, SmallKvCountTheFileCannotHold) {
  RawGguf g;
  g.header(3, 0, 3).kv_u8("a", 1);  // room for one key/value pair, three claimed
  EXPECT_TRUE(FailsWith(parse(g), ErrorCode::truncated, kKvCountAt, "", {"3 metadata entries", "42 bytes"}));
}


// ---- Opening from disk ----

TEST(ReaderOpen, MissingFileIsAnIoError) {
  const auto dir = test::temp_dir("reader-open");
  auto f = GgufFile::open(dir / "does-not-exist.gguf");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, ErrorCode::io_error);
  EXPECT_FALSE(f.error().message.empty());
  std::filesystem::remove_all(dir);
}

TEST(ReaderOpen, OpenValidatesLikeParse) {
  const auto dir = test::temp_dir("reader-open-bad");
  RawGguf g;
  g.header(1, 0, 0);
  test::write_bytes(dir / "v1.gguf", g.bytes());
  EXPECT_TRUE(FailsWith(GgufFile::open(dir / "v1.gguf"), ErrorCode::unsupported_version, kVersionAt, "", {"v1"}));
  std::filesystem::remove_all(dir);
}

TEST(ReaderOpen, OpenKeepsTheMappingAlive) {
  const auto dir = test::temp_dir("reader-open-good");
  RawGguf g;
  g.header(3, 0, 1).kv_string("general.name", "mapped");
  test::write_bytes(dir / "ok.gguf", g.bytes());
  auto f = GgufFile::open(dir / "ok.gguf");
  ASSERT_TRUE(f) << f.error().describe();
  GgufFile moved = std::move(f).value();  // views must survive the move
  EXPECT_EQ(moved.get("general.name")->as_string(), "mapped");
  EXPECT_EQ(moved.file_size(), g.size());
  std::filesystem::remove_all(dir);
}

TEST(ReaderOpen, EmptyFileOnDisk) {
  const auto dir = test::temp_dir("reader-open-empty");
  test::write_bytes(dir / "empty.gguf", {});
  EXPECT_TRUE(FailsWith(GgufFile::open(dir / "empty.gguf"), ErrorCode::truncated, 0, "", {"magic"}));
  std::filesystem::remove_all(dir);
}

TEST(ReaderOpen, DirectoryIsAnIoError) {
  const auto dir = test::temp_dir("reader-open-dir");
  auto f = GgufFile::open(dir);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, ErrorCode::io_error);
  EXPECT_NE(f.error().message.find("regular file"), std::string::npos) << f.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
