// gguf convert --outtype PRESET (issue 32, "One pass to a preset"): the converted tensors go
// straight through quantize's rules in one streaming pass. The output must be the bytes of
// `gguf convert --outtype INTERMEDIATE` followed by `gguf quantize` with the same options, the
// intermediate being the checkpoint's own float type (bf16 for a BF16 checkpoint, f32 for F32, f16
// for F16), and nothing but the output may be written. Checked on a llama (256 wide: the k-quants'
// own blocks), Gemma 3 and Mixtral (64 wide: quantize's fallbacks; Mixtral's 8 experts: the MoE
// rules), over Q4_K_M, Q8_0, Q6_K, IQ4_XS with an importance matrix, --pure q4_K and the type
// overrides.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "family_checkpoint.h"
#include "ggufkit/convert.h"
#include "ggufkit/convert_quantized.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {
namespace {

namespace fs = std::filesystem;

// The files directly in `dir`, by name.
std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A legacy (.dat) importance matrix for every quantizable weight of `model`: ne[0] x experts
// values per tensor, pseudo-random positive, ncall 1, with a trailer (chunks, dataset name).
void write_imatrix(const GgufFile& model, const fs::path& path) {
  std::vector<std::pair<std::string, std::vector<float>>> entries;
  uint32_t state = 7;
  for (const TensorInfo& t : model.tensors()) {
    if (t.n_dims < 2) continue;
    std::vector<float> values(static_cast<size_t>(t.ne[0] * t.ne[2]));
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = 0.05f + static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
    }
    entries.emplace_back(std::string(t.name), std::move(values));
  }
  std::ofstream out(path, std::ios::binary);
  const auto put = [&](int32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  put(static_cast<int32_t>(entries.size()));
  for (const auto& [name, values] : entries) {
    put(static_cast<int32_t>(name.size()));
    out.write(name.data(), static_cast<std::streamsize>(name.size()));
    put(1);
    put(static_cast<int32_t>(values.size()));
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  }
  put(10);
  const std::string dataset = "tiny.txt";
  put(static_cast<int32_t>(dataset.size()));
  out.write(dataset.data(), static_cast<std::streamsize>(dataset.size()));
}

// Which --outtype spellings are the converter's own types and which are left to quantize's presets.
TEST(ConvertOwnOutType, LowerCaseGgmlNamesAndFloatTypes) {
  const std::vector<std::pair<std::string, std::optional<TensorType>>> cases = {
      {"f16", TensorType::F16},   {"F16", TensorType::F16},     {"BF16", TensorType::BF16}, {"f32", TensorType::F32},
      {"q8_0", TensorType::Q8_0}, {"q4_K", TensorType::Q4_K},   {"q6_K", TensorType::Q6_K}, {"iq4_xs", TensorType::IQ4_XS},
      {"Q8_0", std::nullopt},     {"q4_k", std::nullopt},       {"Q4_K_M", std::nullopt},   {"IQ4_XS", std::nullopt},
      {"iq2_xs", std::nullopt},   {"15", std::nullopt},         {"", std::nullopt},
  };
  for (const auto& [text, type] : cases) EXPECT_EQ(convert_own_out_type(text), type) << text;
}

struct Checkpoint {
  std::string label;
  fs::path dir;
  std::string intermediate;  // the type the one pass must match
  std::vector<std::string> convert_options;  // for both ways
};

class ConvertPreset : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(temp_dir("convert-preset"));
    checkpoints_ = new std::vector<Checkpoint>();
    TinyLlamaConfig config;
    config.vocab_size = 1024;  // fast: no tokenizer (--no-tokenizer); the families have theirs
    config.hidden_size = 256;
    config.intermediate_size = 256;
    config.dtype = CheckpointDtype::BF16;
    const TinyLlama llama = make_tiny_llama(config);
    const fs::path llama_dir = *root_ / "llama";
    if (write_checkpoint(llama, llama_dir).empty()) checkpoints_->push_back({"llama", llama_dir, "bf16", {"--no-tokenizer"}});
    for (const auto& [family, dtype, intermediate] :
         {std::tuple{TinyFamily::gemma3, CheckpointDtype::F32, "f32"}, std::tuple{TinyFamily::mixtral, CheckpointDtype::F16, "f16"}}) {
      const TinyHfModel model = make_tiny_family(family, 11, dtype);
      if (!model.tokenizer_missing().empty()) continue;
      const fs::path dir = *root_ / family_id(family);
      if (write_hf_checkpoint(model, dir).empty()) checkpoints_->push_back({family_id(family), dir, intermediate, {}});
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete checkpoints_;
  }
  void SetUp() override {
    if (checkpoints_->size() < 3) GTEST_SKIP() << "skipped: the tokenizer packages of the oracle install are missing";
  }

  // The reference: gguf convert to the intermediate, then gguf quantize (both checked), into `work`.
  static std::vector<std::byte> two_steps(const Checkpoint& c, const fs::path& work, const std::string& preset,
                                          const std::vector<std::string>& options) {
    const fs::path intermediate = work / ("intermediate-" + c.intermediate + ".gguf");
    if (!fs::exists(intermediate)) {
      std::vector<std::string> args{"convert", c.dir.string(), intermediate.string(), "--outtype", c.intermediate, "--quiet"};
      args.insert(args.end(), c.convert_options.begin(), c.convert_options.end());
      const CommandResult r = run_gguf(args);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, intermediate.string() + "\n");
      EXPECT_EQ(r.err, "");
    }
    const fs::path quantized = work / "quantized.gguf";
    std::vector<std::string> args{"quantize", intermediate.string(), quantized.string(), preset, "--quiet", "--force"};
    args.insert(args.end(), options.begin(), options.end());
    const CommandResult r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, quantized.string() + "\n");
    EXPECT_EQ(r.err, "");
    return read_bytes(quantized);
  }

  // gguf convert --outtype PRESET into an empty directory: the output must be the directory's only
  // file, and the checkpoint directory untouched.
  static std::vector<std::byte> one_pass(const Checkpoint& c, const fs::path& out_dir, const std::string& preset,
                                         const std::vector<std::string>& options) {
    fs::remove_all(out_dir);
    fs::create_directories(out_dir);
    const auto before = files_in(c.dir);
    const fs::path output = out_dir / "model.gguf";
    std::vector<std::string> args{"convert", c.dir.string(), output.string(), "--outtype", preset, "--quiet"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), c.convert_options.begin(), c.convert_options.end());
    const CommandResult r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, output.string() + "\n");
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(files_in(out_dir), std::set<std::string>{"model.gguf"});
    EXPECT_EQ(files_in(c.dir), before);
    return fs::exists(output) ? read_bytes(output) : std::vector<std::byte>{};
  }

  static inline fs::path* root_ = nullptr;
  static inline std::vector<Checkpoint>* checkpoints_ = nullptr;
};

TEST_F(ConvertPreset, SameBytesAsConvertThenQuantize) {
  struct Case {
    std::string preset;
    std::vector<std::string> options;
  };
  const std::vector<Case> cases = {
      {"Q4_K_M", {}},
      {"Q8_0", {}},
      {"Q6_K", {}},
      {"q4_K", {"--pure"}},
      {"Q4_K_S", {"--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0", "--tensor-type", "ffn_down=q5_K",
                  "--override-kv", "general.name=str:tiny"}},
      {"Q5_K_M", {"--leave-output-tensor"}},
  };
  for (const Checkpoint& c : *checkpoints_) {
    const fs::path work = *root_ / ("work-" + c.label);
    fs::create_directories(work);
    for (const Case& k : cases) {
      std::string options;
      for (const auto& o : k.options) options += " " + o;
      SCOPED_TRACE(c.label + " --outtype " + k.preset + options);
      const auto expected = two_steps(c, work, k.preset, k.options);
      const auto got = one_pass(c, *root_ / "out", k.preset, k.options);
      ASSERT_FALSE(expected.empty());
      EXPECT_TRUE(got == expected) << "sizes " << got.size() << " and " << expected.size();
    }
  }
}

TEST_F(ConvertPreset, ImportanceMatrixIQ4_XS) {
  for (const Checkpoint& c : *checkpoints_) {
    SCOPED_TRACE(c.label);
    const fs::path work = *root_ / ("imatrix-" + c.label);
    fs::create_directories(work);
    const fs::path intermediate = work / "intermediate.gguf";
    std::vector<std::string> args{"convert", c.dir.string(), intermediate.string(), "--outtype", c.intermediate, "--quiet"};
    args.insert(args.end(), c.convert_options.begin(), c.convert_options.end());
    const CommandResult r = run_gguf(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto file = GgufFile::open(intermediate);
    ASSERT_TRUE(file) << file.error().describe();
    const fs::path imatrix = work / "imatrix.dat";
    write_imatrix(*file, imatrix);
    const std::vector<std::string> options{"--imatrix", imatrix.string()};
    const auto expected = two_steps(c, work, "IQ4_XS", options);
    EXPECT_TRUE(one_pass(c, *root_ / "out", "IQ4_XS", options) == expected);
  }
}

// The dry run plans the one pass: every tensor with the type and size quantize gives it, the file
// type and the data size of the two-step file; nothing is written.
TEST_F(ConvertPreset, DryRunShowsTheFinalTypes) {
  const Checkpoint& c = (*checkpoints_)[2];  // mixtral: experts, fallbacks
  const fs::path work = *root_ / "dry-run";
  fs::create_directories(work);
  const auto expected_bytes = two_steps(c, work, "Q4_K_M", {});
  const auto expected = GgufFile::parse(expected_bytes);
  ASSERT_TRUE(expected) << expected.error().describe();
  const fs::path output = work / "never.gguf";
  const CommandResult json = run_gguf({"convert", c.dir.string(), output.string(), "--outtype", "Q4_K_M", "--dry-run", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.err, "");
  EXPECT_FALSE(fs::exists(output));
  const auto plan = nlohmann::json::parse(json.out);
  EXPECT_EQ(plan["intermediate"], "f16");
  EXPECT_EQ(plan["file_type"], *expected->get("general.file_type")->as_uint());
  EXPECT_EQ(plan["tensor_bytes"], expected->file_size() - expected->data_offset());
  ASSERT_EQ(plan["tensors"].size(), expected->tensors().size());
  size_t not_default = 0;
  for (const auto& t : plan["tensors"]) {
    const TensorInfo* info = expected->find_tensor(t["name"].get<std::string>());
    ASSERT_NE(info, nullptr) << t["name"];
    EXPECT_EQ(t["type"], std::string(type_name(info->type))) << t["name"];
    EXPECT_EQ(t["bytes"], info->size) << t["name"];
    if (info->type != TensorType::Q4_K && info->type != TensorType::F32) ++not_default;
  }
  EXPECT_GT(not_default, 0u);  // the preset's rules and fallbacks show
  const CommandResult text = run_gguf({"convert", c.dir.string(), output.string(), "--outtype", "Q4_K_M", "--dry-run"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.err, "");
  EXPECT_NE(text.out.find("\nquantized from: f16 (gguf convert --outtype f16, then gguf quantize)\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(fmt::format("tensor data: "), 0), std::string::npos);
  EXPECT_NE(text.out.find(fmt::format("({} bytes)\n", expected->file_size() - expected->data_offset())), std::string::npos) << text.out;
  EXPECT_FALSE(fs::exists(output));
}

// The converter's own lower-case types keep convert_hf_to_gguf.py's meaning (q8_0: every weight
// matrix q8_0 from the checkpoint's values, general.file_type where the converter writes it);
// the upper-case preset is llama-quantize's Q8_0.
TEST_F(ConvertPreset, LowerCaseTypesKeepTheConvertersMeaning) {
  const Checkpoint& c = (*checkpoints_)[0];
  const fs::path work = *root_ / "q8_0";
  fs::create_directories(work);
  const fs::path library = work / "library.gguf";
  ConvertOptions options;
  options.out_type = TensorType::Q8_0;
  options.tokenizer = false;
  ASSERT_TRUE(convert_model(c.dir, library, options));
  const auto converter = one_pass(c, *root_ / "out", "q8_0", {});
  EXPECT_TRUE(converter == read_bytes(library));
  const auto preset = one_pass(c, *root_ / "out", "Q8_0", {});
  EXPECT_TRUE(preset == two_steps(c, work, "Q8_0", {}));
  EXPECT_FALSE(preset == converter);
}

// While the one pass writes, the output's directory holds one file (the output under its temporary
// name), never an intermediate; the library's plan names the intermediate and the final types; a
// failure (cancelled) leaves nothing.
TEST_F(ConvertPreset, LibraryWritesOneFileAtATime) {
  const Checkpoint& c = (*checkpoints_)[1];  // gemma3, F32: an f32 intermediate
  const fs::path out_dir = *root_ / "library";
  fs::remove_all(out_dir);
  fs::create_directories(out_dir);
  QuantizeOptions quantize;
  ASSERT_TRUE(set_quantize_target("Q4_K_M", quantize));
  quantize.pure = false;
  ConvertOptions options;
  auto plan = plan_convert_quantized(c.dir, options, quantize);
  ASSERT_TRUE(plan) << plan.error().describe();
  EXPECT_EQ(plan->intermediate, TensorType::F32);
  EXPECT_EQ(plan->convert.tensors.size(), plan->quantize.tensors.size());
  std::vector<size_t> seen;
  size_t calls = 0;
  options.progress = [&](size_t done, size_t all) {
    ++calls;
    EXPECT_EQ(all, plan->quantize.tensors.size());
    EXPECT_EQ(done, calls);
    seen.push_back(files_in(out_dir).size());
  };
  const fs::path output = out_dir / "model.gguf";
  ASSERT_TRUE(write_convert_quantized(*plan, output, options, quantize));
  EXPECT_EQ(seen, std::vector<size_t>(plan->quantize.tensors.size(), 1));
  EXPECT_EQ(files_in(out_dir), std::set<std::string>{"model.gguf"});
  const auto written = GgufFile::open(output);
  ASSERT_TRUE(written) << written.error().describe();
  ASSERT_EQ(written->tensors().size(), plan->quantize.tensors.size());
  for (size_t i = 0; i < plan->quantize.tensors.size(); ++i) {
    EXPECT_EQ(written->tensors()[i].name, plan->quantize.tensors[i].tensor->name);
    EXPECT_EQ(written->tensors()[i].type, plan->quantize.tensors[i].target);
  }

  fs::remove(output);
  std::atomic<bool> cancel{false};
  options.cancel = &cancel;
  options.progress = [&](size_t, size_t) { cancel = true; };
  const auto cancelled = write_convert_quantized(*plan, output, options, quantize);
  ASSERT_FALSE(cancelled);
  EXPECT_EQ(cancelled.error().code, ErrorCode::cancelled);
  EXPECT_TRUE(files_in(out_dir).empty());
}

TEST_F(ConvertPreset, Refusals) {
  const Checkpoint& c = (*checkpoints_)[0];
  const fs::path out_dir = *root_ / "refused";
  fs::create_directories(out_dir);
  const std::string output = (out_dir / "x.gguf").string();
  struct Refusal {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Refusal> refusals = {
      {{"--outtype", "Q9_Z"},
       "gguf: convert: 'Q9_Z' is not an output type (f32, f16, bf16, q8_0, a type ggufkit quantizes without an "
       "importance matrix: q4_0, q4_K, q6_K..., or a quantization preset: Q4_K_M, Q8_0, IQ4_XS...)\n"},
      {{"--outtype", "Q4_K_M", "--intermediate", "q8_0"}, "gguf: convert: --intermediate 'q8_0' is not f32, f16 or bf16\n"},
      {{"--outtype", "f16", "--intermediate", "bf16"},
       "gguf: convert: --intermediate applies to a quantization preset, not to --outtype f16\n"},
      {{"--outtype", "Q4_K_M", "--tensor-type", "attn_q=nope"}, ""},
      {{"--outtype", "IQ2_XS"},
       "gguf: " + c.dir.string() + ": 'blk.0.attn_k.weight': the tensor would be iq2_xs, which needs an importance "
       "matrix (--imatrix) [invalid_argument]\n"},
  };
  for (const Refusal& r : refusals) {
    std::vector<std::string> args{"convert", c.dir.string(), output};
    args.insert(args.end(), r.args.begin(), r.args.end());
    args.insert(args.end(), c.convert_options.begin(), c.convert_options.end());
    const CommandResult run = run_gguf(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_EQ(run.out, "");
    if (!r.err.empty()) {
      EXPECT_EQ(run.err, r.err);
    }
    EXPECT_EQ(std::ranges::count(run.err, '\n'), 1) << run.err;
    EXPECT_TRUE(files_in(out_dir).empty());
  }
}

}  // namespace
}  // namespace ggufkit::test
