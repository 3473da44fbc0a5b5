// gguf convert against llama.cpp's own converter: a tiny random checkpoint of every family is
// converted by `gguf convert` and by llama.cpp's convert_hf_to_gguf.py (run by
// reference_convert.py on Debian's python3-torch, from the oracle's llama.cpp source), and the two
// files must be the same bytes: every key (name, type, value, order), every tensor (name, order,
// type, shape, data) and the padding. Each variant takes another checkpoint dtype and output type,
// so together they cover F32/F16/BF16 sources and f32/f16/bf16/q8_0 outputs. Checkpoints whose
// tokenizer is a BPE tokenizer.json convert without a vocabulary on both sides (the reference would
// need transformers' AutoTokenizer); SentencePiece ones with it.
#include <gtest/gtest.h>

#include <ostream>

#include "family_checkpoint.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

struct Variant {
  const char* name;
  bool llama;          // the tiny llama of tiny_checkpoint.h, else `family`
  TinyFamily family;
  CheckpointDtype dtype;
  const char* outtype;
  bool vocabulary;     // convert the tokenizer too (tokenizer.model: the reference can)
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

constexpr Variant kVariants[] = {
    {"llama_bf16_to_f16", true, TinyFamily::gemma, CheckpointDtype::BF16, "f16", false},
    {"gemma_f32_to_f32", false, TinyFamily::gemma, CheckpointDtype::F32, "f32", true},
    {"gemma2_bf16_to_bf16", false, TinyFamily::gemma2, CheckpointDtype::BF16, "bf16", true},
    {"gemma3_f16_to_f16", false, TinyFamily::gemma3, CheckpointDtype::F16, "f16", true},
    {"gemma3_vision_bf16_to_q8_0", false, TinyFamily::gemma3_vision, CheckpointDtype::BF16, "q8_0", true},
    {"phi3_f32_to_q8_0", false, TinyFamily::phi3, CheckpointDtype::F32, "q8_0", true},
    {"phi3_longrope_bf16_to_f16", false, TinyFamily::phi3_longrope, CheckpointDtype::BF16, "f16", true},
    {"phi4_mini_f16_to_bf16", false, TinyFamily::phi4_mini, CheckpointDtype::F16, "bf16", false},
    {"granite_bf16_to_q8_0", false, TinyFamily::granite, CheckpointDtype::BF16, "q8_0", false},
    {"olmo2_f32_to_f16", false, TinyFamily::olmo2, CheckpointDtype::F32, "f16", false},
    {"smollm3_f16_to_f32", false, TinyFamily::smollm3, CheckpointDtype::F16, "f32", false},
    {"mixtral_f16_to_q8_0", false, TinyFamily::mixtral, CheckpointDtype::F16, "q8_0", true},
    {"qwen2moe_bf16_to_bf16", false, TinyFamily::qwen2moe, CheckpointDtype::BF16, "bf16", false},
    {"qwen3moe_f32_to_f16", false, TinyFamily::qwen3moe, CheckpointDtype::F32, "f16", false},
    {"qwen3moe_fused_bf16_to_f16", false, TinyFamily::qwen3moe_fused, CheckpointDtype::BF16, "f16", false},
    {"mistral3_vision_f16_to_bf16", false, TinyFamily::mistral3_vision, CheckpointDtype::F16, "bf16", true},
    {"ministral3_bf16_to_f16", false, TinyFamily::ministral3, CheckpointDtype::BF16, "f16", true},
};

class SameBytesAsLlamaCppConverter : public testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { dir_ = temp_dir("reference-convert"); }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_P(SameBytesAsLlamaCppConverter, EveryKeyAndTensor) {
  const Variant& v = GetParam();
  const fs::path llama_cpp = fs::path(GGUFKIT_SOURCE_DIR) / ".oracle" / "llama.cpp";
  if (!fs::exists(llama_cpp / "convert_hf_to_gguf.py")) {
    GTEST_SKIP() << "skipped: llama.cpp's converter is not checked out in " << llama_cpp.string() << " (scripts/install-oracle.sh)";
  }
  const fs::path checkpoint = dir_ / "checkpoint";
  if (v.llama) {
    TinyLlamaConfig config;
    config.dtype = v.dtype;
    config.seed = 21;
    ASSERT_EQ(write_checkpoint(make_tiny_llama(config), checkpoint), "");
  } else {
    const TinyHfModel model = make_tiny_family(v.family, 21, v.dtype);
    if (const std::string missing = model.tokenizer_missing(); !missing.empty()) GTEST_SKIP() << "skipped: " << missing;
    ASSERT_EQ(write_hf_checkpoint(model, checkpoint), "");
  }

  const fs::path reference = dir_ / "reference.gguf";
  std::string command = "python3 " + shell_quoted((fs::path(GGUFKIT_SOURCE_DIR) / "tests/convert/reference_convert.py").string()) +
                        " " + shell_quoted(llama_cpp.string()) + " " + shell_quoted(checkpoint.string()) + " " +
                        shell_quoted(reference.string()) + " --outtype " + v.outtype + (v.vocabulary ? "" : " --no-vocab");
  const NodeRun ran = run_shell(command + " 2>&1");
  if (ran.status == 3) GTEST_SKIP() << "skipped: " << ran.out;
  ASSERT_EQ(ran.status, 0) << "llama.cpp's converter failed: " << ran.out;

  const fs::path ours = dir_ / "ggufkit.gguf";
  std::vector<std::string> args{"convert", checkpoint.string(), ours.string(), "--outtype", v.outtype, "--quiet"};
  if (!v.vocabulary) args.push_back("--no-tokenizer");
  const CommandResult converted = run_gguf(args);
  ASSERT_EQ(converted.exit_code, 0) << converted.out << converted.err;
  EXPECT_EQ(converted.out, ours.string() + "\n");  // the file written, nothing else
  EXPECT_EQ(converted.err, "");

  if (read_bytes(ours) != read_bytes(reference)) {
    const CommandResult diff = run_gguf({"diff", reference.string(), ours.string(), "--data"});
    ADD_FAILURE() << v.name << ": gguf convert's file differs from llama.cpp's converter's (reference first):\n"
                  << diff.out << diff.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SameBytesAsLlamaCppConverter, testing::ValuesIn(kVariants),
                         [](const testing::TestParamInfo<Variant>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace ggufkit::test
