// gguf hash against llama.cpp's own hashing tools: gguf-py's gguf_hash.py (the real script's
// function, run by Python on every corpus file) and xxhsum for the xxh64 lines gguf-hash prints.
// Manifests gguf_hash.py wrote are verified by gguf hash --check, and damage is named.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "ggufkit/hash.h"
#include "ggufkit/reader.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;
using test::run_gguf;

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files = {test::sample_model()};
  if (const auto shared = test::shared_dir()) {
    std::vector<fs::path> more;
    for (const auto& entry : fs::directory_iterator(*shared / "corpus" / "tiny-llama")) {
      if (entry.path().extension() == ".gguf") more.push_back(entry.path());
    }
    std::sort(more.begin(), more.end());
    files.insert(files.end(), more.begin(), more.end());
  }
  return files;
}

// gguf_hash.py's gguf_hash() on each file in one Python process (as `gguf_hash.py FILE` and
// `gguf_hash.py --no-layer FILE` print), each file's output after a "== FILE" line.
std::map<std::string, std::string> gguf_hash_py(const test::GgufPy& py, const std::vector<fs::path>& files,
                                                bool no_layer) {
  const fs::path dir = test::temp_dir("hash-oracle-driver");
  const fs::path driver = dir / "driver.py";
  std::ofstream(driver) << "import sys\n"
                        << "sys.path.insert(0, " << '"' << py.scripts.parent_path().parent_path().string() << '"' << ")\n"
                        << "from gguf import GGUFReader\n"
                        << "from gguf.scripts.gguf_hash import gguf_hash\n"
                        << "for f in sys.argv[2:]:\n"
                        << "    print('== ' + f, flush=True)\n"
                        << "    gguf_hash(GGUFReader(f, 'r'), f, True, sys.argv[1] == 'no-layer')\n"
                        << "    sys.stdout.flush()\n";
  std::vector<std::string> args = {no_layer ? "no-layer" : "layer"};
  for (const fs::path& f : files) args.push_back(f.string());
  const auto run = test::run_gguf_py(py, driver.string(), args);
  EXPECT_EQ(run.status, 0) << run.out.substr(0, 2000);
  std::map<std::string, std::string> out;
  std::string* current = nullptr;
  for (const std::string& line : test::lines_of(run.out)) {
    if (line.starts_with("== ")) {
      current = &out[line.substr(3)];
    } else if (current != nullptr) {
      *current += line + "\n";
    }
  }
  fs::remove_all(dir);
  return out;
}

#define GGUFKIT_REQUIRE_GGUF_PY(var)                                                  \
  const auto var##_or_why = test::gguf_py();                                          \
  if (const auto* why = std::get_if<std::string>(&var##_or_why)) GTEST_SKIP() << *why; \
  const test::GgufPy& var = std::get<test::GgufPy>(var##_or_why)

TEST(HashOracle, SameLinesAsGgufHashPyOnTheCorpus) {
  GGUFKIT_REQUIRE_GGUF_PY(py);
  const auto files = corpus_files();
  // One Python pass (GGUFReader is most of its time): --no-layer prints the same model lines
  // without the tensors' (gguf_hash.py's no_layer only guards the per-tensor prints).
  const auto theirs = gguf_hash_py(py, files, false);
  ASSERT_EQ(theirs.size(), files.size());
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    const std::string& lines = theirs.at(f.string());
    std::string model_lines;
    for (const std::string& line : test::lines_of(lines)) {
      if (line.ends_with("  " + f.string())) model_lines += line + "\n";
    }
    EXPECT_EQ(test::lines_of(model_lines).size(), 3u);
    for (const bool no_layer : {false, true}) {
      std::vector<std::string> args = {"hash", f.string(), "--sha1", "--sha256", "--uuid"};
      if (no_layer) args.push_back("--no-layer");
      const auto ours = run_gguf(args);
      EXPECT_EQ(ours.exit_code, 0);
      EXPECT_EQ(ours.err, "");
      EXPECT_EQ(ours.out, no_layer ? model_lines : lines) << (no_layer ? "--no-layer" : "");
    }
  }
}

std::string xxhsum_of(const fs::path& path) { return test::first_word_of("xxhsum " + test::shell_quoted(path)); }

// gguf-hash's xxh64 lines (gguf_hash.py has no xxh64): each tensor's, and the model's over every
// tensor's data in order, as xxhsum gives for those bytes; ggufkit's file digest is xxhsum's.
TEST(HashOracle, Xxh64LinesAreXxhsumsOfTheBytes) {
  if (std::system("xxhsum --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "xxhsum not installed (Debian xxhash)";
  const fs::path path = test::sample_model();
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file) << file.error().describe();
  const fs::path dir = test::temp_dir("hash-oracle-xxh");
  std::string want;
  std::vector<std::byte> all;
  for (const TensorInfo& t : file->tensors()) {
    const auto data = file->tensor_data(t);
    test::write_bytes(dir / "tensor.bin", {data.begin(), data.end()});
    want += "xxh64     " + xxhsum_of(dir / "tensor.bin") + "  " + path.string() + ":" + std::string(t.name) + "\n";
    all.insert(all.end(), data.begin(), data.end());
  }
  test::write_bytes(dir / "all.bin", all);
  want += "xxh64     " + xxhsum_of(dir / "all.bin") + "  " + path.string() + "\n";
  const auto ours = run_gguf({"hash", path.string(), "--xxh64"});
  EXPECT_EQ(ours.exit_code, 0);
  EXPECT_EQ(ours.err, "");
  EXPECT_EQ(ours.out, want);
  const auto manifest = run_gguf({"hash", path.string()});
  ASSERT_EQ(manifest.exit_code, 0) << manifest.err;
  EXPECT_EQ(test::lines_of(manifest.out).at(2),
            "file " + xxhsum_of(path) + " " + std::to_string(fs::file_size(path)) + " " + path.filename().string());
  fs::remove_all(dir);
}

// A manifest gguf_hash.py wrote for a file, verified against a renamed copy (the strongest
// algorithm, sha256, unless one is asked for), then against a copy with one tensor damaged.
TEST(HashOracle, GgufHashPyManifestsVerify) {
  GGUFKIT_REQUIRE_GGUF_PY(py);
  const fs::path original = test::sample_model();
  const fs::path dir = test::temp_dir("hash-oracle-check");
  const fs::path manifest = dir / "model.manifest";
  const fs::path short_manifest = dir / "model-no-layer.manifest";
  std::ofstream(manifest) << gguf_hash_py(py, {original}, false).at(original.string());
  std::ofstream(short_manifest) << gguf_hash_py(py, {original}, true).at(original.string());
  const fs::path copy = dir / "downloaded.gguf";
  fs::copy_file(original, copy);
  auto file = GgufFile::open(original);
  ASSERT_TRUE(file);
  const size_t n = file->tensors().size();
  const std::string checked = fmt::format("{} tensors and the model digest", n);

  auto r = run_gguf({"hash", copy.string(), "--check", manifest.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, copy.string() + ": OK (" + checked +
                       " checked with sha256 against a gguf-hash manifest, 0 mismatches)\n");
  r = run_gguf({"hash", copy.string(), "--check", manifest.string(), "--sha1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, copy.string() + ": OK (" + checked + " checked with sha1 against a gguf-hash manifest, 0 mismatches)\n");
  r = run_gguf({"hash", copy.string(), "--check", short_manifest.string(), "--uuid"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, copy.string() + ": OK (0 tensors and the model digest checked with uuid against a gguf-hash "
                                   "manifest, 0 mismatches)\n");
  // gguf_hash.py writes no xxh64 lines.
  r = run_gguf({"hash", copy.string(), "--check", manifest.string(), "--xxh64"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf hash: " + manifest.string() + " has no xxh64 lines (it has sha1, sha256, uuid)\n");

  // One byte of the last tensor changed: that tensor and the model's digest differ.
  auto bytes = test::read_bytes(original);
  bytes.back() ^= std::byte{0x55};
  test::write_bytes(copy, bytes);
  auto damaged = GgufFile::open(copy);
  ASSERT_TRUE(damaged);
  const TensorInfo& last = damaged->tensors().back();
  std::string want_tensor, want_model;
  const auto manifest_bytes = test::read_bytes(manifest);
  const std::string manifest_text(reinterpret_cast<const char*>(manifest_bytes.data()), manifest_bytes.size());
  for (const std::string& line : test::lines_of(manifest_text)) {
    if (line.starts_with("sha256") && line.ends_with(":" + std::string(last.name))) want_tensor = line.substr(10, 64);
    if (line.starts_with("sha256") && line.ends_with("  " + original.string())) want_model = line.substr(10, 64);
  }
  ASSERT_EQ(want_tensor.size(), 64u);
  ASSERT_EQ(want_model.size(), 64u);
  std::vector<std::byte> all;
  for (const TensorInfo& t : damaged->tensors()) {
    const auto d = damaged->tensor_data(t);
    all.insert(all.end(), d.begin(), d.end());
  }
  r = run_gguf({"hash", copy.string(), "--check", manifest.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "tensor " + std::string(last.name) + ": sha256 " +
                       digest_hex(DigestAlgorithm::sha256, damaged->tensor_data(last)) + ", the manifest says " +
                       want_tensor + "\nmodel: sha256 of every tensor's data " + digest_hex(DigestAlgorithm::sha256, all) +
                       ", the manifest says " + want_model + "\n" + copy.string() + ": FAILED (" + checked +
                       " checked with sha256 against a gguf-hash manifest, 2 mismatches)\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
