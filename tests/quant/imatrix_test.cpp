// Importance matrix files: both of llama.cpp's forms, the values llama-quantize derives from them
// (computed here from the inputs), llama-quantize's refusals, and untrusted legacy files (every
// truncation, huge lengths refused before anything is allocated).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include "ggufkit/imatrix.h"
#include "ggufkit/writer.h"
#include "test_support.h"

// free() of what the replaced operator new took from malloc() is a match GCC cannot see.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// The largest single allocation since the last reset: proves huge lengths are refused before
// anything is allocated for them.
namespace {
std::atomic<size_t> g_largest_allocation{0};
}  // namespace

void* operator new(size_t size) {
  size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
  while (size > seen && !g_largest_allocation.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): every allocation of the
// program must come from this malloc, or the sanitizers see operator new freed by free().
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
  while (size > seen && !g_largest_allocation.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {
  }
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> float_bytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// ---- the GGUF form ----

struct GgufEntry {
  std::string name;
  std::vector<float> sums;
  std::vector<float> counts;
  std::vector<int64_t> sums_shape;    // defaults to {sums.size()}
  std::vector<int64_t> counts_shape;  // defaults to {counts.size()}
};

struct GgufImatrixSpec {
  std::vector<GgufEntry> entries;
  bool with_datasets = true;
  bool with_chunk_count = true;
  bool with_chunk_size = true;
  std::vector<std::string> datasets{"wiki.train.raw", "code.txt"};
  uint32_t chunk_count = 100;
  uint32_t chunk_size = 512;
};

GgufBuilder gguf_imatrix(const GgufImatrixSpec& spec) {
  GgufBuilder b;
  EXPECT_TRUE(b.set("general.type", MetadataValue::string("imatrix")));
  if (spec.with_datasets) {
    EXPECT_TRUE(b.set(kImatrixDatasetsKey, MetadataValue::string_array(spec.datasets)));
  }
  if (spec.with_chunk_count) {
    EXPECT_TRUE(b.set(kImatrixChunkCountKey, MetadataValue::of(spec.chunk_count)));
  }
  if (spec.with_chunk_size) {
    EXPECT_TRUE(b.set(kImatrixChunkSizeKey, MetadataValue::of(spec.chunk_size)));
  }
  for (const GgufEntry& e : spec.entries) {
    auto sums_shape = e.sums_shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(e.sums.size())} : e.sums_shape;
    auto counts_shape =
        e.counts_shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(e.counts.size())} : e.counts_shape;
    EXPECT_TRUE(b.add_tensor(e.name + ".in_sum2", TensorType::F32, sums_shape, float_bytes(e.sums)));
    EXPECT_TRUE(b.add_tensor(e.name + ".counts", TensorType::F32, counts_shape, float_bytes(e.counts)));
  }
  return b;
}

class ImatrixFiles : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("imatrix"); }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const GgufBuilder& b, const std::string& name = "imatrix.gguf",
                 ByteOrder order = ByteOrder::little) {
    WriteOptions options;
    options.sync = false;
    options.byte_order = order;
    const fs::path path = dir_ / name;
    auto r = b.write_file(path, options);
    EXPECT_TRUE(r) << (r ? "" : r.error().describe());
    return path;
  }
  fs::path write(const std::vector<std::byte>& bytes, const std::string& name = "imatrix.dat") {
    const fs::path path = dir_ / name;
    test::write_bytes(path, bytes);
    return path;
  }
  Expected<ImportanceMatrix> load(const GgufImatrixSpec& spec) { return load_importance_matrix(write(gguf_imatrix(spec))); }

  fs::path dir_;
};

// What llama-quantize computes: each expert's slice of sums divided by its count rounded to an
// integer, 1 for a count that rounds to 0.
std::vector<float> expected_gguf_values(const GgufEntry& e) {
  const size_t per_expert = e.sums.size() / e.counts.size();
  std::vector<float> out;
  for (size_t expert = 0; expert < e.counts.size(); ++expert) {
    const auto count = static_cast<float>(std::lround(e.counts[expert]));
    for (size_t i = 0; i < per_expert; ++i) {
      out.push_back(count > 0 ? e.sums[expert * per_expert + i] / count : 1.0f);
    }
  }
  return out;
}

TEST_F(ImatrixFiles, GgufValuesAreSumsOverCountsPerExpert) {
  GgufImatrixSpec spec;
  spec.entries = {
      {"blk.1.ffn_up_exps.weight", {2, 4, 6, 8}, {2, 4}, {2, 2}, {2}},
      {"blk.0.attn_q.weight", {3, 5, 7}, {2.6f}, {}, {}},          // rounds to 3
      {"blk.0.attn_k.weight", {9, 9, 0.5f, 1}, {0.4f, 0}, {}, {}},  // both round to 0: all 1
  };
  auto m = load(spec);
  ASSERT_TRUE(m) << m.error().describe();
  EXPECT_FALSE(m->legacy);
  EXPECT_EQ(m->datasets, spec.datasets);
  EXPECT_EQ(m->chunk_count, spec.chunk_count);
  EXPECT_EQ(m->chunk_size, spec.chunk_size);
  ASSERT_EQ(m->entries.size(), 3u);
  EXPECT_TRUE(std::ranges::is_sorted(m->entries, {}, &ImportanceEntry::name));
  for (const GgufEntry& e : spec.entries) {
    const ImportanceEntry* found = m->find(e.name);
    ASSERT_NE(found, nullptr) << e.name;
    EXPECT_EQ(found->values, expected_gguf_values(e)) << e.name;
  }
  // The worked example of the brief, spelled out.
  EXPECT_EQ(m->find("blk.1.ffn_up_exps.weight")->values, (std::vector<float>{1, 2, 1.5f, 2}));
  EXPECT_EQ(m->find("blk.0.attn_k.weight")->values, (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(m->find("blk.0.attn_q"), nullptr);
  EXPECT_EQ(m->find("zzz"), nullptr);
}

TEST_F(ImatrixFiles, GgufOtherTensorsAndEmptyDatasetsAreAccepted) {
  GgufImatrixSpec spec;
  spec.datasets = {};
  spec.entries = {{"output.weight", {1, 2}, {1}, {}, {}}};
  GgufBuilder b = gguf_imatrix(spec);
  ASSERT_TRUE(b.add_tensor("unrelated", TensorType::F32, std::vector<int64_t>{1}, float_bytes({5})));
  auto m = load_importance_matrix(write(b));
  ASSERT_TRUE(m) << m.error().describe();
  EXPECT_TRUE(m->datasets.empty());
  ASSERT_EQ(m->entries.size(), 1u);
  EXPECT_EQ(m->entries[0].name, "output.weight");
}

TEST_F(ImatrixFiles, BigEndianGgufGivesTheSameValues) {
  GgufImatrixSpec spec;
  spec.entries = {{"blk.0.ffn_down.weight", {2, 4, 6, 8, 10, 12}, {2, 3}, {}, {}}};
  GgufBuilder big;
  EXPECT_TRUE(big.set(kImatrixDatasetsKey, MetadataValue::string_array(spec.datasets)));
  EXPECT_TRUE(big.set(kImatrixChunkCountKey, MetadataValue::of(spec.chunk_count)));
  EXPECT_TRUE(big.set(kImatrixChunkSizeKey, MetadataValue::of(spec.chunk_size)));
  auto swapped = [](std::vector<float> v) {
    for (float& f : v) f = std::bit_cast<float>(__builtin_bswap32(std::bit_cast<uint32_t>(f)));
    return float_bytes(v);
  };
  const GgufEntry& e = spec.entries[0];
  EXPECT_TRUE(big.add_tensor(e.name + ".in_sum2", TensorType::F32, std::vector<int64_t>{6}, swapped(e.sums)));
  EXPECT_TRUE(big.add_tensor(e.name + ".counts", TensorType::F32, std::vector<int64_t>{2}, swapped(e.counts)));
  auto m = load_importance_matrix(write(big, "big.gguf", ByteOrder::big));
  ASSERT_TRUE(m) << m.error().describe();
  ASSERT_EQ(m->entries.size(), 1u);
  EXPECT_EQ(m->entries[0].values, expected_gguf_values(e));
  EXPECT_EQ(m->chunk_count, spec.chunk_count);
}

TEST_F(ImatrixFiles, GgufWithoutImatrixMetadataIsRefused) {
  for (int missing = 0; missing < 3; ++missing) {
    GgufImatrixSpec spec;
    spec.entries = {{"a.weight", {1, 2}, {1}, {}, {}}};
    spec.with_datasets = missing != 0;
    spec.with_chunk_count = missing != 1;
    spec.with_chunk_size = missing != 2;
    auto m = load(spec);
    ASSERT_FALSE(m) << missing;
    const std::string_view key = missing == 0 ? kImatrixDatasetsKey : missing == 1 ? kImatrixChunkCountKey : kImatrixChunkSizeKey;
    EXPECT_EQ(m.error().subject, key);
    EXPECT_NE(m.error().message.find("missing imatrix metadata"), std::string::npos) << m.error().describe();
  }
}

TEST_F(ImatrixFiles, GgufChunkCountOfAnotherTypeIsRefused) {
  GgufImatrixSpec spec;
  spec.entries = {{"a.weight", {1, 2}, {1}, {}, {}}};
  GgufBuilder b = gguf_imatrix(spec);
  ASSERT_TRUE(b.set(kImatrixChunkCountKey, MetadataValue::of(int32_t{100})));
  auto m = load_importance_matrix(write(b));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().subject, kImatrixChunkCountKey);
}

TEST_F(ImatrixFiles, GgufNonF32TensorsAreRefusedByName) {
  for (const std::string suffix : {".in_sum2", ".counts"}) {
    GgufBuilder b = gguf_imatrix({});
    const std::vector<std::byte> f16_bytes(8);
    const std::string name = "blk.3.attn_v.weight";
    const bool sums_f16 = suffix == ".in_sum2";
    // Named: the builder keeps views of them until the file is written.
    const std::vector<std::byte> sums = sums_f16 ? f16_bytes : float_bytes({1, 2});
    const std::vector<std::byte> counts = sums_f16 ? float_bytes({1}) : f16_bytes;
    ASSERT_TRUE(b.add_tensor(name + ".in_sum2", sums_f16 ? TensorType::F16 : TensorType::F32,
                             std::vector<int64_t>{sums_f16 ? 4 : 2}, sums));
    ASSERT_TRUE(b.add_tensor(name + ".counts", sums_f16 ? TensorType::F32 : TensorType::F16,
                             std::vector<int64_t>{sums_f16 ? 1 : 4}, counts));
    auto m = load_importance_matrix(write(b));
    ASSERT_FALSE(m) << suffix;
    EXPECT_EQ(m.error().subject, name + suffix);
    EXPECT_NE(m.error().message.find("F32"), std::string::npos) << m.error().describe();
  }
}

TEST_F(ImatrixFiles, GgufSumsWithoutCountsAndCountsWithoutSumsAreRefused) {
  for (const std::string suffix : {".in_sum2", ".counts"}) {
    GgufImatrixSpec spec;
    spec.entries = {{"a.weight", {1, 2}, {1}, {}, {}}};
    GgufBuilder b = gguf_imatrix(spec);
    ASSERT_TRUE(b.add_tensor("lonely.weight" + suffix, TensorType::F32, std::vector<int64_t>{1}, float_bytes({1})));
    auto m = load_importance_matrix(write(b));
    ASSERT_FALSE(m) << suffix;
    EXPECT_EQ(m.error().subject, "lonely.weight" + suffix);
  }
}

TEST_F(ImatrixFiles, GgufWithoutEntriesIsRefused) {
  auto none = load(GgufImatrixSpec{});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::bad_count);

  GgufBuilder unrelated = gguf_imatrix({});
  ASSERT_TRUE(unrelated.add_tensor("x.weight", TensorType::F32, std::vector<int64_t>{1}, float_bytes({1})));
  EXPECT_FALSE(load_importance_matrix(write(unrelated, "unrelated.gguf")));
}

TEST_F(ImatrixFiles, GgufBadCountsAreRefused) {
  const std::vector<GgufEntry> bad = {
      {"a.weight", {1, 2, 3}, {1, 1}, {}, {}},            // 2 counts do not divide 3 sums
      {"a.weight", {1, 2}, {-1}, {}, {}},                 // negative
      {"a.weight", {1, 2}, {NAN}, {}, {}},                // not a number
      {"a.weight", {1, 2}, {INFINITY}, {}, {}},           // not finite
      {"a.weight", {1, 2}, {}, {}, {0}},                  // no counts
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    GgufImatrixSpec spec;
    spec.entries = {bad[i]};
    auto m = load(spec);
    ASSERT_FALSE(m) << i;
    EXPECT_EQ(m.error().subject, "a.weight.counts") << i << ": " << m.error().describe();
  }
}

// ---- the legacy form ----

struct LegacyEntry {
  std::string name;
  int32_t ncall = 0;
  std::vector<float> sums;
};

void put_i32(std::vector<std::byte>& out, int32_t v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
void put_text(std::vector<std::byte>& out, std::string_view s) {
  put_i32(out, static_cast<int32_t>(s.size()));
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

std::vector<std::byte> legacy_file(const std::vector<LegacyEntry>& entries, std::optional<int32_t> chunks = std::nullopt,
                                   std::optional<std::string> dataset = std::nullopt) {
  std::vector<std::byte> out;
  put_i32(out, static_cast<int32_t>(entries.size()));
  for (const LegacyEntry& e : entries) {
    put_text(out, e.name);
    put_i32(out, e.ncall);
    put_i32(out, static_cast<int32_t>(e.sums.size()));
    const auto bytes = float_bytes(e.sums);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  if (chunks) put_i32(out, *chunks);
  if (dataset) put_text(out, *dataset);
  return out;
}

// What llama-quantize computes: sums divided by ncall when it is positive, else the sums.
std::vector<float> expected_legacy_values(const LegacyEntry& e) {
  std::vector<float> out = e.sums;
  if (e.ncall > 0) {
    for (float& v : out) v = v / static_cast<float>(e.ncall);
  }
  return out;
}

const std::vector<LegacyEntry> kLegacyEntries = {
    {"blk.0.ffn_gate.weight", 4, {8, 2, 1, 0.5f}},
    {"blk.0.attn_output.weight", 0, {3, 7}},
    {"blk.0.attn_k.weight", 3, {1, 2, 3}},
    {"blk.0.attn_v.weight", -2, {5}},
};

TEST_F(ImatrixFiles, LegacyValuesAreSumsOverCalls) {
  auto m = load_importance_matrix(write(legacy_file(kLegacyEntries, 57, "wiki.train.raw")));
  ASSERT_TRUE(m) << m.error().describe();
  EXPECT_TRUE(m->legacy);
  EXPECT_EQ(m->chunk_count, 57u);
  EXPECT_EQ(m->chunk_size, 0u);
  EXPECT_EQ(m->datasets, std::vector<std::string>{"wiki.train.raw"});
  ASSERT_EQ(m->entries.size(), kLegacyEntries.size());
  EXPECT_TRUE(std::ranges::is_sorted(m->entries, {}, &ImportanceEntry::name));
  for (const LegacyEntry& e : kLegacyEntries) {
    const ImportanceEntry* found = m->find(e.name);
    ASSERT_NE(found, nullptr) << e.name;
    EXPECT_EQ(found->values, expected_legacy_values(e)) << e.name;
  }
  EXPECT_EQ(m->find("blk.0.ffn_gate.weight")->values, (std::vector<float>{2, 0.5f, 0.25f, 0.125f}));
}

TEST_F(ImatrixFiles, LegacyTrailerIsOptional) {
  auto bare = parse_importance_matrix(legacy_file(kLegacyEntries));
  ASSERT_TRUE(bare) << bare.error().describe();
  EXPECT_EQ(bare->chunk_count, 0u);
  EXPECT_TRUE(bare->datasets.empty());
  EXPECT_EQ(bare->entries.size(), kLegacyEntries.size());

  auto chunks_only = parse_importance_matrix(legacy_file(kLegacyEntries, 9));
  ASSERT_TRUE(chunks_only) << chunks_only.error().describe();
  EXPECT_EQ(chunks_only->chunk_count, 9u);
  EXPECT_TRUE(chunks_only->datasets.empty());

  auto no_dataset_name = parse_importance_matrix(legacy_file(kLegacyEntries, 9, ""));
  ASSERT_TRUE(no_dataset_name);
  EXPECT_TRUE(no_dataset_name->datasets.empty());
}

TEST_F(ImatrixFiles, LegacyRepeatedNameKeepsTheLastEntry) {
  const std::vector<LegacyEntry> entries = {{"w", 1, {1, 1}}, {"v", 1, {3}}, {"w", 2, {4, 6, 8}}};
  auto m = parse_importance_matrix(legacy_file(entries));
  ASSERT_TRUE(m) << m.error().describe();
  ASSERT_EQ(m->entries.size(), 2u);
  EXPECT_EQ(m->find("w")->values, expected_legacy_values(entries[2]));
}

TEST_F(ImatrixFiles, LegacyNamesEndAtTheirFirstNul) {
  const std::vector<LegacyEntry> entries = {{std::string("blk.0.attn_q.weight\0junk", 24), 1, {2}}};
  auto m = parse_importance_matrix(legacy_file(entries, 1, std::string("data\0set", 8)));
  ASSERT_TRUE(m) << m.error().describe();
  ASSERT_EQ(m->entries.size(), 1u);
  EXPECT_EQ(m->entries[0].name, "blk.0.attn_q.weight");
  EXPECT_EQ(m->datasets, std::vector<std::string>{"data"});
}

TEST_F(ImatrixFiles, EveryTruncationOfALegacyFileIsAnError) {
  const auto full = legacy_file(kLegacyEntries, 57, "wiki.train.raw");
  const size_t entries_end = legacy_file(kLegacyEntries).size();
  for (size_t size = 0; size < full.size(); ++size) {
    const std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(size));
    auto m = parse_importance_matrix(cut);
    // Cut where the optional trailer starts or after its chunk count: a complete shorter file.
    if (size == entries_end || size == entries_end + 4) {
      EXPECT_TRUE(m) << size;
      continue;
    }
    ASSERT_FALSE(m) << "a " << size << " byte prefix of " << full.size() << " was accepted";
    EXPECT_LE(m.error().offset, size);
  }
}

// Random overwrites of a valid file: any outcome but a crash, and whatever is accepted is consistent.
TEST_F(ImatrixFiles, CorruptedLegacyFilesNeverCrash) {
  const auto full = legacy_file(kLegacyEntries, 57, "wiki.train.raw");
  std::mt19937 rng(1234);
  for (int round = 0; round < 5000; ++round) {
    auto bytes = full;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng());
    auto m = parse_importance_matrix(bytes);
    if (!m) continue;
    EXPECT_TRUE(std::ranges::is_sorted(m->entries, {}, &ImportanceEntry::name));
    for (const auto& entry : m->entries) EXPECT_FALSE(entry.values.empty());
  }
}

TEST_F(ImatrixFiles, LegacyErrorsNameTheEntryAndOffset) {
  auto bytes = legacy_file(kLegacyEntries);
  // Cut inside the values of entry 1.
  const size_t entry1_values = 4 + (4 + kLegacyEntries[0].name.size() + 8 + 16) + 4 + kLegacyEntries[1].name.size() + 8;
  bytes.resize(entry1_values + 4);
  auto m = parse_importance_matrix(bytes);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::truncated);
  EXPECT_EQ(m.error().offset, entry1_values);
  EXPECT_EQ(m.error().subject, "entry 1 'blk.0.attn_output.weight'");
}

TEST_F(ImatrixFiles, HugeAndNegativeLegacyLengthsAreRefusedWithoutAllocating) {
  struct Case {
    const char* what;
    std::vector<std::byte> bytes;
    ErrorCode code;
  };
  std::vector<Case> cases;
  {
    std::vector<std::byte> b;
    put_i32(b, 1);
    put_i32(b, INT32_MAX);  // name length 2 GiB
    b.resize(b.size() + 64);
    cases.push_back({"huge name", b, ErrorCode::truncated});
  }
  {
    std::vector<std::byte> b;
    put_i32(b, 1);
    put_i32(b, -5);
    b.resize(b.size() + 64);
    cases.push_back({"negative name", b, ErrorCode::bad_count});
  }
  {
    std::vector<std::byte> b;
    put_i32(b, 1);
    put_text(b, "w");
    put_i32(b, 1);
    put_i32(b, INT32_MAX);  // 8 GiB of values
    b.resize(b.size() + 64);
    cases.push_back({"huge value count", b, ErrorCode::truncated});
  }
  {
    std::vector<std::byte> b;
    put_i32(b, 1);
    put_text(b, "w");
    put_i32(b, 1);
    put_i32(b, 0);
    b.resize(b.size() + 64);
    cases.push_back({"no values", b, ErrorCode::bad_count});
  }
  {
    std::vector<std::byte> b;
    put_i32(b, INT32_MAX);  // entries
    put_text(b, "w");
    cases.push_back({"huge entry count", b, ErrorCode::bad_count});
  }
  cases.push_back({"zero entries", legacy_file({}), ErrorCode::bad_count});
  {
    auto b = legacy_file(kLegacyEntries, 1);
    put_i32(b, INT32_MAX);  // dataset name length
    cases.push_back({"huge dataset name", b, ErrorCode::truncated});
  }
  {
    auto b = legacy_file(kLegacyEntries, 1);
    put_i32(b, -1);
    cases.push_back({"negative dataset name", b, ErrorCode::bad_count});
  }
  cases.push_back({"negative chunk count", legacy_file(kLegacyEntries, -3), ErrorCode::bad_count});
  for (const Case& c : cases) {
    g_largest_allocation = 0;
    auto m = parse_importance_matrix(c.bytes);
    const size_t largest = g_largest_allocation;
    ASSERT_FALSE(m) << c.what;
    EXPECT_EQ(m.error().code, c.code) << c.what << ": " << m.error().describe();
    EXPECT_LT(largest, size_t{1} << 16) << c.what;
  }
}

TEST_F(ImatrixFiles, MissingFileIsAnIoError) {
  auto m = load_importance_matrix(dir_ / "absent.dat");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::io_error);
  auto empty = load_importance_matrix(write(std::vector<std::byte>{}, "empty.dat"));
  ASSERT_FALSE(empty);
}

// ---- --include-weights / --exclude-weights ----

std::vector<std::string> names(const ImportanceMatrix& m) {
  std::vector<std::string> out;
  for (const auto& e : m.entries) out.push_back(e.name);
  return out;
}

ImportanceMatrix four_entries() {
  ImportanceMatrix m;
  for (const char* name : {"blk.0.attn_k.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight", "output.weight"}) {
    m.entries.push_back({name, {1.0f}});
  }
  return m;
}

TEST(ImatrixFilters, ExcludeDropsEntriesContainingAnyPart) {
  ImportanceMatrix m = four_entries();
  const std::vector<std::string> parts = {"attn_k", "output"};
  exclude_importance_entries(m, parts);
  EXPECT_EQ(names(m), (std::vector<std::string>{"blk.0.attn_q.weight", "blk.0.ffn_down.weight"}));
  EXPECT_NE(m.find("blk.0.ffn_down.weight"), nullptr);

  ImportanceMatrix unchanged = four_entries();
  exclude_importance_entries(unchanged, {});
  EXPECT_EQ(unchanged.entries.size(), 4u);
}

TEST(ImatrixFilters, IncludeKeepsEntriesContainingAnyPart) {
  ImportanceMatrix m = four_entries();
  const std::vector<std::string> parts = {"attn", "attn_q", "nothing"};
  include_importance_entries(m, parts);
  EXPECT_EQ(names(m), (std::vector<std::string>{"blk.0.attn_k.weight", "blk.0.attn_q.weight"}));

  ImportanceMatrix all = four_entries();
  include_importance_entries(all, {});  // the option not given
  EXPECT_EQ(all.entries.size(), 4u);

  ImportanceMatrix none = four_entries();
  const std::vector<std::string> absent = {"xyz"};
  include_importance_entries(none, absent);
  EXPECT_TRUE(none.entries.empty());
}

}  // namespace
}  // namespace ggufkit
