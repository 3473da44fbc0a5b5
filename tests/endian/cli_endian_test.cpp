// gguf convert-endian through the real binary: round trip, dry run, refusals, exit codes, and
// other verbs reading the big-endian result.
#include <gtest/gtest.h>

#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace {

using namespace ggufkit::test;
namespace fs = std::filesystem;


TEST(CliConvertEndian, BigAndBackIsTheSameFile) {
  const auto dir = temp_dir("cli-endian-round");
  const std::string in = sample_model().string(), be = (dir / "be.gguf").string(), back = (dir / "back.gguf").string();
  const CommandResult to_big = run_gguf({"convert-endian", in, be, "--to", "big"});
  ASSERT_EQ(to_big.exit_code, 0) << to_big.err;
  EXPECT_NE(to_big.out.find("big-endian"), std::string::npos) << to_big.out;
  auto f = ggufkit::GgufFile::open(be);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->byte_order(), ggufkit::ByteOrder::big);
  EXPECT_NE(read_bytes(be), read_bytes(in));
  const CommandResult to_little = run_gguf({"convert-endian", be, back, "--to", "little"});
  ASSERT_EQ(to_little.exit_code, 0) << to_little.err;
  EXPECT_EQ(read_bytes(back), read_bytes(in));
  // Other verbs read the big-endian file's metadata.
  const CommandResult info = run_gguf({"info", be});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  const CommandResult info_le = run_gguf({"info", in});
  // The same report but for the file name and the byte order.
  const auto normalised = [&](std::string text) {
    for (const auto& [from, to] : {std::pair<std::string, std::string>{be, in}, {"big-endian", "little-endian"}}) {
      for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
      }
    }
    return text;
  };
  EXPECT_EQ(normalised(info.out), normalised(info_le.out));
}

TEST(CliConvertEndian, DryRunWritesNothing) {
  const auto dir = temp_dir("cli-endian-dry");
  const std::string out = (dir / "be.gguf").string();
  const CommandResult r = run_gguf({"convert-endian", sample_model().string(), out, "--to", "big", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("little-endian"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliConvertEndian, Refusals) {
  const auto dir = temp_dir("cli-endian-refuse");
  const fs::path copy = dir / "m.gguf";
  fs::copy_file(sample_model(), copy);
  const auto before = read_bytes(copy);
  const CommandResult same = run_gguf({"convert-endian", copy.string(), copy.string(), "--to", "big"});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_EQ(same.err, "gguf: " + copy.string() + ": is an input of this command: refusing to overwrite it [output_is_input]\n");
  const CommandResult same_via_dot = run_gguf({"convert-endian", copy.string(), (dir / "." / "m.gguf").string(), "--to", "big"});
  EXPECT_EQ(same_via_dot.exit_code, 2);
  EXPECT_EQ(read_bytes(copy), before);
  EXPECT_EQ(run_gguf({"convert-endian", copy.string(), (dir / "o.gguf").string(), "--to", "middle"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"convert-endian", copy.string(), (dir / "o.gguf").string()}).exit_code, 2);
  const CommandResult missing = run_gguf({"convert-endian", (dir / "nope.gguf").string(), (dir / "o.gguf").string(), "--to", "big"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_FALSE(fs::exists(dir / "o.gguf"));
}

// Tensor data is swapped on access: extracting from the big-endian copy gives the little-endian
// file's arrays exactly, decoded (f32) and as stored blocks (raw).
TEST(CliConvertEndian, ExtractReadsBigEndianTensorData) {
  const auto dir = temp_dir("cli-endian-extract");
  std::vector<fs::path> sources{sample_model()};
  if (const auto shared = shared_dir()) sources.push_back(*shared / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf");
  for (const fs::path& source : sources) {
    SCOPED_TRACE(source.filename().string());
    const fs::path be = dir / "be.gguf";
    ASSERT_EQ(run_gguf({"convert-endian", source.string(), be.string(), "--to", "big", "--force"}).exit_code, 0);
    for (const char* type : {"f32", "raw"}) {
      const fs::path a = dir / (std::string("le-") + type), b = dir / (std::string("be-") + type);
      fs::create_directories(a);
      fs::create_directories(b);
      auto r = run_gguf({"extract", source.string(), "-o", a.string(), "--type", type, "--force"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      r = run_gguf({"extract", be.string(), "-o", b.string(), "--type", type, "--force"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      size_t files = 0;
      for (const auto& entry : fs::directory_iterator(a)) {
        ++files;
        EXPECT_EQ(read_bytes(entry.path()), read_bytes(b / entry.path().filename())) << entry.path().filename();
      }
      EXPECT_GT(files, 5u);
    }
  }
  fs::remove_all(dir);
}

// The verbs that write a file from an input write it in the input's byte order: the big-endian
// file's result is the big-endian conversion of the little-endian file's.
TEST(CliConvertEndian, SetSplitMergeQuantizeAndDiffWorkOnBigEndianFiles) {
  const auto dir = temp_dir("cli-endian-verbs");
  const std::string le = (dir / "le.gguf").string(), be = (dir / "be.gguf").string();
  fs::copy_file(sample_model(), le);
  ASSERT_EQ(run_gguf({"convert-endian", le, be, "--to", "big"}).exit_code, 0);
  const auto big_of = [&](const std::string& path) {
    const std::string out = (dir / "expected.gguf").string();
    const CommandResult r = run_gguf({"convert-endian", path, out, "--to", "big", "--force"});  // reused
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_bytes(out);
  };

  // set (in place here, and a growing value that rewrites)
  for (const std::vector<std::string>& edit : {std::vector<std::string>{"general.name", "renamed"},
                                               {"test.long", std::string(3000, 'q')}}) {
    for (const std::string& path : {le, be}) {
      const CommandResult r = run_gguf({"set", path, edit[0], edit[1]});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_TRUE(big_of(le) == read_bytes(be)) << "set " << edit[0];
  }
  EXPECT_EQ(run_gguf({"get", be, "general.name"}).out, "renamed");  // strings print raw

  // split: every shard; merge: the big-endian file again
  for (const std::string& path : {le, be}) {
    const CommandResult r = run_gguf({"split", path, (dir / (path == le ? "sle" : "sbe")).string(), "--max-tensors", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto input = ggufkit::GgufFile::open(le);
  ASSERT_TRUE(input);
  const auto shards = static_cast<uint32_t>((input->tensors().size() + 1) / 2);
  const auto shard = [&](const char* prefix, uint32_t i) { return ggufkit::split_path((dir / prefix).string(), i, shards); };
  for (uint32_t i = 0; i < shards; ++i) {
    EXPECT_TRUE(big_of(shard("sle", i)) == read_bytes(shard("sbe", i))) << i;
    auto f = ggufkit::GgufFile::open(shard("sbe", i));
    ASSERT_TRUE(f) << f.error().describe();
    EXPECT_EQ(f->byte_order(), ggufkit::ByteOrder::big);
  }
  EXPECT_GE(shards, 2u);
  const std::string merged = (dir / "merged.gguf").string();
  CommandResult r = run_gguf({"merge", shard("sbe", 0), merged});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_bytes(merged) == read_bytes(be));

  // quantize
  const std::string q_le = (dir / "q-le.gguf").string(), q_be = (dir / "q-be.gguf").string();
  ASSERT_EQ(run_gguf({"quantize", le, q_le, "q8_0", "--pure", "--threads", "2"}).exit_code, 0);
  r = run_gguf({"quantize", be, q_be, "q8_0", "--pure", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(big_of(q_le) == read_bytes(q_be));

  // diff --data: the same data, exit 0
  r = run_gguf({"diff", le, be, "--data"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_gguf({"diff", q_le, be, "--data"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  fs::remove_all(dir);
}

}  // namespace
