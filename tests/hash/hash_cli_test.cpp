// gguf hash on the command line: a manifest on stdout, --check exit codes, JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;
using test::run_gguf;

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

TEST(HashCli, ManifestThenCheck) {
  const fs::path dir = test::temp_dir("hash-cli");
  const fs::path model = dir / "m.gguf";
  fs::copy_file(test::sample_model(), model);
  for (const char* algorithm : {"xxh64", "sha256"}) {
    SCOPED_TRACE(algorithm);
    const auto made = run_gguf({"hash", model.string(), "--algorithm", algorithm});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    EXPECT_NE(made.out.find(std::string("algorithm ") + algorithm), std::string::npos);
    const fs::path manifest = dir / "m.manifest";
    write_text(manifest, made.out);
    const auto ok = run_gguf({"hash", model.string(), "--check", manifest.string()});
    EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    EXPECT_NE(ok.out.find("OK"), std::string::npos);

    // Damage the last byte of the file (inside the last tensor's data).
    auto bytes = test::read_bytes(model);
    bytes[bytes.size() - 1] ^= std::byte{0x55};
    test::write_bytes(dir / "bad.gguf", bytes);
    const auto bad = run_gguf({"hash", (dir / "bad.gguf").string(), "--check", manifest.string(), "--json"});
    EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
    const auto doc = nlohmann::json::parse(bad.out);
    EXPECT_EQ(doc["ok"], false);
    ASSERT_GE(doc["mismatches"].size(), 1u);
    EXPECT_EQ(doc["mismatches"][0]["kind"], "tensor");
  }
  // JSON manifest.
  const auto json = run_gguf({"hash", model.string(), "--json"});
  ASSERT_EQ(json.exit_code, 0);
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["algorithm"], "xxh64");
  EXPECT_EQ(doc["files"].size(), 1u);
  EXPECT_GT(doc["tensors"].size(), 0u);
  // Usage and I/O errors: 2.
  EXPECT_EQ(run_gguf({"hash", model.string(), "--algorithm", "md5"}).exit_code, 2);
  write_text(dir / "junk.manifest", "not a manifest\n");
  EXPECT_EQ(run_gguf({"hash", model.string(), "--check", (dir / "junk.manifest").string()}).exit_code, 2);
  EXPECT_EQ(run_gguf({"hash", (dir / "absent.gguf").string()}).exit_code, 2);
  EXPECT_EQ(run_gguf({"hash", "--help"}).exit_code, 0);
  fs::remove_all(dir);
}

// Issue 29 review: the model's own digest on a line naming FILE:nope passed as the model's line.
// It is tensor "nope", which the model lacks.
TEST(HashCli, AFileColonTensorLineIsATensorTheModelMayLack) {
  const fs::path dir = test::temp_dir("hash-cli-colon");
  const fs::path model = dir / "m.gguf", manifest = dir / "m.manifest";
  fs::copy_file(test::sample_model(), model);
  const auto line = run_gguf({"hash", model.string(), "--format", "gguf-hash", "--no-layer"});
  ASSERT_EQ(line.exit_code, 0) << line.err;
  write_text(manifest, line.out.substr(0, line.out.size() - 1) + ":nope\n");
  const auto r = run_gguf({"hash", model.string(), "--check", manifest.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "");
  // Each of the model's 20 tensors unlisted, "nope" missing, the verdict (no model line: not checked).
  const auto lines = test::lines_of(r.out);
  ASSERT_EQ(lines.size(), 22u) << r.out;
  for (size_t i = 0; i < 20; ++i) EXPECT_TRUE(lines[i].starts_with("unexpected_tensor ")) << lines[i];
  EXPECT_EQ(lines[20], "missing_tensor nope: the manifest has a xxh64 line for it, the file does not have it");
  EXPECT_EQ(lines[21], model.string() + ": FAILED (20 tensors checked with xxh64 against a gguf-hash manifest, 21 mismatches)");
  fs::remove_all(dir);
}

// gguf-hash's options: its lines (text and JSON), and the refusals with their one line.
TEST(HashCli, GgufHashOptions) {
  const std::string model = test::sample_model().string();
  const auto lines = run_gguf({"hash", model, "--all", "--no-layer"});
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  EXPECT_EQ(lines.err, "");
  const auto got = test::lines_of(lines.out);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].starts_with("xxh64     ") && got[0].ends_with("  " + model)) << got[0];
  EXPECT_TRUE(got[1].starts_with("sha1      ")) << got[1];
  EXPECT_TRUE(got[2].starts_with("sha256    ")) << got[2];
  EXPECT_EQ(run_gguf({"hash", model, "--format", "gguf-hash", "--no-layer"}).out, got[0] + "\n");  // xxh64 by default

  const auto json = run_gguf({"hash", model, "--uuid", "--no-layer", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc, nlohmann::json::parse(R"({"file":")" + model + R"(","digests":[{"algorithm":"uuid","digest":")" +
                                       test::lines_of(run_gguf({"hash", model, "--uuid", "--no-layer"}).out)[0].substr(10, 36) +
                                       R"(","tensor":null}]})"));

  const auto bad_format = run_gguf({"hash", model, "--format", "sha256sum"});
  EXPECT_EQ(bad_format.exit_code, 2);
  EXPECT_EQ(bad_format.out, "");
  EXPECT_EQ(bad_format.err, "gguf hash: unknown --format 'sha256sum' (ggufkit or gguf-hash)\n");
  const auto uuid_algorithm = run_gguf({"hash", model, "-a", "uuid"});
  EXPECT_EQ(uuid_algorithm.exit_code, 2);
  EXPECT_EQ(uuid_algorithm.err, "gguf hash: unknown algorithm 'uuid' (xxh64, sha1 or sha256; the model id is --uuid)\n");

  const fs::path dir = test::temp_dir("hash-cli-gguf-hash");
  write_text(dir / "ours.manifest", run_gguf({"hash", model, "-a", "sha1"}).out);
  const auto mixed = run_gguf({"hash", model, "--check", (dir / "ours.manifest").string(), "--sha1"});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_EQ(mixed.out, "");
  EXPECT_EQ(mixed.err, "gguf hash: " + (dir / "ours.manifest").string() +
                           " is a ggufkit manifest: it is checked with its own algorithm, without gguf-hash's options\n");
  const auto ok = run_gguf({"hash", model, "--check", (dir / "ours.manifest").string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  write_text(dir / "theirs.manifest", run_gguf({"hash", model, "--all"}).out);
  const auto verified = run_gguf({"hash", model, "--check", (dir / "theirs.manifest").string(), "--json"});
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_EQ(nlohmann::json::parse(verified.out),
            nlohmann::json::parse(R"({"mismatches":[],"file":")" + model + R"(","ok":true,"tensors_checked":)" +
                                  std::to_string(got.size() == 3 ? test::lines_of(run_gguf({"hash", model, "--sha256"}).out).size() - 1 : 0) +
                                  R"(,"model_checked":true,"algorithms":"sha256","manifest_format":"gguf-hash","mismatch_count":0})"));
  write_text(dir / "junk.manifest", "sha256    nothex  m.gguf\n");
  const auto junk = run_gguf({"hash", model, "--check", (dir / "junk.manifest").string()});
  EXPECT_EQ(junk.exit_code, 2);
  EXPECT_EQ(junk.err, "gguf: " + (dir / "junk.manifest").string() +
                          ": manifest line 1: 'nothex' is not a sha256 digest (64 lower-case hex digits)\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
