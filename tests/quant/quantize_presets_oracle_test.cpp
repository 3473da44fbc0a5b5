// `gguf quantize IN OUT PRESET` (no --pure) against llama.cpp's llama_model_quantize with the same
// ftype and pure = false: every tensor must get the type llama-quantize chooses, with the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <span>

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

// Compares each preset ggufkit has the kernels for on `model` (written in `dir`).
void expect_presets_match(const fs::path& model, std::span<const char* const> presets, const fs::path& dir) {
  std::string skipped;
  for (const char* preset : presets) {
    if (kernel_missing(preset, skipped)) continue;
    SCOPED_TRACE(std::string(preset) + " on " + model.stem().string());
    EXPECT_EQ(compare_with_llama(model, preset, dir), "");
  }
  if (!skipped.empty()) std::printf("no quantize kernel yet:%s\n", skipped.c_str());
}

void expect_presets_match(const ModelShape& shape, std::initializer_list<const char*> presets) {
  const auto dir = temp_dir("quantize-presets-" + shape.label());
  const fs::path model = write_test_model(dir, shape);
  ASSERT_FALSE(model.empty());
  expect_presets_match(model, std::span(presets.begin(), presets.size()), dir);
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

// Mixtures of experts as gguf convert writes them (F16/BF16, F32 routers): Mixtral (llama, 8
// experts), Qwen2-MoE (4 experts, a shared expert of 2-D ffn_*_shexp tensors and its one-row gate,
// as many kv heads as heads) and Qwen3-MoE (6 experts, attention wider than the embedding, tied
// embeddings). The whole file must be llama_model_quantize's. Every preset without an importance
// matrix agrees on each of them; to keep the suite fast (both sides take 4-6 s for all of them on
// one model) these are the presets whose choices for experts differ from a dense model's:
// MXFP4_MOE, the layer read from expert tensors' names (Q2_K, Q3_K_M, Q4_K_M's ffn_down), and
// with 8 experts llama-quant.cpp's n_expert == 8 rules (attn_k/attn_v Q8_0 in every preset,
// attn_output Q5_K, IQ3_M's ffn_down).
constexpr const char* kEightExpertPresets[] = {"MXFP4_MOE", "Q4_K_M", "Q3_K_M", "Q2_K", "IQ3_M", "Q4_0", "Q6_K"};
constexpr const char* kExpertPresets[] = {"MXFP4_MOE", "Q4_K_M", "Q3_K_M", "Q2_K", "Q8_0", "F16"};

class QuantizeConvertedMoe : public ::testing::TestWithParam<ConvertedMoe> {};

TEST_P(QuantizeConvertedMoe, PresetsAreLlamaQuantizes) {
  std::string why;
  if (!LlamaQuantizeOracle::get(&why)) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << why;
  const ConvertedMoe& m = GetParam();
  const auto dir = temp_dir("quantize-moe-" + m.label());
  const fs::path model = write_converted_moe(dir, m);
  ASSERT_FALSE(model.empty());
  expect_presets_match(model, m.n_expert == 8 ? std::span<const char* const>(kEightExpertPresets) : kExpertPresets, dir);
  fs::remove_all(dir);
}

// What the presets give the expert tensors (and that the comparisons above reach the expert rules).
TEST_P(QuantizeConvertedMoe, PresetsGiveExpertTensorsTheirTypes) {
  const ConvertedMoe& m = GetParam();
  const auto dir = temp_dir("quantize-moe-types-" + m.label());
  const fs::path model = write_converted_moe(dir, m);
  ASSERT_FALSE(model.empty());
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const auto types = [&](const char* preset) {
    QuantizeOptions options;
    options.file_type = *parse_file_type(preset);
    options.pure = false;
    std::map<std::string, TensorType, std::less<>> out;
    const auto plan = plan_quantize(*file, options);
    EXPECT_TRUE(plan) << plan.error().describe();
    if (plan) {
      for (const TensorPlan& p : plan->tensors) out[std::string(p.tensor->name)] = p.target;
    }
    return out;
  };
  const bool eight = m.n_expert == 8, shared = m.family == "qwen2moe";
  const auto mxfp4 = types("MXFP4_MOE");
  const auto q4_k_m = types("Q4_K_M");
  for (const std::string block : {"blk.0.", "blk.1."}) {
    SCOPED_TRACE(block);
    for (const char* kind : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      EXPECT_EQ(mxfp4.at(block + kind + ".weight"), TensorType::MXFP4) << kind;
    }
    EXPECT_EQ(mxfp4.at(block + "attn_q.weight"), TensorType::Q8_0);
    EXPECT_EQ(q4_k_m.at(block + "ffn_gate_inp.weight"), TensorType::F32);
    EXPECT_EQ(q4_k_m.at(block + "ffn_gate_exps.weight"), TensorType::Q4_K);
    // Q4_K_M's ffn_down by block (1 of 2 is in the last eighth), read from the name for experts.
    EXPECT_EQ(q4_k_m.at(block + "ffn_down_exps.weight"), block == "blk.1." ? TensorType::Q6_K : TensorType::Q4_K);
    // 8 experts: attn_k and attn_v Q8_0, attn_output Q5_K.
    EXPECT_EQ(q4_k_m.at(block + "attn_k.weight"), eight ? TensorType::Q8_0 : TensorType::Q4_K);
    EXPECT_EQ(q4_k_m.at(block + "attn_output.weight"), eight ? TensorType::Q5_K : TensorType::Q4_K);
    if (eight) {
      EXPECT_EQ(q4_k_m.at(block + "attn_v.weight"), TensorType::Q8_0);
    }
    if (shared) {
      EXPECT_EQ(mxfp4.at(block + "ffn_down_shexp.weight"), TensorType::Q8_0);
      EXPECT_EQ(mxfp4.at(block + "ffn_gate_inp_shexp.weight"), TensorType::F32);
      EXPECT_EQ(q4_k_m.at(block + "ffn_down_shexp.weight"), block == "blk.1." ? TensorType::Q6_K : TensorType::Q4_K);
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizeConvertedMoe,
                         ::testing::Values(ConvertedMoe{"mixtral", 8, TensorType::F16},
                                           ConvertedMoe{"qwen2moe", 4, TensorType::BF16},
                                           ConvertedMoe{"qwen3moe", 6, TensorType::BF16}),
                         [](const auto& p) { return test_name(p.param.label()); });

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
