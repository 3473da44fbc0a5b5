// The IQ, FP4 and ternary kernels against ggml on the inputs the generic oracle test reaches only
// by chance: every value of the one-byte scales (E8M0, E4M3), special half scales where TQ1_0,
// TQ2_0 and IQ1_M keep them (not at the block start), rows with infinities, NaNs, huge and tiny
// values, exact rounding ties of each format, all-zero sub-blocks, and importance matrices with
// zeros. Plus round trips that need no oracle: values on a format's grid come back unchanged.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "float_compare.h"
#include "quant_oracle.h"

namespace {

using namespace ggufkit;

uint32_t id(TensorType t) { return static_cast<uint32_t>(t); }

const std::vector<TensorType> kDequantizeTypes = {
    TensorType::MXFP4,  TensorType::NVFP4,   TensorType::TQ1_0, TensorType::TQ2_0, TensorType::IQ4_NL,
    TensorType::IQ4_XS, TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
    TensorType::IQ3_S,  TensorType::IQ1_S,   TensorType::IQ1_M};
const std::vector<TensorType> kQuantizeTypes = {TensorType::MXFP4, TensorType::NVFP4,  TensorType::TQ1_0,
                                                TensorType::TQ2_0, TensorType::IQ4_NL, TensorType::IQ4_XS};

// Half scales worth checking: zeros, subnormals, the normal range ends, infinities, NaNs.
const std::vector<uint16_t> kSpecialHalves = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF,
                                              0x7C00, 0xFC00, 0x7C01, 0x7E00, 0xFE00, 0xFFFF, 0x7FFF, 0x8001};


void expect_dequantize_like_ggml(const QuantOracle& oracle, TensorType type, const std::vector<std::byte>& bytes) {
  const TypeTraits& t = type_traits(type);
  ASSERT_EQ(bytes.size() % t.block_bytes, 0u);
  const size_t n = bytes.size() / t.block_bytes * t.block_size;
  std::vector<float> ours(n), theirs(n);
  ASSERT_TRUE(dequantize(type, bytes, ours)) << t.name;
  oracle.to_float(id(type))(bytes.data(), theirs.data(), static_cast<int64_t>(n));
  EXPECT_TRUE(test::same_floats(ours, theirs)) << t.name;
}

std::vector<std::byte> random_blocks(const TypeTraits& t, size_t count, std::mt19937_64& rng) {
  std::vector<std::byte> bytes(t.block_bytes * count);
  for (auto& b : bytes) b = std::byte(rng() & 0xFF);
  return bytes;
}

void write_u16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Puts a half scale into an IQ1_M block: its four nibbles are the tops of the four scale words.
void set_iq1m_scale(std::byte* block, uint16_t half) {
  for (int k = 0; k < 4; ++k) {
    std::byte* word = block + 48 + 2 * k;
    uint16_t v;
    std::memcpy(&v, word, 2);
    v = static_cast<uint16_t>((v & 0x0FFF) | (((half >> (4 * k)) & 0xF) << 12));
    write_u16(word, v);
  }
}

TEST(IqFp4TernaryDequantize, EveryOneByteScale) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(11);
  const TypeTraits& mx = type_traits(TensorType::MXFP4);
  auto mx_bytes = random_blocks(mx, 256 * 4, rng);
  for (size_t b = 0; b < 256 * 4; ++b) mx_bytes[b * mx.block_bytes] = std::byte(b % 256);
  expect_dequantize_like_ggml(*oracle, TensorType::MXFP4, mx_bytes);

  const TypeTraits& nv = type_traits(TensorType::NVFP4);
  auto nv_bytes = random_blocks(nv, 256 * 4, rng);
  for (size_t b = 0; b < 256 * 4; ++b) {
    for (size_t s = 0; s < 4; ++s) nv_bytes[b * nv.block_bytes + s] = std::byte((b + 67 * s) % 256);
  }
  expect_dequantize_like_ggml(*oracle, TensorType::NVFP4, nv_bytes);
}

TEST(IqFp4TernaryDequantize, SpecialHalfScalesWhereverTheyAre) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(12);
  for (TensorType type : kDequantizeTypes) {
    if (type == TensorType::MXFP4 || type == TensorType::NVFP4) continue;
    const TypeTraits& t = type_traits(type);
    // Where the fp16 scale sits: at the end for the ternary types, scattered for IQ1_M.
    const size_t at = type == TensorType::TQ1_0 ? 52 : type == TensorType::TQ2_0 ? 64 : 0;
    const size_t per_scale = 8;
    auto bytes = random_blocks(t, kSpecialHalves.size() * per_scale, rng);
    for (size_t b = 0; b < kSpecialHalves.size() * per_scale; ++b) {
      std::byte* block = bytes.data() + b * t.block_bytes;
      if (type == TensorType::IQ1_M) {
        set_iq1m_scale(block, kSpecialHalves[b / per_scale]);
      } else {
        write_u16(block + at, kSpecialHalves[b / per_scale]);
      }
    }
    expect_dequantize_like_ggml(*oracle, type, bytes);
  }
}

// ------------------------------------------------------------------------------------------------

void expect_quantize_like_ggml(const QuantOracle& oracle, TensorType type, const std::vector<float>& src,
                               int64_t n_per_row, const std::vector<float>& imatrix, const std::string& what) {
  const TypeTraits& t = type_traits(type);
  const int64_t nrows = static_cast<int64_t>(src.size()) / n_per_row;
  const size_t bytes = static_cast<size_t>(*row_size(type, n_per_row)) * static_cast<size_t>(nrows);
  std::vector<std::byte> ours(bytes), theirs(bytes);
  ASSERT_TRUE(quantize(type, src, ours, n_per_row, imatrix)) << t.name << " " << what;
  oracle.quantize_chunk(id(type), src.data(), theirs.data(), nrows, n_per_row,
                        imatrix.empty() ? nullptr : imatrix.data());
  for (size_t i = 0; i < bytes; ++i) {
    if (ours[i] != theirs[i]) {
      ADD_FAILURE() << t.name << " " << what << ": first difference at byte " << i << " (block " << i / t.block_bytes
                    << ", offset " << i % t.block_bytes << "): ours " << int(ours[i]) << " ggml " << int(theirs[i]);
      return;
    }
  }
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows of 256 (a whole block of every type here) built to hit each format's special paths.
std::vector<std::vector<float>> special_rows() {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random_row = [&](float scale) {
    std::vector<float> row(256);
    for (float& x : row) x = normal(rng) * scale;
    return row;
  };
  std::vector<std::vector<float>> rows;
  // Non-finite values at the start, middle and end of a block (where the max-search sees them).
  for (float special : {kInf, -kInf, kNaN, -kNaN}) {
    for (size_t at : {size_t{0}, size_t{17}, size_t{255}}) {
      auto row = random_row(1.0f);
      row[at] = special;
      rows.push_back(row);
    }
  }
  // Magnitudes at and beyond the half and float limits, and at the bottom of the float range.
  for (float scale : {1e38f, 3e38f, 65504.0f, 65520.0f, 1e-38f, 1e-42f, 1e-30f, 1e-15f, 1e-8f}) rows.push_back(random_row(scale));
  rows.push_back(std::vector<float>(256, std::numeric_limits<float>::max()));
  rows.push_back(std::vector<float>(256, -std::numeric_limits<float>::denorm_min()));
  // Powers of two and the values half-way between E2M1 levels (and trit boundaries).
  {
    std::vector<float> row(256);
    const float levels[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f};
    for (size_t i = 0; i < row.size(); ++i) row[i] = levels[i % 15] * (i % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f, static_cast<int>(i % 7) - 3);
    rows.push_back(row);
  }
  {
    std::vector<float> row(256);
    for (size_t i = 0; i < row.size(); ++i) row[i] = (i % 4 == 0 ? 8.0f : 0.5f * 8.0f) * (i % 3 == 0 ? -1.0f : 1.0f);
    rows.push_back(row);  // amax a power of two; half of it (the TQ rounding tie)
  }
  // E4M3 scale boundaries: amax / 6 on and around the rounding points, the 448 clamp, subnormals.
  for (float amax : {6.0f * 448.0f, 6.0f * 480.0f, 6.0f * 0.0625f, 6.0f * 0.015625f, 6.0f * 0.001953125f,
                     6.0f * 0.0009765625f, 6.0f * 1.0625f, 6.0f * 1.1875f, 6.0f * 15.5f}) {
    auto row = random_row(amax / 4.0f);
    for (size_t i = 0; i < row.size(); i += 16) row[i] = i % 32 ? amax : -amax;
    rows.push_back(row);
  }
  // IQ4 groups: zero groups between non-zero ones, lone values, groups of one constant, and a
  // group just under and just over the "zero group" threshold.
  {
    auto row = random_row(1.0f);
    for (size_t i = 32; i < 96; ++i) row[i] = 0.0f;
    for (size_t i = 160; i < 192; ++i) row[i] = i == 170 ? -2.0f : 0.0f;
    for (size_t i = 192; i < 224; ++i) row[i] = 0.3f;
    for (size_t i = 224; i < 256; ++i) row[i] = i % 2 ? 9e-16f : -1.1e-15f;
    rows.push_back(row);
  }
  rows.push_back(std::vector<float>(256, 0.0f));
  rows.push_back(std::vector<float>(256, -0.0f));
  {
    std::vector<float> row(256, 0.0f);
    row[255] = -1.0f;
    rows.push_back(row);
  }
  {
    // Values on the kvalues_iq4nl levels and half-way between them.
    const int8_t levels[] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    std::vector<float> row(256);
    for (size_t i = 0; i < row.size(); ++i) {
      const size_t k = i % 15;
      row[i] = i % 2 ? static_cast<float>(levels[k]) : 0.5f * static_cast<float>(levels[k] + levels[k + 1]);
    }
    rows.push_back(row);
  }
  for (int r = 0; r < 8; ++r) rows.push_back(random_row(std::pow(10.0f, static_cast<float>(r) - 4.0f)));
  return rows;
}

std::vector<float> flatten(const std::vector<std::vector<float>>& rows) {
  std::vector<float> all;
  for (const auto& row : rows) all.insert(all.end(), row.begin(), row.end());
  return all;
}

TEST(IqFp4TernaryQuantize, SpecialRowsOneByOne) {
  REQUIRE_QUANT_ORACLE(oracle);
  const auto rows = special_rows();
  for (TensorType type : kQuantizeTypes) {
    for (size_t r = 0; r < rows.size(); ++r) {
      expect_quantize_like_ggml(*oracle, type, rows[r], 256, {}, "special row " + std::to_string(r));
    }
  }
}

// A row whose IQ4 scale comes out exactly 1 (IQ4_XS: d = -1/32, group scales -32), with the
// values half-way between two kvalues_iq4nl levels weighted zero: they then sit on exact ties of
// the nearest-level search. Returns the row and its importance matrix.
std::pair<std::vector<float>, std::vector<float>> iq4_level_ties() {
  const int8_t levels[] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<float> row(256), importance(256);
  for (size_t i = 0; i < row.size(); ++i) {
    const size_t k = i / 2;
    row[i] = i % 2 == 0 ? static_cast<float>(levels[k % 16]) : 0.5f * static_cast<float>(levels[k % 15] + levels[k % 15 + 1]);
    importance[i] = i % 2 == 0 ? 1.0f : 0.0f;
  }
  return {row, importance};
}

TEST(IqFp4TernaryQuantize, SpecialRowsWithImportanceMatrices) {
  REQUIRE_QUANT_ORACLE(oracle);
  const auto level_ties = iq4_level_ties();
  const auto src = flatten(special_rows());
  std::mt19937_64 rng(8);
  std::vector<std::vector<float>> imatrices;
  std::vector<float> with_zeros(256);
  for (size_t i = 0; i < with_zeros.size(); ++i) with_zeros[i] = i % 3 == 0 ? 0.0f : std::uniform_real_distribution<float>(0.0f, 10.0f)(rng);
  imatrices.push_back(with_zeros);
  imatrices.push_back(std::vector<float>(256, 0.0f));
  imatrices.push_back(std::vector<float>(256, 1.0f));
  std::vector<float> wide(256);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = std::ldexp(1.0f, static_cast<int>(i % 40) - 20);
  imatrices.push_back(wide);
  for (TensorType type : {TensorType::IQ4_NL, TensorType::IQ4_XS}) {
    ASSERT_TRUE(quant_capabilities(type).accepts_imatrix);
    expect_quantize_like_ggml(*oracle, type, level_ties.first, 256, level_ties.second, "exact ties between levels");
    for (size_t m = 0; m < imatrices.size(); ++m) {
      expect_quantize_like_ggml(*oracle, type, src, 256, imatrices[m], "importance matrix " + std::to_string(m));
    }
  }
}

// Longer rows: the importance matrix and the blocks must advance together along the row.
TEST(IqFp4TernaryQuantize, ManyRowsOfSeveralBlocks) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(21);
  std::student_t_distribution<float> heavy(3.0f);
  for (int64_t n_per_row : {int64_t{768}, int64_t{2048}}) {
    std::vector<float> src(static_cast<size_t>(n_per_row) * 16);
    for (float& x : src) x = heavy(rng) * 0.02f;
    std::vector<float> imatrix(static_cast<size_t>(n_per_row));
    for (float& w : imatrix) w = std::exponential_distribution<float>(1.0f)(rng);
    for (TensorType type : kQuantizeTypes) {
      expect_quantize_like_ggml(*oracle, type, src, n_per_row, {}, "rows of " + std::to_string(n_per_row));
      if (quant_capabilities(type).accepts_imatrix) {
        expect_quantize_like_ggml(*oracle, type, src, n_per_row, imatrix, "with imatrix, rows of " + std::to_string(n_per_row));
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Round trips that hold by the formats' definitions, independent of ggml.

std::vector<float> round_trip(TensorType type, const std::vector<float>& src) {
  std::vector<std::byte> bytes(static_cast<size_t>(*row_size(type, static_cast<int64_t>(src.size()))));
  EXPECT_TRUE(quantize(type, src, bytes, static_cast<int64_t>(src.size())));
  std::vector<float> back(src.size());
  EXPECT_TRUE(dequantize(type, bytes, back));
  return back;
}

TEST(IqFp4TernaryRoundTrip, TernaryValuesSurvive) {
  std::vector<float> src(512);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.375f * static_cast<float>(static_cast<int>(i * 7 % 3) - 1);
  for (TensorType type : {TensorType::TQ1_0, TensorType::TQ2_0}) {
    EXPECT_EQ(round_trip(type, src), src) << type_name(type);
  }
}

TEST(IqFp4TernaryRoundTrip, E2M1ValuesTimesAPowerOfTwoSurvive) {
  // Each 32-block (MXFP4) and 16-group (NVFP4) holds a 6, so the scale is exact.
  const float e2m1[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> src(256);
  for (size_t i = 0; i < src.size(); ++i) {
    const float v = i % 16 == 0 ? 6.0f : e2m1[i * 5 % 8];
    src[i] = v * (i % 3 == 0 ? -0.25f : 0.25f);
  }
  EXPECT_EQ(round_trip(TensorType::MXFP4, src), src);
  EXPECT_EQ(round_trip(TensorType::NVFP4, src), src);
}

TEST(IqFp4TernaryRoundTrip, Iq4nlLevelsSurvive) {
  // A group holding the table's levels times a half-representable scale: the least-squares scale
  // is that scale, and every value is a level.
  const int8_t levels[] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<float> src(256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.5f * static_cast<float>(levels[(i * 7) % 16]);
  EXPECT_EQ(round_trip(TensorType::IQ4_NL, src), src);
}

}  // namespace
