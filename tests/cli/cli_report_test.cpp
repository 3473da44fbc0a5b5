// The report verbs (info, check, diff, hash --check, dump) print text and JSON through one printer
// (tools/gguf/printer.h): each test asserts a verb's whole text, its whole JSON and both exit
// statuses and stderrs on one input, so that a fact shown to people and missing from the JSON (or
// the other way round) fails. Expected values come from the library's own view of the input
// (check_file, compare_manifests, the reader) and from tools/make_sample.cpp for the sample.
#include <filesystem>
#include <fstream>
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
using ggufkit::test::run_gguf;
using nlohmann::json;

template <class T>
T value_or_throw(ggufkit::Expected<T> e) {
  if (!e) throw std::runtime_error(e.error().describe());
  return std::move(e).value();
}

std::string binary_size(uint64_t bytes) {
  return fmt::format("{:.2f} KiB", static_cast<double>(bytes) / 1024.0);
}

TEST(CliReport, InfoOnTheSample) {
  const fs::path path = ggufkit::test::sample_model();
  const ggufkit::GgufFile f = value_or_throw(ggufkit::GgufFile::open(path));
  // tools/make_sample.cpp: 15 f16 tensors (131072 elements), 5 f32 (320), 512 tokens, no merges,
  // a chat template; hyperparameters as below.
  const uint64_t f16_bytes = 131072 * 2, f32_bytes = 320 * 4, tensor_bytes = f16_bytes + f32_bytes;
  const double bpw = 8.0 * static_cast<double>(tensor_bytes) / 131392.0;
  const std::string text = fmt::format(
      "{path}\n"
      "  format        GGUF v3, little-endian, alignment 32, data at offset {offset}\n"
      "  architecture  llama\n"
      "  name          ggufkit tiny sample\n"
      "  file type     1 MOSTLY_F16 (F16)\n"
      "  size          {file_h} file ({file} bytes), {tensors_h} of tensors ({tensors} bytes)\n"
      "  parameters    131.39K (131392) in 20 tensors, {bpw:.2f} bits per weight\n"
      "  types         f16 15 · f32 5\n"
      "    type      tensors       elements     share          bytes     share\n"
      "    f16            15         131072     99.8%         262144     99.5%\n"
      "    f32             5            320      0.2%           1280      0.5%\n"
      "  hyperparams   context 256 · embedding 64 · layers 2 · heads 4 · kv heads 2 · feed-forward 192 · "
      "rope dims 16 · rope base 10000.0 · rms eps 1e-05\n"
      "  tokenizer     llama, 512 tokens, chat template\n"
      "  special       bos 1 <s> · eos 2 </s> · unk 0 <unk>\n",
      fmt::arg("path", path.string()), fmt::arg("offset", f.data_offset()), fmt::arg("file_h", binary_size(f.file_size())),
      fmt::arg("file", f.file_size()), fmt::arg("tensors_h", binary_size(tensor_bytes)),
      fmt::arg("tensors", tensor_bytes), fmt::arg("bpw", bpw));
  const CommandResult t = run_gguf({"info", path.string()});
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_EQ(t.err, "");
  EXPECT_EQ(t.out, text);

  const json expected = json::array({{
      {"file", path.string()},
      {"version", 3},
      {"byte_order", "little"},
      {"alignment", 32},
      {"data_offset", f.data_offset()},
      {"architecture", "llama"},
      {"name", "ggufkit tiny sample"},
      {"file_type", 1},
      {"file_type_name", "MOSTLY_F16"},
      {"file_size", f.file_size()},
      {"tensor_bytes", tensor_bytes},
      {"tensor_data", true},
      {"parameters", 131392},
      {"tensor_count", 20},
      {"bits_per_weight", bpw},
      {"types", json::array({{{"type", "f16"}, {"tensors", 15}, {"elements", 131072}, {"bytes", f16_bytes}},
                             {{"type", "f32"}, {"tensors", 5}, {"elements", 320}, {"bytes", f32_bytes}}})},
      {"hyperparameters",
       {{"context_length", 256},
        {"embedding_length", 64},
        {"block_count", 2},
        {"attention.head_count", 4},
        {"attention.head_count_kv", 2},
        {"feed_forward_length", 192},
        {"rope.dimension_count", 16},
        {"rope.freq_base", 10000.0},
        {"attention.layer_norm_rms_epsilon", 1e-05f}}},
      {"tokenizer_model", "llama"},
      {"tokenizer_pre", nullptr},
      {"vocab_size", 512},
      {"merges", nullptr},
      {"chat_template", true},
      {"special_tokens",
       {{"bos", {{"id", 1}, {"text", "<s>"}}}, {"eos", {{"id", 2}, {"text", "</s>"}}}, {"unk", {{"id", 0}, {"text", "<unk>"}}}}},
  }});
  const CommandResult j = run_gguf({"info", "--json", path.string()});
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_EQ(j.err, "");
  json got = json::parse(j.out);
  // float32 1e-05 is printed as the shortest text that reads back to it, "1e-05".
  EXPECT_EQ(got.at(0).at("hyperparameters").at("attention.layer_norm_rms_epsilon").get<double>(), 1e-05);
  got[0]["hyperparameters"]["attention.layer_norm_rms_epsilon"] = 1e-05f;
  EXPECT_EQ(got, expected) << j.out;
}

TEST(CliReport, CheckFindingsAndVerdict) {
  const fs::path dir = ggufkit::test::temp_dir("cli-report-check");
  // No architecture (an error) and a tensor whose data lies past the end of the file.
  ggufkit::GgufBuilder b;
  ASSERT_TRUE(b.set("general.name", ggufkit::MetadataValue::string("no architecture")));
  std::vector<std::byte> data(64);
  const int64_t shape[] = {16};
  ASSERT_TRUE(b.add_tensor("w", ggufkit::TensorType::F32, shape, std::move(data)));
  const fs::path p = dir / "bad.gguf";
  ASSERT_TRUE(b.write_file(p, {.sync = false, .progress = {}}));
  fs::resize_file(p, fs::file_size(p) - 16);

  const ggufkit::CheckReport report = value_or_throw(ggufkit::check_file(p));
  ASSERT_GE(report.findings.size(), 2u);
  std::string text;
  json findings = json::array();
  for (const ggufkit::Finding& f : report.findings) {
    text += f.describe() + "\n";
    json entry = {{"severity", ggufkit::severity_name(f.severity)},
                  {"code", f.code},
                  {"subject", f.subject},
                  {"offset", f.offset ? json(*f.offset) : json(nullptr)}};
    if (!f.file.empty()) entry["file"] = f.file;
    entry["message"] = f.message;
    findings.push_back(entry);
  }
  const size_t errors = report.count(ggufkit::Severity::error), warnings = report.count(ggufkit::Severity::warning),
               notes = report.count(ggufkit::Severity::info);
  ASSERT_GE(errors, 2u);
  text += fmt::format("{}: FAILED ({} errors, {} warning{}, {} note{})\n", p.string(), errors, warnings,
                      warnings == 1 ? "" : "s", notes, notes == 1 ? "" : "s");
  const CommandResult t = run_gguf({"check", p.string()});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_EQ(t.err, "");
  EXPECT_EQ(t.out, text);

  ASSERT_EQ(report.kind, ggufkit::FileKind::model);
  const json expected = {{"findings", findings}, {"file", p.string()}, {"kind", "model"}, {"passed", false},   {"strict", false},
                         {"complete", report.complete}, {"errors", errors}, {"warnings", warnings}, {"infos", notes}};
  const CommandResult j = run_gguf({"check", "--json", p.string()});
  EXPECT_EQ(j.exit_code, 1);
  EXPECT_EQ(j.err, "");
  EXPECT_EQ(json::parse(j.out), expected) << j.out;
  fs::remove_all(dir);
}

TEST(CliReport, DiffOfKeysAndATensor) {
  const fs::path dir = ggufkit::test::temp_dir("cli-report-diff");
  const int64_t shape[] = {4};
  ggufkit::GgufBuilder a, b;
  for (auto* g : {&a, &b}) ASSERT_TRUE(g->set("general.architecture", ggufkit::MetadataValue::string("llama")));
  ASSERT_TRUE(a.set("x.count", ggufkit::MetadataValue::of(uint32_t{1})));
  ASSERT_TRUE(a.set("x.gone", ggufkit::MetadataValue::string("old")));
  ASSERT_TRUE(a.add_tensor("w", ggufkit::TensorType::F32, shape, std::vector<std::byte>(16)));
  ASSERT_TRUE(b.set("x.count", ggufkit::MetadataValue::of(uint32_t{2})));
  ASSERT_TRUE(b.set("x.new", ggufkit::MetadataValue::of(true)));
  ASSERT_TRUE(b.add_tensor("w", ggufkit::TensorType::F16, shape, std::vector<std::byte>(8)));
  ASSERT_TRUE(a.write_file(dir / "a.gguf", {.sync = false, .progress = {}}));
  ASSERT_TRUE(b.write_file(dir / "b.gguf", {.sync = false, .progress = {}}));
  const std::string pa = (dir / "a.gguf").string(), pb = (dir / "b.gguf").string();

  const CommandResult t = run_gguf({"diff", pa, pb});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_EQ(t.err, "");
  EXPECT_EQ(t.out,
            "key changed    x.count: uint32 1 -> 2\n"
            "key removed    x.gone: string \"old\"\n"
            "key added      x.new: bool true\n"
            "tensor changed w: f32 [4] -> f16 [4] (type changed)\n"
            "summary: different · keys: 3 differ (A 3, B 3) · tensors: 1 differs (A 1, B 1) · data: not compared "
            "(--data)\n");

  const json expected = {
      {"identical", false},
      {"data_compared", false},
      {"layout",
       {{"differs", false},
        {"version", {3, 3}},
        {"alignment", {32, 32}},
        {"shards", {1, 1}},
        {"metadata_order_differs", false},
        {"tensor_order_differs", false}}},
      {"metadata", json::array({{{"key", "x.count"},
                                 {"change", "changed"},
                                 {"type_changed", false},
                                 {"a", {{"type", "uint32"}, {"value", 1}}},
                                 {"b", {{"type", "uint32"}, {"value", 2}}}},
                                {{"key", "x.gone"},
                                 {"change", "removed"},
                                 {"type_changed", false},
                                 {"a", {{"type", "string"}, {"value", "old"}}},
                                 {"b", nullptr}},
                                {{"key", "x.new"},
                                 {"change", "added"},
                                 {"type_changed", false},
                                 {"a", nullptr},
                                 {"b", {{"type", "bool"}, {"value", true}}}}})},
      {"tensors", json::array({{{"name", "w"},
                                {"change", "changed"},
                                {"type_changed", true},
                                {"shape_changed", false},
                                {"a", {{"type", "f32"}, {"shape", {4}}}},
                                {"b", {{"type", "f16"}, {"shape", {4}}}}}})},
      {"data", nullptr},
      {"counts", {{"keys", {3, 3}}, {"tensors", {1, 1}}}}};
  const CommandResult j = run_gguf({"diff", "--json", pa, pb});
  EXPECT_EQ(j.exit_code, 1);
  EXPECT_EQ(j.err, "");
  EXPECT_EQ(json::parse(j.out), expected) << j.out;
  fs::remove_all(dir);
}

// Issue 29 review: a manifest of entries for tensors the model lacks was reported as that many
// "tensors ... checked", and "1 file(s)". The counts are the model's tensors and files, compared.
TEST(CliReport, HashCheckCountsWhatItCompared) {
  const fs::path dir = ggufkit::test::temp_dir("cli-report-count");
  const fs::path model = dir / "m.gguf", manifest = dir / "big.manifest";
  fs::copy_file(ggufkit::test::sample_model(), model);
  const CommandResult made = run_gguf({"hash", model.string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // The model's own manifest plus three tensors it does not have.
  std::ofstream(manifest, std::ios::binary) << made.out << "tensor 0123456789abcdef 4 x.0\ntensor 0123456789abcdef 4 x.1\n"
                                            << "tensor 0123456789abcdef 4 x.2\n";
  const CommandResult r = run_gguf({"hash", model.string(), "--check", manifest.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "");
  std::string expected;
  for (int i = 0; i < 3; ++i) expected += fmt::format("missing_tensor x.{}: the manifest lists it, the model does not have it\n", i);
  expected += fmt::format("{}: FAILED (20 tensors and 1 file checked with xxh64, 3 mismatches)\n", model.string());
  EXPECT_EQ(r.out, expected);
  fs::remove_all(dir);
}

TEST(CliReport, HashCheckMismatches) {
  const fs::path dir = ggufkit::test::temp_dir("cli-report-hash");
  const fs::path model = dir / "m.gguf", bad = dir / "bad.gguf", manifest = dir / "m.manifest";
  fs::copy_file(ggufkit::test::sample_model(), model);
  const CommandResult made = run_gguf({"hash", model.string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::ofstream(manifest, std::ios::binary) << made.out;
  auto bytes = ggufkit::test::read_bytes(model);
  bytes.back() ^= std::byte{0x55};  // inside the last tensor's data
  ggufkit::test::write_bytes(bad, bytes);

  const ggufkit::Manifest expected_manifest = value_or_throw(ggufkit::parse_manifest(made.out));
  const ggufkit::SplitModel damaged = value_or_throw(ggufkit::SplitModel::open(bad));
  const auto mismatches =
      ggufkit::compare_manifests(expected_manifest, ggufkit::hash_model(damaged, expected_manifest.algorithm));
  ASSERT_EQ(mismatches.size(), 2u);  // the file and its last tensor
  std::string text;
  json entries = json::array();
  for (const ggufkit::ManifestMismatch& m : mismatches) {
    text += m.name.empty() ? fmt::format("{}: {}\n", m.kind, m.message) : fmt::format("{} {}: {}\n", m.kind, m.name, m.message);
    entries.push_back({{"kind", m.kind}, {"name", m.name}, {"message", m.message}});
  }
  text += fmt::format("{}: FAILED (20 tensors and 1 file checked with xxh64, 2 mismatches)\n", bad.string());
  const CommandResult t = run_gguf({"hash", bad.string(), "--check", manifest.string()});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_EQ(t.err, "");
  EXPECT_EQ(t.out, text);

  const json expected = {{"mismatches", entries}, {"file", bad.string()}, {"ok", false},   {"tensors_checked", 20},
                         {"files_checked", 1},    {"algorithm", "xxh64"}, {"mismatch_count", 2}};
  const CommandResult j = run_gguf({"hash", bad.string(), "--check", manifest.string(), "--json"});
  EXPECT_EQ(j.exit_code, 1);
  EXPECT_EQ(j.err, "");
  EXPECT_EQ(json::parse(j.out), expected) << j.out;
  fs::remove_all(dir);
}

// dump --json is the library's dump (append_dump_json) byte for byte, of a file and of a split model.
TEST(CliReport, DumpJsonIsTheLibrarysDump) {
  const fs::path dir = ggufkit::test::temp_dir("cli-report-dump");
  const fs::path sample = ggufkit::test::sample_model();
  const CommandResult split = run_gguf({"split", "--max-tensors", "8", sample.string(), (dir / "s").string()});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const fs::path first = dir / "s-00001-of-00003.gguf";
  for (const bool tensors : {true, false}) {
    SCOPED_TRACE(tensors ? "with tensors" : "--no-tensors");
    std::vector<std::string> args = {"dump", "--json", sample.string()};
    if (!tensors) args.push_back("--no-tensors");
    std::string expected;
    ggufkit::append_dump_json(expected, value_or_throw(ggufkit::GgufFile::open(sample)),
                              {.metadata = true, .tensors = tensors, .file = sample.string()});
    const CommandResult one = run_gguf(args);
    EXPECT_EQ(one.exit_code, 0);
    EXPECT_EQ(one.err, "");
    EXPECT_EQ(one.out, expected);

    args[2] = first.string();
    expected.clear();
    ggufkit::append_dump_json(expected, value_or_throw(ggufkit::SplitModel::open(first)),
                              {.metadata = true, .tensors = tensors, .file = first.string()});
    const CommandResult whole = run_gguf(args);
    EXPECT_EQ(whole.exit_code, 0);
    EXPECT_EQ(whole.err, "");
    EXPECT_EQ(whole.out, expected);
  }
  fs::remove_all(dir);
}

}  // namespace
