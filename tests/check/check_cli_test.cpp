// gguf check on the command line: exit codes (0 clean, 1 problems, 2 unreadable), --strict, and
// the JSON shape scripts rely on.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "raw_gguf.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using test::RawGguf;
using test::run_gguf;
namespace fs = std::filesystem;

fs::path write_fixture(const fs::path& dir, const std::string& name, const RawGguf& g) {
  const fs::path p = dir / name;
  test::write_bytes(p, g.bytes());
  return p;
}

TEST(CheckCli, ExitCodesAndStrict) {
  const fs::path dir = test::temp_dir("check-cli");
  // The sample model the project ships passes.
  const auto ok = run_gguf({"check", test::sample_model().string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("OK"), std::string::npos);

  // Warnings only: 0, or 1 under --strict.
  RawGguf warn;
  warn.header(3, 0, 3);
  warn.kv_string("general.architecture", "test-arch");
  warn.kv_string("tokenizer.ggml.model", "none");
  warn.kv_bool("some.flag", 7);
  const fs::path w = write_fixture(dir, "warn.gguf", warn);
  EXPECT_EQ(run_gguf({"check", w.string()}).exit_code, 0);
  EXPECT_EQ(run_gguf({"check", "--strict", w.string()}).exit_code, 1);

  // An error: 1, with the finding's code and offset in the text.
  RawGguf bad;
  bad.header(3, 0, 1);
  bad.kv_string("general.name", "no architecture");
  const fs::path b = write_fixture(dir, "bad.gguf", bad);
  const auto r = run_gguf({"check", b.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("metadata.missing_architecture"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;

  // Not readable at all: 2, message on stderr, nothing on stdout.
  const auto missing = run_gguf({"check", (dir / "absent.gguf").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(missing.out.empty());
  EXPECT_FALSE(missing.err.empty());
  // Not a GGUF file: a finding (exit 1), since the file could be read.
  RawGguf junk;
  junk.raw("not a gguf file at all");
  EXPECT_EQ(run_gguf({"check", write_fixture(dir, "junk.gguf", junk).string()}).exit_code, 1);
  fs::remove_all(dir);
}

TEST(CheckCli, JsonGivesTheSameFindings) {
  const fs::path dir = test::temp_dir("check-cli-json");
  RawGguf g;
  g.header(3, 1, 2);
  g.kv_string("general.architecture", "test-arch");
  const uint64_t bool_at = g.size();
  g.kv_bool("some.flag", 9);
  g.tensor_info("a.weight", {8}, 0, 64);  // a gap: expected 0
  g.pad_to(32);
  g.zeros(96);
  const fs::path p = write_fixture(dir, "f.gguf", g);
  const auto text = run_gguf({"check", p.string()});
  const auto json = run_gguf({"check", "--json", p.string()});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_EQ(json.exit_code, 1);
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["passed"], false);
  EXPECT_EQ(doc["complete"], true);
  EXPECT_GE(doc["errors"].get<int>(), 1);
  bool saw_bool = false, saw_gap = false;
  for (const auto& f : doc["findings"]) {
    ASSERT_TRUE(f.contains("severity") && f.contains("code") && f.contains("subject") && f.contains("offset") &&
                f.contains("message"));
    if (f["code"] == "structure.bad_bool") {
      saw_bool = true;
      EXPECT_EQ(f["offset"].get<uint64_t>(), bool_at);
      EXPECT_EQ(f["subject"], "some.flag");
      EXPECT_EQ(f["severity"], "warning");
    }
    if (f["code"] == "structure.bad_tensor_offset") {
      saw_gap = true;
      EXPECT_EQ(f["subject"], "a.weight");
      EXPECT_EQ(f["severity"], "error");
    }
    // Every JSON finding appears in the text output too.
    EXPECT_NE(text.out.find(f["code"].get<std::string>()), std::string::npos);
  }
  EXPECT_TRUE(saw_bool && saw_gap) << json.out;
  fs::remove_all(dir);
}

TEST(CheckCli, HelpDescribesTheOptions) {
  const auto r = run_gguf({"check", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt : {"--base", "--json", "--strict"}) EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace ggufkit
