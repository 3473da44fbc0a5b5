// gguf quantize: the plan, the refusals, and what is left on disk when it stops early.
#include <gtest/gtest.h>

#include <atomic>

#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(CliQuantize, PureQ8_0ConvertsTheWeightsAndKeepsTheRest) {
  const auto dir = temp_dir("quantize-q8");
  const fs::path out = dir / "q8.gguf";
  const CommandResult r = run_gguf({"quantize", sample_model().string(), out.string(), "Q8_0", "--pure"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out.string() + "\n");
  EXPECT_NE(r.err.find("100.0%"), std::string::npos) << "progress on stderr";
  auto q = GgufFile::open(out);
  ASSERT_TRUE(q) << q.error().describe();
  for (const TensorInfo& t : q->tensors()) {
    const bool weight_matrix = t.n_dims == 2;  // the sample's 2-D tensors are all weights
    EXPECT_EQ(t.type, weight_matrix ? TensorType::Q8_0 : TensorType::F32) << t.name;
  }
  EXPECT_EQ(q->get("general.file_type")->get<uint32_t>(), 7u);  // MOSTLY_Q8_0
  EXPECT_EQ(q->get("general.quantization_version")->get<uint32_t>(), 2u);
  EXPECT_EQ(q->metadata().back().key, "general.file_type");
  fs::remove_all(dir);
}

TEST(CliQuantize, DryRunPrintsThePlanAndWritesNothing) {
  const auto dir = temp_dir("quantize-dry");
  const CommandResult r =
      run_gguf({"quantize", sample_model().string(), (dir / "x.gguf").string(), "q4_K", "--pure", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The sample's rows are 64 wide: q4_K (256 per block) falls back to q5_0, as llama.cpp does.
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(r.out.find("q5_0"), std::string::npos);
  EXPECT_NE(r.out.find("tensor data:"), std::string::npos);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(CliQuantize, Refusals) {
  const auto dir = temp_dir("quantize-refuse");
  const std::string in = sample_model().string(), out = (dir / "o.gguf").string();
  EXPECT_EQ(run_gguf({"quantize", in, out, "q9_9", "--pure"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"quantize", in, in, "q8_0", "--pure"}).exit_code, 2) << "never overwrites its input";
  EXPECT_EQ(run_gguf({"quantize", (dir / "missing.gguf").string(), out, "q8_0", "--pure"}).exit_code, 2);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

// Cancelled (what Ctrl-C does): no output and no temporary file.
TEST(CliQuantize, CancelLeavesNothingBehind) {
  const auto dir = temp_dir("quantize-cancel");
  auto in = GgufFile::open(sample_model());
  ASSERT_TRUE(in);
  std::atomic<bool> cancel{true};
  QuantizeOptions options;
  options.file_type = 7;
  options.cancel = &cancel;
  const auto r = quantize_model(*in, dir / "out.gguf", options);
  EXPECT_FALSE(r);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(CliQuantize, ThreadCountDoesNotChangeTheBytes) {
  const auto dir = temp_dir("quantize-threads");
  ASSERT_EQ(run_gguf({"quantize", sample_model().string(), (dir / "a.gguf").string(), "q4_0", "--pure", "--threads", "1"}).exit_code, 0);
  ASSERT_EQ(run_gguf({"quantize", sample_model().string(), (dir / "b.gguf").string(), "q4_0", "--pure", "--threads", "3"}).exit_code, 0);
  EXPECT_TRUE(read_bytes(dir / "a.gguf") == read_bytes(dir / "b.gguf"));
  fs::remove_all(dir);
}

}  // namespace
