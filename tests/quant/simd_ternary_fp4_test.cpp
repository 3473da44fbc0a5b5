// The vector quantizers of TQ1_0, TQ2_0, MXFP4 and NVFP4 (src/quant/ternary.cpp, fp4.cpp) against
// ggml, on the inputs where their shortcuts could part from ggml's scalar code: the ternary
// rounding threshold x / amax = +-0.5 and its neighbours, every base-3 byte, the E2M1 midpoints
// and their neighbours under every kind of scale, amax at and around powers of two (where the
// MXFP4 exponent comes from log2f), and rows where blocks taking the fast path sit between blocks
// that must fall back to the scalar code (NaN, infinities, huge values, tiny scales whose inverse
// overflows, clamped E4M3 scales). Registered for every instruction-set level (see CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant_oracle.h"

namespace {

using namespace ggufkit;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMax = std::numeric_limits<float>::max();
constexpr float kMinNormal = std::numeric_limits<float>::min();

const TensorType kTypes[] = {TensorType::TQ1_0, TensorType::TQ2_0, TensorType::MXFP4, TensorType::NVFP4};

uint32_t id(TensorType t) { return static_cast<uint32_t>(t); }

float next_up(float x) { return std::nextafter(x, kInf); }
float next_down(float x) { return std::nextafter(x, -kInf); }

// Quantizes with ggufkit and ggml and reports the first differing byte.
void expect_like_ggml(const QuantOracle& oracle, TensorType type, const std::vector<float>& src, int64_t n_per_row,
                      const std::string& what, const std::vector<float>& imatrix = {}) {
  const TypeTraits& t = type_traits(type);
  const int64_t nrows = static_cast<int64_t>(src.size()) / n_per_row;
  ASSERT_EQ(static_cast<size_t>(nrows * n_per_row), src.size());
  const size_t bytes = static_cast<size_t>(*row_size(type, n_per_row)) * static_cast<size_t>(nrows);
  std::vector<std::byte> ours(bytes, std::byte{0x5A}), theirs(bytes, std::byte{0xA5});
  ASSERT_TRUE(quantize(type, src, ours, n_per_row, imatrix)) << t.name << " " << what;
  ASSERT_EQ(oracle.quantize_chunk(id(type), src.data(), theirs.data(), nrows, n_per_row,
                                  imatrix.empty() ? nullptr : imatrix.data()),
            bytes);
  for (size_t i = 0; i < bytes; ++i) {
    if (ours[i] != theirs[i]) {
      ADD_FAILURE() << t.name << " " << what << ": first difference at byte " << i << " (block " << i / t.block_bytes
                    << ", offset " << i % t.block_bytes << "): ours " << int(ours[i]) << " ggml " << int(theirs[i]);
      return;
    }
  }
}

// The largest block size here (256); every row below is a multiple of it.
constexpr size_t kBlock = 256;

// A block of normal values with amax exactly `amax` (at a position that varies with the seed).
std::vector<float> normal_block(std::mt19937_64& rng, float amax) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> block(kBlock);
  for (float& x : block) x = uniform(rng) * amax;
  for (size_t s = 0; s < kBlock; s += 16) block[s + rng() % 16] = rng() % 2 ? amax : -amax;
  return block;
}

// One of many kinds of block, both fast-path and fallback ones for every type.
std::vector<float> block_of_kind(int kind, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30) * (1.0f + uniform(rng) * 0.5f);
  std::vector<float> block = normal_block(rng, scale);
  const size_t at = rng() % kBlock;
  switch (kind) {
    case 0: break;  // fast path everywhere
    case 1: block[at] = rng() % 2 ? kNaN : -kNaN; break;
    case 2: block[at] = rng() % 2 ? kInf : -kInf; break;
    case 3: block[kBlock - 1 - rng() % 3] = kNaN; break;  // NaN at the very end (ggml's MAX keeps it)
    case 4:
      for (float& x : block) x *= 1e30f;  // beyond the E4M3 clamp and the half range
      break;
    case 5:
      for (float& x : block) x = uniform(rng) * 1e-39f;  // subnormal amax: 1 / amax overflows
      break;
    case 6:
      for (float& x : block) x = uniform(rng) * 3e-38f;  // tiny normal amax; MXFP4 exponent wraps
      break;
    case 7: block.assign(kBlock, rng() % 2 ? 0.0f : -0.0f); break;
    case 8:
      for (float& x : block) x = uniform(rng) * kMax;
      break;
    case 9:  // one huge value among ordinary ones
      block[at] = rng() % 2 ? 1e35f : -3e38f;
      break;
    case 10:  // zero sub-blocks (E4M3 scale zero) next to normal ones
      for (size_t i = 0; i < kBlock; ++i) {
        if ((i / 16) % 3 == 0) block[i] = 0.0f;
      }
      break;
    default:  // values tiny enough for a zero E4M3 scale
      for (float& x : block) x = uniform(rng) * 1e-3f * scale;
      break;
  }
  return block;
}

constexpr int kBlockKinds = 12;

TEST(SimdTernaryFp4, TailsOfOneToManyBlocks) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(101);
  for (size_t blocks = 1; blocks <= 19; ++blocks) {
    std::vector<float> row;
    for (size_t b = 0; b < blocks; ++b) {
      const auto block = block_of_kind(static_cast<int>(b % kBlockKinds), rng);
      row.insert(row.end(), block.begin(), block.end());
    }
    for (TensorType type : kTypes) {
      expect_like_ggml(*oracle, type, row, static_cast<int64_t>(row.size()), std::to_string(blocks) + " blocks");
    }
  }
}

TEST(SimdTernaryFp4, FastAndFallbackBlocksMixed) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(202);
  std::vector<float> src;
  for (int b = 0; b < 600; ++b) {
    // Mostly fast-path blocks, with every other kind scattered among them.
    const int kind = rng() % 3 == 0 ? static_cast<int>(rng() % kBlockKinds) : 0;
    const auto block = block_of_kind(kind, rng);
    src.insert(src.end(), block.begin(), block.end());
  }
  std::vector<float> imatrix(2048);
  for (float& w : imatrix) w = std::uniform_real_distribution<float>(0.0f, 4.0f)(rng);
  for (TensorType type : kTypes) {
    expect_like_ggml(*oracle, type, src, 2048, "mixed blocks");
    // These types ignore an importance matrix, in ggml and here.
    expect_like_ggml(*oracle, type, src, 2048, "mixed blocks with an imatrix", imatrix);
  }
}

// x / amax at the trit threshold 0.5 and around it, for amax whose inverse is inexact.
TEST(SimdTernaryFp4, TernaryRoundingThreshold) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(303);
  std::vector<float> src;
  for (int b = 0; b < 96; ++b) {
    const float amax = b < 8 ? std::ldexp(1.0f, b - 4) : std::uniform_real_distribution<float>(0.1f, 100.0f)(rng);
    const float half = amax * 0.5f;
    const float candidates[] = {half,           next_up(half),   next_down(half),          next_up(next_up(half)),
                                next_down(next_down(half)), 0.0f, -0.0f, amax, next_down(amax), kMinNormal};
    std::vector<float> block(kBlock);
    for (size_t i = 0; i < kBlock; ++i) {
      const float v = candidates[rng() % std::size(candidates)];
      block[i] = rng() % 2 ? -v : v;
    }
    block[rng() % kBlock] = amax;
    src.insert(src.end(), block.begin(), block.end());
  }
  for (TensorType type : {TensorType::TQ1_0, TensorType::TQ2_0}) expect_like_ggml(*oracle, type, src, 1024, "trit thresholds");
}

// Every combination of five trits in each TQ1_0 byte position (and four in TQ2_0's).
TEST(SimdTernaryFp4, EveryBase3Byte) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::vector<float> src;
  for (int b = 0; b < 16; ++b) {
    std::vector<float> block(kBlock);
    for (int m = 0; m < 32; ++m) {  // bytes 0..31: x[m + 32 n]
      int code = (b * 32 + m) % 243;
      for (int n = 4; n >= 0; --n, code /= 3) block[static_cast<size_t>(m + 32 * n)] = static_cast<float>(code % 3 - 1);
    }
    for (int m = 0; m < 16; ++m) {  // bytes 32..47: x[160 + m + 16 n]
      int code = (b * 16 + m + 7) % 243;
      for (int n = 4; n >= 0; --n, code /= 3) block[static_cast<size_t>(160 + m + 16 * n)] = static_cast<float>(code % 3 - 1);
    }
    for (int j = 0; j < 4; ++j) {  // the four-trit bytes: x[240 + j + 4 m]
      int code = (b * 4 + j) % 81;
      for (int m = 3; m >= 0; --m, code /= 3) block[static_cast<size_t>(240 + j + 4 * m)] = static_cast<float>(code % 3 - 1);
    }
    const float scale = b % 2 ? 0.75f : 3.0f;
    for (float& x : block) x *= scale;
    src.insert(src.end(), block.begin(), block.end());
  }
  for (TensorType type : {TensorType::TQ1_0, TensorType::TQ2_0}) expect_like_ggml(*oracle, type, src, 512, "base-3 bytes");
}

// MXFP4: amax at, just under and just over powers of two over the whole float range (the exponent
// bits versus log2f), with values on the E2M1 midpoints of the block's scale and one ulp away.
TEST(SimdTernaryFp4, Mxfp4ExponentsAndMidpoints) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(404);
  const float midpoints[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> src;
  for (int k = -149; k <= 127; ++k) {
    const float power = std::ldexp(1.0f, k);
    const float near_next = k < 127 ? next_down(std::ldexp(1.0f, k + 1)) : kMax;
    const float mantissa_edges[] = {power, next_up(power), near_next, power * (1.0f + 1.0f / 4096.0f),
                                    power * (2.0f - 1.0f / 2048.0f), next_down(power * (2.0f - 1.0f / 2048.0f))};
    for (float amax : mantissa_edges) {
      // d as ggml derives it: 2^(floor(log2 amax) - 3), for the normal range.
      const int exponent = static_cast<int>(std::floor(std::log2(amax)));
      const float d = std::ldexp(1.0f, exponent - 3);
      std::vector<float> block(32);
      for (float& x : block) {
        float v = midpoints[rng() % std::size(midpoints)] * d;
        if (rng() % 3 == 0) v = rng() % 2 ? next_up(v) : next_down(v);
        x = rng() % 2 ? -v : v;
      }
      block[rng() % 32] = rng() % 2 ? amax : -amax;
      src.insert(src.end(), block.begin(), block.end());
    }
  }
  src.resize((src.size() + kBlock - 1) / kBlock * kBlock, 0.0f);  // pad, keeping the last blocks
  expect_like_ggml(*oracle, TensorType::MXFP4, src, static_cast<int64_t>(kBlock), "exponents and midpoints");
}

// NVFP4: sub-blocks whose amax / 6 lands on each E4M3 code and its rounding points, with values on
// the midpoints between levels of the resulting scale and one ulp away.
TEST(SimdTernaryFp4, Nvfp4ScalesAndMidpoints) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(505);
  const float midpoints[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> src;
  for (int code = 1; code < 0x7F; ++code) {
    const int exponent = code >> 3, mantissa = code & 7;
    const float value = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                      : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
    const float half_step = exponent == 0 ? std::ldexp(1.0f, -10) : std::ldexp(1.0f, exponent - 11);
    for (float sixth : {value, value + half_step, next_down(value + half_step), value - half_step}) {
      const float amax = sixth * 6.0f;
      const float d = value * 0.5f;  // roughly the scale the sub-block gets
      std::vector<float> sub(16);
      for (float& x : sub) {
        float v = midpoints[rng() % std::size(midpoints)] * d;
        if (rng() % 3 == 0) v = rng() % 2 ? next_up(v) : next_down(v);
        x = std::fabs(v) > amax ? amax : v;
        if (rng() % 2) x = -x;
      }
      sub[rng() % 16] = rng() % 2 ? amax : -amax;
      src.insert(src.end(), sub.begin(), sub.end());
    }
  }
  // Clamped scales (amax / 6 > 448) with values large enough for the scalar search.
  for (float amax : {6.0f * 448.0f, 6.0f * 449.0f, 3e8f, 1e12f, kMax}) {
    std::vector<float> sub(16);
    for (float& x : sub) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng) * amax;
    sub[3] = amax;
    src.insert(src.end(), sub.begin(), sub.end());
  }
  src.resize((src.size() + kBlock - 1) / kBlock * kBlock, 0.0f);  // pad, keeping the last blocks
  expect_like_ggml(*oracle, TensorType::NVFP4, src, static_cast<int64_t>(kBlock), "scales and midpoints");
}

// Many random rows of the kind quantization sees, through the thread split as well.
TEST(SimdTernaryFp4, RandomRowsAnyThreadCount) {
  REQUIRE_QUANT_ORACLE(oracle);
  std::mt19937_64 rng(606);
  std::student_t_distribution<float> heavy(2.5f);
  std::vector<float> src(4096 * 24);
  for (float& x : src) x = heavy(rng) * 0.02f;
  for (TensorType type : kTypes) {
    expect_like_ggml(*oracle, type, src, 4096, "heavy-tailed rows");
    const size_t bytes = static_cast<size_t>(*row_size(type, 4096)) * 24;
    std::vector<std::byte> one(bytes), many(bytes);
    ASSERT_TRUE(quantize(type, src, one, 4096, {}, Threads{1}));
    ASSERT_TRUE(quantize(type, src, many, 4096, {}, Threads{3}));
    EXPECT_TRUE(one == many) << type_traits(type).name;
  }
}

}  // namespace
