// gguf estimate: exit status and both streams, text and --json, llama-cli's short options, several
// files, and the refusals (one line, exit 2).
#include "model_fixtures.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using ggufkit::test::run_gguf;

const std::filesystem::path& tiny_file() {
  static const std::filesystem::path path = [] {
    const auto dir = ggufkit::test::temp_dir("estimate-cli");
    const ggufkit::test::ModelShape tiny{.name = "tiny", .arch = "llama", .n_vocab = 1000, .n_embd = 256,
                                         .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 512, .ctx_train = 2048};
    ggufkit::test::write_sparse_model(tiny, dir / "tiny.gguf");
    return dir / "tiny.gguf";
  }();
  return path;
}

TEST(EstimateCli, TextTable) {
  const std::string f = tiny_file().string();
  const auto r = run_gguf({"estimate", f, "-c", "4096", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  // KV: 2 layers x 2 streams x 2048 cells x 128 elements of q8_0 (4 blocks of 34 bytes), K and V;
  // output: 1000 logits x 2 sequences x 4 bytes.
  EXPECT_EQ(r.out, f + " · llama\n"
            "  context  4096 cells · 2 sequences of 2048 · batch 2048 · ubatch 512 · flash attention on\n"
            "                               cells  layers      K      V        size           bytes\n"
            "  model (mapped)                                            934.25 KiB          956672\n"
            "  KV cache                    2x2048       2   q8_0   q8_0    2.12 MiB         2228224\n"
            "  context (KV + state)                                        2.12 MiB         2228224\n"
            "  output buffer                                               7.81 KiB            8000\n"
            "  compute buffer (estimated)                                  7.00 MiB         7340032\n"
            "  total                                                      10.04 MiB        10532928\n");
}

TEST(EstimateCli, JsonForSeveralFiles) {
  const std::string f = tiny_file().string();
  const auto r = run_gguf({"estimate", "--json", f, f, "--ctx-size", "512"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const auto one = nlohmann::json{
      {"file", f}, {"architecture", "llama"}, {"assumed_dense", false}, {"n_ctx", 512}, {"n_seq", 1},
      {"n_ctx_seq", 512}, {"n_batch", 512}, {"n_ubatch", 512}, {"flash_attn", true}, {"model_bytes", 956672},
      {"caches", {{{"kind", "kv"}, {"cells", 512}, {"streams", 1}, {"layers", 2}, {"type_k", "f16"}, {"type_v", "f16"},
                   {"k_bytes", 262144}, {"v_bytes", 262144}, {"bytes", 524288}}}},
      {"context_bytes", 524288}, {"output_bytes", 4000}, {"compute_bytes", 5767168}, {"compute_estimated", true},
      {"total_bytes", 7252128}};
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::array({one, one}));
}

TEST(EstimateCli, Refusals) {
  const std::string f = tiny_file().string();
  auto r = run_gguf({"estimate", f, "-c", "1099511627776"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf estimate: --ctx-size 1099511627776: above llama.cpp's limit of 4294967295\n");
  r = run_gguf({"estimate", f, "-ctv", "q8_0", "-fa", "off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + f + ": a quantized V cache requires flash attention [invalid_argument]\n");
  r = run_gguf({"estimate", f, "-ctk", "q4_K"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--cache-type-k: q4_K not in {f32,f16,bf16,q8_0,q4_0,q4_1,iq4_nl,q5_0,q5_1}"), std::string::npos)
      << r.err;
  r = run_gguf({"estimate", (tiny_file().parent_path() / "missing.gguf").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ggufkit::test::lines_of(r.err).size(), 1u) << r.err;
}

}  // namespace

namespace {

// --max-ctx --mem: the context found fits, 256 cells more do not; nothing fitting is exit 1.
TEST(EstimateCli, MaxContextFitsAndTheNextStepDoesNot) {
  const std::string f = tiny_file().string();
  const auto r = run_gguf({"estimate", f, "--max-ctx", "--mem", "7.5MiB", "--json"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const auto found = nlohmann::json::parse(r.out).at(0);
  const uint64_t n_ctx = found.at("n_ctx");
  EXPECT_EQ(found.at("mem_bytes"), 7864320u);
  EXPECT_EQ(found.at("fits"), true);
  EXPECT_EQ(n_ctx % 256, 0u);
  EXPECT_GT(n_ctx, 256u);
  EXPECT_LT(n_ctx, 2048u);  // below the model's context_length: the budget is what stops it
  const auto next = run_gguf({"estimate", f, "-c", std::to_string(n_ctx + 256), "--mem", "7.5MiB", "--json"});
  EXPECT_EQ(next.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(next.out).at(0).at("fits"), false);
  const auto none = run_gguf({"estimate", f, "--max-ctx", "--mem", "1M"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, "gguf estimate: " + f + ": not even 256 cells fit in 1.00 MiB (3.79 MiB needed)\n");
  const auto no_mem = run_gguf({"estimate", f, "--max-ctx"});
  EXPECT_EQ(no_mem.exit_code, 2);
  EXPECT_EQ(no_mem.err, "gguf estimate: --max-ctx needs --mem SIZE, the memory to fit\n");
  const auto bad = run_gguf({"estimate", f, "--mem", "lots"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "gguf estimate: --mem lots: not a size (bytes, or with K, M, G, T: 24GiB, 1.5T)\n");
}

}  // namespace

namespace {

// --presets: each preset's file size is the size gguf quantize writes, its model bytes and total
// what gguf estimate says of the quantized file.
TEST(EstimateCli, PresetsGiveTheFileGgufQuantizeWritesAndItsEstimate) {
  const std::string in = ggufkit::test::sample_model().string();
  const auto r = run_gguf({"estimate", in, "--presets", "--json", "-c", "1024", "--mem", "3M"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto doc = nlohmann::json::parse(r.out).at(0);
  EXPECT_EQ(doc.at("n_ctx"), 1024);
  const auto& presets = doc.at("presets");
  EXPECT_GE(presets.size(), 30u);
  const auto dir = ggufkit::test::temp_dir("estimate-presets");
  size_t checked = 0;
  for (const auto& p : presets) {
    const std::string name = p.at("name");
    if (name != "Q8_0" && name != "Q4_K_M" && name != "F16") continue;
    const auto out = (dir / (name + ".gguf")).string();
    const auto q = run_gguf({"quantize", in, out, name});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_EQ(p.at("file_bytes").get<uint64_t>(), std::filesystem::file_size(out)) << name;
    const auto e = run_gguf({"estimate", out, "--json", "-c", "1024", "--mem", "3M"});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const auto est = nlohmann::json::parse(e.out).at(0);
    EXPECT_EQ(p.at("model_bytes"), est.at("model_bytes")) << name;
    EXPECT_EQ(p.at("total_bytes"), est.at("total_bytes")) << name;
    EXPECT_EQ(p.at("fits"), est.at("fits")) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 3u);
  const auto quantized = run_gguf({"estimate", (dir / "Q8_0.gguf").string(), "--presets"});
  EXPECT_EQ(quantized.exit_code, 2);
  EXPECT_EQ(quantized.out, "");
  EXPECT_EQ(quantized.err, "gguf estimate: " + (dir / "Q8_0.gguf").string() +
                               ": --presets needs an F32, F16 or BF16 model (token_embd.weight is q8_0)\n");
}

}  // namespace

namespace {

// gguf estimate --json of `a` and of `b` (exit 0, nothing on stderr) agree in everything but the file.
void expect_same_figures(const std::string& a, const std::string& b, const std::vector<std::string>& options) {
  std::vector<std::string> args_a{"estimate", a, "--json"}, args_b{"estimate", b, "--json"};
  args_a.insert(args_a.end(), options.begin(), options.end());
  args_b.insert(args_b.end(), options.begin(), options.end());
  const auto ra = run_gguf(args_a), rb = run_gguf(args_b);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(ra.err, "");
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  auto ja = nlohmann::json::parse(ra.out).at(0), jb = nlohmann::json::parse(rb.out).at(0);
  ja.erase("file");
  jb.erase("file");
  EXPECT_EQ(ja, jb);
}

// A metadata-only file (the header without its tensor data, as a download's first bytes) is
// estimated as the whole file: nothing but the header is read.
TEST(EstimateCli, AMetadataOnlyFileGivesTheSameFigures) {
  const ggufkit::test::ModelShape tiny{.name = "tiny", .arch = "llama", .n_vocab = 1000, .n_embd = 256,
                                       .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 512, .ctx_train = 2048};
  const auto b = ggufkit::test::sparse_model_builder(tiny);
  const auto path = ggufkit::test::temp_dir("estimate-header-only") / "header.gguf";
  ggufkit::test::write_sparse(b, path);
  std::filesystem::resize_file(path, b.header_bytes());
  expect_same_figures(path.string(), tiny_file().string(), {});
}

}  // namespace

namespace {

// A split model is estimated from its first shard with every shard's tensors: the same figures as
// the file it was split from.
TEST(EstimateCli, ASplitModelThroughItsFirstShard) {
  const auto dir = ggufkit::test::temp_dir("estimate-split");
  const std::string in = ggufkit::test::sample_model().string();
  const auto split = run_gguf({"split", in, (dir / "m").string(), "--max-tensors", "6"});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const std::string first = (dir / "m-00001-of-00004.gguf").string();
  ASSERT_TRUE(std::filesystem::exists(first)) << split.out;
  expect_same_figures(first, in, {"-c", "2048"});
}

}  // namespace
