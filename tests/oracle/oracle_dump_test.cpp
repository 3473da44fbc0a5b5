// `gguf dump --json` against llama.cpp's own GGUF parser (libggml-base.so from npm
// node-llama-cpp@3.21.1), key by key and tensor by tensor, on every corpus file; and a
// differential test: on damaged files we never accept what llama.cpp refuses.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "oracle_ggml.h"
#include "test_support.h"

namespace {

using nlohmann::json;
namespace t = ggufkit::test;

const OracleGgml* oracle_or_skip_reason(std::string* why) {
  static std::string reason;
  static std::unique_ptr<OracleGgml> oracle = OracleGgml::load(&reason);
  *why = reason;
  return oracle.get();
}

#define REQUIRE_ORACLE(o)                                                                     \
  std::string why_no_oracle;                                                                  \
  const OracleGgml* o = oracle_or_skip_reason(&why_no_oracle);                                \
  if (o == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle not installed (run scripts/install-oracle.sh): " \
                                 << why_no_oracle

// Our float text must read back to exactly the float32 llama.cpp holds.
float as_float32(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::nanf("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    ADD_FAILURE() << "unexpected float text " << s;
    return 0;
  }
  return static_cast<float>(v.get<double>());
}

bool same_float32(const json& ours, const json& theirs) {
  const float a = as_float32(ours), b = as_float32(theirs);
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void expect_same_value(const std::string& key, const std::string& type, const json& ours, const json& theirs) {
  if (type == "float32") {
    EXPECT_TRUE(same_float32(ours, theirs)) << key << ": ours " << ours << " llama.cpp " << theirs;
  } else if (type == "float64") {
    // Both sides print doubles with shortest round-trip text, so the parsed values are equal.
    EXPECT_EQ(ours, theirs) << key;
  } else {
    EXPECT_EQ(ours, theirs) << key;
  }
}

void compare_with_oracle(const OracleGgml& oracle, const std::filesystem::path& path) {
  SCOPED_TRACE(path.string());
  std::string error;
  const json theirs = oracle_dump_json(oracle, path.string(), &error);
  ASSERT_FALSE(theirs.is_null()) << "llama.cpp refused the file: " << error;
  const t::CommandResult run = t::run_gguf({"dump", "--json", path.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json ours = json::parse(run.out);

  EXPECT_EQ(ours["version"], theirs["version"]);
  EXPECT_EQ(ours["alignment"], theirs["alignment"]);
  EXPECT_EQ(ours["data_offset"], theirs["data_offset"]);

  const json& om = ours["metadata"];
  const json& tm = theirs["metadata"];
  ASSERT_EQ(om.size(), tm.size());
  for (size_t i = 0; i < om.size(); ++i) {
    const std::string key = tm[i]["key"];
    ASSERT_EQ(om[i]["key"], tm[i]["key"]) << "entry " << i;
    ASSERT_EQ(om[i]["type"], tm[i]["type"]) << key;
    if (tm[i]["type"] == "array") {
      ASSERT_EQ(om[i]["array_type"], tm[i]["array_type"]) << key;
      const std::string elem = tm[i]["array_type"];
      const json& ov = om[i]["value"];
      const json& tv = tm[i]["value"];
      ASSERT_EQ(ov.size(), tv.size()) << key;
      if (elem == "float32") {
        size_t mismatches = 0;
        for (size_t k = 0; k < ov.size(); ++k) mismatches += same_float32(ov[k], tv[k]) ? 0 : 1;
        EXPECT_EQ(mismatches, 0u) << key;
      } else {
        EXPECT_TRUE(ov == tv) << key << " differs";
      }
    } else {
      expect_same_value(key, tm[i]["type"], om[i]["value"], tm[i]["value"]);
    }
  }

  const json& ot = ours["tensors"];
  const json& tt = theirs["tensors"];
  ASSERT_EQ(ot.size(), tt.size());
  for (size_t i = 0; i < ot.size(); ++i) {
    const std::string name = tt[i]["name"];
    EXPECT_EQ(ot[i]["name"], tt[i]["name"]) << "tensor " << i;
    EXPECT_EQ(ot[i]["type"], tt[i]["type"]) << name;
    EXPECT_EQ(ot[i]["offset"], tt[i]["offset"]) << name;
    EXPECT_EQ(ot[i]["size"], tt[i]["size"]) << name;
    json shape = ot[i]["shape"];  // ours has the stored dimensions; llama.cpp pads to 4 with 1s
    while (shape.size() < 4) shape.push_back(1);
    EXPECT_EQ(shape, tt[i]["shape"]) << name;
  }
}

// Metadata-only files, tensor infos without data: llama.cpp's gguf_write_to_file(..., only_meta =
// true) writes them and its parser reads them (tests/test-gguf.cpp, TENSORS_SUCCESS and
// TENSORS_CUSTOM_ALIGN); so does `gguf dump`, saying the data is absent. The same file cut right
// after the tensor infos, before the padding, both refuse.
TEST(OracleDump, MetadataOnlyFilesMatchLlamaCpp) {
  REQUIRE_ORACLE(oracle);
  const auto& api = oracle->api();
  const auto dir = t::temp_dir("oracle-metadata-only");
  // The sample, and the sample with a custom alignment (64) written by our writer.
  const auto sample = ggufkit::GgufFile::open(t::sample_model());
  ASSERT_TRUE(sample);
  auto aligned = ggufkit::GgufBuilder::from_file(*sample);
  ASSERT_TRUE(aligned.set_alignment(64));
  ggufkit::WriteOptions write;
  write.sync = false;
  ASSERT_TRUE(aligned.write_file(dir / "aligned.gguf", write));
  for (const std::filesystem::path& source : {t::sample_model(), dir / "aligned.gguf"}) {
    SCOPED_TRACE(source.string());
    OracleGgml::gguf_context* ctx = api.gguf_init_from_file(source.c_str(), {true, nullptr});
    ASSERT_NE(ctx, nullptr);
    const auto meta_only = dir / ("meta-" + source.filename().string());
    ASSERT_TRUE(api.gguf_write_to_file(ctx, meta_only.c_str(), true));
    api.gguf_free(ctx);
    auto ours = ggufkit::GgufFile::open(meta_only, {.allow_metadata_only = true});
    ASSERT_TRUE(ours) << ours.error().describe();
    EXPECT_FALSE(ours->has_tensor_data());
    EXPECT_EQ(ours->file_size(), ours->data_offset()) << "llama.cpp writes the padding and stops";
    compare_with_oracle(*oracle, meta_only);
    const json dumped = json::parse(t::run_gguf({"dump", "--json", meta_only.string()}).out);
    EXPECT_EQ(dumped["tensor_data"], false);

    // Cut before the padding.
    const auto cut = dir / ("cut-" + source.filename().string());
    auto bytes = t::read_bytes(meta_only);
    bytes.resize(static_cast<size_t>(ours->header_size()));
    t::write_bytes(cut, bytes);
    EXPECT_FALSE(oracle->accepts(cut.string()));
    EXPECT_FALSE(ggufkit::GgufFile::open(cut, {.allow_metadata_only = true}));
    const t::CommandResult refused = t::run_gguf({"dump", cut.string()});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_EQ(refused.out, "");
  }
  std::filesystem::remove_all(dir);
}

TEST(OracleDump, SampleModelMatchesLlamaCpp) {
  REQUIRE_ORACLE(oracle);
  compare_with_oracle(*oracle, t::sample_model());
}

TEST(OracleDump, EveryCorpusFileMatchesLlamaCpp) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_ORACLE(oracle);
  const auto files = t::corpus_files();
  ASSERT_GE(files.size(), 30u);
  for (const auto& f : files) compare_with_oracle(*oracle, f);
}

// Damaged copies of real files: whatever llama.cpp refuses, we refuse too. Where we are stricter
// the reason must be one llama.cpp does not check when it reads metadata only: tensor data past
// the end of the file.
void differential(const OracleGgml& oracle, const std::vector<std::byte>& original, const std::string& name,
                  uint32_t seed, int mutants) {
  const auto dir = t::temp_dir("oracle-diff");
  const auto path = dir / "mutant.gguf";
  std::mt19937_64 rng(seed);
  int both_reject = 0, both_accept = 0, only_we_reject = 0;
  for (int m = 0; m < mutants; ++m) {
    std::vector<std::byte> bytes = original;
    const int kind = m % 3;
    if (kind == 0) {  // truncate
      bytes.resize(std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng));
    } else if (kind == 1) {  // flip bits in the header region, where the decisions are
      const size_t header = std::min<size_t>(bytes.size(), 16384);
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        const size_t at = std::uniform_int_distribution<size_t>(0, header - 1)(rng);
        bytes[at] ^= std::byte{static_cast<uint8_t>(1u << (rng() % 8))};
      }
    } else {  // overwrite an 8-byte field with a boundary value
      static constexpr uint64_t kValues[] = {0, 1, 63, 64, 0x80000000ull, 0xFFFFFFFFull, 0x7FFFFFFFFFFFFFFFull,
                                             0xFFFFFFFFFFFFFFFFull, 1ull << 40};
      const size_t header = std::min<size_t>(bytes.size(), 16384) - 8;
      const size_t at = std::uniform_int_distribution<size_t>(0, header)(rng);
      const uint64_t v = kValues[rng() % std::size(kValues)];
      std::memcpy(bytes.data() + at, &v, 8);
    }
    t::write_bytes(path, bytes);
    const auto ours = ggufkit::GgufFile::parse(bytes);
    const bool theirs = oracle.accepts(path.string());
    if (!theirs) {
      EXPECT_FALSE(ours) << name << " mutant " << m << ": llama.cpp refuses it, we accept it";
      ++both_reject;
    } else if (!ours) {
      EXPECT_EQ(ours.error().code, ggufkit::ErrorCode::data_out_of_bounds)
          << name << " mutant " << m << ": llama.cpp accepts it, we refuse: " << ours.error().describe();
      ++only_we_reject;
    } else {
      ++both_accept;
    }
  }
  std::filesystem::remove_all(dir);
  ::testing::Test::RecordProperty("both_reject", both_reject);
  ::testing::Test::RecordProperty("both_accept", both_accept);
  ::testing::Test::RecordProperty("only_we_reject", only_we_reject);
  EXPECT_GT(both_reject, 0);
}

TEST(OracleDifferential, DamagedSampleModel) {
  REQUIRE_ORACLE(oracle);
  differential(*oracle, t::read_bytes(t::sample_model()), "sample", 1, 1500);
}

TEST(OracleDifferential, DamagedCorpusFiles) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_ORACLE(oracle);
  const auto dir = *t::shared_dir() / "corpus";
  differential(*oracle, t::read_bytes(dir / "tiny-llama/tiny-llama-q4_k_m.gguf"), "q4_k_m", 2, 600);
  differential(*oracle, t::read_bytes(dir / "vocab/ggml-vocab-llama-spm.gguf"), "llama-spm", 3, 300);
}

}  // namespace
