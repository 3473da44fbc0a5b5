// The IQ3_XXS quantizer against ggml_quantize_chunk on inputs aimed at its search: many random
// distributions (so that groups land off the grid and the neighbour order decides ties), groups of
// 8 with an odd number of negative values (ggml flips the least important one), all-zero and
// nearly-zero sub-blocks, exact rounding ties, sparse and constant sub-blocks, importance matrices
// with zeros, and several threads.
#include <gtest/gtest.h>

#include <algorithm>
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

constexpr TensorType kType = TensorType::IQ3_XXS;
constexpr int64_t kBlockValues = 256;
constexpr size_t kBlockBytes = 98;  // fp16 d, 64 grid indices, 8 x uint32 scales and signs

struct Quantized {
  std::vector<std::byte> ours, theirs;
};

Quantized quantize_both(const QuantOracle& oracle, const std::vector<float>& src, int64_t n_per_row,
                        const std::vector<float>& imatrix, Threads threads = {}) {
  const size_t nrows = src.size() / static_cast<size_t>(n_per_row);
  const size_t bytes = nrows * static_cast<size_t>(n_per_row / kBlockValues) * kBlockBytes;
  Quantized q{std::vector<std::byte>(bytes), std::vector<std::byte>(bytes)};
  const auto done = quantize(kType, src, q.ours, n_per_row, imatrix, threads);
  EXPECT_TRUE(done.has_value());
  oracle.quantize_chunk(static_cast<uint32_t>(kType), src.data(), q.theirs.data(), static_cast<int64_t>(nrows),
                        n_per_row, imatrix.empty() ? nullptr : imatrix.data());
  return q;
}

::testing::AssertionResult same_blocks(const Quantized& q) {
  size_t differing_blocks = 0;
  std::string first;
  for (size_t b = 0; b * kBlockBytes < q.ours.size(); ++b) {
    if (std::memcmp(q.ours.data() + b * kBlockBytes, q.theirs.data() + b * kBlockBytes, kBlockBytes) == 0) continue;
    if (differing_blocks++ == 0) {
      for (size_t i = 0; i < kBlockBytes; ++i) {
        if (q.ours[b * kBlockBytes + i] != q.theirs[b * kBlockBytes + i]) {
          first = "first at block " + std::to_string(b) + " byte " + std::to_string(i) + ": ours " +
                  std::to_string(int(q.ours[b * kBlockBytes + i])) + " ggml " +
                  std::to_string(int(q.theirs[b * kBlockBytes + i]));
          break;
        }
      }
    }
  }
  if (differing_blocks == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing_blocks << " of " << q.ours.size() / kBlockBytes
                                       << " blocks differ; " << first;
}

bool all_zero(const std::vector<std::byte>& bytes) {
  for (std::byte b : bytes) {
    if (b != std::byte{0}) return false;
  }
  return true;
}

// Each sub-block of 32 gets its own distribution and magnitude, so one block mixes easy and hard cases.
std::vector<float> varied_rows(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::exponential_distribution<float> exponential(1.0f);
  std::student_t_distribution<float> heavy(2.0f);
  std::vector<float> x(n);
  for (size_t start = 0; start < n; start += 32) {
    const float scale = std::pow(10.0f, uniform(rng) * 5.0f);
    const int kind = static_cast<int>(rng() % 6);
    for (size_t i = start; i < start + 32; ++i) {
      float v = 0;
      switch (kind) {
        case 0: v = normal(rng); break;
        case 1: v = uniform(rng); break;
        case 2: v = exponential(rng) * (rng() & 1 ? 1.0f : -1.0f); break;
        case 3: v = heavy(rng); break;
        case 4: v = static_cast<float>(static_cast<int>(rng() % 31) - 15); break;  // integers: rounding ties
        default: v = (rng() % 4 == 0) ? normal(rng) : 0.0f; break;               // sparse
      }
      x[i] = v * scale;
    }
  }
  return x;
}

std::vector<float> random_imatrix(size_t n, uint64_t seed, bool with_zeros) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> w(n);
  for (float& v : w) {
    v = std::pow(10.0f, uniform(rng) * 6.0f - 3.0f);
    if (with_zeros && rng() % 5 == 0) v = 0.0f;
  }
  return w;
}

// Runs first in this binary, so the grid lookup structures are built while several threads race
// for them.
TEST(Iq3xxsQuantize, ConcurrentFirstUseMatchesGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  const int64_t n_per_row = 1024;
  const auto src = varied_rows(32 * n_per_row, 1);
  const auto q = quantize_both(*oracle, src, n_per_row, {}, Threads{4});
  EXPECT_FALSE(all_zero(q.ours));
  EXPECT_TRUE(same_blocks(q));
}

TEST(Iq3xxsQuantize, VariedSubBlocksMatchGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (uint64_t seed = 10; seed < 14; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int64_t n_per_row = 2048;
    const auto src = varied_rows(16 * n_per_row, seed);
    const auto plain = quantize_both(*oracle, src, n_per_row, {});
    EXPECT_TRUE(same_blocks(plain)) << "without an importance matrix";
    const auto weighted = quantize_both(*oracle, src, n_per_row, random_imatrix(n_per_row, seed, seed % 2 == 1));
    EXPECT_TRUE(same_blocks(weighted)) << "with an importance matrix";
    EXPECT_NE(plain.ours, weighted.ours) << "the importance matrix should change the choice somewhere";
  }
}

TEST(Iq3xxsQuantize, TwoThreadsGiveTheSameBytes) {
  REQUIRE_QUANT_ORACLE(oracle);
  const int64_t n_per_row = 512;
  const auto src = varied_rows(64 * n_per_row, 5);
  const auto imatrix = random_imatrix(n_per_row, 6, true);
  const auto one = quantize_both(*oracle, src, n_per_row, imatrix, Threads{1});
  const auto two = quantize_both(*oracle, src, n_per_row, imatrix, Threads{2});
  EXPECT_EQ(one.ours, two.ours);
  EXPECT_TRUE(same_blocks(two));
}

// All-zero sub-blocks at every position, and sub-blocks just below and just above ggml's
// threshold (1e-8) for storing them as zero.
TEST(Iq3xxsQuantize, ZeroAndNearlyZeroSubBlocksAtEveryPosition) {
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
  const auto plain = quantize_both(*oracle, src, kBlockValues, {});
  EXPECT_TRUE(same_blocks(plain));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, src, kBlockValues, random_imatrix(kBlockValues, 21, true))));
  EXPECT_FALSE(all_zero(plain.ours));
}

// Groups of 8 with an odd number of negative values: the one with the smallest weight * x² (the
// first of equal ones) changes sign. Equal magnitudes make the tie-break visible.
TEST(Iq3xxsQuantize, OddNegativeCountsMatchGgml) {
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
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, src, kBlockValues, {})));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, src, kBlockValues, flat)));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, src, kBlockValues, random_imatrix(kBlockValues, 41, true))));
}

// Degenerate sub-blocks: a single non-zero value, constants, tiny and huge magnitudes, and an
// importance matrix that is zero over whole sub-blocks (no candidate scale then fits).
TEST(Iq3xxsQuantize, DegenerateSubBlocksMatchGgml) {
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
  const auto plain = quantize_both(*oracle, src, kBlockValues, {});
  EXPECT_TRUE(same_blocks(plain));
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, src, kBlockValues, imatrix)));
  std::vector<float> zero_imatrix(kBlockValues, 0.0f);
  EXPECT_TRUE(same_blocks(quantize_both(*oracle, src, kBlockValues, zero_imatrix)));
  EXPECT_TRUE(all_zero(std::vector<std::byte>(plain.ours.begin() + kBlockBytes * 6, plain.ours.begin() + kBlockBytes * 7)))
      << "values of 1e-30 are below ggml's threshold";
}

TEST(Iq3xxsQuantize, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<float> src(128, 1.0f);
  std::vector<std::byte> dst(kBlockBytes);
  EXPECT_FALSE(quantize(kType, src, dst, 128).has_value());
  EXPECT_TRUE(quant_capabilities(kType).quantize);
  EXPECT_TRUE(quant_capabilities(kType).accepts_imatrix);
  EXPECT_FALSE(quant_capabilities(kType).requires_imatrix);
}

}  // namespace
