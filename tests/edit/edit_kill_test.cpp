// Killing `gguf set` in the middle of a rewrite must leave the original file, whole; killing it
// at any other moment leaves the old file or the new one. The model has 256 MiB of tensor data so
// that the copy takes long enough to be interrupted.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

constexpr int64_t kElements = int64_t{64} << 20;  // 256 MiB of float32

// Tensor element i holds i (as a float's bits: i), so any misplaced byte shows.
Expected<void> fill(uint64_t offset, std::span<std::byte> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t at = offset + i;
    out[i] = static_cast<std::byte>((at >> (8 * (at % 4))) & 0xFF);
  }
  return {};
}

bool data_intact(const GgufFile& f) {
  if (f.tensors().size() != 1) return false;
  const auto data = f.tensor_data(f.tensors()[0]);
  std::vector<std::byte> expected(size_t{1} << 20);
  for (uint64_t at = 0; at < data.size(); at += expected.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(expected.size(), data.size() - at));
    (void)fill(at, std::span(expected).first(n));
    if (!std::equal(expected.begin(), expected.begin() + static_cast<ptrdiff_t>(n), data.begin() + static_cast<ptrdiff_t>(at))) {
      return false;
    }
  }
  return true;
}

pid_t spawn_set(const fs::path& model, const std::string& name) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execl(GGUFKIT_CLI_PATH, GGUFKIT_CLI_PATH, "set", model.c_str(), "general.name", name.c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

TEST(EditKill, ARewriteKilledAtAnyMomentLeavesTheOldFileOrTheNew) {
  const auto dir = temp_dir("edit-kill");
  const fs::path model = dir / "big.gguf";
  {
    GgufBuilder b;
    ASSERT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
    ASSERT_TRUE(b.set("general.name", MetadataValue::string("v0")));
    const int64_t shape[] = {kElements};
    ASSERT_TRUE(b.add_tensor("big.weight", TensorType::F32, shape, TensorProducer(fill)));
    WriteOptions options;
    options.sync = false;
    ASSERT_TRUE(b.write_file(model, options));
  }
  std::string current = "v0";
  int interrupted = 0, completed = 0;
  // Each round grows the name, so each edit is a rewrite (the header outgrows its padding).
  for (int round = 1; round <= 12; ++round) {
    const std::string next = "v" + std::string(static_cast<size_t>(round) * 40, static_cast<char>('a' + round));
    const pid_t pid = spawn_set(model, next);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(round <= 8 ? 5 * round : 60 * round));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto f = GgufFile::open(model);
    ASSERT_TRUE(f) << "round " << round << ": " << f.error().describe();
    const std::string name(f->get("general.name")->as_string().value_or("?"));
    ASSERT_TRUE(name == current || name == next) << "round " << round << ": name is " << name;
    ASSERT_TRUE(data_intact(*f)) << "round " << round;
    if (name == next) {
      ++completed;
      current = next;
    } else {
      ++interrupted;
    }
  }
  // And one left to finish: the new name, the same data.
  {
    const std::string last = "v-final-" + std::string(400, 'z');
    const pid_t pid = spawn_set(model, last);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    auto f = GgufFile::open(model);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->get("general.name")->as_string(), last);
    EXPECT_TRUE(data_intact(*f));
  }
  // The schedule must have caught some rewrites in the middle (else this proves little).
  EXPECT_GT(interrupted, 0);
  std::cout << "[          ] " << interrupted << " rewrites killed midway, " << completed << " finished\n";
  fs::remove_all(dir);
}

}  // namespace
