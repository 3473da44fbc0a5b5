// The vector quantizers of IQ4_NL and IQ4_XS against ggml_quantize_chunk. Their scale search holds
// a group's 16 candidate scales in lanes and finds each value's nearest level by comparing it with
// the 15 edges between levels instead of ggml's binary search, so the cases here aim at what that
// could change: values on and a few ulps around every edge (with the block's scale exactly 1 so the
// encoder sees them as written), groups whose largest magnitude appears twice with both signs,
// groups mixing NaN, infinities, huge and subnormal values with normal ones, values whose scaled
// level overflows, with and without importance matrices. Registered once per instruction-set level
// (see CMakeLists.txt), so the AVX-512, AVX2 and portable kernels all meet ggml.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
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
using ggufkit::test::expect_like_ggml;

using namespace ggufkit;

const TensorType kIq4Types[] = {TensorType::IQ4_NL, TensorType::IQ4_XS};
const int8_t kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float ulps_away(float x, int ulps) {  // x finite and nonzero, |ulps| small
  const auto bits = std::bit_cast<int32_t>(x);
  return std::bit_cast<float>(x > 0 ? bits + ulps : bits - ulps);
}

// Rows whose groups quantize with scale exactly 1: the even slots hold the 16 levels (weight 1,
// so the least-squares scale is 1 and IQ4_XS's d is -1/32 with group scales -32), the odd slots
// hold probes weighted 0 that the encoder maps with 1/scale = 1: every midpoint between two levels
// and the floats up to `reach` ulps either side of it.
struct ProbeRows {
  std::vector<float> values;
  std::vector<float> importance;  // one row's worth
};

ProbeRows edge_probes(int reach) {
  std::vector<float> probes;
  for (int k = 0; k < 15; ++k) {
    const float mid = 0.5f * static_cast<float>(kLevels[k] + kLevels[k + 1]);
    for (int u = -reach; u <= reach; ++u) probes.push_back(ulps_away(mid, u));
    probes.push_back(static_cast<float>(kLevels[k]));  // on a level: the binary search's "<" side
  }
  probes.push_back(static_cast<float>(kLevels[15]));
  ProbeRows rows;
  rows.importance.resize(256);
  for (size_t i = 0; i < 256; ++i) rows.importance[i] = i % 2 == 0 ? 1.0f : 0.0f;
  for (size_t start = 0; start < probes.size(); start += 128) {
    for (size_t i = 0; i < 256; ++i) {
      const size_t p = start + i / 2;
      rows.values.push_back(i % 2 == 0 ? static_cast<float>(kLevels[(i / 2) % 16])
                                       : probes[p < probes.size() ? p : probes.size() - 1]);
    }
  }
  return rows;
}

TEST(SimdIq4, ValuesAroundEveryLevelEdgeEncodeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (int reach : {0, 3, 40}) {
    const ProbeRows rows = edge_probes(reach);
    for (TensorType type : kIq4Types) {
      expect_like_ggml(*oracle, type, rows.values, 256, rows.importance,
                       "level edges +-" + std::to_string(reach) + " ulps");
    }
  }
}

// One group (32 values) of a given kind; the kinds aim at the scalar code's branches.
std::vector<float> group_of_kind(int kind, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(32);
  for (float& x : g) x = normal(rng);
  switch (kind) {
    case 0: break;                                              // plain
    case 1: g[5] = kNaN; break;                                 // one NaN
    case 2: g[0] = kNaN; g[31] = kNaN; break;                   // NaN at both ends
    case 3: g[9] = kInf; break;
    case 4: g[17] = -kInf; break;
    case 5: g[3] = 3e38f; break;                                // x*x overflows
    case 6: for (float& x : g) x *= 1e-41f; break;              // subnormal: x*x is 0
    case 7: for (float& x : g) x *= 1e-20f; break;              // weights underflow, max above eps
    case 8: for (float& x : g) x = 0.0f; break;                 // zero group
    case 9: for (float& x : g) x *= 1e-16f; break;              // under the zero-group threshold
    case 10: g[4] = -7.0f; g[20] = 7.0f; break;                 // largest magnitude twice: first wins
    case 11: g[4] = 7.0f; g[20] = -7.0f; break;
    case 12: g[0] = kNaN; g[1] = -7.0f; g[2] = 7.0f; break;
    case 13: for (float& x : g) x *= 1e30f; break;              // the level products overflow
    case 14: for (float& x : g) x = 0.25f; break;               // one constant
    case 15: for (float& x : g) x = x > 0 ? 0.0f : x; break;   // half zeros, one sign
    case 16: g[11] = 1e-45f; g[12] = -0.0f; break;              // smallest subnormal, signed zero
    default: for (float& x : g) x = std::ldexp(x, static_cast<int>(rng() % 60) - 30); break;  // wild magnitudes
  }
  return g;
}

constexpr int kGroupKinds = 18;

// Rows whose groups each hold a different kind, in changing orders, so that IQ4_XS super-blocks
// mix them and neighbouring IQ4_NL blocks differ.
std::vector<float> mixed_rows(int groups, std::mt19937_64& rng) {
  std::vector<float> src;
  for (int g = 0; g < groups; ++g) {
    const int kind = g < 2 * kGroupKinds ? g % kGroupKinds : static_cast<int>(rng() % kGroupKinds);
    const auto group = group_of_kind(kind, rng);
    src.insert(src.end(), group.begin(), group.end());
  }
  return src;
}

std::vector<std::vector<float>> importance_matrices(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(0.0f, 4.0f);
  std::vector<std::vector<float>> m;
  m.emplace_back();  // none
  std::vector<float> random(n), with_zeros(n), wide(n);
  for (size_t i = 0; i < n; ++i) {
    random[i] = uniform(rng);
    with_zeros[i] = i % 5 == 0 ? 0.0f : uniform(rng);
    wide[i] = std::ldexp(1.0f, static_cast<int>(i % 50) - 25);
  }
  m.push_back(random);
  m.push_back(with_zeros);
  m.push_back(wide);
  return m;
}

TEST(SimdIq4, GroupsMixingSpecialValuesQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(42);
  const int64_t n_per_row = 1024;  // 32 groups, 4 IQ4_XS super-blocks
  const auto src = mixed_rows(32 * 6, rng);
  const auto imatrices = importance_matrices(static_cast<size_t>(n_per_row), rng);
  for (TensorType type : kIq4Types) {
    for (size_t m = 0; m < imatrices.size(); ++m) {
      expect_like_ggml(*oracle, type, src, n_per_row, imatrices[m], "importance matrix " + std::to_string(m));
    }
  }
}

// Every kind alone in a row of one IQ4_NL block (and of one IQ4_XS super-block with 7 plain groups).
TEST(SimdIq4, EachSpecialGroupAloneQuantizesLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(5);
  for (int kind = 0; kind < kGroupKinds; ++kind) {
    const auto group = group_of_kind(kind, rng);
    expect_like_ggml(*oracle, TensorType::IQ4_NL, group, 32, {}, "kind " + std::to_string(kind));
    for (int at = 0; at < 8; at += 7) {
      std::vector<float> block;
      for (int g = 0; g < 8; ++g) {
        const auto part = g == at ? group : group_of_kind(0, rng);
        block.insert(block.end(), part.begin(), part.end());
      }
      expect_like_ggml(*oracle, TensorType::IQ4_XS, block, 256, {},
                       "kind " + std::to_string(kind) + " in group " + std::to_string(at));
    }
  }
}

// Rows of 1..9 IQ4_NL blocks and 1..3 IQ4_XS super-blocks of plain and heavy-tailed data.
TEST(SimdIq4, RowsOfSeveralLengthsQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(9);
  std::student_t_distribution<float> heavy(2.0f);
  for (int blocks = 1; blocks <= 9; ++blocks) {
    std::vector<float> src(static_cast<size_t>(32 * blocks * 3));
    for (float& x : src) x = 0.02f * heavy(rng);
    expect_like_ggml(*oracle, TensorType::IQ4_NL, src, 32 * blocks, {}, std::to_string(blocks) + " blocks");
  }
  for (int blocks = 1; blocks <= 3; ++blocks) {
    std::vector<float> src(static_cast<size_t>(256 * blocks * 2));
    for (float& x : src) x = 0.02f * heavy(rng);
    const auto imatrices = importance_matrices(static_cast<size_t>(256 * blocks), rng);
    for (size_t m = 0; m < imatrices.size(); ++m) {
      expect_like_ggml(*oracle, TensorType::IQ4_XS, src, 256 * blocks, imatrices[m],
                       std::to_string(blocks) + " super-blocks, importance matrix " + std::to_string(m));
      expect_like_ggml(*oracle, TensorType::IQ4_NL, src, 256 * blocks, imatrices[m],
                       std::to_string(blocks * 8) + " blocks, importance matrix " + std::to_string(m));
    }
  }
}

// Many random groups at many magnitudes: the candidate scales' sums and the choice among them.
TEST(SimdIq4, ManyRandomGroupsQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n_per_row = 2048;
  std::vector<float> src(static_cast<size_t>(n_per_row * 16));
  for (size_t i = 0; i < src.size(); ++i) {
    const int row = static_cast<int>(i / static_cast<size_t>(n_per_row));
    src[i] = std::ldexp(normal(rng), 3 * row - 24);
  }
  const auto imatrices = importance_matrices(static_cast<size_t>(n_per_row), rng);
  for (TensorType type : kIq4Types) {
    for (size_t m = 0; m < imatrices.size(); ++m) {
      expect_like_ggml(*oracle, type, src, n_per_row, imatrices[m], "importance matrix " + std::to_string(m));
    }
  }
}

}  // namespace
