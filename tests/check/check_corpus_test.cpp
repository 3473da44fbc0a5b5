// Real files from llama.cpp must pass gguf check: every finding an error on them would be a false
// alarm. Split models: the shards of a corpus file check as the whole model, and a missing or
// damaged shard is named.
#include <gtest/gtest.h>

#include <filesystem>

#include "ggufkit/check.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

std::string described(const CheckReport& r) {
  std::string s;
  for (const Finding& f : r.findings) s += "  " + f.describe() + "\n";
  return s;
}

TEST(CheckCorpus, EveryCorpusFilePasses) {
  GGUFKIT_REQUIRE_SHARED();
  const auto files = test::corpus_files();
  ASSERT_FALSE(files.empty());
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    auto report = check_file(path);
    ASSERT_TRUE(report) << report.error().describe();
    EXPECT_TRUE(report->complete);
    EXPECT_EQ(report->count(Severity::error), 0u) << described(*report);
    for (const Finding& f : report->findings) {
      // The structure of files llama.cpp wrote is clean, warnings included.
      EXPECT_NE(f.code.rfind("structure.", 0), 0u) << f.describe();
    }
  }
}

TEST(CheckCorpus, SplitModelsAreCheckedAsAWhole) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path source = *test::shared_dir() / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf";
  auto input = GgufFile::open(source);
  ASSERT_TRUE(input) << input.error().describe();
  const fs::path dir = test::temp_dir("check-split");
  const std::string prefix = (dir / "m").string();
  auto plan = plan_split(*input, prefix, SplitLimits{0, 4});
  ASSERT_TRUE(plan) << plan.error().describe();
  ASSERT_GE(plan->shards.size(), 3u);
  ASSERT_TRUE(write_split(*input, *plan, SplitWriteOptions{false, source, {}}));
  const fs::path first = plan->shards[0].path;

  auto whole = check_file(source);
  auto split = check_file(first);
  ASSERT_TRUE(whole && split);
  EXPECT_EQ(split->count(Severity::error), 0u) << described(*split);
  // The semantic passes saw every tensor: the same findings as the whole file, shard keys aside.
  size_t whole_non_split = 0, split_non_split = 0;
  for (const Finding& f : whole->findings) whole_non_split += f.code.rfind("split.", 0) != 0;
  for (const Finding& f : split->findings) split_non_split += f.code.rfind("split.", 0) != 0;
  EXPECT_EQ(split_non_split, whole_non_split) << described(*split) << "---\n" << described(*whole);

  // Damage shard 2's header: its finding names the shard.
  const fs::path second = plan->shards[1].path;
  auto bytes = test::read_bytes(second);
  bytes[0] = std::byte{'X'};
  test::write_bytes(second, bytes);
  auto damaged = check_file(first);
  ASSERT_TRUE(damaged);
  bool named = false;
  for (const Finding& f : damaged->findings) named |= f.code == "structure.bad_magic" && f.file == second.string();
  EXPECT_TRUE(named) << described(*damaged);

  // Remove shard 3.
  fs::remove(plan->shards[2].path);
  auto missing = check_file(first);
  ASSERT_TRUE(missing);
  bool found = false;
  for (const Finding& f : missing->findings) found |= f.code == "split.missing_shard";
  EXPECT_TRUE(found) << described(*missing);
  EXPECT_FALSE(missing->passed(false));
  fs::remove_all(dir);
}

TEST(CheckCorpus, ShardsNamedOrGivenWrongly) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path source = *test::shared_dir() / "corpus/tiny-llama/tiny-llama-q8_0.gguf";
  auto input = GgufFile::open(source);
  ASSERT_TRUE(input);
  const fs::path dir = test::temp_dir("check-split-names");
  auto plan = plan_split(*input, (dir / "m").string(), SplitLimits{0, 8});
  ASSERT_TRUE(plan);
  ASSERT_TRUE(write_split(*input, *plan, SplitWriteOptions{false, source, {}}));
  const auto has = [](const CheckReport& r, std::string_view code) {
    for (const Finding& f : r.findings) {
      if (f.code == code) return true;
    }
    return false;
  };
  // A later shard alone: its structure and types, and a pointer to the first (file_kind_test.cpp
  // has its whole report).
  auto second = check_file(plan->shards[1].path);
  ASSERT_TRUE(second);
  EXPECT_TRUE(has(*second, "split.not_first_shard")) << described(*second);
  EXPECT_EQ(second->kind, FileKind::shard);
  EXPECT_TRUE(second->complete);
  // The first shard renamed: llama.cpp cannot find the others.
  const fs::path renamed = dir / "renamed.gguf";
  fs::copy_file(plan->shards[0].path, renamed);
  auto lost = check_file(renamed);
  ASSERT_TRUE(lost);
  EXPECT_TRUE(has(*lost, "split.bad_name")) << described(*lost);
  EXPECT_FALSE(lost->passed(false));
  // A shard of another split in place of shard 2: the loader's consistency rules fail.
  auto other_plan = plan_split(*input, (dir / "o").string(), SplitLimits{0, 4});
  ASSERT_TRUE(other_plan);
  ASSERT_TRUE(write_split(*input, *other_plan, SplitWriteOptions{false, source, {}}));
  fs::copy_file(other_plan->shards[1].path, plan->shards[1].path, fs::copy_options::overwrite_existing);
  auto mixed = check_file(plan->shards[0].path);
  ASSERT_TRUE(mixed);
  EXPECT_TRUE(has(*mixed, "split.inconsistent")) << described(*mixed);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
