// gguf split and gguf merge through the real binary: outputs, exit codes, refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ggufkit/split.h"
#include "test_support.h"

namespace {

using namespace ggufkit::test;
namespace fs = std::filesystem;

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(CliSplit, DryRunPrintsThePlanAndWritesNothing) {
  const auto dir = temp_dir("cli-split-dry");
  const std::string prefix = (dir / "m").string();
  const CommandResult text = run_gguf({"split", sample_model().string(), prefix, "--max-size", "100K", "--dry-run"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(prefix + "-00001-of-"), std::string::npos) << text.out;
  const CommandResult json =
      run_gguf({"split", sample_model().string(), prefix, "--max-size", "100K", "--dry-run", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto plan = nlohmann::json::parse(json.out);
  ASSERT_GE(plan["shards"].size(), 2u);
  uint64_t tensors = 0, bytes = 0;
  for (size_t i = 0; i < plan["shards"].size(); ++i) {
    const auto& s = plan["shards"][i];
    EXPECT_EQ(s["path"], ggufkit::split_path(prefix, static_cast<uint32_t>(i), static_cast<uint32_t>(plan["shards"].size())));
    EXPECT_NE(text.out.find(s["path"].get<std::string>()), std::string::npos);
    tensors += s["tensors"].get<uint64_t>();
    bytes += s["file_bytes"].get<uint64_t>();
  }
  EXPECT_EQ(tensors, plan["tensor_count"].get<uint64_t>());
  EXPECT_EQ(bytes, plan["total_file_bytes"].get<uint64_t>());
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(CliSplit, SplitThenMergeGivesTheInputBack) {
  const auto dir = temp_dir("cli-split-merge");
  const std::string prefix = (dir / "m").string();
  ::setenv("GGUFKIT_PROGRESS", "always", 1);  // progress is for terminals; shown here on purpose
  const CommandResult split = run_gguf({"split", sample_model().string(), prefix, "--max-tensors", "6"});
  ::unsetenv("GGUFKIT_PROGRESS");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const std::string first = prefix + "-00001-of-00004.gguf";
  EXPECT_EQ(split.out, first + "\n" + prefix + "-00002-of-00004.gguf\n" + prefix + "-00003-of-00004.gguf\n" + prefix +
                           "-00004-of-00004.gguf\n");
  // The one progress display: "[DONE/ALL] PCT%  (estimate)  WHAT", one line per shard in a log.
  const std::string blank(12, ' ');
  EXPECT_EQ(split.err, "[   1/4]  25.0%  " + blank + "  " + first + "\n[   2/4]  50.0%  " + blank + "  " + prefix +
                           "-00002-of-00004.gguf\n[   3/4]  75.0%  " + blank + "  " + prefix +
                           "-00003-of-00004.gguf\n[   4/4] 100.0%  " + blank + "  " + prefix + "-00004-of-00004.gguf\n");

  const fs::path out = dir / "merged.gguf";
  const CommandResult dry = run_gguf({"merge", first, out.string(), "--dry-run", "--json"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(nlohmann::json::parse(dry.out)["file_bytes"], fs::file_size(sample_model()));
  EXPECT_FALSE(fs::exists(out));

  const CommandResult merge = run_gguf({"merge", first, out.string()});
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  EXPECT_EQ(merge.out, out.string() + "\n");
  EXPECT_TRUE(read_bytes(out) == read_bytes(sample_model()));
  fs::remove_all(dir);
}

TEST(CliSplit, UsageErrors) {
  const auto dir = temp_dir("cli-split-usage");
  const std::string in = sample_model().string(), prefix = (dir / "m").string();
  EXPECT_EQ(run_gguf({"split", in, prefix}).exit_code, 2);  // no limit
  EXPECT_EQ(run_gguf({"split", in, prefix, "--max-size", "1G", "--max-tensors", "3"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"split", in, prefix, "--max-size", "12Q"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"split", in, prefix, "--max-tensors", "0"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"split", (dir / "absent.gguf").string(), prefix, "--max-tensors", "3"}).exit_code, 2);
  EXPECT_EQ(files_in(dir), 0u);
  // A shard is not split again.
  ASSERT_EQ(run_gguf({"split", in, prefix, "--max-tensors", "10"}).exit_code, 0);
  const CommandResult again = run_gguf({"split", prefix + "-00001-of-00002.gguf", (dir / "n").string(), "--max-tensors", "3"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("merge it first"), std::string::npos) << again.err;
  fs::remove_all(dir);
}

TEST(CliMerge, RefusesIncompleteOrWrongInputsAndNeverOverwritesAShard) {
  const auto dir = temp_dir("cli-merge-refuse");
  const std::string prefix = (dir / "m").string();
  ASSERT_EQ(run_gguf({"split", sample_model().string(), prefix, "--max-tensors", "7"}).exit_code, 0);
  const std::string first = prefix + "-00001-of-00003.gguf", second = prefix + "-00002-of-00003.gguf",
                    third = prefix + "-00003-of-00003.gguf";
  const auto second_bytes = read_bytes(second);

  const CommandResult over = run_gguf({"merge", first, second});
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_TRUE(read_bytes(second) == second_bytes);

  const CommandResult not_first = run_gguf({"merge", second, (dir / "x.gguf").string()});
  EXPECT_EQ(not_first.exit_code, 2);
  EXPECT_NE(not_first.err.find(first), std::string::npos) << not_first.err;

  const CommandResult plain = run_gguf({"merge", sample_model().string(), (dir / "x.gguf").string()});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("not a split model"), std::string::npos) << plain.err;

  fs::remove(third);
  const CommandResult missing = run_gguf({"merge", first, (dir / "x.gguf").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find(third), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  fs::remove_all(dir);
}

// info, dump and extract take the first shard and describe the whole model.
TEST(CliShards, InfoDumpAndExtractReadTheWholeModel) {
  const auto dir = temp_dir("cli-shards");
  const std::string in = sample_model().string(), prefix = (dir / "m").string();
  ASSERT_EQ(run_gguf({"split", in, prefix, "--max-tensors", "7"}).exit_code, 0);
  const std::string first = prefix + "-00001-of-00003.gguf";

  const CommandResult info_whole = run_gguf({"info", "--json", in});
  const CommandResult info_split = run_gguf({"info", "--json", first});
  ASSERT_EQ(info_split.exit_code, 0) << info_split.err;
  const auto a = nlohmann::json::parse(info_whole.out)[0];
  const auto b = nlohmann::json::parse(info_split.out)[0];
  for (const char* key : {"tensor_count", "parameters", "tensor_bytes", "types", "hyperparameters", "architecture"}) {
    EXPECT_EQ(a[key], b[key]) << key;
  }
  ASSERT_EQ(b["shards"].size(), 3u);
  EXPECT_EQ(b["shards"][2], prefix + "-00003-of-00003.gguf");
  EXPECT_FALSE(a.contains("shards"));
  uint64_t total = 0;
  for (const auto& p : b["shards"]) total += fs::file_size(p.get<std::string>());
  EXPECT_EQ(b["file_size"], total);
  const CommandResult text = run_gguf({"info", first});
  EXPECT_NE(text.out.find("3 shards"), std::string::npos) << text.out;

  const CommandResult dump_whole = run_gguf({"dump", "--json", in});
  const CommandResult dump_split = run_gguf({"dump", "--json", first});
  ASSERT_EQ(dump_split.exit_code, 0) << dump_split.err;
  const auto da = nlohmann::json::parse(dump_whole.out);
  const auto db = nlohmann::json::parse(dump_split.out);
  ASSERT_EQ(da["tensors"].size(), db["tensors"].size());
  for (size_t i = 0; i < da["tensors"].size(); ++i) {
    EXPECT_EQ(da["tensors"][i]["name"], db["tensors"][i]["name"]);
    EXPECT_EQ(da["tensors"][i]["shape"], db["tensors"][i]["shape"]);
    EXPECT_EQ(db["tensors"][i]["shard"], i / 7);
  }
  EXPECT_EQ(db["metadata"].size(), da["metadata"].size() + 3);  // plus the split keys
  EXPECT_EQ(db["shards"].size(), 3u);
  EXPECT_NE(run_gguf({"dump", first}).out.find("split model: 3 shards"), std::string::npos);

  // Every tensor of the last shard extracts to the same .npy as from the unsplit file.
  const auto last_shard = db["tensors"].back()["name"].get<std::string>();
  const CommandResult x1 = run_gguf({"extract", first, last_shard, "-o", (dir / "a.npy").string()});
  const CommandResult x2 = run_gguf({"extract", in, last_shard, "-o", (dir / "b.npy").string()});
  ASSERT_EQ(x1.exit_code, 0) << x1.err;
  ASSERT_EQ(x2.exit_code, 0) << x2.err;
  EXPECT_TRUE(read_bytes(dir / "a.npy") == read_bytes(dir / "b.npy"));
  const CommandResult all = run_gguf({"extract", first, "-o", (dir / "all").string()});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(files_in(dir / "all"), da["tensors"].size());

  // A missing shard is an error for every verb.
  fs::remove(prefix + "-00002-of-00003.gguf");
  EXPECT_EQ(run_gguf({"info", first}).exit_code, 2);
  EXPECT_EQ(run_gguf({"dump", first}).exit_code, 2);
  EXPECT_EQ(run_gguf({"extract", first, "-o", (dir / "none").string()}).exit_code, 2);
  fs::remove_all(dir);
}

}  // namespace
