// `gguf info`: text and JSON, one file or several. Expected values come from the library's view of
// the file (the CLI must print what the file says) and from facts known outside ggufkit: the
// shared README (tiny-llama shape, q4_k_m type mix), llama.h (file type 15 is MOSTLY_Q4_K_M) and
// tools/make_sample.cpp (the sample's shape).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ggufkit/ggufkit.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::CommandResult;
using ggufkit::test::lines_of;
using ggufkit::test::run_gguf;
using ggufkit::test::sample_model;
using ggufkit::test::shared_dir;
using ggufkit::test::temp_dir;
using nlohmann::json;

// The line of a text report whose label (after the indentation) is `label`; "" when absent.
std::string labelled_line(const std::string& report, const std::string& label) {
  for (const std::string& line : lines_of(report)) {
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, label.size() + 1, label + " ") == 0) return line;
  }
  return {};
}

// "a · b · c" -> {"a", "b", "c"}
std::vector<std::string> dot_separated(const std::string& s) {
  std::vector<std::string> out;
  const std::string sep = " · ";
  size_t at = 0;
  for (;;) {
    const size_t next = s.find(sep, at);
    out.push_back(s.substr(at, next - at));
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  return out;
}

// After the label: "  types         q4_K 12 · ..." -> "q4_K 12 · ..."
std::string value_after_label(const std::string& line, const std::string& label) {
  const size_t at = line.find(label);
  if (at == std::string::npos) return {};
  const size_t value = line.find_first_not_of(' ', at + label.size());
  return value == std::string::npos ? std::string() : line.substr(value);
}

// Binary units: 1 KiB = 1024 bytes, two decimals.
std::string binary_size(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.2f} KiB", static_cast<double>(bytes) / 1024.0);
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// Facts about a model known independently of ggufkit.
struct KnownModel {
  fs::path path;
  std::string name;
  uint64_t file_type;
  std::string file_type_name;
  std::string type_line;  // tensors per type, most elements first
  std::map<std::string, uint64_t> hyperparameters;
  uint64_t parameters;
  uint64_t tokens;
};

KnownModel the_sample() {
  // tools/make_sample.cpp: 64 wide, 2 layers, 4 heads / 2 KV heads, FF 192, context 256, 512 tokens.
  // Parameters: 512*64 embedding + 64 output norm + 2 * (2*64 norms + 2*64*64 Q/O + 2*64*32 K/V + 3*64*192 FFN).
  return {sample_model(), "ggufkit tiny sample", 1, "MOSTLY_F16", "f16 15 · f32 5",
          {{"context", 256}, {"embedding", 64}, {"layers", 2}, {"heads", 4}, {"kv heads", 2}, {"feed-forward", 192}},
          131392, 512};
}

std::optional<KnownModel> the_q4_k_m() {
  if (!shared_dir()) return std::nullopt;
  // The shared README: 2 layers, embedding 256, 4 heads / 2 KV heads, FF 768, 4096 tokens, tied
  // output; q4_k_m holds 12 q4_K, 3 q6_K and 5 f32 tensors. llama.h: 15 = MOSTLY_Q4_K_M.
  // Parameters: 4096*256 + 256 + 2 * (2*256 + 2*256*256 + 2*256*128 + 3*256*768).
  return KnownModel{*shared_dir() / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf",
                    "",
                    15,
                    "MOSTLY_Q4_K_M",
                    "q4_K 12 · q6_K 3 · f32 5",
                    {{"embedding", 256}, {"layers", 2}, {"heads", 4}, {"kv heads", 2}, {"feed-forward", 768}},
                    2622720,
                    4096};
}

ggufkit::GgufFile open_or_fail(const fs::path& path) {
  auto f = ggufkit::GgufFile::open(path);
  if (!f) throw std::runtime_error(f.error().describe());
  return std::move(f).value();
}

void expect_text_report(const std::string& report, const KnownModel& m) {
  const ggufkit::GgufFile file = open_or_fail(m.path);
  const double bpw = 8.0 * static_cast<double>(file.tensor_bytes()) / static_cast<double>(m.parameters);
  EXPECT_EQ(lines_of(report).front(), m.path.string());

  const std::string format = labelled_line(report, "format");
  EXPECT_NE(format.find(fmt::format("GGUF v{}", file.version())), std::string::npos) << format;
  EXPECT_NE(format.find(fmt::format("alignment {}", file.alignment())), std::string::npos) << format;
  EXPECT_NE(format.find(fmt::format("offset {}", file.data_offset())), std::string::npos) << format;

  EXPECT_EQ(value_after_label(labelled_line(report, "architecture"), "architecture"), "llama");
  if (!m.name.empty()) {
    EXPECT_EQ(value_after_label(labelled_line(report, "name"), "name"), m.name);
  }

  const std::string file_type = labelled_line(report, "file type");
  EXPECT_NE(file_type.find(fmt::format("{} {}", m.file_type, m.file_type_name)), std::string::npos) << file_type;

  const std::string size = labelled_line(report, "size");
  EXPECT_NE(size.find(binary_size(file.file_size()) + " file"), std::string::npos) << size;
  EXPECT_NE(size.find(fmt::format("({} bytes)", file.tensor_bytes())), std::string::npos) << size;

  const std::string parameters = labelled_line(report, "parameters");
  EXPECT_NE(parameters.find(fmt::format("({})", m.parameters)), std::string::npos) << parameters;
  EXPECT_NE(parameters.find(fmt::format("in {} tensors", file.tensors().size())), std::string::npos) << parameters;
  EXPECT_NE(parameters.find(fmt::format("{:.2f} bits per weight", bpw)), std::string::npos) << parameters;

  EXPECT_EQ(value_after_label(labelled_line(report, "types"), "types"), m.type_line);

  const std::vector<std::string> hp = dot_separated(value_after_label(labelled_line(report, "hyperparams"), "hyperparams"));
  const std::set<std::string> shown(hp.begin(), hp.end());
  for (const auto& [label, value] : m.hyperparameters) {
    EXPECT_TRUE(shown.count(fmt::format("{} {}", label, value))) << label << " " << value << " not in the hyperparams line";
  }

  const std::string tokenizer = labelled_line(report, "tokenizer");
  EXPECT_NE(tokenizer.find("llama"), std::string::npos) << tokenizer;
  EXPECT_NE(tokenizer.find(fmt::format("{} tokens", m.tokens)), std::string::npos) << tokenizer;
}

void expect_json_report(const json& j, const KnownModel& m) {
  const ggufkit::GgufFile file = open_or_fail(m.path);
  EXPECT_EQ(j.at("file"), m.path.string());
  EXPECT_EQ(j.at("version"), file.version());
  EXPECT_EQ(j.at("alignment"), file.alignment());
  EXPECT_EQ(j.at("data_offset"), file.data_offset());
  EXPECT_EQ(j.at("file_size"), fs::file_size(m.path));
  EXPECT_EQ(j.at("architecture"), "llama");
  if (!m.name.empty()) {
    EXPECT_EQ(j.at("name"), m.name);
  }
  EXPECT_EQ(j.at("file_type"), m.file_type);
  EXPECT_EQ(j.at("file_type_name"), m.file_type_name);
  EXPECT_EQ(j.at("parameters"), m.parameters);
  EXPECT_EQ(j.at("tensor_count"), file.tensors().size());
  EXPECT_EQ(j.at("tensor_bytes"), file.tensor_bytes());
  EXPECT_DOUBLE_EQ(j.at("bits_per_weight").get<double>(),
                   8.0 * static_cast<double>(file.tensor_bytes()) / static_cast<double>(m.parameters));
  std::string type_line;
  uint64_t elements = 0;
  for (const json& t : j.at("types")) {
    if (!type_line.empty()) type_line += " · ";
    type_line += fmt::format("{} {}", t.at("type").get<std::string>(), t.at("tensors").get<uint64_t>());
    elements += t.at("elements").get<uint64_t>();
  }
  EXPECT_EQ(type_line, m.type_line);
  EXPECT_EQ(elements, m.parameters);
  // The JSON keys are the metadata keys without the "{arch}." prefix.
  const std::map<std::string, std::string> key_of_label = {
      {"context", "context_length"},         {"embedding", "embedding_length"},
      {"layers", "block_count"},             {"heads", "attention.head_count"},
      {"kv heads", "attention.head_count_kv"}, {"feed-forward", "feed_forward_length"}};
  for (const auto& [label, value] : m.hyperparameters) {
    const std::string& key = key_of_label.at(label);
    ASSERT_TRUE(j.at("hyperparameters").contains(key)) << key;
    EXPECT_EQ(j.at("hyperparameters").at(key), value) << key;
  }
  EXPECT_EQ(j.at("tokenizer_model"), "llama");
  EXPECT_EQ(j.at("vocab_size"), m.tokens);
}

TEST(CliInfo, SampleTextReport) {
  const KnownModel m = the_sample();
  const CommandResult r = run_gguf({"info", m.path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_text_report(r.out, m);
}

TEST(CliInfo, TinyLlamaQ4KMTextReport) {
  GGUFKIT_REQUIRE_SHARED();
  const KnownModel m = *the_q4_k_m();
  const CommandResult r = run_gguf({"info", m.path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_text_report(r.out, m);
  // The file type line names the llama.cpp file type.
  EXPECT_NE(labelled_line(r.out, "file type").find("15 MOSTLY_Q4_K_M"), std::string::npos);
  EXPECT_EQ(value_after_label(labelled_line(r.out, "types"), "types"), "q4_K 12 · q6_K 3 · f32 5");
}

TEST(CliInfo, SampleJsonReport) {
  const KnownModel m = the_sample();
  const CommandResult r = run_gguf({"info", "--json", m.path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  expect_json_report(j[0], m);
}

TEST(CliInfo, TinyLlamaQ4KMJsonReport) {
  GGUFKIT_REQUIRE_SHARED();
  const KnownModel m = *the_q4_k_m();
  const CommandResult r = run_gguf({"info", "--json", m.path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  expect_json_report(j[0], m);
}

// Several files: every readable one is reported, in order; one failure makes the exit code 2.
TEST(CliInfo, SeveralFilesReportEachAndFailIfAnyFails) {
  const fs::path dir = temp_dir("cli-info-several");
  const fs::path missing = dir / "missing.gguf";
  const std::string sample = sample_model().string();

  const CommandResult ok = run_gguf({"info", sample, sample});
  EXPECT_EQ(ok.exit_code, 0);
  size_t reports = 0;
  for (const std::string& line : lines_of(ok.out)) reports += line == sample;
  EXPECT_EQ(reports, 2u);

  const CommandResult r = run_gguf({"info", sample, missing.string(), sample});
  EXPECT_EQ(r.exit_code, 2);
  reports = 0;
  for (const std::string& line : lines_of(r.out)) reports += line == sample;
  EXPECT_EQ(reports, 2u) << r.out;
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(missing.string()), std::string::npos);
  EXPECT_EQ(r.out.find(missing.string()), std::string::npos) << "the failed file is not reported on stdout";

  const CommandResult rj = run_gguf({"info", "--json", sample, missing.string(), sample});
  EXPECT_EQ(rj.exit_code, 2);
  const json j = json::parse(rj.out);
  ASSERT_EQ(j.size(), 2u);
  for (const json& e : j) expect_json_report(e, the_sample());
  EXPECT_EQ(lines_of(rj.err).size(), 1u) << rj.err;
  fs::remove_all(dir);
}

TEST(CliInfo, SharedAndSampleTogether) {
  GGUFKIT_REQUIRE_SHARED();
  const KnownModel q4 = *the_q4_k_m();
  const CommandResult r = run_gguf({"info", "--json", q4.path.string(), sample_model().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  expect_json_report(j[0], q4);
  expect_json_report(j[1], the_sample());
}

// Every vocab file of the corpus (no tensors): info works and reports 0 parameters.
TEST(CliInfo, VocabularyFilesWithoutTensors) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path bpe = *shared_dir() / "corpus/vocab/ggml-vocab-llama-bpe.gguf";
  const CommandResult r = run_gguf({"info", "--json", bpe.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out).at(0);
  EXPECT_EQ(j.at("parameters"), 0);
  EXPECT_EQ(j.at("tensor_count"), 0);
  EXPECT_EQ(j.at("tokenizer_model"), "gpt2");
  EXPECT_EQ(j.at("vocab_size"), 128256);
  const CommandResult text = run_gguf({"info", bpe.string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string tokenizer = labelled_line(text.out, "tokenizer");
  EXPECT_NE(tokenizer.find("128256 tokens"), std::string::npos) << tokenizer;
  EXPECT_NE(tokenizer.find("280147 merges"), std::string::npos) << tokenizer;
}

// A name that is not UTF-8 still gives valid JSON.
TEST(CliInfo, JsonIsValidForANameThatIsNotUtf8) {
  const fs::path dir = temp_dir("cli-info-utf8");
  const fs::path file = dir / "bad-name.gguf";
  ggufkit::GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
  ASSERT_TRUE(b.set("general.name", ggufkit::MetadataValue::string("bad \xff\xfe name \x01")));
  ASSERT_TRUE(b.write_file(file, {.sync = false, .progress = {}}));
  const CommandResult r = run_gguf({"info", "--json", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);  // throws on invalid UTF-8 or bad escapes
  EXPECT_EQ(j.at(0).at("name"), "bad \xEF\xBF\xBD\xEF\xBF\xBD name \x01");
  fs::remove_all(dir);
}

// The special tokens: every tokenizer.ggml.*_token_id key, in gguf-py's order whatever the file's,
// with the token's text escaped; an id outside the vocabulary says so; no keys, no line.
TEST(CliInfo, SpecialTokensWithTheirText) {
  const fs::path dir = ggufkit::test::temp_dir("cli-info-special");
  ggufkit::GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
  ASSERT_TRUE(b.set("tokenizer.ggml.model", ggufkit::MetadataValue::string("gpt2")));
  ASSERT_TRUE(b.set("tokenizer.ggml.tokens", ggufkit::MetadataValue::string_array(
                                                 {"a", "<|fim_prefix|>", "<|end|>\x1b[2J", "<pad>"})));
  ASSERT_TRUE(b.set("tokenizer.ggml.padding_token_id", ggufkit::MetadataValue::of(uint32_t{3})));
  ASSERT_TRUE(b.set("tokenizer.ggml.fim_pre_token_id", ggufkit::MetadataValue::of(uint32_t{1})));
  ASSERT_TRUE(b.set("tokenizer.ggml.eos_token_id", ggufkit::MetadataValue::of(uint32_t{2})));
  ASSERT_TRUE(b.set("tokenizer.ggml.bos_token_id", ggufkit::MetadataValue::of(uint32_t{7})));
  ggufkit::WriteOptions write;
  write.sync = false;
  ASSERT_TRUE(b.write_file(dir / "special.gguf", write));
  const CommandResult r = run_gguf({"info", (dir / "special.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(labelled_line(r.out, "special"),
            "  special       bos 7 (not in the vocabulary) · eos 2 <|end|>\\x1b[2J · pad 3 <pad> · fim_pre 1 "
            "<|fim_prefix|>");
  const CommandResult j = run_gguf({"info", "--json", (dir / "special.gguf").string()});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out).at(0).at("special_tokens"),
            (json{{"bos", {{"id", 7}, {"text", nullptr}}},
                  {"eos", {{"id", 2}, {"text", "<|end|>\x1b[2J"}}},
                  {"pad", {{"id", 3}, {"text", "<pad>"}}},
                  {"fim_pre", {{"id", 1}, {"text", "<|fim_prefix|>"}}}}));

  ggufkit::GgufBuilder none;
  ASSERT_TRUE(none.set("general.architecture", ggufkit::MetadataValue::string("llama")));
  ASSERT_TRUE(none.write_file(dir / "none.gguf", write));
  const CommandResult n = run_gguf({"info", (dir / "none.gguf").string()});
  EXPECT_EQ(labelled_line(n.out, "special"), "") << n.out;
  EXPECT_FALSE(json::parse(run_gguf({"info", "--json", (dir / "none.gguf").string()}).out).at(0).contains("special_tokens"));
  fs::remove_all(dir);
}

}  // namespace

namespace {

// --layers: a row per block and one for the tensors outside them, in text and JSON, on a file whose
// blocks have different types (blk.1 forced to q8_0); every figure recomputed here from the tensor
// infos, by name.
TEST(CliInfo, LayersShowEachBlocksTypesAndBitsPerWeight) {
  const fs::path dir = ggufkit::test::temp_dir("info-layers");
  const fs::path mixed = dir / "mixed.gguf";
  const CommandResult q = run_gguf({"quantize", sample_model().string(), mixed.string(), "Q4_0", "--pure", "-q",
                                    "--tensor-type", "blk\\.1\\.=q8_0"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  auto file = ggufkit::GgufFile::open(mixed);
  ASSERT_TRUE(file);
  struct Row {
    uint64_t tensors = 0, elements = 0, bytes = 0;
    std::map<std::string, std::array<uint64_t, 3>> types;  // tensors, elements, bytes
  };
  std::map<std::string, Row> rows;  // "blk.0", "blk.1", "other"
  for (const ggufkit::TensorInfo& t : file->tensors()) {
    const std::string name(t.name);
    const std::string key = name.starts_with("blk.0.") ? "blk.0" : name.starts_with("blk.1.") ? "blk.1" : "other";
    Row& r = rows[key];
    ++r.tensors;
    r.elements += static_cast<uint64_t>(t.n_elements());
    r.bytes += t.size;
    auto& u = r.types[std::string(ggufkit::type_name(t.type))];
    ++u[0];
    u[1] += static_cast<uint64_t>(t.n_elements());
    u[2] += t.size;
  }
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows["blk.1"].types.count("q8_0"), 1u);
  EXPECT_EQ(rows["blk.0"].types.count("q4_0"), 1u);
  const auto types_text = [](const Row& r) {
    std::vector<std::pair<uint64_t, std::string>> order;  // most elements first
    for (const auto& [type, u] : r.types) order.emplace_back(u[1], fmt::format("{} {}", type, u[0]));
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> parts;
    for (auto& [n, text] : order) parts.push_back(text);
    return fmt::format("{}", fmt::join(parts, " · "));
  };
  const auto row_text = [&](const std::string& label) {
    const Row& r = rows[label];
    return fmt::format("    {:<10} {:>8} {:>14} {:>14} {:>7.2f}  {}", label, r.tensors, r.elements, r.bytes,
                       8.0 * static_cast<double>(r.bytes) / static_cast<double>(r.elements), types_text(r));
  };
  const CommandResult text = run_gguf({"info", mixed.string(), "--layers"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.err, "");
  const std::string want = fmt::format(
      "  layers        2 blocks and {} tensors outside them\n"
      "    layer       tensors       elements          bytes     bpw  types\n{}\n{}\n{}\n",
      rows["other"].tensors, row_text("blk.0"), row_text("blk.1"), row_text("other"));
  EXPECT_NE(text.out.find(want), std::string::npos) << text.out;
  // Without --layers, the same report minus those lines.
  const CommandResult plain = run_gguf({"info", mixed.string()});
  std::string without = text.out;
  without.erase(without.find(want), want.size());
  EXPECT_EQ(plain.out, without);

  const CommandResult as_json = run_gguf({"info", mixed.string(), "--layers", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const auto doc = nlohmann::json::parse(as_json.out).at(0);
  ASSERT_EQ(doc["layers"].size(), 3u);
  const std::vector<std::string> labels = {"blk.0", "blk.1", "other"};
  for (size_t i = 0; i < 3; ++i) {
    const auto& l = doc["layers"][i];
    const Row& r = rows[labels[i]];
    SCOPED_TRACE(labels[i]);
    if (i < 2) {
      EXPECT_EQ(l["layer"], i);
    } else {
      EXPECT_TRUE(l["layer"].is_null());
    }
    EXPECT_EQ(l["tensors"], r.tensors);
    EXPECT_EQ(l["parameters"], r.elements);
    EXPECT_EQ(l["tensor_bytes"], r.bytes);
    EXPECT_DOUBLE_EQ(l["bits_per_weight"].get<double>(), 8.0 * static_cast<double>(r.bytes) / static_cast<double>(r.elements));
    ASSERT_EQ(l["types"].size(), r.types.size());
    for (const auto& u : l["types"]) {
      const auto& want_u = r.types.at(u["type"].get<std::string>());
      EXPECT_EQ(u, nlohmann::json({{"type", u["type"]}, {"tensors", want_u[0]}, {"elements", want_u[1]}, {"bytes", want_u[2]}}));
    }
    EXPECT_EQ(l.size(), 6u);
  }
  EXPECT_FALSE(nlohmann::json::parse(run_gguf({"info", mixed.string(), "--json"}).out).at(0).contains("layers"));
  fs::remove_all(dir);
}

}  // namespace
