// Digests against known answers and an independent tool, manifests, and verification.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "ggufkit/hash.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

std::string sha256sum_of(const fs::path& path) { return test::first_word_of("sha256sum " + test::shell_quoted(path)); }

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

// A cancel stops the digests: set before the start, nothing is digested and progress never
// reaches the total; set from the first report (on one thread), the streams not finished by then
// keep empty digests and the others are right.
TEST(Hash, ACancelStopsTheDigests) {
  auto model = SplitModel::open(test::sample_model());
  ASSERT_TRUE(model) << model.error().describe();
  const Manifest full = hash_model(*model, DigestAlgorithm::xxh64, Threads{1});
  std::atomic<bool> cancel{true};
  std::vector<uint64_t> calls;
  const Manifest none = hash_model(*model, DigestAlgorithm::xxh64, Threads{2},
                                   [&](uint64_t done, uint64_t) { calls.push_back(done); }, &cancel);
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(none.files[0].digest, "");
  for (const ManifestEntry& e : none.tensors) EXPECT_EQ(e.digest, "") << e.name;
  cancel = false;
  calls.clear();
  const Manifest part = hash_model(*model, DigestAlgorithm::xxh64, Threads{1}, [&](uint64_t done, uint64_t) {
    calls.push_back(done);
    cancel = true;
  }, &cancel);
  ASSERT_EQ(calls.size(), 1u);
  size_t finished = 0;
  for (size_t i = 0; i < part.tensors.size(); ++i) {
    if (part.tensors[i].digest.empty()) continue;
    EXPECT_EQ(part.tensors[i].digest, full.tensors[i].digest);
    ++finished;
  }
  EXPECT_LT(finished, part.tensors.size());
  // Without a cancel, the same digests as before.
  cancel = false;
  EXPECT_EQ(format_manifest(hash_model(*model, DigestAlgorithm::xxh64, Threads{2}, {}, &cancel)), format_manifest(full));
}

// Progress counts every byte once per digest it belongs to (the file's and its tensor's), grows,
// and ends with (total, total) whatever the thread count; the digests do not change.
TEST(Hash, ProgressCountsEveryDigestedByteAndEndsAtTheTotal) {
  auto model = SplitModel::open(test::sample_model());
  ASSERT_TRUE(model) << model.error().describe();
  uint64_t tensor_bytes = 0;
  for (const ModelTensor& t : model->tensors()) tensor_bytes += t.data.size();
  const uint64_t total = fs::file_size(test::sample_model()) + tensor_bytes;
  for (const unsigned threads : {1u, 2u}) {
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    const Manifest m = hash_model(*model, DigestAlgorithm::xxh64, Threads{threads},
                                  [&](uint64_t done, uint64_t all) { calls.emplace_back(done, all); });
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back(), std::make_pair(total, total)) << threads;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].second, total);
      if (i > 0) {
        EXPECT_LE(calls[i - 1].first, calls[i].first);
      }
    }
    EXPECT_EQ(format_manifest(m), format_manifest(hash_model(*model, DigestAlgorithm::xxh64, Threads{threads})));
  }
  // gguf-hash's lines: the model digest reads every tensor again, once per algorithm.
  auto file = GgufFile::open(test::sample_model());
  ASSERT_TRUE(file);
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  const GgufHashOptions options{.algorithms = {DigestAlgorithm::xxh64, DigestAlgorithm::sha1},
                                .per_tensor = true,
                                .progress = [&](uint64_t done, uint64_t all) { calls.emplace_back(done, all); }};
  const auto with = gguf_hash_file(*file, "m.gguf", options, Threads{2});
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(4 * tensor_bytes, 4 * tensor_bytes));
  EXPECT_EQ(format_gguf_hash(with),
            format_gguf_hash(gguf_hash_file(*file, "m.gguf", {.algorithms = options.algorithms}, Threads{1})));
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

// gguf-hash's lines: what gguf_hash_file computes is each tensor's bytes' and the concatenation's
// digest, the lines read back equal, and the parser says which line is wrong and why.
TEST(GgufHash, LinesAreDigestsOfTheTensorsAndTheirConcatenation) {
  auto file = GgufFile::open(test::sample_model());
  ASSERT_TRUE(file);
  const auto m = gguf_hash_file(
      *file, "x/m.gguf", {.algorithms = {DigestAlgorithm::uuid, DigestAlgorithm::sha256, DigestAlgorithm::xxh64}}, Threads{2});
  const auto tensors = file->tensors();
  ASSERT_EQ(m.entries.size(), tensors.size() * 2 + 3);
  std::vector<std::byte> all;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto data = file->tensor_data(tensors[i]);
    all.insert(all.end(), data.begin(), data.end());
    EXPECT_EQ(m.entries[2 * i].algorithm, DigestAlgorithm::xxh64);  // gguf-hash's order, not the request's
    EXPECT_EQ(m.entries[2 * i].tensor, tensors[i].name);
    EXPECT_EQ(m.entries[2 * i].digest, digest_hex(DigestAlgorithm::xxh64, data));
    EXPECT_EQ(m.entries[2 * i + 1].algorithm, DigestAlgorithm::sha256);
    EXPECT_EQ(m.entries[2 * i + 1].digest, digest_hex(DigestAlgorithm::sha256, data));
  }
  const size_t model = tensors.size() * 2;
  EXPECT_EQ(m.entries[model].digest, digest_hex(DigestAlgorithm::xxh64, all));
  EXPECT_EQ(m.entries[model + 1].digest, digest_hex(DigestAlgorithm::sha256, all));
  EXPECT_EQ(m.entries[model + 2].algorithm, DigestAlgorithm::uuid);
  EXPECT_EQ(m.entries[model + 2].digest, digest_hex(DigestAlgorithm::uuid, all));
  for (size_t i = model; i < m.entries.size(); ++i) EXPECT_EQ(m.entries[i].tensor, "");

  const std::string text = format_gguf_hash(m);
  EXPECT_TRUE(text.starts_with("xxh64     " + m.entries[0].digest + "  x/m.gguf:" + std::string(tensors[0].name) + "\n"));
  EXPECT_TRUE(text.ends_with("uuid      " + m.entries.back().digest + "  x/m.gguf\n"));
  EXPECT_TRUE(is_gguf_hash_manifest("\n# comment\n" + text));
  EXPECT_FALSE(is_gguf_hash_manifest(format_manifest(hash_model(*SplitModel::open(test::sample_model()),
                                                                DigestAlgorithm::sha1))));
  const auto back = parse_gguf_hash(text);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->file, "x/m.gguf");
  EXPECT_EQ(format_gguf_hash(*back), text);
  EXPECT_EQ(gguf_hash_algorithms(*back),
            (std::vector<DigestAlgorithm>{DigestAlgorithm::xxh64, DigestAlgorithm::sha256, DigestAlgorithm::uuid}));
  EXPECT_EQ(strongest_gguf_hash_algorithm(*back), DigestAlgorithm::sha256);
  EXPECT_TRUE(compare_gguf_hash(*back, m).empty());
  // --no-layer: the model's lines only, the same digests.
  const auto short_m = gguf_hash_file(*file, "x/m.gguf", {.algorithms = {DigestAlgorithm::xxh64}, .per_tensor = false});
  ASSERT_EQ(short_m.entries.size(), 1u);
  EXPECT_EQ(short_m.entries[0].digest, m.entries[model].digest);
  // Checked against the full manifest: the tensors are not compared, the model is.
  EXPECT_TRUE(compare_gguf_hash(*back, short_m).empty());
}

// Names gguf-hash would print raw that would break or lose the line (a newline, a control, bytes
// that are not UTF-8, spaces at the end that the reader trims) are escaped on a marked line and
// read back exactly; other names are gguf-hash's own spelling.
TEST(GgufHash, EscapedNamesReadBack) {
  GgufHashManifest m;
  m.file = " dir/m\x1b.gguf";
  for (const std::string name : {"plain", "back\\slash", "a\nxxh64  0000000000000000  FAKE", "trailing ", "\t", "\xff\xe2\x80\xae"}) {
    m.entries.push_back({DigestAlgorithm::xxh64, "0123456789abcdef", name});
  }
  m.entries.push_back({DigestAlgorithm::xxh64, "0123456789abcdef", {}});
  const std::string text = format_gguf_hash(m);
  EXPECT_EQ(text,
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf:plain\n"
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf:back\\\\slash\n"
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf:a\\x0axxh64  0000000000000000  FAKE\n"
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf:trailing\\x20\n"
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf:\\x09\n"
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf:\\xff\\xe2\\x80\\xae\n"
            "\\xxh64     0123456789abcdef  \\x20dir/m\\x1b.gguf\n");
  const auto back = parse_gguf_hash(text);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->file, m.file);
  ASSERT_EQ(back->entries.size(), m.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) EXPECT_EQ(back->entries[i].tensor, m.entries[i].tensor);
  m.file = "m.gguf";
  EXPECT_TRUE(format_gguf_hash(m).starts_with("xxh64     0123456789abcdef  m.gguf:plain\n"
                                              "xxh64     0123456789abcdef  m.gguf:back\\slash\n"
                                              "\\xxh64     0123456789abcdef  m.gguf:a\\x0axxh64"));
}

TEST(GgufHash, BadLinesAreRefusedWithTheLineAndWhy) {
  const std::string h16 = "0123456789abcdef";
  const struct {
    std::string text;
    std::string message;
  } cases[] = {
      {"", "not a gguf-hash manifest: no digest lines"},
      {"# only a comment\n", "not a gguf-hash manifest: no digest lines"},
      {"md5       " + h16 + "  m.gguf\n", "manifest line 1: 'md5' is not an algorithm of gguf-hash (xxh64, sha1, sha256 or uuid)"},
      {"xxh64     0123  m.gguf\n", "manifest line 1: '0123' is not a xxh64 digest (16 lower-case hex digits)"},
      {"\nsha1      " + h16 + "  m.gguf\n", "manifest line 2: '" + h16 + "' is not a sha1 digest (40 lower-case hex digits)"},
      {"uuid      " + h16 + h16 + "0000  m.gguf\n", "manifest line 1: '" + h16 + h16 + "0000' is not a uuid (8-4-4-4-12 lower-case hex digits)"},
      {"xxh64     " + h16 + "\n", "manifest line 1: expected ALGO  DIGEST  FILE or FILE:TENSOR"},
      {"xxh64     " + h16 + "  m.gguf:a\nxxh64     " + h16 + "  other.gguf\n" + "xxh64     " + h16 + "  m.gguf\n",
       "manifest line 2: 'other.gguf' is neither m.gguf nor m.gguf:TENSOR (a manifest covers one file)"},
  };
  for (const auto& c : cases) {
    const auto m = parse_gguf_hash(c.text);
    ASSERT_FALSE(m) << c.text;
    EXPECT_EQ(m.error().message, c.message) << c.text;
  }
}

// Issue 29 review: a lone "FILE:TENSOR" line was taken as the digest of a file named so (the shortest
// name is FILE), and "nope" was never looked for. A name FILE:TENSOR is a tensor's.
TEST(GgufHash, AFileColonTensorNameIsATensorEvenWithoutTheFileLine) {
  const std::string h(16, 'a');
  const auto entries = [](const GgufHashManifest& m) {
    std::string out = m.file + " |";
    for (const GgufHashEntry& e : m.entries) out += " [" + e.tensor + "]";
    return out;
  };
  const struct {
    std::string text;
    std::string parsed;
  } cases[] = {
      {"xxh64     " + h + "  evil.gguf:nope\n", "evil.gguf | [nope]"},
      {"xxh64     " + h + "  m.gguf:t1\nxxh64     " + h + "  m.gguf:t2\n", "m.gguf | [t1] [t2]"},
      // A file whose name has a colon, with its own line: still that file.
      {"xxh64     " + h + "  a:b.gguf:t\nxxh64     " + h + "  a:b.gguf\n", "a:b.gguf | [t] []"},
      {"xxh64     " + h + "  m.gguf\n", "m.gguf | []"},
  };
  for (const auto& c : cases) {
    const auto m = parse_gguf_hash(c.text);
    ASSERT_TRUE(m) << c.text << m.error().describe();
    EXPECT_EQ(entries(*m), c.parsed) << c.text;
  }
}

TEST(GgufHash, ComparisonNamesMissingUnexpectedAndDifferentTensors) {
  const std::string a(16, 'a'), b(16, 'b');
  const auto expected = parse_gguf_hash("xxh64     " + a + "  m.gguf:t1\nxxh64     " + a + "  m.gguf:t2\n" +
                                        "sha1      " + std::string(40, 'c') + "  m.gguf:t9\nxxh64     " + a + "  m.gguf\n");
  ASSERT_TRUE(expected) << expected.error().describe();
  GgufHashManifest actual{"renamed.gguf",
                          {{DigestAlgorithm::xxh64, a, "t1"}, {DigestAlgorithm::xxh64, b, "t2"},
                           {DigestAlgorithm::xxh64, a, "t3"}, {DigestAlgorithm::xxh64, b, ""}}};
  const auto mismatches = compare_gguf_hash(*expected, actual);
  ASSERT_EQ(mismatches.size(), 3u);
  EXPECT_EQ(mismatches[0].kind, "tensor");
  EXPECT_EQ(mismatches[0].name, "t2");
  EXPECT_EQ(mismatches[0].message, "xxh64 " + b + ", the manifest says " + a);
  EXPECT_EQ(mismatches[1].kind, "unexpected_tensor");
  EXPECT_EQ(mismatches[1].name, "t3");
  EXPECT_EQ(mismatches[1].message, "the file has it, the manifest has no xxh64 line for it");
  EXPECT_EQ(mismatches[2].kind, "model");
  EXPECT_EQ(mismatches[2].message, "xxh64 of every tensor's data " + b + ", the manifest says " + a);
  // A tensor the manifest lists and the file lacks (t9 is sha1 only: not compared with xxh64).
  actual.entries = {{DigestAlgorithm::xxh64, a, "t1"}, {DigestAlgorithm::xxh64, a, ""}};
  const auto missing = compare_gguf_hash(*expected, actual);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].kind, "missing_tensor");
  EXPECT_EQ(missing[0].name, "t2");
  EXPECT_EQ(missing[0].message, "the manifest has a xxh64 line for it, the file does not have it");
}

}  // namespace
}  // namespace ggufkit
