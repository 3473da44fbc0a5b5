// `gguf quantize IN OUT PRESET` (no --pure) against llama.cpp's llama_model_quantize with the same
// ftype and pure = false: every tensor must get the type llama-quantize chooses, with the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "ggufkit/conventions.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/writer.h"
#include "llama_quantize_oracle.h"
#include "test_models.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

// The presets that need no importance matrix.
constexpr const char* kPresets[] = {"Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",   "Q8_0",   "Q2_K",   "Q2_K_S",
                                    "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
                                    "Q6_K",   "IQ4_NL", "IQ4_XS", "IQ3_S",  "IQ3_M",  "TQ1_0",  "TQ2_0",
                                    "MXFP4_MOE", "Q1_0", "Q2_0",  "BF16",   "F16",    "F32"};

// Quantizes `source` with the preset both ways. Returns what differs (empty: the same file).
// A preset llama.cpp refuses (Q2_K_S wants an importance matrix for its Q2_K tensors) must be
// refused by us too.
std::string compare_with_llama(const fs::path& source, const std::string& preset, const fs::path& dir) {
  std::string why;
  const LlamaQuantizeOracle* oracle = LlamaQuantizeOracle::get(&why);
  if (!oracle) return why;
  const auto file_type = parse_file_type(preset);
  if (!file_type) return "no file type " + preset;
  const fs::path ours = dir / (preset + "-ours.gguf"), theirs = dir / (preset + "-llama.gguf");
  const CommandResult r = run_gguf({"quantize", source.string(), ours.string(), preset, "--threads", "2"});
  const bool llama_ok = oracle->quantize(source.string(), theirs.string(), *file_type, false, 2);
  if ((r.exit_code == 0) != llama_ok) {
    return llama_ok ? "we refused what llama.cpp wrote: " + r.err : "llama.cpp refused what we wrote";
  }
  if (!llama_ok) {
    // Both refused: right for Q2_K_S (its Q2_K tensors need an importance matrix), else suspect.
    return preset == "Q2_K_S" && r.err.find("importance matrix") != std::string::npos ? "" : "both refused: " + r.err;
  }
  std::string difference = first_difference(ours, theirs);
  if (difference.empty() && read_bytes(ours) != read_bytes(theirs)) difference = "the headers differ";
  fs::remove(ours);
  fs::remove(theirs);
  return difference;
}

bool kernel_missing(const std::string& preset, std::string& skipped) {
  const auto file_type = parse_file_type(preset);
  const auto type = file_type ? file_type_default_type(*file_type) : std::nullopt;
  if (type && !quant_capabilities(*type).quantize) {
    skipped += " " + preset;
    return true;
  }
  return false;
}

TEST(QuantizePresetsOracle, EveryPresetOnTinyLlamaIsLlamaQuantizes) {
  GGUFKIT_REQUIRE_SHARED();
  std::string why;
  if (!LlamaQuantizeOracle::get(&why)) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << why;
  const fs::path corpus = *shared_dir() / "corpus/tiny-llama";
  const auto dir = temp_dir("quantize-presets");
  std::string skipped;
  for (const char* source : {"tiny-llama-f32.gguf", "tiny-llama-f16.gguf"}) {
    for (const char* preset : kPresets) {
      if (kernel_missing(preset, skipped)) continue;
      SCOPED_TRACE(std::string(preset) + " from " + source);
      EXPECT_EQ(compare_with_llama(corpus / source, preset, dir), "");
    }
  }
  if (!skipped.empty()) std::printf("no quantize kernel yet:%s\n", skipped.c_str());
  fs::remove_all(dir);
}

// Without the oracle library: the corpus's mixes were written by llama_model_quantize from
// tiny-llama-f16.gguf (../shared/README.md), so quantizing that file with each preset must give
// those files again, byte for byte.
TEST(QuantizePresetsOracle, CorpusMixesAreReproducedFromTheF16Original) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path corpus = *shared_dir() / "corpus/tiny-llama";
  const auto dir = temp_dir("quantize-presets-corpus");
  std::string skipped;
  size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    const std::string stem = entry.path().stem().string();
    const std::string preset = stem.substr(std::string("tiny-llama-").size());
    if (preset == "f16" || kernel_missing(preset, skipped)) continue;
    SCOPED_TRACE(preset);
    const fs::path ours = dir / (preset + ".gguf");
    const CommandResult r = run_gguf({"quantize", (corpus / "tiny-llama-f16.gguf").string(), ours.string(), preset});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string difference = first_difference(ours, entry.path());
    EXPECT_EQ(difference, "");
    if (difference.empty()) {
      EXPECT_TRUE(read_bytes(ours) == read_bytes(entry.path())) << "the headers differ";
    }
    fs::remove(ours);
    ++compared;
  }
  EXPECT_EQ(compared + static_cast<size_t>(std::ranges::count(skipped, ' ')), 25u);  // the mixes besides f16
  if (!skipped.empty()) std::printf("no quantize kernel yet:%s\n", skipped.c_str());
  fs::remove_all(dir);
}

// A split model quantizes with a preset to the file the whole model gives: the layer counts and
// the model's facts come from all shards.
TEST(QuantizePresetsOracle, SplitInputGivesTheCorpusMix) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path corpus = *shared_dir() / "corpus/tiny-llama";
  const auto dir = temp_dir("quantize-presets-split");
  auto whole = GgufFile::open(corpus / "tiny-llama-f16.gguf");
  ASSERT_TRUE(whole);
  auto plan = plan_split(*whole, (dir / "shard").string(), SplitLimits{0, 7});
  ASSERT_TRUE(plan) << plan.error().describe();
  ASSERT_GT(plan->shards.size(), 2u);
  ASSERT_TRUE(write_split(*whole, *plan));
  for (const char* preset : {"q4_k_m", "q3_k_m"}) {
    SCOPED_TRACE(preset);
    const fs::path ours = dir / "ours.gguf";
    const CommandResult r = run_gguf({"quantize", plan->shards.front().path, ours.string(), preset, "--force"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path expected = corpus / (std::string("tiny-llama-") + preset + ".gguf");
    EXPECT_EQ(first_difference(ours, expected), "");
    EXPECT_TRUE(read_bytes(ours) == read_bytes(expected));
  }
  fs::remove_all(dir);
}

void expect_presets_match(const ModelShape& shape, std::initializer_list<const char*> presets) {
  const auto dir = temp_dir("quantize-presets-" + shape.label());
  const fs::path model = write_test_model(dir, shape);
  ASSERT_FALSE(model.empty());
  std::string skipped;
  for (const char* preset : presets) {
    if (kernel_missing(preset, skipped)) continue;
    SCOPED_TRACE(std::string(preset) + " on " + shape.label());
    EXPECT_EQ(compare_with_llama(model, preset, dir), "");
  }
  if (!skipped.empty()) std::printf("no quantize kernel yet:%s\n", skipped.c_str());
  fs::remove_all(dir);
}

// Experts: 4 (with n_gqa 4), and 8 (Mixtral's own rules) with an output.weight of its own.
TEST(QuantizePresetsOracle, GroupedQueryExpertModelIsLlamaQuantizes) {
  GGUFKIT_REQUIRE_SHARED();
  std::string why;
  if (!LlamaQuantizeOracle::get(&why)) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << why;
  expect_presets_match({"llama", 8, 4, false}, {"Q4_K_M", "Q3_K_M", "Q2_K", "IQ3_M", "MXFP4_MOE", "Q5_K_S", "Q4_K_S",
                                               "IQ4_XS", "Q3_K_L", "Q5_K_M", "IQ3_S"});
  expect_presets_match({"llama", 8, 8, true}, {"Q4_K_M", "Q3_K_M", "Q2_K", "IQ3_M", "MXFP4_MOE", "Q5_K_S", "Q3_K_L",
                                              "IQ4_NL", "TQ1_0", "Q4_0"});
}

// 16 layers (the n/16 rules), a separate output.weight, and falcon's own rules and fused attn_qkv.
TEST(QuantizePresetsOracle, DenseAndFalconModelsAreLlamaQuantizes) {
  GGUFKIT_REQUIRE_SHARED();
  std::string why;
  if (!LlamaQuantizeOracle::get(&why)) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << why;
  const auto all = {"Q4_0", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                    "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M", "TQ2_0", "Q2_0", "MXFP4_MOE"};
  expect_presets_match({"llama", 16, 0, true}, all);
  expect_presets_match({"falcon", 16, 0, true}, all);
}

// --dry-run shows the preset's choice per tensor: Q4_K_M gives some attn_v and ffn_down Q6_K.
TEST(QuantizePresetsOracle, DryRunShowsEachTensorsPresetType) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path source = *shared_dir() / "corpus/tiny-llama/tiny-llama-f16.gguf";
  const auto dir = temp_dir("quantize-presets-dry");
  const CommandResult r = run_gguf({"quantize", source.string(), (dir / "x.gguf").string(), "q4_k_m", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto file = GgufFile::open(source);
  ASSERT_TRUE(file);
  QuantizeOptions options;
  options.file_type = *parse_file_type("Q4_K_M");
  options.pure = false;
  const auto planned = plan_quantize(*file, options);
  ASSERT_TRUE(planned) << planned.error().describe();
  bool some_q6_k = false;
  for (const TensorPlan& p : planned->tensors) {
    // Each tensor's line names its type.
    const auto line = r.out.find(std::string(p.tensor->name) + " ");
    ASSERT_NE(line, std::string::npos) << p.tensor->name;
    const auto end = r.out.find('\n', line);
    EXPECT_NE(r.out.substr(line, end - line).find(std::string(" -> ") + std::string(type_name(p.target))),
              std::string::npos)
        << r.out.substr(line, end - line);
    some_q6_k = some_q6_k || p.target == TensorType::Q6_K;
  }
  EXPECT_TRUE(some_q6_k) << "Q4_K_M's output and some attn_v/ffn_down are Q6_K";
  EXPECT_TRUE(fs::is_empty(dir)) << "a dry run writes nothing";
  fs::remove_all(dir);
}

}  // namespace
