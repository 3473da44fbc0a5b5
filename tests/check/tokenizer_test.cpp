// gguf check's tokenizer pass on small files built with GgufBuilder: a correct SentencePiece
// and a correct BPE vocabulary pass; each test breaks one thing and expects exactly its finding.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <limits>

#include "ggufkit/reader.h"
#include "tokenizer_rope_lora_fixtures.h"

namespace ggufkit {
namespace {

using test::check_model;
using test::expect_none;
using test::expect_single;
using test::set;
using test::spm_model;
using test::spm_vocab;
using test::strings;

constexpr std::string_view kTok = "tokenizer.";

TEST(CheckTokenizer, CorrectSentencePieceModelHasNoFindings) { expect_none(check_model(spm_model()), kTok); }

TEST(CheckTokenizer, CorrectBpeVocabularyHasNoFindings) { expect_none(check_model(test::bpe_model()), kTok); }

TEST(CheckTokenizer, MissingModelIsAnError) {
  auto b = spm_model();
  b.remove("tokenizer.ggml.model");
  expect_single(check_model(b), kTok, "tokenizer.missing_model", Severity::error);
}

TEST(CheckTokenizer, UnknownModelIsAnErrorAtItsKey) {
  auto b = spm_model();
  set(b, "tokenizer.ggml.model", MetadataValue::string("sentencepiece"));
  const auto path = test::write_model(b);
  const auto report = check_file(path);
  ASSERT_TRUE(report);
  const Finding f = expect_single(*report, kTok, "tokenizer.unknown_model", Severity::error);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(f.subject, "tokenizer.ggml.model");
  EXPECT_EQ(f.offset, file->find("tokenizer.ggml.model")->offset);
}

TEST(CheckTokenizer, ModelOfWrongTypeIsAnError) {
  auto b = spm_model();
  set(b, "tokenizer.ggml.model", MetadataValue::of(uint32_t{1}));
  expect_single(check_model(b), kTok, "tokenizer.wrong_type", Severity::error);
}

TEST(CheckTokenizer, UnknownPreTokenizerOfBpeVocabularyIsAnError) {
  auto b = test::bpe_model();
  set(b, "tokenizer.ggml.pre", MetadataValue::string("my-own-regex"));
  const Finding f = expect_single(check_model(b), kTok, "tokenizer.unknown_pre", Severity::error);
  EXPECT_NE(f.message.find("my-own-regex"), std::string::npos);
}

TEST(CheckTokenizer, UnknownPreTokenizerOfSentencePieceVocabularyIsIgnored) {
  // llama.cpp reads the pre-tokenizer for BPE vocabularies only.
  auto b = spm_model();
  set(b, "tokenizer.ggml.pre", MetadataValue::string("my-own-regex"));
  expect_none(check_model(b), kTok);
}

TEST(CheckTokenizer, MissingPreTokenizerOfBpeVocabularyIsAWarning) {
  auto b = test::bpe_model();
  b.remove("tokenizer.ggml.pre");
  expect_single(check_model(b), kTok, "tokenizer.missing_pre", Severity::warning);
}

TEST(CheckTokenizer, PreTokenizerOfWrongTypeIsAnError) {
  auto b = test::bpe_model();
  set(b, "tokenizer.ggml.pre", MetadataValue::of(int32_t{3}));
  expect_single(check_model(b), kTok, "tokenizer.wrong_type", Severity::error);
}

TEST(CheckTokenizer, BpeVocabularyWithoutMergesIsAnError) {
  auto b = test::bpe_model();
  b.remove("tokenizer.ggml.merges");
  expect_single(check_model(b), kTok, "tokenizer.missing_merges", Severity::error);
}

TEST(CheckTokenizer, KimiK2NeedsNoMerges) {
  auto b = test::bpe_model();
  b.remove("tokenizer.ggml.merges");
  set(b, "tokenizer.ggml.pre", MetadataValue::string("kimi-k2"));
  expect_none(check_model(b), kTok);
}

TEST(CheckTokenizer, MalformedMergesAreAWarningCountingThem) {
  for (const std::string bad : {"ab", "a ", " a", ""}) {
    auto b = test::bpe_model();
    set(b, "tokenizer.ggml.merges", strings({"a b", bad, "ab c"}));
    const Finding f = expect_single(check_model(b), kTok, "tokenizer.bad_merge", Severity::warning);
    EXPECT_NE(f.message.find("1 of 3 merges"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("#1"), std::string::npos) << f.message;
  }
}

TEST(CheckTokenizer, MergesOfWrongTypeAreAnError) {
  auto b = test::bpe_model();
  set(b, "tokenizer.ggml.merges", MetadataValue::array(std::vector<int32_t>{1, 2}));
  expect_single(check_model(b), kTok, "tokenizer.wrong_type", Severity::error);
}

TEST(CheckTokenizer, ScoresShorterThanTokensAreAnError) {
  auto v = spm_vocab();
  auto b = spm_model(v);
  v.scores.pop_back();
  set(b, "tokenizer.ggml.scores", MetadataValue::array(v.scores));
  const Finding f = expect_single(check_model(b), kTok, "tokenizer.length_mismatch", Severity::error);
  EXPECT_EQ(f.subject, "tokenizer.ggml.scores");
}

// Issue 29: NaN scores passed; llama.cpp's SentencePiece merges order them with `<`.
TEST(CheckTokenizer, NanScoresAreAnErrorInfiniteOnesAWarning) {
  auto v = spm_vocab();
  v.scores[280] = v.scores[281] = std::numeric_limits<float>::quiet_NaN();
  v.scores[282] = -std::numeric_limits<float>::infinity();
  const CheckReport report = check_model(spm_model(v));
  std::string all;
  for (const Finding& f : report.findings) {
    if (f.code.starts_with(kTok)) all += fmt::format("{} {} [{}] {}\n", severity_name(f.severity), f.code, f.subject, f.message);
  }
  EXPECT_EQ(all,
            "error tokenizer.nan_score [tokenizer.ggml.scores] 2 score(s) are NaN (the first of token 280): llama.cpp's "
            "SentencePiece tokenizer orders its merges by score, and NaN breaks that order (undefined behaviour); "
            "convert the model again from its tokenizer\n"
            "warning tokenizer.infinite_score [tokenizer.ggml.scores] 1 score(s) are infinite (the first of token 282): a "
            "score is a log probability, and an infinite one decides every tokenization it takes part in; convert the "
            "model again from its tokenizer\n");
}

TEST(CheckTokenizer, TokenTypesLongerThanTokensAreAWarning) {
  auto v = spm_vocab();
  auto b = spm_model(v);
  v.types.push_back(1);
  set(b, "tokenizer.ggml.token_type", MetadataValue::array(v.types));
  const Finding f = expect_single(check_model(b), kTok, "tokenizer.length_mismatch", Severity::warning);
  EXPECT_EQ(f.subject, "tokenizer.ggml.token_type");
}

TEST(CheckTokenizer, IntegerScoresAreAccepted) {
  auto v = spm_vocab();
  auto b = spm_model(v);
  set(b, "tokenizer.ggml.scores", MetadataValue::array(std::vector<int32_t>(v.tokens.size(), 0)));
  expect_none(check_model(b), kTok);
}

TEST(CheckTokenizer, TokenTypesAsFloatsAreAnError) {
  auto v = spm_vocab();
  auto b = spm_model(v);
  set(b, "tokenizer.ggml.token_type", MetadataValue::array(std::vector<float>(v.tokens.size(), 1.0f)));
  expect_single(check_model(b), kTok, "tokenizer.wrong_type", Severity::error);
}

TEST(CheckTokenizer, TokenTypeOutsideTheEnumIsAWarning) {
  auto v = spm_vocab();
  v.types[270] = 9;
  const Finding f = expect_single(check_model(spm_model(v)), kTok, "tokenizer.bad_token_type", Severity::warning);
  EXPECT_NE(f.message.find("id 270 with type 9"), std::string::npos) << f.message;
}

TEST(CheckTokenizer, SpecialTokenOutsideTheVocabularyIsAnError) {
  const auto v = spm_vocab();
  for (const std::string key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eom_token_id",
                                "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.seperator_token_id",
                                "tokenizer.ggml.middle_token_id"}) {
    auto b = spm_model(v);
    set(b, key, MetadataValue::of(static_cast<uint32_t>(v.tokens.size())));
    const Finding f =
        expect_single(check_model(b), kTok, "tokenizer.special_token_out_of_range", Severity::error);
    EXPECT_EQ(f.subject, key);
  }
}

TEST(CheckTokenizer, LastTokenIdIsInsideTheVocabulary) {
  const auto v = spm_vocab();
  auto b = spm_model(v);
  set(b, "tokenizer.ggml.padding_token_id", MetadataValue::of(static_cast<uint32_t>(v.tokens.size() - 1)));
  expect_none(check_model(b), kTok);
}

TEST(CheckTokenizer, SpecialTokenIdOfWrongTypeIsAnError) {
  auto b = spm_model();
  set(b, "tokenizer.ggml.bos_token_id", MetadataValue::of(int32_t{1}));
  expect_single(check_model(b), kTok, "tokenizer.wrong_type", Severity::error);
}

TEST(CheckTokenizer, ByteTypedTokenThatIsNotAByteIsAnError) {
  for (const std::string text : {"\xE2\x96\x81w0", "<0x0a>", "<0xG0>", "<0x0A"}) {
    auto v = spm_vocab();
    v.tokens[259] = text;  // the first word token, now of type BYTE
    v.types[259] = 6;
    const Finding f = expect_single(check_model(spm_model(v)), kTok, "tokenizer.bad_byte_token", Severity::error);
    EXPECT_NE(f.message.find("id 259"), std::string::npos) << f.message;
  }
}

TEST(CheckTokenizer, SentencePieceVocabularyMissingAByteTokenIsAWarning) {
  auto v = spm_vocab();
  v.tokens[3 + 0x41] = "\xE2\x96\x81replaced";
  v.types[3 + 0x41] = 1;
  const Finding f =
      expect_single(check_model(spm_model(v)), kTok, "tokenizer.missing_byte_tokens", Severity::warning);
  EXPECT_NE(f.message.find("255 of the 256"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("<0x41>"), std::string::npos) << f.message;
}

TEST(CheckTokenizer, DuplicateTokenIsAnError) {
  auto v = spm_vocab();
  v.tokens[270] = v.tokens[265];
  const Finding f = expect_single(check_model(spm_model(v)), kTok, "tokenizer.duplicate_token", Severity::error);
  EXPECT_NE(f.message.find("ids 265 and 270"), std::string::npos) << f.message;
}

TEST(CheckTokenizer, EmptyTokenIsAWarning) {
  auto v = spm_vocab();
  v.tokens[280] = "";
  v.tokens[290] = "";  // two empty tokens are no duplicate: llama.cpp renames each
  const Finding f = expect_single(check_model(spm_model(v)), kTok, "tokenizer.empty_token", Severity::warning);
  EXPECT_NE(f.message.find("2 tokens"), std::string::npos) << f.message;
}

TEST(CheckTokenizer, EmbeddingWithPaddingRowsIsAnError) {
  // llama.cpp creates token_embd as {n_embd, n_tokens}: padding rows without tokens are refused.
  const auto v = spm_vocab();
  GgufBuilder b = spm_model(v);
  GgufBuilder padded;
  test::add_llama_hparams(padded);
  for (const auto& key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                          "tokenizer.ggml.scores"}) {
    set(padded, key, *b.find(key));
  }
  const auto n = static_cast<int64_t>(v.tokens.size());
  test::add_zeros(padded, "token_embd.weight", {test::kEmbedding, n + 8});
  const auto path = test::write_model(padded);
  const auto report = check_file(path);
  ASSERT_TRUE(report);
  const Finding f = expect_single(*report, kTok, "tokenizer.vocab_size_mismatch", Severity::error);
  EXPECT_EQ(f.subject, "token_embd.weight");
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(f.offset, file->find_tensor("token_embd.weight")->info_offset);
  EXPECT_NE(f.message.find("padding"), std::string::npos) << f.message;
}

TEST(CheckTokenizer, OutputWithFewerRowsThanTokensIsAnError) {
  const auto v = spm_vocab();
  GgufBuilder b;
  test::add_llama_hparams(b);
  set(b, "tokenizer.ggml.model", MetadataValue::string("llama"));
  test::set_vocab(b, v);
  const auto n = static_cast<int64_t>(v.tokens.size());
  test::add_zeros(b, "token_embd.weight", {test::kEmbedding, n});
  test::add_zeros(b, "output.weight", {test::kEmbedding, n - 1});
  const Finding f = expect_single(check_model(b), kTok, "tokenizer.vocab_size_mismatch", Severity::error);
  EXPECT_EQ(f.subject, "output.weight");
}

TEST(CheckTokenizer, OutputSizedOtherwiseByItsArchitectureIsNotCompared) {
  // qwen3vl's output and the draft models' tensors are sized by other vocabularies.
  for (const std::string arch : {"qwen3vl", "eagle3"}) {
    const auto v = spm_vocab();
    GgufBuilder b;
    test::add_llama_hparams(b, arch);
    set(b, "tokenizer.ggml.model", MetadataValue::string("llama"));
    test::set_vocab(b, v);
    const auto n = static_cast<int64_t>(v.tokens.size());
    test::add_zeros(b, "token_embd.weight", {test::kEmbedding, n});
    test::add_zeros(b, "output.weight", {test::kEmbedding, 3072});
    expect_none(check_model(b), kTok);
  }
}

TEST(CheckTokenizer, DeclaredVocabSizeDisagreeingWithTokensIsAWarning) {
  auto b = spm_model();
  set(b, "llama.vocab_size", MetadataValue::of(uint32_t{32000}));
  const Finding f = expect_single(check_model(b), kTok, "tokenizer.vocab_size_mismatch", Severity::warning);
  EXPECT_EQ(f.subject, "llama.vocab_size");
}

TEST(CheckTokenizer, VocablessModelIsSizedByVocabSize) {
  GgufBuilder b;
  test::add_llama_hparams(b);
  set(b, "tokenizer.ggml.model", MetadataValue::string("none"));
  set(b, "llama.vocab_size", MetadataValue::of(uint32_t{100}));
  test::add_zeros(b, "token_embd.weight", {test::kEmbedding, 100});
  expect_none(check_model(b), kTok);
  test::add_zeros(b, "output.weight", {test::kEmbedding, 99});
  expect_single(check_model(b), kTok, "tokenizer.vocab_size_mismatch", Severity::error);
}

TEST(CheckTokenizer, ChatTemplatesAreReportedByTheirSha256) {
  auto b = spm_model();
  // FIPS 180-4's "abc" and two-block vectors.
  set(b, "tokenizer.chat_template", MetadataValue::string("abc"));
  set(b, "tokenizer.chat_template.tool_use",
      MetadataValue::string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"));
  const auto found = test::findings_of(check_model(b), kTok);
  ASSERT_EQ(found.size(), 2u) << test::describe_all(found);
  EXPECT_EQ(found[0].code, "tokenizer.chat_template");
  EXPECT_EQ(found[0].severity, Severity::info);
  EXPECT_EQ(found[0].subject, "tokenizer.chat_template");
  EXPECT_NE(found[0].message.find("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            std::string::npos)
      << found[0].message;
  EXPECT_EQ(found[1].code, "tokenizer.chat_template");
  EXPECT_EQ(found[1].subject, "tokenizer.chat_template.tool_use");
  EXPECT_NE(found[1].message.find("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            std::string::npos)
      << found[1].message;
}

TEST(CheckTokenizer, ChatTemplateOfWrongTypeIsAWarning) {
  auto b = spm_model();
  set(b, "tokenizer.chat_template", MetadataValue::of(uint32_t{7}));
  expect_single(check_model(b), kTok, "tokenizer.bad_chat_template", Severity::warning);
}

TEST(CheckTokenizer, InstructionTunedModelWithoutTemplateIsAWarning) {
  const std::vector<std::pair<std::string, std::string>> names = {
      {"general.name", "Tiny-7B-Instruct"},
      {"general.name", "tiny-2-9b-it"},
      {"general.finetune", "chat"},
      {"general.basename", "Tiny-Instruct-v2"},
  };
  for (const auto& [key, value] : names) {
    auto b = spm_model();
    set(b, key, MetadataValue::string(value));
    expect_single(check_model(b), kTok, "tokenizer.missing_chat_template", Severity::warning);
    set(b, "tokenizer.chat_template", MetadataValue::string("{{ messages }}"));
    expect_single(check_model(b), kTok, "tokenizer.chat_template", Severity::info);
  }
}

TEST(CheckTokenizer, BaseModelNamesNeedNoTemplate) {
  for (const std::string name : {"Italian-base", "Tiny-7B", "chatterbox-base", "Edit-Model"}) {
    auto b = spm_model();
    set(b, "general.name", MetadataValue::string(name));
    expect_none(check_model(b), kTok);
  }
}

TEST(CheckTokenizer, VocabularyOf262kTokensIsCheckedQuickly) {
  // Gemma 3's vocabulary size; timed for the record, correctness asserted.
  auto v = spm_vocab(262144 - 259);
  GgufBuilder b;
  test::add_llama_hparams(b);
  set(b, "tokenizer.ggml.model", MetadataValue::string("llama"));
  test::set_vocab(b, v);
  const auto path = test::write_model(b);
  const auto start = std::chrono::steady_clock::now();
  const auto report = check_file(path);
  const auto elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  std::printf("check_file on a %zu-token vocabulary: %.1f ms\n", v.tokens.size(), elapsed.count());
  ASSERT_TRUE(report);
  expect_none(*report, kTok);
  // The same vocabulary with its last token repeating its first word is caught.
  v.tokens.back() = v.tokens[259];
  set(b, "tokenizer.ggml.tokens", strings(v.tokens));
  const Finding f = expect_single(check_model(b), kTok, "tokenizer.duplicate_token", Severity::error);
  EXPECT_NE(f.message.find(fmt::format("ids 259 and {}", v.tokens.size() - 1)), std::string::npos) << f.message;
}

TEST(CheckTokenizer, AdapterHasNoTokenizerFindings) {
  GgufBuilder b;
  set(b, "general.architecture", MetadataValue::string("llama"));
  set(b, "general.type", MetadataValue::string("adapter"));
  set(b, "adapter.type", MetadataValue::string("lora"));
  set(b, "general.name", MetadataValue::string("Tiny-Instruct-LoRA"));
  expect_none(check_model(b), kTok);
}

}  // namespace
}  // namespace ggufkit
