// GgufFile::parse_prefix: a header read from the first bytes of a file (a download in progress).
// A prefix that ends too early says how far the parser needs to go; one that holds the header
// gives the same metadata and tensor infos as parsing the whole file, as a header view.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/reader.h"
#include "raw_gguf.h"
#include "test_support.h"
#include "unit_helpers.h"

namespace ggufkit {
namespace {

using test::FailsWith;
using test::RawGguf;

std::span<const std::byte> first(const std::vector<std::byte>& bytes, uint64_t n) {
  return std::span<const std::byte>(bytes).first(static_cast<size_t>(std::min<uint64_t>(n, bytes.size())));
}

// The header view has every key (type, encoded value, offset) and every tensor info of the file.
void expect_same_header(const GgufFile& view, const GgufFile& whole) {
  EXPECT_TRUE(view.header_only());
  EXPECT_FALSE(view.has_tensor_data());
  EXPECT_EQ(view.file_size(), whole.file_size());
  EXPECT_EQ(view.header_size(), whole.header_size());
  EXPECT_EQ(view.data_offset(), whole.data_offset());
  EXPECT_EQ(view.alignment(), whole.alignment());
  EXPECT_EQ(view.version(), whole.version());
  EXPECT_EQ(view.header_padded(), whole.header_padded());
  EXPECT_EQ(view.bytes().size(), whole.header_size());
  ASSERT_EQ(view.metadata().size(), whole.metadata().size());
  for (size_t i = 0; i < whole.metadata().size(); ++i) {
    const KeyValue &a = view.metadata()[i], &b = whole.metadata()[i];
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.value.type(), b.value.type());
    EXPECT_TRUE(std::ranges::equal(a.value.encoded(), b.value.encoded())) << a.key;
  }
  ASSERT_EQ(view.tensors().size(), whole.tensors().size());
  for (size_t i = 0; i < whole.tensors().size(); ++i) {
    const TensorInfo &a = view.tensors()[i], &b = whole.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.ne, b.ne);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.size, b.size);
    EXPECT_EQ(a.info_offset, b.info_offset);
    EXPECT_TRUE(view.tensor_data(a).empty());
  }
}

// Every cut of a small file with tensors and string arrays: a cut inside the header asks for more
// (at least one byte more, never past the header), a cut at or past it gives the header.
TEST(ReaderPrefix, EveryCutOfASmallFileAsksForMoreOrGivesTheHeader) {
  RawGguf g;
  g.header(3, 2, 3);
  g.kv_string("general.architecture", "llama");
  g.kv_u32("general.alignment", 32);
  g.kv_string_array("tokenizer.ggml.tokens", {"a", "bc", "def"});
  g.tensor_info("t0", {8}, 0, 0);
  g.tensor_info("t1", {4, 2}, 0, 32);
  const uint64_t header = g.size();
  g.pad_to(32).zeros(64);
  const std::vector<std::byte> bytes(g.span().begin(), g.span().end());
  auto whole = GgufFile::parse(bytes);
  ASSERT_TRUE(whole) << whole.error().describe();
  ASSERT_EQ(whole->header_size(), header);
  for (uint64_t cut = 0; cut <= bytes.size(); ++cut) {
    auto r = GgufFile::parse_prefix(first(bytes, cut), bytes.size());
    ASSERT_TRUE(r) << cut << ": " << r.error().describe();
    if (cut < header) {
      ASSERT_FALSE(r->file) << cut;
      EXPECT_GT(r->needed, cut);
      EXPECT_LE(r->needed, header) << cut;
      EXPECT_GE(r->estimate, r->needed) << cut;
      EXPECT_LE(r->estimate, bytes.size()) << cut;
    } else {
      ASSERT_TRUE(r->file) << cut;
      expect_same_header(*r->file, *whole);
    }
  }
}

// Following the parser's estimate from a first range converges in a few rounds on every corpus
// file and gives the same header as the whole file; the prefix's bytes may be owned by the view.
TEST(ReaderPrefix, CorpusFilesFromAFirstRangeAndTheEstimates) {
  GGUFKIT_REQUIRE_SHARED();
  auto files = test::corpus_files();
  files.emplace_back("/work/llama.cpp-src/models/ggml-vocab-gemma-4.gguf");  // 262k tokens, 515k merges
  for (const auto& path : files) {
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path.filename().string());
    const std::vector<std::byte> bytes = test::read_bytes(path);
    auto whole = GgufFile::parse(bytes);
    ASSERT_TRUE(whole) << whole.error().describe();
    uint64_t have = 64 * 1024;
    int rounds = 0;
    for (;;) {
      ++rounds;
      ASSERT_LE(rounds, 3);
      auto owned = std::make_shared<std::vector<std::byte>>(first(bytes, have).begin(), first(bytes, have).end());
      auto r = GgufFile::parse_prefix(*owned, bytes.size(), {}, owned);
      ASSERT_TRUE(r) << r.error().describe();
      if (r->file) {
        owned.reset();  // the view keeps it
        expect_same_header(*r->file, *whole);
        break;
      }
      ASSERT_GT(r->needed, have);
      ASSERT_GE(r->estimate, r->needed);
      // At most the whole header again: an estimate is never wildly high.
      EXPECT_LE(r->estimate, whole->header_size() * 2 + 64 * 1024);
      have = r->estimate + r->estimate / 50 + 4096;
    }
  }
}

// A prefix is not a licence for impossible files: problems of the file itself are errors as from
// parse(), with the whole file's size in the message.
TEST(ReaderPrefix, TheFilesOwnProblemsAreErrors) {
  RawGguf g;
  g.magic("GGML").u32(3).i64(0).i64(0);
  auto bad_magic = GgufFile::parse_prefix(g.span(), 1 << 20);
  EXPECT_TRUE(FailsWith(bad_magic, ErrorCode::bad_magic, 0, "", {"GGML"}));

  // 1000 keys cannot fit in a file of 100 bytes, whatever the prefix holds.
  RawGguf counts;
  counts.header(3, 0, 1000);
  auto too_many = GgufFile::parse_prefix(counts.span(), 100);
  EXPECT_TRUE(FailsWith(too_many, ErrorCode::truncated, 16, "", {"1000 metadata entries", "file size 100"}));

  // A string longer than the whole file: truncated (the file's fault), not "needs more".
  RawGguf s;
  s.header(3, 0, 1).kv_header("k", 8).u64(5000);
  auto past_end = GgufFile::parse_prefix(s.span(), 200);
  EXPECT_TRUE(FailsWith(past_end, ErrorCode::truncated, 24 + 8 + 1 + 4 + 8, "k", {"file size 200"}));

  // The tensor data must fit in the whole file: checked against its size, not the prefix's.
  RawGguf t;
  t.header(3, 1, 0).tensor_info("t", {1024}, 0, 0);
  auto small = GgufFile::parse_prefix(t.span(), 256);
  EXPECT_TRUE(FailsWith(small, ErrorCode::data_out_of_bounds, 24 + 8 + 1 + 4 + 8 + 4, "t", {"[64, +4096)", "256 bytes"}));

  auto longer = GgufFile::parse_prefix(t.span(), t.span().size() - 1);
  EXPECT_TRUE(FailsWith(longer, ErrorCode::invalid_argument, std::nullopt, "", {"prefix"}));
}

}  // namespace
}  // namespace ggufkit
