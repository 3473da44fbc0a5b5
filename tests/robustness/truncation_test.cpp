// Every prefix of a valid file is rejected cleanly, with the error that fits the region the cut
// lands in, and never crashes, reads past the cut (ASan) or takes long.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "exercise.h"
#include "robust_support.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
namespace t = ggufkit::test;
using namespace ggufkit;
using namespace ggufkit::robust;

enum class Region { header, metadata, tensor_infos, data, complete };

const char* region_name(Region r) {
  switch (r) {
    case Region::header: return "the 24-byte header";
    case Region::metadata: return "the metadata";
    case Region::tensor_infos: return "the tensor infos";
    case Region::data: return "the padding or tensor data";
    case Region::complete: return "past the last tensor";
  }
  return "?";
}

Region region_of(const GgufLayout& l, uint64_t cut) {
  if (cut < 24) return Region::header;
  if (cut < l.metadata_end) return Region::metadata;
  if (cut < l.tensor_infos_end) return Region::tensor_infos;
  if (cut < l.min_file_size) return Region::data;
  return Region::complete;
}

// The code a prefix ending in each region must fail with (docs/errors.md): a record cut short,
// and counts a valid file announces but a prefix cannot hold, are `truncated`; with the whole
// header present, the data section is what is missing. (`bad_count` is for counts no file could
// hold, which a cut of a valid file never produces.)
ErrorCode expected_code(Region r) {
  return r == Region::data ? ErrorCode::data_out_of_bounds : ErrorCode::truncated;
}

struct TruncationStats {
  uint64_t cuts = 0;
  uint64_t failures = 0;
  double slowest_parse = 0;
};

// Parses the first `cut` bytes for every cut (any order), checking each outcome; stops reporting
// after a few failures so one bug does not print a million lines.
TruncationStats check_cuts(const std::string& name, std::span<const std::byte> whole, const GgufLayout& layout,
                           std::vector<uint64_t> cuts) {
  std::sort(cuts.begin(), cuts.end(), std::greater<>());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  ShrinkingBuffer buffer(whole);
  SlowestClock clock;
  TruncationStats stats;
  for (const uint64_t cut : cuts) {
    if (cut > whole.size()) continue;
    const std::span<const std::byte> prefix = buffer.shrink_to(static_cast<size_t>(cut));
    const auto parsed = clock.time([&] { return GgufFile::parse(prefix); });
    ++stats.cuts;
    const Region region = region_of(layout, cut);
    Findings findings;
    if (region == Region::complete) {
      // Only bytes after the last tensor are gone (trailing padding): still a valid file.
      if (!parsed) {
        findings.fail("a prefix holding every tensor's bytes was rejected: " + parsed.error().describe());
      } else if (parsed->metadata().size() != layout.n_kv || parsed->tensors().size() != layout.n_tensors) {
        findings.fail("a prefix holding every tensor's bytes parsed to other counts");
      }
    } else if (parsed) {
      findings.fail(fmt::format("accepted although the cut is in {}", region_name(region)));
    } else {
      const Error& e = parsed.error();
      check_parse_error(findings, e, cut);
      GGUFKIT_ROBUST_EXPECT(findings, e.code == expected_code(region), "{} for a cut in {}: {}",
                            error_code_name(e.code), region_name(region), e.describe());
    }
    if (!findings.ok()) {
      ++stats.failures;
      if (stats.failures <= 5) ADD_FAILURE() << name << " cut at " << cut << " of " << whole.size() << ":\n" << findings.report();
    }
  }
  stats.slowest_parse = clock.slowest_seconds();
  EXPECT_LT(stats.slowest_parse, kSlowestParseSeconds) << name << ": a truncated parse took " << stats.slowest_parse << " s";
  EXPECT_EQ(stats.failures, 0u) << name << ": " << stats.failures << " of " << stats.cuts << " cuts misbehaved";
  return stats;
}

// Region boundaries and tensor ends, one byte either side: where off-by-one errors live.
std::vector<uint64_t> boundary_cuts(const GgufLayout& l, const GgufFile& f) {
  std::vector<uint64_t> cuts;
  auto around = [&](uint64_t at) {
    for (uint64_t d : {uint64_t{0}, uint64_t{1}, uint64_t{2}}) {
      cuts.push_back(at + d);
      if (at >= d) cuts.push_back(at - d);
    }
  };
  for (uint64_t at : {uint64_t{4}, uint64_t{8}, uint64_t{16}, uint64_t{24}, l.metadata_end, l.tensor_infos_end,
                      l.data_offset, l.min_file_size}) {
    around(at);
  }
  for (const KeyValue& kv : f.metadata()) around(kv.offset);
  for (const TensorInfo& ti : f.tensors()) {
    around(ti.info_offset);
    around(f.data_offset() + ti.offset);
    around(f.data_offset() + ti.offset + ti.size);
  }
  return cuts;
}

TEST(Truncation, SampleAtEveryByte) {
  const auto bytes = t::read_bytes(t::sample_model());
  const std::vector<std::byte> exact(bytes.begin(), bytes.end());
  const auto whole = GgufFile::parse(exact);
  ASSERT_TRUE(whole) << whole.error().describe();
  Findings findings;
  exercise_file(findings, *whole, exact);
  ASSERT_TRUE(findings.ok()) << findings.report();

  const auto layout = layout_of(exact, *whole);
  ASSERT_TRUE(layout);
  // The walker and the reader agree on where things are, so the regions below mean something.
  ASSERT_EQ(layout->tensor_infos_end, whole->header_size());
  ASSERT_EQ(layout->data_offset, whole->data_offset());
  ASSERT_EQ(layout->min_file_size, exact.size()) << "the sample ends with its last tensor";
  ASSERT_GT(layout->metadata_end, 24u);
  ASSERT_LT(layout->metadata_end, layout->tensor_infos_end);

  // Every byte of the header; every byte of the data too, except in the sanitizer build (see Budget).
  std::vector<uint64_t> cuts = boundary_cuts(*layout, *whole);
  for (uint64_t i = 0; i < exact.size(); ++i) {
    if (i <= whole->data_offset() || i % kBudget.sample_data_cut_stride == 0) cuts.push_back(i);
  }
  const auto stats = check_cuts("sample", exact, *layout, cuts);
  if (!kSanitized) {
    EXPECT_EQ(stats.cuts, exact.size() + 1) << "every length from 0 to the whole file";
  }
  RecordProperty("slowest_parse_ms", static_cast<int>(stats.slowest_parse * 1000));
}

// ---- The shared corpus, one test per file ----

std::vector<std::string> corpus_names() {
  std::vector<std::string> names;
  if (const auto dir = t::shared_dir()) {
    for (const fs::path& p : t::corpus_files()) names.push_back(fs::relative(p, *dir / "corpus").generic_string());
  }
  if (names.empty()) names.push_back("absent");  // a single test that skips
  return names;
}

std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = fs::path(info.param).stem().string();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

class CorpusTruncation : public testing::TestWithParam<std::string> {};

// Every byte of the first 64 KiB and of the header's last 4 KiB (fewer for headers of megabytes),
// the region boundaries, and 2000 cuts spread evenly over the file. Less under sanitizers (Budget).
TEST_P(CorpusTruncation, FailsCleanlyAtEveryCut) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path path = *t::shared_dir() / "corpus" / GetParam();
  const auto bytes = t::read_bytes(path);
  const std::vector<std::byte> exact(bytes.begin(), bytes.end());
  const auto whole = GgufFile::parse(exact);
  ASSERT_TRUE(whole) << whole.error().describe();
  const auto layout = layout_of(exact, *whole);
  ASSERT_TRUE(layout);
  ASSERT_EQ(layout->tensor_infos_end, whole->header_size());
  ASSERT_EQ(layout->data_offset, whole->data_offset());

  const uint64_t size = exact.size();
  const uint64_t header_end = whole->data_offset();
  std::vector<uint64_t> cuts = boundary_cuts(*layout, *whole);
  for (uint64_t i = 0; i < std::min<uint64_t>(size, 64 * 1024); ++i) {
    if (i < kBudget.corpus_leading_bytes || i % kBudget.corpus_leading_stride == 0) cuts.push_back(i);
  }
  // Each cut near the end of a large header parses all of it: bound the parsing, not the cuts.
  const uint64_t tail = std::min(kBudget.corpus_tail_bytes, kBudget.corpus_tail_parse_bytes / std::max<uint64_t>(header_end, 1));
  for (uint64_t i = header_end > tail ? header_end - tail : 0; i <= header_end && i < size; ++i) cuts.push_back(i);
  for (uint64_t k = 0; k < kBudget.corpus_spread_cuts; ++k) cuts.push_back(size * k / kBudget.corpus_spread_cuts);
  const auto stats = check_cuts(GetParam(), exact, *layout, cuts);
  RecordProperty("cuts", static_cast<int>(stats.cuts));
  RecordProperty("slowest_parse_ms", static_cast<int>(stats.slowest_parse * 1000));
}

INSTANTIATE_TEST_SUITE_P(Shared, CorpusTruncation, testing::ValuesIn(corpus_names()), test_name);

}  // namespace
