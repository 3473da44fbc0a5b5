// gguf check against llama.cpp's own parser (gguf_init_from_file of the oracle): on damaged copies
// of the sample model, every file llama.cpp refuses gets a structure error from check, and a file
// llama.cpp accepts gets none (but data_out_of_bounds: llama.cpp does not look at the file size
// when it is asked for metadata only, as ggufkit's reader documents).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ggufkit/check.h"
#include "oracle_ggml.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace t = ggufkit::test;

bool has_structure_error(const CheckReport& r, std::string* first) {
  for (const Finding& f : r.findings) {
    if (f.severity == Severity::error && (f.code.rfind("structure.", 0) == 0 || f.code.rfind("compat.", 0) == 0)) {
      if (first) *first = f.describe();
      return true;
    }
  }
  return false;
}

TEST(CheckOracle, StructureErrorsAreExactlyWhatLlamaCppRefuses) {
  std::string why;
  const auto oracle = OracleGgml::load(&why);
  if (!oracle) GTEST_SKIP() << "skipped: " << why;
  const std::vector<std::byte> original = t::read_bytes(t::sample_model());
  const auto dir = t::temp_dir("check-oracle");
  const auto path = dir / "mutant.gguf";
  std::mt19937_64 rng(7);
  int refused = 0, accepted = 0;
  for (int m = 0; m < 600; ++m) {
    std::vector<std::byte> bytes = original;
    if (m % 2 == 0) {  // flip bits in the header, where the decisions are
      const size_t header = std::min<size_t>(bytes.size(), 16384);
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
        bytes[std::uniform_int_distribution<size_t>(0, header - 1)(rng)] ^= std::byte{static_cast<uint8_t>(1u << (rng() % 8))};
      }
    } else {  // an 8-byte field overwritten with a boundary value
      static constexpr uint64_t kValues[] = {0, 1, 63, 64, 0x80000000ull, 0xFFFFFFFFull, 1ull << 40};
      const size_t at = std::uniform_int_distribution<size_t>(0, std::min<size_t>(bytes.size(), 16384) - 8)(rng);
      const uint64_t v = kValues[rng() % std::size(kValues)];
      std::memcpy(bytes.data() + at, &v, 8);
    }
    t::write_bytes(path, bytes);
    const bool theirs = oracle->accepts(path.string());
    const auto report = check_file(path);
    ASSERT_TRUE(report) << report.error().describe();
    std::string first;
    if (!theirs) {
      ++refused;
      EXPECT_TRUE(has_structure_error(*report, &first)) << "mutant " << m << ": llama.cpp refuses it, check finds no structure error";
    } else {
      ++accepted;
      if (has_structure_error(*report, &first)) {
        EXPECT_NE(first.find("structure.data_out_of_bounds"), std::string::npos)
            << "mutant " << m << ": llama.cpp accepts it, check says " << first;
      }
    }
  }
  std::filesystem::remove_all(dir);
  EXPECT_GT(refused, 50);
  EXPECT_GT(accepted, 50);
}

}  // namespace
}  // namespace ggufkit
