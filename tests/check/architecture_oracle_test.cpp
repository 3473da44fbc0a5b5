// gguf check, arch.*, against llama.cpp itself (node-llama-cpp's build, loaded by
// llama_load.mjs): every model the architecture tables accept loads, and each mutation the pass
// rejects is refused by llama.cpp for the reason the finding gives.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

#include "architecture_models.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using namespace arch_test;
using test::NodeRun;
using test::node_llama_cpp_missing;
using test::run_node_script;
namespace fs = std::filesystem;

// A SentencePiece vocabulary llama.cpp accepts: <unk>, <s>, </s> and the 256 byte tokens (node-llama-cpp
// tokenizes text after loading; a byte without a token would throw). The embedding and output head
// are resized to match.
void use_spm_vocabulary(Model& m) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  for (int byte = 0; byte < 256; ++byte) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", byte);
    tokens.push_back(piece);
    types.push_back(6);
  }
  const std::vector<float> scores(tokens.size(), 0.0f);
  const auto n_vocab = static_cast<int64_t>(tokens.size());
  m.set("tokenizer.ggml.model", MetadataValue::string("llama"));
  m.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  m.set("tokenizer.ggml.scores", MetadataValue::array(scores));
  m.set("tokenizer.ggml.token_type", MetadataValue::array(types));
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    if (Shape* shape = m.shape_of(name)) (*shape)[1] = n_vocab;
  }
}

// Loads (check/llama_load.mjs) or also evaluates (split/llama_eval.mjs) a model with llama.cpp.
// Status 0 loaded, 1 refused, 3 node-llama-cpp missing.
NodeRun run_with_llama_cpp(const fs::path& model, const std::string& script = "check/llama_load.mjs") {
  return run_node_script(script, {model.string()});
}

class LlamaCppAgrees : public testing::Test {
 protected:
  void SetUp() override {
    if (const auto missing = node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
    dir_ = test::temp_dir("check-arch-llama");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Writes the model, checks it, and loads it with llama.cpp: returns (arch errors and warnings, loaded).
  std::pair<std::vector<Finding>, bool> check_and_load(const Model& m, const std::string& name) {
    const fs::path path = dir_ / (name + ".gguf");
    WriteOptions o;
    o.sync = false;
    const auto written = builder_of(m).write_file(path, o);
    EXPECT_TRUE(written) << written.error().describe();
    const auto report = check_file(path);
    EXPECT_TRUE(report);
    std::vector<Finding> problems;
    if (report) {
      for (const Finding& f : arch_findings(*report)) {
        if (f.severity != Severity::info) problems.push_back(f);
      }
    }
    const NodeRun r = run_with_llama_cpp(path);
    if (r.status == 3) {
      skipped_ = true;
      return {problems, false};
    }
    if (r.status != 0) last_refusal_ = r.out;  // 1: refused; anything else: llama.cpp aborted
    return {problems, r.status == 0};
  }

  fs::path dir_;
  bool skipped_ = false;
  std::string last_refusal_;
};

TEST_F(LlamaCppAgrees, EveryArchitectureTheTableAcceptsLoads) {
  for (const NamedModel& named : all_models()) {
    SCOPED_TRACE(named.name);
    Model m = named.make();
    use_spm_vocabulary(m);
    const auto [problems, loaded] = check_and_load(m, named.name);
    if (skipped_) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported";
    EXPECT_TRUE(problems.empty()) << describe_all(problems);
    EXPECT_TRUE(loaded) << last_refusal_;
  }
}

// Mixtral (llama with experts), with the per-weight scales llama.cpp's generic pass loads.
TEST_F(LlamaCppAgrees, MixtralWithScalesLoads) {
  Model m = mixtral_model();
  m.add("blk.0.attn_q.scale", {1});
  m.add("blk.1.attn_output.input_scale", {1});
  m.add("blk.1.ffn_up_exps.scale", {kExperts});
  use_spm_vocabulary(m);
  const auto [problems, loaded] = check_and_load(m, "mixtral");
  if (skipped_) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported";
  EXPECT_TRUE(problems.empty()) << describe_all(problems);
  EXPECT_TRUE(loaded) << last_refusal_;
}

// Each mutation: the finding the pass gives, and the words of llama.cpp's refusal.
TEST_F(LlamaCppAgrees, WhatThePassRejectsLlamaCppRefuses) {
  struct Mutation {
    std::string name;
    void (*apply)(Model&);
    std::string code;
    std::string llama_cpp_says;  // empty: llama.cpp aborts (GGML_ASSERT) instead of refusing
  };
  const std::vector<Mutation> mutations = {
      {"dropped", [](Model& m) { m.drop("blk.1.ffn_up.weight"); }, "arch.missing_tensor",
       "missing tensor 'blk.1.ffn_up.weight'"},
      {"shape", [](Model& m) { *m.shape_of("blk.0.attn_k.weight") = {kEmbd, kQ}; }, "arch.shape_mismatch",
       "wrong shape"},
      {"extra", [](Model& m) { m.add("blk.0.ffn_mystery.weight", {kEmbd}); }, "arch.unexpected_tensor",
       "wrong number of tensors"},
      {"fused_and_separate", [](Model& m) { m.add("blk.0.attn_qkv.weight", {kEmbd, kQ + 2 * kKv}); },
       "arch.unexpected_tensor", "wrong number of tensors"},
      {"rope_factors_without_longrope", [](Model& m) { m.add("rope_factors_long.weight", {kHeadDim / 2}); },
       "arch.unexpected_tensor", "wrong number of tensors"},
      {"scale_next_to_norm", [](Model& m) { m.add("blk.0.attn_norm.scale", {1}); }, "arch.unexpected_tensor",
       "wrong number of tensors"},
      {"block_count_small", [](Model& m) { m.set_u32("block_count", 1); }, "arch.block_count_mismatch",
       "wrong number of tensors"},
      {"block_count_large", [](Model& m) { m.set_u32("block_count", 3); }, "arch.block_count_mismatch",
       "missing tensor 'blk.2.attn_norm.weight'"},
      {"block_count_over_max", [](Model& m) { m.set_u32("block_count", 513); }, "arch.bad_hyperparameter", ""},
      {"no_rms_eps", [](Model& m) { m.remove_key("llama.attention.layer_norm_rms_epsilon"); },
       "arch.missing_hyperparameter", "key not found"},
      {"kv_array_length",
       [](Model& m) { m.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<uint32_t>{2, 2, 2})); },
       "arch.bad_hyperparameter", "wrong array length"},
      {"kv_array_varies",
       [](Model& m) {
         m.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<uint32_t>{2, 1}));
         *m.shape_of("blk.1.attn_k.weight") = {kEmbd, kHeadDim};
         *m.shape_of("blk.1.attn_v.weight") = {kEmbd, kHeadDim};
       },
       "arch.bad_hyperparameter", "wrong shape"},
      // The loader reads each key as one type (GGUFMeta's get_kv); no other is accepted.
      {"context_length_float", [](Model& m) { m.set("llama.context_length", MetadataValue::of(2048.0f)); },
       "arch.wrong_type", "key llama.context_length has wrong type f32 but expected type u32"},
      {"block_count_int32", [](Model& m) { m.set("llama.block_count", MetadataValue::of(int32_t{2})); },
       "arch.wrong_type", "key llama.block_count has wrong type i32 but expected type u32"},
      {"head_count_kv_float_array",
       [](Model& m) { m.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<float>{2, 2})); },
       "arch.wrong_type", "llama.attention.head_count_kv has wrong array element type f32"},
      {"rms_eps_float64",
       [](Model& m) { m.set("llama.attention.layer_norm_rms_epsilon", MetadataValue::of(1e-5)); },
       "arch.wrong_type", "key llama.attention.layer_norm_rms_epsilon has wrong type f64 but expected type f32"},
  };
  for (const Mutation& mutation : mutations) {
    SCOPED_TRACE(mutation.name);
    Model m = llama_model();
    use_spm_vocabulary(m);
    mutation.apply(m);
    last_refusal_.clear();
    const auto [problems, loaded] = check_and_load(m, mutation.name);
    if (skipped_) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported";
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems[0].code, mutation.code) << describe_all(problems);
    EXPECT_FALSE(loaded);
    if (!mutation.llama_cpp_says.empty()) {
      EXPECT_NE(last_refusal_.find(mutation.llama_cpp_says), std::string::npos) << last_refusal_;
    }
  }
}

// phi3's loader takes Q, K and V as optional; its graph does not: the pass reports the missing
// tensors as a crash, which is what llama.cpp does when it evaluates the model.
TEST_F(LlamaCppAgrees, Phi3WithoutAttentionLoadsThenCrashes) {
  Model m = phi3_model();
  use_spm_vocabulary(m);
  m.drop("blk.1.attn_qkv.weight");
  const auto [problems, loaded] = check_and_load(m, "phi3-no-qkv");
  if (skipped_) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported";
  ASSERT_EQ(problems.size(), 3u) << describe_all(problems);  // Q, K and V of layer 1
  for (const Finding& f : problems) {
    EXPECT_EQ(f.code, "arch.missing_tensor");
    EXPECT_NE(f.message.find("crashes when it evaluates"), std::string::npos) << f.message;
  }
  EXPECT_TRUE(loaded) << last_refusal_;
  const NodeRun evaluated = run_with_llama_cpp(dir_ / "phi3-no-qkv.gguf", "split/llama_eval.mjs");
  EXPECT_NE(evaluated.status, 0) << evaluated.out;
}

// Exhaustive, and slow (one llama.cpp load per tensor, about 8 minutes): each architecture's model
// without one of its tensors (layer 1's for per-layer ones). Where the pass reports an error,
// llama.cpp must refuse the file (or, for tensors only the graph needs, crash when evaluating);
// where it reports nothing (an optional tensor), llama.cpp must load it. Run with
// --gtest_also_run_disabled_tests.
TEST_F(LlamaCppAgrees, DISABLED_EveryTensorDroppedInTurn) {
  for (const NamedModel& named : all_models()) {
    Model base = named.make();
    use_spm_vocabulary(base);
    for (const auto& [name, shape] : base.tensors) {
      if (name.starts_with("blk.0.")) continue;
      SCOPED_TRACE(named.name + " without " + name);
      Model m = base;
      m.drop(name);
      const auto [problems, loaded] = check_and_load(m, named.name + "-" + name);
      if (skipped_) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported";
      bool error = false, crash = false;
      for (const Finding& f : problems) {
        error = error || f.severity == Severity::error;
        crash = crash || f.message.find("crashes when it evaluates") != std::string::npos;
      }
      EXPECT_EQ(loaded, !error || crash) << describe_all(problems) << "\n" << last_refusal_;
      std::printf("%-9s without %-32s pass: %-5s llama.cpp: %s\n", named.name.c_str(), name.c_str(),
                  error ? "error" : "ok", loaded ? "loads" : "refuses");
    }
  }
}

}  // namespace
}  // namespace ggufkit
