// Digests against known answers and an independent tool, manifests, and verification.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "hash/xxh64.h"
#include "ggufkit/hash.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

TEST(Xxh64, KnownAnswers) {
  // Published XXH64 values (seed 0 unless given), covering every length class: < 4, 4..7, 8..31,
  // exactly one 32-byte stripe, and longer.
  const struct {
    std::string_view text;
    uint64_t seed;
    uint64_t want;
  } cases[] = {
      {"", 0, 0xef46db3751d8e999ull},
      {"a", 0, 0xd24ec4f1a98c6e5bull},
      {"abc", 0, 0x44bc2cf5ad770999ull},
      {"1234", 0, 0xd8316e61d84f6ba4ull},
      {"12345678", 0, 0xd2d02f08cf7cfd4aull},
      {"123456789012345", 0, 0xc377d78ade001a3cull},
      {"1234567890123456", 0, 0xb61c33dc6c59f270ull},
      {"1234567890123456789012345678901", 0, 0x8f367cb873a5376eull},
      {"12345678901234567890123456789012", 0, 0x40fd1aa52d98274cull},
      {"The quick brown fox jumps over the lazy dog", 0, 0x0b242d361fda71bcull},
      {"", 5381, 0xaf382146d5c3cacfull},
      {"abc", 5381, 0x19d1c1b5c673451full},
      {"12345678901234567890123456789012", 5381, 0x38ea26e7c55f8095ull},
  };
  for (const auto& c : cases) EXPECT_EQ(digest::xxh64(bytes_of(c.text), c.seed), c.want) << "'" << c.text << "'";
  EXPECT_EQ(digest_hex(DigestAlgorithm::xxh64, bytes_of("abc")), "44bc2cf5ad770999");
}

std::string sha256sum_of(const fs::path& path) {
  const std::string cmd = "sha256sum '" + path.string() + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  char buf[65] = {};
  const size_t n = fread(buf, 1, 64, p);
  pclose(p);
  return std::string(buf, n);
}

TEST(Hash, FileDigestsEqualSha256sumAndTensorDigestsTheirBytes) {
  auto model = SplitModel::open(test::sample_model());
  ASSERT_TRUE(model) << model.error().describe();
  const Manifest m = hash_model(*model, DigestAlgorithm::sha256, Threads{2});
  ASSERT_EQ(m.files.size(), 1u);
  const std::string independent = sha256sum_of(test::sample_model());
  if (independent.size() == 64) {
    EXPECT_EQ(m.files[0].digest, independent);
  }
  EXPECT_EQ(m.files[0].bytes, fs::file_size(test::sample_model()));
  ASSERT_EQ(m.tensors.size(), model->tensors().size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const ModelTensor& t = model->tensors()[i];
    EXPECT_EQ(m.tensors[i].name, t.info->name);
    EXPECT_EQ(m.tensors[i].bytes, t.data.size());
    EXPECT_EQ(m.tensors[i].digest, digest_hex(DigestAlgorithm::sha256, t.data));
  }
  // The thread count changes nothing.
  const Manifest one = hash_model(*model, DigestAlgorithm::sha256, Threads{1});
  EXPECT_EQ(format_manifest(one), format_manifest(m));
}

TEST(Hash, ManifestsRoundTripAnyName) {
  Manifest m;
  m.algorithm = DigestAlgorithm::xxh64;
  m.files.push_back({"model with spaces.gguf", 123, "0123456789abcdef"});
  m.tensors.push_back({"plain.weight", 4, "fedcba9876543210"});
  m.tensors.push_back({std::string("odd\nname\\with\x01" "bytes", 19), 0, "0000000000000000"});
  const auto back = parse_manifest(format_manifest(m));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(format_manifest(*back), format_manifest(m));
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors[1].name, m.tensors[1].name);
  EXPECT_EQ(back->files[0].name, "model with spaces.gguf");
}

TEST(Hash, BadManifestsAreRefusedWithTheLine) {
  for (const char* text : {"", "algorithm md5\n", "tensor 0123456789abcdef 4 x\n", "algorithm xxh64\ntensor 0123 4 x\n",
                           "algorithm xxh64\ntensor 0123456789abcdef four x\n", "algorithm xxh64\nblob 1 2 3\n",
                           "algorithm xxh64\ntensor 0123456789abcdef 4 bad\\q\n"}) {
    const auto m = parse_manifest(text);
    EXPECT_FALSE(m) << "accepted: " << text;
    if (!m) {
      EXPECT_FALSE(m.error().message.empty());
    }
  }
}

TEST(Hash, VerificationNamesWhatDiffers) {
  const fs::path dir = test::temp_dir("hash-verify");
  const fs::path copy = dir / "m.gguf";
  fs::copy_file(test::sample_model(), copy);
  auto original = SplitModel::open(copy);
  ASSERT_TRUE(original);
  const Manifest expected = hash_model(*original, DigestAlgorithm::xxh64);
  EXPECT_TRUE(compare_manifests(expected, expected).empty());

  // One byte of one tensor.
  const ModelTensor& victim = original->tensors()[3];
  const uint64_t at = original->shard_of(victim).data_offset() + victim.info->offset + 5;
  const std::string victim_name(victim.info->name);
  auto bytes = test::read_bytes(copy);
  bytes[at] ^= std::byte{1};
  test::write_bytes(copy, bytes);
  auto damaged = SplitModel::open(copy);
  ASSERT_TRUE(damaged);
  const auto mismatches = compare_manifests(expected, hash_model(*damaged, DigestAlgorithm::xxh64));
  ASSERT_EQ(mismatches.size(), 2u);
  EXPECT_EQ(mismatches[0].kind, "tensor");
  EXPECT_EQ(mismatches[0].name, victim_name);
  EXPECT_EQ(mismatches[1].kind, "file");
  EXPECT_EQ(mismatches[1].message.find("every tensor matches"), std::string::npos);

  // Metadata only: every tensor matches, the file does not.
  bytes[at] ^= std::byte{1};
  const auto name_kv = damaged->metadata_file().find("general.name");
  ASSERT_NE(name_kv, nullptr);
  bytes[name_kv->offset + 8 + name_kv->key.size() + 4 + 8] ^= std::byte{0x20};  // flip the case of its first letter
  test::write_bytes(copy, bytes);
  auto renamed = SplitModel::open(copy);
  ASSERT_TRUE(renamed);
  const auto meta = compare_manifests(expected, hash_model(*renamed, DigestAlgorithm::xxh64));
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_EQ(meta[0].kind, "file");
  EXPECT_NE(meta[0].message.find("every tensor matches"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Hash, SplitModelsHashAsTheirTensors) {
  auto input = GgufFile::open(test::sample_model());
  ASSERT_TRUE(input);
  const fs::path dir = test::temp_dir("hash-split");
  auto plan = plan_split(*input, (dir / "m").string(), SplitLimits{0, 6});
  ASSERT_TRUE(plan);
  ASSERT_TRUE(write_split(*input, *plan, SplitWriteOptions{false, test::sample_model(), {}}));
  auto whole = SplitModel::open(test::sample_model());
  auto split = SplitModel::open(plan->shards[0].path);
  ASSERT_TRUE(whole && split);
  const Manifest a = hash_model(*whole, DigestAlgorithm::xxh64);
  const Manifest b = hash_model(*split, DigestAlgorithm::xxh64);
  EXPECT_EQ(b.files.size(), plan->shards.size());
  const auto mismatches = compare_manifests(a, b);
  ASSERT_EQ(mismatches.size(), 1u);  // the tensors agree; the files do not
  EXPECT_EQ(mismatches[0].kind, "file_count");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
