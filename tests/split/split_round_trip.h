// Shared by the split tests: split a file into a temporary directory, and the full round trip
// merge(split(X)) == X with every shard checked on the way.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>

#include "ggufkit/split.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace split_test {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

inline WriteOptions no_sync(bool pad_header_without_tensors = true) {
  WriteOptions o;
  o.sync = false;
  o.pad_header_without_tensors = pad_header_without_tensors;
  return o;
}
inline SplitWriteOptions split_no_sync(const fs::path& input = {}) {
  SplitWriteOptions o;
  o.sync = false;
  o.input_path = input;
  return o;
}

struct Split {
  fs::path dir;
  std::string prefix;
  SplitPlan plan;
};

inline Split split_file(const GgufFile& in, const std::string& name, const SplitLimits& limits) {
  Split s;
  s.dir = temp_dir("split-" + name);
  s.prefix = (s.dir / "m").string();
  auto plan = plan_split(in, s.prefix, limits);
  EXPECT_TRUE(plan) << plan.error().describe();
  s.plan = *plan;
  auto r = write_split(in, s.plan, split_no_sync());
  EXPECT_TRUE(r) << r.error().describe();
  return s;
}

// merge(split(X)) == X for one file and one set of limits; checks the shards on the way.
inline void round_trip(const fs::path& path, const SplitLimits& limits, size_t min_shards) {
  SCOPED_TRACE(path.filename().string());
  auto in = GgufFile::open(path);
  ASSERT_TRUE(in) << in.error().describe();
  const Split s = split_file(*in, path.stem().string(), limits);
  ASSERT_GE(s.plan.shards.size(), min_shards);
  const auto n = static_cast<uint16_t>(s.plan.shards.size());
  size_t tensors = 0;
  for (size_t i = 0; i < s.plan.shards.size(); ++i) {
    const ShardPlan& sp = s.plan.shards[i];
    ASSERT_EQ(sp.path, split_path(s.prefix, static_cast<uint32_t>(i), n));
    auto shard = GgufFile::open(sp.path);
    ASSERT_TRUE(shard) << shard.error().describe();
    EXPECT_EQ(shard->file_size(), sp.file_bytes);
    EXPECT_EQ(shard->version(), in->version());
    EXPECT_EQ(shard->get(keys::kSplitNo)->get<uint16_t>(), i);
    EXPECT_EQ(shard->get(keys::kSplitCount)->get<uint16_t>(), n);
    EXPECT_EQ(shard->get(keys::kSplitTensorsCount)->get<int32_t>(), static_cast<int32_t>(in->tensors().size()));
    // The model's metadata is in the first shard only, in the input's order, split keys last.
    const size_t expected_kvs = i == 0 ? in->metadata().size() + 3 : 3;
    ASSERT_EQ(shard->metadata().size(), expected_kvs);
    const auto md = shard->metadata();
    EXPECT_EQ(md[expected_kvs - 3].key, keys::kSplitNo);
    EXPECT_EQ(md[expected_kvs - 2].key, keys::kSplitTensorsCount);
    EXPECT_EQ(md[expected_kvs - 1].key, keys::kSplitCount);
    for (size_t k = 0; i == 0 && k < in->metadata().size(); ++k) {
      EXPECT_EQ(md[k].key, in->metadata()[k].key);
      EXPECT_TRUE(std::ranges::equal(md[k].value.encoded(), in->metadata()[k].value.encoded()));
    }
    EXPECT_EQ(shard->tensors().size(), sp.tensor_count);
    for (const TensorInfo& t : shard->tensors()) {
      const TensorInfo& orig = in->tensors()[tensors++];
      EXPECT_EQ(t.name, orig.name);
      EXPECT_TRUE(std::ranges::equal(shard->tensor_data(t), in->tensor_data(orig))) << t.name;
    }
  }
  EXPECT_EQ(tensors, in->tensors().size());

  auto model = SplitModel::open(s.plan.shards[0].path);
  ASSERT_TRUE(model) << model.error().describe();
  EXPECT_EQ(model->shards().size(), s.plan.shards.size());
  EXPECT_EQ(model->is_split(), s.plan.shards.size() > 1);
  ASSERT_EQ(model->tensors().size(), in->tensors().size());
  EXPECT_EQ(model->tensor_bytes(), in->tensor_bytes());
  for (size_t i = 0; i < in->tensors().size(); ++i) {
    const TensorInfo& orig = in->tensors()[i];
    const ModelTensor* t = model->find_tensor(orig.name);
    ASSERT_NE(t, nullptr) << orig.name;
    EXPECT_EQ(t, &model->tensors()[i]);
    EXPECT_TRUE(std::ranges::equal(t->data, in->tensor_data(orig)));
  }
  EXPECT_EQ(model->find_tensor("no.such.tensor"), nullptr);

  const fs::path merged = s.dir / "merged.gguf";
  auto w = write_merged(*model, merged, no_sync());
  ASSERT_TRUE(w) << w.error().describe();
  EXPECT_TRUE(read_bytes(merged) == read_bytes(path)) << "merge(split(X)) differs from X";
  fs::remove_all(s.dir);
}

}  // namespace split_test
