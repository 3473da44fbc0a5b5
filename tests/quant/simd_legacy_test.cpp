// The vector quantizers of the legacy types (q4_0 q4_1 q5_0 q5_1 q8_0 q1_0 q2_0) and of f16 and
// bf16 against ggml_quantize_chunk: runs of blocks that do not fill the vector lanes, rows whose
// blocks each hold a different corner case (NaN, infinities, huge, subnormal, signed zeros, ties)
// so that neighbouring lanes take different paths, and 16-bit float conversions of the values
// where F16C or integer rounding could part from ggml's scalar code. Registered once per
// instruction-set level (see CMakeLists.txt), so the AVX-512, AVX2 and portable kernels all meet ggml.
#include <gtest/gtest.h>

#include <bit>
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

const TensorType kLegacyTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                   TensorType::Q8_0, TensorType::Q1_0, TensorType::Q2_0};
const TensorType kAllTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                                TensorType::Q1_0, TensorType::Q2_0, TensorType::F16,  TensorType::BF16};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// 1 to 33 blocks: every remainder of 8 and 16 lanes, as one row and as rows of one block.
TEST(SimdLegacy, TailsOfEveryLengthQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (TensorType type : kAllTypes) {
    const auto block = static_cast<int64_t>(type_traits(type).block_size);
    // 16-bit floats have one value per block: take runs that cover the 32-value groups.
    const int64_t unit = block == 1 ? 3 : block;
    for (int64_t blocks = 1; blocks <= 33; ++blocks) {
      std::vector<float> src(static_cast<size_t>(blocks * unit));
      for (float& x : src) x = normal(rng);
      expect_like_ggml(*oracle, type, src, blocks * unit, {}, "one row of " + std::to_string(blocks) + " units");
      expect_like_ggml(*oracle, type, src, unit, {}, std::to_string(blocks) + " rows of one unit");
    }
  }
}

// One block's worth of values of a given kind: each kind aims at a branch or a tie-break of the
// scalar reference that the vector code must reproduce.
std::vector<float> block_of_kind(int kind, int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> position(0, n - 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  auto at = [&](int64_t i) -> float& { return x[static_cast<size_t>(i)]; };
  switch (kind) {
    case 0: break;                                                   // plain
    case 1: for (float& v : x) v = 0.0f; break;                      // all +0
    case 2: for (float& v : x) v = -0.0f; break;                     // all -0
    case 3: for (int64_t i = 0; i < n; ++i) at(i) = i % 3 == 0 ? -0.0f : 0.0f; break;  // -0 first
    case 4: for (int64_t i = 0; i < n; ++i) at(i) = i % 3 == 1 ? -0.0f : 0.0f; break;  // +0 first
    case 5: at(position(rng)) = kNaN; break;                         // one NaN
    case 6: for (float& v : x) v = kNaN; break;                      // all NaN
    case 7: at(n - 1) = kNaN; break;                                 // NaN last (q8_0's MAX keeps it)
    case 8: at(0) = kNaN; break;                                     // NaN first
    case 9: at(position(rng)) = kInf; break;                         // +inf
    case 10: at(position(rng)) = -kInf; break;                       // -inf
    case 11: at(0) = kInf; at(n - 1) = -kInf; break;                 // both infinities
    case 12: for (float& v : x) v = kInf; break;                     // all +inf: max - min is NaN
    case 13: for (float& v : x) v *= 1e37f; break;                   // huge: scales overflow half
    case 14: at(position(rng)) = FLT_MAX; at(position(rng)) = -FLT_MAX; break;
    case 15: for (float& v : x) v *= 1e-40f; break;                  // float subnormals
    case 16: for (float& v : x) v *= 1e-7f; break;                   // half-subnormal scales
    case 17: {                                                       // equal magnitudes, -a first
      const float a = std::fabs(normal(rng)) + 4.0f;
      at(position(rng) / 2) = -a;
      at(n / 2 + position(rng) / 2) = a;
      break;
    }
    case 18: {                                                       // equal magnitudes, +a first
      const float a = std::fabs(normal(rng)) + 4.0f;
      at(position(rng) / 2) = a;
      at(n / 2 + position(rng) / 2) = -a;
      break;
    }
    case 19: for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 16) - 8); break;  // levels
    case 20: for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 255) - 127) * 0.5f; break;  // ties
    case 21: for (float& v : x) v = std::fabs(v) + 1.0f; break;      // all positive
    case 22: for (float& v : x) v = -std::fabs(v) - 1.0f; break;     // all negative
    case 23: for (int64_t i = 0; i < n; ++i) at(i) = i % 2 ? 0.0f : -std::fabs(at(i)); break;  // max is +0
    case 24: for (int64_t i = 0; i < n; ++i) at(i) = i % 2 ? -0.0f : std::fabs(at(i)); break;  // min is -0
    case 25: for (float& v : x) v = kNaN; at(position(rng)) = 2.5f; break;  // one number among NaN
    case 26: for (float& v : x) v = v * 1e19f; break;                // products overflow
    default: break;
  }
  return x;
}
constexpr int kKinds = 27;

std::vector<float> mixed_rows(int64_t block, int64_t blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> src;
  for (int64_t b = 0; b < blocks; ++b) {
    // Every kind once in order, then random kinds: lanes of one vector see different cases.
    const int kind = b < kKinds ? static_cast<int>(b) : static_cast<int>(rng() % kKinds);
    const auto x = block_of_kind(kind, block, rng);
    src.insert(src.end(), x.begin(), x.end());
  }
  return src;
}

TEST(SimdLegacy, MixedSpecialBlocksQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  for (TensorType type : kLegacyTypes) {
    const auto block = static_cast<int64_t>(type_traits(type).block_size);
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      // 8 rows of 1024 values, and an odd count of blocks in one row (lanes left over).
      const auto rows = mixed_rows(block, 8 * 1024 / block, seed);
      expect_like_ggml(*oracle, type, rows, 1024, {}, "mixed rows, seed " + std::to_string(seed));
      const int64_t odd_blocks = kKinds + 2 * static_cast<int64_t>(seed) + 1;
      const auto odd = mixed_rows(block, odd_blocks, seed + 100);
      expect_like_ggml(*oracle, type, odd, odd_blocks * block, {}, "odd row, seed " + std::to_string(seed));
    }
  }
}

TEST(SimdLegacy, MixedSpecialBlocksWithImportanceMatrixQuantizeLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  constexpr int64_t kRow = 1024;
  std::vector<std::vector<float>> matrices(3, std::vector<float>(kRow));
  for (float& w : matrices[0]) w = uniform(rng) * 4.0f;
  for (float& w : matrices[1]) w = uniform(rng) < 0.3f ? 0.0f : uniform(rng);
  for (float& w : matrices[2]) w = 1.0f;
  for (TensorType type : kLegacyTypes) {
    if (!quant_capabilities(type).accepts_imatrix) continue;
    const auto block = static_cast<int64_t>(type_traits(type).block_size);
    const auto rows = mixed_rows(block, 4 * kRow / block, 11);
    for (size_t m = 0; m < matrices.size(); ++m) {
      expect_like_ggml(*oracle, type, rows, kRow, matrices[m], "importance matrix " + std::to_string(m));
    }
  }
}

// Float bits that separate conversions: NaN payloads (quiet, signaling, negative), infinities,
// the half overflow threshold, rounding ties in both formats, half and float subnormals.
std::vector<float> special_float_values() {
  const uint32_t bits[] = {
      0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FC0FFFF, 0x7FFFE000, 0xFFFFFFFF,  // NaN
      0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,                                                  // inf, max
      0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0xC77FF000, 0x47800000,                          // 65504..65536
      0x38800000, 0x387FFFFF, 0x33800000, 0x33800001, 0x337FFFFF, 0x33000000, 0x33000001, 0xB3800000,  // half subnormals
      0x3F801000, 0x3F803000, 0x3F800FFF, 0x3F801001,                                                  // half ties
      0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7F8000, 0x7F7F7FFF, 0xBF818000,              // bf16 ties
      0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x00000000, 0x80000000, 0x3F800000, 0xBF800000,
  };
  std::vector<float> v;
  for (uint32_t b : bits) v.push_back(std::bit_cast<float>(b));
  return v;
}

// The special values scattered through normal ones at every offset of a 32-value group, so that
// some groups hold NaN and others not, followed by runs of special values only.
TEST(SimdLegacy, SixteenBitFloatsConvertLikeGgml) {
  REQUIRE_QUANT_ORACLE(oracle);
  const auto specials = special_float_values();
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> src;
  for (size_t s = 0; s < specials.size(); ++s) {
    for (int k = 0; k < 37; ++k) src.push_back(k == static_cast<int>(s % 37) ? specials[s] : normal(rng) * 100.0f);
  }
  for (int repeat = 0; repeat < 3; ++repeat) src.insert(src.end(), specials.begin(), specials.end());
  // Random bit patterns cover the whole range, NaN included.
  for (int i = 0; i < 4096; ++i) src.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  // Every rounding position around 1.0 for both formats.
  for (uint32_t low = 0; low < 0x10000; low += 0x101) src.push_back(std::bit_cast<float>(0x3F800000u + low));
  for (TensorType type : {TensorType::F16, TensorType::BF16}) {
    expect_like_ggml(*oracle, type, src, static_cast<int64_t>(src.size()), {}, "special values, one row");
    const std::vector<float> head(src.begin(), src.begin() + 37 * 13);
    expect_like_ggml(*oracle, type, head, 37, {}, "rows of 37");
  }
}

}  // namespace
