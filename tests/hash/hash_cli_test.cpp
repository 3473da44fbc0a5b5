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

}  // namespace
}  // namespace ggufkit
