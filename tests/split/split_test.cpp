// The split layer: naming, sizes, the plan's rules, the shards' keys, opening a split model and
// the checks it makes, and merge(split(X)) == X byte for byte on the sample.
#include <gtest/gtest.h>

#include <numeric>

#include "ggufkit/split.h"
#include "ggufkit/writer.h"
#include "split_round_trip.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;
using namespace split_test;

uint64_t pad32(uint64_t n) { return (n + 31) / 32 * 32; }

TEST(SplitNames, FollowLlamaCppsPattern) {
  EXPECT_EQ(split_path("out/m", 0, 3), "out/m-00001-of-00003.gguf");
  EXPECT_EQ(split_path("m", 11, 12), "m-00012-of-00012.gguf");
  EXPECT_EQ(split_prefix("dir/m-00001-of-00003.gguf", 0, 3), "dir/m");
  EXPECT_EQ(split_prefix(split_path("a-b", 4, 9), 4, 9), "a-b");
  EXPECT_FALSE(split_prefix("m-00001-of-00003.gguf", 1, 3));  // index differs
  EXPECT_FALSE(split_prefix("m-00001-of-00003.gguf", 0, 4));  // count differs
  EXPECT_FALSE(split_prefix("-00001-of-00003.gguf", 0, 3));   // empty prefix, as llama_split_prefix
  EXPECT_FALSE(split_prefix("m.gguf", 0, 1));
}

TEST(SplitSizes, ParseDecimalAndBinaryUnits) {
  EXPECT_EQ(*parse_size("2G"), 2'000'000'000u);      // llama-gguf-split: G = 1000^3
  EXPECT_EQ(*parse_size("500M"), 500'000'000u);
  EXPECT_EQ(*parse_size("3gb"), 3'000'000'000u);
  EXPECT_EQ(*parse_size("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(*parse_size("64Mi"), uint64_t{64} << 20);
  EXPECT_EQ(*parse_size("4K"), 4000u);
  EXPECT_EQ(*parse_size("12345"), 12345u);
  EXPECT_EQ(*parse_size("7B"), 7u);
  for (const char* bad : {"", "G", "0", "0M", "-1G", "2X", "1.5G", "99999999999999999999", "20000000000T"}) {
    EXPECT_FALSE(parse_size(bad)) << bad;
  }
}

// The rule llama-gguf-split applies, written out independently: with a size limit, a tensor that
// takes the running sum of 32-padded sizes past the limit starts a new shard.
void check_size_plan(const std::vector<uint64_t>& sizes, uint64_t max_bytes) {
  auto starts = plan_shard_starts(sizes, {.max_bytes = max_bytes});
  ASSERT_TRUE(starts);
  ASSERT_FALSE(starts->empty());
  EXPECT_EQ(starts->front(), 0u);
  for (size_t s = 0; s < starts->size(); ++s) {
    const size_t begin = (*starts)[s];
    const size_t end = s + 1 < starts->size() ? (*starts)[s + 1] : sizes.size();
    ASSERT_LT(begin, end) << "empty shard " << s;
    uint64_t sum = 0;
    for (size_t i = begin; i < end; ++i) sum += pad32(sizes[i]);
    if (end - begin > 1) {
      EXPECT_LE(sum, max_bytes) << "shard " << s;
    }
    if (end < sizes.size()) {
      EXPECT_GT(sum + pad32(sizes[end]), max_bytes) << "shard " << s << " closed early";
    }
  }
}

TEST(SplitPlan, SizeLimitCountsPaddedTensorBytes) {
  check_size_plan({10, 20, 30, 40, 50}, 64);
  check_size_plan({32, 32, 32, 32}, 64);    // exactly at the limit stays
  check_size_plan({33, 31}, 64);            // 64 + 32 > 64: split although 33 + 31 == 64
  check_size_plan({1000, 1, 1, 1000, 1}, 100);  // oversized tensors get shards of their own
  check_size_plan({5}, 1);
  std::vector<uint64_t> many(1000);
  std::iota(many.begin(), many.end(), 1);
  check_size_plan(many, 4096);
  EXPECT_EQ(plan_shard_starts(std::vector<uint64_t>{33, 31}, {.max_bytes = 64})->size(), 2u);
  EXPECT_EQ(plan_shard_starts(std::vector<uint64_t>{32, 32}, {.max_bytes = 64})->size(), 1u);
}

TEST(SplitPlan, TensorLimitMatchesModuloRule) {
  const std::vector<uint64_t> sizes(10, 100);
  for (uint64_t n : {1u, 3u, 4u, 10u, 11u}) {
    auto starts = plan_shard_starts(sizes, {.max_tensors = n});
    ASSERT_TRUE(starts);
    std::vector<size_t> expected;  // llama-gguf-split: a new shard at every i > 0 with i % n == 0
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i == 0 || i % n == 0) expected.push_back(i);
    }
    EXPECT_EQ(*starts, expected) << n;
  }
}

TEST(SplitPlan, NoTensorsMakesOneShardAndTooManyShardsIsRefused) {
  EXPECT_EQ(*plan_shard_starts({}, {.max_tensors = 1}), std::vector<size_t>{0});
  const std::vector<uint64_t> sizes(size_t{kMaxShards} + 1, 1);
  EXPECT_FALSE(plan_shard_starts(sizes, {.max_tensors = 1}));
  EXPECT_TRUE(plan_shard_starts(std::span(sizes).first(kMaxShards), {.max_tensors = 1}));
}

TEST(SplitRoundTrip, SampleByTensorCountAndBySize) {
  const fs::path sample = sample_model();
  round_trip(sample, {.max_tensors = 1}, 2);
  round_trip(sample, {.max_tensors = 5}, 2);
  round_trip(sample, {.max_bytes = 40'000}, 3);
  round_trip(sample, {.max_tensors = 100000}, 1);  // a single shard still carries the split keys
  round_trip(sample, {.max_bytes = 1}, 2);         // every tensor alone
}

TEST(SplitRoundTrip, FileWithoutTensorsKeepsItsHeaderPadding) {
  const auto dir = temp_dir("split-empty");
  for (bool pad : {true, false}) {
    GgufBuilder b;
    ASSERT_TRUE(b.set("general.name", MetadataValue::string("nothing")));
    const fs::path in = dir / (pad ? "padded.gguf" : "unpadded.gguf");
    ASSERT_TRUE(b.write_file(in, no_sync(pad)));
    round_trip(in, {.max_tensors = 1}, 1);
  }
  fs::remove_all(dir);
}

TEST(SplitRoundTrip, NonDefaultAlignmentIsKeptInEveryShard) {
  auto in = GgufFile::open(sample_model());
  ASSERT_TRUE(in);
  GgufBuilder b = GgufBuilder::from_file(*in);
  ASSERT_TRUE(b.set_alignment(256));
  const auto dir = temp_dir("split-align");
  const fs::path aligned = dir / "aligned.gguf";
  ASSERT_TRUE(b.write_file(aligned, no_sync()));
  round_trip(aligned, {.max_tensors = 3}, 2);
  fs::remove_all(dir);
}

// Builds a split model by hand (from the sample) with one thing wrong.
class BrokenSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    auto in = GgufFile::open(sample_model());
    ASSERT_TRUE(in);
    input_ = std::make_unique<GgufFile>(std::move(in).value());
    split_ = split_file(*input_, "broken", {.max_tensors = 4});
    ASSERT_GE(split_.plan.shards.size(), 3u);
  }
  void TearDown() override { fs::remove_all(split_.dir); }
  // Rewrites shard i after `edit` changes its builder.
  void rewrite(size_t i, const std::function<void(GgufBuilder&)>& edit) {
    auto b = shard_builder(*input_, split_.plan, i);
    ASSERT_TRUE(b);
    edit(*b);
    ASSERT_TRUE(b->write_file(split_.plan.shards[i].path, no_sync()));
  }
  Error open_error() {
    auto m = SplitModel::open(split_.plan.shards[0].path);
    EXPECT_FALSE(m);
    return m ? Error{} : m.error();
  }
  std::unique_ptr<GgufFile> input_;
  Split split_;
};

TEST_F(BrokenSplit, MissingShard) {
  fs::remove(split_.plan.shards[1].path);
  const Error e = open_error();
  EXPECT_EQ(e.code, ErrorCode::io_error);
  EXPECT_EQ(e.file, split_.plan.shards[1].path);  // the shard in the error's file, not in its message
  EXPECT_EQ(e.message.rfind("shard 2 of", 0), 0u) << e.message;
  EXPECT_EQ(e.message.find(split_.plan.shards[1].path), std::string::npos) << e.message;
}

TEST_F(BrokenSplit, WrongSplitNumber) {
  rewrite(2, [](GgufBuilder& b) { ASSERT_TRUE(b.set(keys::kSplitNo, MetadataValue::of(uint16_t{1}))); });
  const Error e = open_error();
  EXPECT_EQ(e.subject, keys::kSplitNo);
  EXPECT_EQ(e.file, split_.plan.shards[2].path);
  EXPECT_EQ(e.message, "split.no is 1, the name says 2");
}

TEST_F(BrokenSplit, SplitKeyOfTheWrongType) {
  rewrite(1, [](GgufBuilder& b) { ASSERT_TRUE(b.set(keys::kSplitNo, MetadataValue::of(uint32_t{1}))); });
  const Error e = open_error();
  EXPECT_EQ(e.file, split_.plan.shards[1].path);
  EXPECT_EQ(e.message, "the key is a uint32; llama.cpp requires a uint16");
}

TEST_F(BrokenSplit, DisagreeingSplitCount) {
  rewrite(1, [&](GgufBuilder& b) {
    ASSERT_TRUE(b.set(keys::kSplitCount, MetadataValue::of(static_cast<uint16_t>(split_.plan.shards.size() + 1))));
  });
  EXPECT_EQ(open_error().subject, keys::kSplitCount);
}

TEST_F(BrokenSplit, WrongTensorTotal) {
  rewrite(0, [](GgufBuilder& b) { ASSERT_TRUE(b.set(keys::kSplitTensorsCount, MetadataValue::of(int32_t{3}))); });
  EXPECT_EQ(open_error().subject, keys::kSplitTensorsCount);
}

TEST_F(BrokenSplit, ConflictingMetadataInALaterShard) {
  rewrite(1, [](GgufBuilder& b) { ASSERT_TRUE(b.set("general.name", MetadataValue::string("other"))); });
  const Error e = open_error();
  EXPECT_EQ(e.subject, "general.name");
  EXPECT_EQ(e.file, split_.plan.shards[1].path);
  EXPECT_EQ(e.message, "the value differs from the first shard's");
}

TEST_F(BrokenSplit, SameMetadataInALaterShardIsAccepted) {
  rewrite(1, [&](GgufBuilder& b) {
    ASSERT_TRUE(b.set("general.architecture", MetadataValue::copy_of(*input_->get("general.architecture"))));
  });
  EXPECT_TRUE(SplitModel::open(split_.plan.shards[0].path));
}

TEST_F(BrokenSplit, OpeningALaterShardNamesTheFirst) {
  auto m = SplitModel::open(split_.plan.shards[1].path);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find(split_.plan.shards[0].path), std::string::npos) << m.error().message;
}

TEST_F(BrokenSplit, RenamedFirstShard) {
  const fs::path renamed = split_.dir / "renamed.gguf";
  fs::rename(split_.plan.shards[0].path, renamed);
  auto m = SplitModel::open(renamed);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("must be named"), std::string::npos);
}

TEST_F(BrokenSplit, DuplicateTensorAcrossShards) {
  // Shard 2 gets a copy of shard 1's first tensor in place of its own first.
  rewrite(1, [&](GgufBuilder& b) {
    GgufBuilder fresh;
    ASSERT_TRUE(fresh.set(keys::kSplitNo, MetadataValue::of(uint16_t{1})));
    ASSERT_TRUE(fresh.set(keys::kSplitTensorsCount, *b.find(keys::kSplitTensorsCount)));
    ASSERT_TRUE(fresh.set(keys::kSplitCount, *b.find(keys::kSplitCount)));
    const ShardPlan& sp = split_.plan.shards[1];
    const TensorInfo& dup = input_->tensors()[0];
    ASSERT_TRUE(fresh.add_tensor(dup.name, dup.type, dup.shape(), input_->tensor_data(dup)));
    for (size_t t = sp.first_tensor + 1; t < sp.first_tensor + sp.tensor_count; ++t) {
      const TensorInfo& ti = input_->tensors()[t];
      ASSERT_TRUE(fresh.add_tensor(ti.name, ti.type, ti.shape(), input_->tensor_data(ti)));
    }
    b = std::move(fresh);
  });
  EXPECT_EQ(open_error().code, ErrorCode::duplicate_tensor);
}

TEST_F(BrokenSplit, MergeRefusesToWriteOverAShard) {
  auto m = SplitModel::open(split_.plan.shards[0].path);
  ASSERT_TRUE(m);
  const auto before = read_bytes(split_.plan.shards[1].path);
  EXPECT_FALSE(write_merged(*m, split_.plan.shards[1].path, no_sync()));
  EXPECT_TRUE(read_bytes(split_.plan.shards[1].path) == before);
}

TEST(SplitWrite, RefusesToReplaceTheInput) {
  const auto dir = temp_dir("split-self");
  const fs::path in_path = dir / "m-00001-of-00001.gguf";
  fs::copy_file(sample_model(), in_path);
  auto in = GgufFile::open(in_path);
  ASSERT_TRUE(in);
  auto plan = plan_split(*in, (dir / "m").string(), {.max_tensors = 1000});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->shards.size(), 1u);
  EXPECT_FALSE(write_split(*in, *plan, split_no_sync(in_path)));
  EXPECT_TRUE(read_bytes(in_path) == read_bytes(sample_model()));
  fs::remove_all(dir);
}

TEST(SplitModelOpen, PlainFileIsAOneShardModel) {
  auto m = SplitModel::open(sample_model());
  ASSERT_TRUE(m) << m.error().describe();
  EXPECT_FALSE(m->is_split());
  auto f = GgufFile::open(sample_model());
  EXPECT_EQ(m->tensors().size(), f->tensors().size());
  EXPECT_EQ(m->file_bytes(), f->file_size());
}

}  // namespace
