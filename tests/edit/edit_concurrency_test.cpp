// Two editors of one file: either both edits land or one is refused with a message, and the
// tensors never move. Forced interleavings: a lock held by the test, a file replaced or changed in
// place between an editor's read and its write.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ggufkit/ggufkit.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;
using test::CommandResult;
using test::run_gguf;

GgufFile open_or_throw(const fs::path& p) {
  auto f = GgufFile::open(p);
  if (!f) throw std::runtime_error(f.error().describe());
  return std::move(f).value();
}

// Every tensor's name, type, shape and bytes.
struct TensorContent {
  std::string name;
  TensorType type;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  bool operator==(const TensorContent&) const = default;
};
std::vector<TensorContent> tensors_of(const fs::path& p) {
  const GgufFile f = open_or_throw(p);
  std::vector<TensorContent> out;
  for (const TensorInfo& t : f.tensors()) {
    const auto data = f.tensor_data(t);
    const auto shape = t.shape();
    TensorContent c;
    c.name = t.name;
    c.type = t.type;
    c.shape.assign(shape.begin(), shape.end());
    c.bytes.assign(data.begin(), data.end());
    out.push_back(std::move(c));
  }
  return out;
}

class EditConcurrency : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("edit-concurrency");
    model_ = dir_ / "model.gguf";
    // Slots to change in place (same size), next to the sample's metadata.
    const GgufFile sample = open_or_throw(test::sample_model());  // the builder's tensors are views of it
    GgufBuilder b = GgufBuilder::from_file(sample);
    for (int i = 0; i < kEditors; ++i) ASSERT_TRUE(b.set(fmt::format("test.slot{}", i), MetadataValue::of(uint32_t{0})));
    ASSERT_TRUE(b.write_file(model_, {.sync = false, .progress = {}}));
    tensors_ = tensors_of(model_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static constexpr int kEditors = 6;
  fs::path dir_, model_;
  std::vector<TensorContent> tensors_;
};

// Editors started together, half writing in place and half rewriting: every edit lands, the
// tensors are those of the original, and the file checks clean.
TEST_F(EditConcurrency, EditsStartedTogetherAllLand) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::vector<std::thread> editors;
    std::vector<CommandResult> results(2 * kEditors);
    std::atomic<int> ready{0};
    for (int i = 0; i < kEditors; ++i) {
      const std::string slot = fmt::format("test.slot{}", i), added = fmt::format("test.r{}.added{}", round, i);
      editors.emplace_back([&, i, slot] {
        ++ready;
        while (ready < 2 * kEditors) std::this_thread::yield();
        results[2 * i] = run_gguf({"set", model_.string(), slot, std::to_string(round * 100 + i + 1), "--type", "uint32"});
      });
      editors.emplace_back([&, i, added] {
        ++ready;
        while (ready < 2 * kEditors) std::this_thread::yield();
        results[2 * i + 1] = run_gguf({"set", model_.string(), added, "yes", "--rewrite"});
      });
    }
    for (auto& t : editors) t.join();
    for (const CommandResult& r : results) EXPECT_EQ(r.exit_code, 0) << r.err;
    const GgufFile f = open_or_throw(model_);
    for (int i = 0; i < kEditors; ++i) {
      const KeyValue* slot = f.find(fmt::format("test.slot{}", i));
      ASSERT_NE(slot, nullptr);
      EXPECT_EQ(slot->value.get<uint32_t>(), static_cast<uint32_t>(round * 100 + i + 1)) << i;
      for (int r = 0; r <= round; ++r) EXPECT_NE(f.find(fmt::format("test.r{}.added{}", r, i)), nullptr) << r << " " << i;
    }
    EXPECT_EQ(tensors_of(model_), tensors_);
    const CommandResult check = run_gguf({"check", model_.string()});
    EXPECT_EQ(check.exit_code, 0) << check.out;
  }
}

// An edit waits for the lock another editor holds, and then edits the file as that editor left it
// (here replaced by a rewrite while it waited): both edits are in the result.
TEST_F(EditConcurrency, AnEditWaitsForTheLockThenEditsTheNewFile) {
  const int held = ::open(model_.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  std::atomic<bool> finished{false};
  CommandResult waiting;
  std::thread editor([&] {
    waiting = run_gguf({"set", model_.string(), "test.second", "from the waiting editor"});
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(finished);
  // The lock holder rewrites the file (a new file renamed over the path), then lets go.
  {
    const GgufFile f = open_or_throw(model_);
    const std::vector<MetadataChange> changes = {MetadataChange::set("test.first", MetadataValue::string("holder"))};
    const auto plan = plan_metadata_edit(f, changes, {.force_rewrite = true});
    ASSERT_TRUE(plan);
    ASSERT_TRUE(apply_metadata_edit(f, model_, *plan, model_, {.sync = false, .progress = {}, .output = {}}));
  }
  ::close(held);
  editor.join();
  EXPECT_EQ(waiting.exit_code, 0) << waiting.err;
  const GgufFile f = open_or_throw(model_);
  ASSERT_NE(f.find("test.first"), nullptr);
  ASSERT_NE(f.find("test.second"), nullptr);
  EXPECT_EQ(f.find("test.second")->value.as_string(), "from the waiting editor");
  EXPECT_EQ(tensors_of(model_), tensors_);
}

// A writer that takes no lock changes the header in place between an editor's read and its write:
// the editor refuses (its own mapping shows the change, the copy it took does not), for an
// in-place edit and for a rewrite.
TEST_F(EditConcurrency, AChangeInPlaceAfterTheReadIsRefused) {
  for (const bool rewrite : {false, true}) {
    SCOPED_TRACE(rewrite ? "rewrite" : "in place");
    const GgufFile f = open_or_throw(model_);
    const std::vector<MetadataChange> changes = {MetadataChange::set("test.slot0", MetadataValue::of(uint32_t{7}))};
    const auto plan = plan_metadata_edit(f, changes, {.force_rewrite = rewrite});
    ASSERT_TRUE(plan);
    // The other writer: test.slot1 = 9, in place.
    const KeyValue* slot1 = f.find("test.slot1");
    ASSERT_NE(slot1, nullptr);
    const uint32_t nine = 9;
    const int fd = ::open(model_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const uint64_t value_at = slot1->offset + 8 + slot1->key.size() + 4;  // key length, key, type
    ASSERT_EQ(::pwrite(fd, &nine, 4, static_cast<off_t>(value_at)), 4);
    ::close(fd);
    const auto r = apply_metadata_edit(f, model_, *plan, model_, {.sync = false, .progress = {}, .output = {}});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::io_error);
    EXPECT_EQ(r.error().message, "the file changed since it was read: not modified");
    EXPECT_EQ(r.error().file, model_.string());
    const GgufFile now = open_or_throw(model_);
    EXPECT_EQ(now.find("test.slot1")->value.get<uint32_t>(), 9u);  // the other writer's change kept
    EXPECT_EQ(now.find("test.slot0")->value.get<uint32_t>(), 0u);
    // Put slot1 back for the next round.
    const int back = ::open(model_.c_str(), O_RDWR | O_CLOEXEC);
    const uint32_t zero = 0;
    ASSERT_EQ(::pwrite(back, &zero, 4, static_cast<off_t>(value_at)), 4);
    ::close(back);
  }
}

// Another file renamed over the path after the read (a rewrite by a writer without the lock): the
// editor neither copies tensor data from the new file at the old offsets nor replaces it.
TEST_F(EditConcurrency, AFileReplacedAfterTheReadIsRefused) {
  const GgufFile f = open_or_throw(model_);
  const std::vector<MetadataChange> changes = {MetadataChange::set("general.name", MetadataValue::string("mine"))};
  const auto plan = plan_metadata_edit(f, changes, {.force_rewrite = true});
  ASSERT_TRUE(plan);
  // The replacement: a longer header, so that its tensor data starts elsewhere.
  GgufBuilder other = GgufBuilder::from_file(f);
  ASSERT_TRUE(other.set("test.padding", MetadataValue::string(std::string(5000, 'p'))));
  ASSERT_TRUE(other.write_file(dir_ / "other.gguf", {.sync = false, .progress = {}}));
  fs::rename(dir_ / "other.gguf", model_);
  const auto replaced = test::read_bytes(model_);
  const auto r = apply_metadata_edit(f, model_, *plan, model_, {.sync = false, .progress = {}, .output = {}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "the file changed since it was read: not modified");
  EXPECT_EQ(test::read_bytes(model_), replaced);
  // Written elsewhere (-o), the same: the source is not what was read any more.
  const auto elsewhere = apply_metadata_edit(f, model_, *plan, dir_ / "edited.gguf", {.sync = false, .progress = {}, .output = {}});
  ASSERT_FALSE(elsewhere);
  EXPECT_EQ(elsewhere.error().message, "the file changed since it was read: not modified");
  EXPECT_FALSE(fs::exists(dir_ / "edited.gguf"));
}

// The cancellable wait (the Python module's): while another editor holds the lock, `cancelled` is
// asked between polls, and its true ends the wait with `cancelled`, nothing locked; a free lock is
// taken without asking.
TEST(EditLockWait, EndsWhenCancelled) {
  const fs::path dir = test::temp_dir("edit-lock-wait");
  const fs::path model = dir / "model.gguf";
  fs::copy_file(test::sample_model(), model);
  const int held = ::open(model.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  int asked = 0;
  const auto waited = EditLock::acquire(model, [&] { return ++asked == 5; });
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error().code, ErrorCode::cancelled);
  EXPECT_EQ(waited.error().describe(), "cancelled while waiting for another edit of the file to finish: nothing changed");
  EXPECT_EQ(waited.error().file, model.string());
  EXPECT_EQ(asked, 5);
  ::close(held);
  asked = 0;
  EXPECT_TRUE(EditLock::acquire(model, [&] { return ++asked > 0; }));
  EXPECT_EQ(asked, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
