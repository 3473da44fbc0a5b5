// ggufkit's estimate against llama.cpp's own figures for the whole grid
// (tests/estimate/data/oracle_grid.json, scripts/gen-estimate-grid.sh): model, context and output
// bytes identical on every row; the compute buffer within the tolerance the estimate promises.
#include "memory_oracle.h"
#include "model_fixtures.h"
#include "test_support.h"

#include <ggufkit/estimate.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>

namespace {

using ggufkit::test::ModelShape;

// The sparse files of the grid's models, written and opened once for the whole test program.
const ggufkit::SplitModel& fixture(const std::string& name) {
  static std::map<std::string, ggufkit::SplitModel> models;
  static const std::filesystem::path dir = ggufkit::test::temp_dir("estimate-grid");
  auto it = models.find(name);
  if (it == models.end()) {
    const auto path = dir / (name + ".gguf");
    ggufkit::test::write_sparse_model(ggufkit::test::grid_model(name), path);
    auto model = ggufkit::SplitModel::open(path);
    if (!model) throw std::runtime_error(model.error().describe());
    it = models.emplace(name, std::move(*model)).first;
  }
  return it->second;
}

ggufkit::TensorType cache_type(const std::string& name) { return *ggufkit::parse_tensor_type(name); }

ggufkit::EstimateOptions options_of(const nlohmann::json& row) {
  ggufkit::EstimateOptions o;
  o.ctx_size = row["ctx_size"];
  o.batch_size = row["batch_size"];
  o.ubatch_size = row["ubatch_size"];
  o.parallel = row["parallel"];
  o.kv_unified = row["kv_unified"];
  o.swa_full = row["swa_full"];
  o.cache_type_k = cache_type(row["cache_type_k"]);
  o.cache_type_v = cache_type(row["cache_type_v"]);
  o.flash_attn = row["flash_attn"] == "on" ? ggufkit::FlashAttention::on : ggufkit::FlashAttention::off;
  return o;
}

nlohmann::json grid() {
  std::ifstream in(std::string(GGUFKIT_SOURCE_DIR) + "/tests/estimate/data/oracle_grid.json");
  return nlohmann::json::parse(in);
}

TEST(EstimateGrid, ModelContextAndOutputBytesEqualLlamaCppOnEveryRow) {
  const auto rows = grid();
  ASSERT_GE(rows.size(), 1000u);
  size_t checked = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.dump());
    const auto e = ggufkit::estimate_memory(fixture(row["model"]), options_of(row));
    ASSERT_TRUE(e) << e.error().describe();
    EXPECT_EQ(e->model_bytes, row["model_bytes"].get<uint64_t>());
    EXPECT_EQ(e->context_bytes, row["context_bytes"].get<uint64_t>());
    EXPECT_EQ(ggufkit::test::mib_2(e->output_bytes), row["output_mib"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, rows.size());
}

// The compute buffer is estimated. The aim (issue 30) is 5% of llama.cpp's with flash attention on
// and 15% off; the models the estimate does not reach it for yet have their current bound here, so
// that a regression fails and an improvement shows: MLA's attention (DeepSeek-V2-Lite), Gemma 3 with
// a full-size SWA cache at 128k, Phi-3's fused feed-forward at 4k, gpt-oss's sinks, Granite at
// 32k with 1024-token ubatches, the encoders' feed-forward (bge, nomic-embed), qwen35's
// mask that outlives the last layer at 128k with flash attention, LFM2's short convolutions, and
// GLM-4.5-Air, qwen35moe, Llama 4 Scout, ERNIE 4.5 and Hunyuan-A13B (tied embeddings with a large vocabulary: llama.cpp's peak is about ten
// rows of n_embd above the logits, not yet explained).
TEST(EstimateGrid, ComputeBytesWithinTolerance) {
  const std::map<std::string, std::pair<double, double>> exceptions = {
      {"DeepSeek-V2-Lite", {0.14, 0.15}},
      {"Gemma-3-27B", {0.21, 0.15}},
      {"Phi-3-mini-4k", {0.17, 0.15}},
      {"gpt-oss-20b", {0.08, 0.15}},
      {"Granite-3.3-8B", {0.07, 0.15}},
      {"bge-small-en-v1.5", {0.14, 0.15}},
      {"nomic-embed-text-v1.5", {0.14, 0.15}},
      {"Qwen3.5-hybrid", {0.30, 0.15}},
      {"LFM2-1.2B", {0.06, 0.15}},
      {"ERNIE-4.5-0.3B", {0.06, 0.15}},
      {"ERNIE-4.5-21B-A3B", {0.18, 0.18}},
      {"Hunyuan-A13B", {0.25, 0.25}},
      {"GLM-4.5-Air", {0.07, 0.15}},
      {"Qwen3.5-MoE-hybrid", {0.11, 0.15}},
      {"Llama-4-Scout", {0.09, 0.15}},
  };
  const auto rows = grid();
  std::map<std::string, std::pair<double, double>> worst;
  std::map<std::string, std::pair<std::string, std::string>> worst_row;
  for (const auto& row : rows) {
    const auto e = ggufkit::estimate_memory(fixture(row["model"]), options_of(row));
    ASSERT_TRUE(e) << e.error().describe();
    const double want = row["compute_bytes"].get<double>();
    const double error = std::abs(static_cast<double>(e->compute_bytes) - want) / want;
    const bool on = row["flash_attn"] == "on";
    const std::string model = row["model"];
    double& w = on ? worst[model].first : worst[model].second;
    if (error > w) {
      w = error;
      (on ? worst_row[model].first : worst_row[model].second) =
          row.dump() + " estimate " + std::to_string(e->compute_bytes);
    }
  }
  EXPECT_EQ(worst.size(), ggufkit::test::grid_models().size());
  for (const auto& [model, w] : worst) {
    const auto it = exceptions.find(model);
    const auto bound = it == exceptions.end() ? std::pair{0.05, 0.15} : it->second;
    std::printf("  %-18s compute within %5.1f%% (flash attention on), %5.1f%% (off)\n", model.c_str(),
                100 * w.first, 100 * w.second);
    EXPECT_LE(w.first, bound.first) << worst_row[model].first;
    EXPECT_LE(w.second, bound.second) << worst_row[model].second;
  }
}

}  // namespace
