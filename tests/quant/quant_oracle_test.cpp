// Every kernel against ggml itself: dequantize must give ggml's to_float bit for bit, and quantize
// the bytes of ggml_quantize_chunk, for the same input. The tests walk the kernel table, so a type
// is covered as soon as its kernels are registered; TypeCoverage lists what is still missing.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "ggufkit/tensor_types.h"
#include "float_compare.h"
#include "quant_compare.h"
#include "quant_oracle.h"
#include "test_support.h"

namespace {

using ggufkit::test::same_bytes;

using namespace ggufkit;

// The types issue 3 names.
const std::vector<TensorType> kDequantizeTypes = {
    TensorType::F32,    TensorType::F16,   TensorType::BF16,   TensorType::F64,     TensorType::I8,
    TensorType::I16,    TensorType::I32,   TensorType::I64,    TensorType::Q4_0,    TensorType::Q4_1,
    TensorType::Q5_0,   TensorType::Q5_1,  TensorType::Q8_0,   TensorType::Q8_1,    TensorType::Q2_K,
    TensorType::Q3_K,   TensorType::Q4_K,  TensorType::Q5_K,   TensorType::Q6_K,    TensorType::Q8_K,
    TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS, TensorType::IQ3_S,
    TensorType::IQ1_S,  TensorType::IQ1_M, TensorType::IQ4_NL, TensorType::IQ4_XS,  TensorType::TQ1_0,
    TensorType::TQ2_0,  TensorType::MXFP4, TensorType::NVFP4,  TensorType::Q1_0,    TensorType::Q2_0};
const std::vector<TensorType> kQuantizeTypes = {
    TensorType::F16,  TensorType::BF16,  TensorType::Q4_0,  TensorType::Q4_1,   TensorType::Q5_0,
    TensorType::Q5_1, TensorType::Q8_0,  TensorType::Q2_K,  TensorType::Q3_K,   TensorType::Q4_K,
    TensorType::Q5_K, TensorType::Q6_K,  TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::IQ3_S,
    TensorType::TQ1_0, TensorType::TQ2_0, TensorType::MXFP4, TensorType::NVFP4,  TensorType::Q1_0,
    TensorType::Q2_0};

uint32_t id(TensorType t) { return static_cast<uint32_t>(t); }

// Blocks of random bytes, then blocks that stress the scale fields: all zero, all 0xFF (NaN
// scales), and blocks whose first bytes (the scale of most formats) are an infinity, a NaN, a
// subnormal or the largest half.
std::vector<std::byte> test_blocks(const TypeTraits& t, uint64_t seed, size_t random_blocks) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> bytes(t.block_bytes * random_blocks);
  for (auto& b : bytes) b = std::byte(rng() & 0xFF);
  auto add_block = [&](uint8_t fill, std::initializer_list<uint8_t> head) {
    const size_t at = bytes.size();
    bytes.resize(at + t.block_bytes, std::byte(fill));
    size_t k = 0;
    for (uint8_t h : head) bytes[at + k++] = std::byte(h);
    for (size_t j = k; j < t.block_bytes; ++j) bytes[at + j] = fill == 0x5A ? std::byte(rng() & 0xFF) : std::byte(fill);
  };
  add_block(0x00, {});
  add_block(0xFF, {});
  for (std::initializer_list<uint8_t> head : {std::initializer_list<uint8_t>{0x00, 0x7C}, {0x00, 0xFC}, {0x01, 0x7E},
                                             {0x01, 0x00}, {0xFF, 0x03}, {0xFF, 0x7B}, {0x00, 0x80}}) {
    add_block(0x5A, head);
  }
  return bytes;
}

TEST(QuantOracle, DequantizeMatchesGgmlToFloat) {
  REQUIRE_QUANT_ORACLE(oracle);
  int covered = 0;
  for (TensorType type : kDequantizeTypes) {
    const TypeTraits& t = type_traits(type);
    const auto to_float = oracle->to_float(id(type));
    if (!quant_capabilities(type).dequantize || to_float == nullptr) continue;
    SCOPED_TRACE(std::string(t.name));
    const auto bytes = test_blocks(t, 1000 + id(type), 4096);
    const size_t n = bytes.size() / t.block_bytes * t.block_size;
    std::vector<float> ours(n), theirs(n);
    ASSERT_TRUE(dequantize(type, bytes, ours));
    to_float(bytes.data(), theirs.data(), static_cast<int64_t>(n));
    EXPECT_TRUE(test::same_floats(ours, theirs));
    ++covered;
  }
  RecordProperty("types_compared", covered);
}

TEST(QuantOracle, HalfAndBfloat16DecodeExhaustively) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(all.data()), all.size() * 2);
  for (TensorType type : {TensorType::F16, TensorType::BF16}) {
    std::vector<float> ours(all.size()), theirs(all.size());
    ASSERT_TRUE(dequantize(type, bytes, ours));
    oracle->to_float(id(type))(all.data(), theirs.data(), static_cast<int64_t>(all.size()));
    EXPECT_TRUE(test::same_floats(ours, theirs)) << type_name(type);
  }
}

// Types ggml has no to_float for: the plain conversions C++ defines.
TEST(QuantOracle, IntegerAndDoubleTypesWiden) {
  const std::vector<int64_t> ints = {0, 1, -1, 127, -128, 32767, -32768, 16777217, INT64_MAX, INT64_MIN};
  const std::vector<double> doubles = {0.0, -0.0, 1e-310, 3.5e38, 1e300, std::numeric_limits<double>::infinity(), 0.1};
  auto check = [&]<class T>(TensorType type, const std::vector<T>& values) {
    std::vector<float> out(values.size());
    ASSERT_TRUE(dequantize(type, std::as_bytes(std::span(values)), out));
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(values[i])) << type_name(type);
  };
  check(TensorType::I64, ints);
  check(TensorType::I32, std::vector<int32_t>{0, -1, 2147483647, -2147483647 - 1, 16777217});
  check(TensorType::I16, std::vector<int16_t>{0, -1, 32767, -32768});
  check(TensorType::I8, std::vector<int8_t>{0, -1, 127, -128});
  check(TensorType::F64, doubles);
}

// Rows to quantize: random ones of several distributions, and the edge cases.
std::vector<std::vector<float>> test_rows(int64_t n_per_row, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 24; ++r) {
    std::vector<float> row(static_cast<size_t>(n_per_row));
    const float scale = std::pow(10.0f, static_cast<float>(r % 8) - 4.0f);
    for (float& x : row) x = (r % 2 ? normal(rng) : uniform(rng)) * scale;
    rows.push_back(std::move(row));
  }
  const auto n = static_cast<size_t>(n_per_row);
  rows.push_back(std::vector<float>(n, 0.0f));
  rows.push_back(std::vector<float>(n, 0.75f));
  rows.push_back(std::vector<float>(n, -3.0f));
  std::vector<float> outlier(n, 0.01f);
  outlier[n / 3] = 1e4f;
  rows.push_back(outlier);
  std::vector<float> subnormal(n);
  for (size_t i = 0; i < n; ++i) subnormal[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 7) * (i % 2 ? -1.0f : 1.0f);
  rows.push_back(subnormal);
  std::vector<float> near_half_max(n);
  for (size_t i = 0; i < n; ++i) near_half_max[i] = (i % 3 == 0 ? 65504.0f : i % 3 == 1 ? -65519.0f : 60000.0f) * (uniform(rng) > 0 ? 1 : -1);
  rows.push_back(near_half_max);
  std::vector<float> tiny(n);
  for (size_t i = 0; i < n; ++i) tiny[i] = uniform(rng) * 1e-7f;
  rows.push_back(tiny);
  return rows;
}

void compare_quantize(const QuantOracle& oracle, TensorType type, const std::vector<float>& src, int64_t n_per_row,
                      const float* imatrix, const std::string& what) {
  const TypeTraits& t = type_traits(type);
  const int64_t nrows = static_cast<int64_t>(src.size()) / n_per_row;
  const size_t bytes = static_cast<size_t>(*row_size(type, n_per_row) * static_cast<uint64_t>(nrows));
  std::vector<std::byte> ours(bytes), theirs(bytes);
  const std::span<const float> im = imatrix ? std::span<const float>(imatrix, static_cast<size_t>(n_per_row))
                                            : std::span<const float>();
  ASSERT_TRUE(quantize(type, src, ours, n_per_row, im)) << what;
  oracle.quantize_chunk(id(type), src.data(), theirs.data(), nrows, n_per_row, imatrix);
  EXPECT_TRUE(same_bytes(ours, theirs, t.block_bytes)) << t.name << " " << what;
}

TEST(QuantOracle, QuantizeMatchesGgmlQuantizeChunk) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (TensorType type : kQuantizeTypes) {
    const QuantCapabilities caps = quant_capabilities(type);
    if (!caps.quantize) continue;
    const TypeTraits& t = type_traits(type);
    SCOPED_TRACE(std::string(t.name));
    for (int64_t n_per_row : {int64_t{t.block_size}, int64_t{512}, int64_t{4096}}) {
      if (n_per_row % t.block_size != 0) continue;
      std::vector<float> src;
      for (const auto& row : test_rows(n_per_row, 7 + id(type))) src.insert(src.end(), row.begin(), row.end());
      compare_quantize(*oracle, type, src, n_per_row, nullptr, "rows of " + std::to_string(n_per_row));
      if (caps.accepts_imatrix) {
        std::mt19937_64 rng(99);
        std::vector<float> imatrix(static_cast<size_t>(n_per_row));
        for (float& w : imatrix) w = std::uniform_real_distribution<float>(0.0f, 4.0f)(rng);
        compare_quantize(*oracle, type, src, n_per_row, imatrix.data(), "with an importance matrix");
      }
    }
  }
}

// The real tensors of the corpus (the f32 file holds them unquantized).
TEST(QuantOracle, QuantizeCorpusTensors) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_QUANT_ORACLE(oracle);
  auto file = GgufFile::open(*test::shared_dir() / "corpus/tiny-llama/tiny-llama-f32.gguf");
  ASSERT_TRUE(file) << file.error().describe();
  for (TensorType type : kQuantizeTypes) {
    if (!quant_capabilities(type).quantize) continue;
    const TypeTraits& t = type_traits(type);
    for (const TensorInfo& info : file->tensors()) {
      if (info.type != TensorType::F32 || info.ne[0] % t.block_size != 0) continue;
      std::vector<float> src(static_cast<size_t>(info.n_elements()));
      std::memcpy(src.data(), file->tensor_data(info).data(), src.size() * 4);
      compare_quantize(*oracle, type, src, info.ne[0], nullptr, std::string(info.name));
    }
  }
}

TEST(QuantOracle, HalfAndBfloat16EncodeEveryFloatPattern) {
  REQUIRE_QUANT_ORACLE(oracle);
  // Every 61st bit pattern: all exponents, signs, NaN payloads, subnormals and rounding cases.
  std::vector<float> src;
  src.reserve(1u << 26);
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 61) src.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  for (uint32_t tie = 0x38000000u; tie < 0x48000000u; tie += 0x1000u) src.push_back(std::bit_cast<float>(tie));  // half ties
  src.resize(src.size() / 64 * 64);
  for (TensorType type : {TensorType::F16, TensorType::BF16}) {
    if (!quant_capabilities(type).quantize) continue;
    compare_quantize(*oracle, type, src, 64, nullptr, "bit patterns");
  }
}

// Not a check: which of the types have kernels yet (shown in the test's output).
TEST(QuantOracle, TypeCoverage) {
  std::string missing_dequantize, missing_quantize;
  for (TensorType type : kDequantizeTypes) {
    if (!quant_capabilities(type).dequantize) missing_dequantize += " " + std::string(type_name(type));
  }
  for (TensorType type : kQuantizeTypes) {
    if (!quant_capabilities(type).quantize) missing_quantize += " " + std::string(type_name(type));
  }
  std::printf("no dequantize kernel yet:%s\nno quantize kernel yet:%s\n", missing_dequantize.c_str(),
              missing_quantize.c_str());
  // The float types are always there: the table itself works.
  EXPECT_TRUE(quant_capabilities(TensorType::F16).dequantize && quant_capabilities(TensorType::F16).quantize);
}

}  // namespace

namespace {

// Threads split the work into runs of whole blocks or rows: the bytes cannot depend on how many.
TEST(QuantThreads, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n_per_row = 512, rows = 300;
  std::vector<float> src(static_cast<size_t>(n_per_row * rows));
  for (float& x : src) x = normal(rng);
  for (const TypeTraits& t : all_type_traits()) {
    const QuantCapabilities caps = quant_capabilities(t.type());
    if (!caps.quantize || caps.requires_imatrix || n_per_row % t.block_size != 0) continue;
    SCOPED_TRACE(std::string(t.name));
    const size_t bytes = static_cast<size_t>(*row_size(t.type(), n_per_row)) * rows;
    std::vector<std::byte> one(bytes), many(bytes);
    ASSERT_TRUE(quantize(t.type(), src, one, n_per_row, {}, Threads{1}));
    ASSERT_TRUE(quantize(t.type(), src, many, n_per_row, {}, Threads{3}));
    EXPECT_TRUE(one == many);
    if (!caps.dequantize) continue;
    std::vector<float> a(src.size()), b(src.size());
    ASSERT_TRUE(dequantize(t.type(), one, a, Threads{1}));
    ASSERT_TRUE(dequantize(t.type(), one, b, Threads{0}));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  }
}

}  // namespace
