// gguf diff through the real binary: exit codes, one sorted line per item, stable text, the JSON
// object's shape, long values shortened.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "diff_helpers.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using test::CommandResult;
using test::lines_of;
using test::run_gguf;
namespace fs = std::filesystem;

std::vector<std::string> vocabulary(size_t n) {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < n; ++i) tokens.push_back("token_" + std::to_string(i));
  return tokens;
}

std::string long_template(std::string_view middle) {
  std::string s(300, 'x');
  s += middle;
  s += std::string(300, 'y');
  return s;
}

GgufBuilder model_a() {
  GgufBuilder b;
  EXPECT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
  EXPECT_TRUE(b.set("general.name", MetadataValue::string("model a")));
  EXPECT_TRUE(b.set("general.file_type", MetadataValue::of(uint32_t{0})));
  EXPECT_TRUE(b.set("llama.context_length", MetadataValue::of(uint32_t{2048})));
  EXPECT_TRUE(b.set("tokenizer.chat_template", MetadataValue::string(long_template("{% if a %}"))));
  EXPECT_TRUE(b.set("tokenizer.ggml.tokens", MetadataValue::string_array(vocabulary(50000))));
  EXPECT_TRUE(b.add_tensor("token_embd.weight", TensorType::F32, std::vector<int64_t>{64, 4},
                           test::float_bytes(test::wave(256))));
  EXPECT_TRUE(b.add_tensor("blk.0.ffn_up.weight", TensorType::F32, std::vector<int64_t>{64, 4},
                           test::float_bytes(test::wave(256, 1.0f))));
  EXPECT_TRUE(b.add_tensor("old.weight", TensorType::F32, std::vector<int64_t>{32}, test::float_bytes(test::wave(32))));
  return b;
}

GgufBuilder model_b() {
  GgufBuilder b;
  EXPECT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
  EXPECT_TRUE(b.set("general.file_type", MetadataValue::of(int32_t{0})));  // type change
  EXPECT_TRUE(b.set("general.author", MetadataValue::string("b")));       // added; general.name removed
  EXPECT_TRUE(b.set("llama.context_length", MetadataValue::of(uint32_t{4096})));
  EXPECT_TRUE(b.set("tokenizer.chat_template", MetadataValue::string(long_template("{% if b %}"))));
  auto tokens = vocabulary(50000);
  tokens[31337] = "changed";
  EXPECT_TRUE(b.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens)));
  EXPECT_TRUE(b.add_tensor("token_embd.weight", TensorType::Q8_0, std::vector<int64_t>{64, 4},
                           test::encode_as(TensorType::Q8_0, test::wave(256), 64)));
  EXPECT_TRUE(b.add_tensor("blk.0.ffn_up.weight", TensorType::F32, std::vector<int64_t>{64, 4},
                           test::float_bytes(test::wave(256, 1.5f))));
  EXPECT_TRUE(b.add_tensor("new.weight", TensorType::F32, std::vector<int64_t>{32}, test::float_bytes(test::wave(32))));
  return b;
}

void write(const GgufBuilder& b, const fs::path& path) {
  WriteOptions o;
  o.sync = false;
  auto r = b.write_file(path, o);
  ASSERT_TRUE(r) << r.error().describe();
}

class DiffCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("diff-cli");
    a_ = (dir_ / "a.gguf").string();
    b_ = (dir_ / "b.gguf").string();
    write(model_a(), a_);
    write(model_b(), b_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string a_, b_;
};

std::vector<std::string> lines_starting(const std::string& s, std::string_view prefix) {
  std::vector<std::string> out;
  for (const auto& l : lines_of(s)) {
    if (l.starts_with(prefix)) out.push_back(l);
  }
  return out;
}

TEST_F(DiffCli, IdenticalFileExitsZero) {
  const CommandResult r = run_gguf({"diff", a_, a_, "--data"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_TRUE(lines[0].starts_with("summary: identical")) << lines[0];
  EXPECT_NE(lines[0].find("0 of 3 compared differ"), std::string::npos) << lines[0];
}

TEST_F(DiffCli, DifferencesExitOneOneSortedLineEach) {
  const CommandResult r = run_gguf({"diff", a_, b_});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "");
  const auto keys = lines_starting(r.out, "key ");
  ASSERT_EQ(keys.size(), 6u) << r.out;
  // Sorted by key name, whatever the change.
  std::vector<std::string> names;
  for (const auto& l : keys) names.push_back(l.substr(15, l.find(':') - 15));
  EXPECT_EQ(names, (std::vector<std::string>{"general.author", "general.file_type", "general.name",
                                             "llama.context_length", "tokenizer.chat_template",
                                             "tokenizer.ggml.tokens"}));
  EXPECT_TRUE(keys[0].starts_with("key added      general.author: string \"b\"")) << keys[0];
  EXPECT_NE(keys[1].find("uint32 0 -> int32 0 (type changed)"), std::string::npos) << keys[1];
  EXPECT_TRUE(keys[2].starts_with("key removed    general.name: string \"model a\"")) << keys[2];
  EXPECT_NE(keys[3].find("uint32 2048 -> 4096"), std::string::npos) << keys[3];
  // The long template: sizes, where it differs, and a window around it, not the whole text.
  EXPECT_NE(keys[4].find("first difference at byte 306"), std::string::npos) << keys[4];
  EXPECT_NE(keys[4].find("{% if a %}"), std::string::npos) << keys[4];
  EXPECT_NE(keys[4].find("{% if b %}"), std::string::npos) << keys[4];
  EXPECT_LT(keys[4].size(), 400u);
  // The vocabulary: which index, both tokens, not the array.
  EXPECT_NE(keys[5].find("1 of 50000 element differs: [31337] \"token_31337\" -> \"changed\""), std::string::npos)
      << keys[5];
  EXPECT_LT(keys[5].size(), 300u);

  const auto tensors = lines_starting(r.out, "tensor ");
  ASSERT_EQ(tensors.size(), 3u) << r.out;
  EXPECT_TRUE(tensors[0].starts_with("tensor added   new.weight: f32 [32]")) << tensors[0];
  EXPECT_TRUE(tensors[1].starts_with("tensor removed old.weight: f32 [32]")) << tensors[1];
  EXPECT_TRUE(tensors[2].starts_with("tensor changed token_embd.weight: f32 [64, 4] -> q8_0 [64, 4] (type changed)"))
      << tensors[2];
  EXPECT_TRUE(lines_starting(r.out, "data ").empty()) << "no data lines without --data";
  EXPECT_TRUE(lines_of(r.out).back().starts_with("summary: different")) << r.out;
  EXPECT_NE(r.out.find("not compared (--data)"), std::string::npos);
}

TEST_F(DiffCli, DataLinesWithFigures) {
  const CommandResult r = run_gguf({"diff", a_, b_, "--data", "--threads", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto data = lines_starting(r.out, "data ");
  ASSERT_EQ(data.size(), 2u) << r.out;
  EXPECT_TRUE(data[0].starts_with("data differs   blk.0.ffn_up.weight: f32: max_abs ")) << data[0];
  EXPECT_TRUE(data[1].starts_with("data differs   token_embd.weight: f32 -> q8_0: max_abs ")) << data[1];
  EXPECT_NE(data[1].find("cosine 0.99"), std::string::npos) << data[1];
  EXPECT_NE(r.out.find("data: 2 of 2 compared differ"), std::string::npos) << r.out;
}

TEST_F(DiffCli, TextIsStableAndDoesNotNameTheFiles) {
  fs::copy_file(a_, dir_ / "a-copy.gguf");
  fs::copy_file(b_, dir_ / "b-copy.gguf");
  const CommandResult first = run_gguf({"diff", a_, b_, "--data"});
  const CommandResult again = run_gguf({"diff", (dir_ / "a-copy.gguf").string(), (dir_ / "b-copy.gguf").string(),
                                        "--data", "--threads", "1"});
  EXPECT_EQ(first.out, again.out);
  EXPECT_EQ(first.out.find("a.gguf"), std::string::npos);
}

TEST_F(DiffCli, JsonObject) {
  const CommandResult r = run_gguf({"diff", a_, b_, "--json", "--data"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["identical"], false);
  EXPECT_EQ(j["data_compared"], true);
  EXPECT_EQ(j["layout"]["differs"], false);
  EXPECT_EQ(j["layout"]["version"], nlohmann::json::array({3, 3}));
  EXPECT_EQ(j["counts"]["keys"], nlohmann::json::array({6, 6}));
  EXPECT_EQ(j["counts"]["tensors"], nlohmann::json::array({3, 3}));
  EXPECT_EQ(j["counts"]["data_compared"], 2);
  EXPECT_EQ(j["counts"]["data_bytes_equal"], 0);
  ASSERT_EQ(j["metadata"].size(), 6u);
  const auto& added = j["metadata"][0];
  EXPECT_EQ(added["key"], "general.author");
  EXPECT_EQ(added["change"], "added");
  EXPECT_TRUE(added["a"].is_null());
  EXPECT_EQ(added["b"]["type"], "string");
  EXPECT_EQ(added["b"]["value"], "b");
  const auto& retyped = j["metadata"][1];
  EXPECT_EQ(retyped["type_changed"], true);
  EXPECT_EQ(retyped["a"]["type"], "uint32");
  EXPECT_EQ(retyped["b"]["type"], "int32");
  const auto& tmpl = j["metadata"][4];
  EXPECT_EQ(tmpl["a"]["value"], long_template("{% if a %}")) << "JSON values are complete";
  const auto& vocab = j["metadata"][5];
  EXPECT_EQ(vocab["a"]["element_type"], "string");
  EXPECT_EQ(vocab["a"]["length"], 50000);
  EXPECT_EQ(vocab["a"]["truncated"], true);
  EXPECT_EQ(vocab["a"]["head"].size(), 8u);
  EXPECT_FALSE(vocab["a"].contains("value"));
  EXPECT_EQ(vocab["elements"]["differing"], 1);
  EXPECT_EQ(vocab["elements"]["shown"][0]["index"], 31337);
  EXPECT_EQ(vocab["elements"]["shown"][0]["a"], "token_31337");
  EXPECT_EQ(vocab["elements"]["shown"][0]["b"], "changed");

  ASSERT_EQ(j["tensors"].size(), 3u);
  EXPECT_EQ(j["tensors"][0]["name"], "new.weight");
  EXPECT_EQ(j["tensors"][0]["change"], "added");
  EXPECT_EQ(j["tensors"][2]["a"]["type"], "f32");
  EXPECT_EQ(j["tensors"][2]["b"]["type"], "q8_0");
  EXPECT_EQ(j["tensors"][2]["b"]["shape"], nlohmann::json::array({64, 4}));

  ASSERT_EQ(j["data"].size(), 2u);
  const auto& q8 = j["data"][1];
  EXPECT_EQ(q8["name"], "token_embd.weight");
  EXPECT_EQ(q8["type_a"], "f32");
  EXPECT_EQ(q8["type_b"], "q8_0");
  EXPECT_EQ(q8["values"]["elements"], 256);
  EXPECT_GT(q8["values"]["cosine"].get<double>(), 0.99);
  EXPECT_GT(q8["values"]["rmse"].get<double>(), 0.0);
  // The same figures as the library gives.
  auto fa = GgufFile::open(a_);
  auto fb = GgufFile::open(b_);
  ASSERT_TRUE(fa && fb);
  DiffOptions o;
  o.data = true;
  const auto lib = diff_files(*fa, *fb, o);
  ASSERT_TRUE(lib);
  EXPECT_EQ(q8["values"]["rmse"].get<double>(), lib->data[1].values->rmse);
  EXPECT_EQ(q8["values"]["max_abs_diff"].get<double>(), lib->data[1].values->max_abs_diff);
}

TEST_F(DiffCli, JsonWithoutDataHasNullData) {
  const CommandResult r = run_gguf({"diff", a_, a_, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["identical"], true);
  EXPECT_TRUE(j["data"].is_null());
  EXPECT_TRUE(j["metadata"].empty());
  EXPECT_TRUE(j["tensors"].empty());
}

TEST_F(DiffCli, RealignedCopyIsIdenticalWithALayoutLine) {
  GgufBuilder b = model_a();
  ASSERT_TRUE(b.set_alignment(64));
  const auto path = (dir_ / "aligned.gguf").string();
  write(b, path);
  const CommandResult r = run_gguf({"diff", a_, path, "--data"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0], "layout         alignment 32 -> 64");
  EXPECT_TRUE(lines[1].starts_with("summary: identical"));
}

// A split model is read as a whole: against the file it was split from it is identical, and
// against another model it reports the same differences as that file does.
TEST_F(DiffCli, SplitModelComparedAsAWhole) {
  auto input = GgufFile::open(a_);
  ASSERT_TRUE(input) << input.error().describe();
  ggufkit::SplitLimits limits;
  limits.max_tensors = 1;
  const auto plan = plan_split(*input, (dir_ / "split").string(), limits);
  ASSERT_TRUE(plan) << plan.error().describe();
  ASSERT_EQ(plan->shards.size(), 3u);
  SplitWriteOptions wo;
  wo.sync = false;
  ASSERT_TRUE(write_split(*input, *plan, wo));
  const std::string first = plan->shards[0].path;

  CommandResult r = run_gguf({"diff", a_, first, "--data"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0], "layout         shards 1 -> 3");
  EXPECT_NE(lines[1].find("data: 0 of 3 compared differ"), std::string::npos) << lines[1];

  const CommandResult whole = run_gguf({"diff", a_, b_, "--data"});
  r = run_gguf({"diff", first, b_, "--data"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "layout         shards 3 -> 1\n" + whole.out);

  const auto j = nlohmann::json::parse(run_gguf({"diff", first, a_, "--json"}).out);
  EXPECT_EQ(j["identical"], true);
  EXPECT_EQ(j["layout"]["shards"], nlohmann::json::array({3, 1}));
}

TEST_F(DiffCli, UsageAndIoErrorsExitTwo) {
  CommandResult r = run_gguf({"diff", a_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  r = run_gguf({"diff", a_, (dir_ / "missing.gguf").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("missing.gguf"), std::string::npos) << r.err;
  r = run_gguf({"diff", a_, b_, "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  // Not a GGUF file.
  test::write_bytes(dir_ / "junk.gguf", std::vector<std::byte>(64, std::byte{'x'}));
  r = run_gguf({"diff", (dir_ / "junk.gguf").string(), b_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  r = run_gguf({"diff", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--data"), std::string::npos);
}

}  // namespace
}  // namespace ggufkit
