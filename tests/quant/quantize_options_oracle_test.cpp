// `gguf quantize` with llama-quantize's options (--output-tensor-type, --token-embedding-type,
// --leave-output-tensor, --tensor-type, --tensor-type-file, --override-kv, --allow-requantize)
// against llama.cpp's llama_model_quantize given the same params: the same file, byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "ggufkit/conventions.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "llama_quantize_oracle.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

int ggml(TensorType t) { return static_cast<int>(t); }

class QuantizeOptionsOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    GGUFKIT_REQUIRE_SHARED();
    std::string why;
    oracle_ = LlamaQuantizeOracle::get(&why);
    if (!oracle_) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << why;
    dir_ = temp_dir("quantize-options");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  static fs::path corpus(const std::string& name) { return *shared_dir() / "corpus/tiny-llama" / name; }

  // `gguf quantize SOURCE OUT PRESET <options>` and llama_model_quantize with `request` (its
  // file_type set from PRESET): what differs, empty when both wrote the same file.
  std::string compare(const fs::path& source, const std::string& preset, std::vector<std::string> options,
                      LlamaQuantizeRequest request) {
    const auto file_type = parse_file_type(preset);
    if (!file_type) return "no file type " + preset;
    request.file_type = *file_type;
    const fs::path ours = dir_ / "ours.gguf", theirs = dir_ / "llama.gguf";
    std::vector<std::string> args = {"quantize", source.string(), ours.string(), preset, "--threads", "2"};
    args.insert(args.end(), options.begin(), options.end());
    const CommandResult r = run_gguf(args);
    const bool llama_ok = oracle_->quantize(source.string(), theirs.string(), request);
    if ((r.exit_code == 0) != llama_ok) {
      return llama_ok ? "we refused what llama.cpp wrote: " + r.err : "llama.cpp refused what we wrote";
    }
    if (!llama_ok) return "both refused: " + r.err;
    std::string difference = first_difference(ours, theirs);
    if (difference.empty() && read_bytes(ours) != read_bytes(theirs)) difference = "the headers differ";
    fs::remove(ours);
    fs::remove(theirs);
    return difference;
  }

  // The type of tensor `name` in our output of the last compare() that kept its file (tests that
  // want to see an option had an effect write once more).
  static std::optional<TensorType> type_in(const fs::path& file, std::string_view name) {
    auto f = GgufFile::open(file);
    if (!f) return std::nullopt;
    for (const TensorInfo& t : f->tensors()) {
      if (t.name == name) return t.type;
    }
    return std::nullopt;
  }

  // tiny-llama-f16 with an output.weight of its own (a copy of token_embd): tiny-llama's
  // token_embd doubles as the output, so output.weight's options need this model.
  fs::path untied_model() { return with_copy_of_token_embd("output.weight"); }
  // Gemma 3n's per-layer token embeddings: a second embedding table the options treat apart.
  fs::path per_layer_embedding_model() { return with_copy_of_token_embd("per_layer_token_embd.weight"); }

  // tiny-llama-f16 with token_embd's data also under `name`.
  fs::path with_copy_of_token_embd(const std::string& name) {
    const fs::path path = dir_ / (name + "-f16.gguf");
    auto tiny = GgufFile::open(corpus("tiny-llama-f16.gguf"));
    if (!tiny) return {};
    GgufBuilder b;
    for (const KeyValue& kv : tiny->metadata()) (void)b.set(kv.key, MetadataValue::copy_of(kv.value));
    for (const TensorInfo& t : tiny->tensors()) {
      if (!b.add_tensor(t.name, t.type, t.shape(), tiny->tensor_data(t))) return {};
      if (t.name == "token_embd.weight" && !b.add_tensor(name, t.type, t.shape(), tiny->tensor_data(t))) {
        return {};
      }
    }
    if (!b.write_file(path)) return {};
    return path;
  }

  const LlamaQuantizeOracle* oracle_ = nullptr;
  fs::path dir_;
};

TEST_F(QuantizeOptionsOracle, OutputAndTokenEmbeddingTypes) {
  const fs::path untied = untied_model();
  ASSERT_FALSE(untied.empty());
  for (const auto& [f16, preset] : std::vector<std::pair<fs::path, std::string>>{
           {corpus("tiny-llama-f16.gguf"), "Q4_K_M"}, {corpus("tiny-llama-f16.gguf"), "Q4_0"},
           {corpus("tiny-llama-f16.gguf"), "Q8_0"}, {corpus("tiny-llama-f16.gguf"), "F16"},
           {untied, "Q4_K_M"}, {untied, "Q3_K_S"}, {untied, "Q4_0"}, {untied, "F16"}}) {
    SCOPED_TRACE(preset + " from " + f16.filename().string());
    LlamaQuantizeRequest out;
    out.output_tensor_type = ggml(TensorType::Q8_0);
    EXPECT_EQ(compare(f16, preset, {"--output-tensor-type", "q8_0"}, out), "");
    LlamaQuantizeRequest embd;
    embd.token_embedding_type = ggml(TensorType::Q4_0);
    EXPECT_EQ(compare(f16, preset, {"--token-embedding-type", "Q4_0"}, embd), "");
    LlamaQuantizeRequest both;
    both.output_tensor_type = ggml(TensorType::F16);
    both.token_embedding_type = ggml(TensorType::Q8_0);
    EXPECT_EQ(compare(f16, preset, {"--output-tensor-type", "f16", "--token-embedding-type", "q8_0"}, both), "");
    LlamaQuantizeRequest pure = out;
    pure.pure = true;
    EXPECT_EQ(compare(f16, preset, {"--output-tensor-type", "q8_0", "--pure"}, pure), "");
  }
}

TEST_F(QuantizeOptionsOracle, OutputTypeIsVisible) {
  // The option has an effect: the output (or the token_embd that doubles as it) becomes Q8_0.
  const fs::path out = dir_ / "x.gguf";
  const CommandResult r = run_gguf({"quantize", untied_model().string(), out.string(), "Q4_0",
                                    "--output-tensor-type", "q8_0", "--token-embedding-type", "q5_0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(type_in(out, "output.weight"), TensorType::Q8_0);
  EXPECT_EQ(type_in(out, "token_embd.weight"), TensorType::Q5_0);
  const CommandResult dry = run_gguf({"quantize", corpus("tiny-llama-f16.gguf").string(), (dir_ / "y.gguf").string(),
                                      "Q4_0", "--token-embedding-type", "q5_0", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("--token-embedding-type"), std::string::npos) << dry.out;
  EXPECT_FALSE(fs::exists(dir_ / "y.gguf"));
}

// COPY (only_copy): every tensor copied, general.file_type kept, or guessed when the input has none
// (1024 + the most common type's file type); the same file as llama_model_quantize writes.
TEST_F(QuantizeOptionsOracle, CopyWritesWhatLlamaQuantizesCopyWrites) {
  std::vector<fs::path> inputs = {corpus("tiny-llama-f16.gguf"), corpus("tiny-llama-q4_k_m.gguf"),
                                  corpus("tiny-llama-mxfp4_moe.gguf"), corpus("tiny-llama-iq4_xs.gguf")};
  for (const char* name : {"tiny-llama-f16.gguf", "tiny-llama-q4_k_m.gguf", "tiny-llama-q6_k.gguf"}) {
    const fs::path bare = dir_ / (std::string("no-file-type-") + name);
    const CommandResult rm = run_gguf({"rm", corpus(name).string(), "general.file_type", "-o", bare.string()});
    ASSERT_EQ(rm.exit_code, 0) << rm.err;
    inputs.push_back(bare);
  }
  LlamaQuantizeRequest copy;
  copy.only_copy = true;
  for (const fs::path& in : inputs) {
    SCOPED_TRACE(in.filename().string());
    const fs::path ours = dir_ / "ours.gguf", theirs = dir_ / "llama.gguf";
    const CommandResult r = run_gguf({"quantize", in.string(), ours.string(), "COPY", "-f", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, ours.string() + "\n");
    EXPECT_EQ(r.err, "");
    ASSERT_TRUE(oracle_->quantize(in.string(), theirs.string(), copy));
    EXPECT_EQ(first_difference(ours.string(), theirs.string()), "");
    EXPECT_EQ(read_bytes(ours), read_bytes(theirs));
    auto a = GgufFile::open(in);
    auto b = GgufFile::open(ours);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (const TensorInfo& t : a->tensors()) {  // the order is llama.cpp's (by layer and name)
      EXPECT_EQ(type_in(ours, t.name), t.type) << t.name;
    }
  }
  // The guesses themselves: f16 -> MOSTLY_F16 (1), q6_K -> MOSTLY_Q6_K (18), each | 1024.
  auto guessed = GgufFile::open(dir_ / "ours.gguf");
  ASSERT_TRUE(guessed);
  EXPECT_EQ(guessed->find("general.file_type")->value.as_uint(), 1024u + 18u);
}

TEST_F(QuantizeOptionsOracle, LeaveOutputTensor) {
  const fs::path untied = untied_model();
  ASSERT_FALSE(untied.empty());
  for (const char* preset : {"Q4_K_M", "Q4_0", "Q6_K"}) {
    SCOPED_TRACE(preset);
    LlamaQuantizeRequest leave;
    leave.quantize_output_tensor = false;
    EXPECT_EQ(compare(untied, preset, {"--leave-output-tensor"}, leave), "");
    EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), preset, {"--leave-output-tensor"}, leave), "");
  }
  const fs::path out = dir_ / "x.gguf";
  const CommandResult r = run_gguf({"quantize", untied.string(), out.string(), "Q4_0", "--leave-output-tensor"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(type_in(out, "output.weight"), TensorType::F16);
  EXPECT_EQ(type_in(out, "token_embd.weight"), TensorType::Q4_0);
}

TEST_F(QuantizeOptionsOracle, TensorTypePatterns) {
  const fs::path f16 = corpus("tiny-llama-f16.gguf");
  // Several patterns; the first that matches wins (attn_v matches both "attn_v" and "attn").
  LlamaQuantizeRequest request;
  request.tensor_types = {{"attn_v", ggml(TensorType::Q8_0)},
                          {"attn", ggml(TensorType::Q5_0)},
                          {"blk\\.1\\.ffn_(up|down)", ggml(TensorType::F16)},
                          {"token_embd", ggml(TensorType::Q4_1)}};
  const std::vector<std::string> args = {"--tensor-type", "attn_v=q8_0", "--tensor-type", "ATTN=Q5_0",
                                         "--tensor-type", "blk\\.1\\.ffn_(up|down)=f16",
                                         "--tensor-type", "token_embd=q4_1"};
  for (const char* preset : {"Q4_K_M", "Q3_K_M", "Q4_0", "Q8_0"}) {
    SCOPED_TRACE(preset);
    EXPECT_EQ(compare(f16, preset, args, request), "");
    LlamaQuantizeRequest pure = request;
    pure.pure = true;
    std::vector<std::string> pure_args = args;
    pure_args.push_back("--pure");
    EXPECT_EQ(compare(f16, preset, pure_args, pure), "");
  }
  // A pattern naming output.weight, on a model that has one; --output-tensor-type wins over it.
  const fs::path untied = untied_model();
  ASSERT_FALSE(untied.empty());
  LlamaQuantizeRequest output = request;
  output.tensor_types.insert(output.tensor_types.begin(), {"^output", ggml(TensorType::Q5_1)});
  std::vector<std::string> output_args = {"--tensor-type", "^output=q5_1"};
  output_args.insert(output_args.end(), args.begin(), args.end());
  EXPECT_EQ(compare(untied, "Q4_K_M", output_args, output), "");
  output.output_tensor_type = ggml(TensorType::Q8_0);
  output_args.insert(output_args.end(), {"--output-tensor-type", "q8_0"});
  EXPECT_EQ(compare(untied, "Q4_K_M", output_args, output), "");
  // F16 has no quantized default type: llama.cpp ignores the patterns, so do we.
  EXPECT_EQ(compare(f16, "F16", args, request), "");
  // --token-embedding-type wins over a pattern naming token_embd.
  LlamaQuantizeRequest embd = request;
  embd.token_embedding_type = ggml(TensorType::Q8_0);
  std::vector<std::string> embd_args = args;
  embd_args.insert(embd_args.end(), {"--token-embedding-type", "q8_0"});
  EXPECT_EQ(compare(f16, "Q4_K_M", embd_args, embd), "");
}

// A pattern giving a tensor a type that needs an importance matrix: llama.cpp refuses, so do we.
TEST_F(QuantizeOptionsOracle, TensorTypeNeedingAnImportanceMatrixIsRefused) {
  LlamaQuantizeRequest request;
  request.tensor_types = {{"attn_q", ggml(TensorType::IQ2_XXS)}};
  const std::string result =
      compare(corpus("tiny-llama-f16.gguf"), "Q4_K_M", {"--tensor-type", "attn_q=iq2_xxs"}, request);
  EXPECT_EQ(result.rfind("both refused", 0), 0u) << result;
  EXPECT_NE(result.find("importance matrix"), std::string::npos) << result;
}

TEST_F(QuantizeOptionsOracle, TensorTypeFile) {
  const fs::path list = dir_ / "types.txt";
  std::ofstream(list) << "ffn_down=q8_0 attn_q=q5_1\n\nblk\\.0\\.=f16\n";
  LlamaQuantizeRequest request;
  request.tensor_types = {{"ffn_down", ggml(TensorType::Q8_0)},
                          {"attn_q", ggml(TensorType::Q5_1)},
                          {"blk\\.0\\.", ggml(TensorType::F16)}};
  EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), "Q4_K_M", {"--tensor-type-file", list.string()}, request), "");
  // Options and files keep their command-line order (the first match wins).
  LlamaQuantizeRequest mixed;
  mixed.tensor_types = {{"attn_q", ggml(TensorType::Q6_K)},
                        {"ffn_down", ggml(TensorType::Q8_0)},
                        {"attn_q", ggml(TensorType::Q5_1)},
                        {"blk\\.0\\.", ggml(TensorType::F16)},
                        {"ffn", ggml(TensorType::Q4_0)}};
  EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), "Q4_K_M",
                    {"--tensor-type", "attn_q=q6_K", "--tensor-type-file", list.string(), "--tensor-type", "ffn=q4_0"},
                    mixed),
            "");
  // A malformed word is refused.
  std::ofstream(list) << "ffn_down\n";
  const CommandResult r = run_gguf({"quantize", corpus("tiny-llama-f16.gguf").string(), (dir_ / "x.gguf").string(),
                                    "Q4_0", "--tensor-type-file", list.string()});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(QuantizeOptionsOracle, OverrideKv) {
  LlamaQuantizeRequest request;
  LlamaQuantizeRequest::Kv name{"general.name", 3, 0, 0, false, "renamed by override"};
  LlamaQuantizeRequest::Kv count{"llama.context_length", 0, -4096, 0, false, ""};  // u32 of |v|, as llama.cpp
  LlamaQuantizeRequest::Kv scale{"custom.scale", 1, 0, 0.125, false, ""};
  LlamaQuantizeRequest::Kv flag{"custom.flag", 2, 0, 0, true, ""};
  request.kv_overrides = {name, count, scale, flag};
  EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), "Q4_0",
                    {"--override-kv", "general.name=str:renamed by override", "--override-kv",
                     "llama.context_length=int:-4096", "--override-kv", "custom.scale=float:0.125", "--override-kv",
                     "custom.flag=bool:true"},
                    request),
            "");
  const CommandResult bad = run_gguf({"quantize", corpus("tiny-llama-f16.gguf").string(), (dir_ / "x.gguf").string(),
                                      "Q4_0", "--override-kv", "general.name=text:x"});
  EXPECT_NE(bad.exit_code, 0);
}

// llama_model_quantize loads the hyperparameters with the overrides: fewer kv heads (n_gqa 4)
// and more layers change the preset's choices, as they change llama.cpp's.
TEST_F(QuantizeOptionsOracle, OverrideKvChangesTheHyperparametersTheRulesRead) {
  LlamaQuantizeRequest request;
  request.kv_overrides = {{"llama.attention.head_count_kv", 0, 1, 0, false, ""}};
  EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), "Q2_K", {"--override-kv", "llama.attention.head_count_kv=int:1"},
                    request),
            "");
  // Kept once more to see the effect: attn_v is Q4_K with n_gqa 4 (Q3_K without the override).
  ASSERT_EQ(run_gguf({"quantize", corpus("tiny-llama-f16.gguf").string(), (dir_ / "gqa.gguf").string(), "Q2_K",
                      "--override-kv", "llama.attention.head_count_kv=int:1"}).exit_code, 0);
  EXPECT_EQ(type_in(dir_ / "gqa.gguf", "blk.0.attn_v.weight"), TensorType::Q4_K);
  LlamaQuantizeRequest layers;
  layers.kv_overrides = {{"llama.block_count", 0, 16, 0, false, ""}};
  for (const char* preset : {"Q4_K_M", "Q3_K_M", "Q4_K_S"}) {
    EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), preset, {"--override-kv", "llama.block_count=int:16"}, layers), "")
        << preset;
  }
  // A float for an int hyperparameter: llama.cpp warns and keeps the file's value for its rules
  // (the output's key is the float all the same).
  LlamaQuantizeRequest wrong;
  wrong.kv_overrides = {{"llama.block_count", 1, 0, 16.0, false, ""}};
  EXPECT_EQ(compare(corpus("tiny-llama-f16.gguf"), "Q4_K_M", {"--override-kv", "llama.block_count=float:16"}, wrong), "");
}

// per_layer_token_embd follows --token-embedding-type, unless a --tensor-type names it (then the
// pattern wins), as in llama.cpp.
TEST_F(QuantizeOptionsOracle, PerLayerTokenEmbeddings) {
  const fs::path model = per_layer_embedding_model();
  ASSERT_FALSE(model.empty());
  const auto ggml = [](TensorType t) { return static_cast<int>(t); };
  LlamaQuantizeRequest embedding;
  embedding.token_embedding_type = ggml(TensorType::Q8_0);
  EXPECT_EQ(compare(model, "Q4_K_M", {"--token-embedding-type", "q8_0"}, embedding), "");
  LlamaQuantizeRequest both = embedding;
  both.tensor_types = {{"per_layer_token_embd", ggml(TensorType::Q5_0)}};
  EXPECT_EQ(compare(model, "Q4_K_M", {"--token-embedding-type", "q8_0", "--tensor-type", "per_layer_token_embd=q5_0"}, both),
            "");
  ASSERT_EQ(run_gguf({"quantize", model.string(), (dir_ / "ple.gguf").string(), "Q4_K_M", "--token-embedding-type",
                      "q8_0", "--tensor-type", "per_layer_token_embd=q5_0"}).exit_code, 0);
  EXPECT_EQ(type_in(dir_ / "ple.gguf", "per_layer_token_embd.weight"), TensorType::Q5_0);
  EXPECT_EQ(type_in(dir_ / "ple.gguf", "token_embd.weight"), TensorType::Q8_0);
  LlamaQuantizeRequest preset;
  EXPECT_EQ(compare(model, "IQ4_XS", {}, preset), "");
}

TEST_F(QuantizeOptionsOracle, RequantizeNeedsTheFlag) {
  for (const char* source : {"tiny-llama-q8_0.gguf", "tiny-llama-q4_k_m.gguf"}) {
    // Without --allow-requantize both refuse.
    LlamaQuantizeRequest refused;
    EXPECT_EQ(compare(corpus(source), "Q4_0", {}, refused).rfind("both refused", 0), 0u) << source;
    for (const char* preset : {"Q4_0", "Q4_K_M", "Q8_0", "Q3_K_M", "Q6_K", "IQ4_NL", "F16"}) {
      if (!quant_capabilities(*file_type_default_type(*parse_file_type(preset))).quantize) continue;
      SCOPED_TRACE(std::string(preset) + " from " + source);
      LlamaQuantizeRequest request;
      request.allow_requantize = true;
      EXPECT_EQ(compare(corpus(source), preset, {"--allow-requantize"}, request), "");
    }
  }
}

}  // namespace
