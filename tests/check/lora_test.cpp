// gguf check's LoRA pass on adapters and base models built with GgufBuilder: a correct pair
// passes with and without --base; each test breaks one thing and expects exactly its finding.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "ggufkit/reader.h"
#include "tokenizer_rope_lora_fixtures.h"

namespace ggufkit {
namespace {

using test::add_zeros;
using test::check_model;
using test::expect_none;
using test::expect_single;
using test::set;

constexpr std::string_view kLora = "lora.";
constexpr int64_t kVocab = 300;
constexpr int64_t kFeedForward = 128;
constexpr int64_t kRank = 8;

// The base: embedding [64, 300], attn_q [64 in, 64 out], ffn_up [64 in, 128 out].
GgufBuilder base_model() {
  GgufBuilder b;
  test::add_llama_hparams(b);
  add_zeros(b, "token_embd.weight", {test::kEmbedding, kVocab});
  add_zeros(b, "blk.0.attn_q.weight", {test::kEmbedding, test::kEmbedding});
  add_zeros(b, "blk.0.ffn_up.weight", {test::kEmbedding, kFeedForward});
  return b;
}

// Tensor name -> shape, so a test can change one before the adapter is built.
using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes correct_shapes() {
  return {
      // a [n_in, rank], b [rank, n_out]
      {"blk.0.attn_q.weight.lora_a", {test::kEmbedding, kRank}},
      {"blk.0.attn_q.weight.lora_b", {kRank, test::kEmbedding}},
      {"blk.0.ffn_up.weight.lora_a", {test::kEmbedding, kRank}},
      {"blk.0.ffn_up.weight.lora_b", {kRank, kFeedForward}},
      // the embedding the other way round: a [rank, n_vocab], b [rank, n_embd]
      {"token_embd.weight.lora_a", {kRank, kVocab}},
      {"token_embd.weight.lora_b", {kRank, test::kEmbedding}},
  };
}

GgufBuilder adapter(const Shapes& shapes = correct_shapes()) {
  GgufBuilder b;
  set(b, "general.architecture", MetadataValue::string("llama"));
  set(b, "general.type", MetadataValue::string("adapter"));
  set(b, "adapter.type", MetadataValue::string("lora"));
  set(b, "adapter.lora.alpha", MetadataValue::of(16.0f));
  for (const auto& [name, shape] : shapes) add_zeros(b, name, shape);
  return b;
}

// Checks `a` with the base written next to it.
CheckReport check_with_base(const GgufBuilder& a, const GgufBuilder& base = base_model()) {
  CheckOptions options;
  options.base = test::write_model(base, "base");
  // write_model names the directory after the test: write the adapter by hand next to the base.
  const auto adapter_path = options.base->parent_path() / "adapter.gguf";
  WriteOptions write;
  write.sync = false;
  EXPECT_TRUE(a.write_file(adapter_path, write));
  auto report = check_file(adapter_path, options);
  EXPECT_TRUE(report) << (report ? "" : report.error().message);
  return report ? std::move(report).value() : CheckReport{};
}

TEST(CheckLora, CorrectAdapterPassesAloneAndWithItsBase) {
  expect_none(check_model(adapter()), kLora);
  const auto report = check_with_base(adapter());
  expect_none(report, kLora);
}

TEST(CheckLora, ModelWithoutBaseHasNoLoraFindings) { expect_none(check_model(base_model()), kLora); }

TEST(CheckLora, ModelCheckedAsAnAdapterIsAnError) {
  // Only the general.type finding: the model's tensors are not each reported as unexpected.
  expect_single(check_with_base(base_model()), kLora, "lora.not_adapter", Severity::error);
}

TEST(CheckLora, AdapterWithoutGeneralTypeIsAnError) {
  auto b = adapter();
  b.remove("general.type");
  expect_single(check_model(b), kLora, "lora.not_adapter", Severity::error);
}

TEST(CheckLora, AdapterOfAnotherKindIsAnError) {
  auto b = adapter();
  set(b, "adapter.type", MetadataValue::string("ia3"));
  const auto path = test::write_model(b);
  const auto report = check_file(path);
  ASSERT_TRUE(report);
  const Finding f = expect_single(*report, kLora, "lora.not_lora", Severity::error);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(f.subject, "adapter.type");
  EXPECT_EQ(f.offset, file->find("adapter.type")->offset);
}

TEST(CheckLora, AlphaOfAnotherTypeIsAnErrorSayingLlamaCppAborts) {
  for (auto value : {MetadataValue::of(16.0), MetadataValue::of(uint32_t{16}), MetadataValue::string("16")}) {
    auto b = adapter();
    set(b, "adapter.lora.alpha", value);
    const Finding f = expect_single(check_model(b), kLora, "lora.wrong_type", Severity::error);
    EXPECT_EQ(f.subject, "adapter.lora.alpha");
    EXPECT_NE(f.message.find("aborts"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("float32"), std::string::npos) << f.message;
  }
}

TEST(CheckLora, MissingAlphaIsAWarning) {
  auto b = adapter();
  b.remove("adapter.lora.alpha");
  expect_single(check_model(b), kLora, "lora.missing_alpha", Severity::warning);
}

TEST(CheckLora, InvocationTokensMustBeUint32) {
  auto b = adapter();
  set(b, "adapter.alora.invocation_tokens", MetadataValue::array(std::vector<uint32_t>{1, 2, 3}));
  expect_none(check_model(b), kLora);
  set(b, "adapter.alora.invocation_tokens", MetadataValue::array(std::vector<int32_t>{1, 2, 3}));
  expect_single(check_model(b), kLora, "lora.wrong_type", Severity::error);
}

TEST(CheckLora, LoraAWithoutLoraBIsAnError) {
  auto shapes = correct_shapes();
  shapes.erase("blk.0.ffn_up.weight.lora_b");
  const Finding f = expect_single(check_model(adapter(shapes)), kLora, "lora.missing_pair", Severity::error);
  EXPECT_EQ(f.subject, "blk.0.ffn_up.weight.lora_a");
}

TEST(CheckLora, LoraBWithoutLoraAIsAnError) {
  auto shapes = correct_shapes();
  shapes.erase("blk.0.attn_q.weight.lora_a");
  const Finding f = expect_single(check_with_base(adapter(shapes)), kLora, "lora.missing_pair", Severity::error);
  EXPECT_EQ(f.subject, "blk.0.attn_q.weight.lora_b");
}

TEST(CheckLora, DifferentRanksAreAnError) {
  auto shapes = correct_shapes();
  shapes["blk.0.ffn_up.weight.lora_b"] = {kRank / 2, kFeedForward};
  expect_single(check_model(adapter(shapes)), kLora, "lora.rank_mismatch", Severity::error);
}

TEST(CheckLora, UntransposedLoraAIsAnError) {
  auto shapes = correct_shapes();
  shapes["blk.0.ffn_up.weight.lora_a"] = {kRank, test::kEmbedding};
  const Finding f = expect_single(check_model(adapter(shapes)), kLora, "lora.rank_mismatch", Severity::error);
  EXPECT_NE(f.message.find("not transposed"), std::string::npos) << f.message;
}

TEST(CheckLora, EmbeddingPairInTheOrderOfOtherWeightsIsARankMismatch) {
  auto shapes = correct_shapes();
  shapes["token_embd.weight.lora_a"] = {test::kEmbedding, kRank};  // as for a matmul weight: wrong here
  expect_single(check_model(adapter(shapes)), kLora, "lora.rank_mismatch", Severity::error);
}

TEST(CheckLora, OtherTensorsAreAnErrorAndNormsAreIgnored) {
  auto b = adapter();
  add_zeros(b, "blk.0.attn_q.weight.extra", {4});
  expect_single(check_model(b), kLora, "lora.unexpected_tensor", Severity::error);
  auto norms = adapter();
  add_zeros(norms, "blk.0.attn_norm.weight", {test::kEmbedding});
  expect_single(check_model(norms), kLora, "lora.ignored_tensor", Severity::info);
}

TEST(CheckLora, ArchitectureDifferentFromTheBaseIsAnError) {
  auto b = adapter();
  set(b, "general.architecture", MetadataValue::string("qwen2"));
  expect_single(check_with_base(b), kLora, "lora.architecture_mismatch", Severity::error);
}

TEST(CheckLora, PairForATensorTheBaseLacksIsAnError) {
  auto shapes = correct_shapes();
  shapes["blk.5.attn_q.weight.lora_a"] = {test::kEmbedding, kRank};
  shapes["blk.5.attn_q.weight.lora_b"] = {kRank, test::kEmbedding};
  expect_none(check_model(adapter(shapes)), kLora);  // nothing to say without the base
  const Finding f =
      expect_single(check_with_base(adapter(shapes)), kLora, "lora.missing_base_tensor", Severity::error);
  EXPECT_EQ(f.subject, "blk.5.attn_q.weight.lora_a");
}

TEST(CheckLora, PairNotFittingTheBaseIsAnError) {
  auto shapes = correct_shapes();
  shapes["blk.0.ffn_up.weight.lora_b"] = {kRank, 96};  // the base's ffn_up has 128 outputs
  expect_none(check_model(adapter(shapes)), kLora);
  const Finding f = expect_single(check_with_base(adapter(shapes)), kLora, "lora.shape_mismatch", Severity::error);
  EXPECT_EQ(f.subject, "blk.0.ffn_up.weight.lora_a");
}

TEST(CheckLora, EmbeddingPairNotFittingTheBaseIsAnError) {
  auto shapes = correct_shapes();
  shapes["token_embd.weight.lora_a"] = {kRank, kVocab + 1};
  expect_single(check_with_base(adapter(shapes)), kLora, "lora.shape_mismatch", Severity::error);
}

TEST(CheckLora, CliTakesTheBase) {
  const auto base_path = test::write_model(base_model(), "base");
  const auto good_path = base_path.parent_path() / "good.gguf";
  const auto bad_path = base_path.parent_path() / "bad.gguf";
  auto shapes = correct_shapes();
  shapes["blk.0.ffn_up.weight.lora_b"] = {kRank, 96};
  ASSERT_TRUE(adapter().write_file(good_path));
  ASSERT_TRUE(adapter(shapes).write_file(bad_path));
  auto lora_codes = [](const std::string& json_text) {
    std::vector<std::string> codes;
    const auto json = nlohmann::json::parse(json_text);
    for (const auto& f : json.at("findings")) {
      const auto code = f.at("code").get<std::string>();
      if (code.starts_with("lora.")) codes.push_back(code);
    }
    return codes;
  };
  const auto good = test::run_gguf({"check", good_path.string(), "--base", base_path.string(), "--json"});
  EXPECT_EQ(lora_codes(good.out), std::vector<std::string>{}) << good.out << good.err;
  const auto bad = test::run_gguf({"check", bad_path.string(), "--base", base_path.string(), "--json"});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_EQ(lora_codes(bad.out), std::vector<std::string>{"lora.shape_mismatch"}) << bad.out;
}

}  // namespace
}  // namespace ggufkit
