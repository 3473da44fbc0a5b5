// The IQ3 vector search (IQ3_S and IQ3_XXS share it, with their own rules) against
// ggml_quantize_chunk where lanes disagree: the AVX2 search runs the 8 sub-blocks of a super-block
// as lanes (and the neighbour searches several candidates per vector), so every super-block here
// mixes sub-blocks of different kinds: all-zero, subnormal and below ggml's 1e-8 threshold
// (inactive lanes), just above it, tiny, huge, exact rounding ties, single spikes, constants, odd
// counts of negative values (a magnitude searched as negative), and ordinary random values; rows
// of 1 to 9 super-blocks; with and without importance matrices (zeros, whole zero sub-blocks, wide
// dynamic range). Registered per instruction-set level like the other kernel tests, so the AVX2
// and portable paths both face ggml.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant_oracle.h"

namespace {

using namespace ggufkit;

constexpr int64_t kBlockValues = 256;

// Blocks of ours that differ from ggml's (0 when identical), with the first difference in *where.
size_t differing_blocks(TensorType type, const QuantOracle& oracle, const std::vector<float>& src,
                        int64_t n_per_row, const std::vector<float>& imatrix, std::string* where) {
  const size_t kBlockBytes = type_traits(type).block_bytes;
  const size_t nrows = src.size() / static_cast<size_t>(n_per_row);
  const size_t bytes = nrows * static_cast<size_t>(n_per_row / kBlockValues) * kBlockBytes;
  std::vector<std::byte> ours(bytes), theirs(bytes);
  EXPECT_TRUE(quantize(type, src, ours, n_per_row, imatrix).has_value());
  oracle.quantize_chunk(static_cast<uint32_t>(type), src.data(), theirs.data(), static_cast<int64_t>(nrows),
                        n_per_row, imatrix.empty() ? nullptr : imatrix.data());
  size_t differing = 0;
  for (size_t b = 0; b * kBlockBytes < bytes; ++b) {
    if (std::memcmp(ours.data() + b * kBlockBytes, theirs.data() + b * kBlockBytes, kBlockBytes) == 0) continue;
    if (differing++ == 0) *where = "first differing block " + std::to_string(b);
  }
  bool any_nonzero = false;
  for (std::byte v : ours) any_nonzero = any_nonzero || v != std::byte{0};
  EXPECT_TRUE(any_nonzero) << "the inputs should give some non-zero blocks";
  return differing;
}

// One sub-block of 32 values of the given kind.
void fill_sub_block(float* x, int kind, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float magnitude = std::pow(10.0f, uniform(rng) * 3.0f);
  for (int i = 0; i < 32; ++i) {
    float v = 0;
    switch (kind) {
      case 0: v = 0.0f; break;                                                        // inactive lane
      case 1: v = -0.0f; break;                                                       // inactive, negative zeros
      case 2: v = normal(rng) * 0.3e-8f; break;                                       // below 1e-8: inactive
      case 3: v = (1.0f + 0.5f * uniform(rng)) * (i % 5 ? 1.5e-8f : -1.5e-8f); break;  // just above 1e-8
      case 4: v = normal(rng) * 3e8f; break;  // huge, yet ggml's weighted errors stay finite
      case 5: v = static_cast<float>(static_cast<int>(rng() % 31) - 15) * magnitude; break;  // rounding ties
      case 6: v = i == static_cast<int>(rng() % 32) ? normal(rng) * magnitude : 0.0f; break;  // a spike or two
      case 7: v = magnitude; break;                                                   // constant
      case 8: v = static_cast<float>(2 * (rng() % 8) + 1) * (rng() & 1 ? 1.0f : -1.0f); break;  // grid levels
      case 9: v = (i % 8 == 3 ? -1.0f : 1.0f) * std::abs(normal(rng)) * magnitude; break;  // one negative per 8
      case 10: v = normal(rng) * 1e-41f; break;                                       // subnormal
      case 11: v = normal(rng) * 1e-30f; break;                                       // tiny
      default: v = normal(rng) * magnitude; break;
    }
    x[i] = v;
  }
}

// Super-blocks whose 8 sub-blocks take independent kinds (about one in three ordinary).
std::vector<float> mixed_rows(size_t blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(blocks * kBlockValues);
  for (size_t s = 0; s < blocks * 8; ++s) {
    const int kind = static_cast<int>(rng() % 16);
    fill_sub_block(x.data() + 32 * s, kind, rng);
  }
  return x;
}

std::vector<float> importance(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> w(n);
  for (float& v : w) {
    v = std::pow(10.0f, uniform(rng) * 8.0f - 4.0f);
    if (rng() % 6 == 0) v = 0.0f;
  }
  // A whole sub-block without weight: no candidate scale fits there.
  if (n >= 96) std::fill(w.begin() + 64, w.begin() + 96, 0.0f);
  return w;
}

class Iq3Simd : public ::testing::TestWithParam<TensorType> {};

// Rows of 1..9 super-blocks: fewer blocks than any vector width, and remainders of every size.
TEST_P(Iq3Simd, RowsOfOneToNineMixedBlocks) {
  REQUIRE_QUANT_ORACLE(oracle);
  const TensorType type = GetParam();
  for (int64_t blocks = 1; blocks <= 9; ++blocks) {
    SCOPED_TRACE("blocks per row " + std::to_string(blocks));
    const int64_t n_per_row = blocks * kBlockValues;
    const auto src = mixed_rows(static_cast<size_t>(3 * blocks), static_cast<uint64_t>(100 + blocks));
    std::string where;
    EXPECT_EQ(differing_blocks(type, *oracle, src, n_per_row, {}, &where), 0u) << where;
    const auto imatrix = importance(static_cast<size_t>(n_per_row), static_cast<uint64_t>(200 + blocks));
    EXPECT_EQ(differing_blocks(type, *oracle, src, n_per_row, imatrix, &where), 0u) << where << " (importance matrix)";
  }
}

// Many mixed super-blocks: every lane meets every kind of neighbour, many times.
TEST_P(Iq3Simd, ManyMixedBlocksWithAndWithoutImportance) {
  REQUIRE_QUANT_ORACLE(oracle);
  const TensorType type = GetParam();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int64_t n_per_row = 8 * kBlockValues;
    const auto src = mixed_rows(8 * 24, seed);
    std::string where;
    EXPECT_EQ(differing_blocks(type, *oracle, src, n_per_row, {}, &where), 0u) << where;
    EXPECT_EQ(differing_blocks(type, *oracle, src, n_per_row, importance(n_per_row, seed + 10), &where), 0u)
        << where << " (importance matrix)";
  }
}

// Ordinary data with a single active lane, or a single inactive one, at every position.
TEST_P(Iq3Simd, OneActiveOrOneInactiveLane) {
  REQUIRE_QUANT_ORACLE(oracle);
  const TensorType type = GetParam();
  std::mt19937_64 rng(7);
  std::vector<float> src(16 * kBlockValues);
  for (int block = 0; block < 16; ++block) {
    for (int sub = 0; sub < 8; ++sub) {
      const bool active = block < 8 ? sub == block : sub != block - 8;
      fill_sub_block(src.data() + block * kBlockValues + 32 * sub, active ? 15 : 0, rng);
    }
  }
  std::string where;
  EXPECT_EQ(differing_blocks(type, *oracle, src, kBlockValues, {}, &where), 0u) << where;
  EXPECT_EQ(differing_blocks(type, *oracle, src, kBlockValues, importance(kBlockValues, 8), &where), 0u)
      << where << " (importance matrix)";
}

std::string type_label(const ::testing::TestParamInfo<TensorType>& p) { return std::string(type_name(p.param)); }

INSTANTIATE_TEST_SUITE_P(Types, Iq3Simd, ::testing::Values(TensorType::IQ3_S, TensorType::IQ3_XXS), type_label);

}  // namespace
