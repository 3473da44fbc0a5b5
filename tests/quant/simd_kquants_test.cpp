// The k-quant quantizers (q2_K q3_K q4_K q5_K q6_K) against ggml_quantize_chunk, aimed at their
// lane-parallel scale searches (one sub-block per vector lane, up to two super-blocks per call):
// runs of super-blocks that leave lanes or a second super-block unused, and rows whose sub-blocks
// each hold a different corner case (NaN, infinities, huge, subnormal, signed zeros, one-signed,
// ties, flat groups) so that neighbouring lanes take different branches, with and without an
// importance matrix. Registered once per instruction-set level (see CMakeLists.txt).
#include <gtest/gtest.h>

#include <cfloat>
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

const TensorType kKQuants[] = {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                               TensorType::Q6_K};
constexpr int64_t kSuperBlock = 256;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> imatrix_for(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 4.0f);
  std::vector<float> w(static_cast<size_t>(n));
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 29 == 3 ? 0.0f : uniform(rng);  // some zero weights
  return w;
}

// 1 to 5 super-blocks: a batch of two super-blocks left half full, as one row and as rows of one.
TEST(SimdKQuants, TailsOfEveryLengthQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (TensorType type : kKQuants) {
    for (int64_t blocks = 1; blocks <= 5; ++blocks) {
      std::vector<float> src(static_cast<size_t>(blocks * kSuperBlock));
      for (float& x : src) x = normal(rng);
      const std::string what = std::to_string(blocks) + " super-blocks";
      expect_like_ggml(*oracle, type, src, blocks * kSuperBlock, {}, "one row of " + what);
      expect_like_ggml(*oracle, type, src, kSuperBlock, {}, "rows of one, " + what);
      expect_like_ggml(*oracle, type, src, blocks * kSuperBlock, imatrix_for(blocks * kSuperBlock, 5),
                       "imatrix, " + what);
    }
  }
}

// n values of a given kind, each aimed at a branch or tie-break of the scalar searches.
void fill_kind(int kind, float* x, int n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> position(0, n - 1);
  for (int i = 0; i < n; ++i) x[i] = normal(rng);
  switch (kind) {
    case 0: break;                                                      // plain
    case 1: for (int i = 0; i < n; ++i) x[i] = 0.0f; break;             // all zero: below the eps
    case 2: for (int i = 0; i < n; ++i) x[i] = -0.0f; break;
    case 3: x[position(rng)] = kNaN; break;                             // one NaN
    case 4: for (int i = 0; i < n; ++i) x[i] = kNaN; break;             // all NaN
    case 5: x[0] = kNaN; break;                                         // NaN first: min/max stay NaN
    case 6: x[position(rng)] = kInf; break;
    case 7: x[position(rng)] = -kInf; break;
    case 8: x[0] = kInf; x[n - 1] = -kInf; break;
    case 9: for (int i = 0; i < n; ++i) x[i] *= 1e37f; break;           // huge: sums overflow
    case 10: x[position(rng)] = FLT_MAX; x[position(rng)] = -FLT_MAX; break;
    case 11: for (int i = 0; i < n; ++i) x[i] *= 1e-40f; break;         // subnormal
    case 12: for (int i = 0; i < n; ++i) x[i] *= 1e-16f; break;         // around the eps
    case 13: for (int i = 0; i < n; ++i) x[i] = std::fabs(x[i]) + 1.0f; break;   // all positive: min > 0
    case 14: for (int i = 0; i < n; ++i) x[i] = -std::fabs(x[i]) - 1.0f; break;  // all negative
    case 15: for (int i = 0; i < n; ++i) x[i] = 1.5f; break;            // flat: max == min
    case 16: for (int i = 0; i < n; ++i) x[i] = -2.0f; break;           // flat negative
    case 17: for (int i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(rng() % 8) - 4); break;
    case 18: for (int i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(rng() % 63) - 31) * 0.5f; break;
    case 19: {  // equal magnitudes of both signs: the first one wins
      const float a = std::fabs(normal(rng)) + 4.0f;
      x[position(rng) / 2] = -a;
      x[n / 2 + position(rng) / 2] = a;
      break;
    }
    case 20: for (int i = 0; i < n; ++i) x[i] = i % 2 ? 0.0f : x[i]; break;      // sparse
    case 21: for (int i = 0; i < n; ++i) x[i] *= 1e19f; break;          // squares overflow
    case 22: for (int i = 0; i < n; ++i) x[i] = i == 5 ? 3.0f : 0.0f; break;     // one value
    case 23: for (int i = 0; i < n; ++i) x[i] *= 1e-3f; break;          // small beside big neighbours
    default: break;
  }
}
constexpr int kKinds = 24;

// Rows whose groups of `group` values each get their own kind: every kind in turn, then random.
std::vector<float> mixed_rows(int group, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> src(static_cast<size_t>(n));
  for (int64_t g = 0; g < n / group; ++g) {
    const int kind = g < kKinds ? static_cast<int>(g) : static_cast<int>(rng() % kKinds);
    fill_kind(kind, src.data() + g * group, group, rng);
  }
  return src;
}

TEST(SimdKQuants, MixedSubBlocksQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (TensorType type : kKQuants) {
    for (int group : {16, 32, 256}) {
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        // 4 rows of 1280 values: five super-blocks a row, so a half-used batch ends each row.
        const int64_t n_per_row = 5 * kSuperBlock;
        const auto src = mixed_rows(group, 4 * n_per_row, seed * 100 + static_cast<uint64_t>(group));
        const std::string what = "groups of " + std::to_string(group) + ", seed " + std::to_string(seed);
        expect_like_ggml(*oracle, type, src, n_per_row, {}, what);
        expect_like_ggml(*oracle, type, src, n_per_row, imatrix_for(n_per_row, seed), "imatrix, " + what);
      }
    }
  }
}

// Sub-blocks of very different sizes in one super-block: the 4- and 6-bit sub-block scales round
// to zero or saturate, and the requantization against stored scales takes over.
TEST(SimdKQuants, SubBlockScalesOfManyMagnitudesQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 6);
  std::vector<float> src(static_cast<size_t>(16 * kSuperBlock));
  for (size_t g = 0; g < src.size() / 16; ++g) {
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    const float shift = g % 3 == 0 ? magnitude * 2.0f : 0.0f;
    for (size_t i = 0; i < 16; ++i) src[16 * g + i] = normal(rng) * magnitude + shift;
  }
  for (TensorType type : kKQuants) {
    expect_like_ggml(*oracle, type, src, 4 * kSuperBlock, {}, "many magnitudes");
    expect_like_ggml(*oracle, type, src, 4 * kSuperBlock, imatrix_for(4 * kSuperBlock, 9), "imatrix, many magnitudes");
  }
}

}  // namespace
