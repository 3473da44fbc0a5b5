// The gguf binary's contract with scripts: help on stdout with exit 0, usage mistakes exit 2,
// and a file that cannot be read exits 2 with exactly one line on stderr that names the file,
// the byte offset and the problem, and nothing on stdout.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/ggufkit.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::CommandResult;
using ggufkit::test::read_bytes;
using ggufkit::test::run_gguf;
using ggufkit::test::sample_model;
using ggufkit::test::temp_dir;
using ggufkit::test::write_bytes;

// ---------------------------------------------------------------------------------------------
// Help

void expect_usage_on_stdout(const CommandResult& r, const std::vector<std::string>& mentions) {
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  for (const std::string& m : mentions) EXPECT_NE(r.out.find(m), std::string::npos) << "missing " << m << "\n" << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(CliHelp, TopLevelHelpListsTheVerbs) {
  expect_usage_on_stdout(run_gguf({"--help"}), {"info", "dump"});
  expect_usage_on_stdout(run_gguf({"-h"}), {"info", "dump"});
}

TEST(CliHelp, InfoHelpListsItsOptions) { expect_usage_on_stdout(run_gguf({"info", "--help"}), {"files", "--json"}); }

TEST(CliHelp, DumpHelpListsItsOptions) {
  expect_usage_on_stdout(run_gguf({"dump", "--help"}), {"file", "--json", "--no-tensors", "--full"});
}

// ---------------------------------------------------------------------------------------------
// Usage errors: exit 2, a message on stderr, nothing on stdout.

void expect_usage_error(const std::vector<std::string>& args) {
  const CommandResult r = run_gguf(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err, "");
}

TEST(CliUsage, NoVerbExits2) { expect_usage_error({}); }
TEST(CliUsage, UnknownVerbExits2) { expect_usage_error({"frobnicate", sample_model().string()}); }
TEST(CliUsage, UnknownOptionExits2) {
  expect_usage_error({"info", "--no-such-option", sample_model().string()});
  expect_usage_error({"dump", "--no-such-option", sample_model().string()});
}
TEST(CliUsage, MissingFileArgumentExits2) {
  expect_usage_error({"info"});
  expect_usage_error({"dump"});
  expect_usage_error({"info", "--json"});
  expect_usage_error({"dump", "--json"});
}
TEST(CliUsage, DumpTakesOneFile) { expect_usage_error({"dump", sample_model().string(), sample_model().string()}); }

// ---------------------------------------------------------------------------------------------
// Files that cannot be read.

// The one stderr line must be "gguf: FILE: offset N: ... [code]": the file, where (when the error
// has a place: a file that cannot be opened has none), and what.
void expect_one_error_line(const CommandResult& r, const fs::path& file, std::optional<uint64_t> offset, const std::string& code,
                           const std::string& problem) {
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "") << "nothing but results on stdout";
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  if (offset) {
    EXPECT_NE(r.err.find("offset " + std::to_string(*offset) + ":"), std::string::npos) << r.err;
  } else {
    EXPECT_EQ(r.err.find("offset"), std::string::npos) << "an error without a place names none: " << r.err;
  }
  EXPECT_NE(r.err.find("[" + code + "]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << r.err;
}

// Both verbs report an unreadable file the same way.
void expect_both_verbs_fail(const fs::path& file, std::optional<uint64_t> offset, const std::string& code,
                            const std::string& problem) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", file.string()}, std::vector<std::string>{"info", "--json", file.string()},
        std::vector<std::string>{"dump", file.string()}, std::vector<std::string>{"dump", "--json", file.string()}}) {
    SCOPED_TRACE(args[0] + (args.size() > 2 ? " " + args[1] : ""));
    const CommandResult r = run_gguf(args);
    if (args[1] == "--json" && args[0] == "info") {
      // info --json still prints the (empty) list of the files it could read.
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
      EXPECT_EQ(r.out, "[]\n");
    } else {
      expect_one_error_line(r, file, offset, code, problem);
    }
  }
}

class CliBadFile : public testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("cli-bad-file"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliBadFile, MissingFile) {
  expect_both_verbs_fail(dir_ / "does-not-exist.gguf", std::nullopt, "io_error", "No such file");
}

TEST_F(CliBadFile, Directory) { expect_both_verbs_fail(dir_, std::nullopt, "io_error", "not a regular file"); }

TEST_F(CliBadFile, EmptyFile) {
  const fs::path file = dir_ / "empty.gguf";
  write_bytes(file, {});
  expect_both_verbs_fail(file, 0, "truncated", "magic");
}

TEST_F(CliBadFile, NotAGgufFile) {
  const fs::path file = dir_ / "text.gguf";
  const std::string text = "this is a text file, not a model\n";
  std::vector<std::byte> bytes(text.size());
  std::transform(text.begin(), text.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
  write_bytes(file, bytes);
  expect_both_verbs_fail(file, 0, "bad_magic", "GGUF");
}

// Cut inside the header: the counts (after the 4-byte magic and 4-byte version) start at offset 8.
TEST_F(CliBadFile, FileCutInsideTheHeader) {
  std::vector<std::byte> bytes = read_bytes(sample_model());
  bytes.resize(20);
  const fs::path file = dir_ / "cut-header.gguf";
  write_bytes(file, bytes);
  expect_both_verbs_fail(file, 8, "truncated", "needs 16 bytes");
}

// Cut inside the tensor data: the first tensor's data runs past the end. The error points at that
// tensor's offset field: after its name (8 + length), n_dims (4), dims (8 each) and type (4).
TEST_F(CliBadFile, FileCutInsideTheTensorData) {
  const auto sample = ggufkit::GgufFile::open(sample_model());
  ASSERT_TRUE(sample);
  const ggufkit::TensorInfo& first = sample->tensors().front();
  const uint64_t offset_field = first.info_offset + 8 + first.name.size() + 4 + 8 * first.n_dims + 4;
  std::vector<std::byte> bytes = read_bytes(sample_model());
  bytes.resize(static_cast<size_t>(sample->data_offset() + first.size / 2));
  const fs::path file = dir_ / "cut-data.gguf";
  write_bytes(file, bytes);
  expect_both_verbs_fail(file, offset_field, "data_out_of_bounds", std::string(first.name));
}

// ---------------------------------------------------------------------------------------------
// Output hygiene: a successful run writes nothing to stderr.

TEST(CliOutput, SuccessfulRunsWriteNothingOnStderr) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", sample_model().string()},
        std::vector<std::string>{"info", "--json", sample_model().string()},
        std::vector<std::string>{"dump", sample_model().string()},
        std::vector<std::string>{"dump", "--json", sample_model().string()}}) {
    const CommandResult r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 0) << args[0];
    EXPECT_EQ(r.err, "") << args[0];
    EXPECT_FALSE(r.out.empty()) << args[0];
  }
}

}  // namespace
