// Real SentencePiece models against SentencePiece itself (Debian's sentencepiece package) and
// llama.cpp: spm_train trains unigram and BPE models, with and without byte fallback, on this
// repository's documentation; the reader must give spm_export_vocab's pieces and scores, and the
// converted vocabulary, loaded by llama.cpp (node-llama-cpp), must tokenize texts exactly as
// spm_encode does (label convert-oracle).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/sentencepiece.h"
#include "ggufkit/writer.h"
#include "hf_tokenizer_fixtures.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;
using test::hf::read_text;
using test::hf::RemovedOnExit;
using test::hf::write_text;

std::optional<std::string> spm_missing() {
  if (test::run_shell("command -v spm_train && command -v spm_encode && command -v spm_export_vocab").status != 0) {
    return "SentencePiece's spm_train, spm_encode and spm_export_vocab are not installed (apt-get install sentencepiece)";
  }
  return std::nullopt;
}

// The training text: the repository's README and docs (every line, as written).
std::string training_text() {
  std::string text = read_text(fs::path(GGUFKIT_SOURCE_DIR) / "README.md");
  for (const char* doc : {"docs/cli.md", "docs/library.md"}) text += read_text(fs::path(GGUFKIT_SOURCE_DIR) / doc);
  return text;
}

// Texts to tokenize: lines of the training text (so that every character is in the vocabulary
// even without byte fallback), some with doubled, leading and trailing spaces.
std::vector<std::string> test_texts(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line) && lines.size() < 60;) {
    if (line.size() >= 20) lines.push_back(line);
  }
  std::vector<std::string> texts = lines;
  for (size_t i = 0; i + 1 < lines.size() && i < 10; i += 2) {
    texts.push_back(" " + lines[i] + "  " + lines[i + 1] + " ");
  }
  texts.push_back("a");
  texts.push_back("  ");
  return texts;
}

struct Trained {
  std::string name;
  fs::path model;
};

struct Options {
  const char* type;
  bool byte_fallback;
};

class SentencePieceOracle : public testing::TestWithParam<Options> {
 protected:
  void SetUp() override {
    if (const auto missing = spm_missing()) GTEST_SKIP() << "skipped: " << *missing;
    dir_ = test::temp_dir(std::string("spm_oracle_") + GetParam().type + (GetParam().byte_fallback ? "_bytes" : ""));
    text_ = training_text();
    write_text(dir_ / "train.txt", text_);
    // Identity normalization and whitespace as written: llama.cpp does neither NFKC nor collapsing.
    // Without byte fallback "\n" is a user-defined piece: llama.cpp needs a newline token (<0x0A>
    // or "\n") to load a SentencePiece vocabulary at all.
    const std::string command = "spm_train --input=" + test::shell_quoted((dir_ / "train.txt").string()) +
                                " --model_prefix=" + test::shell_quoted((dir_ / "m").string()) +
                                " --vocab_size=700 --hard_vocab_limit=false --model_type=" + GetParam().type +
                                " --character_coverage=1.0 --normalization_rule_name=identity"
                                " --remove_extra_whitespaces=false --num_threads=2 --byte_fallback=" +
                                (GetParam().byte_fallback ? std::string("true") : "false --user_defined_symbols=" + test::shell_quoted("\n")) +
                                " >/dev/null 2>&1";
    ASSERT_EQ(test::run_shell(command).status, 0) << command;
    model_ = dir_ / "m.model";
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  fs::path dir_, model_;
  std::string text_;
};

// Every piece and score as spm_export_vocab prints them, and the types SentencePiece gives:
// <unk> UNKNOWN, <s> and </s> CONTROL, <0xNN> BYTE with byte fallback, the rest NORMAL.
TEST_P(SentencePieceOracle, PiecesAndScoresAreSpmExportVocabs) {
  const std::string raw = read_text(model_);
  const auto parsed = parse_sentencepiece_model(std::as_bytes(std::span(raw.data(), raw.size())));
  ASSERT_TRUE(parsed) << parsed.error().describe();
  const auto exported = test::run_shell("spm_export_vocab --model=" + test::shell_quoted(model_.string()) +
                                        " --output_format=vocab 2>/dev/null");
  ASSERT_EQ(exported.status, 0);
  std::istringstream lines(exported.out);
  size_t id = 0, bytes = 0;
  for (std::string line; std::getline(lines, line); ++id) {
    // A piece with a newline ("\n") takes two lines.
    for (std::string more; line.find('\t') == std::string::npos && std::getline(lines, more);) line += "\n" + more;
    const size_t tab = line.rfind('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    ASSERT_LT(id, parsed->pieces.size());
    const SentencePiece& p = parsed->pieces[id];
    EXPECT_EQ(p.piece, line.substr(0, tab)) << id;
    const float score = std::stof(line.substr(tab + 1));
    EXPECT_NEAR(p.score, score, 1e-5 * std::max(1.0f, std::abs(score))) << id << " " << p.piece;
    const bool byte = GetParam().byte_fallback && p.piece.size() == 6 && p.piece.starts_with("<0x");
    bytes += byte ? 1 : 0;
    const SentencePieceType want = id == 0           ? SentencePieceType::unknown
                                   : id < 3          ? SentencePieceType::control
                                   : byte            ? SentencePieceType::byte
                                   : p.piece == "\n" ? SentencePieceType::user_defined
                                                     : SentencePieceType::normal;
    EXPECT_EQ(p.type, want) << id << " " << p.piece;
  }
  EXPECT_EQ(id, parsed->pieces.size());
  EXPECT_EQ(bytes, GetParam().byte_fallback ? 256u : 0u);
  EXPECT_TRUE(parsed->add_dummy_prefix);
}

// The converted vocabulary, loaded by llama.cpp, tokenizes every text as spm_encode does. BPE
// models only: llama.cpp's SentencePiece tokenizer merges by score, as BPE does; a unigram model's
// Viterbi segmentation is not what it computes (llama.cpp loads unigram models of other families
// as its UGM tokenizer, from another converter path).
class SentencePieceLlamaCpp : public SentencePieceOracle {};
TEST_P(SentencePieceLlamaCpp, LlamaCppTokenizesAsSpmEncode) {
  if (const auto missing = test::node_llama_cpp_missing()) GTEST_SKIP() << "skipped: " << *missing;
  const fs::path checkpoint = dir_ / "checkpoint";
  fs::create_directories(checkpoint);
  fs::copy_file(model_, checkpoint / "tokenizer.model");
  write_text(checkpoint / "config.json", R"({"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2})");
  auto meta = convert_hf_tokenizer(checkpoint);
  ASSERT_TRUE(meta) << meta.error().describe();
  GgufBuilder builder;
  ASSERT_TRUE(builder.set("general.architecture", MetadataValue::string("llama")));
  for (const auto& [key, value] : meta->keys) ASSERT_TRUE(builder.set(key, value)) << key;
  const fs::path gguf = dir_ / "vocab.gguf";
  ASSERT_TRUE(builder.write_file(gguf));

  std::vector<std::string> texts = test_texts(text_);
  // With byte fallback any text tokenizes: the shared corpus's llama-spm test texts too (those of
  // one line: spm_encode reads a text per line), emoji, CJK and control characters included.
  if (GetParam().byte_fallback && test::shared_dir()) {
    const std::string raw = read_text(test::hf::vocab_file("llama-spm").string() + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < raw.size();) {
      const size_t next = std::min(raw.find(sep, pos), raw.size());
      const std::string t = raw.substr(pos, next - pos);
      if (!t.empty() && t.find('\n') == std::string::npos && t.find('\r') == std::string::npos) texts.push_back(t);
      pos = next + sep.size();
    }
  }
  std::string joined;
  for (const std::string& t : texts) joined += t + "\n";
  write_text(dir_ / "texts.txt", joined);
  write_text(dir_ / "texts.json", nlohmann::json(texts).dump());
  const auto encoded = test::run_shell("spm_encode --model=" + test::shell_quoted(model_.string()) +
                                       " --output_format=id --input=" + test::shell_quoted((dir_ / "texts.txt").string()) +
                                       " 2>/dev/null");
  ASSERT_EQ(encoded.status, 0);
  std::vector<std::vector<int32_t>> want;
  std::istringstream out(encoded.out);
  for (std::string line; std::getline(out, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    for (int32_t id; ids >> id;) row.push_back(id);
    want.push_back(std::move(row));
  }
  ASSERT_EQ(want.size(), texts.size());

  const auto tokenized = test::hf::llama_tokenize(gguf, (dir_ / "texts.json"));
  if (tokenized.run.status == 3) GTEST_SKIP() << "skipped: node-llama-cpp cannot be imported: " << tokenized.run.out;
  ASSERT_EQ(tokenized.run.status, 0) << tokenized.run.out;
  const nlohmann::json& result = tokenized.result;
  const auto& tokens = result.at("tokens");
  ASSERT_EQ(tokens.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tokens[i].get<std::vector<int32_t>>(), want[i]) << "text " << i << ": " << nlohmann::json(texts[i]).dump();
  }
}

std::string model_name(const testing::TestParamInfo<Options>& param_info) {
  return std::string(param_info.param.type) + (param_info.param.byte_fallback ? "_byte_fallback" : "");
}
INSTANTIATE_TEST_SUITE_P(Models, SentencePieceOracle,
                         testing::Values(Options{"unigram", false}, Options{"unigram", true}, Options{"bpe", false},
                                         Options{"bpe", true}),
                         model_name);
INSTANTIATE_TEST_SUITE_P(Models, SentencePieceLlamaCpp, testing::Values(Options{"bpe", false}, Options{"bpe", true}),
                         model_name);

}  // namespace
}  // namespace ggufkit
