// gguf split writes its shards as a set, through the real binary stopped at exact system calls
// (ptrace, run_gguf_stopped_at): killed (SIGKILL) before the renames it leaves no shard under its
// final name, only temporaries, which the next run removes; interrupted (SIGINT) up to the renames
// it exits 130 and leaves nothing.
#include <csignal>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace {

using namespace ggufkit::test;
namespace fs = std::filesystem;

// The sample model has 20 tensors: --max-tensors 1 makes 20 shards.
constexpr int kShards = 20;

const std::vector<long> kFsync = fsync_syscalls();
const std::vector<long> kRenames = rename_syscalls();

struct Names {
  std::set<std::string> shards, temporaries, others;
};

Names names_in(const fs::path& dir) {
  Names n;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".m-") && name.find(".gguf.tmp-") != std::string::npos) {
      n.temporaries.insert(name);
    } else if (name.starts_with("m-") && name.ends_with(fmt::format("-of-{:05d}.gguf", kShards))) {
      n.shards.insert(name);
    } else {
      n.others.insert(name);
    }
  }
  return n;
}

class SplitSet : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("split-set");
    prefix_ = (dir_ / "m").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> split_args() const {
    return {"split", sample_model().string(), prefix_, "--max-tensors", "1"};
  }
  fs::path dir_;
  std::string prefix_;
};

// Killed at any moment of the commit before the renames (each shard's fsync, the first rename):
// every shard is a temporary, none has its final name; the run before's temporaries are gone (each
// shard's writer removes the dead ones of its name). Killed after the renames (the directory's
// fsync): every shard is there. Then a whole run leaves exactly the shards.
TEST_F(SplitSet, AKillLeavesNoShardUnlessItLeavesAll) {
  GGUFKIT_REQUIRE_PTRACE();
  struct Point {
    std::vector<long> calls;
    int nth;
    const char* what;
  };
  const std::vector<Point> before_renames = {{kFsync, 1, "the first shard's fsync"},
                                             {kFsync, 2, "the second shard's fsync"},
                                             {kFsync, kShards / 2, "a middle shard's fsync"},
                                             {kFsync, kShards, "the last shard's fsync"},
                                             {kRenames, 1, "the first rename"}};
  for (const Point& p : before_renames) {
    SCOPED_TRACE(p.what);
    const StoppedRun run = run_gguf_stopped_at(split_args(), p.calls, p.nth, [](pid_t pid) { ::kill(pid, SIGKILL); });
    ASSERT_TRUE(run.stopped);
    EXPECT_EQ(run.result.exit_code, 128 + SIGKILL);
    EXPECT_EQ(run.result.out, "");
    EXPECT_EQ(run.result.err, "");
    const Names n = names_in(dir_);
    EXPECT_EQ(n.shards, std::set<std::string>{});
    EXPECT_EQ(n.temporaries.size(), static_cast<size_t>(kShards));
    EXPECT_EQ(n.others, std::set<std::string>{});
  }
  // After the last rename, at the directory's fsync: the whole set.
  const StoppedRun late =
      run_gguf_stopped_at(split_args(), kFsync, kShards + 1, [](pid_t pid) { ::kill(pid, SIGKILL); });
  ASSERT_TRUE(late.stopped);
  EXPECT_EQ(late.result.exit_code, 128 + SIGKILL);
  Names n = names_in(dir_);
  EXPECT_EQ(n.shards.size(), static_cast<size_t>(kShards));
  EXPECT_EQ(n.temporaries, std::set<std::string>{});
  // Killed again before its renames, then run to the end: the dead run's temporaries are removed.
  for (const auto& s : n.shards) fs::remove(dir_ / s);
  ASSERT_TRUE(run_gguf_stopped_at(split_args(), kRenames, 1, [](pid_t pid) { ::kill(pid, SIGKILL); }).stopped);
  ASSERT_EQ(names_in(dir_).temporaries.size(), static_cast<size_t>(kShards));
  const CommandResult whole = run_gguf(split_args());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.err, "");
  std::string listed;
  for (int i = 0; i < kShards; ++i) listed += fmt::format("{}-{:05d}-of-{:05d}.gguf\n", prefix_, i + 1, kShards);
  EXPECT_EQ(whole.out, listed);
  n = names_in(dir_);
  EXPECT_EQ(n.shards.size(), static_cast<size_t>(kShards));
  EXPECT_EQ(n.temporaries, std::set<std::string>{});
  const fs::path merged = dir_ / "merged.gguf";
  ASSERT_EQ(run_gguf({"merge", fmt::format("{}-00001-of-{:05d}.gguf", prefix_, kShards), merged.string()}).exit_code, 0);
  EXPECT_EQ(read_bytes(merged), read_bytes(sample_model()));
}

// SIGINT while the shards are synced, up to the renames: exit 130, the one line, nothing on stdout
// and nothing left in the directory.
TEST_F(SplitSet, AnInterruptUpToTheRenamesWritesNothing) {
  GGUFKIT_REQUIRE_PTRACE();
  for (const int nth : {1, kShards / 2, kShards}) {
    SCOPED_TRACE(nth);
    const StoppedRun run = run_gguf_stopped_at(split_args(), kFsync, nth, [](pid_t pid) { ::kill(pid, SIGINT); });
    ASSERT_TRUE(run.stopped);
    EXPECT_EQ(run.result.exit_code, 130);
    EXPECT_EQ(run.result.out, "");
    EXPECT_EQ(run.result.err, fmt::format("gguf: split: interrupted; {}-*-of-{:05d}.gguf was not written\n", prefix_, kShards));
    EXPECT_TRUE(fs::is_empty(dir_));
  }
}

}  // namespace
