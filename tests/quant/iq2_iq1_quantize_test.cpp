// The IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M quantizers against ggml_quantize_chunk on inputs
// aimed at their searches: many random distributions per block (so that groups land off the grid
// and the neighbour order decides ties), rows of several lengths, importance matrices with zeros
// and magnitudes over six decades, all-zero, constant and sparse sub-blocks, and (for IQ2_S and
// IQ1_M, which allow it) no importance matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
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

struct TypeCase {
  TensorType type;
  const char* name;
  size_t block_bytes;
  int sub_block;  // values per sub-block scale
  bool requires_imatrix;
};

const TypeCase kTypes[] = {
    {TensorType::IQ2_XXS, "IQ2_XXS", 66, 32, true}, {TensorType::IQ2_XS, "IQ2_XS", 74, 16, true},
    {TensorType::IQ2_S, "IQ2_S", 82, 16, false},    {TensorType::IQ1_S, "IQ1_S", 50, 32, true},
    {TensorType::IQ1_M, "IQ1_M", 56, 16, false},
};

void PrintTo(const TypeCase& t, std::ostream* os) { *os << t.name; }

// Stretches of 16 values with their own distribution and magnitude, IQ1's levels among them.
std::vector<float> varied_rows(size_t n, uint64_t seed) {
  return ggufkit::test::varied_rows(n, seed, {16, 4.0f, 5, true});
}

// The first use of the type, so the grid lookup structures are built while several threads race
// for them.
void check_concurrent_first_use(const QuantOracle& oracle, const TypeCase& t) {
  const int64_t n_per_row = 1024;
  const auto src = varied_rows(32 * n_per_row, 1);
  const auto q = quantize_both(oracle, t.type, src, n_per_row, random_imatrix(n_per_row, 2, true), Threads{4});
  EXPECT_FALSE(all_zero(q.ours));
  EXPECT_TRUE(same_blocks(q));
}

void check_varied_blocks(const QuantOracle& oracle, const TypeCase& t) {
  const int64_t row_lengths[] = {256, 512, 1024, 2048, 4096};
  for (uint64_t seed = 10; seed < 20; ++seed) {
    const int64_t n_per_row = row_lengths[seed % 5];
    SCOPED_TRACE("seed " + std::to_string(seed) + ", rows of " + std::to_string(n_per_row));
    const auto src = varied_rows(static_cast<size_t>(65536 + n_per_row), seed);  // 256 blocks and a row
    const auto weighted =
        quantize_both(oracle, t.type, src, n_per_row, random_imatrix(static_cast<size_t>(n_per_row), seed, seed % 2 == 1));
    EXPECT_TRUE(same_blocks(weighted)) << "with an importance matrix";
    EXPECT_FALSE(all_zero(weighted.ours));
    if (!t.requires_imatrix) {
      const auto plain = quantize_both(oracle, t.type, src, n_per_row, {});
      EXPECT_TRUE(same_blocks(plain)) << "without an importance matrix";
      EXPECT_NE(plain.ours, weighted.ours) << "the importance matrix should change the choice somewhere";
    }
  }
}

// An all-zero sub-block at every position (and two of them, and a whole zero block).
void check_zero_sub_blocks(const QuantOracle& oracle, const TypeCase& t) {
  const int sub_blocks = static_cast<int>(kBlockValues) / t.sub_block;
  const size_t blocks = static_cast<size_t>(sub_blocks + 2) * 4;
  std::vector<float> src = varied_rows(blocks * kBlockValues, 20);
  for (size_t block = 0; block < blocks; ++block) {
    const int position = static_cast<int>(block % static_cast<size_t>(sub_blocks + 2));
    float* x = src.data() + block * kBlockValues;
    if (position < sub_blocks) {
      std::fill(x + t.sub_block * position, x + t.sub_block * (position + 1), 0.0f);
    } else if (position == sub_blocks) {
      std::fill(x + t.sub_block * static_cast<int>(block % 5), x + t.sub_block * static_cast<int>(block % 5 + 1), 0.0f);
      std::fill(x + kBlockValues - t.sub_block, x + kBlockValues, -0.0f);
    } else {
      std::fill(x, x + kBlockValues, 0.0f);
    }
  }
  const auto weighted = quantize_both(oracle, t.type, src, kBlockValues, random_imatrix(kBlockValues, 21, true));
  EXPECT_TRUE(same_blocks(weighted));
  EXPECT_FALSE(all_zero(weighted.ours));
  if (!t.requires_imatrix) {
    EXPECT_TRUE(same_blocks(quantize_both(oracle, t.type, src, kBlockValues, {})));
  }
}

// Degenerate blocks: a single non-zero value, constants, tiny and large magnitudes, values exactly
// on the levels, and an importance matrix that is zero over whole sub-blocks.
void check_degenerate_blocks(const QuantOracle& oracle, const TypeCase& t) {
  std::vector<float> src;
  auto add_block = [&](auto value_at) {
    for (int i = 0; i < kBlockValues; ++i) src.push_back(value_at(i));
  };
  add_block([](int i) { return i == 37 ? 2.5f : 0.0f; });
  add_block([](int i) { return i % 16 == 0 ? -1.0f : 0.0f; });
  add_block([](int) { return 1.0f; });
  add_block([](int) { return -3.0f; });
  add_block([](int i) { return i % 2 ? -7.0f : 7.0f; });
  add_block([](int i) { return static_cast<float>(i % 16) * 1e-30f; });
  add_block([](int i) { return static_cast<float>(i % 16 - 8) * 1e-9f; });
  // Large, but not so large that ggml's weighted errors overflow: ggml aborts then.
  add_block([](int i) { return static_cast<float>(i % 16 - 8) * 1e7f; });
  add_block([](int i) { return static_cast<float>(i % 3) * 2.0f + 1.0f; });           // exactly the IQ2 levels
  add_block([](int i) { return static_cast<float>(i % 3 - 1) + 0.125f; });           // IQ1's shifted levels
  add_block([](int i) { return std::ldexp(1.0f, i % 24 - 12) * (i % 3 ? 1.0f : -1.0f); });
  add_block([](int i) { return i < 128 ? 0.0f : static_cast<float>(i % 7) - 3.0f; });
  add_block([](int i) { return i % 8 == 3 ? -2.0f : 0.5f; });  // one negative per group of 8
  std::vector<float> imatrix = random_imatrix(kBlockValues, 30, false);
  std::fill(imatrix.begin() + 64, imatrix.begin() + 96, 0.0f);
  std::fill(imatrix.begin() + 200, imatrix.end(), 0.0f);
  const auto weighted = quantize_both(oracle, t.type, src, kBlockValues, imatrix);
  EXPECT_TRUE(same_blocks(weighted));
  const auto ones = quantize_both(oracle, t.type, src, kBlockValues, std::vector<float>(kBlockValues, 1.0f));
  EXPECT_TRUE(same_blocks(ones));
  if (!t.requires_imatrix) {
    EXPECT_TRUE(same_blocks(quantize_both(oracle, t.type, src, kBlockValues, {})));
  }
}

class Iq2Iq1Quantize : public ::testing::TestWithParam<TypeCase> {};

// Everything compared with ggml for one type.
void check_matches_ggml(const QuantOracle& oracle, const TypeCase& t) {
  SCOPED_TRACE(t.name);
  {
    SCOPED_TRACE("concurrent first use");
    check_concurrent_first_use(oracle, t);
  }
  {
    SCOPED_TRACE("varied blocks");
    check_varied_blocks(oracle, t);
  }
  {
    SCOPED_TRACE("zero sub-blocks");
    check_zero_sub_blocks(oracle, t);
  }
  {
    SCOPED_TRACE("degenerate blocks");
    check_degenerate_blocks(oracle, t);
  }
}

// One test per IQ2 type, and one for both IQ1 types: ggml builds its grid index in each process
// that quantizes (IQ2_XXS about 1 s, IQ2_XS 2 s, IQ2_S 4 s, and the one IQ1_S and IQ1_M share
// 10 s), and ctest runs every test in a process of its own.
class Iq2MatchesGgml : public ::testing::TestWithParam<TypeCase> {};

TEST_P(Iq2MatchesGgml, EveryCase) {
  REQUIRE_QUANT_ORACLE(oracle);
  check_matches_ggml(*oracle, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Types, Iq2MatchesGgml, ::testing::Values(kTypes[0], kTypes[1], kTypes[2]),
                         [](const ::testing::TestParamInfo<TypeCase>& param) { return std::string(param.param.name); });

TEST(Iq1MatchesGgml, BothTypesEveryCase) {
  REQUIRE_QUANT_ORACLE(oracle);
  check_matches_ggml(*oracle, kTypes[3]);
  check_matches_ggml(*oracle, kTypes[4]);
}

// Several threads give the bytes of one (the pool hands out 64 Ki values at a time: 384 rows of 512
// are three tasks).
TEST_P(Iq2Iq1Quantize, ThreadsGiveTheSameBytes) {
  const TypeCase& t = GetParam();
  const int64_t n_per_row = 512;
  const size_t rows = 384;
  const auto src = varied_rows(rows * n_per_row, 40);
  const auto imatrix = random_imatrix(n_per_row, 41, true);
  const size_t bytes = rows * 2 * t.block_bytes;
  std::vector<std::byte> one(bytes), two(bytes);
  ASSERT_TRUE(quantize(t.type, src, one, n_per_row, imatrix).has_value());
  ASSERT_TRUE(quantize(t.type, src, two, n_per_row, imatrix, Threads{2}).has_value());
  EXPECT_EQ(one, two);
  EXPECT_FALSE(all_zero(one));
}

TEST_P(Iq2Iq1Quantize, CapabilitiesAndRefusals) {
  const TypeCase& t = GetParam();
  const auto caps = quant_capabilities(t.type);
  EXPECT_TRUE(caps.quantize);
  EXPECT_TRUE(caps.dequantize);
  EXPECT_TRUE(caps.accepts_imatrix);
  EXPECT_EQ(caps.requires_imatrix, t.requires_imatrix);
  std::string why_not;
  if (const QuantOracle* oracle = QuantOracle::get(&why_not)) {
    EXPECT_EQ(oracle->requires_imatrix(static_cast<uint32_t>(t.type)), t.requires_imatrix) << "ggml disagrees";
  }
  std::vector<float> src(kBlockValues * 2, 1.0f);
  std::vector<std::byte> dst(2 * t.block_bytes);
  const auto without = quantize(t.type, src, dst, kBlockValues);
  EXPECT_EQ(without.has_value(), !t.requires_imatrix) << "an importance matrix is required exactly when ggml needs one";
  // Rows that are not whole blocks, and an importance matrix of the wrong length.
  std::vector<float> half_row(128, 1.0f);
  std::vector<std::byte> one_block(t.block_bytes);
  EXPECT_FALSE(quantize(t.type, half_row, one_block, 128, std::vector<float>(128, 1.0f)).has_value());
  EXPECT_FALSE(quantize(t.type, src, dst, kBlockValues, std::vector<float>(100, 1.0f)).has_value());
}

// Dequantizing what we wrote gives values near the input: the blocks are not merely ggml's bytes
// but a usable encoding.
TEST_P(Iq2Iq1Quantize, RoundTripIsClose) {
  const TypeCase& t = GetParam();
  std::mt19937_64 rng(50);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> src(16 * kBlockValues);
  for (float& v : src) v = normal(rng);
  std::vector<std::byte> bytes(16 * t.block_bytes);
  ASSERT_TRUE(quantize(t.type, src, bytes, kBlockValues, std::vector<float>(kBlockValues, 1.0f)).has_value());
  std::vector<float> back(src.size());
  ASSERT_TRUE(dequantize(t.type, bytes, back).has_value());
  double err = 0, norm = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    err += (back[i] - src[i]) * (back[i] - src[i]);
    norm += src[i] * src[i];
  }
  EXPECT_LT(err / norm, 0.5) << "relative squared error of a 1-2 bit encoding of Gaussian values";
}

INSTANTIATE_TEST_SUITE_P(Types, Iq2Iq1Quantize, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<TypeCase>& param) { return std::string(param.param.name); });

}  // namespace
