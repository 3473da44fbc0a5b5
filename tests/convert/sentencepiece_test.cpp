// SentencePiece tokenizer.model: the protobuf reader on hand-encoded ModelProtos (every field it
// reads, the fields it skips, each malformation refused with the record and the offset), and the
// converter's _create_vocab_sentencepiece rules (padding, added_tokens.json, added_tokens_decoder,
// precedence over tokenizer.json).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/sentencepiece.h"
#include "hf_tokenizer_fixtures.h"
#include "sentencepiece_fixtures.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using test::hf::find_key;
using test::hf::key_names;
using test::hf::numbers_of;
using test::hf::strings_of;
using test::hf::write_text;
using test::spm::Proto;

TEST(SentencePieceReader, ReadsPiecesScoresTypesAndTheDummyPrefix) {
  Proto model;
  model.piece("<unk>", 0.0f, 2).piece("<s>", 0.0f, 3).piece("\xE2\x96\x81the", -1.5f, 0).piece("x", -2.25f, 4);
  model.piece("<0x0A>", 0.0f, 6).piece("u", -7.0f, 5);
  model.unknown_field();                          // trainer_spec and the like: skipped
  model.normalizer(/*add_dummy_prefix=*/false);  // NormalizerSpec.add_dummy_prefix = 3
  const auto parsed = parse_sentencepiece_model(model.bytes());
  ASSERT_TRUE(parsed) << parsed.error().describe();
  ASSERT_EQ(parsed->pieces.size(), 6u);
  const std::vector<std::string> texts{"<unk>", "<s>", "\xE2\x96\x81the", "x", "<0x0A>", "u"};
  const std::vector<float> scores{0.0f, 0.0f, -1.5f, -2.25f, 0.0f, -7.0f};
  const std::vector<SentencePieceType> types{SentencePieceType::unknown, SentencePieceType::control,
                                             SentencePieceType::normal,  SentencePieceType::user_defined,
                                             SentencePieceType::byte,    SentencePieceType::unused};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(parsed->pieces[i].piece, texts[i]) << i;
    EXPECT_EQ(parsed->pieces[i].score, scores[i]) << i;
    EXPECT_EQ(parsed->pieces[i].type, types[i]) << i;
  }
  EXPECT_FALSE(parsed->add_dummy_prefix);
  Proto plain;
  plain.piece("a", -1.0f, 0);
  const auto defaults = parse_sentencepiece_model(plain.bytes());
  ASSERT_TRUE(defaults);
  EXPECT_TRUE(defaults->add_dummy_prefix);
}

// Each malformation: the error's code, offset and message.
TEST(SentencePieceReader, MalformedModelsAreRefusedWithTheOffset) {
  const auto refused = [](const std::vector<uint8_t>& raw) {
    std::vector<std::byte> b;
    for (const uint8_t c : raw) b.push_back(static_cast<std::byte>(c));
    const auto r = parse_sentencepiece_model(b);
    EXPECT_FALSE(r);
    return r ? Error{} : r.error();
  };
  struct Case {
    std::vector<uint8_t> bytes;
    uint64_t offset;
    std::string message;
  };
  const std::vector<Case> cases{
      {{}, 0, "no pieces: not a SentencePiece model"},
      {{0x0A}, 1, "pieces[0]: the varint is cut off by the end"},
      {{0x0A, 0x05, 0x0A, 0x01}, 2, "pieces[0]: 5 bytes, but only 2 remain"},
      {{0x0A, 0x03, 0x0A, 0x05, 0x61}, 4, "pieces[0].piece: 5 bytes, but only 1 remain"},
      {{0x0A, 0x03, 0x0A, 0x01, 0xFF}, 4, "pieces[0].piece is not UTF-8"},
      {{0x0A, 0x02, 0x18, 0x07}, 2, "pieces[0].type is 7 (1 to 6: NORMAL ... BYTE)"},
      {{0x0A, 0x02, 0x15, 0x00}, 3, "pieces[0].score: 4 bytes, but only 1 remain"},
      {{0x0A, 0x02, 0x10, 0x01}, 2, "pieces[0].score: wire type 0 where 5 is expected"},
      {{0x08, 0x01}, 0, "pieces[0]: wire type 0 where 2 is expected"},
      {{0x13}, 1, "ModelProto: wire type 3 (groups are not used by SentencePiece)"},
      {{0x00}, 0, "ModelProto: field number 0 or too large"},
      {{0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}, 1, "ModelProto: a varint longer than 10 bytes"},
  };
  for (const Case& c : cases) {
    const Error e = refused(c.bytes);
    EXPECT_EQ(e.code, ErrorCode::bad_header) << c.message;
    EXPECT_EQ(e.offset, c.offset) << c.message;
    EXPECT_EQ(e.subject, "tokenizer.model") << c.message;
    EXPECT_EQ(e.message, c.message);
  }
}

class SentencePieceVocab : public testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("sentencepiece_vocab"); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void write_model(const Proto& p) {
    const auto b = p.bytes();
    test::write_bytes(dir_ / "tokenizer.model", std::vector<std::byte>(b.begin(), b.end()));
  }
  std::filesystem::path dir_;
};

// _create_vocab_sentencepiece: config.json's vocab_size pads with [PAD{i}] (score -10000,
// UNUSED) and cuts what is past it; USER_DEFINED pieces become NORMAL; added_tokens.json
// (USER_DEFINED, -1000) then added_tokens_decoder (special or special-looking: CONTROL, else
// USER_DEFINED with U+2581 as a space; -1000) over them, ids past the vocabulary ignored;
// tokenizer.json's vocabulary is not used, but its added tokens and post-processor are
// (SpecialVocab), as are tokenizer_config.json's flags and special tokens.
TEST_F(SentencePieceVocab, PiecesPaddingAddedTokensAndSpecialVocab) {
  Proto model;
  model.piece("<unk>", 0.0f, 2).piece("<s>", 0.0f, 3).piece("</s>", 0.0f, 3).piece("\xE2\x96\x81" "a", -1.0f, 0);
  model.piece("<0x41>", 0.0f, 6).piece("ud", -3.0f, 4).piece("un", 0.0f, 5).piece("cut", -4.0f, 0);
  write_model(model);
  write_text(dir_ / "config.json", R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 7, "bos_token_id": 1,
                                       "eos_token_id": 2})");
  write_text(dir_ / "added_tokens.json", R"({"<extra>": 5, "<far>": 40})");
  write_text(dir_ / "tokenizer_config.json", R"({
    "add_bos_token": true, "add_eos_token": false,
    "added_tokens_decoder": {"6": {"content": "my\u2581word", "special": false},
                             "2": {"content": "</s>", "special": true},
                             "99": {"content": "<none>", "special": true}}})");
  // A tokenizer.json whose vocabulary would be read otherwise: not used.
  write_text(dir_ / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"zzz": 0}, "merges": []}})");
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(key_names(*meta), (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre",
                                                        "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                                        "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                                                        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token",
                                                        "tokenizer.ggml.add_eos_token"}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.model")->view().as_string(), "llama");
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.pre")->view().as_string(), "default");
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view()),
            (std::vector<std::string>{"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "<0x41>", "<extra>", "my word"}));
  EXPECT_EQ(numbers_of<float>(find_key(*meta, "tokenizer.ggml.scores")->view()),
            (std::vector<float>{0.0f, 0.0f, -1000.0f, -1.0f, 0.0f, -1000.0f, -1000.0f}));
  EXPECT_EQ(numbers_of<int32_t>(find_key(*meta, "tokenizer.ggml.token_type")->view()),
            (std::vector<int32_t>{2, 3, 3, 1, 6, 4, 4}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.bos_token_id")->view().get<uint32_t>(), 1u);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.eos_token_id")->view().get<uint32_t>(), 2u);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_bos_token")->view().get<bool>(), true);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_eos_token")->view().get<bool>(), false);

  // Without vocab_size in config.json: the model's own size; past it, [PAD{i}] entries.
  write_text(dir_ / "config.json", R"({"architectures": ["MistralForCausalLM"], "vocab_size": 10})");
  std::filesystem::remove(dir_ / "added_tokens.json");
  std::filesystem::remove(dir_ / "tokenizer_config.json");
  meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view()),
            (std::vector<std::string>{"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "<0x41>", "ud", "un", "cut", "[PAD8]",
                                      "[PAD9]"}));
  EXPECT_EQ(numbers_of<float>(find_key(*meta, "tokenizer.ggml.scores")->view()),
            (std::vector<float>{0.0f, 0.0f, 0.0f, -1.0f, 0.0f, -3.0f, 0.0f, -4.0f, -10000.0f, -10000.0f}));
  EXPECT_EQ(numbers_of<int32_t>(find_key(*meta, "tokenizer.ggml.token_type")->view()),
            (std::vector<int32_t>{2, 3, 3, 1, 6, 1, 5, 1, 5, 5}));
}

// LlamaModel.set_vocab's rules by vocab_size: CodeLlama's second special vocabulary after the first
// (prefix, suffix and middle have no writer in gguf-py: only eot is written, as llama.cpp's
// converter writes it); Granite's small models without BOS (the key replaced where it was).
TEST_F(SentencePieceVocab, CodeLlamaAndGraniteVocabularySizeRules) {
  Proto model;
  model.piece("<unk>", 0.0f, 2).piece("<s>", 0.0f, 3).piece("</s>", 0.0f, 3).piece("a", -1.0f, 0);
  write_model(model);
  write_text(dir_ / "tokenizer_config.json", R"({"add_bos_token": true, "add_eos_token": false})");
  write_text(dir_ / "config.json", R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 32016, "bos_token_id": 1})");
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(key_names(*meta), (std::vector<std::string>{
                                  "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                  "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                                  "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                  "tokenizer.ggml.eot_token_id"}));
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view()).size(), 32016u);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.eot_token_id")->view().get<uint32_t>(), 32010u);
  write_text(dir_ / "config.json", R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 49152, "bos_token_id": 1})");
  meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(key_names(*meta), (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre",
                                                        "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                                        "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                                                        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_bos_token")->view().get<bool>(), false);
}

// Refusals name the file: a broken tokenizer.model (the offset too), a vocab_size that is not a
// count, a non-integer id in added_tokens.json or added_tokens_decoder.
TEST_F(SentencePieceVocab, BadFilesAreRefusedWithTheFile) {
  Proto model;
  model.piece("<unk>", 0.0f, 2).piece("a", -1.0f, 0);
  std::vector<std::byte> broken = model.bytes();
  broken.push_back(std::byte{0x0A});
  test::write_bytes(dir_ / "tokenizer.model", broken);
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_FALSE(meta);
  EXPECT_EQ(meta.error().file, "tokenizer.model");
  EXPECT_EQ(meta.error().offset, broken.size());
  EXPECT_EQ(meta.error().message, "pieces[2]: the varint is cut off by the end");
  write_model(model);
  const auto refusal = [&](const std::string& file, const std::string& text) {
    write_text(dir_ / file, text);
    auto m = convert_hf_tokenizer(dir_);
    EXPECT_FALSE(m) << file;
    if (!m) {
      EXPECT_EQ(m.error().file, file) << m.error().message;
    }
    std::filesystem::remove(dir_ / file);
    return m ? std::string{} : m.error().message;
  };
  EXPECT_EQ(refusal("config.json", R"({"vocab_size": -3})"), "vocab_size is not a token count (0 to 16777216)");
  EXPECT_EQ(refusal("added_tokens.json", R"({"<x>": "5"})"), "the id of \"<x>\" is not a non-negative integer");
  EXPECT_EQ(refusal("tokenizer_config.json", R"({"added_tokens_decoder": {"x": {"content": "<x>"}}})"),
            "added_tokens_decoder[\"x\"] needs an integer id and a string content");
  // Neither tokenizer.model nor tokenizer.json.
  std::filesystem::remove(dir_ / "tokenizer.model");
  meta = convert_hf_tokenizer(dir_);
  ASSERT_FALSE(meta);
  EXPECT_EQ(meta.error().code, ErrorCode::io_error);
  EXPECT_EQ(meta.error().file, "tokenizer.json");
}

}  // namespace
}  // namespace ggufkit
