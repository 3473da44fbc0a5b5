// Byte comparisons of ggufkit's quantizer output with ggml's, shared by the kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant_oracle.h"

namespace ggufkit::test {

// Equal bytes; otherwise how many differ and where the first three are (byte, block, offset).
inline ::testing::AssertionResult same_bytes(const std::vector<std::byte>& ours, const std::vector<std::byte>& theirs,
                                             size_t block_bytes) {
  if (ours.size() != theirs.size()) return ::testing::AssertionFailure() << "sizes differ";
  size_t diffs = 0;
  std::string first;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i] != theirs[i] && diffs++ < 3) {
      first += "\n  byte " + std::to_string(i) + " (block " + std::to_string(i / block_bytes) + ", offset " +
               std::to_string(i % block_bytes) + "): ours " + std::to_string(int(ours[i])) + " ggml " +
               std::to_string(int(theirs[i]));
    }
  }
  if (diffs == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diffs << " of " << ours.size() << " bytes differ:" << first;
}

// Quantizes src (rows of n_per_row) with ggufkit and with ggml and compares the bytes.
inline void expect_like_ggml(const QuantOracle& oracle, TensorType type, const std::vector<float>& src,
                             int64_t n_per_row, const std::vector<float>& imatrix, const std::string& what) {
  const TypeTraits& t = type_traits(type);
  const auto nrows = static_cast<int64_t>(src.size()) / n_per_row;
  const size_t bytes = static_cast<size_t>(nrows) * static_cast<size_t>(*row_size(type, n_per_row));
  std::vector<std::byte> ours(bytes, std::byte{0x5A}), theirs(bytes, std::byte{0xA5});
  ASSERT_TRUE(quantize(type, src, ours, n_per_row, imatrix)) << t.name << " " << what;
  oracle.quantize_chunk(static_cast<uint32_t>(type), src.data(), theirs.data(), nrows, n_per_row,
                        imatrix.empty() ? nullptr : imatrix.data());
  EXPECT_TRUE(same_bytes(ours, theirs, t.block_bytes)) << t.name << " " << what;
}

// ---- the grid-search quantizers (IQ1, IQ2, IQ3): whole blocks compared, the first difference named

struct QuantizedPair {
  TensorType type = TensorType::F32;
  std::vector<std::byte> ours, theirs;
};

// `src` (rows of n_per_row) quantized by ggufkit on `threads` threads and by ggml.
inline QuantizedPair quantize_both(const QuantOracle& oracle, TensorType type, const std::vector<float>& src,
                                   int64_t n_per_row, const std::vector<float>& imatrix, Threads threads = {}) {
  const size_t nrows = src.size() / static_cast<size_t>(n_per_row);
  const size_t bytes = nrows * static_cast<size_t>(*row_size(type, n_per_row));
  QuantizedPair q{type, std::vector<std::byte>(bytes), std::vector<std::byte>(bytes)};
  EXPECT_TRUE(quantize(type, src, q.ours, n_per_row, imatrix, threads).has_value());
  oracle.quantize_chunk(static_cast<uint32_t>(type), src.data(), q.theirs.data(), static_cast<int64_t>(nrows),
                        n_per_row, imatrix.empty() ? nullptr : imatrix.data());
  return q;
}

// Equal; otherwise how many blocks differ and the first differing byte.
inline ::testing::AssertionResult same_blocks(const QuantizedPair& q) {
  const size_t n = type_traits(q.type).block_bytes;
  size_t differing_blocks = 0;
  std::string first;
  for (size_t b = 0; b * n < q.ours.size(); ++b) {
    if (std::memcmp(q.ours.data() + b * n, q.theirs.data() + b * n, n) == 0) continue;
    if (differing_blocks++ == 0) {
      for (size_t i = 0; i < n; ++i) {
        if (q.ours[b * n + i] != q.theirs[b * n + i]) {
          first = "first at block " + std::to_string(b) + " byte " + std::to_string(i) + ": ours " +
                  std::to_string(int(q.ours[b * n + i])) + " ggml " + std::to_string(int(q.theirs[b * n + i]));
          break;
        }
      }
    }
  }
  if (differing_blocks == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing_blocks << " of " << q.ours.size() / n << " blocks differ; "
                                       << first;
}

inline bool all_zero(const std::vector<std::byte>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

// Rows whose stretches of values each get their own distribution and magnitude, so one block
// mixes easy and hard cases for the grid searches.
struct VariedRows {
  size_t stretch = 32;        // values sharing a distribution (a sub-block)
  float decades = 5.0f;       // magnitudes 10^[-decades, decades]
  int largest_integer = 15;   // the integer kind: -n..n (exact rounding ties)
  bool low_levels = false;    // two more kinds: -1/0/1 (IQ1's levels) and values of one sign
};
inline std::vector<float> varied_rows(size_t n, uint64_t seed, const VariedRows& shape = {}) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::exponential_distribution<float> exponential(1.0f);
  std::student_t_distribution<float> heavy(2.0f);
  const uint64_t kinds = shape.low_levels ? 8 : 6;
  const auto integers = static_cast<uint64_t>(2 * shape.largest_integer + 1);
  std::vector<float> x(n);
  for (size_t start = 0; start < n; start += shape.stretch) {
    const float scale = std::pow(10.0f, uniform(rng) * shape.decades);
    const auto kind = static_cast<int>(rng() % kinds);
    for (size_t i = start; i < start + shape.stretch && i < n; ++i) {
      float v = 0;
      switch (kind) {
        case 0: v = normal(rng); break;
        case 1: v = uniform(rng); break;
        case 2: v = exponential(rng) * (rng() & 1 ? 1.0f : -1.0f); break;
        case 3: v = heavy(rng); break;
        case 4: v = static_cast<float>(static_cast<int>(rng() % integers) - shape.largest_integer); break;
        case 5:
          if (shape.low_levels) {
            v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
          } else {
            v = (rng() % 4 == 0) ? normal(rng) : 0.0f;  // sparse
          }
          break;
        case 6: v = std::fabs(normal(rng)) + 0.5f; break;  // one sign (low_levels only)
        default: v = (rng() % 4 == 0) ? normal(rng) : 0.0f; break;  // sparse
      }
      x[i] = v * scale;
    }
  }
  return x;
}

// Importance weights over six decades, some zero when asked.
inline std::vector<float> random_imatrix(size_t n, uint64_t seed, bool with_zeros) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> w(n);
  for (float& v : w) {
    v = std::pow(10.0f, uniform(rng) * 6.0f - 3.0f);
    if (with_zeros && rng() % 5 == 0) v = 0.0f;
  }
  return w;
}

}  // namespace ggufkit::test
