// Quantizing with an importance matrix, and --keep-split, against llama.cpp's
// llama_model_quantize given the same matrix (llama_model_imatrix_data) and the same keep_split:
// every tensor gets llama.cpp's type and bytes, per expert for 3-D tensors, and whole files agree
// byte for byte (the quantize.imatrix.* keys are the kv overrides llama-quantize adds for them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>

#include "ggufkit/conventions.h"
#include "ggufkit/imatrix.h"
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

// Every preset, those made for importance matrices first.
constexpr const char* kPresets[] = {"IQ2_XXS", "IQ2_XS", "IQ2_S",  "IQ2_M",  "IQ1_S",  "IQ1_M",  "IQ3_XXS",
                                    "IQ3_XS",  "Q2_K_S", "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",   "Q8_0",
                                    "Q2_K",    "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                                    "Q5_K_M",  "Q6_K",   "IQ4_NL", "IQ4_XS", "IQ3_S",  "IQ3_M",  "TQ1_0",
                                    "TQ2_0",   "MXFP4_MOE", "Q1_0", "Q2_0"};

// On the 8-expert model (slow to quantize both ways): the low-bit presets and those with rules of
// their own for 8 experts (llama-quant.cpp's n_expert == 8 branches).
constexpr const char* kExpertPresets[] = {"IQ2_XXS", "IQ2_S", "IQ1_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S",
                                          "Q4_0",    "Q3_K_M", "Q4_K_M", "IQ4_XS", "MXFP4_MOE"};
// On other expert counts the expert rules are the per-expert layer numbering of ffn_down and the
// n_expert >= 4 branch of attn_v, which these reach (one of the IQ1/IQ2 presets: their branch is
// shared, and ggml takes 10 s to set up IQ1's grid in each process).
constexpr const char* kFewExpertPresets[] = {"IQ2_XXS", "Q2_K_S", "Q4_0", "Q3_K_M", "Q4_K_M", "IQ4_XS", "MXFP4_MOE"};

// Importance values for every weight of `model` with two or more dimensions (ne[0] per expert),
// as llama-imatrix would give: positive, of varied magnitude, some zero.
ImportanceMatrix random_importance(const GgufFile& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<float> magnitude(0.0f, 1.5f);
  ImportanceMatrix m;
  for (const TensorInfo& t : model.tensors()) {
    if (t.n_dims < 2 || !std::string_view(t.name).ends_with(".weight")) continue;
    ImportanceEntry e{std::string(t.name), std::vector<float>(static_cast<size_t>(t.ne[0] * t.ne[2]))};
    for (float& v : e.values) v = rng() % 16 == 0 ? 0.0f : magnitude(rng);
    m.entries.push_back(std::move(e));
  }
  std::ranges::sort(m.entries, {}, &ImportanceEntry::name);
  return m;
}

LlamaQuantizeRequest request_for(uint32_t file_type, const ImportanceMatrix& m, const std::string& file_label) {
  LlamaQuantizeRequest request;
  request.file_type = file_type;
  for (const ImportanceEntry& e : m.entries) request.imatrix.emplace_back(e.name, e.values);
  // llama-quantize (tools/quantize) names the matrix with these overrides.
  if (!m.entries.empty()) {
    request.kv_overrides.push_back({"quantize.imatrix.file", 3, 0, 0, false, file_label});
    request.kv_overrides.push_back({"quantize.imatrix.entries_count", 0, static_cast<int64_t>(m.entries.size()), 0, false, {}});
  }
  return request;
}

struct Outcome {
  bool ours_ok = false, llama_ok = false;
  std::string our_error, difference;
};

// Quantizes `source` with `preset` and `matrix` both ways; compares the files when both wrote one.
Outcome quantize_both(const fs::path& source, const std::string& preset, const ImportanceMatrix& matrix,
                      const fs::path& dir, const LlamaQuantizeOracle& oracle) {
  Outcome o;
  const auto file_type = parse_file_type(preset);
  const fs::path ours = dir / (preset + "-ours.gguf"), theirs = dir / (preset + "-llama.gguf");
  auto input = SplitModel::open(source);
  if (!input || !file_type) {
    o.our_error = "cannot open " + source.string();
    return o;
  }
  QuantizeOptions options;
  options.file_type = *file_type;
  options.pure = false;
  options.importance = &matrix;
  options.importance_file = "test.imatrix";
  options.threads = Threads{2};
  options.sync = false;
  const auto r = quantize_model(*input, ours, options);
  o.ours_ok = r.has_value();
  if (!r) o.our_error = r.error().describe();
  o.llama_ok = oracle.quantize(source.string(), theirs.string(), request_for(*file_type, matrix, "test.imatrix"));
  if (o.ours_ok && o.llama_ok) {
    o.difference = first_difference(ours, theirs);
    if (o.difference.empty() && read_bytes(ours) != read_bytes(theirs)) o.difference = "the headers differ";
  }
  fs::remove(ours);
  fs::remove(theirs);
  return o;
}

// The presets whose tensors ggufkit can all quantize (with this matrix).
bool kernels_present(const fs::path& source, const std::string& preset, const ImportanceMatrix& matrix,
                     std::string& skipped) {
  auto input = GgufFile::open(source);
  QuantizeOptions options;
  options.file_type = *parse_file_type(preset);
  options.pure = false;
  options.importance = &matrix;
  const auto plan = input ? plan_quantize(*input, options) : Expected<QuantizePlan>(input.error());
  if (!plan) return true;  // the comparison reports it
  for (const TensorPlan& p : plan->tensors) {
    if (p.convert && !quant_capabilities(p.target).quantize) {
      skipped += " " + preset + "(" + std::string(type_name(p.target)) + ")";
      return false;
    }
  }
  return true;
}

void expect_presets_match(const fs::path& model, std::span<const char* const> presets, const ImportanceMatrix& matrix,
                          const fs::path& dir, const LlamaQuantizeOracle& oracle) {
  std::string skipped;
  for (const char* preset : presets) {
    if (!kernels_present(model, preset, matrix, skipped)) continue;
    SCOPED_TRACE(std::string(preset) + " on " + model.filename().string());
    const Outcome o = quantize_both(model, preset, matrix, dir, oracle);
    ASSERT_TRUE(o.llama_ok) << "llama.cpp refused";
    ASSERT_TRUE(o.ours_ok) << o.our_error;
    EXPECT_EQ(o.difference, "");
  }
  if (!skipped.empty()) std::printf("no quantize kernel yet:%s\n", skipped.c_str());
}

#define REQUIRE_LLAMA_QUANTIZE(name)                                                              \
  std::string name##_why;                                                                         \
  const LlamaQuantizeOracle* name = LlamaQuantizeOracle::get(&name##_why);                        \
  if (name == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle not installed: " << name##_why

TEST(QuantizeImatrixOracle, EveryPresetOnTinyLlamaIsLlamaQuantizes) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_LLAMA_QUANTIZE(oracle);
  const fs::path model = *shared_dir() / "corpus/tiny-llama/tiny-llama-f32.gguf";
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const auto dir = temp_dir("quantize-imatrix-tiny");
  expect_presets_match(model, kPresets, random_importance(*file, 7), dir, *oracle);
  fs::remove_all(dir);
}

// Expert tensors get one slice of the matrix per expert; 8 experts have Mixtral's own rules.
// One test per model, so that ctest runs the two sweeps side by side.
class QuantizeImatrixExperts : public ::testing::TestWithParam<ModelShape> {};

TEST_P(QuantizeImatrixExperts, ExpertModelsUseEachExpertsWeights) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_LLAMA_QUANTIZE(oracle);
  const ModelShape& shape = GetParam();
  const auto dir = temp_dir("quantize-imatrix-moe-" + shape.label());
  const fs::path model = write_test_model(dir, shape);
  ASSERT_FALSE(model.empty());
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const std::span<const char* const> presets =
      shape.n_expert == 8 ? std::span<const char* const>(kExpertPresets) : std::span<const char* const>(kFewExpertPresets);
  expect_presets_match(model, presets, random_importance(*file, shape.n_expert), dir, *oracle);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizeImatrixExperts,
                         ::testing::Values(ModelShape{"llama", 8, 4, false}, ModelShape{"llama", 8, 8, true}),
                         [](const auto& p) { return test_name(p.param.label()); });

// The preset rules that read "has an importance matrix" (Q4_0/Q5_0's first ffn_down layers,
// IQ4_NL/IQ4_XS's, IQ3_XXS's attn_v) take the other branch with one.
TEST(QuantizeImatrixOracle, PresetRulesChangeWithAMatrix) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("quantize-imatrix-rules");
  const fs::path model = write_test_model(dir, {"llama", 16, 0, true});
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const ImportanceMatrix matrix = random_importance(*file, 3);
  const auto type_of = [&](const char* preset, bool with, std::string_view name) {
    QuantizeOptions options;
    options.file_type = *parse_file_type(preset);
    options.pure = false;
    options.dry_run = true;
    if (with) options.importance = &matrix;
    const auto plan = plan_quantize(*file, options);
    EXPECT_TRUE(plan) << plan.error().describe();
    for (const TensorPlan& p : plan->tensors) {
      if (p.tensor->name == name) return p.target;
    }
    return TensorType::F32;
  };
  EXPECT_EQ(type_of("Q4_0", false, "blk.0.ffn_down.weight"), TensorType::Q4_0);
  EXPECT_EQ(type_of("Q4_0", true, "blk.0.ffn_down.weight"), TensorType::Q4_1);
  EXPECT_EQ(type_of("Q5_0", true, "blk.1.ffn_down.weight"), TensorType::Q5_1);
  EXPECT_EQ(type_of("Q5_0", true, "blk.2.ffn_down.weight"), TensorType::Q5_0);
  EXPECT_EQ(type_of("IQ4_XS", false, "blk.0.ffn_down.weight"), TensorType::Q5_K);
  EXPECT_EQ(type_of("IQ4_XS", true, "blk.0.ffn_down.weight"), TensorType::IQ4_XS);
  EXPECT_EQ(type_of("IQ3_XXS", true, "blk.3.ffn_down.weight"), TensorType::IQ3_XXS);
  EXPECT_EQ(type_of("IQ3_XXS", false, "blk.3.ffn_down.weight"), TensorType::Q3_K);
  fs::remove_all(dir);
}

// What llama.cpp refuses with a matrix, we refuse; what it tolerates, we write the same way.
TEST(QuantizeImatrixOracle, IncompleteOrWrongMatricesAsLlamaCpp) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_LLAMA_QUANTIZE(oracle);
  const fs::path model = *shared_dir() / "corpus/tiny-llama/tiny-llama-f32.gguf";
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const auto dir = temp_dir("quantize-imatrix-wrong");
  const ImportanceMatrix full = random_importance(*file, 11);
  const auto without = [&](std::string_view part) {
    ImportanceMatrix m = full;
    std::erase_if(m.entries, [&](const ImportanceEntry& e) { return e.name.find(part) != std::string::npos; });
    return m;
  };
  const auto resized = [&](std::string_view name, size_t size) {
    ImportanceMatrix m = full;
    for (ImportanceEntry& e : m.entries) {
      if (e.name == name) e.values.resize(size, 1.0f);
    }
    return m;
  };
  struct Case {
    const char* what;
    const char* preset;
    ImportanceMatrix matrix;
    bool written;  // llama.cpp writes the file
  };
  ImportanceMatrix not_finite = full;
  not_finite.entries.back().values[3] = std::nanf("");
  const Case cases[] = {
      {"no weights for attn_q: Q4_K_M quantizes it without", "Q4_K_M", without("attn_q"), true},
      {"no weights for token_embd: Q4_K_M", "Q4_K_M", without("token_embd"), true},
      {"token_embd's weights of the wrong size are ignored", "Q4_K_M", resized("token_embd.weight", 17), true},
      {"attn_k's weights of the wrong size", "Q4_K_M", resized("blk.1.attn_k.weight", 512), false},
      {"a value that is not finite", "Q8_0", not_finite, false},
      {"no weights for ffn_up: IQ4_XS", "IQ4_XS", without("ffn_up"), true},
      {"no weights for ffn_gate: Q2_K_S needs them", "Q2_K_S", without("ffn_gate"), false},
      {"no weights for attn_v: IQ2_XXS makes it Q2_K, which needs none", "IQ2_XXS", without("attn_v"), true},
      {"no weights for ffn_gate: IQ2_XXS needs them", "IQ2_XXS", without("ffn_gate"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Outcome o = quantize_both(model, c.preset, c.matrix, dir, *oracle);
    ASSERT_EQ(o.llama_ok, c.written);
    EXPECT_EQ(o.ours_ok, c.written) << o.our_error;
    EXPECT_EQ(o.difference, "");
  }
  fs::remove_all(dir);
}

// --keep-split: one output shard per input shard, tensors in the shards' order (which the preset
// counters follow), the split keys on every shard, as llama_model_quantize with keep_split.
TEST(QuantizeImatrixOracle, KeepSplitWritesTheInputsShards) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_LLAMA_QUANTIZE(oracle);
  const auto dir = temp_dir("quantize-keep-split");
  const fs::path model = write_test_model(dir, {"llama", 8, 0, true});
  auto whole = GgufFile::open(model);
  ASSERT_TRUE(whole);
  // Shards of a few tensors each, cut across layers, in an order unlike llama.cpp's name order.
  auto plan = plan_split(*whole, (dir / "in").string(), SplitLimits{0, 11});
  ASSERT_TRUE(plan) << plan.error().describe();
  ASSERT_GT(plan->shards.size(), 3u);
  ASSERT_TRUE(write_split(*whole, *plan));
  const std::string first = plan->shards.front().path;
  for (const char* preset : {"Q4_K_M", "Q3_K_M", "Q6_K"}) {
    SCOPED_TRACE(preset);
    const CommandResult r = run_gguf({"quantize", first, (dir / "ours.gguf").string(), preset, "--keep-split"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    LlamaQuantizeRequest request;
    request.file_type = *parse_file_type(preset);
    request.keep_split = true;
    // llama_model_quantize appends the shard suffix to the name it gets (the tool strips ".gguf").
    ASSERT_TRUE(oracle->quantize(first, (dir / "llama").string(), request));
    const auto count = static_cast<uint32_t>(plan->shards.size());
    for (uint32_t i = 0; i < count; ++i) {
      const fs::path ours = split_path((dir / "ours").string(), i, count);
      const fs::path theirs = split_path((dir / "llama").string(), i, count);
      ASSERT_TRUE(fs::exists(ours)) << ours;
      EXPECT_EQ(first_difference(ours, theirs), "") << "shard " << i;
      EXPECT_TRUE(read_bytes(ours) == read_bytes(theirs)) << "shard " << i;
      fs::remove(ours);
      fs::remove(theirs);
    }
    EXPECT_NE(r.out.find(split_path((dir / "ours").string(), 0, count)), std::string::npos) << r.out;
  }
  // One input file: llama.cpp still names the single output -00001-of-00001.gguf.
  const CommandResult r = run_gguf({"quantize", model.string(), (dir / "one.gguf").string(), "q8_0", "--keep-split"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "one-00001-of-00001.gguf"));
  EXPECT_FALSE(fs::exists(dir / "one.gguf"));
  fs::remove_all(dir);
}

// llama-imatrix's GGUF form of `m`: sums = values x 2 over counts of 2 per expert (exact in
// floats, so the values read back are m's), with the three imatrix.* keys.
fs::path write_gguf_imatrix(const ImportanceMatrix& m, const GgufFile& model, const fs::path& path) {
  GgufBuilder b;
  (void)b.set("general.type", MetadataValue::string("imatrix"));
  (void)b.set("imatrix.datasets", MetadataValue::string_array(std::vector<std::string>{"calibration.txt"}));
  (void)b.set("imatrix.chunk_count", MetadataValue::of<uint32_t>(42));
  (void)b.set("imatrix.chunk_size", MetadataValue::of<uint32_t>(512));
  for (const ImportanceEntry& e : m.entries) {
    const TensorInfo* t = model.find_tensor(e.name);
    const int64_t experts = t ? t->ne[2] : 1;
    std::vector<float> sums(e.values), counts(static_cast<size_t>(experts), 2.0f);
    for (float& v : sums) v *= 2.0f;
    const auto bytes = [](const std::vector<float>& v) {
      std::vector<std::byte> out(v.size() * sizeof(float));
      std::memcpy(out.data(), v.data(), out.size());
      return out;
    };
    (void)b.add_tensor(e.name + ".in_sum2", TensorType::F32, std::vector<int64_t>{static_cast<int64_t>(sums.size() / counts.size()), experts}, bytes(sums));
    (void)b.add_tensor(e.name + ".counts", TensorType::F32, std::vector<int64_t>{1, experts}, bytes(counts));
  }
  return b.write_file(path) ? path : fs::path{};
}

// The legacy .dat form: sums = values x 4 over 4 calls, then the chunk count and dataset name.
fs::path write_legacy_imatrix(const ImportanceMatrix& m, const fs::path& path) {
  std::vector<std::byte> out;
  const auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  };
  const auto put_i32 = [&](int32_t v) { put(&v, 4); };
  put_i32(static_cast<int32_t>(m.entries.size()));
  for (const ImportanceEntry& e : m.entries) {
    put_i32(static_cast<int32_t>(e.name.size()));
    put(e.name.data(), e.name.size());
    put_i32(4);
    put_i32(static_cast<int32_t>(e.values.size()));
    for (float v : e.values) {
      const float sum = v * 4.0f;
      put(&sum, 4);
    }
  }
  put_i32(17);
  const std::string dataset = "legacy-calibration.txt";
  put_i32(static_cast<int32_t>(dataset.size()));
  put(dataset.data(), dataset.size());
  write_bytes(path, out);
  return path;
}

// gguf quantize --imatrix FILE, both forms, against llama_model_quantize given the values
// llama-quantize reads from them and the overrides it adds (file, dataset, entries, chunks).
TEST(QuantizeImatrixOracle, ImatrixFilesThroughTheCli) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_LLAMA_QUANTIZE(oracle);
  const fs::path model = *shared_dir() / "corpus/tiny-llama/tiny-llama-f32.gguf";
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const auto dir = temp_dir("quantize-imatrix-cli");
  const ImportanceMatrix matrix = random_importance(*file, 21);
  const fs::path gguf_form = write_gguf_imatrix(matrix, *file, dir / "m.gguf");
  const fs::path legacy_form = write_legacy_imatrix(matrix, dir / "m.dat");
  ASSERT_FALSE(gguf_form.empty());
  struct Case {
    fs::path imatrix;
    std::string dataset;
    uint32_t chunks;
    const char* preset;
    std::vector<std::string> extra;
  };
  const Case cases[] = {
      {gguf_form, "calibration.txt", 42, "IQ2_XS", {}},
      {legacy_form, "legacy-calibration.txt", 17, "IQ1_M", {}},
      {gguf_form, "calibration.txt", 42, "Q4_K_M", {"--exclude-weights", "ffn_down", "--exclude-weights", "attn_q"}},
      {legacy_form, "legacy-calibration.txt", 17, "Q3_K_S", {"--include-weights", "blk.1."}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.imatrix.filename().string() + " " + c.preset);
    const fs::path ours = dir / "ours.gguf", theirs = dir / "llama.gguf";
    std::vector<std::string> args = {"quantize", model.string(), ours.string(), c.preset, "--imatrix", c.imatrix.string(),
                                     "--force"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const CommandResult r = run_gguf(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // What llama-quantize hands to llama_model_quantize: the matrix narrowed by the options.
    ImportanceMatrix used = matrix;
    if (c.extra.size() > 1 && c.extra[0] == "--exclude-weights") {
      std::erase_if(used.entries, [](const ImportanceEntry& e) {
        return e.name.find("ffn_down") != std::string::npos || e.name.find("attn_q") != std::string::npos;
      });
    } else if (c.extra.size() > 1) {
      std::erase_if(used.entries, [](const ImportanceEntry& e) { return e.name.find("blk.1.") == std::string::npos; });
    }
    LlamaQuantizeRequest request = request_for(*parse_file_type(c.preset), used, c.imatrix.string());
    request.kv_overrides.insert(request.kv_overrides.begin() + 1, {"quantize.imatrix.dataset", 3, 0, 0, false, c.dataset});
    request.kv_overrides.push_back({"quantize.imatrix.chunks_count", 0, c.chunks, 0, false, {}});
    ASSERT_TRUE(oracle->quantize(model.string(), theirs.string(), request));
    EXPECT_EQ(first_difference(ours, theirs), "");
    EXPECT_TRUE(read_bytes(ours) == read_bytes(theirs)) << "the headers differ";
  }
  // --include-weights with --exclude-weights, or without --imatrix: usage errors.
  EXPECT_EQ(run_gguf({"quantize", model.string(), (dir / "x.gguf").string(), "q4_k_m", "--imatrix", gguf_form.string(),
                      "--include-weights", "a", "--exclude-weights", "b"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"quantize", model.string(), (dir / "x.gguf").string(), "q4_k_m", "--include-weights", "a"}).exit_code, 2);
  // A low-bit preset without a matrix is refused, naming the option; --dry-run shows the plan anyway.
  const CommandResult refused = run_gguf({"quantize", model.string(), (dir / "x.gguf").string(), "iq2_xxs"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--imatrix"), std::string::npos) << refused.err;
  const CommandResult dry = run_gguf({"quantize", model.string(), (dir / "x.gguf").string(), "iq2_xxs", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("needs an importance matrix"), std::string::npos) << dry.out;
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  fs::remove_all(dir);
}

// The outputs run in llama.cpp (node-llama-cpp's JavaScript API): a grouped-query expert model
// (4 experts, 2 used, n_gqa 4) quantized with presets, the low-bit ones with an importance matrix.
TEST(QuantizeImatrixOracle, QuantizedExpertModelRunsInLlamaCpp) {
  GGUFKIT_REQUIRE_SHARED();
  if (const auto missing = node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  const auto dir = temp_dir("quantize-moe-eval");
  const fs::path model = write_test_model(dir, {"llama", 8, 4, false});
  ASSERT_FALSE(model.empty());
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file);
  const fs::path imatrix = write_gguf_imatrix(random_importance(*file, 5), *file, dir / "m.gguf");
  for (const char* preset : {"Q4_K_M", "Q3_K_M", "IQ2_XS", "IQ1_M", "IQ3_XXS", "MXFP4_MOE"}) {
    SCOPED_TRACE(preset);
    const fs::path out = dir / (std::string(preset) + ".gguf");
    const CommandResult q = run_gguf({"quantize", model.string(), out.string(), preset, "--imatrix", imatrix.string()});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    const NodeRun run = run_node_script("split/llama_eval.mjs", {out.string(), "8"});
    if (run.status == 3) GTEST_SKIP() << "skipped: " << run.out;
    ASSERT_EQ(run.status, 0) << run.out;
    const auto doc = nlohmann::json::parse(run.out.substr(run.out.find('{')));
    EXPECT_GT(doc["tokens"].size(), 8u) << "the prompt and generated tokens";
    fs::remove(out);
  }
  fs::remove_all(dir);
}

}  // namespace
