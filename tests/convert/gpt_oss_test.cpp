// gpt-oss (GptOssForCausalLM, MXFP4 experts) through gguf convert, against llama.cpp twice over:
//   GptOssSameBytesAsLlamaCppConverter: a tiny MXFP4 checkpoint (gpt_oss_checkpoint.h, BF16 around
//     the experts as OpenAI ships it, 1024 tokens) converted by `gguf convert --no-tokenizer` and by
//     llama.cpp's convert_hf_to_gguf.py (reference_convert.py --no-vocab) gives the same bytes, to
//     f16 and to q8_0;
//   GptOssConverted.LlamaCppLogitsMatchTheReference: the checkpoint with gpt-oss's vocabulary size
//     (201088) and the o200k tokenizer, converted to f32 with its vocabulary, run by llama.cpp
//     (libllama through dlopen), gives at every position of a 12-token sequence the logits of the
//     float64 reference pass of transformers' GptOssForCausalLM (gpt_oss_reference.h) within 1e-3
//     relative (measured: 1.7e-7; 1.6e-7 to 3.4e-7 over 40 seeds);
// and two tests that say where a failure comes from:
//   GptOssConverted.ExpertsDecodeToTransformersValues: ggml's own MXFP4 to_float (the oracle's
//     libggml-base) of each converted expert tensor gives exactly the values transformers
//     dequantizes from the checkpoint: the nibble order, the scales, the gate/up split;
//   GptOssReference.EveryKnobOfTheTinyCheckpointMatters: switched off, each semantic knob of the
//     checkpoint (sinks, sliding window and layer_types, yarn and its attention factor, top-k,
//     swiglu_limit, the experts' and the router's biases) moves the reference's logits by more than
//     10x the tolerance (0.33 to 1.06 of max|logit|), so the logits test would see it ignored.
//
// Where llama.cpp computes otherwise than transformers, and how the tests live with it:
//  - ggml multiplies MXFP4 weights by Q8_0 activations (MXFP4's vec_dot_type on the CPU): the normed
//    hidden state and the SwiGLU output are rounded to 8 bits per 32 values before the experts'
//    products. This moves the tiny model's logits by 2e-2 of max|logit|, so the logits test compares
//    with the reference that rounds them the same way (ExpertInputs::ggml_q8_0, as the Gemma tests
//    use ggml's GELU table) and bounds the distance to the exact one loosely (kExactTolerance); both
//    references must take the same experts, by a clear margin.
//  - llama.cpp always truncates yarn's correction range (floorf/ceilf in ggml_rope_yarn_corr_dims);
//    transformers only when rope_scaling.truncate is true, its default. openai/gpt-oss-20b's
//    config.json says "truncate": false, so on the real model llama.cpp's rope differs from
//    transformers' (here: ramp over dims [2.02, 4.35] against [2, 5]). At 12 positions this moves the
//    exact reference's logits by 5e-4 only (1.3e-2 with the Q8_0 rounding, whose 8-bit steps it
//    flips), below the tolerance: the tiny config leaves truncate out (true), where the two agree.
//  - llama.cpp hard-codes what config.json could change: swiglu_limit 7 and alpha 1.702, sliding
//    window on even layers (layer_types is not converted), yarn's beta_fast 32 and beta_slow 1 (the
//    converter writes them, the gpt-oss loader does not read them), the experts' softmax after
//    top-k. The tiny config holds those values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <ostream>
#include <set>
#include <sstream>

#include "forward_check.h"
#include "ggufkit/reader.h"
#include "gpt_oss_checkpoint.h"
#include "gpt_oss_reference.h"
#include "llama_logits_oracle.h"
#include "quant_oracle.h"
#include "reference_forward.h"
#include "test_support.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 1e-3;
// The distance between llama.cpp and the exact reference, reported and bounded: on this checkpoint
// the Q8_0 rounding of the experts' inputs alone moves the reference's logits by 2.0e-2 of
// max|logit| (1.8e-2 to 4.4e-2 over the 40 seeds whose routing it leaves alone): the experts'
// outputs dominate the residual stream, and an 8-bit input costs ~0.5% of each expert product.
constexpr double kExactTolerance = 5e-2;
constexpr size_t kTokens = 12;
constexpr uint32_t kTokenSeed = 3;
// The reference's choice of experts must be clear-cut (llama.cpp's float32 router logits are within
// about 1e-6 of the reference's), so that a logits difference is never a coin toss.
constexpr double kMinRouterGap = 1e-4;
constexpr uint32_t kGgmlTypeMxfp4 = 39;

fs::path llama_cpp_dir() { return fs::path(GGUFKIT_SOURCE_DIR) / ".oracle" / "llama.cpp"; }

class GptOssDir : public testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("gpt-oss"); }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

// ---- the same bytes as llama.cpp's converter -------------------------------------------------

struct ByteVariant {
  const char* name;
  CheckpointDtype dtype;
  const char* outtype;
};
void PrintTo(const ByteVariant& v, std::ostream* os) { *os << v.name; }

constexpr ByteVariant kByteVariants[] = {
    {"bf16_to_f16", CheckpointDtype::BF16, "f16"},
    {"bf16_to_q8_0", CheckpointDtype::BF16, "q8_0"},
};

class GptOssSameBytesAsLlamaCppConverter : public testing::WithParamInterface<ByteVariant>, public GptOssDir {};

TEST_P(GptOssSameBytesAsLlamaCppConverter, EveryKeyAndTensor) {
  const ByteVariant& v = GetParam();
  const fs::path llama_cpp = llama_cpp_dir();
  if (!fs::exists(llama_cpp / "convert_hf_to_gguf.py")) {
    GTEST_SKIP() << "skipped: llama.cpp's converter is not checked out in " << llama_cpp.string() << " (scripts/install-oracle.sh)";
  }
  // The vocabulary plays no part without a tokenizer: 1024 tokens keep the Python side quick.
  const TinyGptOss model = make_tiny_gpt_oss({.o200k_vocabulary = false, .dtype = v.dtype, .seed = 21});
  const fs::path checkpoint = dir_ / "checkpoint";
  ASSERT_EQ(write_gpt_oss_checkpoint(model, checkpoint), "");

  const fs::path reference = dir_ / "reference.gguf";
  const std::string command = "python3 " + shell_quoted((fs::path(GGUFKIT_SOURCE_DIR) / "tests/convert/reference_convert.py").string()) +
                              " " + shell_quoted(llama_cpp.string()) + " " + shell_quoted(checkpoint.string()) + " " +
                              shell_quoted(reference.string()) + " --outtype " + v.outtype + " --no-vocab";
  const NodeRun ran = run_shell(command + " 2>&1");
  if (ran.status == 3) GTEST_SKIP() << "skipped: " << ran.out;
  ASSERT_EQ(ran.status, 0) << "gpt-oss " << v.name << ": llama.cpp's converter failed: " << ran.out;

  const fs::path ours = dir_ / "ggufkit.gguf";
  const CommandResult converted =
      run_gguf({"convert", checkpoint.string(), ours.string(), "--outtype", v.outtype, "--quiet", "--no-tokenizer"});
  ASSERT_EQ(converted.exit_code, 0) << "gpt-oss " << v.name << ": gguf convert failed:\n" << converted.out << converted.err;
  EXPECT_EQ(converted.out, ours.string() + "\n");
  EXPECT_EQ(converted.err, "");

  if (read_bytes(ours) != read_bytes(reference)) {
    const CommandResult diff = run_gguf({"diff", reference.string(), ours.string(), "--data"});
    ADD_FAILURE() << "gpt-oss " << v.name << ": gguf convert's file differs from llama.cpp's converter's (reference first):\n"
                  << diff.out << diff.err;
  }
}

INSTANTIATE_TEST_SUITE_P(GptOss, GptOssSameBytesAsLlamaCppConverter, testing::ValuesIn(kByteVariants),
                         [](const testing::TestParamInfo<ByteVariant>& param) { return std::string(param.param.name); });

// ---- ggml decodes the converted experts to transformers' values -----------------------------

using GptOssConverted = GptOssDir;

TEST_F(GptOssConverted, ExpertsDecodeToTransformersValues) {
  REQUIRE_QUANT_ORACLE(oracle);
  const QuantOracle::ToFloat to_float = oracle->to_float(kGgmlTypeMxfp4);
  ASSERT_NE(to_float, nullptr) << "the oracle's ggml has no MXFP4 to_float";
  const TinyGptOss model = make_tiny_gpt_oss({.o200k_vocabulary = false, .seed = 21});
  const fs::path checkpoint = dir_ / "checkpoint";
  ASSERT_EQ(write_gpt_oss_checkpoint(model, checkpoint), "");
  const fs::path out = dir_ / "converted.gguf";
  const CommandResult r = run_gguf({"convert", checkpoint.string(), out.string(), "--outtype", "f32", "--quiet", "--no-tokenizer"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto file = GgufFile::open(out);
  ASSERT_TRUE(file) << file.error().describe();

  const int64_t layers = model.config["num_hidden_layers"].get<int64_t>();
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
    // GGUF tensor, checkpoint tensor, every stride-th checkpoint row from offset.
    struct Part {
      std::string gguf, hf;
      int64_t stride, offset;
    };
    const Part parts[] = {{"ffn_gate_exps.weight", "gate_up_proj", 2, 0},
                          {"ffn_up_exps.weight", "gate_up_proj", 2, 1},
                          {"ffn_down_exps.weight", "down_proj", 1, 0}};
    for (const Part& part : parts) {
      const std::string name = "blk." + std::to_string(layer) + "." + part.gguf;
      const U8Tensor& blocks = model.mxfp4.at(p + part.hf + "_blocks");
      const std::vector<double> want = dequantize_gpt_oss_mxfp4(blocks, model.mxfp4.at(p + part.hf + "_scales"));
      const TensorInfo* t = file->find_tensor(name);
      ASSERT_NE(t, nullptr) << "the converted file lacks " << name;
      ASSERT_EQ(static_cast<uint32_t>(t->type), kGgmlTypeMxfp4) << name << " is not MXFP4";
      const int64_t experts = blocks.shape[0], source_rows = blocks.shape[1], cols = blocks.shape[2] * 32;
      const int64_t rows = source_rows / part.stride;
      ASSERT_EQ(t->ne[0], cols) << name;
      ASSERT_EQ(t->ne[1], rows) << name;
      ASSERT_EQ(t->ne[2], experts) << name;
      const auto data = file->tensor_data(*t);
      std::vector<float> got(static_cast<size_t>(t->n_elements()));
      to_float(data.data(), got.data(), t->n_elements());
      int64_t wrong = 0;
      std::ostringstream first;
      for (int64_t e = 0; e < experts; ++e) {
        for (int64_t row = 0; row < rows; ++row) {
          const int64_t source = row * part.stride + part.offset;
          for (int64_t c = 0; c < cols; ++c) {
            const double g = got[static_cast<size_t>((e * rows + row) * cols + c)];
            const double w = want[static_cast<size_t>((e * source_rows + source) * cols + c)];
            if (g != w && wrong++ == 0) {
              first << "expert " << e << ", row " << row << " (checkpoint row " << source << "), column " << c << ": ggml "
                    << g << ", transformers " << w;
            }
          }
        }
      }
      EXPECT_EQ(wrong, 0) << name << ": " << wrong << " of " << got.size()
                          << " values decode otherwise than transformers dequantizes " << p << part.hf << "; the first: " << first.str();
    }
  }
}

// ---- llama.cpp's logits against the reference -----------------------------------------------

TEST_F(GptOssConverted, LlamaCppLogitsMatchTheReference) {
  std::string why;
  const LlamaLogitsOracle* oracle = LlamaLogitsOracle::get(&why);
  if (oracle == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle unavailable (" << why << ")";
  const TinyGptOss model = make_tiny_gpt_oss();
  if (const std::string missing = model.tokenizer_missing(); !missing.empty()) GTEST_SKIP() << "skipped: " << missing;
  const fs::path checkpoint = dir_ / "checkpoint";
  ASSERT_EQ(write_gpt_oss_checkpoint(model, checkpoint), "");
  const fs::path gguf = dir_ / "converted.gguf";
  const CommandResult r = run_gguf({"convert", checkpoint.string(), gguf.string(), "--outtype", "f32", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << "gpt-oss: gguf convert failed (exit " << r.exit_code << "):\n" << r.out << r.err;

  const std::vector<int32_t> tokens = model.test_tokens(kTokens, kTokenSeed);
  GptOssRouting routing, exact_routing;
  const auto reference = reference_gpt_oss_logits(model, tokens, ExpertInputs::ggml_q8_0, &routing);
  const auto exact = reference_gpt_oss_logits(model, tokens, ExpertInputs::exact, &exact_routing);

  std::cout << "[ measured ] gpt-oss: experts used per layer:";
  for (const auto& layer : routing.chosen) {
    std::set<int64_t> used;
    for (const auto& position : layer) used.insert(position.begin(), position.end());
    std::cout << " " << used.size();
  }
  std::cout << "; smallest router gap " << routing.min_gap << " (exact inputs: " << exact_routing.min_gap
            << "); swiglu_limit clipped " << routing.clipped << " of " << routing.gate_up_values << " gate/up values\n";
  for (const GptOssRouting* route : {&routing, &exact_routing}) {
    ASSERT_GE(route->min_gap, kMinRouterGap)
        << "gpt-oss: the reference's choice of experts (" << (route == &routing ? "Q8_0" : "exact")
        << " expert inputs) is nearly tied at layer " << route->min_gap_layer << ", position " << route->min_gap_position
        << " (router logit gap " << route->min_gap << "): llama.cpp may take another expert; change the checkpoint's seed";
  }
  for (size_t l = 0; l < routing.chosen.size(); ++l) {
    for (size_t t = 0; t < routing.chosen[l].size(); ++t) {
      const std::set<int64_t> a(routing.chosen[l][t].begin(), routing.chosen[l][t].end());
      const std::set<int64_t> b(exact_routing.chosen[l][t].begin(), exact_routing.chosen[l][t].end());
      ASSERT_EQ(a, b) << "gpt-oss: rounding the experts' inputs to Q8_0 changes the experts taken at layer " << l << ", position " << t
                      << ": the exact reference cannot be compared; change the checkpoint's seed";
    }
  }

  std::string error;
  const auto actual = oracle->logits(gguf.string(), tokens, &error);
  ASSERT_EQ(actual.size(), tokens.size()) << "gpt-oss: llama.cpp cannot run the converted file: " << error;

  const std::string semantics = describe_gpt_oss_semantics(model.config);
  {
    SCOPED_TRACE("against the reference with the experts' inputs rounded to Q8_0 as ggml does; " + semantics);
    expect_logits_near_reference(actual, reference, kRelativeTolerance, "gpt-oss (Q8_0 expert inputs)");
  }
  double worst_exact = 0;
  for (size_t t = 0; t < actual.size(); ++t) worst_exact = std::max(worst_exact, logits_distance(actual[t], exact[t]).scaled);
  std::cout << "[ measured ] gpt-oss: against the exact reference (transformers' arithmetic) max|diff|/max|ref| " << worst_exact << "\n";
  EXPECT_LE(worst_exact, kExactTolerance)
      << "gpt-oss: llama.cpp's logits are farther than the Q8_0 rounding of the experts' inputs explains from the exact reference; "
      << semantics;
}

// ---- every knob matters ----------------------------------------------------------------------

TEST(GptOssReference, EveryKnobOfTheTinyCheckpointMatters) {
  struct Knob {
    const char* what;
    void (*change)(TinyGptOss&);
  };
  const Knob knobs[] = {
      {"the attention sinks (-inf)",
       [](TinyGptOss& m) {
         for (auto& [name, t] : m.tensors) {
           if (name.ends_with("self_attn.sinks")) std::fill(t.values.begin(), t.values.end(), -1e30f);
         }
       }},
      {"sliding_window", [](TinyGptOss& m) { m.config["sliding_window"] = 4096; }},
      {"layer_types (both full)", [](TinyGptOss& m) { m.config["layer_types"] = {"full_attention", "full_attention"}; }},
      {"rope_scaling (yarn)", [](TinyGptOss& m) { m.config["rope_scaling"] = nullptr; }},
      {"yarn's attention factor (1)", [](TinyGptOss& m) { m.config["rope_scaling"]["attention_factor"] = 1.0; }},
      {"num_experts_per_tok (1)", [](TinyGptOss& m) { m.config["num_experts_per_tok"] = 1; }},
      {"swiglu_limit (none)", [](TinyGptOss& m) { m.config["swiglu_limit"] = 1e30; }},
      {"the experts' biases (0)",
       [](TinyGptOss& m) {
         for (auto& [name, t] : m.tensors) {
           if (name.ends_with("_proj_bias")) std::fill(t.values.begin(), t.values.end(), 0.0f);
         }
       }},
      {"the router's bias (0)",
       [](TinyGptOss& m) {
         for (auto& [name, t] : m.tensors) {
           if (name.ends_with("router.bias")) std::fill(t.values.begin(), t.values.end(), 0.0f);
         }
       }},
  };
  // The logits test's checkpoint and tokens; the logits of the first kKnobLogits tokens only (a
  // tenth of the time).
  constexpr int64_t kKnobLogits = 16384;
  TinyGptOss base_model = make_tiny_gpt_oss();
  HfTensor& head = base_model.tensors.at("lm_head.weight");
  head.values.resize(static_cast<size_t>(kKnobLogits * head.shape[1]));
  head.shape[0] = kKnobLogits;
  const std::vector<int32_t> tokens = base_model.test_tokens(kTokens, kTokenSeed);
  const auto base = reference_gpt_oss_logits(base_model, tokens);
  std::ostringstream measured;
  for (const Knob& knob : knobs) {
    TinyGptOss model = base_model;
    knob.change(model);
    const auto changed = reference_gpt_oss_logits(model, tokens);
    double worst = 0;
    for (size_t t = 0; t < base.size(); ++t) {
      const std::vector<float> as_float(changed[t].begin(), changed[t].end());
      worst = std::max(worst, logits_distance(as_float, base[t]).scaled);
    }
    measured << (measured.tellp() > 0 ? ", " : "") << knob.what << " " << worst;
    EXPECT_GT(worst, 10 * kRelativeTolerance) << "gpt-oss: without " << knob.what << " the logits move by " << worst << " only";
  }
  std::cout << "[ measured ] gpt-oss: max|diff|/max|ref| without " << measured.str() << "\n";
}

}  // namespace
}  // namespace ggufkit::test
