// The IQ3 quantizers (IQ3_S and IQ3_XXS: one search, two grids and rule sets) against
// ggml_quantize_chunk on inputs aimed at their search: many random distributions (so that groups
// land off the grid and the neighbour order decides ties), groups of 8 with an odd number of
// negative values (IQ3_XXS flips the least important one), all-zero (ggml then writes the
// following sub-blocks one slot early in IQ3_S) and nearly-zero sub-blocks, exact rounding ties,
// sparse and constant sub-blocks, importance matrices with zeros, and several threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant_compare.h"
#include "quant_oracle.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;

constexpr int64_t kBlockValues = 256;

class Iq3Quantize : public ::testing::TestWithParam<TensorType> {
 protected:
  TensorType type() const { return GetParam(); }
  size_t block_bytes() const { return type_traits(GetParam()).block_bytes; }
};


// Runs first in this binary, so the grid lookup structures are built while several threads race
// for them.
TEST_P(Iq3Quantize, ConcurrentFirstUseMatchesGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  const int64_t n_per_row = 1024;
  const auto src = varied_rows(32 * n_per_row, 1);
  const auto q = quantize_both(*oracle, type(), src, n_per_row, {}, Threads{4});
  EXPECT_FALSE(all_zero(q.ours));
  EXPECT_TRUE(same_blocks(q));
}

TEST_P(Iq3Quantize, VariedSubBlocksMatchGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (uint64_t seed = 10; seed < 14; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int64_t n_per_row = 2048;
    const auto src = varied_rows(16 * n_per_row, seed);
    const auto plain = quantize_both(*oracle, type(), src, n_per_row, {});
    EXPECT_TRUE(same_blocks(plain)) << "without an importance matrix";
    const auto weighted = quantize_both(*oracle, type(), src, n_per_row, random_imatrix(n_per_row, seed, seed % 2 == 1));
    EXPECT_TRUE(same_blocks(weighted)) << "with an importance matrix";
    EXPECT_NE(plain.ours, weighted.ours) << "the importance matrix should change the choice somewhere";
  }
}

TEST_P(Iq3Quantize, TwoThreadsGiveTheSameBytes) {
  REQUIRE_QUANT_ORACLE(oracle);
  const int64_t n_per_row = 512;
  const auto src = varied_rows(64 * n_per_row, 5);
  const auto imatrix = random_imatrix(n_per_row, 6, true);
  const auto one = quantize_both(*oracle, type(), src, n_per_row, imatrix, Threads{1});
  const auto two = quantize_both(*oracle, type(), src, n_per_row, imatrix, Threads{2});
  EXPECT_EQ(one.ours, two.ours);
  EXPECT_TRUE(same_blocks(two));
}

// All-zero sub-blocks at every position, and sub-blocks just below and just above ggml's
// threshold (1e-8) for storing them as zero.
TEST_P(Iq3Quantize, ZeroAndNearlyZeroSubBlocksAtEveryPosition) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::vector<float> src = varied_rows(3 * 8 * kBlockValues, 20);
  for (size_t block = 0; block < 3 * 8; ++block) {
    const size_t sub_block = block % 8;
    float* x = src.data() + block * kBlockValues + 32 * sub_block;
    for (int i = 0; i < 32; ++i) {
      const float sign = i % 3 == 0 ? -1.0f : 1.0f;
      switch (block / 8) {
        case 0: x[i] = i % 2 ? 0.0f : -0.0f; break;
        case 1: x[i] = sign * 0.9e-8f * static_cast<float>(1 + i % 4) / 4.0f; break;  // below
        default: x[i] = sign * 2e-8f * static_cast<float>(1 + i % 4); break;           // above
      }
    }
  }
  const auto plain = quantize_both(*oracle, type(), src, kBlockValues, {});
  EXPECT_TRUE(same_blocks(plain));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, random_imatrix(kBlockValues, 21, true))));
  EXPECT_FALSE(all_zero(plain.ours));
}

// An all-zero sub-block is skipped without moving ggml's qs and sign cursors: every position of
// the zero sub-block must give ggml's bytes.
TEST_P(Iq3Quantize, ZeroSubBlocksAtEveryPosition) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::vector<float> src = varied_rows(9 * 8 * kBlockValues, 20);
  for (size_t block = 0; block < 9 * 8; ++block) {
    const size_t row_block = block % 9;  // 0..7: one zero sub-block there; 8: two of them
    float* x = src.data() + block * kBlockValues;
    if (row_block < 8) {
      std::fill(x + 32 * row_block, x + 32 * row_block + 32, 0.0f);
    } else {
      std::fill(x + 32 * (block % 7), x + 32 * (block % 7) + 32, 0.0f);
      std::fill(x + 32 * 7, x + 32 * 8, -0.0f);
    }
  }
  const auto plain = quantize_both(*oracle, type(), src, kBlockValues, {});
  EXPECT_TRUE(same_blocks(plain));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, random_imatrix(kBlockValues, 21, true))));
  EXPECT_FALSE(all_zero(plain.ours));
}

// Groups of 8 with an odd number of negative values: the one with the smallest weight * x² (the
// first of equal ones) changes sign. Equal magnitudes make the tie-break visible.
TEST_P(Iq3Quantize, OddNegativeCountsMatchGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(40);
  std::uniform_real_distribution<float> uniform(0.1f, 2.0f);
  std::vector<float> src(16 * kBlockValues);
  for (size_t group = 0; group < src.size() / 8; ++group) {
    float* x = src.data() + 8 * group;
    const int negatives = 1 + 2 * static_cast<int>(rng() % 4);  // 1, 3, 5 or 7
    const bool equal = group % 3 == 0;
    const float common = uniform(rng);
    for (int i = 0; i < 8; ++i) x[i] = equal ? common : uniform(rng);
    for (int i = 0; i < negatives; ++i) x[(rng() % 8)] *= -1.0f;  // may cancel: even counts too
  }
  std::vector<float> flat(kBlockValues, 1.0f);  // equal weights: ties decided by x² alone
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, {})));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, flat)));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, random_imatrix(kBlockValues, 41, true))));
}

// Degenerate sub-blocks: a single non-zero value, constants, tiny and huge magnitudes, and an
// importance matrix that is zero over whole sub-blocks (no candidate scale then fits).
TEST_P(Iq3Quantize, DegenerateSubBlocksMatchGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::vector<float> src;
  auto add_block = [&](auto value_at) {
    for (int i = 0; i < kBlockValues; ++i) src.push_back(value_at(i));
  };
  add_block([](int i) { return i == 37 ? 2.5f : 0.0f; });
  add_block([](int i) { return i == 37 ? -2.5f : 0.0f; });  // one negative: its own sign flips
  add_block([](int i) { return i % 32 == 0 ? -1.0f : 0.0f; });
  add_block([](int) { return 1.0f; });
  add_block([](int) { return -1.0f; });
  add_block([](int i) { return i % 2 ? -7.0f : 7.0f; });
  add_block([](int i) { return static_cast<float>(i % 16) * 1e-30f; });
  // Large, but not so large that ggml's weighted errors (about |x|^3) overflow: ggml aborts then.
  add_block([](int i) { return static_cast<float>(i % 16 - 8) * 1e9f; });
  add_block([](int i) { return static_cast<float>(i % 8) * 2.0f + 1.0f; });  // exactly the grid levels
  add_block([](int i) { return std::ldexp(1.0f, i % 24 - 12) * (i % 3 ? 1.0f : -1.0f); });
  std::vector<float> imatrix = random_imatrix(kBlockValues, 30, false);
  std::fill(imatrix.begin() + 64, imatrix.begin() + 96, 0.0f);
  std::fill(imatrix.begin() + 200, imatrix.end(), 0.0f);
  const auto plain = quantize_both(*oracle, type(), src, kBlockValues, {});
  EXPECT_TRUE(same_blocks(plain));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, imatrix)));
  std::vector<float> zero_imatrix(kBlockValues, 0.0f);
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, type(), src, kBlockValues, zero_imatrix)));
  if (type() == TensorType::IQ3_XXS) {
    const auto sixth = plain.ours.begin() + static_cast<std::ptrdiff_t>(block_bytes() * 6);
    EXPECT_TRUE(all_zero(std::vector<std::byte>(sixth, sixth + static_cast<std::ptrdiff_t>(block_bytes()))))
        << "values of 1e-30 are below ggml's threshold";
  }
}

TEST_P(Iq3Quantize, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<float> src(128, 1.0f);
  std::vector<std::byte> dst(block_bytes());
  EXPECT_FALSE(quantize(type(), src, dst, 128).has_value());
  EXPECT_TRUE(quant_capabilities(type()).quantize);
  EXPECT_TRUE(quant_capabilities(type()).accepts_imatrix);
  EXPECT_FALSE(quant_capabilities(type()).requires_imatrix);
}

std::string type_label(const ::testing::TestParamInfo<TensorType>& p) { return std::string(type_name(p.param)); }

INSTANTIATE_TEST_SUITE_P(Types, Iq3Quantize, ::testing::Values(TensorType::IQ3_S, TensorType::IQ3_XXS), type_label);

}  // namespace
