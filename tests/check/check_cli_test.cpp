// gguf check on the command line: exit codes (0 clean, 1 problems, 2 unreadable), --strict, and
// the JSON shape scripts rely on.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <tuple>

#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
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

// Issue 29: --strict passed an RMS epsilon of -1 (llama.cpp aborts on it) or 1e30.
TEST(CheckCli, EpsilonOutOfRangeFails) {
  const fs::path dir = test::temp_dir("check-cli-eps");
  auto sample = GgufFile::open(test::sample_model());
  ASSERT_TRUE(sample) << sample.error().describe();
  const std::string tail =
      "info tokenizer.chat_template at offset 11846 (tokenizer.chat_template): chat template of 127 bytes, SHA-256 "
      "0123678dd6c5188bfa776bfe48dba228e7e904aba474a7e239e84c6d35da4743; compare the hash with the template of the "
      "original model to be sure it is the intended one\n"
      "info compat.types: tensor types: f32 x5, f16 x15; every one is read by the llama.cpp ggufkit tracks "
      "(node-llama-cpp 3.21.1's build)\n";
  const std::string advice =
      "; the file was probably written by a converter for a different version or edited by hand; convert the model "
      "again or correct the key with gguf set\n";
  for (const auto& [value, finding, summary] : {
           std::tuple{-1.0f,
                      std::string("error arch.bad_hyperparameter at offset 467 (llama.attention.layer_norm_rms_epsilon): "
                                  "'llama.attention.layer_norm_rms_epsilon' is -1, outside [0, inf): llama.cpp aborts on "
                                  "a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm operations), and "
                                  "an infinite one turns every normalized activation into 0"),
                      std::string("FAILED (1 error, 0 warnings, 2 notes)")},
           std::tuple{1e30f,
                      std::string("warning arch.implausible_hyperparameter at offset 467 "
                                  "(llama.attention.layer_norm_rms_epsilon): 'llama.attention.layer_norm_rms_epsilon' is "
                                  "1e+30, outside (0, 0.1]: an epsilon is a small positive number (1e-5, 1e-6): at 0 a "
                                  "row of zeros is divided by zero, and above 0.1 it swamps the variance it is added to"),
                      std::string("FAILED (0 errors, 1 warning, 2 notes)")}}) {
    SCOPED_TRACE(value);
    GgufBuilder b = GgufBuilder::from_file(*sample);
    ASSERT_TRUE(b.set("llama.attention.layer_norm_rms_epsilon", MetadataValue::of(value)));
    const fs::path p = dir / "eps.gguf";
    ASSERT_TRUE(b.write_file(p, b.suggested_options()));
    const auto r = run_gguf({"check", "--strict", p.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, finding + advice + tail + p.string() + ": " + summary + "\n");
    EXPECT_EQ(r.err, "");
  }
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
