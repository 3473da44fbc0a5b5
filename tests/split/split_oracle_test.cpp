// llama.cpp's view of our shards:
//  - its GGUF parser (libggml-base.so, gguf_init_from_file) reads every shard with split.no,
//    split.count (uint16) and split.tensors.count (int32) as its loader demands;
//  - llama-gguf-split's algorithm replayed with ggml's own gguf API (gguf_init_empty, gguf_set_kv,
//    gguf_set_val_*, gguf_add_tensor, gguf_get_meta_data, the same call sequence as
//    tools/gguf-split/gguf-split.cpp) produces the same shard files byte for byte;
//  - node-llama-cpp loads the first shard, finds the others, and evaluates a prompt exactly as it
//    does the unsplit model (same tokens, same probabilities).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "ggufkit/split.h"
#include "oracle_ggml.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

// A size limit giving several shards, none of which llama-gguf-split would refuse (it refuses when
// the first tensor alone is over the limit): a fifth of the data, or the largest tensor.
uint64_t size_limit_for(const fs::path& input) {
  auto in = GgufFile::open(input);
  EXPECT_TRUE(in);
  uint64_t largest = 0;
  for (const TensorInfo& t : in->tensors()) largest = std::max(largest, (t.size + 31) / 32 * 32);
  return std::max(largest, in->tensor_bytes() / 5);
}

std::vector<fs::path> tiny_llamas() {
  std::vector<fs::path> out;
  for (const fs::path& p : corpus_files()) {
    if (p.parent_path().filename() == "tiny-llama") out.push_back(p);
  }
  return out;
}

SplitPlan split_into(const fs::path& input, const fs::path& dir, const SplitLimits& limits) {
  auto in = GgufFile::open(input);
  EXPECT_TRUE(in) << in.error().describe();
  auto plan = plan_split(*in, (dir / input.stem()).string(), limits);
  EXPECT_TRUE(plan) << plan.error().describe();
  SplitWriteOptions o;
  o.sync = false;
  auto r = write_split(*in, *plan, o);
  EXPECT_TRUE(r) << r.error().describe();
  return *plan;
}

class SplitOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    oracle_ = OracleGgml::load(&why);
    if (!oracle_) GTEST_SKIP() << why;
  }
  std::unique_ptr<OracleGgml> oracle_;
};

TEST_F(SplitOracle, ParserReadsEveryShardWithItsSplitKeys) {
  const auto dir = temp_dir("split-oracle-parse");
  std::vector<fs::path> inputs = {sample_model()};
  for (const fs::path& p : tiny_llamas()) inputs.push_back(p);
  for (const fs::path& input : inputs) {
    SCOPED_TRACE(input.filename().string());
    const SplitPlan plan = split_into(input, dir, {.max_bytes = size_limit_for(input), .max_tensors = 0});
    ASSERT_GE(plan.shards.size(), 2u);
    size_t tensors = 0;
    for (size_t i = 0; i < plan.shards.size(); ++i) {
      std::string err;
      const nlohmann::json d = oracle_dump_json(*oracle_, plan.shards[i].path, &err);
      ASSERT_FALSE(d.is_null()) << plan.shards[i].path << ": " << err;
      std::map<std::string, nlohmann::json> kv;
      for (const auto& e : d["metadata"]) kv[e["key"]] = e;
      ASSERT_TRUE(kv.count("split.no") && kv.count("split.count") && kv.count("split.tensors.count"));
      EXPECT_EQ(kv["split.no"]["type"], "uint16");
      EXPECT_EQ(kv["split.no"]["value"], i);
      EXPECT_EQ(kv["split.count"]["type"], "uint16");
      EXPECT_EQ(kv["split.count"]["value"], plan.shards.size());
      EXPECT_EQ(kv["split.tensors.count"]["type"], "int32");
      EXPECT_EQ(kv["split.tensors.count"]["value"], plan.shards.back().first_tensor + plan.shards.back().tensor_count);
      EXPECT_EQ(kv.count("general.architecture"), i == 0 ? 1u : 0u);
      EXPECT_EQ(d["tensors"].size(), plan.shards[i].tensor_count);
      tensors += d["tensors"].size();
    }
    EXPECT_EQ(tensors, plan.shards.back().first_tensor + plan.shards.back().tensor_count);
  }
  fs::remove_all(dir);
}

// ggml's gguf writing API, resolved from the oracle library.
struct GgufWriteApi {
  void* handle = nullptr;
  OracleGgml::gguf_context* (*init_empty)() = nullptr;
  OracleGgml::gguf_context* (*init_from_file)(const char*, OracleGgml::InitParams) = nullptr;
  void (*set_kv)(OracleGgml::gguf_context*, const OracleGgml::gguf_context*) = nullptr;
  void (*set_u16)(OracleGgml::gguf_context*, const char*, uint16_t) = nullptr;
  void (*set_i32)(OracleGgml::gguf_context*, const char*, int32_t) = nullptr;
  void (*add_tensor)(OracleGgml::gguf_context*, const void* tensor) = nullptr;
  size_t (*meta_size)(const OracleGgml::gguf_context*) = nullptr;
  void (*meta_data)(const OracleGgml::gguf_context*, void*) = nullptr;
  void* (*get_tensor)(void* ggml_ctx, const char* name) = nullptr;
  void (*ggml_free)(void* ggml_ctx) = nullptr;

  bool load(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return false;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      return fn != nullptr;
    };
    return sym(init_empty, "gguf_init_empty") && sym(init_from_file, "gguf_init_from_file") &&
           sym(set_kv, "gguf_set_kv") && sym(set_u16, "gguf_set_val_u16") && sym(set_i32, "gguf_set_val_i32") &&
           sym(add_tensor, "gguf_add_tensor") && sym(meta_size, "gguf_get_meta_size") &&
           sym(meta_data, "gguf_get_meta_data") && sym(get_tensor, "ggml_get_tensor") && sym(ggml_free, "ggml_free");
  }
};

// What llama-gguf-split --split-max-size / --split-max-tensors writes, replayed call for call with
// ggml's gguf API: returns each shard file's bytes. `max_bytes` 0 means split by tensor count.
std::vector<std::vector<std::byte>> llama_gguf_split(const OracleGgml& oracle, const GgufWriteApi& w,
                                                     const fs::path& input, uint64_t max_bytes, int max_tensors) {
  const auto& api = oracle.api();
  void* ctx_meta = nullptr;
  OracleGgml::gguf_context* in = w.init_from_file(input.c_str(), {true, &ctx_meta});
  EXPECT_NE(in, nullptr);
  if (!in) return {};
  const auto bytes = read_bytes(input);
  const int64_t n_tensors = api.gguf_get_n_tensors(in);
  std::vector<OracleGgml::gguf_context*> outs;
  std::vector<std::vector<int64_t>> shard_tensors;
  auto new_out = [&] {
    OracleGgml::gguf_context* out = w.init_empty();
    if (outs.empty()) w.set_kv(out, in);  // all metadata in the first split only
    w.set_u16(out, "split.no", static_cast<uint16_t>(outs.size()));
    w.set_u16(out, "split.count", 0);  // placeholder, replaced below
    w.set_i32(out, "split.tensors.count", static_cast<int32_t>(n_tensors));
    outs.push_back(out);
    shard_tensors.emplace_back();
  };
  new_out();
  size_t current = 0;
  for (int64_t i = 0; i < n_tensors; ++i) {
    const char* name = api.gguf_get_tensor_name(in, i);
    const size_t n = (api.gguf_get_tensor_size(in, i) + 31) / 32 * 32;
    const bool split = max_bytes ? current + n > max_bytes : (i > 0 && i % max_tensors == 0);
    if (split) {
      EXPECT_FALSE(shard_tensors.back().empty()) << "llama-gguf-split would refuse these limits";
      new_out();
      current = n;
    } else {
      current += n;
    }
    w.add_tensor(outs.back(), w.get_tensor(ctx_meta, name));
    shard_tensors.back().push_back(i);
  }
  std::vector<std::vector<std::byte>> files;
  for (size_t s = 0; s < outs.size(); ++s) {
    w.set_u16(outs[s], "split.count", static_cast<uint16_t>(outs.size()));
    std::vector<std::byte> file(w.meta_size(outs[s]));
    w.meta_data(outs[s], file.data());
    for (int64_t t : shard_tensors[s]) {
      const size_t offset = api.gguf_get_data_offset(in) + api.gguf_get_tensor_offset(in, t);
      const size_t size = api.gguf_get_tensor_size(in, t);
      file.insert(file.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                  bytes.begin() + static_cast<std::ptrdiff_t>(offset + size));
      file.resize((file.size() + 31) / 32 * 32);  // zeros(GGML_PAD(n_bytes, 32) - n_bytes)
    }
    files.push_back(std::move(file));
    api.gguf_free(outs[s]);
  }
  api.gguf_free(in);
  w.ggml_free(ctx_meta);
  return files;
}

TEST_F(SplitOracle, ShardsAreWhatLlamaGgufSplitWrites) {
  GgufWriteApi w;
  ASSERT_TRUE(w.load(oracle_->library_path())) << dlerror();
  const auto dir = temp_dir("split-oracle-same");
  std::vector<fs::path> inputs = {sample_model()};
  for (const fs::path& p : tiny_llamas()) inputs.push_back(p);
  size_t compared = 0;
  for (const fs::path& input : inputs) {
    SCOPED_TRACE(input.filename().string());
    for (const auto& [max_bytes, max_tensors] : {std::pair<uint64_t, int>{size_limit_for(input), 0}, {0, 6}, {0, 1}}) {
      SplitLimits limits;
      limits.max_bytes = max_bytes;
      limits.max_tensors = static_cast<uint64_t>(max_tensors);
      const SplitPlan plan = split_into(input, dir, limits);
      const auto expected = llama_gguf_split(*oracle_, w, input, max_bytes, max_tensors);
      ASSERT_EQ(plan.shards.size(), expected.size()) << max_bytes << " " << max_tensors;
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(read_bytes(plan.shards[i].path) == expected[i]) << plan.shards[i].path;
        fs::remove(plan.shards[i].path);
        ++compared;
      }
    }
  }
  // At least one shard per limit and input (the sample alone when ../shared is absent).
  EXPECT_GE(compared, 3 * inputs.size());
  if (shared_dir()) {
    EXPECT_GT(compared, 100u);
  }
  fs::remove_all(dir);
}

// ---- node-llama-cpp ----

TEST(SplitNodeLlamaCpp, ShardsEvaluateLikeTheUnsplitModel) {
  GGUFKIT_REQUIRE_SHARED();
  if (const auto missing = node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  const auto dir = temp_dir("split-node");
  const auto corpus = *shared_dir() / "corpus/tiny-llama";
  for (const auto& [name, limits] : {std::pair<const char*, SplitLimits>{"tiny-llama-f16.gguf", {1'000'000, 0}},
                                     {"tiny-llama-q4_k_m.gguf", {0, 5}}}) {
    SCOPED_TRACE(name);
    const NodeRun whole = run_node_script("split/llama_eval.mjs", {(corpus / name).string(), "12"});
    if (whole.status == 3) GTEST_SKIP() << "skipped: " << whole.out;
    ASSERT_EQ(whole.status, 0) << whole.out;
    const SplitPlan plan = split_into(corpus / name, dir, limits);
    ASSERT_GE(plan.shards.size(), 3u);
    const NodeRun shards = run_node_script("split/llama_eval.mjs", {plan.shards[0].path, "12"});
    ASSERT_EQ(shards.status, 0) << shards.out;
    const auto a = nlohmann::json::parse(whole.out);
    const auto b = nlohmann::json::parse(shards.out);
    EXPECT_GE(a["tokens"].size(), 20u);
    EXPECT_EQ(a["tokens"], b["tokens"]);
    EXPECT_EQ(a["confidence"], b["confidence"]);  // the same float bits, printed the same way
    EXPECT_EQ(a["top"], b["top"]);
    std::printf("%s: %zu shards, %zu tokens identical\n", name, plan.shards.size(), a["tokens"].size());
  }
  fs::remove_all(dir);
}

}  // namespace

namespace {

// The sample model the project ships (make demo, most CLI tests) is a model llama.cpp loads and
// runs: an earlier one repeated token texts, which makes llama.cpp abort while loading.
TEST(SampleNodeLlamaCpp, SampleModelLoadsAndGenerates) {
  if (const auto missing = node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  const NodeRun run = run_node_script("split/llama_eval.mjs", {sample_model().string(), "12"});
  if (run.status == 3) GTEST_SKIP() << "skipped: " << run.out;
  ASSERT_EQ(run.status, 0) << run.out;
  const auto doc = nlohmann::json::parse(run.out.substr(run.out.find('{')));
  EXPECT_FALSE(doc["tokens"].empty());
  EXPECT_FALSE(doc["confidence"].empty());  // generation may stop early at the end-of-text token
}

}  // namespace
