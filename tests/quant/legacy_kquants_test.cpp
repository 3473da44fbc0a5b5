// The legacy and k-quant kernels beyond the generic oracle test: q8_1 and q8_K (ggml has no
// to_float for them) decoded by their format, which types take an importance matrix, and
// quantization against ggml_quantize_chunk on rows aimed at the scale searches' corner cases
// (rounding ties, one-signed and sparse groups, huge values, zero weights, NaN and infinity).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant_compare.h"
#include "quant_oracle.h"

namespace {

using ggufkit::test::same_bytes;

using namespace ggufkit;

const std::vector<TensorType> kQuantizeTypes = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                                                TensorType::Q5_1, TensorType::Q1_0, TensorType::Q2_0, TensorType::Q6_K,
                                                TensorType::Q4_K, TensorType::Q5_K, TensorType::Q3_K, TensorType::Q2_K};

void put_u16(std::vector<std::byte>& out, uint16_t v) {
  out.push_back(std::byte(v & 0xFF));
  out.push_back(std::byte(v >> 8));
}

// q8_1: d (fp16), s (fp16, only for dot products), 32 int8; value = d * q.
TEST(LegacyKQuants, Q8_1DecodesByTheFormat) {
  struct Case {
    uint16_t d_bits;
    float d;
  };
  // Scales given by their bits and their value worked out by hand.
  const Case cases[] = {{0x3800, 0.5f}, {0xC000, -2.0f}, {0x0001, 0x1p-24f}, {0x7BFF, 65504.0f}, {0x0000, 0.0f}};
  std::vector<std::byte> bytes;
  std::vector<float> expected;
  int q = -128;
  for (const Case& c : cases) {
    put_u16(bytes, c.d_bits);
    put_u16(bytes, 0x5A5A);  // s does not take part in decoding
    for (int j = 0; j < 32; ++j, q = q == 127 ? -128 : q + 5) {
      bytes.push_back(std::byte(static_cast<uint8_t>(static_cast<int8_t>(q))));
      expected.push_back(c.d * static_cast<float>(static_cast<int8_t>(q)));
    }
  }
  std::vector<float> out(expected.size());
  ASSERT_TRUE(dequantize(TensorType::Q8_1, bytes, out));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], expected[i]) << i;

  // An infinite scale gives +-inf, or NaN for a zero quant.
  std::vector<std::byte> inf_block;
  put_u16(inf_block, 0x7C00);
  put_u16(inf_block, 0);
  for (int j = 0; j < 32; ++j) inf_block.push_back(std::byte(static_cast<uint8_t>(static_cast<int8_t>(j - 16))));
  std::vector<float> inf_out(32);
  ASSERT_TRUE(dequantize(TensorType::Q8_1, inf_block, inf_out));
  EXPECT_TRUE(std::isnan(inf_out[16]));
  EXPECT_EQ(inf_out[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(inf_out[31], std::numeric_limits<float>::infinity());
}

// q8_K: d (float32), 256 int8, 16 int16 block sums (only for dot products); value = d * q.
TEST(LegacyKQuants, Q8_KDecodesByTheFormat) {
  const float scales[] = {0.25f, -3.0e-5f, 1.0e30f, std::numeric_limits<float>::denorm_min()};
  std::vector<std::byte> bytes;
  std::vector<float> expected;
  for (float d : scales) {
    const auto bits = std::bit_cast<uint32_t>(d);
    for (int k = 0; k < 4; ++k) bytes.push_back(std::byte((bits >> (8 * k)) & 0xFF));
    for (int j = 0; j < 256; ++j) {
      const auto q = static_cast<int8_t>(j * 37 + 11);
      bytes.push_back(std::byte(static_cast<uint8_t>(q)));
      expected.push_back(d * static_cast<float>(q));
    }
    for (int j = 0; j < 32; ++j) bytes.push_back(std::byte(0xA5));
  }
  ASSERT_EQ(bytes.size(), 4u * 292u);
  std::vector<float> out(expected.size());
  ASSERT_TRUE(dequantize(TensorType::Q8_K, bytes, out));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

// accepts_imatrix follows whether ggml's quantize_<type> reads its quant_weights.
TEST(LegacyKQuants, ImportanceMatrixUseFollowsGgml) {
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K,
                       TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    EXPECT_TRUE(quant_capabilities(t).accepts_imatrix) << type_name(t);
  }
  for (TensorType t : {TensorType::Q8_0, TensorType::Q1_0, TensorType::Q2_0}) {
    EXPECT_TRUE(quant_capabilities(t).quantize) << type_name(t);
    EXPECT_FALSE(quant_capabilities(t).accepts_imatrix) << type_name(t);
  }
  for (TensorType t : kQuantizeTypes) EXPECT_FALSE(quant_capabilities(t).requires_imatrix) << type_name(t);
  for (TensorType t : {TensorType::Q8_1, TensorType::Q8_K}) {
    EXPECT_TRUE(quant_capabilities(t).dequantize) << type_name(t);
    EXPECT_FALSE(quant_capabilities(t).quantize) << type_name(t);
  }
}

constexpr int64_t kRow = 1024;  // a multiple of every block size here

// Rows aimed at the searches: each targets a branch or a tie-break.
std::vector<std::vector<float>> hard_rows(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> rows;
  auto row_of = [&](auto value_at) {
    std::vector<float> row(kRow);
    for (int64_t i = 0; i < kRow; ++i) row[static_cast<size_t>(i)] = value_at(i);
    rows.push_back(std::move(row));
  };
  row_of([&](int64_t) { return std::fabs(uniform(rng)) + 0.5f; });               // all positive: min clamps to 0
  row_of([&](int64_t) { return -std::fabs(normal(rng)) - 0.1f; });              // all negative
  row_of([&](int64_t) { return uniform(rng) > 0.8f ? normal(rng) : 0.0f; });     // sparse
  row_of([&](int64_t i) { return i % 37 == 5 ? normal(rng) * 10 : 0.0f; });      // one value per group or none
  row_of([&](int64_t) { return static_cast<float>(static_cast<int>(rng() % 16) - 8); });        // integer levels
  row_of([&](int64_t) { return (static_cast<float>(static_cast<int>(rng() % 16) - 8) + 0.5f) * 0.125f; });  // ties
  row_of([&](int64_t i) { return (i % 2 ? -1.0f : 1.0f) * (1.0f + 1e-3f * uniform(rng)); });     // +-1
  row_of([&](int64_t i) { return i % 16 == 0 ? -4.0f : i % 16 == 1 ? 4.0f : uniform(rng); });   // equal |max|
  row_of([&](int64_t) { return normal(rng) * 1e19f; });                          // x² overflows to inf
  row_of([&](int64_t) { return std::ldexp(uniform(rng), static_cast<int>(rng() % 60) - 30); });  // wide range
  row_of([&](int64_t) { return normal(rng) * normal(rng) * normal(rng); });     // heavy tails
  row_of([&](int64_t i) { return static_cast<float>(i % 256) / 255.0f; });       // ramps
  row_of([&](int64_t) { return 1e-20f * uniform(rng); });                        // below the group epsilon
  return rows;
}

std::vector<std::vector<float>> importance_matrices(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<std::vector<float>> out;
  auto matrix_of = [&](auto weight_at) {
    std::vector<float> m(kRow);
    for (float& w : m) w = weight_at();
    out.push_back(std::move(m));
  };
  matrix_of([&] { return uniform(rng) * 4.0f; });
  matrix_of([&] { return uniform(rng) < 0.3f ? 0.0f : uniform(rng); });        // some zero weights
  matrix_of([&] { return std::pow(10.0f, uniform(rng) * 12.0f - 6.0f); });     // huge dynamic range
  matrix_of([&] { return 0.0f; });                                             // no weight at all
  matrix_of([&] { return 1.0f; });
  return out;
}

void expect_quantize_like_ggml(const QuantOracle& oracle, TensorType type, const std::vector<float>& src,
                               const std::vector<float>& imatrix, const std::string& what) {
  const TypeTraits& t = type_traits(type);
  const size_t nrows = src.size() / kRow;
  const size_t bytes = nrows * static_cast<size_t>(*row_size(type, kRow));
  std::vector<std::byte> ours(bytes), theirs(bytes);
  ASSERT_TRUE(quantize(type, src, ours, kRow, imatrix)) << what;
  oracle.quantize_chunk(static_cast<uint32_t>(type), src.data(), theirs.data(), static_cast<int64_t>(nrows), kRow,
                        imatrix.empty() ? nullptr : imatrix.data());
  EXPECT_TRUE(same_bytes(ours, theirs, t.block_bytes)) << t.name << " " << what;
}

TEST(LegacyKQuants, HardRowsQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (TensorType type : kQuantizeTypes) {
    std::vector<float> src;
    for (const auto& row : hard_rows(31 + static_cast<uint64_t>(type))) src.insert(src.end(), row.begin(), row.end());
    expect_quantize_like_ggml(*oracle, type, src, {}, "without an importance matrix");
    if (!quant_capabilities(type).accepts_imatrix) continue;
    int k = 0;
    for (const auto& imatrix : importance_matrices(5)) {
      expect_quantize_like_ggml(*oracle, type, src, imatrix, "importance matrix " + std::to_string(k++));
    }
  }
}

// NaN and infinity are no valid weights, but ggml's output for them is deterministic; ours matches.
TEST(LegacyKQuants, NonFiniteRowsQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> src;
  for (float special : {nan, inf, -inf}) {
    for (int64_t i = 0; i < kRow; ++i) src.push_back(i % 97 == 3 ? special : normal(rng));
  }
  std::vector<float> imatrix(kRow, 1.0f);
  for (TensorType type : kQuantizeTypes) {
    expect_quantize_like_ggml(*oracle, type, src, {}, "non-finite values");
    if (quant_capabilities(type).accepts_imatrix) {
      expect_quantize_like_ggml(*oracle, type, src, imatrix, "non-finite values, importance matrix");
    }
  }
}

}  // namespace
