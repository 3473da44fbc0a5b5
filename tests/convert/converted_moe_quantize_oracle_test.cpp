// gguf quantize on mixtures of experts gguf convert wrote (issue 18): a tiny Mixtral (8 experts:
// llama-quant.cpp's n_expert == 8 rules) and a tiny Qwen2-MoE (a shared expert and its one-row
// gate) are converted to F16, then quantized by `gguf quantize` and by llama.cpp's own
// llama_model_quantize (the oracle's libllama) for MXFP4_MOE, Q4_K_M and Q8_0: the files must be the
// same bytes; and `gguf convert --outtype PRESET --intermediate f16`, the one pass, must give them
// too. (tests/quant's QuantizeConvertedMoe sweeps more presets on 256-wide models laid out as
// the converter writes them; this one takes the converter's own output.)
#include <gtest/gtest.h>

#include <ostream>

#include "family_checkpoint.h"
#include "ggufkit/conventions.h"
#include "llama_quantize_oracle.h"
#include "test_support.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

class ConvertedMoeQuantize : public testing::TestWithParam<TinyFamily> {
 protected:
  void SetUp() override { dir_ = temp_dir("converted-moe-quantize"); }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_P(ConvertedMoeQuantize, SameBytesAsLlamaQuantize) {
  std::string why;
  const LlamaQuantizeOracle* oracle = LlamaQuantizeOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << why;
  const TinyHfModel model = make_tiny_family(GetParam(), 31, CheckpointDtype::BF16);
  if (const std::string missing = model.tokenizer_missing(); !missing.empty()) GTEST_SKIP() << "skipped: " << missing;
  const fs::path checkpoint = dir_ / "checkpoint";
  ASSERT_EQ(write_hf_checkpoint(model, checkpoint), "");
  const fs::path converted = dir_ / "converted-f16.gguf";
  const CommandResult convert = run_gguf({"convert", checkpoint.string(), converted.string(), "--outtype", "f16", "--quiet"});
  ASSERT_EQ(convert.exit_code, 0) << convert.out << convert.err;
  EXPECT_EQ(convert.out, converted.string() + "\n");
  EXPECT_EQ(convert.err, "");

  for (const char* preset : {"MXFP4_MOE", "Q4_K_M", "Q8_0"}) {
    SCOPED_TRACE(family_label(GetParam()) + " quantized to " + preset);
    const fs::path ours = dir_ / (std::string("ggufkit-") + preset + ".gguf");
    const fs::path theirs = dir_ / (std::string("llama-") + preset + ".gguf");
    const CommandResult quantized = run_gguf({"quantize", converted.string(), ours.string(), preset, "--quiet"});
    ASSERT_EQ(quantized.exit_code, 0) << quantized.out << quantized.err;
    EXPECT_EQ(quantized.out, ours.string() + "\n");
    EXPECT_EQ(quantized.err, "");
    ASSERT_TRUE(oracle->quantize(converted.string(), theirs.string(), *parse_file_type(preset), false, 2));
    EXPECT_EQ(first_difference(ours.string(), theirs.string()), "");
    EXPECT_TRUE(read_bytes(ours) == read_bytes(theirs)) << "the files differ outside the tensors";
    // The one pass (issue 32) from the same checkpoint, through the same f16 intermediate.
    const fs::path direct = dir_ / (std::string("one-pass-") + preset + ".gguf");
    const CommandResult one_pass = run_gguf({"convert", checkpoint.string(), direct.string(), "--outtype", preset,
                                             "--intermediate", "f16", "--quiet"});
    ASSERT_EQ(one_pass.exit_code, 0) << one_pass.out << one_pass.err;
    EXPECT_EQ(one_pass.out, direct.string() + "\n");
    EXPECT_EQ(one_pass.err, "");
    EXPECT_TRUE(read_bytes(direct) == read_bytes(theirs)) << "gguf convert --outtype " << preset << " is not llama_model_quantize's file";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ConvertedMoeQuantize, testing::Values(TinyFamily::mixtral, TinyFamily::qwen2moe),
                         [](const testing::TestParamInfo<TinyFamily>& param) { return family_id(param.param); });

}  // namespace
}  // namespace ggufkit::test
