// Byte order: the per-type swap tables, big-endian headers from the writer, reading big-endian
// files (values, tensor infos, error offsets), and LE -> BE -> LE round trips of the corpus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <map>
#include <set>

#include "ggufkit/endian.h"
#include "ggufkit/writer.h"
#include "exercise.h"
#include "raw_gguf.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

// ---- The swap tables ----

TEST(SwapTables, KnownTypesAreExactlyTheListedOnes) {
  std::set<std::string> known, unknown;
  for (const TypeTraits& t : all_type_traits()) {
    if (t.status != TypeStatus::supported) {
      EXPECT_FALSE(byte_order_known(t.type())) << t.name;
      continue;
    }
    (byte_order_known(t.type()) ? known : unknown).insert(std::string(t.name));
  }
  EXPECT_EQ(unknown, std::set<std::string>{"iq2_xxs"});
  EXPECT_EQ(known.size(), 34u);
}

TEST(SwapTables, FieldsLieInsideTheBlockAndDoNotOverlap) {
  for (const TypeTraits& t : all_type_traits()) {
    const auto layout = block_swap_layout(t.type());
    if (!layout) continue;
    EXPECT_EQ(layout->block_bytes, t.block_bytes) << t.name;
    std::vector<int> owner(t.block_bytes, 0);
    for (const SwapField& f : layout->fields) {
      EXPECT_TRUE(f.width == 2 || f.width == 4 || f.width == 8) << t.name;
      ASSERT_LE(f.offset + f.width * f.count, t.block_bytes) << t.name;
      for (uint32_t i = 0; i < f.width * f.count; ++i) EXPECT_EQ(owner[f.offset + i]++, 0) << t.name << " byte " << f.offset + i;
    }
  }
}

TEST(SwapTables, SwappingTwiceIsTheIdentityAndOnlyFieldBytesMove) {
  for (const TypeTraits& t : all_type_traits()) {
    const auto layout = block_swap_layout(t.type());
    if (!layout) continue;
    const auto original = random_bytes(size_t{t.block_bytes} * 7, t.id);
    auto data = original;
    ASSERT_TRUE(swap_tensor_data(t.type(), data)) << t.name;
    for (size_t b = 0; b < 7; ++b) {
      const size_t base = b * t.block_bytes;
      std::vector<bool> in_field(t.block_bytes, false);
      for (const SwapField& f : layout->fields) {
        for (uint32_t k = 0; k < f.count; ++k) {
          const size_t at = base + f.offset + k * f.width;
          for (uint32_t i = 0; i < f.width; ++i) {
            EXPECT_EQ(data[at + i], original[at + f.width - 1 - i]) << t.name;
            in_field[f.offset + k * f.width + i] = true;
          }
        }
      }
      for (size_t i = 0; i < t.block_bytes; ++i) {
        if (!in_field[i]) {
          EXPECT_EQ(data[base + i], original[base + i]) << t.name << " byte " << i;
        }
      }
    }
    ASSERT_TRUE(swap_tensor_data(t.type(), data));
    EXPECT_EQ(data, original) << t.name;
  }
}

TEST(SwapTables, GgmlFieldsOfSomeTypes) {
  // From ggml-common.h: q8_0 {half d; int8 qs[32]}, q4_K {half d, dmin; ...}, q6_K {...; half d at 208},
  // q8_K {float d; int8 qs[256]; int16 bsums[16]}.
  const auto fields = [](TensorType t) { return std::vector<SwapField>(block_swap_layout(t)->fields.begin(), block_swap_layout(t)->fields.end()); };
  const auto eq = [](const std::vector<SwapField>& a, std::vector<SwapField> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const SwapField& x, const SwapField& y) {
      return x.offset == y.offset && x.width == y.width && x.count == y.count;
    });
  };
  EXPECT_TRUE(eq(fields(TensorType::Q8_0), {{0, 2, 1}}));
  EXPECT_TRUE(eq(fields(TensorType::Q4_K), {{0, 2, 2}}));
  EXPECT_TRUE(eq(fields(TensorType::Q6_K), {{208, 2, 1}}));
  EXPECT_TRUE(eq(fields(TensorType::Q8_K), {{0, 4, 1}, {260, 2, 16}}));
  EXPECT_TRUE(eq(fields(TensorType::F32), {{0, 4, 1}}));
  EXPECT_TRUE(fields(TensorType::MXFP4).empty());
  EXPECT_TRUE(fields(TensorType::I8).empty());
}

// Every layout in full, as numbers read off ggml-common.h (the layouts themselves are derived from
// the block structs of src/format/blocks.h: this pins the derivation).
TEST(SwapTables, EveryLayoutInFull) {
  using F = std::vector<SwapField>;
  const std::map<std::string, F> want = {
      {"f32", {{0, 4, 1}}}, {"i32", {{0, 4, 1}}}, {"f16", {{0, 2, 1}}}, {"bf16", {{0, 2, 1}}},
      {"i16", {{0, 2, 1}}}, {"f64", {{0, 8, 1}}}, {"i64", {{0, 8, 1}}}, {"i8", {}}, {"mxfp4", {}}, {"nvfp4", {}},
      {"q1_0", {{0, 2, 1}}}, {"q2_0", {{0, 2, 1}}}, {"q4_0", {{0, 2, 1}}}, {"q8_0", {{0, 2, 1}}},
      {"iq2_s", {{0, 2, 1}}}, {"iq3_s", {{0, 2, 1}}}, {"iq4_nl", {{0, 2, 1}}},
      {"q4_1", {{0, 2, 2}}}, {"q8_1", {{0, 2, 2}}}, {"q4_K", {{0, 2, 2}}}, {"q5_K", {{0, 2, 2}}},
      {"q5_0", {{0, 2, 1}, {2, 4, 1}}}, {"q5_1", {{0, 2, 2}, {4, 4, 1}}}, {"q2_K", {{80, 2, 2}}},
      {"q3_K", {{108, 2, 1}}}, {"q6_K", {{208, 2, 1}}}, {"q8_K", {{0, 4, 1}, {260, 2, 16}}},
      {"iq2_xs", {{0, 2, 1}, {2, 2, 32}}}, {"iq3_xxs", {{0, 2, 1}, {66, 4, 8}}}, {"iq1_s", {{0, 2, 1}, {34, 2, 8}}},
      {"iq1_m", {{48, 2, 4}}}, {"iq4_xs", {{0, 2, 2}}}, {"tq1_0", {{52, 2, 1}}}, {"tq2_0", {{64, 2, 1}}},
  };
  std::map<std::string, F> got;
  for (const TypeTraits& t : all_type_traits()) {
    if (const auto layout = block_swap_layout(t.type())) got[std::string(t.name)] = F(layout->fields.begin(), layout->fields.end());
  }
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, fields] : want) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.contains(name));
    ASSERT_EQ(got[name].size(), fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      EXPECT_EQ(got[name][i].offset, fields[i].offset);
      EXPECT_EQ(got[name][i].width, fields[i].width);
      EXPECT_EQ(got[name][i].count, fields[i].count);
    }
  }
}

TEST(SwapTables, ElementTypesSwapEveryElement) {
  std::vector<float> v = {1.0f, -2.5f, 3.25e10f};
  std::vector<std::byte> bytes(sizeof(float) * v.size());
  std::memcpy(bytes.data(), v.data(), bytes.size());
  ASSERT_TRUE(swap_tensor_data(TensorType::F32, bytes));
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    uint32_t got;
    std::memcpy(&got, bytes.data() + 4 * i, 4);
    EXPECT_EQ(got, __builtin_bswap32(bits));
  }
}

TEST(SwapTables, UnknownLayoutAndPartialBlocksAreErrors) {
  std::vector<std::byte> data(66 * 2);
  EXPECT_FALSE(swap_tensor_data(TensorType::IQ2_XXS, data));
  EXPECT_FALSE(swap_tensor_data(static_cast<TensorType>(4), data));  // removed q4_2
  std::vector<std::byte> odd(35);
  EXPECT_FALSE(swap_tensor_data(TensorType::Q8_0, odd));
}

TEST(SwapTables, CopiesAtAnyOffsetMatchTheWholeSwap) {
  for (TensorType type : {TensorType::Q6_K, TensorType::Q8_K, TensorType::F16, TensorType::Q5_1}) {
    const uint32_t bb = type_traits(type).block_bytes;
    const auto stored = random_bytes(size_t{bb} * 9, bb);
    auto whole = stored;
    ASSERT_TRUE(swap_tensor_data(type, whole));
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
      const size_t offset = rng() % stored.size();
      const size_t length = rng() % (stored.size() - offset + 1);
      std::vector<std::byte> out(length);
      ASSERT_TRUE(copy_tensor_bytes(type, stored, offset, out, true));
      EXPECT_TRUE(std::equal(out.begin(), out.end(), whole.begin() + static_cast<ptrdiff_t>(offset)))
          << type_name(type) << " offset " << offset << " length " << length;
      ASSERT_TRUE(copy_tensor_bytes(type, stored, offset, out, false));
      EXPECT_TRUE(std::equal(out.begin(), out.end(), stored.begin() + static_cast<ptrdiff_t>(offset)));
    }
    std::vector<std::byte> past(2);
    EXPECT_FALSE(copy_tensor_bytes(type, stored, stored.size() - 1, past, true));
  }
}

// ---- Big-endian headers and reading them ----

// Every value type, nested arrays and string arrays included.
GgufBuilder every_value_builder() {
  GgufBuilder b;
  EXPECT_TRUE(b.set("u8", MetadataValue::of(uint8_t{200})));
  EXPECT_TRUE(b.set("i8", MetadataValue::of(int8_t{-5})));
  EXPECT_TRUE(b.set("u16", MetadataValue::of(uint16_t{0x1234})));
  EXPECT_TRUE(b.set("i16", MetadataValue::of(int16_t{-1234})));
  EXPECT_TRUE(b.set("u32", MetadataValue::of(uint32_t{0x12345678})));
  EXPECT_TRUE(b.set("i32", MetadataValue::of(int32_t{-123456})));
  EXPECT_TRUE(b.set("f32", MetadataValue::of(1.5f)));
  EXPECT_TRUE(b.set("bool", MetadataValue::of(true)));
  EXPECT_TRUE(b.set("str", MetadataValue::string("hello")));
  EXPECT_TRUE(b.set("u64", MetadataValue::of(uint64_t{0x0102030405060708})));
  EXPECT_TRUE(b.set("i64", MetadataValue::of(int64_t{-9})));
  EXPECT_TRUE(b.set("f64", MetadataValue::of(2.25)));
  EXPECT_TRUE(b.set("arr.i32", MetadataValue::array(std::vector<int32_t>{1, -2, 300000})));
  EXPECT_TRUE(b.set("arr.str", MetadataValue::string_array(std::vector<std::string>{"a", "", "ccc"})));
  EXPECT_TRUE(b.set("general.alignment", MetadataValue::of(uint32_t{64})));
  const std::vector<float> data = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<std::byte> bytes(sizeof(float) * data.size());
  std::memcpy(bytes.data(), data.data(), bytes.size());
  const std::vector<int64_t> shape = {8};
  EXPECT_TRUE(b.add_tensor("t.f32", TensorType::F32, shape, std::move(bytes)));
  const std::vector<int64_t> shape2 = {4, 2};
  EXPECT_TRUE(b.add_tensor("t.f16", TensorType::F16, shape2, random_bytes(16, 3)));
  return b;
}

std::vector<std::byte> write_to_memory(const GgufBuilder& b, const WriteOptions& options) {
  MemorySink sink;
  EXPECT_TRUE(b.write(sink, options));
  return sink.data;
}

void expect_same_metadata(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    const KeyValue& x = a.metadata()[i];
    const KeyValue& y = b.metadata()[i];
    EXPECT_EQ(x.key, y.key);
    EXPECT_EQ(x.offset, y.offset) << x.key;
    EXPECT_EQ(x.value.type(), y.value.type()) << x.key;
    EXPECT_TRUE(std::ranges::equal(x.value.encoded(), y.value.encoded())) << x.key;
  }
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorInfo& x = a.tensors()[i];
    const TensorInfo& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.n_dims, y.n_dims);
    EXPECT_EQ(x.ne, y.ne);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(x.info_offset, y.info_offset);
  }
  EXPECT_EQ(a.version(), b.version());
  EXPECT_EQ(a.alignment(), b.alignment());
  EXPECT_EQ(a.header_size(), b.header_size());
  EXPECT_EQ(a.data_offset(), b.data_offset());
}

TEST(BigEndianHeader, WriterDefaultIsUnchangedAndBigEndianReadsBackEqual) {
  const GgufBuilder b = every_value_builder();
  const auto little = write_to_memory(b, {});
  WriteOptions big_options;
  big_options.byte_order = ByteOrder::big;
  const auto big = write_to_memory(b, big_options);
  ASSERT_EQ(little.size(), big.size());
  EXPECT_NE(little, big);
  // Hand-decoded: version and counts big-endian.
  EXPECT_EQ(std::to_integer<int>(big[4]), 0);
  EXPECT_EQ(std::to_integer<int>(big[7]), 3);
  EXPECT_EQ(std::to_integer<int>(big[15]), 2);   // tensor count
  EXPECT_EQ(std::to_integer<int>(big[23]), 15);  // key/value count
  auto le = GgufFile::parse(little);
  auto be = GgufFile::parse(big);
  ASSERT_TRUE(le) << le.error().describe();
  ASSERT_TRUE(be) << be.error().describe();
  EXPECT_EQ(le->byte_order(), ByteOrder::little);
  EXPECT_EQ(be->byte_order(), ByteOrder::big);
  expect_same_metadata(*le, *be);
  EXPECT_EQ(*be->get("u64")->get<uint64_t>(), uint64_t{0x0102030405060708});
  EXPECT_EQ(*be->get("f64")->get<double>(), 2.25);
  EXPECT_EQ(be->alignment(), 64u);
  // The writer copies tensor bytes as given: the BE file's data section is the LE one's.
  EXPECT_TRUE(std::equal(little.begin() + static_cast<ptrdiff_t>(le->data_offset()), little.end(),
                         big.begin() + static_cast<ptrdiff_t>(be->data_offset())));
  // A builder made from the BE file writes it back big-endian, byte for byte.
  const GgufBuilder again = GgufBuilder::from_file(*be);
  EXPECT_EQ(again.suggested_options().byte_order, ByteOrder::big);
  EXPECT_EQ(write_to_memory(again, again.suggested_options()), big);
}

TEST(BigEndianHeader, TruncatedBigEndianFilesFailAtTheSameFileOffsetsAsLittleEndianOnes) {
  const GgufBuilder b = every_value_builder();
  const auto little = write_to_memory(b, {});
  WriteOptions big_options;
  big_options.byte_order = ByteOrder::big;
  const auto big = write_to_memory(b, big_options);
  auto le_file = GgufFile::parse(little);
  ASSERT_TRUE(le_file);
  for (size_t cut = 8; cut < le_file->data_offset(); ++cut) {
    auto le = GgufFile::parse(std::span(little).first(cut));
    auto be = GgufFile::parse(std::span(big).first(cut));
    ASSERT_EQ(bool(le), bool(be)) << cut;
    if (le) continue;
    EXPECT_EQ(le.error().code, be.error().code) << cut;
    EXPECT_EQ(le.error().offset, be.error().offset) << cut;
    EXPECT_EQ(le.error().subject, be.error().subject) << cut;
  }
}

TEST(BigEndianHeader, CorruptBigEndianValuesAreRejectedAtTheirOffsets) {
  // A big-endian file whose second key has a value type id 99 (big-endian).
  RawGguf g;
  g.magic().u32(0x03000000);                       // version 3, big-endian
  g.u64(uint64_t{0}).u64(uint64_t{2} << 56);        // 0 tensors, 2 kvs (big-endian)
  const auto be64 = [&](uint64_t v) { for (int i = 7; i >= 0; --i) g.u8(static_cast<uint8_t>(v >> (8 * i))); };
  const auto be32 = [&](uint32_t v) { for (int i = 3; i >= 0; --i) g.u8(static_cast<uint8_t>(v >> (8 * i))); };
  be64(1); g.u8('a'); be32(4); be32(7);
  const uint64_t type_at = g.size() + 8 + 1;
  be64(1); g.u8('b'); be32(99); be32(7);
  auto f = GgufFile::parse(g.bytes());
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, ErrorCode::bad_value_type);
  EXPECT_EQ(f.error().offset, type_at);
}

// The robustness checks (shared with the fuzzer) on big-endian files and their truncations.
TEST(BigEndianHeader, RobustnessChecksHoldForBigEndianFilesAndTheirPrefixes) {
  WriteOptions big_options;
  big_options.byte_order = ByteOrder::big;
  std::vector<std::vector<std::byte>> files = {write_to_memory(every_value_builder(), big_options)};
  {
    auto sample = GgufFile::open(sample_model());
    ASSERT_TRUE(sample);
    const auto dir = temp_dir("endian-robust");
    ConvertEndianOptions options;
    options.sync = false;
    ASSERT_TRUE(convert_endian(*sample, dir / "be.gguf", ByteOrder::big, options));
    files.push_back(read_bytes(dir / "be.gguf"));
  }
  for (const auto& file : files) {
    robust::Findings whole;
    robust::parse_and_exercise(whole, file);
    EXPECT_TRUE(whole.ok()) << whole.report();
    ASSERT_TRUE(GgufFile::parse(file));
    const uint64_t header = GgufFile::parse(file)->data_offset();
    const size_t stride = header > 4096 ? 7 : 1;
    for (size_t cut = 0; cut <= header + 64 && cut < file.size(); cut += stride) {
      const std::vector<std::byte> prefix(file.begin(), file.begin() + static_cast<ptrdiff_t>(cut));
      robust::Findings findings;
      robust::parse_and_exercise(findings, prefix);
      ASSERT_TRUE(findings.ok()) << "cut at " << cut << ": " << findings.report();
    }
  }
}

// ---- The corpus: LE -> BE -> LE ----

std::vector<fs::path> round_trip_files() {
  std::vector<fs::path> files = corpus_files();
  files.push_back(sample_model());
  return files;
}

TEST(ConvertEndian, CorpusRoundTripsByteForByte) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-corpus");
  size_t converted = 0;
  for (const fs::path& path : round_trip_files()) {
    SCOPED_TRACE(path.string());
    auto le = GgufFile::open(path);
    ASSERT_TRUE(le) << le.error().describe();
    const fs::path be_path = dir / "be.gguf", back_path = dir / "back.gguf";
    ConvertEndianOptions options;
    options.sync = false;
    options.chunk_bytes = 4093;  // a prime: chunks cut blocks everywhere
    const auto plan = plan_convert_endian(*le, ByteOrder::big);
    auto r = convert_endian(*le, be_path, ByteOrder::big, options);
    if (!plan.unsupported.empty()) {
      EXPECT_FALSE(r);
      continue;
    }
    ASSERT_TRUE(r) << r.error().describe();
    auto be = GgufFile::open(be_path);
    ASSERT_TRUE(be) << be.error().describe();
    EXPECT_EQ(be->byte_order(), ByteOrder::big);
    EXPECT_EQ(be->file_size(), le->file_size());
    expect_same_metadata(*le, *be);
    for (const TensorInfo& t : be->tensors()) {
      std::vector<std::byte> native(static_cast<size_t>(t.size));
      ASSERT_TRUE(copy_tensor_native(*be, t, 0, native));
      const auto original = le->tensor_data(*le->find_tensor(t.name));
      EXPECT_TRUE(std::ranges::equal(native, original)) << t.name;
      const bool has_fields = !block_swap_layout(t.type)->fields.empty();
      if (has_fields && t.size > 0) {
        EXPECT_FALSE(std::ranges::equal(be->tensor_data(t), original)) << t.name;
      }
    }
    ASSERT_TRUE(convert_endian(*be, back_path, ByteOrder::little, options));
    EXPECT_EQ(read_bytes(back_path), read_bytes(path));
    ++converted;
  }
  EXPECT_GE(converted, 20u);
}

TEST(ConvertEndian, SameOrderIsACopyAndUnknownTypesAreRefused) {
  const auto dir = temp_dir("endian-same");
  auto le = GgufFile::open(sample_model());
  ASSERT_TRUE(le);
  ASSERT_TRUE(convert_endian(*le, dir / "copy.gguf", ByteOrder::little));
  EXPECT_EQ(read_bytes(dir / "copy.gguf"), read_bytes(sample_model()));

  GgufBuilder b;
  const std::vector<int64_t> shape = {256};
  ASSERT_TRUE(b.add_tensor("x", TensorType::IQ2_XXS, shape, random_bytes(66, 1)));
  ASSERT_TRUE(b.write_file(dir / "iq2.gguf"));
  auto iq2 = GgufFile::open(dir / "iq2.gguf");
  ASSERT_TRUE(iq2);
  const auto plan = plan_convert_endian(*iq2, ByteOrder::big);
  ASSERT_EQ(plan.unsupported.size(), 1u);
  EXPECT_FALSE(convert_endian(*iq2, dir / "iq2-be.gguf", ByteOrder::big));
  EXPECT_FALSE(fs::exists(dir / "iq2-be.gguf"));
}

}  // namespace
