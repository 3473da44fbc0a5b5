// ggufkit's estimate against libllama itself (the oracle, no_alloc): a sample of the grid of
// estimate_grid_test on freshly written sparse files, flash attention "auto", and the real files of
// the tiny-llama corpus (every quantization mix): model, context and output bytes identical.
#include "memory_oracle.h"
#include "model_fixtures.h"
#include "test_support.h"

#include <ggufkit/estimate.h>

#include <gtest/gtest.h>

namespace {

using ggufkit::test::MemoryOracle;
using ggufkit::test::OracleContext;

const MemoryOracle* oracle_or_skip() {
  std::string why;
  const MemoryOracle* o = MemoryOracle::get(&why);
  if (o == nullptr) ADD_FAILURE() << why;
  return o;
}

ggufkit::TensorType type_of(int ggml_type) { return static_cast<ggufkit::TensorType>(ggml_type); }

ggufkit::EstimateOptions options_of(const OracleContext& c) {
  ggufkit::EstimateOptions o;
  o.ctx_size = c.n_ctx;
  o.batch_size = c.n_batch;
  o.ubatch_size = c.n_ubatch;
  o.parallel = c.n_seq;
  o.kv_unified = c.kv_unified;
  o.swa_full = c.swa_full;
  o.cache_type_k = type_of(c.type_k);
  o.cache_type_v = type_of(c.type_v);
  o.flash_attn = static_cast<ggufkit::FlashAttention>(c.flash_attn);
  return o;
}

void expect_same(const std::string& path, const std::vector<OracleContext>& contexts) {
  const MemoryOracle* oracle = oracle_or_skip();
  if (oracle == nullptr) return;
  std::vector<std::string> errors;
  const auto results = oracle->measure(path, contexts, &errors);
  ASSERT_EQ(results.size(), contexts.size()) << (errors.empty() ? "" : errors[0]);
  for (size_t i = 0; i < contexts.size(); ++i) {
    const OracleContext& c = contexts[i];
    SCOPED_TRACE(fmt::format("{} ctx {} seq {} unified {} swa_full {} type {} fa {}", path, c.n_ctx, c.n_seq,
                             c.kv_unified, c.swa_full, c.type_k, c.flash_attn));
    ASSERT_TRUE(results[i]) << errors[i];
    const auto e = ggufkit::estimate_memory(path, options_of(c));
    ASSERT_TRUE(e) << e.error().describe();
    EXPECT_EQ(e->model_bytes, results[i]->model);
    EXPECT_EQ(e->context_bytes, results[i]->context);
    EXPECT_EQ(ggufkit::test::mib_2(e->output_bytes), results[i]->output_mib);
  }
}

// 4k and 32k x 1 and 4 sequences x f16 and q8_0 x full SWA or not x flash attention on and off.
std::vector<OracleContext> sample() {
  std::vector<OracleContext> out;
  for (uint32_t n_ctx : {4096u, 32768u}) {
    for (uint32_t n_seq : {1u, 4u}) {
      for (int type : {1, 8}) {
        for (bool swa_full : {false, true}) {
          for (int fa : {1, 0}) {
            if (type != 1 && fa == 0) continue;  // a quantized V cache needs flash attention
            OracleContext c;
            c.n_ctx = n_ctx;
            c.n_seq = n_seq;
            c.kv_unified = n_seq == 4 && type == 8;
            c.type_k = c.type_v = type;
            c.swa_full = swa_full;
            c.flash_attn = fa;
            out.push_back(c);
          }
        }
      }
    }
  }
  return out;
}

class EstimateOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(EstimateOracle, SampleOfTheGridMatchesLlamaCpp) {
  const auto dir = ggufkit::test::temp_dir("estimate-oracle-" + GetParam());
  const auto path = dir / "model.gguf";
  ggufkit::test::write_sparse_model(ggufkit::test::grid_model(GetParam()), path);
  expect_same(path.string(), sample());
}

INSTANTIATE_TEST_SUITE_P(Models, EstimateOracle,
                         ::testing::Values("Llama-3.1-8B", "Qwen3-30B-A3B", "Gemma-3-27B", "gpt-oss-20b", "bge-small-en-v1.5", "Mamba2-2.7B", "Qwen3.5-hybrid", "EXAONE-4.0-32B",
                                           "DeepSeek-V2-Lite", "Command-R7B"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// Flash attention "auto" (llama.cpp's default): on for the CPU, a V cache not transposed.
TEST(EstimateOracleAuto, AutoFlashAttentionIsOn) {
  const auto dir = ggufkit::test::temp_dir("estimate-oracle-auto");
  const auto path = dir / "model.gguf";
  ggufkit::test::write_sparse_model(ggufkit::test::grid_model("Gemma-3-27B"), path);
  OracleContext c;
  c.flash_attn = -1;
  c.n_ctx = 8192;
  expect_same(path.string(), {c});
}

// Real files with real tensor data, every quantization mix of the corpus (the model buffer of
// every tensor type), at llama.cpp's default context.
TEST(EstimateOracleCorpus, TinyLlamaMixesMatchLlamaCpp) {
  const auto shared = ggufkit::test::shared_dir();
  if (!shared) GTEST_SKIP() << ggufkit::test::no_shared_message();
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(*shared / "corpus" / "tiny-llama")) {
    if (entry.path().extension() != ".gguf") continue;
    OracleContext c;
    c.n_ctx = 512;
    c.flash_attn = -1;
    expect_same(entry.path().string(), {c});
    ++files;
  }
  EXPECT_GE(files, 20u);
}

}  // namespace

namespace {

// --max-ctx: the largest context whose total fits, against a binary search over libllama's own
// totals (model + context + output + compute), to 256 cells.
TEST(EstimateOracleMaxContext, AgreesWithABinarySearchOverLlamaCpp) {
  const MemoryOracle* oracle = oracle_or_skip();
  if (oracle == nullptr) return;
  const auto dir = ggufkit::test::temp_dir("estimate-oracle-max");
  for (const auto& [name, budget] : {std::pair{std::string("Llama-3.1-8B"), 12ull << 30},
                                     std::pair{std::string("Gemma-3-27B"), 24ull << 30}}) {
    SCOPED_TRACE(name);
    const auto path = dir / (name + ".gguf");
    ggufkit::test::write_sparse_model(ggufkit::test::grid_model(name), path);
    // libllama's totals at several contexts in one model load.
    const auto totals_at = [&](const std::vector<uint32_t>& steps) {
      std::vector<OracleContext> contexts;
      for (uint32_t s : steps) {
        OracleContext c;
        c.n_ctx = s * 256;
        contexts.push_back(c);
      }
      std::vector<std::string> errors;
      const auto r = oracle->measure(path.string(), contexts, &errors);
      std::vector<uint64_t> totals;
      for (size_t i = 0; i < r.size(); ++i) {
        EXPECT_TRUE(r[i]) << errors[i];
        const auto output = static_cast<uint64_t>(std::stod(r[i]->output_mib) * 1024 * 1024);
        totals.push_back(r[i]->model + r[i]->context + r[i]->compute + output);
      }
      return totals;
    };
    // The search in two passes of one load each: every 16th step, then the 16 steps of the bracket.
    std::vector<uint32_t> coarse;
    for (uint32_t s = 1; s <= 512; s += 16) coarse.push_back(s);
    const auto coarse_totals = totals_at(coarse);
    ASSERT_EQ(coarse_totals.size(), coarse.size());
    ASSERT_LE(coarse_totals[0], budget);
    ASSERT_GT(coarse_totals.back(), budget);
    size_t i = 0;
    while (coarse_totals[i + 1] <= budget) ++i;
    std::vector<uint32_t> fine;
    for (uint32_t s = coarse[i]; s < coarse[i + 1]; ++s) fine.push_back(s);
    const auto fine_totals = totals_at(fine);
    uint32_t lo = coarse[i];
    for (size_t k = 0; k < fine.size(); ++k) {
      if (fine_totals[k] <= budget) lo = fine[k];
    }
    auto model = ggufkit::SplitModel::open(path);
    ASSERT_TRUE(model);
    const auto ours = ggufkit::estimate_max_context(*model, {}, budget);
    ASSERT_TRUE(ours && *ours);
    EXPECT_NEAR(static_cast<double>((*ours)->n_ctx), lo * 256.0, 256.0);
  }
}

}  // namespace
