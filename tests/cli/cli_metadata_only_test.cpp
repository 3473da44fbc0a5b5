// Metadata-only files (tensor infos without their data, as llama.cpp's gguf_write_to_file writes
// with only_meta): info, dump and get read them and say the data is absent; check reports it; the
// verbs that need the data refuse them with one line. tests/oracle/oracle_dump_test.cpp compares
// such files, written by llama.cpp itself, with its parser.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ggufkit/check.h"
#include "ggufkit/json.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::CommandResult;
using ggufkit::test::lines_of;
using ggufkit::test::run_gguf;

// The sample cut where its tensor data starts, in a directory of its own.
struct MetadataOnly {
  fs::path dir, path;
  MetadataOnly() {
    dir = ggufkit::test::temp_dir("cli-metadata-only");
    path = dir / "meta.gguf";
    const auto sample = ggufkit::GgufFile::open(ggufkit::test::sample_model());
    EXPECT_TRUE(sample);
    auto bytes = ggufkit::test::read_bytes(ggufkit::test::sample_model());
    bytes.resize(static_cast<size_t>(sample->data_offset()));
    ggufkit::test::write_bytes(path, bytes);
  }
  ~MetadataOnly() { fs::remove_all(dir); }
};

TEST(CliMetadataOnly, LibraryReadsItOnlyWhenAsked) {
  MetadataOnly m;
  const auto refused = ggufkit::GgufFile::open(m.path);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ggufkit::ErrorCode::data_out_of_bounds);
  EXPECT_NE(refused.error().message.find("metadata-only"), std::string::npos) << refused.error().message;
  const auto sample = ggufkit::GgufFile::open(ggufkit::test::sample_model());
  ASSERT_TRUE(sample);
  EXPECT_EQ(refused.error().offset, sample->header_size());

  const auto opened = ggufkit::GgufFile::open(m.path, {.allow_metadata_only = true});
  ASSERT_TRUE(opened) << opened.error().describe();
  EXPECT_FALSE(opened->has_tensor_data());
  ASSERT_EQ(opened->tensors().size(), sample->tensors().size());
  ASSERT_EQ(opened->metadata().size(), sample->metadata().size());
  for (size_t i = 0; i < sample->tensors().size(); ++i) {
    const ggufkit::TensorInfo& a = opened->tensors()[i];
    const ggufkit::TensorInfo& b = sample->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.ne, b.ne);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.size, b.size);
    EXPECT_TRUE(opened->tensor_data(a).empty()) << a.name;
  }
  for (size_t i = 0; i < sample->metadata().size(); ++i) {
    EXPECT_EQ(opened->metadata()[i].key, sample->metadata()[i].key);
    EXPECT_TRUE(std::ranges::equal(opened->metadata()[i].value.encoded(), sample->metadata()[i].value.encoded()));
  }
  EXPECT_TRUE(sample->has_tensor_data());
}

TEST(CliMetadataOnly, InfoSaysTheDataIsAbsent) {
  MetadataOnly m;
  const CommandResult whole = run_gguf({"info", ggufkit::test::sample_model().string()});
  const CommandResult meta = run_gguf({"info", m.path.string()});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(meta.exit_code, 0);
  EXPECT_EQ(meta.err, "");
  // Line for line the sample's info, but for the path and the size line.
  const auto a = lines_of(whole.out), b = lines_of(meta.out);
  ASSERT_EQ(a.size(), b.size()) << meta.out;
  const auto file = ggufkit::GgufFile::open(m.path, {.allow_metadata_only = true});
  ASSERT_TRUE(file);
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 0) {
      EXPECT_EQ(b[0], m.path.string());
    } else if (a[i].starts_with("  size")) {
      // "  size          270.12 KiB file (276608 bytes), 257.25 KiB of tensors (263424 bytes)"
      const std::string tensors = a[i].substr(a[i].find(" bytes), ") + 8);
      EXPECT_EQ(b[i], fmt::format("  size          {:.2f} KiB file ({} bytes),{} · tensor data absent (a "
                                  "metadata-only file)",
                                  static_cast<double>(file->file_size()) / 1024.0, file->file_size(), tensors))
          << a[i];
    } else {
      EXPECT_EQ(b[i], a[i]);
    }
  }
  const CommandResult json = run_gguf({"info", "--json", m.path.string()});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(json.err, "");
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed.at(0).at("tensor_data"), false);
  EXPECT_EQ(parsed.at(0).at("file_size"), file->file_size());
}

TEST(CliMetadataOnly, DumpAndGetReadIt) {
  MetadataOnly m;
  const CommandResult json = run_gguf({"dump", "--json", m.path.string()});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(json.err, "");
  auto model = ggufkit::GgufFile::open(m.path, {.allow_metadata_only = true});
  ASSERT_TRUE(model);
  std::string expected;
  ggufkit::append_dump_json(expected, *model, {.file = m.path.string()});
  EXPECT_EQ(json.out, expected);
  EXPECT_EQ(nlohmann::json::parse(json.out).at("tensor_data"), false);

  const CommandResult text = run_gguf({"dump", m.path.string()});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_EQ(text.err, "");
  const auto& f = *model;
  EXPECT_EQ(lines_of(text.out).at(0),
            fmt::format("GGUF v3 · little-endian · alignment 32 · data offset {} · {} bytes · tensor data absent (a metadata-only file)",
                        f.data_offset(), f.file_size()));

  const CommandResult get = run_gguf({"get", m.path.string(), "general.architecture"});
  EXPECT_EQ(get.exit_code, 0);
  EXPECT_EQ(get.err, "");
  EXPECT_EQ(get.out, "llama");
}

TEST(CliMetadataOnly, CheckReportsIt) {
  MetadataOnly m;
  const auto report = ggufkit::check_file(m.path);
  ASSERT_TRUE(report);
  std::vector<std::string> codes;
  for (const ggufkit::Finding& f : report->findings) codes.push_back(f.code);
  EXPECT_EQ(codes, (std::vector<std::string>{"structure.metadata_only", "tokenizer.chat_template", "compat.types"}));
  EXPECT_EQ(report->findings.at(0).severity, ggufkit::Severity::error);
  EXPECT_FALSE(report->passed(false));
  const CommandResult r = run_gguf({"check", m.path.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(lines_of(r.out).back(), m.path.string() + ": FAILED (1 error, 0 warnings, 2 notes)");
}

// The verbs that need the data refuse it before writing anything.
TEST(CliMetadataOnly, VerbsThatNeedTheDataRefuseIt) {
  MetadataOnly m;
  const std::string in = m.path.string();
  const std::string why = fmt::format(
      "gguf: {}: offset {}: the file ends where the tensor data would start: it is metadata-only (20 tensor infos "
      "without their data, as gguf_write_to_file writes with only_meta); this needs the tensors' data "
      "[data_out_of_bounds]\n",
      in, ggufkit::GgufFile::open(ggufkit::test::sample_model())->header_size());
  const std::vector<std::vector<std::string>> runs = {
      {"extract", in, "token_embd.weight", "-o", (m.dir / "t.npy").string()},
      {"hash", in},
      {"quantize", in, (m.dir / "q.gguf").string(), "q8_0"},
      {"split", in, (m.dir / "s").string(), "--max-tensors", "4"},
      {"merge", in, (m.dir / "merged.gguf").string()},
      {"convert-endian", in, (m.dir / "be.gguf").string(), "--to", "big"},
      {"diff", in, ggufkit::test::sample_model().string()},
      {"set", in, "general.name", "x", "-o", (m.dir / "edited.gguf").string()},
  };
  for (const auto& args : runs) {
    SCOPED_TRACE(args[0]);
    const CommandResult r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, why);
  }
  // Nothing was written next to the input.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(m.dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"meta.gguf"});
}

}  // namespace
